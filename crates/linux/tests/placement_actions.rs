//! The acting half of numaff-linux on this (single-node) host: moving pages to node 0 counts
//! them as already there, node 1 is refused clearly, untouched pages are not present, mbind places
//! pages, policy modes are detected, exited and foreign processes give the right messages.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use numaff_linux::mempolicy::{self, Mode};
use numaff_linux::moves::{self, Budget, Dest, Scope};
use numaff_linux::pages;
use numaff_linux::{mpol, LinuxError};
use numaff_machine::CpuSet;

/// A private anonymous mapping of `n` pages, unmapped on drop.
struct Buf {
    /// Owns the mapping (unmapped on drop); `ptr` is its start.
    _map: memmap2::MmapMut,
    ptr: *mut u8,
    len: usize,
}

impl Buf {
    fn new(n: usize) -> Buf {
        let len = n * pages::page_size();
        let mut map = memmap2::MmapMut::map_anon(len).unwrap();
        Buf {
            ptr: map.as_mut_ptr(),
            _map: map,
            len,
        }
    }
    fn addr(&self) -> u64 {
        self.ptr as u64
    }
    fn touch(&self, page: usize) {
        // SAFETY: the offset is inside the mapping (callers pass page < n).
        unsafe {
            self.ptr
                .add(page * pages::page_size())
                .write_volatile(page as u8 | 1)
        };
    }
    fn addrs(&self) -> Vec<u64> {
        moves::page_addrs(self.addr(), self.len as u64)
    }
}

fn only_node0() -> bool {
    mpol::nodes_with_memory().is_some_and(|n| n.len() == 1 && n.contains(0))
}

#[test]
fn move_to_node0_counts_already_there_and_not_present() {
    let n = 700; // three batches
    let b = Buf::new(n);
    for i in (0..n).filter(|i| i % 3 != 0) {
        b.touch(i);
    }
    let touched = (0..n).filter(|i| i % 3 != 0).count() as u64;
    let c = moves::move_to_node(0, &b.addrs(), 0, Scope::Private).unwrap();
    assert_eq!(c.already_there, touched, "{c:?}");
    assert_eq!(c.not_present, n as u64 - touched, "{c:?}");
    assert_eq!(c.moved, 0);
    assert_eq!(c.total(), n as u64);
    // Through another pid than 0: our own pid.
    let c2 = moves::move_range(
        std::process::id() as i32,
        b.addr(),
        b.len as u64,
        0,
        Scope::Private,
    )
    .unwrap();
    assert_eq!(c2, c);
}

#[test]
fn bounded_moves_resume_until_done() {
    let n = 1000;
    let b = Buf::new(n);
    for i in 0..n {
        b.touch(i);
    }
    let addrs = b.addrs();
    let mut done = 0;
    let mut calls = 0;
    let mut total = moves::MoveCounts::default();
    while done < addrs.len() {
        let p = moves::move_pages(
            0,
            &addrs[done..],
            Dest::Node(0),
            Scope::Private,
            Budget::pages(300),
        )
        .unwrap();
        assert!(p.done <= 300 && p.done > 0, "{p:?}");
        assert_eq!(p.remaining, addrs.len() - done - p.done);
        total.add(&p.counts);
        done += p.done;
        calls += 1;
    }
    assert_eq!(calls, 4);
    assert_eq!(total.already_there, n as u64);
    // A zero time budget still makes progress (one batch per call).
    let p = moves::move_pages(
        0,
        &addrs,
        Dest::Node(0),
        Scope::Private,
        Budget::time(Duration::ZERO),
    )
    .unwrap();
    assert_eq!(p.done, pages::BATCH);
    assert!(!p.finished());
    // Per-page destinations, resumed with Dest::from.
    let nodes = vec![0u32; n];
    let d = Dest::PerPage(&nodes);
    let p = moves::move_pages(
        0,
        &addrs[500..],
        d.from(500),
        Scope::Private,
        Budget::UNLIMITED,
    )
    .unwrap();
    assert!(p.finished());
    assert_eq!(p.counts.already_there, 500);
}

#[test]
fn move_to_absent_node_is_a_clear_error() {
    if !only_node0() {
        eprintln!("skipped: this host has more than node 0");
        return;
    }
    let b = Buf::new(4);
    b.touch(0);
    let e = moves::move_to_node(0, &b.addrs(), 1, Scope::Private).unwrap_err();
    let m = e.to_string();
    assert!(matches!(e, LinuxError::NoNode { node: 1, .. }), "{e:?}");
    assert_eq!(e.errno(), Some(libc::ENODEV));
    assert_eq!(
        m,
        format!(
            "cannot move pages of pid {}: node 1 does not exist or has no memory here (nodes with \
             memory: 0); choose one of those (`numaff topo`)",
            std::process::id()
        )
    );
    // Untouched pages only: nothing to pass to the kernel, so no error; they are counted.
    let u = Buf::new(3);
    let c = moves::move_to_node(0, &u.addrs(), 1, Scope::Private).unwrap();
    assert_eq!(c.not_present, 3);
}

