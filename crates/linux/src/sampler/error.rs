//! A sampler that failed to open or map, said with the kernel's answer and what the user can do
//! (perf_event_paranoid, locked-memory limits, a missing PMU).

use std::fmt;
use std::io;

/// A sampler that failed: what, and what to do.
#[derive(Debug)]
pub struct SamplerError {
    /// What numaff was trying to do.
    pub what: String,
    /// The kernel's answer.
    pub source: io::Error,
    /// What the user can do about it.
    pub advice: String,
}

impl fmt::Display for SamplerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "could not {}: {}", self.what, self.source)?;
        if !self.advice.is_empty() {
            write!(f, "; {}", self.advice)?;
        }
        Ok(())
    }
}

impl std::error::Error for SamplerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Advice for a failed perf_event_open on numaff itself or a process it started.
pub(super) fn perf_advice(e: &io::Error) -> String {
    perf_advice_on(e, None)
}

/// Advice for a failed perf_event_open on task `task` (`None`: numaff's own, or its child's).
pub(super) fn perf_advice_on(e: &io::Error, task: Option<i32>) -> String {
    let owner = task.and_then(|t| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(format!("/proc/{t}"))
            .ok()
            .map(|m| m.uid())
    });
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    advice_for(e.raw_os_error(), perf_event_paranoid(), owner, me)
}

/// The advice for errno `errno`, with perf_event_paranoid at `paranoid`, on a task owned by
/// `owner` (when known) for numaff running as uid `me`.
fn advice_for(errno: Option<i32>, paranoid: Option<i32>, owner: Option<u32>, me: u32) -> String {
    match errno {
        Some(libc::EACCES) | Some(libc::EPERM) => match (owner, paranoid) {
            (Some(o), _) if o != me => format!(
                "the process belongs to another user (uid {o}): watching another user's process \
                 needs CAP_PERFMON (or CAP_SYS_ADMIN) and the right to ptrace it; run numaff as \
                 root, or as uid {o}"
            ),
            (_, Some(p)) if p <= 2 => format!(
                "perf_event_paranoid is {p} here, which allows it, yet the kernel refused (a \
                 seccomp filter, a security module or a container's policy?); run numaff as root \
                 (or with CAP_PERFMON)"
            ),
            _ => format!(
                "perf_event_paranoid is {} here; set it to 2 or lower (sudo sysctl kernel.perf_event_paranoid=2) \
                 or run numaff as root (or with CAP_PERFMON)",
                paranoid.map_or("unknown".to_string(), |p| p.to_string())
            ),
        },
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) => {
            "this kernel or cpu does not support the event (is this a container or VM without a PMU?)".into()
        }
        Some(libc::EMFILE) => "too many open files: raise the limit (ulimit -n)".into(),
        Some(libc::ESRCH) => "the process is gone".into(),
        Some(libc::ENOMEM) => "raise kernel.perf_event_mlock_kb or run as root".into(),
        _ => String::new(),
    }
}

/// `/proc/sys/kernel/perf_event_paranoid`, if readable.
pub fn perf_event_paranoid() -> Option<i32> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_users_process_needs_privileges_not_a_lower_paranoid() {
        let a = advice_for(Some(libc::EACCES), Some(2), Some(0), 1000);
        assert!(
            a.contains("another user (uid 0)") && a.contains("CAP_PERFMON"),
            "{a}"
        );
        assert!(!a.contains("set it to 2"), "{a}");
        // One's own process at paranoid 2: not told to set it to 2.
        let a = advice_for(Some(libc::EACCES), Some(2), Some(1000), 1000);
        assert!(!a.contains("set it to 2"), "{a}");
        let a = advice_for(Some(libc::EACCES), Some(3), Some(1000), 1000);
        assert!(
            a.contains("perf_event_paranoid is 3 here; set it to 2"),
            "{a}"
        );
    }

    #[test]
    fn eacces_says_to_lower_paranoid_or_run_as_root() {
        let e = SamplerError {
            what: "open a page-fault perf event on task 1, cpu 0".into(),
            advice: advice_for(Some(libc::EACCES), Some(3), None, 1000),
            source: io::Error::from_raw_os_error(libc::EACCES),
        };
        let text = e.to_string();
        assert!(
            text.contains("could not open a page-fault perf event"),
            "{text}"
        );
        assert!(
            text.contains("perf_event_paranoid") && text.contains("set it to 2"),
            "{text}"
        );
        assert!(text.contains("root"), "{text}");
    }
}
