//! The kernel's memory-policy constants (libc lacks them; include/uapi/linux/mempolicy.h) and node
//! masks of any size for mbind / set_mempolicy / get_mempolicy / migrate_pages.
//!
//! # maxnode, as the kernel reads it (mm/mempolicy.c, Linux 6.x)
//!
//! * Passing a mask in (`get_nodes`): the kernel does `--maxnode` and then reads `maxnode` bits, so a
//!   mask of B bits is passed as `maxnode = B + 1`. This is libnuma's `bmp->size + 1` quirk: a caller
//!   that passes B reads only B - 1 bits and silently drops the last node. `maxnode - 1` may not
//!   exceed PAGE_SIZE * 8 bits (EINVAL), and bits beyond the kernel's MAX_NUMNODES must be 0 (EINVAL).
//! * Getting a mask back (`get_mempolicy`): the kernel refuses `maxnode < nr_node_ids` (EINVAL) and
//!   writes `ALIGN(maxnode - 1, 64) / 8` bytes (zero-filled past its own nodes), refusing more than a
//!   page. With a buffer of W words and `maxnode = 64 W + 1` it writes exactly W words.
//!
//! So numaff always uses whole `unsigned long` words and `maxnode = 64 * words + 1` both ways, and
//! grows the buffer on EINVAL when reading, as [`crate::affinity`] does for cpu masks.

use std::path::Path;

use numaff_machine::CpuSet;

use crate::affinity::{from_mask, to_mask};
use crate::error::{read_text, LinuxError, Op, Target};

/// Modes (`mode` of set_mempolicy / mbind, `*policy` of get_mempolicy).
pub const MPOL_DEFAULT: i32 = 0;
/// Allocate on one preferred node, fall back to others.
pub const MPOL_PREFERRED: i32 = 1;
/// Allocate only on the given nodes.
pub const MPOL_BIND: i32 = 2;
/// Round-robin over the given nodes, page by page.
pub const MPOL_INTERLEAVE: i32 = 3;
/// Allocate on the node of the cpu that allocates (Linux 3.8).
pub const MPOL_LOCAL: i32 = 4;
/// Prefer any of several nodes, fall back to others (Linux 5.15).
pub const MPOL_PREFERRED_MANY: i32 = 5;
/// Interleave weighted by /sys/kernel/mm/mempolicy/weighted_interleave/nodeN (Linux 6.9).
pub const MPOL_WEIGHTED_INTERLEAVE: i32 = 6;

/// Mode flag: the node set is absolute, not remapped when the cpuset changes.
pub const MPOL_F_STATIC_NODES: i32 = 1 << 15;
/// Mode flag: the node set is relative to the cpuset's allowed nodes.
pub const MPOL_F_RELATIVE_NODES: i32 = 1 << 14;
/// Mode flag (MPOL_BIND only, Linux 5.12): let NUMA balancing move pages within the bound nodes.
pub const MPOL_F_NUMA_BALANCING: i32 = 1 << 13;
/// All mode flags; get_mempolicy ORs them into the mode it reports.
pub const MPOL_MODE_FLAGS: i32 =
    MPOL_F_STATIC_NODES | MPOL_F_RELATIVE_NODES | MPOL_F_NUMA_BALANCING;

/// get_mempolicy flag: return the node (of the address with MPOL_F_ADDR) instead of the mode.
pub const MPOL_F_NODE: libc::c_ulong = 1;
/// get_mempolicy flag: the policy of the mapping at `addr`, not of the thread.
pub const MPOL_F_ADDR: libc::c_ulong = 2;
/// get_mempolicy flag: the nodes this thread may allocate on (cpuset mems).
pub const MPOL_F_MEMS_ALLOWED: libc::c_ulong = 4;

/// mbind flag: fail (EIO) if existing pages of the range do not follow the policy.
pub const MPOL_MF_STRICT: u32 = 1;
/// mbind / move_pages flag: move the pages mapped by this process only.
pub const MPOL_MF_MOVE: u32 = 2;
/// mbind / move_pages flag: move shared pages too (needs CAP_SYS_NICE).
pub const MPOL_MF_MOVE_ALL: u32 = 4;

