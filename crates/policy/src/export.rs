//! Exporters from a mapping (task → PU) to the syntax of the launchers and runtimes that pin
//! threads and processes themselves: OpenMP (OMP_PLACES, GOMP_CPU_AFFINITY, KMP_AFFINITY), Open MPI
//! rankfiles, Slurm's srun binding options and likwid-pin.
//!
//! Each task `i` gets a cpu set: its PU at [`Granularity::Pu`], or every PU of its core at
//! [`Granularity::Core`] (the thread may float among SMT siblings). Thread `i` of an OpenMP team,
//! rank `i` of an MPI job and task `i` of a Slurm step are the mapping's task `i`.

use std::fmt::Write as _;
use std::str::FromStr;

use numaff_machine::{CpuSet, Machine};

/// How wide each task's binding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Granularity {
    /// One PU per task, exactly as mapped.
    #[default]
    Pu,
    /// The whole core of the task's PU.
    Core,
}

/// The launcher syntaxes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportKind {
    /// `OMP_NUM_THREADS=n OMP_PLACES=... OMP_PROC_BIND=close` (OpenMP 4.0+, every runtime).
    OmpPlaces,
    /// `GOMP_CPU_AFFINITY="0 3 1-2"` (libgomp).
    Gomp,
    /// `KMP_AFFINITY=granularity=fine,explicit,proclist=[...]` (Intel / LLVM libomp).
    Kmp,
    /// An Open MPI rankfile (`rank i=host slot=S:C`).
    Rankfile,
    /// `srun --cpu-bind=map_cpu:... --mem-bind=map_mem:...`.
    SlurmMap,
    /// `srun --cpu-bind=mask_cpu:... --mem-bind=map_mem:...`.
    SlurmMask,
    /// `likwid-pin -c LIST`.
    Likwid,
}

impl ExportKind {
    /// Every kind, in the order help lists them.
    pub const ALL: [ExportKind; 7] = [
        ExportKind::OmpPlaces,
        ExportKind::Gomp,
        ExportKind::Kmp,
        ExportKind::Rankfile,
        ExportKind::SlurmMap,
        ExportKind::SlurmMask,
        ExportKind::Likwid,
    ];

    /// Command-line names, in the order of [`ExportKind::ALL`].
    pub const NAMES: [&'static str; 7] = [
        "omp",
        "gomp",
        "kmp",
        "rankfile",
        "slurm",
        "slurm-mask",
        "likwid",
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        let i = Self::ALL.iter().position(|&k| k == self).unwrap_or(0);
        Self::NAMES[i]
    }
}

impl FromStr for ExportKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim().to_ascii_lowercase();
        let s = match s.as_str() {
            "omp_places" | "omp-places" | "openmp" => "omp",
            "gomp_cpu_affinity" | "libgomp" => "gomp",
            "kmp_affinity" | "libomp" | "intel" => "kmp",
            "openmpi" | "mpi" | "rf" => "rankfile",
            "srun" | "slurm-map" | "map_cpu" => "slurm",
            "mask_cpu" => "slurm-mask",
            "likwid-pin" => "likwid",
            other => other,
        };
        Self::NAMES
            .iter()
            .position(|&n| n == s)
            .map(|i| Self::ALL[i])
            .ok_or_else(|| {
                format!(
                    "unknown export kind {s:?}; known: {}",
                    Self::NAMES.join(", ")
                )
            })
    }
}

/// Where one task goes, as the exporters need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskTarget {
    /// The PU of the mapping.
    pub pu: u32,
    /// The cpus to bind to (the PU, or its core at core granularity).
    pub cpus: CpuSet,
    /// NUMA node of the PU.
    pub node: Option<u32>,
    /// Logical index of the PU's package (position in package id order).
    pub package: Option<usize>,
    /// Logical index of the PU's core inside its package (position in first-PU order).
    pub core: Option<usize>,
}

/// The targets of a placement on a machine. PUs the machine does not know keep themselves as cpu
/// set and have no node, package or core.
pub fn targets(m: &Machine, placement: &[u32], g: Granularity) -> Vec<TaskTarget> {
    let mut packs: Vec<_> = m.packages.iter().collect();
    packs.sort_by_key(|p| p.id);
    placement
        .iter()
        .map(|&pu| {
            let mut t = TaskTarget {
                pu,
                cpus: std::iter::once(pu).collect(),
                node: m.node_of_pu(pu),
                package: None,
                core: None,
            };
            for (pi, p) in packs.iter().enumerate() {
                let mut cores: Vec<_> = p.cores.iter().collect();
                cores.sort_by_key(|c| c.pus.first());
                if let Some(ci) = cores.iter().position(|c| c.pus.contains(pu)) {
                    t.package = Some(pi);
                    t.core = Some(ci);
                    if g == Granularity::Core {
                        t.cpus = cores[ci].pus.clone();
                    }
                }
            }
            t
        })
        .collect()
}

