//! Moving pages: move_pages in batches with the per-page status turned into counts, within a page or
//! time budget so a caller can move a large process in bounded chunks; and migrate_pages for a whole
//! process.
//!
//! Per-page status of move_pages, as Linux 6.x reports it (mm/migrate.c `do_pages_move`):
//! the node (moved, or already there), -ENOENT (not present), -EFAULT (not mapped, or the zero page),
//! -EBUSY (could not be isolated: locked, under writeback, pinned), -EACCES (mapped by several processes
//! and MPOL_MF_MOVE_ALL not given), -ENOMEM (older kernels). Newer kernels report a target node out of
//! memory as a failure of the whole call (-ENOMEM), after moving part of the batch, and a failed
//! migration as a positive count of pages not migrated whose status they leave unwritten; both are
//! turned into per-page counts here. A node that does not exist (-ENODEV), a node outside the
//! target's cpuset (-EACCES), no such process (-ESRCH) and no permission (-EPERM) fail the whole call.
//!
//! Kernel NUMA balancing (see [`crate::balancing`]) may move pages back after numaff moved them, for
//! pages whose policy is DEFAULT: these functions do not fight it. Callers that act on a process
//! should read `balancing::numa_balancing()` and report it; for numaff's own or a cooperating
//! process's memory, [`crate::mempolicy::mbind`] with BIND pins the pages where they are put.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use numaff_machine::CpuSet;

use crate::error::{LinuxError, Op, Result, SysError, Target};
use crate::mpol::{no_node_error, node_mask, MPOL_MF_MOVE, MPOL_MF_MOVE_ALL};
use crate::pages::{self, PageStatus, BATCH};

/// What the status slot holds before the call; the kernel leaves it so for pages it did not get to.
const UNWRITTEN: libc::c_int = libc::c_int::MIN;

/// How many more times a call tries the pages the kernel reported -EBUSY, after pauses of 1, 2, 4
/// and 8 ms: at most 15 ms of waiting per call, however many batches it had. A busy page is one
/// the kernel could not isolate at that moment, after its own retries: another migration holds it
/// (a NUMA-balancing hinting fault, compaction, khugepaged), or a short-lived reference does. Such
/// causes pass within milliseconds; a page pinned for good (RDMA, a long-term GUP pin) stays busy
/// and is counted so. (A 2-node guest test once saw 2 of 64 pages busy while the program's threads
/// were reading them: the placement failed without these retries.)
const BUSY_RETRIES: u32 = 4;

/// Where pages go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dest<'a> {
    /// Every page to this node.
    Node(u32),
    /// Page i to node i (as long as the page list).
    PerPage(&'a [u32]),
}

impl<'a> Dest<'a> {
    fn node(&self, i: usize) -> u32 {
        match self {
            Dest::Node(n) => *n,
            Dest::PerPage(v) => v[i],
        }
    }

    /// The destinations of the pages from index `from` on (to resume after a bounded call).
    pub fn from(&self, from: usize) -> Dest<'a> {
        match self {
            Dest::Node(n) => Dest::Node(*n),
            Dest::PerPage(v) => Dest::PerPage(&v[from.min(v.len())..]),
        }
    }

    fn nodes(&self) -> CpuSet {
        match self {
            Dest::Node(n) => std::iter::once(*n).collect(),
            Dest::PerPage(v) => v.iter().copied().collect(),
        }
    }
}

/// Which pages the kernel may move.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Scope {
    /// MPOL_MF_MOVE: pages mapped by the target process only (shared pages count as `shared`).
    #[default]
    Private,
    /// MPOL_MF_MOVE_ALL: shared pages too; needs CAP_SYS_NICE.
    All,
}

impl Scope {
    fn flags(self) -> libc::c_int {
        match self {
            Scope::Private => MPOL_MF_MOVE as libc::c_int,
            Scope::All => MPOL_MF_MOVE_ALL as libc::c_int,
        }
    }

