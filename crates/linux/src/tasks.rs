//! The threads of a process from /proc/PID/task/*/stat and comm: tid, name, state, last cpu, cpu time;
//! the difference between two reads (new and vanished threads); and the children of a process
//! (/proc/PID/task/*/children, or a scan of every /proc/N/stat's ppid where the kernel lacks that file).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::error::{read_text, LinuxError, Op, Result, SysError, Target};

/// One thread as read from /proc.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    /// Thread id (the kernel's pid of the task).
    pub tid: i32,
    /// Thread name (comm, at most 15 bytes).
    pub name: String,
    /// State letter: R running, S sleeping, D disk sleep, Z zombie, T stopped, ...
    pub state: char,
    /// The cpu it last ran on (field 39, `processor`).
    pub cpu: u32,
    /// User plus system cpu time, in nanoseconds (clock-tick resolution).
    pub cpu_time_ns: u64,
}

/// The fields numaff uses from one /proc/.../stat line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    /// Field 1.
    pub tid: i32,
    /// Field 2 without the parentheses (may itself contain ") ").
    pub comm: String,
    /// Field 3.
    pub state: char,
    /// Field 4: the parent's process id (0 for the kernel's own tasks).
    pub ppid: i32,
    /// Fields 14 + 15, in clock ticks.
    pub cpu_ticks: u64,
    /// Field 39.
    pub processor: u32,
    /// Field 9: the kernel's task flags (PF_*), e.g. [`PF_EXITING`].
    pub flags: u64,
}

/// The task flag set from the start of exit (before its memory is released and long before it is
/// a zombie): a process that has it is gone for numaff's purposes.
pub const PF_EXITING: u64 = 0x4;

impl Stat {
    /// Whether the task has exited or is exiting: zombie or dead state, or PF_EXITING set. (A killed
    /// process drops its memory in exit_mm() while its state still reads R or D; the kernel then
    /// answers EINVAL, not ESRCH, to move_pages and migrate_pages on it.)
    pub fn exiting(&self) -> bool {
        matches!(self.state, 'Z' | 'X') || self.flags & PF_EXITING != 0
    }
}

/// Parses a stat line. comm is everything between the first '(' and the *last* ')', so names that
/// contain ") " or parentheses parse correctly.
pub fn parse_stat(line: &str) -> Result<Stat, String> {
    let open = line.find('(').ok_or("no '(' before the name")?;
    let close = line.rfind(')').ok_or("no ')' after the name")?;
    if close < open {
        return Err("')' before '('".into());
    }
    let tid = line[..open]
        .trim()
        .parse()
        .map_err(|_| "tid is not a number".to_string())?;
    let comm = line[open + 1..close].to_string();
    // rest[0] is field 3.
    let rest: Vec<&str> = line[close + 1..].split_whitespace().collect();
    let field = |n: usize| -> Result<&str, String> {
        rest.get(n - 3)
            .copied()
            .ok_or_else(|| format!("only {} fields, field {n} missing", rest.len() + 2))
    };
    let num = |n: usize| -> Result<u64, String> {
        field(n)?
            .parse()
            .map_err(|_| format!("field {n} is not a number"))
    };
    let state = field(3)?.chars().next().ok_or("empty state")?;
    let processor = num(39)?;
    Ok(Stat {
        tid,
        comm,
        state,
        ppid: num(4)?
            .try_into()
            .map_err(|_| "field 4 out of range".to_string())?,
        cpu_ticks: num(14)?
            .checked_add(num(15)?)
            .ok_or("fields 14 and 15 (utime, stime) add up out of range")?,
        processor: u32::try_from(processor).map_err(|_| "field 39 out of range".to_string())?,
        flags: num(9)?,
    })
}

/// Clock ticks per second (USER_HZ).
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as u64
    } else {
        100
    }
}

/// Clock ticks to nanoseconds at `hz` ticks per second.
pub fn ticks_to_ns(ticks: u64, hz: u64) -> u64 {
    (u128::from(ticks) * 1_000_000_000 / u128::from(hz.max(1))) as u64
}

