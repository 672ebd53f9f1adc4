//! Parser of /proc/PID/numa_maps: per mapping its start address, memory policy, kind (file, anon,
//! heap, stack), pages per node and page counters. Unknown keys are kept; malformed lines are errors.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use numaff_machine::CpuSet;

use crate::error::{read_text, LinuxError, Result};

/// The memory policy mode of a mapping as the kernel prints it (mpol_to_str).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyMode {
    /// `default`: the process policy (usually local allocation).
    Default,
    /// `local`: allocate on the node of the cpu that faults.
    Local,
    /// `prefer`: one preferred node, falling back elsewhere.
    Preferred,
    /// `prefer (many)`: a set of preferred nodes.
    PreferredMany,
    /// `bind`: only these nodes.
    Bind,
    /// `interleave`: round-robin over the nodes.
    Interleave,
    /// `weighted interleave`: weighted round-robin over the nodes.
    WeightedInterleave,
    /// A mode this parser does not know, as printed.
    Other(String),
}

/// A memory policy: mode, mode flags (`static`, `relative`, `balancing`) and nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// The mode.
    pub mode: PolicyMode,
    /// Mode flags printed after `=`, e.g. `["static"]` for `bind=static:0-1`.
    pub flags: Vec<String>,
    /// The nodes after `:`; empty when none are printed.
    pub nodes: CpuSet,
}

/// What a mapping maps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MappingKind {
    /// A file (octal escapes such as `\040` decoded).
    File(PathBuf),
    /// The process heap (brk area).
    Heap,
    /// A stack.
    Stack,
    /// Anonymous memory that is neither heap nor stack.
    Anon,
}

/// One line of numa_maps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// Start virtual address.
    pub start: u64,
    /// Memory policy of the mapping.
    pub policy: Policy,
    /// File, heap, stack or anonymous.
    pub kind: MappingKind,
    /// Backed by huge pages (hugetlbfs): counts are then in huge pages.
    pub huge: bool,
    /// Pages present per node (`N<node>=<pages>`), in pages of `kernel_page_size`.
    pub pages_per_node: BTreeMap<u32, u64>,
    /// The page size of the mapping in bytes (`kernelpagesize_kB` × 1024); 0 when not printed.
    pub kernel_page_size: u64,
    /// `anon=`: anonymous pages.
    pub anon: Option<u64>,
    /// `dirty=`: dirty pages.
    pub dirty: Option<u64>,
    /// `mapped=`: pages mapped (file pages).
    pub mapped: Option<u64>,
    /// Other `key=value` pairs (`active`, `mapmax`, `swapcache`, `writeback`, and any future key).
    pub other: BTreeMap<String, String>,
    /// Bare words that are not `heap`, `stack` or `huge`.
    pub words: Vec<String>,
}

impl Mapping {
    /// Pages present on all nodes together.
    pub fn pages(&self) -> u64 {
        self.pages_per_node.values().sum()
    }
}

/// Reads and parses /proc/PID/numa_maps.
pub fn read(pid: i32) -> Result<Vec<Mapping>> {
    read_path(&PathBuf::from(format!("/proc/{pid}/numa_maps")))
}

/// Reads and parses a numa_maps file (e.g. /proc/self/numa_maps).
pub fn read_path(path: &Path) -> Result<Vec<Mapping>> {
    parse(&read_text(path)?, path)
}

/// Total pages per node over `mappings`, in base pages: huge-page counts are scaled by
/// `kernel_page_size / base_page_size`.
pub fn total_pages_per_node(mappings: &[Mapping], base_page_size: u64) -> BTreeMap<u32, u64> {
    let mut total = BTreeMap::new();
    for m in mappings {
        let scale = if m.kernel_page_size > base_page_size && base_page_size > 0 {
            m.kernel_page_size / base_page_size
        } else {
            1
        };
        for (&node, &n) in &m.pages_per_node {
            *total.entry(node).or_insert(0) += n * scale;
        }
    }
    total
}

