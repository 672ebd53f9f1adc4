//! The machine model (Minas' numarch, 004 §3.3): nodes, packages, cores, PUs, caches, distances,
//! latency/bandwidth matrices and the interconnect, plus the figures derived from them.

use serde::{Deserialize, Serialize};

use crate::cpuset::CpuSet;

/// A square matrix indexed by node *position* in [`Machine::nodes`] (not by node id), row = the node
/// of the cpu, column = the node of the memory.
pub type Matrix<T> = Vec<Vec<T>>;

/// A NUMA machine: what numaff knows about where threads run and where memory lives.
///
/// Ids are the kernel's (OS indexes). `nodes`, `packages` and `caches` are kept sorted (see
/// [`Machine::normalize`]) so that two descriptions of the same machine compare equal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// Short name (catalog name, host name, or the synthetic description).
    pub name: String,
    /// One line on what the machine is.
    pub description: Option<String>,
    /// Where the figures come from (paper and table, or "hwloc", "sysfs").
    pub source: Option<String>,
    /// Figures that were assumed rather than read from the source, each with its reason.
    pub assumptions: Vec<String>,
    /// Base page size in bytes.
    pub page_size: u64,
    /// Nominal core frequency in MHz, where known.
    pub frequency_mhz: Option<f64>,
    /// The processors' cache-coherence protocol, where known (the simulator takes MESIF's rule
    /// when it is not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coherence: Option<Coherence>,
    /// NUMA nodes, sorted by id. A node may have memory but no cpus (e.g. KNL MCDRAM).
    pub nodes: Vec<Node>,
    /// Packages (sockets), sorted by id.
    pub packages: Vec<Package>,
    /// Every cache instance, sorted by level, kind and first PU.
    pub caches: Vec<Cache>,
    /// ACPI SLIT distances (local = 10), square over `nodes`.
    pub distances: Option<Matrix<u32>>,
    /// Measured load-to-use latency in ns from the cpus of node row to the memory of node column.
    pub latency_ns: Option<Matrix<f64>>,
    /// Measured read bandwidth in MB/s from the cpus of node row to the memory of node column.
    pub bandwidth_mbps: Option<Matrix<f64>>,
    /// The links between nodes, where known.
    pub interconnect: Option<Interconnect>,
}

/// A cache-coherence protocol, by what it does with a line that is dirty in one cache when
/// another cache reads it: the one difference between them that numaff's simulator models
/// (crates/sim, `Simulator::coherent`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Coherence {
    /// MESI (Itanium 2 on SGI's NUMAlink directory, the older Xeons): the dirty copy goes back to
    /// memory on the way and both copies are then clean.
    #[serde(rename = "MESI", alias = "mesi")]
    Mesi,
    /// MESIF (Intel since Nehalem): as MESI between nodes; within a node the inclusive L3 keeps
    /// the line dirty until its last copy leaves (the F state forwards clean lines, which the
    /// simulator does not model: a clean line comes from memory).
    #[serde(rename = "MESIF", alias = "mesif")]
    Mesif,
    /// MOESI (AMD since the Opteron): the dirty copy becomes Owned and serves later reads from
    /// any node; memory is written when that copy leaves its caches, not at the transfer.
    #[serde(rename = "MOESI", alias = "moesi")]
    Moesi,
}

impl Coherence {
    /// The protocol's usual name (`MOESI`).
    pub fn name(self) -> &'static str {
        match self {
            Coherence::Mesi => "MESI",
            Coherence::Mesif => "MESIF",
            Coherence::Moesi => "MOESI",
        }
    }

    /// Every protocol, in the order of their names' list in messages.
    pub const ALL: [Coherence; 3] = [Coherence::Mesi, Coherence::Mesif, Coherence::Moesi];

    /// The protocol of a cpu vendor as the kernel and hwloc spell it (`CPUVendor`, `vendor_id`
    /// of /proc/cpuinfo): MOESI for AMD and Hygon, MESIF for Intel, none for the others.
    pub fn of_vendor(vendor: &str) -> Option<Self> {
        match vendor.trim() {
            "AuthenticAMD" | "HygonGenuine" => Some(Coherence::Moesi),
            "GenuineIntel" => Some(Coherence::Mesif),
            _ => None,
        }
    }
}

impl std::str::FromStr for Coherence {
    type Err = String;

