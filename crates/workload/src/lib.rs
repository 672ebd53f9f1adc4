//! numaff's simulator workloads: NAS- and PARSEC-like generators ([`kernels`]), workload files
//! ([`spec`], [`catalog`]) and replayed traces ([`replay`]), placed ([`ThreadPolicy`],
//! [`DataChoice`]) and run on the simulator ([`build`], [`run`]).

pub mod calibration;
pub mod catalog;
pub mod error;
pub mod kernels;
pub mod ops;
pub mod replay;
pub mod spec;

use std::collections::{BTreeMap, HashMap};

use numaff_behave::sharing::{SharingMatrix, SharingTable, SharingTableConfig};
use numaff_machine::Machine;
use numaff_policy::kmaf_data::KmafDataParams;
use numaff_policy::mapping::MappingFile;
use numaff_policy::{CommMatrix, MapInput};

pub use numaff_policy::Algorithm;
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
    /// ([`numaff_sim::os_placement`]) and now and then moved within their last-level cache
    /// ([`numaff_sim::OsScheduler`]).
    Os,
    /// A `numaff_policy` mapping algorithm over all threads of the workload together
    /// ([`numaff_policy::map`]). Those that read a communication matrix
    /// ([`Algorithm::needs_comm`]) get the workload's own ([`comm_matrix`]); ondeloc starts from
    /// the os placement of the same seed (where the threads would start); deloc has no DeLocProf
    /// groups (clusters in time), so every communicating pair forms one group, as with `numaff map
    /// --matrix` ([`numaff_policy::deloc::delocmap_unchecked`]). cimar and nimar are
    /// refused ([`WorkloadError::NeedsRunMetrics`]): they need metrics measured while the threads
    /// run, which a static placement does not have.
    Map(Algorithm),
    /// Thread i (counting the programs' threads in file order) on cpu `list[i % len]`.
    List(Vec<u32>),
    /// A mapping file (`map:FILE`, as `numaff map -o FILE` writes it): task i's PU for thread i
    /// (counting the programs' threads in file order). It must list exactly the workload's threads.
    File {
        /// The file, as given.
        path: String,
        /// Its placement: the PU of each task.
        placement: Vec<u32>,
    },
    /// A replayed trace's threads where they ran first ([`replay`]).
    Recorded,
}

impl std::str::FromStr for ThreadPolicy {
    type Err = WorkloadError;
    /// `os`, `recorded`, a cpu list (`0,2,4,6`), `map:FILE` (a mapping file, read here) or a
    /// mapping algorithm's name ([`Algorithm::NAMES`]).
    fn from_str(s: &str) -> Result<Self, WorkloadError> {
        let s = s.trim();
        Ok(match s {
            "os" => ThreadPolicy::Os,
            "recorded" => ThreadPolicy::Recorded,
            list if list.chars().next().is_some_and(|c| c.is_ascii_digit()) => {
                let cpus: Result<Vec<u32>, _> =
                    list.split(',').map(|x| x.trim().parse::<u32>()).collect();
                ThreadPolicy::List(cpus.map_err(|error| WorkloadError::BadCpuList {
                    list: list.to_string(),
                    error,
                })?)
            }
            _ => {
                if let Some(path) = s.strip_prefix("map:") {
                    if path.is_empty() {
                        return Err(WorkloadError::UnknownThreadPolicy(s.to_string()));
                    }
                    let file = MappingFile::load(std::path::Path::new(path))?;
                    return Ok(ThreadPolicy::File {
                        path: path.to_string(),
                        placement: file.placement,
                    });
                }
                let algo: Algorithm = s
                    .parse()
                    .map_err(|_| WorkloadError::UnknownThreadPolicy(s.to_string()))?;
                if needs_run_metrics(algo) {
                    return Err(WorkloadError::NeedsRunMetrics(algo.name()));
                }
                ThreadPolicy::Map(algo)
            }
        })
    }
}