#[test]
fn moves_on_an_exited_process_say_it_has_exited() {
    let e = moves::move_to_node(i32::MAX, &[4096], 0, Scope::Private).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "cannot move pages of pid {0}: process {0} has exited",
            i32::MAX
        )
    );
    let e = moves::migrate_pages(
        i32::MAX,
        &CpuSet::parse("0").unwrap(),
        &CpuSet::parse("0").unwrap(),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "cannot migrate the pages of pid {0}: process {0} has exited",
            i32::MAX
        )
    );
}

#[test]
fn migrate_pages_to_node0_works_and_to_an_absent_node_is_refused() {
    let b = Buf::new(8);
    for i in 0..8 {
        b.touch(i);
    }
    let zero = CpuSet::parse("0").unwrap();
    let left = moves::migrate_pages(0, &zero, &zero).unwrap();
    assert_eq!(left, 0);
    assert_eq!(
        pages::query_range(0, b.addr(), b.len as u64)
            .unwrap()
            .per_node()[&0],
        8
    );
    if only_node0() {
        let e = moves::migrate_pages(0, &zero, &CpuSet::parse("1").unwrap()).unwrap_err();
        assert!(matches!(e, LinuxError::NoNode { node: 1, .. }), "{e:?}");
        assert!(
            e.to_string()
                .starts_with("cannot migrate the pages of pid "),
            "{e}"
        );
    }
}

#[test]
fn mbind_places_pages_and_node_of_says_0() {
    let b = Buf::new(16);
    let zero = CpuSet::parse("0").unwrap();
    mempolicy::mbind(
        b.addr(),
        b.len as u64,
        Mode::Bind,
        0,
        &zero,
        mpol::MPOL_MF_MOVE | mpol::MPOL_MF_STRICT,
    )
    .unwrap();
    let p = mempolicy::policy_at(b.addr()).unwrap();
    assert_eq!(p.mode, Some(Mode::Bind));
    assert_eq!(p.nodes, zero);
    for i in 0..16 {
        b.touch(i);
    }
    let q = pages::query_range(0, b.addr(), b.len as u64).unwrap();
    assert_eq!(q.per_node()[&0], 16);
    for a in b.addrs() {
        assert_eq!(mempolicy::node_of(a).unwrap(), 0);
    }
    // Interleave over node 0 only, then back to default.
    mempolicy::mbind(b.addr(), b.len as u64, Mode::Interleave, 0, &zero, 0).unwrap();
    assert_eq!(
        mempolicy::policy_at(b.addr()).unwrap().mode,
        Some(Mode::Interleave)
    );
    mempolicy::mbind(b.addr(), b.len as u64, Mode::Default, 0, &CpuSet::new(), 0).unwrap();
    assert_eq!(
        mempolicy::policy_at(b.addr()).unwrap().mode,
        Some(Mode::Default)
    );
    // An absent node is named.
    if only_node0() {
        let e = mempolicy::mbind(
            b.addr(),
            b.len as u64,
            Mode::Bind,
            0,
            &CpuSet::parse("1").unwrap(),
            0,
        )
        .unwrap_err();
        assert!(matches!(e, LinuxError::NoNode { node: 1, .. }), "{e:?}");
    }
    // An address in no mapping.
    let gone = b.addr();
    drop(b);
    let e = mempolicy::node_of(gone).unwrap_err();
    assert_eq!(e.errno(), Some(libc::EFAULT));
    assert!(e.to_string().contains("not in any mapping"), "{e}");
}

#[test]
fn thread_policy_is_set_read_back_and_restored() {
    std::thread::spawn(|| {
        let zero = CpuSet::parse("0").unwrap();
        assert!(mempolicy::allowed_nodes().unwrap().contains(0));
        let before = mempolicy::thread_policy().unwrap();
        assert_eq!(before.mode, Some(Mode::Default));
        mempolicy::set_thread_policy(Mode::Preferred, mpol::MPOL_F_STATIC_NODES, &zero).unwrap();
        let p = mempolicy::thread_policy().unwrap();
        assert_eq!(p.mode, Some(Mode::Preferred));
        assert_eq!(p.flags, mpol::MPOL_F_STATIC_NODES);
        assert_eq!(p.nodes, zero);
        // DEFAULT with nodes is refused with advice.
        let e = mempolicy::set_thread_policy(Mode::Default, 0, &zero).unwrap_err();
        assert!(
            e.to_string().contains("DEFAULT and LOCAL take no nodes"),
            "{e}"
        );
        mempolicy::set_thread_policy(Mode::Default, 0, &CpuSet::new()).unwrap();
        assert_eq!(
            mempolicy::thread_policy().unwrap().mode,
            Some(Mode::Default)
        );
    })
    .join()
    .unwrap();
}