    /// A protocol's name, in any case (`moesi`, `MESIF`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Coherence::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                let names: Vec<&str> = Coherence::ALL.iter().map(|c| c.name()).collect();
                format!(
                    "unknown coherence protocol {s:?}; expected one of {}",
                    names.join(", ")
                )
            })
    }
}

impl std::fmt::Display for Coherence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A NUMA node: a memory and the PUs closest to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// Kernel node id.
    pub id: u32,
    /// Memory size in bytes.
    pub memory_bytes: u64,
    /// PUs (kernel cpu ids) of the node; empty for memory-only nodes.
    pub cpus: CpuSet,
}

/// A processor package (socket).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Package {
    /// Kernel package id (physical_package_id).
    pub id: u32,
    /// Cores of the package in increasing order of their first PU.
    pub cores: Vec<Core>,
}

/// A core: the PUs (hardware threads) that share its pipeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Core {
    /// The PUs (kernel cpu ids) of this core; SMT siblings.
    pub pus: CpuSet,
}

/// What a cache holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheKind {
    /// Data and instructions.
    Unified,
    /// Data only.
    Data,
    /// Instructions only.
    Instruction,
}

impl CacheKind {
    /// The suffix lstopo uses: "" for unified, "d", "i".
    pub fn suffix(self) -> &'static str {
        match self {
            CacheKind::Unified => "",
            CacheKind::Data => "d",
            CacheKind::Instruction => "i",
        }
    }
}

/// One cache instance and the PUs that share it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cache {
    /// 1 for L1, 2 for L2, ...
    pub level: u8,
    /// Unified, data or instruction.
    pub kind: CacheKind,
    /// Capacity in bytes.
    pub size_bytes: u64,
    /// Line size in bytes.
    pub line_bytes: u32,
    /// Ways; `None` when unknown, 0 for fully associative.
    pub associativity: Option<u32>,
    /// Hit latency in core cycles, where known.
    pub latency_cycles: Option<f64>,
    /// The PUs sharing this instance.
    pub cpus: CpuSet,
}

/// The links between nodes (HyperTransport, QPI/UPI, NUMAlink, a ring, ...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interconnect {
    /// Topology in words: "ring", "fully connected", "mesh", "fat tree", ...
    pub kind: Option<String>,
    /// Undirected links as pairs of node ids.
    pub links: Vec<(u32, u32)>,
    /// Bandwidth of one link in one direction, MB/s.
    pub link_bandwidth_mbps: Option<f64>,
    /// Latency added by one hop, ns.
    pub hop_latency_ns: Option<f64>,
}

/// Where a NUMA factor was derived from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FactorSource {
    /// The measured latency matrix.
    Latency,
    /// The SLIT distance matrix.
    Distances,
}

/// The NUMA factor: remote over local memory latency, over every (cpu node, remote memory node) pair
/// (Minas 004 §3.3 and kMAF 000 §5.1 give it as a range or one figure; we keep min, max and mean).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct NumaFactor {
    /// Smallest remote/local ratio.
    pub min: f64,
    /// Largest remote/local ratio.
    pub max: f64,
    /// Mean over all remote pairs.
    pub mean: f64,
    /// Latency matrix or distances.
    pub source: FactorSource,
}

impl Machine {
    /// An empty machine with a name and 4 KiB pages; fill in the rest.
    pub fn new(name: impl Into<String>) -> Self {
        Machine {
            name: name.into(),
            description: None,
            source: None,
            assumptions: Vec::new(),
            page_size: 4096,
            frequency_mhz: None,
            coherence: None,
            nodes: Vec::new(),
            packages: Vec::new(),
            caches: Vec::new(),
            distances: None,
            latency_ns: None,
            bandwidth_mbps: None,
            interconnect: None,
        }
    }

