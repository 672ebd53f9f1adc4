//! Transparent huge pages: the system's THP mode and how much of a process's anonymous memory THP
//! backs. With THP a first touch faults once per 2 MiB, so a page-fault sampler sees one sample there.

use std::path::Path;

/// The mode in /sys/kernel/mm/transparent_hugepage/enabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThpMode {
    /// `always`: every large enough anonymous mapping may get huge pages.
    Always,
    /// `madvise`: only mappings the program marks with MADV_HUGEPAGE.
    Madvise,
    /// `never`.
    Never,
}

impl ThpMode {
    /// The mode's name as the kernel writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            ThpMode::Always => "always",
            ThpMode::Madvise => "madvise",
            ThpMode::Never => "never",
        }
    }

    /// A number for a trace's rates: 2 always, 1 madvise, 0 never.
    pub fn as_rate(self) -> f64 {
        match self {
            ThpMode::Always => 2.0,
            ThpMode::Madvise => 1.0,
            ThpMode::Never => 0.0,
        }
    }
}

/// Parses the `enabled` file's text, e.g. `always [madvise] never`: the bracketed word.
pub fn parse_enabled(text: &str) -> Option<ThpMode> {
    let chosen = text
        .split_whitespace()
        .find(|w| w.starts_with('[') && w.ends_with(']'))?;
    match chosen.trim_matches(|c| c == '[' || c == ']') {
        "always" => Some(ThpMode::Always),
        "madvise" => Some(ThpMode::Madvise),
        "never" => Some(ThpMode::Never),
        _ => None,
    }
}

/// This system's THP mode; `None` where the kernel has no THP (no sysfs file) or it is unreadable.
pub fn thp_mode() -> Option<ThpMode> {
    let text = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok()?;
    parse_enabled(&text)
}

/// Parses the `AnonHugePages:   N kB` line of /proc/PID/smaps_rollup (or smaps) into bytes.
pub fn parse_anon_huge_bytes(text: &str) -> Option<u64> {
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("AnonHugePages:"))?;
    let mut words = line.split_whitespace();
    let n: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => n.checked_mul(1024),
        _ => None,
    }
}

/// Bytes of process `pid`'s anonymous memory backed by transparent huge pages now (from
/// /proc/PID/smaps_rollup); `None` when the process is gone or the file unreadable.
pub fn anon_huge_bytes(pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(Path::new(&format!("/proc/{pid}/smaps_rollup"))).ok()?;
    parse_anon_huge_bytes(&text)
}

/// Bytes of anonymous memory backed by transparent huge pages in the whole system (the
/// `AnonHugePages` line of /proc/meminfo); `None` when unreadable. Cheap (tens of µs) where a
/// process's smaps_rollup walks all its page tables under its mmap lock (10-14 ms of cpu and
/// 50 ms of wall time for a 512 MiB process here): a process has huge pages only if this is > 0.
pub fn system_anon_huge_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_anon_huge_bytes(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thp_mode_is_the_bracketed_word() {
        assert_eq!(
            parse_enabled("[always] madvise never\n"),
            Some(ThpMode::Always)
        );
        assert_eq!(
            parse_enabled("always [madvise] never"),
            Some(ThpMode::Madvise)
        );
        assert_eq!(
            parse_enabled("always madvise [never]"),
            Some(ThpMode::Never)
        );
        assert_eq!(parse_enabled("always madvise never"), None);
        assert_eq!(parse_enabled("[sometimes]"), None);
        assert_eq!(ThpMode::Always.as_rate(), 2.0);
    }

    #[test]
    fn anon_huge_pages_are_read_from_smaps_rollup() {
        let text = "55d0-7ffc ---p 00000000 00:00 0 [rollup]\nRss:  10240 kB\nAnonHugePages:      4096 kB\nShmemPmdMapped: 0 kB\n";
        assert_eq!(parse_anon_huge_bytes(text), Some(4 << 20));
        assert_eq!(parse_anon_huge_bytes("Rss: 1 kB\n"), None);
        assert_eq!(parse_anon_huge_bytes("AnonHugePages: x kB\n"), None);
        assert_eq!(parse_anon_huge_bytes("AnonHugePages: 4 MB\n"), None);
        // This process's own file parses (smaps_rollup exists since Linux 4.14), and meminfo's.
        assert!(anon_huge_bytes(std::process::id() as i32).is_some());
        assert!(system_anon_huge_bytes().is_some());
        let meminfo =
            "MemTotal:       24576000 kB\nAnonHugePages:     6144 kB\nShmemHugePages: 0 kB\n";
        assert_eq!(parse_anon_huge_bytes(meminfo), Some(6 << 20));
        // The live mode, where there is one, is one of the three.
        if std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists() {
            assert!(thp_mode().is_some());
        }
    }
}