/// Parses numa_maps text; `file` names the source in errors.
pub fn parse(text: &str, file: &Path) -> Result<Vec<Mapping>> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            parse_line(l).map_err(|reason| LinuxError::Parse {
                file: file.to_path_buf(),
                line_no: i + 1,
                line: l.to_string(),
                reason,
            })
        })
        .collect()
}

/// Parses one numa_maps line; the error is the reason.
pub fn parse_line(line: &str) -> Result<Mapping, String> {
    let line = line.trim();
    let (addr, rest) = line
        .split_once(' ')
        .ok_or_else(|| "no policy after the address".to_string())?;
    let start = u64::from_str_radix(addr, 16)
        .map_err(|_| format!("address {addr:?} is not hexadecimal"))?;
    let rest = rest.trim_start();
    // Two modes contain a space; every other policy is one word.
    let (policy_text, rest) = ["prefer (many)", "weighted interleave"]
        .iter()
        .find(|p| rest.starts_with(*p))
        .map(|p| {
            let end = rest[p.len()..]
                .find(' ')
                .map_or(rest.len(), |i| i + p.len());
            (&rest[..end], &rest[end..])
        })
        .unwrap_or_else(|| rest.split_once(' ').unwrap_or((rest, "")));
    let policy = parse_policy(policy_text)?;
    let mut m = Mapping {
        start,
        policy,
        kind: MappingKind::Anon,
        huge: false,
        pages_per_node: BTreeMap::new(),
        kernel_page_size: 0,
        anon: None,
        dirty: None,
        mapped: None,
        other: BTreeMap::new(),
        words: Vec::new(),
    };
    for tok in rest.split_whitespace() {
        let num = |v: &str| -> Result<u64, String> {
            v.parse()
                .map_err(|_| format!("value of {tok:?} is not a number"))
        };
        match tok.split_once('=') {
            Some(("file", path)) => m.kind = MappingKind::File(PathBuf::from(unescape(path))),
            Some(("anon", v)) => m.anon = Some(num(v)?),
            Some(("dirty", v)) => m.dirty = Some(num(v)?),
            Some(("mapped", v)) => m.mapped = Some(num(v)?),
            Some(("kernelpagesize_kB", v)) => {
                m.kernel_page_size = num(v)?
                    .checked_mul(1024)
                    .ok_or_else(|| format!("{tok:?} is out of range"))?;
            }
            Some((k, v)) if k.starts_with('N') && k[1..].chars().all(|c| c.is_ascii_digit()) => {
                let node: u32 = k[1..]
                    .parse()
                    .map_err(|_| format!("node in {tok:?} is not a number"))?;
                let pages = m.pages_per_node.entry(node).or_insert(0);
                *pages = pages
                    .checked_add(num(v)?)
                    .ok_or_else(|| format!("pages of {tok:?} add up out of range"))?;
            }
            Some((k, v)) => {
                m.other.insert(k.to_string(), v.to_string());
            }
            None if tok == "heap" => m.kind = MappingKind::Heap,
            // Older kernels print `stack:TID` for thread stacks.
            None if tok == "stack" || tok.starts_with("stack:") => m.kind = MappingKind::Stack,
            None if tok == "huge" => m.huge = true,
            None => m.words.push(tok.to_string()),
        }
    }
    Ok(m)
}

fn parse_policy(text: &str) -> Result<Policy, String> {
    let (head, nodes) = match text.split_once(':') {
        Some((h, n)) => (
            h,
            CpuSet::parse(n).map_err(|e| format!("policy nodes: {e}"))?,
        ),
        None => (text, CpuSet::new()),
    };
    let (mode, flags) = match head.split_once('=') {
        Some((m, f)) => (m, f.split('|').map(str::to_string).collect()),
        None => (head, Vec::new()),
    };
    let mode = match mode {
        "default" => PolicyMode::Default,
        "local" => PolicyMode::Local,
        "prefer" => PolicyMode::Preferred,
        "prefer (many)" => PolicyMode::PreferredMany,
        "bind" => PolicyMode::Bind,
        "interleave" => PolicyMode::Interleave,
        "weighted interleave" => PolicyMode::WeightedInterleave,
        "" => return Err("empty memory policy".into()),
        other if other.contains('=') => return Err(format!("policy {other:?} not understood")),
        other => PolicyMode::Other(other.to_string()),
    };
    Ok(Policy { mode, flags, nodes })
}