    fn op(self) -> Op {
        match self {
            Scope::Private => Op::MovePages,
            Scope::All => Op::MovePagesAll,
        }
    }
}

/// How much one call may do before it returns with its progress. At least one batch is always done,
/// so a loop of bounded calls always finishes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Budget {
    /// Stop after this many pages (rounded to whole batches only when larger than a batch).
    pub max_pages: Option<usize>,
    /// Stop starting new batches after this much time.
    pub max_time: Option<Duration>,
}

impl Budget {
    /// No limit: move every page in one call.
    pub const UNLIMITED: Budget = Budget {
        max_pages: None,
        max_time: None,
    };

    /// At most `n` pages per call.
    pub fn pages(n: usize) -> Budget {
        Budget {
            max_pages: Some(n),
            max_time: None,
        }
    }

    /// Start no new batch after `d`.
    pub fn time(d: Duration) -> Budget {
        Budget {
            max_pages: None,
            max_time: Some(d),
        }
    }
}

/// What happened to the pages, page by page, added up.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MoveCounts {
    /// Moved to their target node.
    pub moved: u64,
    /// Already on their target node before the call (not passed to the kernel).
    pub already_there: u64,
    /// Not present (never touched, or swapped out): -ENOENT.
    pub not_present: u64,
    /// Not in a mapping of the process, or the shared zero page: -EFAULT.
    pub bad_address: u64,
    /// Could not be isolated (locked, under writeback, pinned, held by another migration): -EBUSY,
    /// still so after the call's retries (`BUSY_RETRIES`). Retry later.
    pub busy: u64,
    /// No free memory on the target node: per-page -ENOMEM, or the pages of a batch the kernel gave
    /// up on with ENOMEM that are not on the target afterwards.
    pub no_memory: u64,
    /// Mapped by several processes and [`Scope::All`] not given: per-page -EACCES. (A target node
    /// forbidden by the process's cpuset fails the whole call with EACCES instead.)
    pub shared: u64,
    /// The kernel tried and failed to migrate them (it returned a count of pages not migrated and
    /// left their status unwritten), or stopped before them.
    pub failed: u64,
    /// Reported on a node other than the target (moved concurrently by someone else).
    pub elsewhere: u64,
    /// Other per-page errors: errno -> pages.
    pub other: BTreeMap<i32, u64>,
}

impl MoveCounts {
    /// All pages accounted for.
    pub fn total(&self) -> u64 {
        self.moved
            + self.already_there
            + self.not_present
            + self.bad_address
            + self.busy
            + self.no_memory
            + self.shared
            + self.failed
            + self.elsewhere
            + self.other.values().sum::<u64>()
    }

    /// Pages on their target node now (moved or already there).
    pub fn on_target(&self) -> u64 {
        self.moved + self.already_there
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, o: &MoveCounts) {
        self.moved += o.moved;
        self.already_there += o.already_there;
        self.not_present += o.not_present;
        self.bad_address += o.bad_address;
        self.busy += o.busy;
        self.no_memory += o.no_memory;
        self.shared += o.shared;
        self.failed += o.failed;
        self.elsewhere += o.elsewhere;
        for (e, n) in &o.other {
            *self.other.entry(*e).or_insert(0) += n;
        }
    }

    fn count_error(&mut self, errno: i32) {
        match errno {
            libc::ENOENT => self.not_present += 1,
            libc::EFAULT => self.bad_address += 1,
            libc::EBUSY => self.busy += 1,
            libc::ENOMEM => self.no_memory += 1,
            libc::EACCES => self.shared += 1,
            e => *self.other.entry(e).or_insert(0) += 1,
        }
    }
}

/// The result of one (possibly bounded) move.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MoveProgress {
    /// What happened to the pages handled by this call.
    pub counts: MoveCounts,
    /// Pages handled, from the start of the list: resume with `pages[done..]` and `dest.from(done)`.
    pub done: usize,
    /// Pages left.
    pub remaining: usize,
    /// Time spent in this call.
    pub elapsed: Duration,
    /// move_pages calls made (queries and retries of busy pages included).
    pub calls: u32,
    /// Pages the kernel reported busy that the call tried again (`BUSY_RETRIES`); those still busy
    /// after the retries are counted in `counts.busy`.
    pub busy_retried: u64,
    /// The target process exited after some pages were handled; the call ended there.
    pub target_exited: bool,
}