/// Targets from a bare placement and optional nodes (no machine): PU granularity, no package/core.
pub fn targets_without_machine(placement: &[u32], nodes: Option<&[u32]>) -> Vec<TaskTarget> {
    placement
        .iter()
        .enumerate()
        .map(|(i, &pu)| TaskTarget {
            pu,
            cpus: std::iter::once(pu).collect(),
            node: nodes.and_then(|n| n.get(i).copied()),
            package: None,
            core: None,
        })
        .collect()
}

/// What an exporter produces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Export {
    /// The text to use: environment assignments, command-line options or a file's content.
    pub text: String,
    /// How to use it (for people; not part of the syntax).
    pub usage: String,
}

/// Why an export is not possible.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot export to {kind}: {problem}")]
pub struct ExportError {
    /// The export kind's name.
    pub kind: &'static str,
    /// What is missing.
    pub problem: String,
}

/// Exports targets to one launcher syntax. `host` is used by the rankfile.
pub fn export(kind: ExportKind, ts: &[TaskTarget], host: &str) -> Result<Export, ExportError> {
    let err = |problem: String| ExportError {
        kind: kind.name(),
        problem,
    };
    if ts.is_empty() {
        return Err(err("the mapping has no task".into()));
    }
    let n = ts.len();
    Ok(match kind {
        ExportKind::OmpPlaces => {
            let places: Vec<CpuSet> = ts.iter().map(|t| t.cpus.clone()).collect();
            Export {
                text: format!(
                    "OMP_NUM_THREADS={n} OMP_PLACES=\"{}\" OMP_PROC_BIND=close",
                    omp_places(&places)
                ),
                usage:
                    "prefix the program's command line with these assignments (or export them); \
                        thread i of the team runs on place i"
                        .into(),
            }
        }
        ExportKind::Gomp => {
            let pus: Vec<u32> = ts.iter().map(|t| t.pu).collect();
            Export {
                text: format!(
                    "OMP_NUM_THREADS={n} GOMP_CPU_AFFINITY=\"{}\"",
                    gomp_list(&pus)
                ),
                usage: "libgomp (gcc -fopenmp) only; thread i runs on the i-th cpu; PU granularity"
                    .into(),
            }
        }
        ExportKind::Kmp => {
            let fine = ts.iter().all(|t| t.cpus.len() == 1);
            let list: Vec<String> = ts
                .iter()
                .map(|t| {
                    if t.cpus.len() == 1 {
                        t.pu.to_string()
                    } else {
                        format!("{{{}}}", join(t.cpus.iter(), ","))
                    }
                })
                .collect();
            Export {
                text: format!(
                    "OMP_NUM_THREADS={n} KMP_AFFINITY=\"granularity={},explicit,proclist=[{}]\"",
                    if fine { "fine" } else { "core" },
                    list.join(",")
                ),
                usage: "Intel and LLVM OpenMP runtimes (libiomp5 / libomp); thread i runs on the \
                        i-th proclist entry"
                    .into(),
            }
        }
        ExportKind::Rankfile => {
            let mut text = String::new();
            for (i, t) in ts.iter().enumerate() {
                let (Some(p), Some(c)) = (t.package, t.core) else {
                    return Err(err(format!(
                        "task {i}'s PU {} is not in the machine's packages; a rankfile names \
                         socket:core, so give the machine (--machine)",
                        t.pu
                    )));
                };
                let _ = writeln!(text, "rank {i}={host} slot={p}:{c}");
            }
            Export {
                text,
                usage: format!(
                    "save as a file F; Open MPI 4.1: mpirun -np {n} -rf F PROGRAM; \
                     Open MPI 5.x: mpirun -np {n} --map-by rankfile:file=F PROGRAM. \
                     slot=S:C is the logical package S and its logical core C: ranks bind to \
                     whole cores"
                ),
            }
        }
        ExportKind::SlurmMap => {
            let pus: Vec<String> = ts.iter().map(|t| t.pu.to_string()).collect();
            Export {
                text: format!("--cpu-bind=map_cpu:{}{}", pus.join(","), mem_bind(ts)),
                usage: format!(
                    "srun --ntasks={n} OPTIONS PROGRAM, on one node; task i runs on the i-th cpu"
                ),
            }
        }
        ExportKind::SlurmMask => {
            let masks: Vec<String> = ts.iter().map(|t| t.cpus.to_hex()).collect();
            Export {
                text: format!("--cpu-bind=mask_cpu:{}{}", masks.join(","), mem_bind(ts)),
                usage: format!(
                    "srun --ntasks={n} OPTIONS PROGRAM, on one node; task i may run on the cpus \
                     of the i-th mask"
                ),
            }
        }
        ExportKind::Likwid => {
            let pus: Vec<u32> = ts.iter().map(|t| t.pu).collect();
            Export {
                text: format!("-c {}", likwid_list(&pus)),
                usage: "likwid-pin -c LIST PROGRAM: threads in creation order (the main thread \
                        first) go to the listed cpus; add -s MASK to skip runtime helper threads"
                    .into(),
            }
        }
    })
}