/// Decodes the kernel's octal escapes (`\040` for space, `\011` tab, `\012` newline, `\075` '=').
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') as u32 * 64
                + (b[i + 2] - b'0') as u32 * 8
                + (b[i + 3] - b'0') as u32;
            if let Ok(v) = u8::try_from(v) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const TWO_NODES: &str = "\
00400000 default file=/usr/bin/stream mapped=3 N0=3 kernelpagesize_kB=4
00600000 default file=/usr/bin/stream anon=1 dirty=1 N1=1 kernelpagesize_kB=4
01a2f000 default heap anon=12 dirty=12 active=0 N0=8 N1=4 kernelpagesize_kB=4
7f3c1c000000 bind:1 anon=262144 dirty=262144 active=0 N1=262144 kernelpagesize_kB=4
7f3c5c000000 interleave:0-1 anon=4096 dirty=4096 N0=2048 N1=2048 kernelpagesize_kB=4
7f3c6e3d2000 default file=/lib/x86_64-linux-gnu/libc.so.6 mapped=155 mapmax=42 N0=120 N1=35 kernelpagesize_kB=4
7f3c6e5f7000 prefer:1 anon=2 dirty=2 swapcache=1 N1=2 kernelpagesize_kB=4
7ffd0a1b2000 default stack anon=5 dirty=5 N0=5 kernelpagesize_kB=4
";

    const FOUR_NODES: &str = "\
7f0000000000 prefer (many):0,2 anon=10 dirty=10 N0=6 N2=4 kernelpagesize_kB=4
7f1000000000 weighted interleave:0-3 anon=8 dirty=8 N0=2 N1=2 N2=2 N3=2 kernelpagesize_kB=4
7f2000000000 bind=static:2-3 file=/dev/hugepages/my\\040buf huge dirty=6 N2=3 N3=3 kernelpagesize_kB=2048
7f3000000000 interleave=relative|balancing:0-3 anon=4 N0=1 N1=1 N2=1 N3=1 kernelpagesize_kB=4 future_key=7 newword
7f4000000000 default file=/anon_hugepage\\040(deleted) huge anon=1 dirty=1 N3=1 kernelpagesize_kB=1048576
";

    fn p(text: &str) -> Vec<Mapping> {
        parse(text, Path::new("fixture")).unwrap()
    }

    #[test]
    fn two_node_fixture() {
        let m = p(TWO_NODES);
        assert_eq!(m.len(), 8);
        assert_eq!(m[0].start, 0x400000);
        assert_eq!(m[0].kind, MappingKind::File("/usr/bin/stream".into()));
        assert_eq!(m[0].mapped, Some(3));
        assert_eq!(m[2].kind, MappingKind::Heap);
        assert_eq!(m[2].pages_per_node, BTreeMap::from([(0, 8), (1, 4)]));
        assert_eq!(m[2].other.get("active").map(String::as_str), Some("0"));
        assert_eq!(m[3].policy.mode, PolicyMode::Bind);
        assert_eq!(m[3].policy.nodes, CpuSet::parse("1").unwrap());
        assert_eq!(m[3].kind, MappingKind::Anon);
        assert_eq!(m[3].pages(), 262144);
        assert_eq!(m[4].policy.mode, PolicyMode::Interleave);
        assert_eq!(m[4].policy.nodes.len(), 2);
        assert_eq!(m[5].other.get("mapmax").map(String::as_str), Some("42"));
        assert_eq!(m[6].policy.mode, PolicyMode::Preferred);
        assert_eq!(m[7].kind, MappingKind::Stack);
        assert_eq!(m[7].kernel_page_size, 4096);
        let total = total_pages_per_node(&m, 4096);
        assert_eq!(
            total,
            BTreeMap::from([
                (0, 3 + 8 + 2048 + 120 + 5),
                (1, 1 + 4 + 262144 + 2048 + 35 + 2)
            ])
        );
    }

    #[test]
    fn four_node_fixture_with_huge_pages() {
        let m = p(FOUR_NODES);
        assert_eq!(m[0].policy.mode, PolicyMode::PreferredMany);
        assert_eq!(m[0].policy.nodes, CpuSet::parse("0,2").unwrap());
        assert_eq!(m[0].pages_per_node, BTreeMap::from([(0, 6), (2, 4)]));
        assert_eq!(m[1].policy.mode, PolicyMode::WeightedInterleave);
        assert_eq!(m[1].policy.nodes.len(), 4);
        assert_eq!(m[2].policy.mode, PolicyMode::Bind);
        assert_eq!(m[2].policy.flags, vec!["static".to_string()]);
        assert!(m[2].huge);
        assert_eq!(m[2].kind, MappingKind::File("/dev/hugepages/my buf".into()));
        assert_eq!(m[2].kernel_page_size, 2 << 20);
        assert_eq!(
            m[3].policy.flags,
            vec!["relative".to_string(), "balancing".into()]
        );
        assert_eq!(m[3].other.get("future_key").map(String::as_str), Some("7"));
        assert_eq!(m[3].words, vec!["newword".to_string()]);
        assert_eq!(m[4].kernel_page_size, 1 << 30);
        // 2 MiB pages count 512 base pages each, 1 GiB pages 262144.
        let total = total_pages_per_node(&m, 4096);
        assert_eq!(total[&2], 4 + 2 + 3 * 512 + 1);
        assert_eq!(total[&3], 2 + 3 * 512 + 1 + 262144);
    }

    #[test]
    fn malformed_lines_are_named() {
        let e = parse(
            "00400000 default N0=3\nxyz default N0=1\n",
            Path::new("/proc/9/numa_maps"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("malformed line 2 of /proc/9/numa_maps: address \"xyz\""),
            "{e}"
        );
        let e = parse("00400000 default N0=three\n", Path::new("f"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("line 1") && e.contains("\"N0=three\" is not a number"),
            "{e}"
        );
        let e = parse("00400000 bind:zz N0=1\n", Path::new("f"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("policy nodes"), "{e}");
        assert!(parse("00400000\n", Path::new("f")).is_err());
    }

    #[test]
    fn page_sizes_and_counts_past_u64_are_errors() {
        let huge_page = format!("00400000 default N0=1 kernelpagesize_kB={}\n", u64::MAX);
        let e = parse(&huge_page, Path::new("f")).unwrap_err().to_string();
        assert!(e.contains("out of range"), "{e}");
        let twice = format!("00400000 default N0={} N0=1\n", u64::MAX);
        let e = parse(&twice, Path::new("f")).unwrap_err().to_string();
        assert!(e.contains("out of range"), "{e}");
    }

    #[test]
    fn live_self_numa_maps_is_on_node_0() {
        let m = read_path(Path::new("/proc/self/numa_maps")).unwrap();
        assert!(!m.is_empty());
        assert!(m.iter().any(|m| m.kind == MappingKind::Stack));
        assert!(m.iter().any(|m| matches!(m.kind, MappingKind::File(_))));
        let total = total_pages_per_node(&m, 4096);
        // This development machine has a single node.
        assert_eq!(total.keys().copied().collect::<Vec<_>>(), vec![0]);
        assert!(total[&0] > 0);
    }

    #[test]
    fn missing_process_says_exited() {
        let e = read(i32::MAX).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "cannot read /proc/{}/numa_maps: process {} has exited",
                i32::MAX,
                i32::MAX
            )
        );
    }
}