impl MoveProgress {
    /// Whether every page has been handled.
    pub fn finished(&self) -> bool {
        self.remaining == 0
    }
}

fn pid_target(pid: i32) -> Target {
    Target::Pid(if pid == 0 {
        std::process::id() as i32
    } else {
        pid
    })
}

/// One raw move_pages call: Ok(return value) or Err(errno).
fn raw_move(
    pid: i32,
    addrs: &[u64],
    nodes: &[libc::c_int],
    status: &mut [libc::c_int],
    flags: libc::c_int,
) -> std::result::Result<i64, i32> {
    debug_assert!(addrs.len() == nodes.len() && addrs.len() == status.len());
    let pages: Vec<*mut libc::c_void> = addrs.iter().map(|&a| a as *mut libc::c_void).collect();
    // SAFETY: `pages`, `nodes` and `status` all hold addrs.len() elements and outlive the call; the
    // kernel reads the first two and writes the third. The target's pages are moved, never changed.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            pid as libc::pid_t,
            addrs.len() as libc::c_ulong,
            pages.as_ptr(),
            nodes.as_ptr(),
            status.as_mut_ptr(),
            flags,
        )
    };
    if r < 0 {
        Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO))
    } else {
        Ok(r)
    }
}

/// Whether `pid` has exited or is exiting: a zombie not yet reaped, or a process killed part way
/// through exit (PF_EXITING) whose memory is already released. Either has no mm, and the kernel says
/// EINVAL to move_pages and migrate_pages on it.
fn has_exited(pid: i32) -> bool {
    let path = std::path::PathBuf::from(format!("/proc/{pid}/stat"));
    match crate::error::read_text(&path) {
        Ok(text) => crate::tasks::parse_stat(text.trim_end()).is_ok_and(|s| s.exiting()),
        Err(_) => true,
    }
}

/// The errno to report: EINVAL on a process that exited or is exiting (no memory left) is ESRCH.
fn exited_or(pid: i32, errno: i32) -> i32 {
    if errno == libc::EINVAL && pid != 0 && has_exited(pid) {
        libc::ESRCH
    } else {
        errno
    }
}

/// The error of a whole failed move_pages call.
fn move_error(pid: i32, scope: Scope, dest_nodes: &CpuSet, errno: i32) -> LinuxError {
    let target = pid_target(pid);
    let errno = exited_or(pid, errno);
    if errno == libc::ENODEV || errno == libc::EINVAL {
        if let Some(e) = no_node_error(scope.op(), &target, dest_nodes, errno) {
            return e;
        }
    }
    SysError::new(scope.op(), target, errno).into()
}