#[test]
fn supported_modes_include_default_bind_interleave_preferred() {
    let modes = mempolicy::supported_modes().unwrap();
    for m in [Mode::Default, Mode::Bind, Mode::Interleave, Mode::Preferred] {
        assert!(modes.contains(&m), "{modes:?}");
    }
    eprintln!("modes this kernel knows: {modes:?}");
    // The probing thread's policy did not leak into this one.
    assert_eq!(
        mempolicy::thread_policy().unwrap().mode,
        Some(Mode::Default)
    );
}

const EPERM_TARGET: &str = "NUMAFF_EPERM_TARGET";
const EPERM_ADDR: &str = "NUMAFF_EPERM_ADDR";

/// Runs in a copy of this test binary started as uid 65534 by `other_users_process_is_refused`
/// (a no-op otherwise): the kernel itself refuses it the pages of a root-owned process, and refuses
/// it MPOL_MF_MOVE_ALL (no CAP_SYS_NICE) even on its own pages.
#[test]
fn as_nobody_root_pages_and_move_all_are_refused() {
    let (Ok(pid), Ok(addr)) = (std::env::var(EPERM_TARGET), std::env::var(EPERM_ADDR)) else {
        return;
    };
    let pid: i32 = pid.parse().unwrap();
    let addr: u64 = addr.parse().unwrap();
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 65534);
    check_refused(pid, addr, 0);
    // Moving shared pages needs CAP_SYS_NICE, even for one's own pages. (move_pages with
    // Scope::All cannot show it on one node: the pages are already there, so no move is asked.)
    let b = Buf::new(1);
    b.touch(0);
    let zero = CpuSet::parse("0").unwrap();
    let e = mempolicy::mbind(
        b.addr(),
        b.len as u64,
        Mode::Bind,
        0,
        &zero,
        mpol::MPOL_MF_MOVE_ALL,
    )
    .unwrap_err();
    assert_eq!(e.errno(), Some(libc::EPERM), "{e}");
    assert_eq!(
        e.to_string(),
        format!(
            "cannot set the memory policy of a range of pid {}: permission denied; moving shared \
             pages (MPOL_MF_MOVE_ALL) needs CAP_SYS_NICE; use MPOL_MF_MOVE or run with CAP_SYS_NICE",
            std::process::id()
        )
    );
    println!("EPERM-CHILD-OK");
}

/// The checks against a process of uid `owner` we may not touch.
fn check_refused(pid: i32, addr: u64, owner: u32) {
    let e = moves::move_to_node(pid, &[addr], 0, Scope::Private).unwrap_err();
    assert_eq!(e.errno(), Some(libc::EPERM), "{e}");
    assert_eq!(
        e.to_string(),
        format!(
            "cannot move pages of pid {pid} (owned by uid {owner}): permission denied; run as that \
             user (uid {owner}) or with CAP_SYS_PTRACE"
        )
    );
    let zero = CpuSet::parse("0").unwrap();
    let e = moves::migrate_pages(pid, &zero, &zero).unwrap_err();
    assert_eq!(e.errno(), Some(libc::EPERM), "{e}");
    assert!(
        e.to_string().starts_with(&format!(
            "cannot migrate the pages of pid {pid} (owned by uid {owner}): permission denied; run as \
             that user (uid {owner}) or with CAP_SYS_PTRACE"
        )),
        "{e}"
    );
}

#[test]
fn other_users_process_is_refused() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        // Not root: a process of another user is at hand, init.
        use std::os::unix::fs::MetadataExt;
        let owner = std::fs::metadata("/proc/1").unwrap().uid();
        if owner == euid {
            eprintln!("skipped: pid 1 belongs to this user and we cannot change user");
            return;
        }
        check_refused(1, 4096, owner);
        return;
    }
    // Root: a copy of this binary, run as nobody, tries to move the pages of this (root) process.
    let b = Buf::new(1);
    b.touch(0);
    let dir = std::env::temp_dir().join(format!("numaff-eperm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("child");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    use std::os::unix::process::CommandExt;
    let out = std::process::Command::new(&exe)
        .args([
            "--exact",
            "as_nobody_root_pages_and_move_all_are_refused",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(EPERM_TARGET, std::process::id().to_string())
        .env(EPERM_ADDR, b.addr().to_string())
        .current_dir(&dir)
        .gid(65534)
        .uid(65534)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.contains("EPERM-CHILD-OK"),
        "{text}"
    );
}
