//! Following a launched program's threads and pinning them to a mapping in creation order (the
//! engine of `numaff apply`), without stopping or tracing the program.
//!
//! How it works: every [`Follower::poll`] lists `/proc/PID/task` of the program and of every process
//! it started (found through `/proc/PID/task/TID/children`), takes the thread ids not seen before in
//! increasing order (the kernel hands out ids in increasing order, so this is creation order except
//! when the pid space wraps around) and gives the next one the next slot of the mapping with
//! `sched_setaffinity`. Threads of child processes continue the same order.
//!
//! What it costs and what it cannot do: a thread runs where its creator runs (Linux copies the
//! creator's affinity) until the next poll sees it, so the interval bounds how long a new thread runs
//! in the wrong place; one poll reads one directory per process and one `children` file per thread.
//! Nothing here stops, traces or signals the program: if numaff dies, the program keeps its last
//! affinities and runs on.

use std::collections::{BTreeSet, HashSet};
use std::path::PathBuf;

use numaff_machine::CpuSet;

use crate::affinity;
use crate::tasks;

/// A likwid-pin style skip mask: bit `i` set means the `i`-th created thread is not pinned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkipMask(Vec<bool>);

impl SkipMask {
    /// Parses a hex mask (`0x1`, `0x6`, `3`; any length).
    pub fn parse(text: &str) -> Result<Self, String> {
        let t = text.trim();
        let hex = t
            .strip_prefix("0x")
            .or_else(|| t.strip_prefix("0X"))
            .unwrap_or(t);
        if hex.is_empty() {
            return Err(format!(
                "skip mask {text:?} is empty; give a hex mask such as 0x1"
            ));
        }
        let mut bits = Vec::with_capacity(hex.len() * 4);
        for c in hex.chars().rev() {
            let d = c.to_digit(16).ok_or_else(|| {
                format!("skip mask {text:?}: {c:?} is not a hex digit; give a hex mask such as 0x1")
            })?;
            bits.extend((0..4).map(|b| d & (1 << b) != 0));
        }
        Ok(SkipMask(bits))
    }

    /// Whether the `i`-th created thread is skipped.
    pub fn skips(&self, i: usize) -> bool {
        self.0.get(i).copied().unwrap_or(false)
    }
}

/// What happened to one newly seen thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The thread was pinned to the cpus of mapping slot `slot`.
    Pinned {
        /// Creation index (0 = the program's main thread).
        index: usize,
        /// Its process.
        pid: i32,
        /// The thread.
        tid: i32,
        /// The mapping slot it took.
        slot: usize,
        /// Where it was pinned.
        cpus: CpuSet,
    },
    /// The thread is skipped by the mask; it was given the unpinned cpu set.
    Skipped {
        /// Creation index.
        index: usize,
        /// Its process.
        pid: i32,
        /// The thread.
        tid: i32,
    },
    /// More threads than the mapping has slots: this one was given the unpinned cpu set.
    Beyond {
        /// Creation index.
        index: usize,
        /// Its process.
        pid: i32,
        /// The thread.
        tid: i32,
    },
    /// A new process of the program was found.
    Process {
        /// The new process.
        pid: i32,
        /// Its parent.
        parent: i32,
    },
    /// Setting the affinity failed for another reason than the thread having exited.
    Failed {
        /// Creation index.
        index: usize,
        /// The thread.
        tid: i32,
        /// What the kernel said.
        error: String,
    },
}

/// Follows a program (and the processes it starts) and pins its threads to a mapping.
#[derive(Debug)]
pub struct Follower {
    slots: Vec<CpuSet>,
    skip: SkipMask,
    unpinned: CpuSet,
    procs: BTreeSet<i32>,
    seen: HashSet<i32>,
    created: usize,
    next_slot: usize,
    follow_children: bool,
    children_every: u32,
    polls: u64,
}

impl Follower {
    /// Follows process `root`; thread `i` that is not skipped takes the next of `slots`. Skipped
    /// threads and threads beyond the mapping get `unpinned` (normally the cpus numaff itself may
    /// use), so that they do not crowd the PU of the thread that created them.
    pub fn new(root: i32, slots: Vec<CpuSet>, skip: SkipMask, unpinned: CpuSet) -> Self {
        Follower {
            slots,
            skip,
            unpinned,
            procs: std::iter::once(root).collect(),
            seen: HashSet::new(),
            created: 0,
            next_slot: 0,
            follow_children: true,
            children_every: 1,
            polls: 0,
        }
    }

    /// Whether to follow child processes (default: yes).
    pub fn follow_children(&mut self, yes: bool) {
        self.follow_children = yes;
    }

    /// Look for new child processes only every `n`-th poll (default 1: every poll). Reading the
    /// `children` file of every thread is most of a poll's cost for programs with many threads;
    /// threads of a child found late still take their place in creation order (new thread ids of
    /// one poll are ordered together), unless the creator's threads created meanwhile were pinned
    /// before it was found.
    pub fn children_every(&mut self, n: u32) {
        self.children_every = n.max(1);
    }