/// Whether `algo` needs per-thread metrics measured during a run (CIMAR and NIMAR read 3DyRM's
/// operations, accesses and latency per thread), which a static placement cannot give.
fn needs_run_metrics(algo: Algorithm) -> bool {
    matches!(algo, Algorithm::Cimar | Algorithm::Nimar)
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
    /// kMAF's Oracle data mapping (000 §5.3, §6.1), from a profiling pass: a page whose exclusivity
    /// (eq. 3) is above min_Loc goes to the node that accesses it most (eq. 6), every other page
    /// is interleaved over the memory nodes by page number (eq. 8). See [`oracle_kmaf`].
    Oracle,
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
            "oracle" => DataChoice::Oracle,
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
            check_cpus(machine, list)?;
            (0..n).map(|i| list[i % list.len()]).collect()
        }
        ThreadPolicy::File { path, placement } => {
            if placement.len() != n {
                return Err(WorkloadError::MappingTasks {
                    file: path.clone(),
                    tasks: placement.len(),
                    workload: w.name.clone(),
                    threads: n,
                });
            }
            check_cpus(machine, placement)?;
            placement.clone()
        }
        ThreadPolicy::Map(algo) => {
            if needs_run_metrics(*algo) {
                return Err(WorkloadError::NeedsRunMetrics(algo.name()));
            }
            let comm = if algo.needs_comm() {
                Some(comm_matrix(w)?)
            } else {
                None
            };
            let current = (*algo == Algorithm::Ondeloc).then(|| os_placement(machine, n, seed));
            let input = MapInput {
                seed,
                comm: comm.as_ref(),
                current: current.as_ref(),
                ..MapInput::new(machine, n)
            };
            numaff_policy::map(*algo, &input)?
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

/// An error naming the first of `cpus` that the machine does not have.
fn check_cpus(machine: &Machine, cpus: &[u32]) -> Result<(), WorkloadError> {
    let pus = machine.pus();
    match cpus.iter().find(|&&c| !pus.contains(c)) {
        Some(&cpu) => Err(WorkloadError::CpuMissing {
            cpu,
            machine: machine.name.clone(),
            cpus: pus,
        }),
        None => Ok(()),
    }
}

/// Ops each thread issues per turn of [`comm_matrix`]'s round robin.
pub const COMM_TURN_OPS: usize = 32;

/// Most threads [`comm_matrix`] tells apart: kMAF's block vectors hold 2-byte thread ids (000
/// §4.3.2, eq. 11), one of which means "no thread".
pub const MAX_COMM_THREADS: usize = u16::MAX as usize;

/// Bit above every user-space virtual address (57 bits with five-level paging): the program index
/// is added above it, so that blocks of different programs never meet in the table.
const PROGRAM_SHIFT: u32 = 57;

/// The workload's own communication matrix, thread x thread over all its threads (programs in
/// file order, threads in order, as [`placement`] counts them): what kMAF's sharing detection (000
/// §4.3.2, Fig. 2-3) would see of the generator's access streams.
///
/// The threads' op streams are replayed side by side as the simulator advances them, in a round
/// robin of [`COMM_TURN_OPS`] ops per thread per turn, through a [`SharingTable`] with kMAF's
/// default configuration (Table 3: 1 M blocks of 256 bytes); each access of thread `t` to a block
/// adds one unit of sharing with the block vector's other threads (MRU, LRU). kMAF sees page
/// faults, not every access, so a thread's accesses to one block in a row inside its turn count as
/// one detection (a sweep reads a 256-byte block four lines in a row). Different programs never
/// share: each program's blocks are keyed by its index. Start times and barriers are not modelled:
/// every thread takes its turn from the start. The matrix is made symmetric ((t, u) + (u, t)), as
/// the mapping algorithms expect (kMAF §4.4 hands its sharing matrix to EagerMap).
///
/// Accesses are gathered per turn into one reused buffer and recorded in a batch
/// ([`SharingTable::record_batch`]); nothing is allocated per access.
pub fn comm_matrix(w: &Workload) -> Result<CommMatrix, WorkloadError> {
    let n = w.threads();
    if n >= MAX_COMM_THREADS {
        return Err(WorkloadError::CommThreads {
            threads: n,
            max: MAX_COMM_THREADS - 1,
        });
    }
    // (dense thread id, program key, its op stream) for every thread, in placement order.
    let mut streams: Vec<(u16, u64, Ops)> = Vec::with_capacity(n);
    for (pi, p) in w.programs.iter().enumerate() {
        let key = (pi as u64) << PROGRAM_SHIFT;
        for ops in thread_ops(p) {
            // n < MAX_COMM_THREADS: every id fits.
            let id = u16::try_from(streams.len()).unwrap_or(u16::MAX - 1);
            streams.push((id, key, ops));
        }
    }
    let mut table = SharingTable::new(SharingTableConfig::default());
    let mut sharing = SharingMatrix::new();
    let block_shift = SharingTableConfig::default().block_bytes.trailing_zeros();
    let mut buf = vec![Op::Compute(0); COMM_TURN_OPS];
    let mut batch: Vec<(u16, u64)> = Vec::with_capacity(COMM_TURN_OPS * n);
    let mut live: Vec<usize> = (0..streams.len()).collect();
    while !live.is_empty() {
        batch.clear();
        live.retain(|&i| {
            let (id, key, ops) = &mut streams[i];
            let got = ops.fill_ops(&mut buf);
            let mut last = None;
            for op in &buf[..got] {
                if let Op::Access(a) = op {
                    let block = a.vaddr >> block_shift;
                    if last != Some(block) {
                        batch.push((*id, a.vaddr.wrapping_add(*key)));
                        last = Some(block);
                    }
                }
            }
            got > 0
        });
        table.record_batch(&batch, &mut sharing);
    }
    let mut out = CommMatrix::new(n);
    for t in 0..n {
        for u in 0..n {
            let v = f64::from(sharing.get(t, u)) + f64::from(sharing.get(u, t));
            if v > 0.0 {
                out.set(t, u, v);
            }
        }
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

    /// A profile of `nodes` node positions from (page number, accesses per node position) rows, in
    /// the order given; a row shorter than `nodes` counts 0 for the rest, a longer one is cut.
    pub fn from_rows(nodes: usize, rows: impl IntoIterator<Item = (u64, Vec<u64>)>) -> Self {
        let nodes = nodes.max(1);
        let mut out = PageProfile {
            nodes,
            pages: Vec::new(),
            counts: Vec::new(),
        };
        for (page, mut row) in rows {
            row.resize(nodes, 0);
            out.pages.push(page);
            out.counts.extend(row);
        }
        out
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

/// kMAF's Oracle data mapping (000 §6.1 "Oracle", after the policy selection of §4.5 and §5.3):
/// per page of the profile, its exclusivity (eq. 3: the accesses from the node with the most over
/// all its accesses); a page with an exclusivity above min_Loc (Table 3: 80 %,
/// [`KmafDataParams::min_loc`]) goes to the memory node with the most accesses (eq. 6; ties: the
/// lower node id), every other page is interleaved over the nodes with memory by its page number
/// (eq. 8: page number mod N, page number = address >> log2(page size)). Returns node ids.
pub fn oracle_kmaf(machine: &Machine, counts: &PageProfile) -> BTreeMap<u64, u32> {
    let min_loc = KmafDataParams::default().min_loc;
    let mem: Vec<usize> = (0..machine.nodes.len())
        .filter(|&i| machine.nodes[i].memory_bytes > 0)
        .collect();
    let mut out = BTreeMap::new();
    if mem.is_empty() {
        return out;
    }
    for (page, c) in counts.iter() {
        let total: u64 = c.iter().sum();
        let Some(&top) = mem.iter().max_by_key(|&&i| (c[i], std::cmp::Reverse(i))) else {
            continue;
        };
        let most = c.iter().copied().max().unwrap_or(0);
        let exclusive = total > 0 && most as f64 / total as f64 > min_loc;
        let pick = if exclusive {
            top
        } else {
            mem[(page % mem.len() as u64) as usize]
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
            DataChoice::Oracle => {
                DataPolicy::Explicit(oracle_kmaf(machine, &profile(machine, p, cpus)))
            }
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
