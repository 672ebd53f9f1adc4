//! Memory policies: set_mempolicy (calling thread), mbind (a range of this process), get_mempolicy
//! (of the thread, of an address, the node of an address, the allowed nodes), and which modes the
//! running kernel knows, found by trying them rather than assumed from its version.
//!
//! Policies apply to the calling thread (set_mempolicy) or to this process's own mappings (mbind):
//! the kernel offers no way to set another process's policy. For another process, move its pages.

use numaff_machine::CpuSet;

use crate::error::{LinuxError, Op, Result, SysError, Target};
use crate::mpol::{self, no_node_error, node_mask};

/// A memory policy mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mode {
    /// MPOL_DEFAULT: the thread's policy (for a range) or local allocation (for a thread). No nodes.
    Default,
    /// MPOL_PREFERRED: one node first, others when it is full.
    Preferred,
    /// MPOL_BIND: only these nodes.
    Bind,
    /// MPOL_INTERLEAVE: page by page round-robin over these nodes.
    Interleave,
    /// MPOL_LOCAL: the node of the allocating cpu. No nodes.
    Local,
    /// MPOL_PREFERRED_MANY (Linux 5.15): any of these nodes first, others when they are full.
    PreferredMany,
    /// MPOL_WEIGHTED_INTERLEAVE (Linux 6.9): interleave with per-node weights from sysfs.
    WeightedInterleave,
}

impl Mode {
    /// Every mode numaff knows, in kernel order.
    pub const ALL: [Mode; 7] = [
        Mode::Default,
        Mode::Preferred,
        Mode::Bind,
        Mode::Interleave,
        Mode::Local,
        Mode::PreferredMany,
        Mode::WeightedInterleave,
    ];

    /// The kernel's number for the mode.
    pub fn raw(self) -> i32 {
        match self {
            Mode::Default => mpol::MPOL_DEFAULT,
            Mode::Preferred => mpol::MPOL_PREFERRED,
            Mode::Bind => mpol::MPOL_BIND,
            Mode::Interleave => mpol::MPOL_INTERLEAVE,
            Mode::Local => mpol::MPOL_LOCAL,
            Mode::PreferredMany => mpol::MPOL_PREFERRED_MANY,
            Mode::WeightedInterleave => mpol::MPOL_WEIGHTED_INTERLEAVE,
        }
    }

    /// The mode of a kernel number (mode flags removed), if known.
    pub fn from_raw(v: i32) -> Option<Mode> {
        Mode::ALL
            .into_iter()
            .find(|m| m.raw() == v & !mpol::MPOL_MODE_FLAGS)
    }

    /// Whether the mode takes a node set (DEFAULT and LOCAL take none).
    pub fn takes_nodes(self) -> bool {
        !matches!(self, Mode::Default | Mode::Local)
    }

    /// The name numa_maps and numactl use.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Default => "default",
            Mode::Preferred => "preferred",
            Mode::Bind => "bind",
            Mode::Interleave => "interleave",
            Mode::Local => "local",
            Mode::PreferredMany => "prefer (many)",
            Mode::WeightedInterleave => "weighted interleave",
        }
    }
}

/// A policy as get_mempolicy reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// The mode, or None for a number this numaff does not know (see `raw_mode`).
    pub mode: Option<Mode>,
    /// The kernel's number for the mode, mode flags removed.
    pub raw_mode: i32,
    /// Mode flags (MPOL_F_STATIC_NODES, MPOL_F_RELATIVE_NODES, MPOL_F_NUMA_BALANCING).
    pub flags: i32,
    /// The policy's nodes (empty for DEFAULT and LOCAL).
    pub nodes: CpuSet,
}

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

fn self_thread() -> Target {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
    Target::Tid {
        pid: Some(std::process::id() as i32),
        tid,
    }
}

fn self_pid() -> Target {
    Target::Pid(std::process::id() as i32)
}

fn refused(op: Op, target: Target, nodes: &CpuSet, errno: i32) -> LinuxError {
    if errno == libc::EINVAL {
        if let Some(e) = no_node_error(op, &target, nodes, errno) {
            return e;
        }
    }
    SysError::new(op, target, errno).into()
}

/// Sets the calling thread's policy: `mode` with mode flags `flags` (MPOL_F_STATIC_NODES, ...; 0 for
/// none) over `nodes` (empty for DEFAULT and LOCAL). It applies to this thread's future allocations.
pub fn set_thread_policy(mode: Mode, flags: i32, nodes: &CpuSet) -> Result<()> {
    let (mask, maxnode) = node_mask(nodes);
    let ptr = if mask.is_empty() {
        std::ptr::null()
    } else {
        mask.as_ptr()
    };
    // SAFETY: `ptr` is NULL or points to mask.len() words, which maxnode - 1 bits span; read only.
    let r = unsafe {
        libc::syscall(
            libc::SYS_set_mempolicy,
            (mode.raw() | flags) as libc::c_int,
            ptr,
            maxnode,
        )
    };
    if r < 0 {
        return Err(refused(Op::SetMempolicy, self_thread(), nodes, errno()));
    }
    Ok(())
}

