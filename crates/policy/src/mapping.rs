//! Mapping files: the result of `numaff map` as a TOML file that `numaff apply` reads and the
//! exporters turn into launcher syntax.
//!
//! ```toml
//! format = 1
//! algorithm = "locality"
//! tasks = 4
//! placement = [0, 4, 1, 5]   # PU (kernel cpu id) of each task, in task (matrix) order
//! nodes = [0, 1, 0, 1]       # NUMA node of each task's PU
//!
//! [machine]
//! name = "kmaf-sim-4x2"
//! fingerprint = "fnv1a64:..."
//! summary = "4 nodes, 4 packages, 8 cores, 8 PUs"
//!
//! [input]
//! matrix = "m.csv"
//! matrix_hash = "fnv1a64:..."
//! seed = 0
//!
//! [quality]
//! hop_cost = 12.0
//! ```
//!
//! The machine fingerprint is a hash of the machine's nodes, packages, cores and PUs (their kernel
//! ids and how they nest), not of its name, memory sizes or measured matrices, so that `apply` can
//! warn when a mapping computed for one machine is applied on another shape.

use std::fmt::Write as _;
use std::path::Path;

use numaff_machine::Machine;
use serde::{Deserialize, Serialize};

use crate::Placement;

/// The version of the mapping file format this code writes and reads.
pub const FORMAT: u32 = 1;

/// Why a mapping file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum MappingError {
    /// The file could not be read or written.
    #[error("cannot {action} mapping file {file}: {source}")]
    Io {
        /// "read" or "write".
        action: &'static str,
        /// The file.
        file: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The text is not TOML, or a key is unknown or of the wrong type (the message has the line).
    #[error("{file}: {message}")]
    Parse {
        /// The file.
        file: String,
        /// The parser's message.
        message: String,
    },
    /// A field has a value that does not make a mapping.
    #[error("{file}: {field}: {problem}")]
    Invalid {
        /// The file.
        file: String,
        /// The field, as written in the file (`placement[3]`, `nodes`).
        field: String,
        /// What is wrong and what to write instead.
        problem: String,
    },
}

/// The machine a mapping was computed for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineId {
    /// The machine's name (informative).
    pub name: String,
    /// [`fingerprint`] of the machine.
    pub fingerprint: String,
    /// "2 nodes, 2 packages, 8 cores, 16 PUs" (informative).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

impl MachineId {
    /// The identity of a machine.
    pub fn of(m: &Machine) -> Self {
        MachineId {
            name: m.name.clone(),
            fingerprint: fingerprint(m),
            summary: Some(summary(m)),
        }
    }
}

/// What the mapping was computed from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Inputs {
    /// The communication matrix file, as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matrix: Option<String>,
    /// [`hash_bytes`] of the matrix file's content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matrix_hash: Option<String>,
    /// The trace file, as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
    /// The seed of the random algorithm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

/// The quality figures of the mapping (see [`crate::quality`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quality {
    /// Tree hop cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hop_cost: Option<f64>,
    /// Latency-weighted cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_cost: Option<f64>,
    /// Share of communication inside a core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_core: Option<f64>,
    /// Share of communication inside a cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_cache: Option<f64>,
    /// Share of communication inside a node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_node: Option<f64>,
}

/// A mapping file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MappingFile {
    /// Format version ([`FORMAT`]).
    pub format: u32,
    /// The algorithm's command-line name (or a free word for hand-written mappings).
    pub algorithm: String,
    /// Number of tasks; equals `placement.len()`.
    pub tasks: usize,
    /// PU (kernel cpu id) of each task, in task order.
    pub placement: Vec<u32>,
    /// NUMA node of each task's PU, when the machine says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<u32>>,
    /// The machine it was computed for.
    pub machine: MachineId,
    /// What it was computed from.
    #[serde(default)]
    pub input: Inputs,
    /// Its quality figures.
    #[serde(default)]
    pub quality: Quality,
}

impl MappingFile {
    /// A mapping of `placement` on machine `m` by `algorithm`; nodes are filled from the machine.
    pub fn new(algorithm: &str, m: &Machine, placement: Placement) -> Self {
        let nodes: Option<Vec<u32>> = placement.iter().map(|&pu| m.node_of_pu(pu)).collect();
        MappingFile {
            format: FORMAT,
            algorithm: algorithm.to_string(),
            tasks: placement.len(),
            placement,
            nodes,
            machine: MachineId::of(m),
            input: Inputs::default(),
            quality: Quality::default(),
        }
    }

