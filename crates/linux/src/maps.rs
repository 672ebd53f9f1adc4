//! Parser of /proc/PID/maps: the address range, permissions and backing of every mapping, which
//! numa_maps lacks (it gives only the start address).

use std::path::{Path, PathBuf};

use crate::error::{read_text, LinuxError, Result};

/// One line of /proc/PID/maps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapRange {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// Permissions as printed, e.g. `rw-p`.
    pub perms: String,
    /// The path or pseudo-name (`[heap]`, `[stack]`, `[vdso]`); empty for anonymous memory.
    pub name: String,
}

/// Reads and parses /proc/PID/maps.
pub fn read(pid: i32) -> Result<Vec<MapRange>> {
    let path = PathBuf::from(format!("/proc/{pid}/maps"));
    parse(&read_text(&path)?, &path)
}

/// Parses maps text; `file` names the source in errors.
pub fn parse(text: &str, file: &Path) -> Result<Vec<MapRange>> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            parse_line(line).map_err(|reason| LinuxError::Parse {
                file: file.to_path_buf(),
                line_no: i + 1,
                line: line.to_string(),
                reason,
            })
        })
        .collect()
}

/// Parses `start-end perms offset dev inode [name]`.
pub fn parse_line(line: &str) -> Result<MapRange, String> {
    let mut fields = line.splitn(6, ' ');
    let range = fields.next().ok_or("empty line")?;
    let (start, end) = range
        .split_once('-')
        .ok_or_else(|| format!("{range:?} is not an address range"))?;
    let hex =
        |s: &str| u64::from_str_radix(s, 16).map_err(|_| format!("{s:?} is not a hex address"));
    let (start, end) = (hex(start)?, hex(end)?);
    if end < start {
        return Err(format!("range {range} ends before it starts"));
    }
    let perms = fields.next().ok_or("no permissions")?.to_string();
    for what in ["offset", "device", "inode"] {
        fields.next().ok_or_else(|| format!("no {what}"))?;
    }
    let name = fields.next().unwrap_or("").trim_start().to_string();
    Ok(MapRange {
        start,
        end,
        perms,
        name,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_kernel_lines() {
        let text = "55d0c0a00000-55d0c0a21000 rw-p 00000000 00:00 0                          [heap]\n\
                    7f1c2a000000-7f1c2a200000 r-xp 00000000 08:01 1234                       /usr/lib/my lib.so\n\
                    7ffd1b000000-7ffd1b021000 rw-p 00000000 00:00 0 \n";
        let maps = parse(text, Path::new("maps")).unwrap();
        assert_eq!(maps.len(), 3);
        assert_eq!(maps[0].start, 0x55d0c0a00000);
        assert_eq!(maps[0].end, 0x55d0c0a21000);
        assert_eq!(maps[0].name, "[heap]");
        assert_eq!(maps[1].name, "/usr/lib/my lib.so");
        assert_eq!(maps[1].perms, "r-xp");
        assert_eq!(maps[2].name, "");
    }

    #[test]
    fn malformed_lines_name_the_line() {
        let e = parse(
            "00400000-00452000 r-xp 0 08:02 1 /bin/x\nzz-1 r 0 0 0\n",
            Path::new("maps"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("line 2"), "{e}");
        assert!(parse_line("10-5 r 0 0 0").is_err());
    }

    #[test]
    fn reads_this_process() {
        let maps = read(std::process::id() as i32).unwrap();
        assert!(maps.iter().any(|m| m.name == "[stack]"));
    }
}