/// Sets the policy of the range [addr, addr + len) of this process (`addr` page-aligned) with mbind:
/// `mode` with mode flags `flags` over `nodes`, and `mf` any of MPOL_MF_STRICT (fail with EIO if
/// existing pages do not follow it), MPOL_MF_MOVE (move existing pages of this process to follow it),
/// MPOL_MF_MOVE_ALL (shared ones too; CAP_SYS_NICE).
pub fn mbind(addr: u64, len: u64, mode: Mode, flags: i32, nodes: &CpuSet, mf: u32) -> Result<()> {
    let (mask, maxnode) = node_mask(nodes);
    let ptr = if mask.is_empty() {
        std::ptr::null()
    } else {
        mask.as_ptr()
    };
    // SAFETY: mbind changes the policy of (and may move pages of) this process's range; it does not
    // change page contents. `ptr` is NULL or mask.len() words, which maxnode - 1 bits span.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mbind,
            addr as libc::c_ulong,
            len as libc::c_ulong,
            (mode.raw() | flags) as libc::c_int,
            ptr,
            maxnode,
            mf as libc::c_uint,
        )
    };
    if r < 0 {
        return Err(refused(Op::Mbind, self_pid(), nodes, errno()));
    }
    Ok(())
}

/// One get_mempolicy call with a mask buffer grown until the kernel accepts it: (value, nodes).
fn get_raw(addr: u64, flags: libc::c_ulong, target: Target) -> Result<(i32, CpuSet)> {
    let mut words = mpol::FIRST_MASK_WORDS;
    loop {
        let mut mode: libc::c_int = 0;
        let mut mask: Vec<libc::c_ulong> = vec![0; words];
        // SAFETY: `mode` is one int and `mask` holds `words` words; with maxnode = 64 words + 1 the
        // kernel writes at most `words` words (see crate::mpol).
        let r = unsafe {
            libc::syscall(
                libc::SYS_get_mempolicy,
                &mut mode as *mut libc::c_int,
                mask.as_mut_ptr(),
                mpol::maxnode_for_words(words),
                addr as libc::c_ulong,
                flags,
            )
        };
        if r >= 0 {
            return Ok((mode, mpol::nodes_of_mask(&mask)));
        }
        let e = errno();
        if e == libc::EINVAL && mpol::can_grow(words) {
            words *= 2;
            continue;
        }
        return Err(SysError::new(Op::GetMempolicy, target, e).into());
    }
}

fn policy_of(v: i32, nodes: CpuSet) -> Policy {
    let raw_mode = v & !mpol::MPOL_MODE_FLAGS;
    Policy {
        mode: Mode::from_raw(raw_mode),
        raw_mode,
        flags: v & mpol::MPOL_MODE_FLAGS,
        nodes,
    }
}

/// The calling thread's policy.
pub fn thread_policy() -> Result<Policy> {
    let (v, nodes) = get_raw(0, 0, self_thread())?;
    Ok(policy_of(v, nodes))
}

/// The policy of the mapping of this process that holds `addr` (DEFAULT if it has none of its own).
pub fn policy_at(addr: u64) -> Result<Policy> {
    let (v, nodes) = get_raw(addr, mpol::MPOL_F_ADDR, self_pid())?;
    Ok(policy_of(v, nodes))
}

/// The node of the page at `addr` in this process (get_mempolicy with MPOL_F_NODE | MPOL_F_ADDR).
///
/// Beware: the kernel faults the page in to answer, so an untouched anonymous page becomes the
/// shared zero page and the answer is that page's node. To ask without touching, and for other
/// processes, use [`crate::pages::query`].
pub fn node_of(addr: u64) -> Result<u32> {
    let (v, _) = get_raw(addr, mpol::MPOL_F_NODE | mpol::MPOL_F_ADDR, self_pid())?;
    Ok(v as u32)
}

/// The nodes the calling thread may allocate on (its cpuset's mems; MPOL_F_MEMS_ALLOWED).
pub fn allowed_nodes() -> Result<CpuSet> {
    Ok(get_raw(0, mpol::MPOL_F_MEMS_ALLOWED, self_thread())?.1)
}

/// The modes the running kernel accepts, found by setting each, with one allowed node where the
/// mode takes nodes, as the policy of a short-lived thread of this process (so no thread that
/// allocates real data runs under a probe policy, and nothing needs restoring). EINVAL means the
/// kernel does not know the mode; any other refusal is an error.
pub fn supported_modes() -> Result<Vec<Mode>> {
    let probe = std::thread::Builder::new()
        .name("numaff-mpol".into())
        .spawn(|| -> Result<Vec<Mode>> {
            let allowed = allowed_nodes()?;
            let one: CpuSet = allowed.first().into_iter().collect();
            let mut known = Vec::new();
            for mode in Mode::ALL {
                let nodes = if mode.takes_nodes() {
                    one.clone()
                } else {
                    CpuSet::new()
                };
                match set_thread_policy(mode, 0, &nodes) {
                    Ok(()) => known.push(mode),
                    Err(e) if e.errno() == Some(libc::EINVAL) => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(known)
        })
        .map_err(|e| {
            SysError::new(
                Op::SetMempolicy,
                self_pid(),
                e.raw_os_error().unwrap_or(libc::EAGAIN),
            )
        })?;
    probe
        .join()
        .unwrap_or_else(|_| Err(SysError::new(Op::SetMempolicy, self_pid(), libc::EIO).into()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn mode_numbers() {
        for m in Mode::ALL {
            assert_eq!(Mode::from_raw(m.raw()), Some(m));
            assert_eq!(Mode::from_raw(m.raw() | mpol::MPOL_F_STATIC_NODES), Some(m));
        }
        assert_eq!(Mode::PreferredMany.raw(), 5);
        assert_eq!(Mode::WeightedInterleave.raw(), 6);
        assert_eq!(Mode::from_raw(7), None);
        let p = policy_of(mpol::MPOL_BIND | mpol::MPOL_F_RELATIVE_NODES, CpuSet::new());
        assert_eq!(p.mode, Some(Mode::Bind));
        assert_eq!(p.flags, mpol::MPOL_F_RELATIVE_NODES);
    }
}
