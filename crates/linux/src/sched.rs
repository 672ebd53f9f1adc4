//! The NUMA-balancing fields of /proc/PID/sched (and /proc/PID/task/TID/sched), present when the
//! kernel is built with CONFIG_NUMA_BALANCING (kernel/sched/debug.c `sched_show_numa`):
//!
//! ```text
//! mm->numa_scan_seq                            :                    0
//! numa_pages_migrated                          :                    0
//! numa_preferred_nid                           :                   -1
//! total_numa_faults                            :                    0
//! current_node=0, numa_group_id=0
//! numa_faults node=0 task_private=0 task_shared=0 group_private=0 group_shared=0
//! ```
//!
//! The parser is tolerant: it ignores every line it does not know (the file is a debugging aid whose
//! other fields change between kernel versions) and any `key=value` pair it does not know, and fails
//! only on a known field whose value is not a number.

use std::path::{Path, PathBuf};

use crate::error::{read_text, LinuxError, Result};

/// Faults the kernel's NUMA balancing recorded on one node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeFaults {
    /// The node.
    pub node: u32,
    /// Faults of this task on pages only it used.
    pub task_private: u64,
    /// Faults of this task on pages other tasks used too.
    pub task_shared: u64,
    /// The same for the task's NUMA group.
    pub group_private: u64,
    /// The same for the task's NUMA group.
    pub group_shared: u64,
}

/// The NUMA fields of a sched file. Fields the kernel did not print are None / empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SchedNuma {
    /// `mm->numa_scan_seq`: how many times the address space has been scanned.
    pub numa_scan_seq: Option<u64>,
    /// Pages NUMA balancing migrated for this task.
    pub numa_pages_migrated: Option<u64>,
    /// The node balancing prefers for this task; None when -1 (no preference) or absent.
    pub numa_preferred_nid: Option<u32>,
    /// Whether a `numa_preferred_nid` line was present at all.
    pub has_preferred_nid: bool,
    /// Sum of the task's recorded NUMA faults.
    pub total_numa_faults: Option<u64>,
    /// The node of the cpu the task is on.
    pub current_node: Option<u32>,
    /// The NUMA group (tasks sharing memory) id; 0 when none.
    pub numa_group_id: Option<u64>,
    /// Per-node faults, in file order.
    pub faults: Vec<NodeFaults>,
}

impl SchedNuma {
    /// Whether the file had any NUMA-balancing field (false: kernel without CONFIG_NUMA_BALANCING).
    pub fn present(&self) -> bool {
        self.numa_pages_migrated.is_some()
            || self.total_numa_faults.is_some()
            || self.current_node.is_some()
            || !self.faults.is_empty()
    }
}

/// Reads the NUMA fields of /proc/`pid`/sched (the main thread's; whole-process fields such as
/// numa_scan_seq are shared).
pub fn read(pid: i32) -> Result<SchedNuma> {
    read_from(&PathBuf::from(format!("/proc/{pid}/sched")))
}

/// Reads the NUMA fields of one thread: /proc/`pid`/task/`tid`/sched.
pub fn read_thread(pid: i32, tid: i32) -> Result<SchedNuma> {
    read_from(&PathBuf::from(format!("/proc/{pid}/task/{tid}/sched")))
}

/// Reads and parses a sched file at `path`.
pub fn read_from(path: &Path) -> Result<SchedNuma> {
    parse(&read_text(path)?, path)
}

fn num<T: std::str::FromStr>(v: &str, key: &str, path: &Path, no: usize, line: &str) -> Result<T> {
    v.trim().parse().map_err(|_| LinuxError::Parse {
        file: path.to_path_buf(),
        line_no: no,
        line: line.to_string(),
        reason: format!("{key} is not a number"),
    })
}