fn is_gone(e: &LinuxError) -> bool {
    matches!(e.errno(), Some(libc::ENOENT) | Some(libc::ESRCH))
}

/// The threads of process `pid`, sorted by tid. Threads that exit while being read are left out; a
/// process that does not exist is [`LinuxError::NoSuchProcess`], one whose threads all exit while
/// being read an error saying it has exited.
pub fn threads(pid: i32) -> Result<Vec<Task>> {
    let dir = PathBuf::from(format!("/proc/{pid}/task"));
    let entries = std::fs::read_dir(&dir).map_err(|e| {
        if pid <= 0 || !Path::new(&format!("/proc/{pid}")).exists() {
            LinuxError::NoSuchProcess { pid }
        } else {
            LinuxError::read(&dir, &e)
        }
    })?;
    let hz = clock_ticks_per_second();
    let mut tasks = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| LinuxError::read(&dir, &e))?;
        let Some(tid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        match read_task(&entry.path(), tid, hz) {
            Ok(t) => tasks.push(t),
            Err(e) if is_gone(&e) => continue,
            Err(e) => return Err(e),
        }
    }
    if tasks.is_empty() {
        // Every thread vanished: the process has exited.
        return Err(SysError::new(Op::Read, Target::Path(dir), libc::ESRCH).into());
    }
    tasks.sort_by_key(|t| t.tid);
    Ok(tasks)
}

fn read_task(dir: &Path, tid: i32, hz: u64) -> Result<Task> {
    let stat_path = dir.join("stat");
    let text = read_text(&stat_path)?;
    let stat = parse_stat(text.trim_end()).map_err(|reason| LinuxError::Parse {
        file: stat_path.clone(),
        line_no: 1,
        line: text.trim_end().to_string(),
        reason,
    })?;
    // comm holds the same name without any parsing ambiguity; fall back to stat's if it is gone.
    let name = read_text(&dir.join("comm"))
        .map(|s| s.strip_suffix('\n').unwrap_or(&s).to_string())
        .unwrap_or(stat.comm);
    Ok(Task {
        tid,
        name,
        state: stat.state,
        cpu: stat.processor,
        cpu_time_ns: ticks_to_ns(stat.cpu_ticks, hz),
    })
}

/// What changed between two reads of a process' threads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskDiff {
    /// Tids present in the second read only, sorted.
    pub new: Vec<i32>,
    /// Tids present in the first read only, sorted.
    pub vanished: Vec<i32>,
}

/// New and vanished threads from `before` to `after`.
pub fn diff(before: &[Task], after: &[Task]) -> TaskDiff {
    let b: BTreeSet<i32> = before.iter().map(|t| t.tid).collect();
    let a: BTreeSet<i32> = after.iter().map(|t| t.tid).collect();
    TaskDiff {
        new: a.difference(&b).copied().collect(),
        vanished: b.difference(&a).copied().collect(),
    }
}

/// Whether this kernel has /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN).
pub fn children_file_supported() -> bool {
    Path::new("/proc/thread-self/children").exists()
}

