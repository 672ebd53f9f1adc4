//! The one error type of numaff-linux: each failed syscall or /proc read says what failed, on what,
//! and what to do, with specific advice for EPERM, ESRCH, EACCES, ENOMEM and EINVAL.

use std::fmt;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What numaff was trying to do when the kernel said no.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// sched_getaffinity on a thread.
    GetAffinity,
    /// sched_setaffinity on a thread.
    SetAffinity,
    /// move_pages with nodes = NULL (where are the pages).
    QueryPages,
    /// move_pages with target nodes and MPOL_MF_MOVE (pages mapped by this process only).
    MovePages,
    /// move_pages with MPOL_MF_MOVE_ALL (shared pages too; needs CAP_SYS_NICE).
    MovePagesAll,
    /// migrate_pages: every page of a process from some nodes to others.
    MigratePages,
    /// set_mempolicy on the calling thread.
    SetMempolicy,
    /// get_mempolicy (of the calling thread, or of an address of this process).
    GetMempolicy,
    /// mbind on an address range of this process.
    Mbind,
    /// Reading a file (usually under /proc or /sys).
    Read,
}

impl Op {
    fn verb(self) -> &'static str {
        match self {
            Op::GetAffinity => "get the cpu affinity",
            Op::SetAffinity => "set the cpu affinity",
            Op::QueryPages => "query the page placement",
            Op::MovePages => "move pages",
            Op::MovePagesAll => "move pages (shared ones included)",
            Op::MigratePages => "migrate the pages",
            Op::SetMempolicy => "set the memory policy",
            Op::GetMempolicy => "get the memory policy",
            Op::Mbind => "set the memory policy of a range",
            Op::Read => "read",
        }
    }

    /// The capability that lets a caller act on another user's process, if any.
    ///
    /// move_pages and migrate_pages check `ptrace_may_access(PTRACE_MODE_READ_REALCREDS)` since Linux
    /// 4.13 (same real uid, or CAP_SYS_PTRACE); their man pages still name CAP_SYS_NICE, which was the
    /// check before. CAP_SYS_NICE is what MPOL_MF_MOVE_ALL needs, and what migrate_pages needs for
    /// nodes outside the target's cpuset.
    fn capability(self) -> &'static str {
        match self {
            Op::SetAffinity => "CAP_SYS_NICE",
            Op::MovePagesAll => {
                "CAP_SYS_NICE (moving shared pages needs it) and, for another user's process, \
                 CAP_SYS_PTRACE"
            }
            Op::MigratePages => {
                "CAP_SYS_PTRACE (and CAP_SYS_NICE for target nodes outside the process's cpuset)"
            }
            Op::MovePages
            | Op::GetAffinity
            | Op::QueryPages
            | Op::SetMempolicy
            | Op::GetMempolicy
            | Op::Mbind
            | Op::Read => "CAP_SYS_PTRACE",
        }
    }

    fn einval_advice(self) -> &'static str {
        match self {
            Op::SetAffinity => {
                "the cpu set has no cpu that is online and allowed to the thread (cgroup cpuset); \
                 choose cpus listed by `numaff topo`"
            }
            Op::GetAffinity => "the kernel rejected the cpu mask size; this is a bug in numaff, please report it",
            Op::QueryPages | Op::MovePages | Op::MovePagesAll | Op::MigratePages => {
                "a node id, page address or flag was refused; check that the nodes exist and have memory \
                 (`numaff topo`)"
            }
            Op::SetMempolicy | Op::Mbind => {
                "the kernel refused the mode, flags or nodes: the mode may be unknown to this kernel \
                 (see the detected modes), DEFAULT and LOCAL take no nodes, the others need at least one \
                 node allowed to this process (cpuset), and mbind needs a page-aligned range"
            }
            Op::GetMempolicy => {
                "the kernel refused the flags or node mask size; this is a bug in numaff, please report it"
            }
            Op::Read => "the kernel refused the read; check that this kernel provides the file",
        }
    }
}

/// What an operation was applied to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A whole process.
    Pid(i32),
    /// One thread (task) of a process; `pid` is its thread group when known.
    Tid {
        /// The thread group id, when known.
        pid: Option<i32>,
        /// The thread id.
        tid: i32,
    },
    /// A file, e.g. /proc/812/numa_maps.
    Path(PathBuf),
}

impl Target {
    /// The process this target belongs to, if it is (or lies under /proc/) a process.
    pub fn pid(&self) -> Option<i32> {
        match self {
            Target::Pid(p) => Some(*p),
            Target::Tid { pid, tid } => Some(pid.unwrap_or(*tid)),
            Target::Path(p) => {
                let mut c = p.components().skip_while(|c| c.as_os_str() != "proc");
                c.next()?;
                c.next()?.as_os_str().to_str()?.parse().ok()
            }
        }
    }