/// Moves the pages at `addrs` (page-aligned addresses in process `pid`; 0 = this process) to `dest`,
/// within `budget`. Pages are handled in batches of [`BATCH`]: each batch is first queried (cheap), so
/// pages already on their target, absent or unmapped are counted and not passed to the kernel; the
/// rest are moved and their status counted.
///
/// Pages the kernel reports busy (-EBUSY) are tried again at the end of the call, up to
/// `BUSY_RETRIES` times after short pauses (at most 15 ms in all); those still busy are counted busy.
///
/// A whole-call failure in the first batch is an error (process exited, permission, node without
/// memory, node outside the cpuset); pages of earlier batches stay moved. If the process exits after
/// some batches, the call returns its progress with `target_exited`.
pub fn move_pages(
    pid: i32,
    addrs: &[u64],
    dest: Dest<'_>,
    scope: Scope,
    budget: Budget,
) -> Result<MoveProgress> {
    if let Dest::PerPage(v) = dest {
        assert_eq!(v.len(), addrs.len(), "one target node per page");
    }
    let start = Instant::now();
    let dest_nodes = dest.nodes();
    let mut p = MoveProgress {
        remaining: addrs.len(),
        ..MoveProgress::default()
    };
    // Pages reported busy, with their target node: tried again at the end.
    let mut busy: Vec<(u64, libc::c_int)> = Vec::new();
    while p.done < addrs.len() {
        let out_of_pages = budget.max_pages.is_some_and(|m| p.done >= m);
        let out_of_time = budget.max_time.is_some_and(|t| start.elapsed() >= t);
        if p.done > 0 && (out_of_pages || out_of_time) {
            break;
        }
        let mut n = BATCH.min(addrs.len() - p.done);
        if let Some(m) = budget.max_pages {
            n = n.min(m.saturating_sub(p.done).max(1));
        }
        let chunk = &addrs[p.done..p.done + n];
        match move_batch(
            pid,
            chunk,
            dest.from(p.done),
            scope,
            &dest_nodes,
            &mut p,
            &mut busy,
        ) {
            Ok(()) => {}
            Err(e) if p.done > 0 && e.errno() == Some(libc::ESRCH) => {
                p.target_exited = true;
                break;
            }
            Err(e) => return Err(e),
        }
        p.done += n;
        p.remaining = addrs.len() - p.done;
    }
    if !p.target_exited {
        p.busy_retried = busy.len() as u64;
        let mover = |a: &[u64], n: &[libc::c_int], st: &mut [libc::c_int]| {
            move_or_query(pid, a, n, st, scope)
        };
        let pause = |attempt: u32| std::thread::sleep(Duration::from_millis(1 << attempt));
        retry_busy(&mut busy, &mut p.counts, &mut p.calls, mover, pause);
    }
    p.elapsed = start.elapsed();
    Ok(p)
}

/// The per-page statuses of a move_pages call that failed with ENOMEM (a target node out of memory,
/// part of the call done), from a query `after` it: the target where a page reached it, -ENOENT
/// where the page is gone, -ENOMEM otherwise.
fn statuses_after_enomem(after: &[PageStatus], nodes: &[libc::c_int], status: &mut [libc::c_int]) {
    for ((slot, s), want) in status.iter_mut().zip(after).zip(nodes) {
        *slot = match *s {
            PageStatus::Node(n) if n as libc::c_int == *want => *want,
            PageStatus::NotPresent => -libc::ENOENT,
            _ => -libc::ENOMEM,
        };
    }
}

/// One move_pages call for a retry, an ENOMEM failure turned into per-page statuses by a query
/// (`statuses_after_enomem`), as `move_batch` does.
fn move_or_query(
    pid: i32,
    addrs: &[u64],
    nodes: &[libc::c_int],
    status: &mut [libc::c_int],
    scope: Scope,
) -> std::result::Result<(), i32> {
    match raw_move(pid, addrs, nodes, status, scope.flags()) {
        Ok(_) => Ok(()),
        Err(libc::ENOMEM) => {
            let after = pages::query(pid, addrs).map_err(|_| libc::ENOMEM)?;
            statuses_after_enomem(&after.status, nodes, status);
            Ok(())
        }
        Err(errno) => Err(errno),
    }
}

/// Tries the `busy` pages (address, target node) again, up to `BUSY_RETRIES` times, each after
/// `pause(attempt)`, with `mover` (one move_pages call: per-page statuses, or the errno of a whole
/// failed call). Each page that is no longer busy leaves the busy count for what became of it; a
/// whole failed call (the target exited, say) ends the retries with the pages still busy.
fn retry_busy(
    busy: &mut Vec<(u64, libc::c_int)>,
    counts: &mut MoveCounts,
    calls: &mut u32,
    mut mover: impl FnMut(&[u64], &[libc::c_int], &mut [libc::c_int]) -> std::result::Result<(), i32>,
    mut pause: impl FnMut(u32),
) {
    for attempt in 0..BUSY_RETRIES {
        if busy.is_empty() {
            return;
        }
        pause(attempt);
        let addrs: Vec<u64> = busy.iter().map(|&(a, _)| a).collect();
        let nodes: Vec<libc::c_int> = busy.iter().map(|&(_, n)| n).collect();
        let mut status = vec![UNWRITTEN; addrs.len()];
        *calls += 1;
        if mover(&addrs, &nodes, &mut status).is_err() {
            return;
        }
        let mut still = Vec::new();
        for ((&s, &want), &addr) in status.iter().zip(&nodes).zip(&addrs) {
            if s == -libc::EBUSY {
                still.push((addr, want));
                continue;
            }
            counts.busy -= 1;
            count_status(counts, s, want);
        }
        *busy = still;
    }
}

