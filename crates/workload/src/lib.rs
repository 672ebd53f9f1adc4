//! numaff's simulator workloads: NAS- and PARSEC-like generators ([`kernels`]), workload files
//! ([`spec`], [`catalog`]) and replayed traces ([`replay`]), placed ([`ThreadPolicy`],
//! [`DataChoice`]) and run on the simulator ([`build`], [`run`]).

pub mod catalog;
pub mod error;
pub mod kernels;
pub mod ops;
pub mod replay;
pub mod spec;

use std::collections::{BTreeMap, HashMap};

use numaff_machine::Machine;
use numaff_policy::{Algorithm, MapInput};
use numaff_sim::{
    os_placement, DataPolicy, Op, OsScheduler, ProcessSpec, Report, SimConfig, Simulator,
    ThreadSpec,
};

pub use error::{SpecError, WorkloadError};
pub use ops::{Batched, Ops, Step};
pub use spec::{Init, Kernel, Program, Workload};

/// Where the threads go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ThreadPolicy {
    /// The Linux-like default: spread over idle cores in an order unrelated to sharing
    /// ([`numaff_sim::os_placement`]) and occasionally moved ([`numaff_sim::OsScheduler`]).
    Os,
    /// numaff_policy's compact.
    Compact,
    /// numaff_policy's scatter.
    Scatter,
    /// numaff_policy's round-robin.
    RoundRobin,
    /// numaff_policy's seeded random mapping.
    Random,
    /// Thread i (counting the programs' threads in file order) on cpu `list[i % len]`.
    List(Vec<u32>),
    /// A replayed trace's threads where they ran first ([`replay`]).
    Recorded,
}

impl std::str::FromStr for ThreadPolicy {
    type Err = WorkloadError;
    fn from_str(s: &str) -> Result<Self, WorkloadError> {
        Ok(match s.trim() {
            "os" => ThreadPolicy::Os,
            "compact" => ThreadPolicy::Compact,
            "scatter" => ThreadPolicy::Scatter,
            "round-robin" | "roundrobin" | "rr" => ThreadPolicy::RoundRobin,
            "random" => ThreadPolicy::Random,
            "recorded" => ThreadPolicy::Recorded,
            list if list.chars().next().is_some_and(|c| c.is_ascii_digit()) => {
                let cpus: Result<Vec<u32>, _> =
                    list.split(',').map(|x| x.trim().parse::<u32>()).collect();
                ThreadPolicy::List(cpus.map_err(|error| WorkloadError::BadCpuList {
                    list: list.to_string(),
                    error,
                })?)
            }
            other => return Err(WorkloadError::UnknownThreadPolicy(other.to_string())),
        })
    }
}

/// Where the pages go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataChoice {
    /// At first touch, on the toucher's node.
    FirstTouch,
    /// Round-robin over the nodes with memory by page number.
    Interleave,
    /// All on one node.
    Bind(u32),
    /// Each page on the node whose threads access it most (kMAF §3.1 D_L), from a profiling pass.
    OracleLocal,
    /// Each page on the node whose threads access it least (kMAF §3.1 D_R), from a profiling pass.
    OracleRemote,
}

impl std::str::FromStr for DataChoice {
    type Err = WorkloadError;
    fn from_str(s: &str) -> Result<Self, WorkloadError> {
        let s = s.trim();
        Ok(match s {
            "first-touch" | "firsttouch" | "ft" => DataChoice::FirstTouch,
            "interleave" => DataChoice::Interleave,
            "oracle-local" => DataChoice::OracleLocal,
            "oracle-remote" => DataChoice::OracleRemote,
            _ => match s.strip_prefix("bind") {
                Some(rest) => {
                    let n = rest.trim_start_matches([':', '=']);
                    DataChoice::Bind(
                        n.parse()
                            .map_err(|_| WorkloadError::BadBind(s.to_string()))?,
                    )
                }
                None => return Err(WorkloadError::UnknownDataPolicy(s.to_string())),
            },
        })
    }
}