    /// Threads seen so far.
    pub fn threads_seen(&self) -> usize {
        self.created
    }

    /// Mapping slots used so far.
    pub fn slots_used(&self) -> usize {
        self.next_slot
    }

    /// Processes currently followed.
    pub fn processes(&self) -> Vec<i32> {
        self.procs.iter().copied().collect()
    }

    /// One look at the program: finds new processes and threads and places the new threads.
    pub fn poll(&mut self) -> Vec<Event> {
        let mut events = Vec::new();
        // Count polls down to the next look for children (0 = this poll looks).
        let scan_children = self.follow_children && self.polls == 0;
        self.polls = if self.polls == 0 {
            u64::from(self.children_every) - 1
        } else {
            self.polls - 1
        };
        // New child processes of every followed process (a snapshot; a child seen late still gets
        // the next slots for its threads).
        if scan_children {
            let mut frontier: Vec<i32> = self.procs.iter().copied().collect();
            while let Some(p) = frontier.pop() {
                let Ok(kids) = tasks::children(p) else {
                    continue;
                };
                for k in kids {
                    if self.procs.insert(k) {
                        events.push(Event::Process { pid: k, parent: p });
                        frontier.push(k);
                    }
                }
            }
        }
        // Current threads of every followed process.
        let mut current: Vec<(i32, i32)> = Vec::new();
        let mut gone = Vec::new();
        for &p in &self.procs {
            match list_tids(p) {
                Some(tids) => current.extend(tids.into_iter().map(|t| (t, p))),
                None => gone.push(p),
            }
        }
        for p in gone {
            self.procs.remove(&p);
        }
        current.sort_unstable();
        let now: HashSet<i32> = current.iter().map(|&(t, _)| t).collect();
        for &(tid, pid) in &current {
            if self.seen.contains(&tid) {
                continue;
            }
            let index = self.created;
            self.created += 1;
            let (target, ev) = if self.skip.skips(index) {
                (&self.unpinned, Event::Skipped { index, pid, tid })
            } else if let Some(cpus) = self.slots.get(self.next_slot) {
                let slot = self.next_slot;
                self.next_slot += 1;
                (
                    cpus,
                    Event::Pinned {
                        index,
                        pid,
                        tid,
                        slot,
                        cpus: cpus.clone(),
                    },
                )
            } else {
                (&self.unpinned, Event::Beyond { index, pid, tid })
            };
            match affinity::set(tid, target) {
                Ok(()) => events.push(ev),
                // The thread has exited already: nothing to pin, but it keeps its place in the order.
                Err(e) if e.errno() == Some(libc::ESRCH) => {}
                Err(e) => events.push(Event::Failed {
                    index,
                    tid,
                    error: e.to_string(),
                }),
            }
        }
        // Forget exited threads, so that a reused thread id counts as a new thread.
        self.seen = now;
        events
    }
}

/// The thread ids of a process; `None` when it has exited.
fn list_tids(pid: i32) -> Option<Vec<i32>> {
    let dir = PathBuf::from(format!("/proc/{pid}/task"));
    let entries = std::fs::read_dir(dir).ok()?;
    let tids: Vec<i32> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
        .collect();
    (!tids.is_empty()).then_some(tids)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn skip_masks_as_likwid_pin() {
        let m = SkipMask::parse("0x5").unwrap();
        assert!(m.skips(0) && !m.skips(1) && m.skips(2) && !m.skips(3) && !m.skips(100));
        let m = SkipMask::parse("0x10").unwrap();
        assert!(m.skips(4) && !m.skips(0));
        assert!(SkipMask::parse("3").unwrap().skips(1));
        assert!(SkipMask::parse("0xg").unwrap_err().contains("'g'"));
        assert!(SkipMask::parse("0x").is_err());
    }

    fn gettid() -> i32 {
        // SAFETY: gettid has no preconditions.
        unsafe { libc::syscall(libc::SYS_gettid) as i32 }
    }

    #[test]
    fn pins_a_launched_process_and_forgets_it_when_it_exits() {
        // Multi-threaded programs, skip masks, children and threads beyond the mapping are tested
        // end to end with a C program in crates/cli/tests/apply.rs.
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let all = affinity::get(gettid()).unwrap();
        let first: CpuSet = all.first().into_iter().collect();
        let mut f = Follower::new(pid, vec![first.clone()], SkipMask::default(), all.clone());
        let ev = f.poll();
        assert!(
            matches!(&ev[..], [Event::Pinned { index: 0, slot: 0, tid, .. }] if *tid == pid),
            "{ev:?}"
        );
        assert_eq!(affinity::get(pid).unwrap(), first);
        // Nothing new on the next poll.
        assert!(f.poll().is_empty());
        assert_eq!((f.threads_seen(), f.slots_used()), (1, 1));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(f.poll().is_empty());
        assert!(f.processes().is_empty());
    }
}