    /// Parses and checks a mapping file's text; `file` names it in errors.
    pub fn from_toml(text: &str, file: &str) -> Result<Self, MappingError> {
        let m: MappingFile = toml::from_str(text).map_err(|e| MappingError::Parse {
            file: file.to_string(),
            message: e.to_string().trim_end().to_string(),
        })?;
        m.check(file)?;
        Ok(m)
    }

    /// Checks that the fields make one mapping.
    pub fn check(&self, file: &str) -> Result<(), MappingError> {
        let bad = |field: &str, problem: String| MappingError::Invalid {
            file: file.to_string(),
            field: field.to_string(),
            problem,
        };
        if self.format != FORMAT {
            return Err(bad(
                "format",
                format!(
                    "version {} is not known to this numaff, which reads version {FORMAT}",
                    self.format
                ),
            ));
        }
        if self.placement.is_empty() {
            return Err(bad(
                "placement",
                "is empty; give the PU (kernel cpu id) of each task, e.g. placement = [0, 2, 1, 3]"
                    .into(),
            ));
        }
        if self.tasks != self.placement.len() {
            return Err(bad(
                "tasks",
                format!(
                    "says {} but placement lists {} tasks",
                    self.tasks,
                    self.placement.len()
                ),
            ));
        }
        if let Some(nodes) = &self.nodes {
            if nodes.len() != self.placement.len() {
                return Err(bad(
                    "nodes",
                    format!(
                        "lists {} nodes but placement lists {} tasks; give one node per task or leave nodes out",
                        nodes.len(),
                        self.placement.len()
                    ),
                ));
            }
        }
        if !self.machine.fingerprint.starts_with("fnv1a64:") {
            return Err(bad(
                "machine.fingerprint",
                format!(
                    "{:?} is not a numaff fingerprint (\"fnv1a64:\" and 16 hex digits); \
                     `numaff map --machine X -o F` writes it",
                    self.machine.fingerprint
                ),
            ));
        }
        Ok(())
    }

    /// Reads and checks a mapping file.
    pub fn load(path: &Path) -> Result<Self, MappingError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| MappingError::Io {
            action: "read",
            file: file.clone(),
            source,
        })?;
        Self::from_toml(&text, &file)
    }

    /// The TOML text, with a header comment.
    pub fn to_toml(&self) -> String {
        let body = toml::to_string(self).unwrap_or_else(|e| format!("# cannot serialize: {e}\n"));
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# numaff mapping: task i runs on PU placement[i] (kernel cpu ids).\n\
             # Use it with `numaff apply FILE -- CMD` or export it with `numaff map --from FILE --export KIND`."
        );
        out.push_str(&body);
        out
    }

    /// Writes the file atomically (a temporary file renamed over the target).
    pub fn save(&self, path: &Path) -> Result<(), MappingError> {
        numaff_machine::write_atomic(path, self.to_toml().as_bytes()).map_err(|e| {
            let source = match e {
                numaff_machine::MachineError::Io { source, .. } => source,
                other => std::io::Error::other(other.to_string()),
            };
            MappingError::Io {
                action: "write",
                file: path.display().to_string(),
                source,
            }
        })
    }

    /// Whether the mapping was computed for a machine of the same shape as `m`.
    pub fn matches(&self, m: &Machine) -> bool {
        self.machine.fingerprint == fingerprint(m)
    }
}

/// 64-bit FNV-1a of some bytes, as `fnv1a64:` and 16 hex digits: stable across builds and platforms.
pub fn hash_bytes(data: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("fnv1a64:{h:016x}")
}

/// The canonical text the fingerprint hashes: nodes with their cpus, then packages with the PUs of
/// each core, in id order; e.g. `n0=0-3;n1=4-7|p0=0,1/2,3|p1=...`.
pub fn shape(m: &Machine) -> String {
    let mut nodes: Vec<_> = m.nodes.iter().collect();
    nodes.sort_by_key(|n| n.id);
    let mut out = String::new();
    for (i, n) in nodes.iter().enumerate() {
        let _ = write!(out, "{}n{}={}", if i > 0 { ";" } else { "" }, n.id, n.cpus);
    }
    out.push('|');
    let mut packs: Vec<_> = m.packages.iter().collect();
    packs.sort_by_key(|p| p.id);
    for (i, p) in packs.iter().enumerate() {
        let mut cores: Vec<String> = p.cores.iter().map(|c| c.pus.to_string()).collect();
        cores.sort();
        let _ = write!(
            out,
            "{}p{}={}",
            if i > 0 { ";" } else { "" },
            p.id,
            cores.join("/")
        );
    }
    out
}