/// ` --mem-bind=map_mem:...` when every task's node is known, else nothing.
fn mem_bind(ts: &[TaskTarget]) -> String {
    let nodes: Option<Vec<String>> = ts.iter().map(|t| t.node.map(|n| n.to_string())).collect();
    match nodes {
        Some(n) => format!(" --mem-bind=map_mem:{}", n.join(",")),
        None => String::new(),
    }
}

fn join(it: impl Iterator<Item = u32>, sep: &str) -> String {
    it.map(|x| x.to_string()).collect::<Vec<_>>().join(sep)
}

/// One OpenMP place: `{5}`, `{0:4}` for a run of consecutive ids, `{0:4:2}` for a constant stride,
/// else `{0,3,7}`.
pub fn omp_place(s: &CpuSet) -> String {
    let ids: Vec<u32> = s.iter().collect();
    match ids.len() {
        0 => "{}".into(),
        1 => format!("{{{}}}", ids[0]),
        len => {
            let stride = ids[1] - ids[0];
            if ids.windows(2).all(|w| w[1] - w[0] == stride) && (len > 2 || stride == 1) {
                if stride == 1 {
                    format!("{{{}:{len}}}", ids[0])
                } else {
                    format!("{{{}:{len}:{stride}}}", ids[0])
                }
            } else {
                format!("{{{}}}", join(ids.into_iter(), ","))
            }
        }
    }
}

/// An OMP_PLACES list. Places that repeat one shape at a constant distance (three or more of them)
/// are written in the interval form `{0:2}:4:2` (4 places, each 2 ids above the previous); others
/// one by one. Thread i is bound to the i-th place of the expanded list.
pub fn omp_places(places: &[CpuSet]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < places.len() {
        // The longest run of places that are places[i] shifted by k * stride.
        let mut run = 1;
        let mut stride = 0i64;
        if i + 1 < places.len() {
            if let Some(s) = shift(&places[i], &places[i + 1]) {
                if s > 0 {
                    stride = s;
                    run = 2;
                    while i + run < places.len()
                        && shift(&places[i + run - 1], &places[i + run]) == Some(stride)
                    {
                        run += 1;
                    }
                }
            }
        }
        if run >= 3 {
            if stride == 1 {
                parts.push(format!("{}:{run}", omp_place(&places[i])));
            } else {
                parts.push(format!("{}:{run}:{stride}", omp_place(&places[i])));
            }
            i += run;
        } else {
            parts.push(omp_place(&places[i]));
            i += 1;
        }
    }
    parts.join(",")
}

/// `b - a` when `b` is `a` shifted by a constant.
fn shift(a: &CpuSet, b: &CpuSet) -> Option<i64> {
    if a.len() != b.len() || a.is_empty() {
        return None;
    }
    let d: Vec<i64> = a
        .iter()
        .zip(b.iter())
        .map(|(x, y)| i64::from(y) - i64::from(x))
        .collect();
    d.iter().all(|&x| x == d[0]).then_some(d[0])
}

