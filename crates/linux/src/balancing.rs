//! The kernel's automatic NUMA balancing state, from /proc/sys/kernel/numa_balancing.
//! numaff reports it because balancing moves pages and threads behind numaff's back.

use std::path::Path;

use crate::error::{read_text, LinuxError, Result};

/// The value of kernel.numa_balancing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumaBalancing {
    /// The file does not exist: the kernel has no NUMA balancing (or no NUMA).
    NotSupported,
    /// 0: off.
    Disabled,
    /// 1: classic NUMA balancing.
    Normal,
    /// 2: memory tiering mode (promotion of hot pages from slow tiers).
    MemoryTiering,
    /// 3: both.
    NormalAndTiering,
    /// A value this version of numaff does not know.
    Other(u32),
}

impl NumaBalancing {
    /// Whether the kernel may migrate pages/threads on its own.
    pub fn is_enabled(self) -> bool {
        !matches!(self, NumaBalancing::NotSupported | NumaBalancing::Disabled)
    }
}

/// Reads kernel.numa_balancing.
pub fn numa_balancing() -> Result<NumaBalancing> {
    read_from(Path::new("/proc/sys/kernel/numa_balancing"))
}

/// Reads a numa_balancing file at `path` (a missing file means not supported).
pub fn read_from(path: &Path) -> Result<NumaBalancing> {
    if !path.exists() {
        return Ok(NumaBalancing::NotSupported);
    }
    parse(&read_text(path)?, path)
}

fn parse(text: &str, path: &Path) -> Result<NumaBalancing> {
    let v: u32 = text.trim().parse().map_err(|_| LinuxError::Parse {
        file: path.to_path_buf(),
        line_no: 1,
        line: text.trim_end().to_string(),
        reason: "not a number".into(),
    })?;
    Ok(match v {
        0 => NumaBalancing::Disabled,
        1 => NumaBalancing::Normal,
        2 => NumaBalancing::MemoryTiering,
        3 => NumaBalancing::NormalAndTiering,
        v => NumaBalancing::Other(v),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn values() {
        let p = Path::new("x");
        assert_eq!(parse("0\n", p).unwrap(), NumaBalancing::Disabled);
        assert_eq!(parse("1\n", p).unwrap(), NumaBalancing::Normal);
        assert_eq!(parse("2\n", p).unwrap(), NumaBalancing::MemoryTiering);
        assert_eq!(parse("3\n", p).unwrap(), NumaBalancing::NormalAndTiering);
        assert_eq!(parse("7\n", p).unwrap(), NumaBalancing::Other(7));
        assert!(parse("on\n", p)
            .unwrap_err()
            .to_string()
            .contains("not a number"));
        assert!(NumaBalancing::Normal.is_enabled() && !NumaBalancing::Disabled.is_enabled());
    }

    #[test]
    fn missing_file_is_not_supported_and_live_read_works() {
        assert_eq!(
            read_from(Path::new("/nonexistent/numa_balancing")).unwrap(),
            NumaBalancing::NotSupported
        );
        numa_balancing().unwrap();
    }
}