/// The cpu of every thread of every program (programs in file order, threads in order): the
/// policy is applied to all threads of the workload together, so programs that run at once get
/// different PUs as long as there are enough.
pub fn placement(
    machine: &Machine,
    w: &Workload,
    policy: &ThreadPolicy,
    seed: u64,
) -> Result<Vec<Vec<u32>>, WorkloadError> {
    let n = w.threads();
    let flat: Vec<u32> = match policy {
        ThreadPolicy::Os => os_placement(machine, n, seed),
        ThreadPolicy::Recorded => {
            let mut cpus = Vec::new();
            for p in &w.programs {
                let Some(r) = &p.replay else {
                    return Err(WorkloadError::NotRecorded {
                        workload: w.name.clone(),
                        program: p.display_name(),
                    });
                };
                cpus.extend(r.recorded_cpus());
            }
            let pus = machine.pus();
            if let Some(&cpu) = cpus.iter().find(|&&c| !pus.contains(c)) {
                return Err(WorkloadError::RecordedCpuMissing {
                    cpu,
                    machine: machine.name.clone(),
                    cpus: pus,
                });
            }
            cpus
        }
        ThreadPolicy::List(list) => {
            if list.is_empty() {
                return Err(WorkloadError::EmptyCpuList);
            }
            let pus = machine.pus();
            if let Some(&cpu) = list.iter().find(|&&c| !pus.contains(c)) {
                return Err(WorkloadError::CpuMissing {
                    cpu,
                    machine: machine.name.clone(),
                    cpus: pus,
                });
            }
            (0..n).map(|i| list[i % list.len()]).collect()
        }
        other => {
            let algo = match other {
                ThreadPolicy::Compact => Algorithm::Compact,
                ThreadPolicy::Scatter => Algorithm::Scatter,
                ThreadPolicy::RoundRobin => Algorithm::RoundRobin,
                _ => Algorithm::Random,
            };
            let input = MapInput {
                seed,
                ..MapInput::new(machine, n)
            };
            numaff_policy::map(algo, &input)?
        }
    };
    let mut out = Vec::new();
    let mut i = 0;
    for p in &w.programs {
        out.push(flat[i..i + p.threads as usize].to_vec());
        i += p.threads as usize;
    }
    Ok(out)
}

/// The op streams of every thread of program `p`.
pub fn thread_ops(p: &Program) -> Vec<Ops> {
    (0..p.threads)
        .map(|t| Ops::new(kernels::thread_steps(p, p.threads, t)))
        .collect()
}

/// The memory accesses a run of `w` issues, from its threads' steps without unrolling them
/// (`Step::accesses`): what the run's report will count, so that a progress display can say how
/// far along a run is.
pub fn total_accesses(w: &Workload) -> u64 {
    w.programs
        .iter()
        .flat_map(|p| (0..p.threads).map(move |t| kernels::thread_steps(p, p.threads, t)))
        .flatten()
        .map(|s| s.accesses())
        .fold(0, u64::saturating_add)
}

/// Accesses per page from each node's cpus: what the oracles of kMAF §3.1 place pages by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageProfile {
    /// Nodes of the machine (at least 1): the length of each page's row.
    nodes: usize,
    /// Page numbers, in the order they were first accessed.
    pages: Vec<u64>,
    /// `counts[i * nodes + n]`: the accesses to `pages[i]` from node position `n`'s cpus.
    counts: Vec<u64>,
}

impl PageProfile {
    /// Each page number (virtual address >> page shift) with its accesses per node position, in
    /// the order the pages were first accessed.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &[u64])> + '_ {
        self.pages
            .iter()
            .copied()
            .zip(self.counts.chunks_exact(self.nodes))
    }

    /// Pages accessed.
    pub fn len(&self) -> usize {
        self.pages.len()
    }

    /// Whether no page was accessed.
    pub fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }
}

/// A profile of program `p` placed on `cpus`: per page (machine page size, or 2 MiB when the
/// program asks for huge pages), the accesses from each node's cpus (index = node position in
/// `machine.nodes`). Made by replaying the generator's own
/// access streams, every access counted once whether or not it would hit a cache (the oracle of
/// kMAF §3.1 counted accesses in Pin traces the same way). Threads moved by the os policy are
/// counted on their initial cpu. A thread's accesses to one page in a row are counted as one
/// run (a sweep touches a 4 KiB page 64 times in a row), and the ops are taken in batches as
/// the simulator takes them: a hash map entry per access would dominate an oracle run.
pub fn profile(machine: &Machine, p: &Program, cpus: &[u32]) -> PageProfile {
    let shift = if p.huge_pages {
        21
    } else {
        machine.page_size.max(4096).trailing_zeros()
    };
    let nodes = machine.nodes.len().max(1);
    let mut out = PageProfile {
        nodes,
        pages: Vec::new(),
        counts: Vec::new(),
    };
    // Page number -> its row in `out` (rows are in first-access order, whatever the hasher).
    let mut rows: HashMap<u64, usize, foldhash::fast::FixedState> = HashMap::default();
    let mut count = |page: u64, node: usize, n: u64| {
        let row = *rows.entry(page).or_insert_with(|| {
            out.pages.push(page);
            out.counts.resize(out.counts.len() + nodes, 0);
            out.pages.len() - 1
        });
        out.counts[row * nodes + node] += n;
    };
    let mut buf = vec![Op::Compute(0); 256];
    for (t, mut ops) in thread_ops(p).into_iter().enumerate() {
        let node = machine
            .node_of_pu(cpus[t])
            .and_then(|id| machine.node_index(id))
            .unwrap_or(0);
        let (mut page, mut run) = (0, 0u64);
        loop {
            let n = ops.fill_ops(&mut buf);
            if n == 0 {
                break;
            }
            for op in &buf[..n] {
                if let Op::Access(a) = op {
                    let this = a.vaddr >> shift;
                    if this != page {
                        if run > 0 {
                            count(page, node, run);
                        }
                        (page, run) = (this, 0);
                    }
                    run += 1;
                }
            }
        }
        if run > 0 {
            count(page, node, run);
        }
    }
    out
}

