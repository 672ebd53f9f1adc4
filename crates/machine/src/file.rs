//! Machine files: the TOML form of a [`Machine`] that users write, numaff exports, and the catalog
//! ships. Loading validates and names the file and field of every problem; saving is atomic.
//!
//! ```toml
//! name = "two-sockets"
//! page_size = "4 KiB"
//! distances = [[10, 21], [21, 10]]
//!
//! [[node]]
//! id = 0
//! memory = "64 GiB"
//! cpus = "0-3"
//!
//! [[package]]
//! id = 0
//! cores = ["0", "1", "2", "3"]   # the PUs of each core
//!
//! [[cache]]
//! level = 3
//! size = "16 MiB"
//! per = "package"                 # or instances = ["0-3", "4-7"]
//! ```

use std::fmt;
use std::path::Path;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::cpuset::CpuSet;
use crate::error::{FieldProblem, MachineError, Result};
use crate::model::{
    Cache, CacheKind, Coherence, Core, Interconnect, Machine, Matrix, Node, Package,
};
use crate::validate;

/// A byte count written as an integer or as text with a binary unit ("32 KiB", "2.5 MiB", "16G").
/// KB/MB/GB are read as binary units too, as cache and memory sizes are meant in the papers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size(pub u64);

impl Size {
    /// Parses "4096", "32 KiB", "32K", "27.5 MB", "1 TiB".
    pub fn parse(text: &str) -> std::result::Result<Size, String> {
        let t = text.trim();
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let value: f64 = num
            .parse()
            .map_err(|_| format!("{text:?} is not a size such as \"32 KiB\" or 4096"))?;
        let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "k" | "kb" | "kib" => 1 << 10,
            "m" | "mb" | "mib" => 1 << 20,
            "g" | "gb" | "gib" => 1 << 30,
            "t" | "tb" | "tib" => 1 << 40,
            other => {
                return Err(format!(
                    "unknown size unit {other:?} in {text:?} (use B, KiB, MiB, GiB or TiB)"
                ))
            }
        };
        let bytes = value * mult as f64;
        if !bytes.is_finite() || bytes > u64::MAX as f64 / 2.0 {
            return Err(format!("{text:?} is too large"));
        }
        Ok(Size(bytes.round() as u64))
    }
}

/// Binary units from the largest, for printing sizes.
const BINARY_UNITS: [(u64, &str); 4] = [
    (1 << 40, "TiB"),
    (1 << 30, "GiB"),
    (1 << 20, "MiB"),
    (1 << 10, "KiB"),
];

impl fmt::Display for Size {
    /// The largest binary unit that divides the size exactly.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (mult, name) in BINARY_UNITS {
            if self.0 >= mult && self.0.is_multiple_of(mult) {
                return write!(f, "{} {name}", self.0 / mult);
            }
        }
        write!(f, "{} B", self.0)
    }
}

impl Size {
    /// For people: exact when a unit divides the size, else one decimal ("23.5 GiB").
    pub fn human(&self) -> String {
        for (mult, name) in BINARY_UNITS {
            if self.0 >= mult {
                if self.0.is_multiple_of(mult) {
                    return format!("{} {name}", self.0 / mult);
                }
                return format!("{:.1} {name}", self.0 as f64 / mult as f64);
            }
        }
        format!("{} B", self.0)
    }
}