    /// Sorts nodes, packages, cores and caches into the canonical order (matrices are permuted along
    /// with the nodes) so that equal machines compare equal.
    pub fn normalize(&mut self) {
        let mut order: Vec<usize> = (0..self.nodes.len()).collect();
        order.sort_by_key(|&i| self.nodes[i].id);
        if order.iter().enumerate().any(|(a, &b)| a != b) {
            if let Some(m) = &mut self.latency_ns {
                permute_square(m, &order);
            }
            if let Some(m) = &mut self.bandwidth_mbps {
                permute_square(m, &order);
            }
            if let Some(m) = &mut self.distances {
                permute_square(m, &order);
            }
            self.nodes = order.iter().map(|&i| self.nodes[i].clone()).collect();
        }
        self.packages.sort_by_key(|p| p.id);
        for p in &mut self.packages {
            p.cores.sort_by_key(|c| c.pus.first());
        }
        self.caches.sort_by(|a, b| {
            (a.level, a.kind, a.cpus.first()).cmp(&(b.level, b.kind, b.cpus.first()))
        });
        if let Some(ic) = &mut self.interconnect {
            for l in &mut ic.links {
                if l.0 > l.1 {
                    *l = (l.1, l.0);
                }
            }
            ic.links.sort_unstable();
            ic.links.dedup();
        }
    }

    /// All PUs of the machine.
    pub fn pus(&self) -> CpuSet {
        self.cores().flat_map(|(_, c)| c.pus.iter()).collect()
    }

    /// Number of PUs.
    pub fn pu_count(&self) -> usize {
        self.cores().map(|(_, c)| c.pus.len()).sum()
    }

    /// Every core with the id of its package, in package then core order.
    pub fn cores(&self) -> impl Iterator<Item = (u32, &Core)> {
        self.packages
            .iter()
            .flat_map(|p| p.cores.iter().map(move |c| (p.id, c)))
    }

    /// Number of cores.
    pub fn core_count(&self) -> usize {
        self.packages.iter().map(|p| p.cores.len()).sum()
    }

    /// The position in `nodes` of the node with this id.
    pub fn node_index(&self, node_id: u32) -> Option<usize> {
        self.nodes.iter().position(|n| n.id == node_id)
    }

    /// The node holding a PU.
    pub fn node_of_pu(&self, pu: u32) -> Option<u32> {
        self.nodes
            .iter()
            .find(|n| n.cpus.contains(pu))
            .map(|n| n.id)
    }

    /// The package holding a PU.
    pub fn package_of_pu(&self, pu: u32) -> Option<u32> {
        self.cores()
            .find(|(_, c)| c.pus.contains(pu))
            .map(|(p, _)| p)
    }

    /// Total memory in bytes.
    pub fn total_memory(&self) -> u64 {
        self.nodes.iter().map(|n| n.memory_bytes).sum()
    }

    /// Nodes that have cpus.
    pub fn cpu_nodes(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(|n| !n.cpus.is_empty())
    }

    /// The caches of the highest level (the last-level caches).
    pub fn last_level_caches(&self) -> Vec<&Cache> {
        let top = self.caches.iter().map(|c| c.level).max();
        self.caches
            .iter()
            .filter(|c| Some(c.level) == top)
            .collect()
    }

    /// SLIT distance between two node ids, if the matrix is known.
    pub fn distance(&self, from: u32, to: u32) -> Option<u32> {
        let (r, c) = (self.node_index(from)?, self.node_index(to)?);
        self.distances.as_ref()?.get(r)?.get(c).copied()
    }

    /// The NUMA factor (remote/local latency) from the latency matrix, else from the distances
    /// (000 §5.1 Table 4, 004 §3.3). `None` for one node or when neither matrix is known.
    pub fn numa_factor(&self) -> Option<NumaFactor> {
        if let Some(m) = &self.latency_ns {
            return self.factor_from(|r, c| m[r][c], FactorSource::Latency);
        }
        if let Some(m) = &self.distances {
            return self.factor_from(|r, c| f64::from(m[r][c]), FactorSource::Distances);
        }
        None
    }

    fn factor_from(
        &self,
        at: impl Fn(usize, usize) -> f64,
        source: FactorSource,
    ) -> Option<NumaFactor> {
        let mut ratios = Vec::new();
        for (r, node) in self.nodes.iter().enumerate() {
            if node.cpus.is_empty() {
                continue;
            }
            let local = at(r, r);
            if local <= 0.0 {
                continue;
            }
            for c in 0..self.nodes.len() {
                if c != r {
                    ratios.push(at(r, c) / local);
                }
            }
        }
        if ratios.is_empty() {
            return None;
        }
        let min = ratios.iter().copied().fold(f64::INFINITY, f64::min);
        let max = ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
        Some(NumaFactor {
            min,
            max,
            mean,
            source,
        })
    }