/// Parses the text of a sched file (`path` only names it in errors).
pub fn parse(text: &str, path: &Path) -> Result<SchedNuma> {
    let mut s = SchedNuma::default();
    for (i, line) in text.lines().enumerate() {
        let no = i + 1;
        let t = line.trim();
        if let Some((key, value)) = t.split_once(':') {
            let key = key.trim();
            match key {
                "mm->numa_scan_seq" => s.numa_scan_seq = Some(num(value, key, path, no, line)?),
                "numa_pages_migrated" => {
                    s.numa_pages_migrated = Some(num(value, key, path, no, line)?)
                }
                "numa_preferred_nid" => {
                    let v: i64 = num(value, key, path, no, line)?;
                    s.has_preferred_nid = true;
                    s.numa_preferred_nid = u32::try_from(v).ok();
                }
                "total_numa_faults" => s.total_numa_faults = Some(num(value, key, path, no, line)?),
                _ => {}
            }
        } else if t.starts_with("current_node=") {
            for pair in t.split(',') {
                match pair.trim().split_once('=') {
                    Some(("current_node", v)) => {
                        let v: i64 = num(v, "current_node", path, no, line)?;
                        s.current_node = u32::try_from(v).ok();
                    }
                    Some(("numa_group_id", v)) => {
                        s.numa_group_id = Some(num(v, "numa_group_id", path, no, line)?)
                    }
                    _ => {}
                }
            }
        } else if let Some(rest) = t.strip_prefix("numa_faults ") {
            let mut f = NodeFaults::default();
            let mut has_node = false;
            for pair in rest.split_whitespace() {
                let Some((k, v)) = pair.split_once('=') else {
                    continue;
                };
                let v = v.trim_end_matches(',');
                match k {
                    "node" => {
                        f.node = num(v, k, path, no, line)?;
                        has_node = true;
                    }
                    "task_private" => f.task_private = num(v, k, path, no, line)?,
                    "task_shared" => f.task_shared = num(v, k, path, no, line)?,
                    "group_private" => f.group_private = num(v, k, path, no, line)?,
                    "group_shared" => f.group_shared = num(v, k, path, no, line)?,
                    _ => {}
                }
            }
            if has_node {
                s.faults.push(f);
            }
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A 2-node sched file as Linux 6.x prints it (other fields shortened).
    const TWO_NODES: &str = "\
bench (812, #threads: 4)
-------------------------------------------------------------------
se.exec_start                                :       2254524.662975
se.nr_migrations                             :                   17
policy                                       :                    0
mm->numa_scan_seq                            :                   12
numa_pages_migrated                          :                 4096
numa_preferred_nid                           :                    1
total_numa_faults                            :                  933
current_node=1, numa_group_id=812
numa_faults node=0 task_private=10 task_shared=3 group_private=120 group_shared=7
numa_faults node=1 task_private=800 task_shared=0 group_private=900 group_shared=2
";

    #[test]
    fn two_nodes() {
        let s = parse(TWO_NODES, Path::new("/proc/812/sched")).unwrap();
        assert!(s.present());
        assert_eq!(s.numa_scan_seq, Some(12));
        assert_eq!(s.numa_pages_migrated, Some(4096));
        assert_eq!(s.numa_preferred_nid, Some(1));
        assert_eq!(s.total_numa_faults, Some(933));
        assert_eq!(s.current_node, Some(1));
        assert_eq!(s.numa_group_id, Some(812));
        assert_eq!(
            s.faults,
            vec![
                NodeFaults {
                    node: 0,
                    task_private: 10,
                    task_shared: 3,
                    group_private: 120,
                    group_shared: 7
                },
                NodeFaults {
                    node: 1,
                    task_private: 800,
                    task_shared: 0,
                    group_private: 900,
                    group_shared: 2
                },
            ]
        );
    }

    #[test]
    fn no_preference_unknown_fields_and_no_balancing() {
        // Older layout (no numa_scan_seq line), preferred -1, an unknown pair and an unknown line.
        let text = "x (1, #threads: 1)\n\
                    numa_pages_migrated : 0\n\
                    numa_preferred_nid : -1\n\
                    total_numa_faults : 0\n\
                    some_future_field=3\n\
                    current_node=0, numa_group_id=0, new_thing=9\n\
                    numa_faults node=0 task_private=0 task_shared=0 group_private=0 group_shared=0 hot=1\n";
        let s = parse(text, Path::new("f")).unwrap();
        assert_eq!(s.numa_scan_seq, None);
        assert_eq!(s.numa_preferred_nid, None);
        assert!(s.has_preferred_nid);
        assert_eq!(s.current_node, Some(0));
        assert_eq!(s.faults.len(), 1);
        // Without CONFIG_NUMA_BALANCING there is nothing.
        let s = parse("x (1, #threads: 1)\nse.exec_start : 1.0\n", Path::new("f")).unwrap();
        assert!(!s.present());
        assert_eq!(s, SchedNuma::default());
    }

    #[test]
    fn bad_number_names_line() {
        let e = parse("a\ntotal_numa_faults : lots\n", Path::new("/proc/9/sched"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("malformed line 2 of /proc/9/sched: total_numa_faults is not a number"),
            "{e}"
        );
    }

    #[test]
    fn own_sched_file() {
        let s = read(std::process::id() as i32).unwrap();
        if crate::balancing::numa_balancing().unwrap()
            != crate::balancing::NumaBalancing::NotSupported
        {
            // CONFIG_NUMA_BALANCING kernels print the fields even with balancing off.
            assert!(s.present(), "{s:?}");
            assert!(s.current_node.is_some(), "{s:?}");
        }
        let e = read(i32::MAX).unwrap_err().to_string();
        assert!(
            e.ends_with(&format!("process {} has exited", i32::MAX)),
            "{e}"
        );
    }
}