    /// The /proc entry whose owner is the owner of the target.
    fn proc_dir(&self) -> Option<PathBuf> {
        match self {
            Target::Tid { pid: Some(p), tid } => {
                Some(PathBuf::from(format!("/proc/{p}/task/{tid}")))
            }
            _ => self.pid().map(|p| PathBuf::from(format!("/proc/{p}"))),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Pid(p) => write!(f, "pid {p}"),
            Target::Tid { pid: Some(p), tid } if p != tid => write!(f, "thread {tid} of pid {p}"),
            Target::Tid { tid, .. } => write!(f, "thread {tid}"),
            Target::Path(p) => write!(f, "{}", p.display()),
        }
    }
}

/// Everything that can go wrong in numaff-linux.
#[derive(Debug, thiserror::Error)]
pub enum LinuxError {
    /// A syscall or file operation failed with an errno.
    #[error("{0}")]
    Sys(#[from] SysError),
    /// A process named by the user does not exist (not even as a zombie).
    #[error("no such process {pid}: none runs with that pid (the pid is wrong, or the process is gone; `ps -e` lists the running processes)")]
    NoSuchProcess {
        /// The pid given.
        pid: i32,
    },
    /// A node asked for does not exist or has no memory (the kernel said ENODEV or EINVAL).
    #[error(
        "cannot {} of {target}: node {node} does not exist or has no memory here (nodes with memory: \
         {with_memory}); choose one of those (`numaff topo`)",
        op.verb()
    )]
    NoNode {
        /// What was attempted.
        op: Op,
        /// On what.
        target: Target,
        /// The first node asked for that has no memory.
        node: u32,
        /// The nodes that have memory, in list syntax ("0-1").
        with_memory: String,
        /// The errno the kernel returned.
        errno: i32,
    },
    /// A kernel-provided text file had a line numaff does not understand.
    #[error(
        "malformed line {line_no} of {}: {reason}: {line:?}; this kernel's format is not understood by \
         numaff, please report it with the line",
        file.display()
    )]
    Parse {
        /// The file the line came from.
        file: PathBuf,
        /// 1-based line number.
        line_no: usize,
        /// The offending line, as read.
        line: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// The result type of numaff-linux.
pub type Result<T, E = LinuxError> = std::result::Result<T, E>;

/// A failed syscall or file operation: what, on what, the errno, and the owner of the target if known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysError {
    /// What was attempted.
    pub op: Op,
    /// On what.
    pub target: Target,
    /// The errno the kernel returned.
    pub errno: i32,
    /// The uid that owns the target process, looked up for permission errors.
    pub owner_uid: Option<u32>,
    /// numaff's effective uid, looked up with `owner_uid`: when they are the same, the process
    /// is refused for privileges other than its owner's.
    pub caller_uid: Option<u32>,
}

impl SysError {
    /// An error for `op` on `target` with `errno`; for permission errors the owner of the target
    /// process is looked up so the message can name it.
    pub fn new(op: Op, target: Target, errno: i32) -> Self {
        // Policies act on the caller itself: its owner is no news.
        let own = matches!(op, Op::SetMempolicy | Op::GetMempolicy | Op::Mbind);
        let owner_uid = if matches!(errno, libc::EPERM | libc::EACCES) && !own {
            target
                .proc_dir()
                .and_then(|d| std::fs::metadata(d).ok())
                .map(|m| m.uid())
        } else {
            None
        };
        // SAFETY: geteuid has no preconditions.
        let caller_uid = owner_uid.map(|_| unsafe { libc::geteuid() });
        SysError {
            op,
            target,
            errno,
            owner_uid,
            caller_uid,
        }
    }

    /// The error of the last failed libc call (reads `errno`).
    pub fn last(op: Op, target: Target) -> Self {
        let errno = io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO);
        Self::new(op, target, errno)
    }

    fn process_gone(&self) -> bool {
        self.errno == libc::ESRCH || (self.errno == libc::ENOENT && self.target.pid().is_some())
    }
}