/// Counts one page's move_pages status against its target node `want`.
fn count_status(counts: &mut MoveCounts, s: libc::c_int, want: libc::c_int) {
    match s {
        s if s == want => counts.moved += 1,
        UNWRITTEN => counts.failed += 1,
        s if s >= 0 => counts.elsewhere += 1,
        s => counts.count_error(-s),
    }
}

fn move_batch(
    pid: i32,
    chunk: &[u64],
    dest: Dest<'_>,
    scope: Scope,
    dest_nodes: &CpuSet,
    p: &mut MoveProgress,
    busy: &mut Vec<(u64, libc::c_int)>,
) -> Result<()> {
    let before = pages::query(pid, chunk).map_err(|e| match e {
        LinuxError::Sys(s) => {
            LinuxError::Sys(SysError::new(scope.op(), s.target, exited_or(pid, s.errno)))
        }
        e => e,
    })?;
    p.calls += 1;
    let mut counts = MoveCounts::default();
    let mut todo: Vec<u64> = Vec::new();
    let mut nodes: Vec<libc::c_int> = Vec::new();
    for (i, s) in before.status.iter().enumerate() {
        let want = dest.node(i);
        match *s {
            PageStatus::Node(n) if n == want => counts.already_there += 1,
            PageStatus::Node(_) => {
                todo.push(chunk[i]);
                nodes.push(want as libc::c_int);
            }
            PageStatus::NotPresent => counts.not_present += 1,
            PageStatus::BadAddress => counts.bad_address += 1,
            PageStatus::Error(e) => counts.count_error(e),
        }
    }
    if !todo.is_empty() {
        let mut status = vec![UNWRITTEN; todo.len()];
        p.calls += 1;
        match raw_move(pid, &todo, &nodes, &mut status, scope.flags()) {
            Ok(_) => {}
            Err(libc::ENOMEM) => {
                // The target ran out of memory part way: see what did move.
                let after = pages::query(pid, &todo)?;
                p.calls += 1;
                statuses_after_enomem(&after.status, &nodes, &mut status);
            }
            Err(errno) => return Err(move_error(pid, scope, dest_nodes, errno)),
        }
        for ((&s, &want), &addr) in status.iter().zip(&nodes).zip(&todo) {
            if s == -libc::EBUSY {
                busy.push((addr, want));
            }
            count_status(&mut counts, s, want);
        }
    }
    p.counts.add(&counts);
    Ok(())
}

/// Moves every page of `addrs` to `node` in one call (no budget).
pub fn move_to_node(pid: i32, addrs: &[u64], node: u32, scope: Scope) -> Result<MoveCounts> {
    Ok(move_pages(pid, addrs, Dest::Node(node), scope, Budget::UNLIMITED)?.counts)
}

/// Moves every page of the range [start, start + len) of process `pid` to `node` (no budget).
pub fn move_range(pid: i32, start: u64, len: u64, node: u32, scope: Scope) -> Result<MoveCounts> {
    move_to_node(pid, &page_addrs(start, len), node, scope)
}

/// The page-aligned addresses of the pages covering [start, start + len).
pub fn page_addrs(start: u64, len: u64) -> Vec<u64> {
    let ps = pages::page_size() as u64;
    let first = start / ps * ps;
    (first..start + len).step_by(ps as usize).collect()
}

