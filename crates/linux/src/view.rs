//! What `numaff show` reports of a process: its threads with their cpu, node and cpu use, its
//! mappings with their pages per node and policy, and its pages per node in total.

use std::collections::BTreeMap;
use std::time::Duration;

use numaff_machine::Machine;
use serde::Serialize;

use crate::error::{Op, Result, SysError, Target};
use crate::numa_maps::{self, MappingKind, Policy, PolicyMode};
use crate::{maps, tasks};

/// One thread of a process.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThreadView {
    /// Kernel thread id.
    pub tid: i32,
    /// Thread name (comm).
    pub name: String,
    /// Scheduler state letter (R, S, D, ...).
    pub state: char,
    /// The cpu it last ran on.
    pub cpu: u32,
    /// The node of that cpu.
    pub node: Option<u32>,
    /// Share of one cpu used between two reads, in percent; `None` on a single read.
    pub cpu_percent: Option<f64>,
}

/// One mapping of a process.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MappingView {
    /// First address.
    pub start: u64,
    /// One past the last address (from /proc/PID/maps; `start` when the mapping vanished).
    pub end: u64,
    /// anon, heap, stack or file.
    pub kind: &'static str,
    /// The file, for file mappings.
    pub path: Option<String>,
    /// The memory policy as the kernel prints it (`default`, `bind:0-1`, `interleave:0-3`).
    pub policy: String,
    /// Pages present per node, in pages of `page_size`.
    pub pages_per_node: BTreeMap<u32, u64>,
    /// The page size of the mapping in bytes.
    pub page_size: u64,
    /// Backed by hugetlbfs pages.
    pub huge: bool,
}

/// A process as `numaff show` reports it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessView {
    /// Process id.
    pub pid: i32,
    /// Its command line (or name).
    pub command: String,
    /// Its threads, by tid.
    pub threads: Vec<ThreadView>,
    /// Its mappings, by address.
    pub mappings: Vec<MappingView>,
    /// Pages present per node over all mappings, in base pages.
    pub pages_per_node: BTreeMap<u32, u64>,
}

/// Reads a process: threads, mappings, pages per node. With `cpu_window`, the threads are read twice
/// that far apart to compute each thread's cpu use; without it `cpu_percent` is `None`.
///
/// A zombie (every thread in state Z or X) has exited: it is reported as such, since it runs nothing
/// and has no memory left.
pub fn process(pid: i32, machine: &Machine, cpu_window: Option<Duration>) -> Result<ProcessView> {
    let first = live_threads(pid)?;
    let (threads, elapsed) = match cpu_window {
        Some(window) => {
            let t0 = std::time::Instant::now();
            std::thread::sleep(window);
            let second = live_threads(pid)?;
            (second, Some((first, t0.elapsed())))
        }
        None => (first, None),
    };
    let threads = threads
        .iter()
        .map(|t| {
            let cpu_percent = elapsed.as_ref().and_then(|(before, wall)| {
                let prev = before.iter().find(|b| b.tid == t.tid)?;
                let used = t.cpu_time_ns.saturating_sub(prev.cpu_time_ns) as f64;
                Some(100.0 * used / wall.as_nanos().max(1) as f64)
            });
            ThreadView {
                tid: t.tid,
                name: t.name.clone(),
                state: t.state,
                cpu: t.cpu,
                node: machine.node_of_pu(t.cpu),
                cpu_percent,
            }
        })
        .collect();
    let numa = numa_maps::read(pid)?;
    let ranges = maps::read(pid)?;
    let pages_per_node = numa_maps::total_pages_per_node(&numa, machine.page_size);
    let mappings = numa
        .iter()
        .map(|m| {
            let (kind, path) = match &m.kind {
                MappingKind::File(p) => ("file", Some(p.display().to_string())),
                MappingKind::Heap => ("heap", None),
                MappingKind::Stack => ("stack", None),
                MappingKind::Anon => ("anon", None),
            };
            MappingView {
                start: m.start,
                end: ranges
                    .iter()
                    .find(|r| r.start == m.start)
                    .map_or(m.start, |r| r.end),
                kind,
                path,
                policy: policy_text(&m.policy),
                pages_per_node: m.pages_per_node.clone(),
                page_size: if m.kernel_page_size > 0 {
                    m.kernel_page_size
                } else {
                    machine.page_size
                },
                huge: m.huge,
            }
        })
        .collect();
    Ok(ProcessView {
        pid,
        command: command_of(pid),
        threads,
        mappings,
        pages_per_node,
    })
}