/// The oracle placement of a profile: per page the node (id) with the most accesses (`local`) or
/// the fewest (`!local`), among nodes with memory. Ties: for local the lower node id; for remote
/// the node farthest from the page's most-accessing node, then the lower id.
pub fn oracle(machine: &Machine, counts: &PageProfile, local: bool) -> BTreeMap<u64, u32> {
    let mem: Vec<usize> = (0..machine.nodes.len())
        .filter(|&i| machine.nodes[i].memory_bytes > 0)
        .collect();
    let dist = |a: usize, b: usize| {
        machine
            .distance(machine.nodes[a].id, machine.nodes[b].id)
            .unwrap_or(if a == b { 10 } else { 20 })
    };
    let mut out = BTreeMap::new();
    for (page, c) in counts.iter() {
        let Some(&top) = mem.iter().max_by_key(|&&i| (c[i], std::cmp::Reverse(i))) else {
            continue;
        };
        let pick = if local {
            top
        } else {
            *mem.iter()
                .min_by_key(|&&i| (c[i], std::cmp::Reverse(dist(top, i)), i))
                .unwrap_or(&top)
        };
        out.insert(page, machine.nodes[pick].id);
    }
    out
}

/// What a run needs besides the machine and the workload.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Thread placement.
    pub threads: ThreadPolicy,
    /// Data placement.
    pub data: DataChoice,
    /// Seed of the run (random placements, the os policy, the simulator's samplers).
    pub seed: u64,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            threads: ThreadPolicy::Os,
            data: DataChoice::FirstTouch,
            seed: 0,
        }
    }
}

/// The simulator processes and configuration of a run.
pub fn build(
    machine: &Machine,
    w: &Workload,
    opts: &RunOptions,
) -> Result<(Vec<ProcessSpec>, SimConfig), WorkloadError> {
    // Again here: `with_threads` and `scaled` change a checked workload.
    w.check()?;
    let cpus = placement(machine, w, &opts.threads, opts.seed)?;
    let mut procs = Vec::new();
    for (p, cpus) in w.programs.iter().zip(&cpus) {
        let policy = match &opts.data {
            DataChoice::FirstTouch => DataPolicy::FirstTouch,
            DataChoice::Interleave => DataPolicy::Interleave,
            DataChoice::Bind(n) => {
                if machine.node_index(*n).is_none() {
                    return Err(WorkloadError::NoNode {
                        node: *n,
                        machine: machine.name.clone(),
                    });
                }
                DataPolicy::Bind(*n)
            }
            DataChoice::OracleLocal | DataChoice::OracleRemote => DataPolicy::Explicit(oracle(
                machine,
                &profile(machine, p, cpus),
                opts.data == DataChoice::OracleLocal,
            )),
        };
        let mut spec = ProcessSpec::new(p.display_name(), policy).starting_at(p.start_ns);
        if p.huge_pages {
            spec = spec.with_huge_pages();
        }
        for (t, ops) in thread_ops(p).into_iter().enumerate() {
            spec = spec.thread(ThreadSpec::from_source(
                format!("{}.{t}", p.display_name()),
                cpus[t],
                Batched(ops),
            ));
        }
        procs.push(spec);
    }
    let cfg = SimConfig {
        seed: opts.seed,
        os_scheduler: (opts.threads == ThreadPolicy::Os).then(OsScheduler::default),
        ..SimConfig::default()
    };
    Ok((procs, cfg))
}

/// Simulated time between two progress calls of [`run_with`], ns.
pub const PROGRESS_STEP_NS: u64 = 200_000;

/// Runs a workload to the end; `progress(simulated ns, accesses so far)` is called every
/// [`PROGRESS_STEP_NS`] of simulated time. The run advances in those steps whether or not anyone
/// watches, so the figures do not depend on the caller.
pub fn run_with(
    machine: &Machine,
    w: &Workload,
    opts: &RunOptions,
    mut progress: impl FnMut(u64, u64),
) -> Result<Report, WorkloadError> {
    use numaff_engine::Environment as _;
    let (procs, cfg) = build(machine, w, opts)?;
    let mut sim = Simulator::new(machine, cfg);
    for p in procs {
        sim.spawn(p)
            .map_err(|e| WorkloadError::Simulator(e.to_string()))?;
    }
    while !sim.all_done() {
        let now = sim
            .advance(PROGRESS_STEP_NS)
            .map_err(|e| WorkloadError::Simulator(e.to_string()))?;
        progress(now, sim.accesses());
        if sim.stuck() {
            return Err(WorkloadError::Stuck(w.name.clone()));
        }
    }
    Ok(sim.report())
}

/// [`run_with`] without progress.
pub fn run(machine: &Machine, w: &Workload, opts: &RunOptions) -> Result<Report, WorkloadError> {
    run_with(machine, w, opts, |_, _| {})
}
