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

/// Advice for a failed perf_event_open.
pub(super) fn perf_advice(e: &io::Error) -> String {
    let paranoid = perf_event_paranoid();
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => format!(
            "perf_event_paranoid is {} here; set it to 2 or lower (sudo sysctl kernel.perf_event_paranoid=2) \
             or run numaff as root (or with CAP_PERFMON)",
            paranoid.map_or("unknown".to_string(), |p| p.to_string())
        ),
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
    fn eacces_says_to_lower_paranoid_or_run_as_root() {
        let e = SamplerError {
            what: "open a page-fault perf event on task 1, cpu 0".into(),
            advice: perf_advice(&io::Error::from_raw_os_error(libc::EACCES)),
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