/// The threads of a live process; a zombie is an error saying the process has exited.
fn live_threads(pid: i32) -> Result<Vec<tasks::Task>> {
    let threads = tasks::threads(pid)?;
    if threads.iter().all(|t| matches!(t.state, 'Z' | 'X')) {
        let dir = std::path::PathBuf::from(format!("/proc/{pid}/task"));
        return Err(SysError::new(Op::Read, Target::Path(dir), libc::ESRCH).into());
    }
    Ok(threads)
}

/// The command line of a process, arguments joined by spaces; its name when the command line is
/// empty (kernel threads) or unreadable.
pub fn command_of(pid: i32) -> String {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let words: Vec<String> = cmdline
        .split(|&b| b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    if words.is_empty() {
        std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .map(|s| format!("[{}]", s.trim_end()))
            .unwrap_or_default()
    } else {
        words.join(" ")
    }
}

/// A policy in the kernel's numa_maps notation.
pub fn policy_text(p: &Policy) -> String {
    let mode = match &p.mode {
        PolicyMode::Default => "default",
        PolicyMode::Local => "local",
        PolicyMode::Preferred => "prefer",
        PolicyMode::PreferredMany => "prefer (many)",
        PolicyMode::Bind => "bind",
        PolicyMode::Interleave => "interleave",
        PolicyMode::WeightedInterleave => "weighted interleave",
        PolicyMode::Other(s) => s.as_str(),
    };
    let mut out = mode.to_string();
    if !p.flags.is_empty() {
        out.push('=');
        out.push_str(&p.flags.join("|"));
    }
    if !p.nodes.is_empty() {
        out.push(':');
        out.push_str(&p.nodes.to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn one_node_machine() -> Machine {
        numaff_machine::sysfs::discover().unwrap()
    }

    #[test]
    fn view_of_this_process_has_its_threads_and_mappings() {
        let machine = one_node_machine();
        let pid = std::process::id() as i32;
        // A buffer with touched pages, so that an anonymous mapping has present pages.
        // `black_box`: an optimised build otherwise drops the unused buffer before it is touched.
        let buf = std::hint::black_box(vec![1u8; 8 << 20]);
        let view = process(pid, &machine, Some(Duration::from_millis(50))).unwrap();
        assert_eq!(view.pid, pid);
        assert!(view.threads.iter().any(|t| t.tid == pid));
        assert!(view.threads.iter().all(|t| t.cpu_percent.is_some()));
        assert!(view
            .threads
            .iter()
            .all(|t| t.node == machine.node_of_pu(t.cpu)));
        let total: u64 = view.pages_per_node.values().sum();
        assert!(total >= (8 << 20) / machine.page_size, "{total}");
        assert!(view.mappings.iter().all(|m| m.end >= m.start));
        assert!(view.mappings.iter().any(|m| m.kind == "stack"));
        assert!(view.command.contains("numaff_linux") || !view.command.is_empty());
        drop(buf);
    }

    #[test]
    fn policies_print_as_the_kernel_does() {
        let line = "7f0000000000 bind=static:0-1 anon=1 dirty=1 N0=1";
        let m = numa_maps::parse_line(line).unwrap();
        assert_eq!(policy_text(&m.policy), "bind=static:0-1");
        let m = numa_maps::parse_line("7f0000000000 default anon=1 N0=1").unwrap();
        assert_eq!(policy_text(&m.policy), "default");
    }

    #[test]
    fn a_zombie_has_exited() {
        let machine = one_node_machine();
        let child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        // Not reaped yet: a zombie until `child` is waited for.
        std::thread::sleep(Duration::from_millis(300));
        let e = process(pid, &machine, None).unwrap_err().to_string();
        assert!(e.contains("exited"), "{e}");
        drop(child);
    }

    #[test]
    fn a_process_that_exited_is_a_clear_error() {
        let machine = one_node_machine();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        let e = process(pid, &machine, None).unwrap_err().to_string();
        assert!(e.contains("no such process"), "{e}");
    }
}