const WORD_BITS: usize = libc::c_ulong::BITS as usize;
/// The kernel refuses masks above one page of bits (`maxnode - 1 > PAGE_SIZE * 8`); 4 KiB pages.
const MAX_MASK_WORDS: usize = 4096 * 8 / WORD_BITS;
/// The first buffer tried when reading a mask: 1024 nodes, the largest MAX_NUMNODES (NODES_SHIFT 10).
pub(crate) const FIRST_MASK_WORDS: usize = 1024 / WORD_BITS;

/// A node set as the kernel takes it: the words, and the `maxnode` to pass with them (bits + 1).
/// The empty set is (empty, 0), which the kernel reads as "no mask" (as a NULL pointer).
pub fn node_mask(nodes: &CpuSet) -> (Vec<libc::c_ulong>, libc::c_ulong) {
    if nodes.is_empty() {
        return (Vec::new(), 0);
    }
    let mask = to_mask(nodes);
    let maxnode = (mask.len() * WORD_BITS + 1) as libc::c_ulong;
    (mask, maxnode)
}

/// The `maxnode` to pass with a buffer of `words` words the kernel fills.
pub(crate) fn maxnode_for_words(words: usize) -> libc::c_ulong {
    (words * WORD_BITS + 1) as libc::c_ulong
}

/// Whether a read mask buffer of `words` may still be doubled.
pub(crate) fn can_grow(words: usize) -> bool {
    words * 2 <= MAX_MASK_WORDS
}

/// The node set of a mask the kernel filled.
pub fn nodes_of_mask(mask: &[libc::c_ulong]) -> CpuSet {
    from_mask(mask)
}

/// The nodes that have memory (`/sys/devices/system/node/has_memory`, the kernel's N_MEMORY, which is
/// what move_pages, migrate_pages and the policies check), or None if sysfs does not say.
pub fn nodes_with_memory() -> Option<CpuSet> {
    let text = read_text(Path::new("/sys/devices/system/node/has_memory")).ok()?;
    CpuSet::parse(&text).ok()
}

/// After the kernel refused `nodes` with `errno` (ENODEV or EINVAL): if one of them has no memory
/// here, the error naming it; None if every node has memory (the refusal has another cause).
pub(crate) fn no_node_error(
    op: Op,
    target: &Target,
    nodes: &CpuSet,
    errno: i32,
) -> Option<LinuxError> {
    let have = nodes_with_memory()?;
    let node = nodes.iter().find(|n| !have.contains(*n))?;
    Some(LinuxError::NoNode {
        op,
        target: target.clone(),
        node,
        with_memory: have.to_string(),
        errno,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn maxnode_is_bits_plus_one() {
        let (m, maxnode) = node_mask(&CpuSet::parse("0").unwrap());
        assert_eq!(m, vec![1]);
        assert_eq!(maxnode, 65);
        let (m, maxnode) = node_mask(&CpuSet::parse("1,64").unwrap());
        assert_eq!(m, vec![2, 1]);
        assert_eq!(maxnode, 129);
        assert_eq!(node_mask(&CpuSet::new()), (vec![], 0));
        assert_eq!(maxnode_for_words(16), 1025);
        assert!(can_grow(FIRST_MASK_WORDS) && !can_grow(MAX_MASK_WORDS));
    }

    #[test]
    fn node0_has_memory_and_missing_node_is_named() {
        let have = nodes_with_memory().unwrap();
        assert!(have.contains(0), "{have}");
        let e = no_node_error(
            Op::MovePages,
            &Target::Pid(7),
            &CpuSet::parse("0,4000").unwrap(),
            libc::ENODEV,
        )
        .unwrap();
        let m = e.to_string();
        assert!(
            m.starts_with("cannot move pages of pid 7: node 4000 does not exist or has no memory here (nodes with memory: "),
            "{m}"
        );
        assert_eq!(e.errno(), Some(libc::ENODEV));
        assert!(no_node_error(Op::MovePages, &Target::Pid(7), &have, libc::EINVAL).is_none());
    }
}