/// The machine fingerprint: [`hash_bytes`] of [`shape`].
pub fn fingerprint(m: &Machine) -> String {
    hash_bytes(shape(m).as_bytes())
}

/// "2 nodes, 2 packages, 8 cores, 16 PUs".
pub fn summary(m: &Machine) -> String {
    let s = |n: usize, w: &str| format!("{n} {w}{}", if n == 1 { "" } else { "s" });
    format!(
        "{}, {}, {}, {}",
        s(m.nodes.len(), "node"),
        s(m.packages.len(), "package"),
        s(m.core_count(), "core"),
        s(m.pu_count(), "PU")
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use numaff_machine::{Core, CpuSet, Node, Package};

    /// 2 nodes x 1 package x 2 cores x 2 PUs.
    fn machine(name: &str) -> Machine {
        let mut m = Machine::new(name);
        for p in 0..2u32 {
            m.nodes.push(Node {
                id: p,
                memory_bytes: 1 << 30,
                cpus: CpuSet::parse(&format!("{}-{}", 4 * p, 4 * p + 3)).unwrap(),
            });
            m.packages.push(Package {
                id: p,
                cores: (0..2)
                    .map(|c| Core {
                        pus: CpuSet::parse(&format!("{0},{1}", 4 * p + 2 * c, 4 * p + 2 * c + 1))
                            .unwrap(),
                    })
                    .collect(),
            });
        }
        m
    }

    #[test]
    fn fingerprint_is_stable_and_ignores_name_and_memory() {
        let a = machine("a");
        let mut b = machine("b");
        b.nodes[0].memory_bytes = 7;
        assert_eq!(fingerprint(&a), fingerprint(&b));
        assert_eq!(shape(&a), "n0=0-3;n1=4-7|p0=0-1/2-3;p1=4-5/6-7");
        // The value itself is pinned: it must not change between numaff versions.
        assert_eq!(hash_bytes(b""), "fnv1a64:cbf29ce484222325");
        assert_eq!(hash_bytes(b"a"), "fnv1a64:af63dc4c8601ec8c");
        let mut c = machine("a");
        c.nodes[1].cpus = CpuSet::parse("4-6").unwrap();
        assert_ne!(fingerprint(&a), fingerprint(&c));
        assert_eq!(summary(&a), "2 nodes, 2 packages, 4 cores, 8 PUs");
    }

    #[test]
    fn save_load_round_trip_atomically() {
        let m = machine("two");
        let mut f = MappingFile::new("locality", &m, vec![0, 4, 1, 5]);
        f.input.matrix = Some("m.csv".into());
        f.input.matrix_hash = Some(hash_bytes(b"0,1\n1,0\n"));
        f.quality.hop_cost = Some(12.5);
        assert_eq!(f.nodes, Some(vec![0, 1, 0, 1]));
        let dir = std::env::temp_dir().join(format!("numaff-mapping-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("m.toml");
        f.save(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("# numaff mapping"), "{text}");
        assert!(text.contains("placement = [0, 4, 1, 5]"), "{text}");
        let back = MappingFile::load(&path).unwrap();
        assert_eq!(back, f);
        assert!(back.matches(&m));
        // No temporary file is left beside it.
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn base() -> String {
        MappingFile::new("compact", &machine("x"), vec![0, 1]).to_toml()
    }

    #[test]
    fn errors_name_file_field_and_problem() {
        let e = MappingFile::from_toml(&base().replace("tasks = 2", "tasks = 3"), "m.toml")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "m.toml: tasks: says 3 but placement lists 2 tasks");
        let e = MappingFile::from_toml(&base().replace("format = 1", "format = 9"), "m.toml")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("m.toml: format: version 9"), "{e}");
        let e = MappingFile::from_toml(&base().replace("nodes = [0, 0]", "nodes = [0]"), "m.toml")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("m.toml: nodes: lists 1 nodes"), "{e}");
        let e = MappingFile::from_toml(
            &base().replace("placement = [0, 1]", "placement = [0, \"x\"]"),
            "m.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("m.toml: ") && e.contains("line"), "{e}");
        let e = MappingFile::from_toml(&format!("{}\nbogus = 1\n", base()), "m.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("bogus"), "{e}");
        let e = MappingFile::load(Path::new("/nonexistent/m.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("cannot read mapping file /nonexistent/m.toml: "),
            "{e}"
        );
    }
}