impl Serialize for Size {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Size;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size in bytes or a string such as \"32 KiB\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<Size, E> {
                u64::try_from(v)
                    .map(Size)
                    .map_err(|_| E::custom(format!("{v} is negative")))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<Size, E> {
                Ok(Size(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Size, E> {
                Size::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// Which PUs share one instance of a cache, for the common cases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Scope {
    Pu,
    Core,
    Package,
    Node,
    Machine,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct MachineFile {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    assumptions: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    page_size: Option<Size>,
    #[serde(skip_serializing_if = "Option::is_none")]
    frequency_mhz: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    coherence: Option<Coherence>,
    #[serde(skip_serializing_if = "Option::is_none")]
    distances: Option<Vec<Vec<i64>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    latency_ns: Option<Matrix<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bandwidth_mbps: Option<Matrix<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    interconnect: Option<InterconnectEntry>,
    #[serde(rename = "node", default)]
    nodes: Vec<NodeEntry>,
    #[serde(rename = "package", default)]
    packages: Vec<PackageEntry>,
    #[serde(rename = "cache", default, skip_serializing_if = "Vec::is_empty")]
    caches: Vec<CacheEntry>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeEntry {
    id: u32,
    memory: Option<Size>,
    #[serde(default)]
    cpus: CpuSet,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PackageEntry {
    id: u32,
    cores: Vec<CpuSet>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CacheEntry {
    level: u8,
    #[serde(default = "unified", skip_serializing_if = "is_unified")]
    kind: CacheKind,
    size: Size,
    #[serde(default = "default_line")]
    line: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    associativity: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    latency_cycles: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    per: Option<Scope>,
    #[serde(skip_serializing_if = "Option::is_none")]
    instances: Option<Vec<CpuSet>>,
}

fn unified() -> CacheKind {
    CacheKind::Unified
}
fn is_unified(k: &CacheKind) -> bool {
    *k == CacheKind::Unified
}
fn default_line() -> u32 {
    64
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct InterconnectEntry {
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<String>,
    #[serde(default)]
    links: Vec<[u32; 2]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    link_bandwidth_mbps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    hop_latency_ns: Option<f64>,
}

/// Reads and validates a machine file.
pub fn load(path: &Path) -> Result<Machine> {
    let text = std::fs::read_to_string(path).map_err(|source| MachineError::Io {
        action: "read machine file",
        path: path.to_path_buf(),
        source,
    })?;
    from_toml_str(&text, &path.display().to_string())
}

/// Parses and validates machine-file text; `origin` names it in errors (a path, or a catalog name).
pub fn from_toml_str(text: &str, origin: &str) -> Result<Machine> {
    let file: MachineFile = toml::from_str(text).map_err(|e| MachineError::Parse {
        file: origin.to_string(),
        message: e.to_string().trim_end().to_string(),
    })?;
    let machine = to_model(file).map_err(|problems| MachineError::Invalid {
        file: origin.to_string(),
        problems,
    })?;
    check(&machine, origin)?;
    Ok(machine)
}

/// Validates a model from any source; `origin` names it in errors.
pub fn check(machine: &Machine, origin: &str) -> Result<()> {
    let problems = validate::problems(machine);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(MachineError::Invalid {
            file: origin.to_string(),
            problems,
        })
    }
}

/// The machine as machine-file text (canonical: loading it gives back an equal machine).
pub fn to_toml_string(machine: &Machine) -> Result<String> {
    let mut m = machine.clone();
    m.normalize();
    toml::to_string_pretty(&from_model(&m)).map_err(|e| MachineError::Parse {
        file: m.name.clone(),
        message: format!("cannot write as TOML: {e}"),
    })
}

/// Writes a machine file atomically: either the whole new file or the old one stays.
pub fn save(machine: &Machine, path: &Path) -> Result<()> {
    let text = to_toml_string(machine)?;
    crate::write_atomic(path, text.as_bytes())
}

fn to_model(f: MachineFile) -> std::result::Result<Machine, Vec<FieldProblem>> {
    // The caps first, before anything (caches per PU, matrices per node) is sized by the file.
    let core_pus = f.packages.iter().flat_map(|p| &p.cores);
    let size = crate::validate::size_problem(
        core_pus.clone().map(CpuSet::len).sum(),
        core_pus
            .chain(f.nodes.iter().map(|n| &n.cpus))
            .filter_map(CpuSet::last)
            .map(u64::from)
            .max(),
        f.nodes.len(),
        f.nodes.iter().map(|n| u64::from(n.id)).max(),
    );
    if let Some(p) = size {
        return Err(vec![p]);
    }
    // Every core and package holds at least one PU: no more of them than PUs.
    let cores = f.packages.iter().map(|p| p.cores.len()).sum::<usize>();
    let max = crate::validate::MAX_PUS;
    if cores.max(f.packages.len()) > max {
        return Err(vec![FieldProblem::new(
            "package",
            format!(
                "{} packages of {cores} cores; numaff takes at most {max} of each (each holds a \
                 PU, and {max} is Linux's largest NR_CPUS): describe a real machine",
                f.packages.len()
            ),
        )]);
    }
    let mut problems = Vec::new();
    let mut m = Machine::new(f.name);
    m.description = f.description;
    m.source = f.source;
    m.assumptions = f.assumptions;
    m.page_size = f.page_size.map_or(4096, |s| s.0);
    m.frequency_mhz = f.frequency_mhz;
    m.coherence = f.coherence;
    for (i, n) in f.nodes.into_iter().enumerate() {
        let memory_bytes = match n.memory {
            Some(s) => s.0,
            None => {
                problems.push(FieldProblem::new(
                    format!("node[{i}]"),
                    "no memory size; add memory = \"16 GiB\" (or the size in bytes)",
                ));
                0
            }
        };
        m.nodes.push(Node {
            id: n.id,
            memory_bytes,
            cpus: n.cpus,
        });
    }
    m.packages = f
        .packages
        .into_iter()
        .map(|p| Package {
            id: p.id,
            cores: p.cores.into_iter().map(|pus| Core { pus }).collect(),
        })
        .collect();
    if let Some(d) = f.distances {
        let mut matrix = Vec::new();
        for (r, row) in d.into_iter().enumerate() {
            let mut out = Vec::new();
            for (c, v) in row.into_iter().enumerate() {
                match u32::try_from(v) {
                    Ok(v) => out.push(v),
                    Err(_) => {
                        problems.push(FieldProblem::new(
                            format!("distances[{r}][{c}]"),
                            format!("{v} is negative or too large"),
                        ));
                        out.push(0);
                    }
                }
            }
            matrix.push(out);
        }
        m.distances = Some(matrix);
    }
    m.latency_ns = f.latency_ns;
    m.bandwidth_mbps = f.bandwidth_mbps;
    m.interconnect = f.interconnect.map(|ic| Interconnect {
        kind: ic.kind,
        links: ic.links.into_iter().map(|[a, b]| (a, b)).collect(),
        link_bandwidth_mbps: ic.link_bandwidth_mbps,
        hop_latency_ns: ic.hop_latency_ns,
    });
    for (i, c) in f.caches.into_iter().enumerate() {
        let instances = match (c.per, c.instances) {
            (Some(scope), None) => scope_sets(&m, scope),
            (None, Some(list)) => list,
            (Some(_), Some(_)) => {
                problems.push(FieldProblem::new(
                    format!("cache[{i}]"),
                    "both `per` and `instances` are given; keep one",
                ));
                continue;
            }
            (None, None) => {
                problems.push(FieldProblem::new(
                    format!("cache[{i}]"),
                    "say which cpus share it: per = \"core\" | \"package\" | \"node\" | \"machine\" | \"pu\", or instances = [\"0-3\", ...]",
                ));
                continue;
            }
        };
        for cpus in instances {
            m.caches.push(Cache {
                level: c.level,
                kind: c.kind,
                size_bytes: c.size.0,
                line_bytes: c.line,
                associativity: c.associativity,
                latency_cycles: c.latency_cycles,
                cpus,
            });
        }
    }
    if problems.is_empty() {
        m.normalize();
        Ok(m)
    } else {
        Err(problems)
    }
}

/// The cpu sets of one instance per `scope`, in canonical cache order (by first PU).
fn scope_sets(m: &Machine, scope: Scope) -> Vec<CpuSet> {
    let mut sets: Vec<CpuSet> = match scope {
        Scope::Pu => m.pus().iter().map(|p| [p].into_iter().collect()).collect(),
        Scope::Core => m.cores().map(|(_, c)| c.pus.clone()).collect(),
        Scope::Package => m
            .packages
            .iter()
            .map(|p| p.cores.iter().flat_map(|c| c.pus.iter()).collect())
            .collect(),
        Scope::Node => m.cpu_nodes().map(|n| n.cpus.clone()).collect(),
        Scope::Machine => vec![m.pus()],
    };
    sets.sort_by_key(|s| s.first());
    sets
}

fn from_model(m: &Machine) -> MachineFile {
    // Group cache instances by their attributes, keeping the canonical order of first appearance.
    type Key = (u8, CacheKind, u64, u32, Option<u32>, Option<u64>);
    let mut groups: Vec<(Key, &Cache, Vec<CpuSet>)> = Vec::new();
    for c in &m.caches {
        let key = (
            c.level,
            c.kind,
            c.size_bytes,
            c.line_bytes,
            c.associativity,
            c.latency_cycles.map(f64::to_bits),
        );
        match groups.iter_mut().find(|g| g.0 == key) {
            Some(g) => g.2.push(c.cpus.clone()),
            None => groups.push((key, c, vec![c.cpus.clone()])),
        }
    }
    let caches = groups
        .into_iter()
        .map(|(_, c, mut sets)| {
            sets.sort_by_key(|s| s.first());
            let scope = [
                Scope::Pu,
                Scope::Core,
                Scope::Package,
                Scope::Node,
                Scope::Machine,
            ]
            .into_iter()
            .find(|&s| scope_sets(m, s) == sets);
            CacheEntry {
                level: c.level,
                kind: c.kind,
                size: Size(c.size_bytes),
                line: c.line_bytes,
                associativity: c.associativity,
                latency_cycles: c.latency_cycles,
                per: scope,
                instances: if scope.is_some() { None } else { Some(sets) },
            }
        })
        .collect();
    MachineFile {
        name: m.name.clone(),
        description: m.description.clone(),
        source: m.source.clone(),
        assumptions: m.assumptions.clone(),
        page_size: Some(Size(m.page_size)),
        frequency_mhz: m.frequency_mhz,
        coherence: m.coherence,
        distances: m.distances.as_ref().map(|d| {
            d.iter()
                .map(|r| r.iter().map(|&v| i64::from(v)).collect())
                .collect()
        }),
        latency_ns: m.latency_ns.clone(),
        bandwidth_mbps: m.bandwidth_mbps.clone(),
        interconnect: m.interconnect.as_ref().map(|ic| InterconnectEntry {
            kind: ic.kind.clone(),
            links: ic.links.iter().map(|&(a, b)| [a, b]).collect(),
            link_bandwidth_mbps: ic.link_bandwidth_mbps,
            hop_latency_ns: ic.hop_latency_ns,
        }),
        nodes: m
            .nodes
            .iter()
            .map(|n| NodeEntry {
                id: n.id,
                memory: Some(Size(n.memory_bytes)),
                cpus: n.cpus.clone(),
            })
            .collect(),
        packages: m
            .packages
            .iter()
            .map(|p| PackageEntry {
                id: p.id,
                cores: p.cores.iter().map(|c| c.pus.clone()).collect(),
            })
            .collect(),
        caches,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = r#"
name = "small"
page_size = "4 KiB"
distances = [[10, 21], [21, 10]]

[[node]]
id = 0
memory = "1 GiB"
cpus = "0-1"

[[node]]
id = 1
memory = 1073741824
cpus = "2-3"

[[package]]
id = 0
cores = ["0", "1"]

[[package]]
id = 1
cores = ["2", "3"]

[[cache]]
level = 1
kind = "data"
size = "32 KiB"
per = "core"

[[cache]]
level = 2
size = "512 KiB"
instances = ["0-1", "2-3"]
"#;

    #[test]
    fn loads_and_round_trips() {
        let m = from_toml_str(SMALL, "small.toml").unwrap();
        assert_eq!(m.nodes.len(), 2);
        assert_eq!(m.caches.len(), 6);
        assert_eq!(m.numa_factor().unwrap().max, 2.1);
        let text = to_toml_string(&m).unwrap();
        let again = from_toml_str(&text, "again").unwrap();
        assert_eq!(m, again);
        assert_eq!(to_toml_string(&again).unwrap(), text);
        // The per-package L2 given as instances is written back in the short form.
        assert!(text.contains("per = \"package\""), "{text}");
    }

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(Size::parse("32 KiB").unwrap().0, 32768);
        assert_eq!(Size::parse("27.5 MB").unwrap().0, 28835840);
        assert_eq!(Size::parse("16G").unwrap().0, 16 << 30);
        assert!(Size::parse("3 furlongs")
            .unwrap_err()
            .contains("unknown size unit"));
        assert_eq!(Size(28835840).to_string(), "28160 KiB");
        assert_eq!(Size(100).to_string(), "100 B");
        assert_eq!(Size(24684084 << 10).human(), "23.5 GiB");
        assert_eq!(Size(16 << 30).human(), "16 GiB");
    }
}