/// The child processes of `pid`, sorted: from every thread's /proc/PID/task/TID/children where the
/// kernel has that file, else from a scan of /proc/*/stat for processes whose parent is `pid`.
/// Either way it is a snapshot: children may be born or reaped while it is read. A process that does
/// not exist is an error saying it has exited.
pub fn children(pid: i32) -> Result<Vec<i32>> {
    if !children_file_supported() {
        return children_by_scan(pid);
    }
    let dir = PathBuf::from(format!("/proc/{pid}/task"));
    let entries = std::fs::read_dir(&dir).map_err(|e| LinuxError::read(&dir, &e))?;
    let mut kids = BTreeSet::new();
    for entry in entries {
        let entry = entry.map_err(|e| LinuxError::read(&dir, &e))?;
        let path = entry.path().join("children");
        match read_text(&path) {
            Ok(text) => {
                for w in text.split_whitespace() {
                    let child = w.parse().map_err(|_| LinuxError::Parse {
                        file: path.clone(),
                        line_no: 1,
                        line: text.trim_end().to_string(),
                        reason: format!("{w:?} is not a pid"),
                    })?;
                    kids.insert(child);
                }
            }
            Err(e) if is_gone(&e) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(kids.into_iter().collect())
}

/// The child processes of `pid`, sorted, from the ppid (field 4) of every /proc/N/stat. Works on
/// every kernel; costs one read per process on the machine.
pub fn children_by_scan(pid: i32) -> Result<Vec<i32>> {
    let own = PathBuf::from(format!("/proc/{pid}"));
    if !own.exists() {
        return Err(SysError::new(Op::Read, Target::Path(own), libc::ESRCH).into());
    }
    Ok(ppid_table()?
        .into_iter()
        .filter(|&(_, ppid)| ppid == pid)
        .map(|(p, _)| p)
        .collect())
}

/// Every process of the machine with its parent, sorted by pid (processes that exit meanwhile are
/// left out).
fn ppid_table() -> Result<Vec<(i32, i32)>> {
    let proc = Path::new("/proc");
    let entries = std::fs::read_dir(proc).map_err(|e| LinuxError::read(proc, &e))?;
    let mut table = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| LinuxError::read(proc, &e))?;
        let Some(p) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let path = entry.path().join("stat");
        let text = match read_text(&path) {
            Ok(t) => t,
            Err(e) if is_gone(&e) => continue,
            Err(e) => return Err(e),
        };
        let stat = parse_stat(text.trim_end()).map_err(|reason| LinuxError::Parse {
            file: path.clone(),
            line_no: 1,
            line: text.trim_end().to_string(),
            reason,
        })?;
        table.push((p, stat.ppid));
    }
    table.sort_unstable();
    Ok(table)
}