    /// Number of interconnect links at each node (by node position), where the links are known.
    pub fn links_per_node(&self) -> Option<Vec<usize>> {
        let ic = self.interconnect.as_ref()?;
        if ic.links.is_empty() {
            return None;
        }
        Some(
            self.nodes
                .iter()
                .map(|n| {
                    ic.links
                        .iter()
                        .filter(|(a, b)| *a == n.id || *b == n.id)
                        .count()
                })
                .collect(),
        )
    }

    /// The figures derived from the model, for display and JSON.
    pub fn summary(&self) -> Summary {
        Summary {
            nodes: self.nodes.len(),
            packages: self.packages.len(),
            cores: self.core_count(),
            pus: self.pu_count(),
            memory_bytes: self.total_memory(),
            numa_factor: self.numa_factor(),
            links_per_node: self.links_per_node(),
        }
    }
}

/// Counts and derived figures of a machine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// NUMA nodes.
    pub nodes: usize,
    /// Packages.
    pub packages: usize,
    /// Cores.
    pub cores: usize,
    /// PUs (hardware threads).
    pub pus: usize,
    /// Total memory.
    pub memory_bytes: u64,
    /// Remote/local latency ratio.
    pub numa_factor: Option<NumaFactor>,
    /// Links at each node (by node position).
    pub links_per_node: Option<Vec<usize>>,
}

/// Reorders rows and columns of a matrix over the nodes as `order` reorders the nodes. A matrix
/// that is not square over them is left as it is: validation reports its shape (a file with
/// ragged rows and nodes out of id order made `normalize` index out of bounds: fuzzing).
fn permute_square<T: Copy>(m: &mut Matrix<T>, order: &[usize]) {
    let n = order.len();
    if m.len() != n || m.iter().any(|row| row.len() != n) {
        return;
    }
    *m = order
        .iter()
        .map(|&r| order.iter().map(|&c| m[r][c]).collect())
        .collect();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_nodes() -> Machine {
        let mut m = Machine::new("t");
        for n in 0..2u32 {
            m.nodes.push(Node {
                id: n,
                memory_bytes: 1 << 30,
                cpus: CpuSet::parse(&format!("{}-{}", n * 2, n * 2 + 1)).unwrap(),
            });
            m.packages.push(Package {
                id: n,
                cores: (0..2)
                    .map(|c| Core {
                        pus: [n * 2 + c].into_iter().collect(),
                    })
                    .collect(),
            });
        }
        m
    }

    #[test]
    fn numa_factor_prefers_latency_over_distances() {
        let mut m = two_nodes();
        assert_eq!(m.numa_factor(), None);
        m.distances = Some(vec![vec![10, 21], vec![21, 10]]);
        let f = m.numa_factor().unwrap();
        assert!((f.max - 2.1).abs() < 1e-9 && f.source == FactorSource::Distances);
        m.latency_ns = Some(vec![vec![100.0, 150.0], vec![120.0, 100.0]]);
        let f = m.numa_factor().unwrap();
        assert!((f.min - 1.2).abs() < 1e-9 && (f.max - 1.5).abs() < 1e-9);
        assert!((f.mean - 1.35).abs() < 1e-9 && f.source == FactorSource::Latency);
    }

    #[test]
    fn lookups_and_links() {
        let mut m = two_nodes();
        assert_eq!(m.node_of_pu(3), Some(1));
        assert_eq!(m.package_of_pu(1), Some(0));
        assert_eq!(m.pus().to_string(), "0-3");
        assert_eq!(m.links_per_node(), None);
        m.interconnect = Some(Interconnect {
            kind: Some("point to point".into()),
            links: vec![(1, 0)],
            link_bandwidth_mbps: None,
            hop_latency_ns: None,
        });
        m.normalize();
        assert_eq!(m.interconnect.as_ref().unwrap().links, vec![(0, 1)]);
        assert_eq!(m.links_per_node(), Some(vec![1, 1]));
    }

    #[test]
    fn normalize_permutes_matrices_with_nodes() {
        let mut m = two_nodes();
        m.nodes.swap(0, 1);
        m.latency_ns = Some(vec![vec![1.0, 2.0], vec![3.0, 4.0]]);
        m.normalize();
        assert_eq!(m.nodes[0].id, 0);
        assert_eq!(m.latency_ns.unwrap(), vec![vec![4.0, 3.0], vec![2.0, 1.0]]);
    }
}