/// Runs of increasing ids in order: (first, last, stride, count); a run of two with stride 1 is a
/// range, a longer constant-stride run keeps its stride.
fn runs(pus: &[u32]) -> Vec<(u32, u32, u32, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < pus.len() {
        let mut j = i;
        if i + 1 < pus.len() && pus[i + 1] > pus[i] {
            let s = pus[i + 1] - pus[i];
            while j + 1 < pus.len() && pus[j + 1] > pus[j] && pus[j + 1] - pus[j] == s {
                j += 1;
            }
            let count = j - i + 1;
            // Strides other than 1 only pay off from three ids on.
            if s != 1 && count < 3 {
                j = i;
            }
            if j > i {
                out.push((pus[i], pus[j], s, count));
                i = j + 1;
                continue;
            }
        }
        out.push((pus[i], pus[i], 1, 1));
        i += 1;
    }
    out
}

/// GOMP_CPU_AFFINITY: space-separated ids and ranges `a-b`, `a-b:s` (libgomp's syntax), in order.
pub fn gomp_list(pus: &[u32]) -> String {
    runs(pus)
        .into_iter()
        .map(|(a, b, s, c)| match (c, s) {
            (1, _) => a.to_string(),
            (_, 1) => format!("{a}-{b}"),
            _ => format!("{a}-{b}:{s}"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A likwid-pin cpu list: comma-separated ids and `a-b` ranges of consecutive ids, in order.
pub fn likwid_list(pus: &[u32]) -> String {
    let mut parts = Vec::new();
    for (a, b, s, c) in runs(pus) {
        if c > 1 && s == 1 {
            parts.push(format!("{a}-{b}"));
        } else {
            // likwid-pin has no stride syntax for physical ids: list them.
            let mut x = a;
            for _ in 0..c {
                parts.push(x.to_string());
                x += s;
            }
        }
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use numaff_machine::{Core, Node, Package};

    fn set(s: &str) -> CpuSet {
        CpuSet::parse(s).unwrap()
    }

    /// 2 packages = 2 nodes, 2 cores each, 2 PUs per core; PUs numbered core-major like Linux on
    /// many Intel machines: package 0 has cores {0,4} and {1,5}, package 1 {2,6} and {3,7}.
    fn machine() -> Machine {
        let mut m = Machine::new("t");
        m.nodes.push(Node {
            id: 0,
            memory_bytes: 1,
            cpus: set("0,1,4,5"),
        });
        m.nodes.push(Node {
            id: 1,
            memory_bytes: 1,
            cpus: set("2,3,6,7"),
        });
        m.packages.push(Package {
            id: 0,
            cores: vec![Core { pus: set("0,4") }, Core { pus: set("1,5") }],
        });
        m.packages.push(Package {
            id: 1,
            cores: vec![Core { pus: set("3,7") }, Core { pus: set("2,6") }],
        });
        m
    }

    fn text(kind: ExportKind, placement: &[u32], g: Granularity) -> String {
        export(kind, &targets(&machine(), placement, g), "h1")
            .unwrap()
            .text
    }

    #[test]
    fn omp_places_compact_and_plain_forms() {
        assert_eq!(omp_place(&set("5")), "{5}");
        assert_eq!(omp_place(&set("0-3")), "{0:4}");
        assert_eq!(omp_place(&set("0,1")), "{0:2}");
        assert_eq!(omp_place(&set("0,2,4")), "{0:3:2}");
        assert_eq!(omp_place(&set("0,4")), "{0,4}");
        assert_eq!(omp_place(&set("0,3,7")), "{0,3,7}");
        let singles = |v: &[u32]| -> Vec<CpuSet> {
            v.iter().map(|&p| std::iter::once(p).collect()).collect()
        };
        assert_eq!(omp_places(&singles(&[0, 4, 8, 12])), "{0}:4:4");
        assert_eq!(omp_places(&singles(&[0, 1, 2, 3])), "{0}:4");
        assert_eq!(omp_places(&singles(&[0, 4])), "{0},{4}");
        assert_eq!(omp_places(&singles(&[0, 4, 1, 5])), "{0},{4},{1},{5}");
        assert_eq!(omp_places(&singles(&[1, 0])), "{1},{0}");
        assert_eq!(
            omp_places(&[set("0-3"), set("4-7"), set("8-11"), set("16-19")]),
            "{0:4}:3:4,{16:4}"
        );
        assert_eq!(
            text(ExportKind::OmpPlaces, &[0, 2, 1, 3], Granularity::Pu),
            "OMP_NUM_THREADS=4 OMP_PLACES=\"{0},{2},{1},{3}\" OMP_PROC_BIND=close"
        );
        assert_eq!(
            text(ExportKind::OmpPlaces, &[0, 1], Granularity::Core),
            "OMP_NUM_THREADS=2 OMP_PLACES=\"{0,4},{1,5}\" OMP_PROC_BIND=close"
        );
    }

    #[test]
    fn gomp_cpu_affinity_ranges() {
        assert_eq!(gomp_list(&[0, 3, 1, 2]), "0 3 1-2");
        assert_eq!(gomp_list(&[0, 1, 2, 3]), "0-3");
        assert_eq!(gomp_list(&[0, 2, 4, 6, 1]), "0-6:2 1");
        assert_eq!(gomp_list(&[0, 2]), "0 2");
        assert_eq!(gomp_list(&[3, 3, 1]), "3 3 1");
        assert_eq!(
            text(ExportKind::Gomp, &[1, 0], Granularity::Pu),
            "OMP_NUM_THREADS=2 GOMP_CPU_AFFINITY=\"1 0\""
        );
    }

    #[test]
    fn kmp_affinity_explicit_proclist() {
        assert_eq!(
            text(ExportKind::Kmp, &[0, 2, 4], Granularity::Pu),
            "OMP_NUM_THREADS=3 KMP_AFFINITY=\"granularity=fine,explicit,proclist=[0,2,4]\""
        );
        assert_eq!(
            text(ExportKind::Kmp, &[0, 1], Granularity::Core),
            "OMP_NUM_THREADS=2 KMP_AFFINITY=\"granularity=core,explicit,proclist=[{0,4},{1,5}]\""
        );
    }

    #[test]
    fn open_mpi_rankfile_logical_socket_core() {
        // PU 6 is on package 1's core {2,6}, its second core in first-PU order.
        let t = export(
            ExportKind::Rankfile,
            &targets(&machine(), &[0, 6, 5, 3], Granularity::Pu),
            "h1",
        )
        .unwrap();
        assert_eq!(
            t.text,
            "rank 0=h1 slot=0:0\nrank 1=h1 slot=1:0\nrank 2=h1 slot=0:1\nrank 3=h1 slot=1:1\n"
        );
        assert!(t.usage.contains("-rf F"), "{}", t.usage);
        assert!(t.usage.contains("--map-by rankfile:file=F"), "{}", t.usage);
        let e = export(
            ExportKind::Rankfile,
            &targets_without_machine(&[0], None),
            "h",
        )
        .unwrap_err();
        assert!(e.to_string().contains("give the machine"), "{e}");
    }

    #[test]
    fn slurm_map_and_mask() {
        assert_eq!(
            text(ExportKind::SlurmMap, &[0, 4, 2], Granularity::Pu),
            "--cpu-bind=map_cpu:0,4,2 --mem-bind=map_mem:0,0,1"
        );
        assert_eq!(
            text(ExportKind::SlurmMask, &[0, 2], Granularity::Core),
            "--cpu-bind=mask_cpu:0x11,0x44 --mem-bind=map_mem:0,1"
        );
        assert_eq!(
            text(ExportKind::SlurmMask, &[0, 1], Granularity::Pu),
            "--cpu-bind=mask_cpu:0x1,0x2 --mem-bind=map_mem:0,0"
        );
        // Without nodes there is no --mem-bind.
        let t = export(
            ExportKind::SlurmMap,
            &targets_without_machine(&[0, 8], None),
            "h",
        )
        .unwrap();
        assert_eq!(t.text, "--cpu-bind=map_cpu:0,8");
    }

    #[test]
    fn likwid_pin_lists() {
        assert_eq!(likwid_list(&[0, 1, 2, 3]), "0-3");
        assert_eq!(likwid_list(&[0, 4, 1, 5]), "0,4,1,5");
        assert_eq!(likwid_list(&[0, 2, 4, 7, 8]), "0,2,4,7-8");
        assert_eq!(
            text(ExportKind::Likwid, &[2, 3, 0], Granularity::Pu),
            "-c 2-3,0"
        );
    }

    #[test]
    fn kinds_parse_with_aliases_and_list_names() {
        assert_eq!(
            "OMP_PLACES".parse::<ExportKind>(),
            Ok(ExportKind::OmpPlaces)
        );
        assert_eq!("srun".parse::<ExportKind>(), Ok(ExportKind::SlurmMap));
        let e = "bogus".parse::<ExportKind>().unwrap_err();
        assert!(
            e.contains("omp, gomp, kmp, rankfile, slurm, slurm-mask, likwid"),
            "{e}"
        );
        for k in ExportKind::ALL {
            assert_eq!(k.name().parse::<ExportKind>(), Ok(k));
        }
    }
}