/// Migrates every page of process `pid` (0 = this process) that lies on a node of `from` to the
/// nodes of `to` (the kernel keeps relative positions: the i-th node of `from` goes to the i-th of
/// `to`). Returns the number of pages that could not be moved.
///
/// One call does the whole process and cannot be bounded: the kernel holds the target's mmap lock
/// for the duration, which can stall a large program for a long time. For bounded chunks, move the
/// process's ranges (from /proc/PID/numa_maps) with [`move_pages`] and a [`Budget`] instead.
/// Without CAP_SYS_NICE only pages mapped by the process alone move (MPOL_MF_MOVE).
pub fn migrate_pages(pid: i32, from: &CpuSet, to: &CpuSet) -> Result<u64> {
    let (mut from_mask, from_max) = node_mask(from);
    let (mut to_mask, to_max) = node_mask(to);
    // Both masks share one maxnode: pad the shorter.
    let words = from_mask.len().max(to_mask.len()).max(1);
    from_mask.resize(words, 0);
    to_mask.resize(words, 0);
    let maxnode = from_max
        .max(to_max)
        .max(crate::mpol::maxnode_for_words(words));
    // SAFETY: both masks hold `words` words, which is what maxnode - 1 bits span; the kernel only
    // reads them.
    let r = unsafe {
        libc::syscall(
            libc::SYS_migrate_pages,
            pid as libc::pid_t,
            maxnode,
            from_mask.as_ptr(),
            to_mask.as_ptr(),
        )
    };
    if r < 0 {
        let errno = exited_or(
            pid,
            std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO),
        );
        let target = pid_target(pid);
        if errno == libc::EINVAL {
            if let Some(e) = no_node_error(Op::MigratePages, &target, to, errno) {
                return Err(e);
            }
        }
        return Err(SysError::new(Op::MigratePages, target, errno).into());
    }
    Ok(r as u64)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn counts_add_and_total() {
        let mut a = MoveCounts {
            moved: 2,
            busy: 1,
            ..MoveCounts::default()
        };
        a.count_error(libc::EACCES);
        a.count_error(libc::EAGAIN);
        let b = a.clone();
        a.add(&b);
        assert_eq!(a.moved, 4);
        assert_eq!(a.shared, 2);
        assert_eq!(a.other, BTreeMap::from([(libc::EAGAIN, 2)]));
        assert_eq!(a.total(), 10);
        assert_eq!(a.on_target(), 4);
    }

    #[test]
    fn dest_from() {
        let v = [1, 2, 3];
        assert_eq!(Dest::PerPage(&v).from(1), Dest::PerPage(&v[1..]));
        assert_eq!(Dest::PerPage(&v).from(9), Dest::PerPage(&[]));
        assert_eq!(Dest::Node(4).from(2), Dest::Node(4));
        assert_eq!(Dest::PerPage(&v).nodes().to_string(), "1-3");
    }

    #[test]
    fn zombie_is_exited() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        // Not reaped yet: wait until it is a zombie.
        for _ in 0..500 {
            if has_exited(pid) {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(has_exited(pid));
        let e = move_to_node(pid, &[4096], 0, Scope::Private).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("cannot move pages of pid {pid}: process {pid} has exited")
        );
        let zero = CpuSet::parse("0").unwrap();
        let e = migrate_pages(pid, &zero, &zero).unwrap_err();
        assert!(e.to_string().ends_with("has exited"), "{e}");
        child.wait().unwrap();
    }

    /// `retry_busy` with a fake move_pages: `script[page]` is what the page reports on successive
    /// retries (the last one repeats); returns the counts, the calls and the pauses asked for.
    fn retry_with(
        start: MoveCounts,
        want: &[(u64, libc::c_int)],
        script: &BTreeMap<u64, Vec<libc::c_int>>,
        fail_call: Option<i32>,
    ) -> (MoveCounts, u32, Vec<u32>, Vec<(u64, libc::c_int)>) {
        let mut busy = want.to_vec();
        let mut counts = start;
        let mut calls = 0;
        let mut pauses = Vec::new();
        let mut tries: BTreeMap<u64, usize> = BTreeMap::new();
        let mover = |a: &[u64], n: &[libc::c_int], st: &mut [libc::c_int]| {
            assert_eq!(a.len(), n.len());
            if let Some(errno) = fail_call {
                return Err(errno);
            }
            for (addr, slot) in a.iter().zip(st.iter_mut()) {
                let k = tries.entry(*addr).or_insert(0);
                let seq = &script[addr];
                *slot = seq[(*k).min(seq.len() - 1)];
                *k += 1;
            }
            Ok(())
        };
        retry_busy(&mut busy, &mut counts, &mut calls, mover, |k| {
            pauses.push(k)
        });
        (counts, calls, pauses, busy)
    }

    #[test]
    fn busy_pages_are_tried_again_until_they_move() {
        let start = MoveCounts {
            moved: 5,
            busy: 2,
            ..MoveCounts::default()
        };
        let script = BTreeMap::from([(0x1000, vec![-libc::EBUSY, 1]), (0x2000, vec![1])]);
        let (c, calls, pauses, left) =
            retry_with(start, &[(0x1000, 1), (0x2000, 1)], &script, None);
        assert_eq!((c.moved, c.busy, c.total()), (7, 0, 7));
        assert_eq!(calls, 2, "the second retry takes only the page still busy");
        assert_eq!(pauses, vec![0, 1]);
        assert!(left.is_empty());
    }

    #[test]
    fn a_page_busy_for_good_is_tried_a_bounded_number_of_times() {
        let start = MoveCounts {
            busy: 1,
            ..MoveCounts::default()
        };
        let script = BTreeMap::from([(0x1000, vec![-libc::EBUSY])]);
        let (c, calls, pauses, left) = retry_with(start, &[(0x1000, 0)], &script, None);
        assert_eq!((c.busy, c.moved), (1, 0));
        assert_eq!(calls, BUSY_RETRIES);
        // The pauses are 1 << attempt ms: 15 ms in all.
        assert_eq!(pauses.iter().map(|k| 1u32 << k).sum::<u32>(), 15);
        assert_eq!(left, vec![(0x1000, 0)]);
    }

    #[test]
    fn retried_pages_are_counted_for_what_became_of_them() {
        let start = MoveCounts {
            busy: 3,
            ..MoveCounts::default()
        };
        // Unmapped meanwhile, moved there by someone else, and a status the kernel left unwritten.
        let script = BTreeMap::from([
            (0x1000, vec![-libc::ENOENT]),
            (0x2000, vec![0]),
            (0x3000, vec![UNWRITTEN]),
        ]);
        let want = [(0x1000, 1), (0x2000, 1), (0x3000, 1)];
        let (c, calls, _, _) = retry_with(start, &want, &script, None);
        assert_eq!(
            (c.busy, c.not_present, c.elsewhere, c.failed, c.total()),
            (0, 1, 1, 1, 3)
        );
        assert_eq!(calls, 1);
    }

    #[test]
    fn a_failed_retry_call_leaves_the_pages_busy() {
        let start = MoveCounts {
            busy: 2,
            ..MoveCounts::default()
        };
        let script = BTreeMap::from([(0x1000, vec![1]), (0x2000, vec![1])]);
        let want = [(0x1000, 1), (0x2000, 1)];
        let (c, calls, pauses, left) = retry_with(start, &want, &script, Some(libc::ESRCH));
        assert_eq!((c.busy, c.moved), (2, 0));
        assert_eq!((calls, pauses.len(), left.len()), (1, 1, 2));
    }

    #[test]
    fn page_addrs_cover_range() {
        let ps = pages::page_size() as u64;
        assert_eq!(page_addrs(ps + 1, ps), vec![ps, 2 * ps]);
        assert_eq!(page_addrs(0, 0), Vec::<u64>::new());
    }
}