/// Every descendant of `pid` (children, their children, ...), sorted, from one scan of /proc (so the
/// tree is consistent with itself): for following a launched program and everything it starts.
pub fn descendants(pid: i32) -> Result<Vec<i32>> {
    let own = PathBuf::from(format!("/proc/{pid}"));
    if !own.exists() {
        return Err(SysError::new(Op::Read, Target::Path(own), libc::ESRCH).into());
    }
    let table = ppid_table()?;
    let mut found = BTreeSet::new();
    let mut frontier = vec![pid];
    while let Some(parent) = frontier.pop() {
        for &(p, pp) in &table {
            if pp == parent && p != pid && found.insert(p) {
                frontier.push(p);
            }
        }
    }
    Ok(found.into_iter().collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::sync::mpsc;

    // A stat line shaped like the kernel's (52 fields), processor = 1, utime 250, stime 50.
    const STAT: &str = "4242 (evil) (name) S) R 4200 4242 4200 34816 4242 4194560 120 0 0 0 250 50 0 0 20 0 \
3 0 123456 10000000 500 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0";

    #[test]
    fn comm_with_close_paren_space() {
        let s = parse_stat(STAT).unwrap();
        assert_eq!(s.tid, 4242);
        assert_eq!(s.comm, "evil) (name) S");
        assert_eq!(s.state, 'R');
        assert_eq!(s.ppid, 4200);
        assert_eq!(s.cpu_ticks, 300);
        assert_eq!(s.processor, 1);
        assert_eq!(s.flags, 4194560);
        assert!(!s.exiting());
        assert_eq!(ticks_to_ns(300, 100), 3_000_000_000);
    }

    #[test]
    fn exiting_from_state_or_pf_exiting() {
        // Killed, memory released, not yet a zombie: state R, flags with PF_EXITING (0x4).
        let killed = STAT.replace(" 4194560 ", &format!(" {} ", 4194560 | PF_EXITING));
        let s = parse_stat(&killed).unwrap();
        assert_eq!((s.state, s.exiting()), ('R', true));
        let zombie = STAT.replace(") R 4200", ") Z 4200");
        assert!(parse_stat(&zombie).unwrap().exiting());
    }

    #[test]
    fn short_or_broken_stat_is_an_error() {
        assert!(parse_stat("1 (x) S 0 0").unwrap_err().contains("missing"));
        assert!(parse_stat("1 x S").is_err());
        assert!(parse_stat("a (x) S").is_err());
    }

    #[test]
    fn utime_and_stime_past_u64_together_are_an_error() {
        let huge = STAT.replace(" 250 50 ", &format!(" {} 50 ", u64::MAX));
        assert!(parse_stat(&huge).unwrap_err().contains("out of range"));
    }

    #[test]
    fn own_threads_seen_and_diffed() {
        let pid = std::process::id() as i32;
        let before = threads(pid).unwrap();
        assert!(before.iter().any(|t| t.tid == pid));
        let (tx, rx) = mpsc::channel();
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let stop_rx = std::sync::Arc::new(std::sync::Mutex::new(stop_rx));
        let handles: Vec<_> = (0..2)
            .map(|i| {
                let tx = tx.clone();
                let stop = stop_rx.clone();
                std::thread::Builder::new()
                    .name(format!("numaff-t{i}"))
                    .spawn(move || {
                        // SAFETY: gettid has no preconditions.
                        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
                        tx.send(tid).unwrap();
                        let _ = stop.lock().unwrap().recv();
                    })
                    .unwrap()
            })
            .collect();
        let tids: BTreeSet<i32> = (0..2).map(|_| rx.recv().unwrap()).collect();
        let during = threads(pid).unwrap();
        for tid in &tids {
            let t = during.iter().find(|t| t.tid == *tid).unwrap();
            assert!(t.name.starts_with("numaff-t"), "{}", t.name);
            assert!(t.cpu < 4096);
            assert!("RSDI".contains(t.state), "{}", t.state);
        }
        let d = diff(&before, &during);
        assert!(tids.iter().all(|t| d.new.contains(t)), "{d:?}");
        drop(stop_tx);
        for h in handles {
            h.join().unwrap();
        }
        let after = threads(pid).unwrap();
        let d = diff(&during, &after);
        assert!(tids.iter().all(|t| d.vanished.contains(t)), "{d:?}");
    }

    #[test]
    fn a_pid_that_never_existed_is_no_such_process() {
        let e = threads(i32::MAX).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("no such process {}", i32::MAX)),
            "{e}"
        );
        assert!(!e.contains("has exited"), "{e}");
    }
    #[test]
    fn children_and_descendants_of_a_launched_program() {
        // sh starts a sleep child, which the shell waits for: sh -> sleep.
        let mut sh = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & sleep 30 & wait"])
            .spawn()
            .unwrap();
        let me = std::process::id() as i32;
        let sh_pid = sh.id() as i32;
        let mut kids = Vec::new();
        for _ in 0..200 {
            kids = children_by_scan(sh_pid).unwrap();
            if kids.len() == 2 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(kids.len(), 2, "{kids:?}");
        assert_eq!(children(sh_pid).unwrap(), kids);
        assert!(children(me).unwrap().contains(&sh_pid));
        assert!(children_by_scan(me).unwrap().contains(&sh_pid));
        let mut d = descendants(me).unwrap();
        d.retain(|p| *p == sh_pid || kids.contains(p));
        let mut want = kids.clone();
        want.push(sh_pid);
        want.sort();
        assert_eq!(d, want);
        // SAFETY: kill has no memory-safety preconditions; these are our own children.
        for k in &kids {
            unsafe { libc::kill(*k, libc::SIGKILL) };
        }
        sh.wait().unwrap();
        for e in [
            children(i32::MAX),
            children_by_scan(i32::MAX),
            descendants(i32::MAX),
        ] {
            let m = e.unwrap_err().to_string();
            assert!(
                m.ends_with(&format!("process {} has exited", i32::MAX)),
                "{m}"
            );
        }
    }
}