/// A short lowercase description of an errno.
pub fn errno_text(errno: i32) -> String {
    match errno {
        libc::EPERM | libc::EACCES => "permission denied".into(),
        libc::ESRCH => "no such process".into(),
        libc::ENOMEM => "out of memory".into(),
        libc::EINVAL => "invalid argument".into(),
        libc::ENOENT => "no such file or directory".into(),
        libc::EFAULT => "bad address".into(),
        libc::ENOSYS => "not implemented by this kernel".into(),
        libc::ENODEV => "no such node".into(),
        e => {
            let s = io::Error::from_raw_os_error(e).to_string();
            // "Operation not permitted (os error 1)" -> "operation not permitted (errno 1)"
            let s = s.split(" (os error").next().unwrap_or(&s).to_string();
            let mut c = s.chars();
            match c.next() {
                Some(first) => format!("{}{} (errno {e})", first.to_lowercase(), c.as_str()),
                None => format!("errno {e}"),
            }
        }
    }
}

impl fmt::Display for SysError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.op {
            Op::Read => format!("cannot read {}", self.target),
            op => format!("cannot {} of {}", op.verb(), self.target),
        };
        write!(f, "{what}")?;
        if let Some(uid) = self.owner_uid {
            write!(f, " (owned by uid {uid})")?;
        }
        if self.process_gone() {
            let pid = self.target.pid().unwrap_or(0);
            return match &self.target {
                Target::Tid { tid, .. } => write!(f, ": thread {tid} has exited"),
                _ => write!(f, ": process {pid} has exited"),
            };
        }
        write!(f, ": {}", errno_text(self.errno))?;
        let advice = match self.errno {
            libc::EACCES if matches!(self.op, Op::MovePages | Op::MovePagesAll) => {
                "the target node is not in the memory nodes the process's cpuset allows \
                 (/proc/PID/status Mems_allowed_list); choose an allowed node or widen the cpuset"
                    .into()
            }
            libc::EPERM if self.op == Op::Mbind => {
                "moving shared pages (MPOL_MF_MOVE_ALL) needs CAP_SYS_NICE; use MPOL_MF_MOVE or run \
                 with CAP_SYS_NICE"
                    .into()
            }
            libc::EPERM | libc::EACCES => match self.owner_uid {
                Some(uid) if self.caller_uid == Some(uid) => format!(
                    "numaff already runs as uid {uid}, its owner: the process has privileges \
                     numaff lacks here (init, a process of another container or user namespace, \
                     or one that Yama's ptrace_scope protects); it needs {} over that process, \
                     from its own namespace",
                    self.op.capability()
                ),
                Some(uid) => format!(
                    "run as that user (uid {uid}) or with {}",
                    self.op.capability()
                ),
                None => format!("run as the owner or with {}", self.op.capability()),
            },
            libc::ENOMEM => match self.op {
                Op::MovePages | Op::MovePagesAll | Op::MigratePages => "the target node is out of free memory; free memory there or choose another node".into(),
                _ => "the kernel could not allocate memory; free memory or retry with fewer pages".into(),
            },
            libc::EINVAL => self.op.einval_advice().into(),
            libc::ENOSYS => "this kernel lacks NUMA support (CONFIG_NUMA); nothing to place".into(),
            libc::ENOENT => "check the path; this kernel may not provide it".into(),
            libc::ENODEV => {
                "the target node does not exist or has no memory; choose a node with memory (`numaff topo`)"
                    .into()
            }
            libc::EFAULT if self.op == Op::GetMempolicy || self.op == Op::Mbind => {
                "the address is not in any mapping of this process".into()
            }
            _ => "please report this with the command you ran".into(),
        };
        write!(f, "; {advice}")
    }
}

impl std::error::Error for SysError {}

impl LinuxError {
    /// A read of `path` that failed with `err`.
    pub fn read(path: &Path, err: &io::Error) -> Self {
        let errno = err.raw_os_error().unwrap_or(match err.kind() {
            io::ErrorKind::InvalidData => libc::EINVAL,
            _ => libc::EIO,
        });
        LinuxError::Sys(SysError::new(
            Op::Read,
            Target::Path(path.to_path_buf()),
            errno,
        ))
    }

    /// The errno, for syscall and file errors.
    pub fn errno(&self) -> Option<i32> {
        match self {
            LinuxError::Sys(e) => Some(e.errno),
            LinuxError::NoNode { errno, .. } => Some(*errno),
            LinuxError::NoSuchProcess { .. } => Some(libc::ESRCH),
            LinuxError::Parse { .. } => None,
        }
    }
}

/// Reads a whole (small, /proc or /sys) text file, with a [`LinuxError`] naming the path.
pub fn read_text(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| LinuxError::read(path, &e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The message of an error, numaff running as uid 1000.
    fn err(op: Op, target: Target, errno: i32, owner: Option<u32>) -> String {
        SysError {
            op,
            target,
            errno,
            owner_uid: owner,
            caller_uid: owner.map(|_| 1000),
        }
        .to_string()
    }

    #[test]
    fn a_refusal_of_our_own_uid_does_not_say_to_run_as_it() {
        let m = SysError {
            op: Op::Read,
            target: Target::Path("/proc/1/numa_maps".into()),
            errno: libc::EACCES,
            owner_uid: Some(0),
            caller_uid: Some(0),
        }
        .to_string();
        assert!(!m.contains("run as that user"), "{m}");
        assert!(
            m.contains("numaff already runs as uid 0") && m.contains("CAP_SYS_PTRACE"),
            "{m}"
        );
    }

    #[test]
    fn a_process_that_does_not_exist_is_no_such_process() {
        let m = LinuxError::NoSuchProcess { pid: 4_000_000 }.to_string();
        assert!(m.starts_with("no such process 4000000"), "{m}");
    }

    #[test]
    fn eperm_names_owner_and_capability() {
        assert_eq!(
            err(Op::MovePages, Target::Pid(812), libc::EPERM, Some(1001)),
            "cannot move pages of pid 812 (owned by uid 1001): permission denied; \
             run as that user (uid 1001) or with CAP_SYS_PTRACE"
        );
        assert_eq!(
            err(
                Op::SetAffinity,
                Target::Tid {
                    pid: Some(812),
                    tid: 815
                },
                libc::EPERM,
                None
            ),
            "cannot set the cpu affinity of thread 815 of pid 812: permission denied; \
             run as the owner or with CAP_SYS_NICE"
        );
    }

    #[test]
    fn eacces_on_proc_file() {
        assert_eq!(
            err(
                Op::Read,
                Target::Path("/proc/812/numa_maps".into()),
                libc::EACCES,
                Some(0)
            ),
            "cannot read /proc/812/numa_maps (owned by uid 0): permission denied; \
             run as that user (uid 0) or with CAP_SYS_PTRACE"
        );
    }

    #[test]
    fn esrch_and_enoent_say_exited() {
        assert_eq!(
            err(Op::MovePages, Target::Pid(812), libc::ESRCH, None),
            "cannot move pages of pid 812: process 812 has exited"
        );
        assert_eq!(
            err(
                Op::Read,
                Target::Path("/proc/812/task/813/stat".into()),
                libc::ENOENT,
                None
            ),
            "cannot read /proc/812/task/813/stat: process 812 has exited"
        );
        assert_eq!(
            err(
                Op::GetAffinity,
                Target::Tid { pid: None, tid: 9 },
                libc::ESRCH,
                None
            ),
            "cannot get the cpu affinity of thread 9: thread 9 has exited"
        );
    }

    #[test]
    fn enomem_and_einval_advice() {
        let m = err(Op::MovePages, Target::Pid(1), libc::ENOMEM, None);
        assert!(
            m.starts_with("cannot move pages of pid 1: out of memory; the target node"),
            "{m}"
        );
        let m = err(
            Op::SetAffinity,
            Target::Tid { pid: None, tid: 5 },
            libc::EINVAL,
            None,
        );
        assert!(
            m.starts_with("cannot set the cpu affinity of thread 5: invalid argument; the cpu set"),
            "{m}"
        );
        let m = err(Op::QueryPages, Target::Pid(3), libc::EINVAL, None);
        assert!(m.contains("check that the nodes exist"), "{m}");
    }

    #[test]
    fn other_errno_and_missing_file() {
        let m = err(Op::Read, Target::Path("/sys/x".into()), libc::ENOENT, None);
        assert_eq!(
            m,
            "cannot read /sys/x: no such file or directory; check the path; this kernel may not provide it"
        );
        let m = err(Op::MovePages, Target::Pid(2), libc::EBUSY, None);
        assert!(
            m.contains("(errno 16)") && m.contains("please report"),
            "{m}"
        );
    }

    #[test]
    fn target_pid_from_path() {
        assert_eq!(Target::Path("/proc/42/numa_maps".into()).pid(), Some(42));
        assert_eq!(Target::Path("/proc/self/numa_maps".into()).pid(), None);
        assert_eq!(Target::Path("/sys/devices".into()).pid(), None);
    }

    #[test]
    fn parse_error_names_line() {
        let e = LinuxError::Parse {
            file: "/proc/1/numa_maps".into(),
            line_no: 3,
            line: "zz default".into(),
            reason: "bad address".into(),
        };
        assert!(e
            .to_string()
            .starts_with("malformed line 3 of /proc/1/numa_maps: bad address: \"zz default\""));
    }
}
