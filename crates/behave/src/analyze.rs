//! The analysis of a trace (DeLocProf, 002 ch. 2, on kMAF's tables, 000 §4.3): communication events
//! between threads, the communication matrix, clusters of events in time, the metrics and class, and
//! the page-usage pattern.
//!
//! Two streaming passes over the trace, so that its size is bounded by disk, not memory: the first
//! finds the threads, the nodes, the time span and which kinds of samples there are; the second
//! feeds the structures (kMAF's two tables batch by batch, through [`Tables::record_batch`]).
//! Memory is bounded by the thread count (the matrices), the NUMA table (`max_pages`), the sharing
//! table (`sharing.blocks`), [`TIME_BINS`], and the distinct 64-byte lines written (the
//! communication detector remembers each line's last writer).
//!
//! **Which samples make communication events.** A load or store sample has a known direction:
//! communication events are DeLocProf's (002 §2.3.2), a store by one thread then a load of the same
//! 64-byte line by another ([`ThreadCommDetector`]). A page fault is an access of unknown kind (a
//! first touch may be a read or a write; an induced fault is whichever access came first), so it
//! cannot say who wrote and who read. When a trace has load or store samples, faults feed only the
//! NUMA table. For a fault-only trace the matrix is kMAF's sharing matrix (000 §4.3.2): each fault
//! adds one event between its thread and each of the (up to two) other threads of the block vector
//! of its 256-byte block, counted as the block's bytes, so the matrix equals the sharing matrix made
//! symmetric, times the block size.
//!
//! **Metrics.** MemV (002 eq. 2.3, 2.5) is the sampled memory volume: load and store samples times
//! the line size (fault-only traces: faults times the block size), in the same sampled units as the
//! events, so CommR compares like with like. DramR is the share of samples with a data source that
//! came from DRAM (local or remote); unknown (`None`) when the sampler gives no data source. CommC's
//! clusters are those of the event times (k-means + BIC over [`TIME_BINS`] equal bins of the trace's
//! span); CommDyn compares the task order of consecutive intervals of `interval_ns` (1 s, as 002
//! §2.3.6 measures it) that have communication; intervals without any event are skipped.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::delocprof::{
    classify, cluster_times, commloc, lcomm, task_sequence, Class, ClassThresholds, Clustering,
    CommEvent, Metrics, ThreadCommDetector,
};
use crate::ingest::{TableSample, Tables, NO_THREAD};
use crate::numa_table::{exclusivity, NumaTableConfig};
use crate::sample::{Kind, Sample, TraceMeta};
use crate::sharing::SharingTableConfig;
use crate::tracefile::{TraceError, TraceReader};

/// Equal-width time bins of the trace's span that events are counted in (the points the clustering
/// works on, and the bars of the events-over-time figure).
pub const TIME_BINS: usize = 2000;

/// Samples fed to the tables at a time ([`Tables::record_batch`]).
const TABLE_BATCH: usize = 4096;

/// Most distinct threads (pid, tid) of a trace that the analysis takes. Its matrices are thread ×
/// thread, one per CommDyn interval, and the task order of each interval is cubic in the threads
/// (1,000 threads take about a second, 2,000 seven), while the papers' largest runs have 64 to 256
/// threads; a trace with more is refused on the first pass, before anything is sized by it.
pub const MAX_TRACE_THREADS: usize = 1024;

/// Node ids of a trace's samples must be below this: the per-node counts and every page's NUMA
/// vector are indexed by node id. 1024 is Linux's largest `MAX_NUMNODES` (`CONFIG_NODES_SHIFT` 10)
/// and the machine descriptions' node cap (`numaff_machine::validate::MAX_NODES`).
pub const MAX_TRACE_NODES: u32 = 1024;

/// Most bytes of NUMA vectors the NUMA table may hold (one byte per node per page): with many
/// nodes, [`AnalyzeConfig::max_pages`] is lowered to fit, and samples to further pages are counted
/// as dropped. 1 GiB holds the default 16 Mi pages for up to 64 nodes.
pub const MAX_NUMA_TABLE_BYTES: u64 = 1 << 30;

/// The most pages of a NUMA table for `nodes` nodes: `max_pages`, lowered to fit
/// [`MAX_NUMA_TABLE_BYTES`].
fn numa_table_pages(max_pages: u64, nodes: usize) -> u64 {
    max_pages.min(MAX_NUMA_TABLE_BYTES / nodes.max(1) as u64)
}

/// The error of a trace beyond one of the caps above (its path filled in by [`analyze_file`]).
fn too_large(message: String) -> TraceError {
    TraceError::TooLarge {
        path: PathBuf::new(),
        message,
    }
}

/// Settings of the analysis.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AnalyzeConfig {
    /// Line size of communication events (64 bytes, 002 §2.3.2).
    pub line_bytes: u64,
    /// The sharing table for fault-only traces (kMAF Table 3 defaults).
    pub sharing: SharingTableConfig,
    /// Most pages the NUMA table holds (beyond, samples are counted as dropped).
    pub max_pages: u64,
    /// Most clusters tried by k-means + BIC.
    pub max_k: usize,
    /// Interval of CommDyn, ns.
    pub interval_ns: u64,
    /// Bins of the exclusivity histogram over (0, 1].
    pub exclusivity_bins: usize,
    /// Thresholds of the class decision tree.
    pub thresholds: ClassThresholds,
    /// Whether to collect DeLocProf's groups of concurrent pairs ([`Analysis::groups`]): a map
    /// update per event, about 10 % of the analysis's time on a fault trace, so only when asked.
    pub groups: bool,
}

impl Default for AnalyzeConfig {
    fn default() -> Self {
        AnalyzeConfig {
            line_bytes: 64,
            sharing: SharingTableConfig::default(),
            max_pages: 1 << 24,
            max_k: 8,
            interval_ns: 1_000_000_000,
            exclusivity_bins: 10,
            thresholds: ClassThresholds::default(),
            groups: false,
        }
    }
}

/// Where the communication matrix came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CommSource {
    /// Store-then-load events of load and store samples (DeLocProf).
    LoadsAndStores,
    /// kMAF's sharing table over page faults.
    SharingTable,
    /// MPI messages: each message one event of its size (002 §2.3.1).
    Messages,
    /// No samples.
    None,
}

/// A thread of the trace, in the trace's thread order (ascending pid, then tid).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ThreadInfo {
    /// Index in the matrix.
    pub index: usize,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Name from the trace's metadata.
    pub name: Option<String>,
    /// Samples of this thread.
    pub samples: u64,
}

/// One time bin with communication events.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct EventBin {
    /// Start of the bin, ns.
    pub start_ns: u64,
    /// Events in the bin.
    pub events: u64,
    /// The cluster the bin belongs to.
    pub cluster: usize,
}

/// The page-usage pattern (from the NUMA table).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PageUsage {
    /// Page size used, bytes.
    pub page_size: u64,
    /// Pages sampled.
    pub pages: u64,
    /// Pages by exclusivity (000 eq. 3, max(NV)/sum(NV)) in equal bins over (0, 1]; the last bin
    /// holds the pages used from one node only.
    pub exclusivity_histogram: Vec<u64>,
    /// Pages by the node of their first sample (where first-touch placement would put them).
    pub first_touch_per_node: Vec<u64>,
    /// Pages by the node that sampled them most (ties: lowest node).
    pub most_used_per_node: Vec<u64>,
    /// Pages sampled from more than one node.
    pub shared_pages: u64,
    /// Samples the NUMA table could not hold (full).
    pub dropped_samples: u64,
    /// Memory of the NUMA table, bytes.
    pub table_bytes: u64,
    /// Memory of kMAF's sharing table, bytes (bounded by `AnalyzeConfig::sharing`: 8 per entry).
    pub sharing_table_bytes: u64,
    /// Blocks that replaced another block in their sharing-table entry (the table's hash
    /// collisions: their earlier block vectors were forgotten).
    pub sharing_conflicts: u64,
}

/// What the sampler saw.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Coverage {
    /// The sampler named in the metadata.
    pub sampler: Option<String>,
    /// Samples in all.
    pub samples: u64,
    /// Fault samples.
    pub faults: u64,
    /// Load samples.
    pub loads: u64,
    /// Store samples.
    pub stores: u64,
    /// Samples with a latency.
    pub with_latency: u64,
    /// Samples with a data source.
    pub with_data_source: u64,
    /// First sample, ns.
    pub start_ns: u64,
    /// Last sample, ns.
    pub end_ns: u64,
    /// Samples per second over the span.
    pub samples_per_s: f64,
    /// Samples by node of the cpu.
    pub samples_per_node: Vec<u64>,
    /// Rates the sampler recorded in the metadata.
    pub rates: BTreeMap<String, f64>,
}

/// The result of [`analyze`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Analysis {
    /// Threads in matrix order.
    pub threads: Vec<ThreadInfo>,
    /// NUMA nodes seen (the largest node id plus one).
    pub nodes: usize,
    /// Where the matrix came from.
    pub comm_source: CommSource,
    /// Bytes exchanged by each pair (symmetric), indexed like `threads`.
    pub communication_matrix: Vec<Vec<f64>>,
    /// Communication events detected.
    pub events: u64,
    /// Width of the time bins of `event_bins`, ns.
    pub bin_ns: u64,
    /// Time bins with events, with their cluster.
    pub event_bins: Vec<EventBin>,
    /// The clustering of event times.
    pub clustering: Clustering,
    /// DeLocProf's groups of concurrently communicating pairs (002 §3.3.2), one per cluster of
    /// `clustering`, heaviest pair first: the input of DeLocMap. None unless
    /// [`AnalyzeConfig::groups`], or when the trace had more than [`MAX_BIN_PAIRS`] (time bin,
    /// pair) combinations.
    pub groups: Option<Vec<Vec<PairBytes>>>,
    /// Sampled memory volume (MemV), bytes.
    pub mem_volume: f64,
    /// DeLocProf metrics.
    pub metrics: Metrics,
    /// DeLocProf class.
    pub class: Class,
    /// What the class means for mapping, in one line.
    pub advice: String,
    /// Page-usage pattern.
    pub pages: PageUsage,
    /// The sampler's coverage.
    pub coverage: Coverage,
}

/// What the first pass learns.
struct Scan {
    threads: BTreeMap<(u32, u32), u64>,
    max_node: Option<u32>,
    start: u64,
    end: u64,
    counts: [u64; 3],
    with_latency: u64,
    with_source: u64,
    dram: u64,
}

fn scan<I>(batches: I) -> Result<Scan, TraceError>
where
    I: Iterator<Item = Result<Vec<Sample>, TraceError>>,
{
    let mut s = Scan {
        threads: BTreeMap::new(),
        max_node: None,
        start: u64::MAX,
        end: 0,
        counts: [0; 3],
        with_latency: 0,
        with_source: 0,
        dram: 0,
    };
    for batch in batches {
        for x in batch? {
            if x.node >= MAX_TRACE_NODES {
                return Err(too_large(format!(
                    "a sample of thread {} (pid {}) has node {}, and node ids must be below \
                     {MAX_TRACE_NODES} (Linux's largest node count); check the trace's node column",
                    x.tid, x.pid, x.node
                )));
            }
            let n = s.threads.len();
            *s.threads.entry((x.pid, x.tid)).or_insert(0) += 1;
            if s.threads.len() > n && s.threads.len() > MAX_TRACE_THREADS {
                return Err(too_large(format!(
                    "more than {MAX_TRACE_THREADS} distinct threads (pid, tid); the analysis is \
                     cubic in threads and takes at most {MAX_TRACE_THREADS}: analyse the samples \
                     of fewer threads or processes (filter the trace by pid)"
                )));
            }
            s.max_node = s.max_node.max(Some(x.node));
            s.start = s.start.min(x.time_ns);
            s.end = s.end.max(x.time_ns);
            s.counts[x.kind as usize] += 1;
            s.with_latency += u64::from(x.latency_ns.is_some());
            if let Some(d) = x.data_source {
                s.with_source += 1;
                s.dram += u64::from(d.is_dram());
            }
        }
    }
    Ok(s)
}

/// The event side of the analysis (002 §2.3.3-2.3.4), shared by traces of samples and of MPI
/// messages: the communication matrix, events per time bin with the tasks involved (for the
/// clustering and CommC), and a sparse matrix per CommDyn interval.
struct EventStats {
    tasks: usize,
    start: u64,
    bin_ns: u64,
    interval_ns: u64,
    words: usize,
    matrix: Vec<Vec<f64>>,
    bin_events: Vec<u64>,
    bin_tasks: HashMap<usize, Vec<u64>>,
    /// Bytes per task pair (a < b) in each time bin, for the groups of concurrent pairs; None once
    /// [`MAX_BIN_PAIRS`] entries were exceeded.
    bin_pairs: Option<FastMap<u64, f64>>,
    intervals: BTreeMap<u64, FastMap<(usize, usize), f64>>,
    events: u64,
}

/// A hash map with foldhash's fixed-seed hasher: fast on the per-event paths, and the same
/// iteration order in every run (sums over it come out bit for bit the same).
type FastMap<K, V> = HashMap<K, V, foldhash::fast::FixedState>;

/// Bytes per task pair (a < b).
type PairVolumes = FastMap<(u32, u32), f64>;

/// Tasks up to this many get groups of concurrent pairs (a pair's key packs two 20-bit indexes).
const GROUP_TASKS: usize = 1 << 20;

/// Most (time bin, pair) entries kept for the groups of concurrent pairs (about 48 bytes each):
/// beyond, the analysis reports no groups rather than use unbounded memory.
pub const MAX_BIN_PAIRS: usize = 4 << 20;

/// A pair of tasks (a < b, indexes in the analysis's task order) and the bytes they exchanged.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PairBytes {
    /// First task.
    pub a: usize,
    /// Second task.
    pub b: usize,
    /// Bytes exchanged.
    pub bytes: f64,
}

/// What [`EventStats::finish`] computes.
struct EventSummary {
    /// DeLocProf's groups of concurrently communicating pairs (002 §3.3.2): per cluster of event
    /// times, the pairs that communicated in it, heaviest first.
    groups: Option<Vec<Vec<PairBytes>>>,
    matrix: Vec<Vec<f64>>,
    events: u64,
    bin_ns: u64,
    event_bins: Vec<EventBin>,
    clustering: Clustering,
    commc: f64,
    commdyn: usize,
}

impl EventSummary {
    /// The metrics (002 eq. 2.2-2.8): CommR from the sampled memory volume (unknown without one),
    /// DramR as given.
    fn metrics(&self, mem_volume: f64, dram_r: Option<f64>) -> Metrics {
        let l = lcomm(&self.matrix);
        Metrics {
            Lcomm: l,
            CommR: (mem_volume > 0.0).then(|| l / mem_volume),
            CommC: self.commc,
            DramR: dram_r,
            CommLoc: commloc(&self.matrix),
            CommDyn: self.commdyn,
        }
    }
}

impl EventStats {
    /// For `tasks` tasks and events between `start` and `end` (ns, inclusive); with `groups`, the
    /// pairs of each time bin are kept for the groups of concurrent pairs.
    fn new(tasks: usize, start: u64, end: u64, interval_ns: u64, groups: bool) -> Self {
        let span = end.saturating_sub(start);
        EventStats {
            tasks,
            start,
            bin_ns: (span / TIME_BINS as u64 + 1).max(1),
            interval_ns: interval_ns.max(1),
            words: tasks.div_ceil(64),
            matrix: vec![vec![0.0; tasks]; tasks],
            bin_events: vec![0; TIME_BINS + 1],
            bin_tasks: HashMap::new(),
            bin_pairs: (groups && tasks <= GROUP_TASKS).then(FastMap::default),
            intervals: BTreeMap::new(),
            events: 0,
        }
    }

    /// One event: `bytes` between `from` and `to` at `time` (within the span given to `new`).
    fn add(&mut self, time: u64, from: usize, to: usize, bytes: f64) {
        if from == to || from >= self.tasks || to >= self.tasks {
            return;
        }
        self.events += 1;
        self.matrix[from][to] += bytes;
        self.matrix[to][from] += bytes;
        let since = time.saturating_sub(self.start);
        let b = ((since / self.bin_ns) as usize).min(TIME_BINS);
        self.bin_events[b] += 1;
        let words = self.words;
        let set = self.bin_tasks.entry(b).or_insert_with(|| vec![0; words]);
        set[from / 64] |= 1 << (from % 64);
        set[to / 64] |= 1 << (to % 64);
        if let Some(bins) = &mut self.bin_pairs {
            let key = (b as u64) << 40 | (from.min(to) as u64) << 20 | from.max(to) as u64;
            *bins.entry(key).or_insert(0.0) += bytes;
            if bins.len() > MAX_BIN_PAIRS {
                self.bin_pairs = None;
            }
        }
        *self
            .intervals
            .entry(since / self.interval_ns)
            .or_default()
            .entry((from.min(to), from.max(to)))
            .or_insert(0.0) += bytes;
    }

    /// The clustering of the event bins (weighted k-means with BIC, 002 eq. 2.1; times at the
    /// bins' centres, weights = events), CommC (eq. 2.4) and CommDyn (eq. 2.8).
    fn finish(self, max_k: usize) -> EventSummary {
        let (t, bin_ns, start) = (self.tasks, self.bin_ns, self.start);
        let nonempty: Vec<usize> = (0..self.bin_events.len())
            .filter(|&b| self.bin_events[b] > 0)
            .collect();
        let times: Vec<u64> = nonempty
            .iter()
            .map(|&b| start + b as u64 * bin_ns + bin_ns / 2)
            .collect();
        let weights: Vec<f64> = nonempty
            .iter()
            .map(|&b| self.bin_events[b] as f64)
            .collect();
        let clustering = cluster_times(&times, &weights, max_k, bin_ns as f64);
        let event_bins: Vec<EventBin> = nonempty
            .iter()
            .zip(&clustering.assignment)
            .map(|(&b, &c)| EventBin {
                start_ns: start + b as u64 * bin_ns,
                events: self.bin_events[b],
                cluster: c,
            })
            .collect();
        // CommC (eq. 2.4): distinct tasks per cluster over T · clusters.
        let commc = if clustering.k == 0 || t == 0 {
            0.0
        } else {
            let mut sets = vec![vec![0u64; self.words]; clustering.k];
            for (&b, &c) in nonempty.iter().zip(&clustering.assignment) {
                if let Some(bits) = self.bin_tasks.get(&b) {
                    for (w, v) in sets[c].iter_mut().zip(bits) {
                        *w |= v;
                    }
                }
            }
            let distinct: u32 = sets.iter().flatten().map(|w| w.count_ones()).sum();
            f64::from(distinct) / (t * clustering.k) as f64
        };
        // CommDyn (eq. 2.8) over the intervals with communication.
        let mut commdyn = 0;
        let mut previous: Option<Vec<usize>> = None;
        for cells in self.intervals.values() {
            let mut m = vec![vec![0.0; t]; t];
            for (&(a, b), &v) in cells {
                m[a][b] += v;
                m[b][a] += v;
            }
            let seq = task_sequence(&m);
            if previous.as_ref().is_some_and(|p| *p != seq) {
                commdyn += 1;
            }
            previous = Some(seq);
        }
        // Groups: the pairs of each cluster's bins, summed.
        let groups = self.bin_pairs.map(|bins| {
            let mut cluster_of = vec![usize::MAX; self.bin_events.len()];
            for (&b, &c) in nonempty.iter().zip(&clustering.assignment) {
                cluster_of[b] = c;
            }
            let mut per: Vec<PairVolumes> = vec![PairVolumes::default(); clustering.k];
            for (&key, &v) in &bins {
                let (b, x, y) = (key >> 40, (key >> 20) & 0xf_ffff, key & 0xf_ffff);
                let c = cluster_of.get(b as usize).copied().unwrap_or(usize::MAX);
                if let Some(g) = per.get_mut(c) {
                    *g.entry((x as u32, y as u32)).or_insert(0.0) += v;
                }
            }
            per.into_iter()
                .map(|g| {
                    let mut v: Vec<PairBytes> = g
                        .into_iter()
                        .map(|((a, b), bytes)| PairBytes {
                            a: a as usize,
                            b: b as usize,
                            bytes,
                        })
                        .collect();
                    v.sort_by(|x, y| {
                        y.bytes
                            .total_cmp(&x.bytes)
                            .then((x.a, x.b).cmp(&(y.a, y.b)))
                    });
                    v
                })
                .collect()
        });
        EventSummary {
            groups,
            matrix: self.matrix,
            events: self.events,
            bin_ns,
            event_bins,
            clustering,
            commc,
            commdyn,
        }
    }
}

/// Analyses a trace file (two streaming passes).
pub fn analyze_file(path: &Path, cfg: &AnalyzeConfig) -> Result<Analysis, TraceError> {
    let meta = TraceReader::open(path)?.meta().clone();
    analyze(|| TraceReader::open(path), &meta, cfg).map_err(|e| match e {
        TraceError::TooLarge { message, .. } => TraceError::TooLarge {
            path: path.to_path_buf(),
            message,
        },
        e => e,
    })
}

/// Analyses samples in memory; an error only for samples beyond the caps ([`MAX_TRACE_THREADS`],
/// [`MAX_TRACE_NODES`]).
pub fn analyze_samples(
    samples: &[Sample],
    meta: &TraceMeta,
    cfg: &AnalyzeConfig,
) -> Result<Analysis, TraceError> {
    let once = || Ok::<_, TraceError>(std::iter::once(Ok(samples.to_vec())));
    analyze(once, meta, cfg)
}

/// Analyses a trace that `open` streams from its start, as often as asked (twice).
pub fn analyze<F, I>(
    mut open: F,
    meta: &TraceMeta,
    cfg: &AnalyzeConfig,
) -> Result<Analysis, TraceError>
where
    F: FnMut() -> Result<I, TraceError>,
    I: Iterator<Item = Result<Vec<Sample>, TraceError>>,
{
    let sc = scan(open()?)?;
    let nodes = sc.max_node.map_or(0, |n| n as usize + 1);
    let index: HashMap<(u32, u32), usize> = sc
        .threads
        .keys()
        .enumerate()
        .map(|(i, &k)| (k, i))
        .collect();
    let t = index.len();
    let total: u64 = sc.counts.iter().sum();
    let (faults, loads, stores) = (
        sc.counts[Kind::Fault as usize],
        sc.counts[Kind::Load as usize],
        sc.counts[Kind::Store as usize],
    );
    let comm_source = if loads + stores > 0 {
        CommSource::LoadsAndStores
    } else if faults > 0 {
        CommSource::SharingTable
    } else {
        CommSource::None
    };
    let span = sc.end.saturating_sub(sc.start);
    let page_size = meta.page_size.unwrap_or(4096).max(1);

    // Second pass.
    let mut detector = ThreadCommDetector::new(cfg.line_bytes);
    let mut tables = Tables::new(
        NumaTableConfig::new(nodes.max(1), numa_table_pages(cfg.max_pages, nodes)),
        cfg.sharing,
        page_size,
    );
    let block_bytes = cfg.sharing.block_bytes.max(1).next_power_of_two();
    let mut first_touch = vec![0u64; nodes];
    let mut ev = EventStats::new(t, sc.start, sc.end, cfg.interval_ns, cfg.groups);
    let mut samples_per_node = vec![0u64; nodes];
    // Each batch of samples goes through the tables' batch path (for ingest speed) in the
    // samples' order; `side` keeps what else a sample's results need (time, task, node).
    let mut input: Vec<TableSample> = Vec::new();
    let mut side: Vec<(u64, usize, usize)> = Vec::new();
    for batch in open()? {
        // In parts of at most TABLE_BATCH samples, so that the buffers stay in the caches whatever
        // the size of the source's batches.
        for part in batch?.chunks(TABLE_BATCH) {
            input.clear();
            side.clear();
            for x in part {
                // The thread set and time span are those of the first pass; a source that
                // changed in between is not analysed beyond them.
                let Some(&task) = index.get(&(x.pid, x.tid)) else {
                    continue;
                };
                if x.time_ns < sc.start || x.time_ns > sc.end || x.node as usize >= nodes {
                    continue;
                }
                samples_per_node[x.node as usize] += 1;
                let mut thread = NO_THREAD;
                match (comm_source, x.kind) {
                    (CommSource::LoadsAndStores, Kind::Load | Kind::Store) => {
                        if let Some(e) =
                            detector.access(x.time_ns, task, x.addr, x.kind == Kind::Store)
                        {
                            ev.add(e.time_ns, e.from, e.to, e.bytes as f64);
                        }
                    }
                    (CommSource::SharingTable, Kind::Fault) => {
                        // Thread ids of the sharing table are 16-bit; more threads than that are
                        // not tracked for sharing (NO_THREAD is u16::MAX).
                        thread = u16::try_from(task).unwrap_or(NO_THREAD);
                    }
                    _ => {}
                }
                input.push(TableSample {
                    addr: x.addr,
                    node: x.node,
                    thread,
                });
                side.push((x.time_ns, task, x.node as usize));
            }
            tables.record_batch(&input, |i, r| {
                let Some(&(time_ns, task, node)) = side.get(i) else {
                    return;
                };
                if let Some(nv) = r.vector {
                    if nv.iter().map(|&c| u32::from(c)).sum::<u32>() == 1 {
                        first_touch[node] += 1;
                    }
                }
                let (mru, lru) = r.previous;
                for u in [mru, lru].into_iter().flatten() {
                    if usize::from(u) != task {
                        ev.add(time_ns, usize::from(u), task, block_bytes as f64);
                    }
                }
            });
        }
    }
    let table = &tables.numa;

    let ev = ev.finish(cfg.max_k);
    let mem_volume = match comm_source {
        CommSource::LoadsAndStores => ((loads + stores) * cfg.line_bytes) as f64,
        CommSource::SharingTable => (faults * block_bytes) as f64,
        CommSource::Messages | CommSource::None => 0.0,
    };
    let metrics = ev.metrics(
        mem_volume,
        (sc.with_source > 0).then(|| sc.dram as f64 / sc.with_source as f64),
    );
    let class = classify(&metrics, &cfg.thresholds);
    let advice = advice(class, &metrics, comm_source);

    // Page usage.
    let bins = cfg.exclusivity_bins.max(1);
    let mut hist = vec![0u64; bins];
    let mut most_used = vec![0u64; nodes];
    let (mut pages, mut shared) = (0u64, 0u64);
    for (_, nv) in table.iter() {
        pages += 1;
        let e = exclusivity(nv);
        let b = ((e * bins as f64).ceil() as usize).clamp(1, bins) - 1;
        hist[b] += 1;
        shared += u64::from(nv.iter().filter(|&&c| c > 0).count() > 1);
        let best = (0..nv.len()).max_by(|&a, &b| nv[a].cmp(&nv[b]).then(b.cmp(&a)));
        if let Some(n) = best.filter(|&n| n < nodes) {
            most_used[n] += 1;
        }
    }
    let threads = sc
        .threads
        .iter()
        .enumerate()
        .map(|(i, (&(pid, tid), &samples))| ThreadInfo {
            index: i,
            pid,
            tid,
            name: meta.thread_names.get(&tid).cloned(),
            samples,
        })
        .collect();
    Ok(Analysis {
        threads,
        nodes,
        comm_source,
        communication_matrix: ev.matrix,
        events: ev.events,
        bin_ns: ev.bin_ns,
        event_bins: ev.event_bins,
        clustering: ev.clustering,
        groups: ev.groups,
        mem_volume,
        metrics,
        class,
        advice,
        pages: PageUsage {
            page_size,
            pages,
            exclusivity_histogram: hist,
            first_touch_per_node: first_touch,
            most_used_per_node: most_used,
            shared_pages: shared,
            dropped_samples: table.dropped(),
            table_bytes: table.memory_bytes(),
            sharing_table_bytes: tables.sharing.memory_bytes(),
            sharing_conflicts: tables.sharing.conflicts(),
        },
        coverage: Coverage {
            sampler: meta.sampler.clone(),
            samples: total,
            faults,
            loads,
            stores,
            with_latency: sc.with_latency,
            with_data_source: sc.with_source,
            start_ns: if total > 0 { sc.start } else { 0 },
            end_ns: sc.end,
            samples_per_s: if span > 0 {
                total as f64 / (span as f64 / 1e9)
            } else {
                0.0
            },
            samples_per_node,
            rates: meta.rates.clone(),
        },
    })
}

/// Analyses a trace of MPI messages (002 ch. 2 applied to MPI, §2.3.1): the ranks are the tasks,
/// in rank order (`ThreadInfo::tid` is the rank, `pid` 0), and each message is one communication
/// event of its size at its time. The matrix, clustering, CommC, CommLoc and CommDyn are computed
/// as for threads; CommR and DramR need the program's memory traffic, which a message trace does
/// not have, so they are unknown (and the class cannot be Non-mapping); there is no page usage.
pub fn analyze_messages(messages: &[CommEvent], cfg: &AnalyzeConfig) -> Analysis {
    let mut per_rank: BTreeMap<usize, u64> = BTreeMap::new();
    for m in messages {
        *per_rank.entry(m.from).or_insert(0) += 1;
        if m.to != m.from {
            *per_rank.entry(m.to).or_insert(0) += 1;
        }
    }
    let index: HashMap<usize, usize> = per_rank.keys().enumerate().map(|(i, &r)| (r, i)).collect();
    let t = index.len();
    let start = messages.iter().map(|m| m.time_ns).min().unwrap_or(0);
    let end = messages.iter().map(|m| m.time_ns).max().unwrap_or(0);
    let mut ev = EventStats::new(t, start, end, cfg.interval_ns, cfg.groups);
    for m in messages {
        if let (Some(&a), Some(&b)) = (index.get(&m.from), index.get(&m.to)) {
            ev.add(m.time_ns, a, b, m.bytes as f64);
        }
    }
    let ev = ev.finish(cfg.max_k);
    let comm_source = if messages.is_empty() {
        CommSource::None
    } else {
        CommSource::Messages
    };
    let metrics = ev.metrics(0.0, None);
    let class = classify(&metrics, &cfg.thresholds);
    let advice = advice(class, &metrics, comm_source);
    let span = end - start;
    let total = messages.len() as u64;
    Analysis {
        threads: per_rank
            .iter()
            .enumerate()
            .map(|(i, (&rank, &n))| ThreadInfo {
                index: i,
                pid: 0,
                tid: u32::try_from(rank).unwrap_or(u32::MAX),
                name: Some(format!("rank {rank}")),
                samples: n,
            })
            .collect(),
        nodes: 0,
        comm_source,
        communication_matrix: ev.matrix,
        events: ev.events,
        bin_ns: ev.bin_ns,
        event_bins: ev.event_bins,
        clustering: ev.clustering,
        groups: ev.groups,
        mem_volume: 0.0,
        metrics,
        class,
        advice,
        pages: PageUsage {
            page_size: 0,
            pages: 0,
            exclusivity_histogram: vec![0; cfg.exclusivity_bins.max(1)],
            first_touch_per_node: Vec::new(),
            most_used_per_node: Vec::new(),
            shared_pages: 0,
            dropped_samples: 0,
            table_bytes: 0,
            sharing_table_bytes: 0,
            sharing_conflicts: 0,
        },
        coverage: Coverage {
            sampler: Some("mpi-messages".into()),
            samples: total,
            faults: 0,
            loads: 0,
            stores: 0,
            with_latency: 0,
            with_data_source: 0,
            start_ns: start,
            end_ns: end,
            samples_per_s: if span > 0 {
                total as f64 / (span as f64 / 1e9)
            } else {
                0.0
            },
            samples_per_node: Vec::new(),
            rates: BTreeMap::new(),
        },
    }
}

/// One line on what a class means for mapping.
pub fn advice(class: Class, m: &Metrics, source: CommSource) -> String {
    match (class, source) {
        (_, CommSource::None) => "no samples: nothing to say about mapping".into(),
        (Class::NonMapping, _) => "little communication for the memory traffic and little DRAM \
            pressure: thread mapping is unlikely to pay off; keep the scheduler's placement"
            .into(),
        (Class::Static, _) => format!(
            "a stable communication pattern ({} change{} of the task order): map once, offline, \
             from this matrix (`numaff map --algo deloc`, or `--algo locality`, TreeMatch-style)",
            m.CommDyn,
            if m.CommDyn == 1 { "" } else { "s" }
        ),
        (Class::Dynamic, _) => format!(
            "the communication pattern changes {} times: an online mapper that remaps at \
             intervals (as `numaff map --algo ondeloc` does from the current placement) suits it \
             better than one offline mapping",
            m.CommDyn
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delocprof::{comm_matrix, commc, CommEvent};

    /// 8 threads; thread i stores lines that thread i+1 (mod 8) then loads; three bursts.
    pub(crate) fn neighbour_trace() -> Vec<Sample> {
        let mut out = Vec::new();
        let mut seed = 5u64;
        for (burst, centre) in [10_000_000u64, 50_000_000, 90_000_000]
            .into_iter()
            .enumerate()
        {
            for round in 0..50u64 {
                for i in 0..8u32 {
                    let j = (i + 1) % 8;
                    let line = 0x10_0000u64 * (i as u64 + 1) + (burst as u64 * 50 + round) * 64;
                    // Around the burst's centre: a sum of four uniforms over 1 ms (about normal,
                    // 0.6 ms standard deviation).
                    let mut t = centre;
                    for _ in 0..4 {
                        seed = seed
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        t += (seed >> 33) % 1_000_000;
                    }
                    let s = |time_ns, tid: u32, kind| Sample {
                        time_ns,
                        pid: 1000,
                        tid: 1000 + tid,
                        cpu: tid,
                        node: tid / 4,
                        addr: line,
                        kind,
                        latency_ns: None,
                        data_source: None,
                    };
                    out.push(s(t, i, Kind::Store));
                    out.push(s(t + 50, j, Kind::Load));
                }
            }
        }
        out
    }

    #[test]
    #[allow(clippy::needless_range_loop)] // (i, j) cells of a matrix
    fn neighbour_pairs_and_three_bursts_are_recovered() {
        let a = analyze_samples(
            &neighbour_trace(),
            &TraceMeta::default(),
            &AnalyzeConfig::default(),
        )
        .unwrap();
        assert_eq!(a.comm_source, CommSource::LoadsAndStores);
        assert_eq!(a.threads.len(), 8);
        assert_eq!(a.threads[3].tid, 1003);
        let m = &a.communication_matrix;
        for i in 0..8 {
            let j = (i + 1) % 8;
            // Each pair: 3 bursts × 50 lines × 64 bytes.
            assert_eq!(m[i][j], 150.0 * 64.0, "({i},{j})");
            for k in 0..8 {
                if k != (i + 1) % 8 && (k + 1) % 8 != i {
                    assert_eq!(m[i][k], 0.0, "({i},{k})");
                }
            }
        }
        assert_eq!(a.events, 8 * 150);
        assert_eq!(a.clustering.k, 3, "BIC {:?}", a.clustering.bic);
        // Every task communicates in every burst: CommC = 8·3 / (8·3) = 1.
        assert_eq!(a.metrics.CommC, 1.0);
        assert_eq!(a.metrics.Lcomm, 2.0 * 8.0 * 150.0 * 64.0);
        // MemV: 2400 samples × 64 bytes; Lcomm counts each byte twice.
        assert_eq!(a.metrics.CommR, Some(1.0));
        assert_eq!(a.metrics.DramR, None);
        assert_eq!(a.metrics.CommDyn, 0, "one interval only");
        assert_eq!(a.class, Class::Static);
        // Page usage: each thread's lines lie in its own pages, used from node i/4 and (i+1)/4.
        assert_eq!(a.nodes, 2);
        assert!(a.pages.pages > 0);
        assert_eq!(
            a.pages.shared_pages, 6,
            "the 3 pages each of threads 3 and 7 (read from the other node)"
        );
        assert_eq!(
            a.pages.exclusivity_histogram.iter().sum::<u64>(),
            a.pages.pages
        );
        assert_eq!(a.coverage.samples, 2400);
        assert_eq!(a.coverage.samples_per_node, vec![1200, 1200]);
    }

    #[test]
    fn matches_the_plain_delocprof_functions() {
        // The streaming bins give the same CommC as the event-list function.
        let samples = neighbour_trace();
        let a =
            analyze_samples(&samples, &TraceMeta::default(), &AnalyzeConfig::default()).unwrap();
        let mut d = ThreadCommDetector::new(64);
        let index = |tid: u32| (tid - 1000) as usize;
        let events: Vec<CommEvent> = samples
            .iter()
            .filter_map(|s| d.access(s.time_ns, index(s.tid), s.addr, s.kind == Kind::Store))
            .collect();
        assert_eq!(comm_matrix(&events, 8), a.communication_matrix);
        let assign: Vec<usize> = events
            .iter()
            .map(|e| {
                let b = a
                    .event_bins
                    .iter()
                    .rposition(|bin| bin.start_ns <= e.time_ns)
                    .unwrap();
                a.event_bins[b].cluster
            })
            .collect();
        assert_eq!(commc(&events, &assign, a.clustering.k, 8), a.metrics.CommC);
    }

    #[test]
    fn table_memory_is_bounded_by_the_config_and_reported() {
        let f = |i: u64| Sample {
            time_ns: i,
            pid: 1,
            tid: (i % 4) as u32,
            cpu: 0,
            node: (i % 2) as u32,
            addr: i * 4096 * 7,
            kind: Kind::Fault,
            latency_ns: None,
            data_source: None,
        };
        let s: Vec<Sample> = (0..20_000).map(f).collect();
        let a = analyze_samples(&s, &TraceMeta::default(), &AnalyzeConfig::default()).unwrap();
        // kMAF's Table 3 defaults: 1 Mi entries of 8 bytes, whatever the trace.
        assert_eq!(a.pages.sharing_table_bytes, 8 << 20);
        assert_eq!(a.pages.pages, 20_000);
        assert!(a.pages.table_bytes >= 20_000 * 2, "{}", a.pages.table_bytes);
        // A small configuration bounds both tables: pages beyond the limit are dropped and counted.
        let cfg = AnalyzeConfig {
            max_pages: 4096,
            sharing: SharingTableConfig {
                blocks: 1024,
                block_bytes: 256,
            },
            ..AnalyzeConfig::default()
        };
        let a = analyze_samples(&s, &TraceMeta::default(), &cfg).unwrap();
        assert_eq!(a.pages.sharing_table_bytes, 8 * 1024);
        assert!(a.pages.table_bytes <= 4096 * 2, "{}", a.pages.table_bytes);
        assert!(a.pages.pages <= 4096 && a.pages.dropped_samples >= 20_000 - 4096);
        assert!(
            a.pages.sharing_conflicts > 0,
            "1024 entries for 20 000 blocks"
        );
    }

    #[test]
    fn fault_only_traces_use_the_sharing_table() {
        // Threads 0 and 1 fault on the same blocks; thread 2 alone elsewhere.
        let f = |t: u64, tid: u32, addr: u64| Sample {
            time_ns: t,
            pid: 1,
            tid,
            cpu: tid,
            node: 0,
            addr,
            kind: Kind::Fault,
            latency_ns: None,
            data_source: None,
        };
        let mut s = Vec::new();
        for b in 0..10u64 {
            s.push(f(b * 10, 0, b * 256));
            s.push(f(b * 10 + 1, 1, b * 256 + 8));
            s.push(f(b * 10 + 2, 2, (1 << 30) | (b * 256)));
        }
        let a = analyze_samples(&s, &TraceMeta::default(), &AnalyzeConfig::default()).unwrap();
        assert_eq!(a.comm_source, CommSource::SharingTable);
        assert_eq!(a.events, 10);
        assert_eq!(a.communication_matrix[0][1], 10.0 * 256.0);
        assert_eq!(a.communication_matrix[1][0], 10.0 * 256.0);
        assert_eq!(a.communication_matrix[2].iter().sum::<f64>(), 0.0);
    }

    /// `analyze` feeds the tables through `Tables::record_batch`, batch by batch: its matrix,
    /// events, first touches and drops are those of one `SharingTable::record` and
    /// `NumaTable::record` per sample (kMAF's semantics), whatever the batch sizes of the trace
    /// (also beyond `TABLE_BATCH`, which splits a batch into parts).
    #[test]
    fn analyze_batches_equal_per_sample_tables() {
        use crate::numa_table::NumaTable;
        use crate::sharing::{SharingMatrix, SharingTable};
        let mut rng = numaff_machine::rng::SplitMix64::new(0x51_7cc1_b727_220a);
        let samples: Vec<Sample> = (0..30_000u64)
            .map(|i| {
                let x = rng.next_u64();
                let t = (x % 6) as u32;
                Sample {
                    time_ns: i * 1000,
                    pid: 1,
                    tid: 100 + t,
                    cpu: t,
                    node: t % 3,
                    // Mostly a hot 32 KiB (shared blocks), else anywhere in 256 MiB (new pages).
                    addr: 0x7f00_0000_0000
                        + (x >> 20)
                            % if x.is_multiple_of(4) {
                                1 << 28
                            } else {
                                1 << 15
                            },
                    kind: Kind::Fault,
                    latency_ns: None,
                    data_source: None,
                }
            })
            .collect();
        let cfg = AnalyzeConfig {
            max_pages: 4096,
            sharing: SharingTableConfig {
                blocks: 512,
                block_bytes: 256,
            },
            ..AnalyzeConfig::default()
        };
        // The per-sample reference.
        let mut numa = NumaTable::new(NumaTableConfig::new(3, cfg.max_pages));
        let mut sharing = SharingTable::new(cfg.sharing);
        let mut sm = SharingMatrix::new();
        let mut matrix = vec![vec![0.0; 6]; 6];
        let (mut first_touch, mut events) = (vec![0u64; 3], 0u64);
        for s in &samples {
            let task = (s.tid - 100) as usize;
            if numa
                .record(s.addr >> 12, s.node as usize)
                .is_some_and(|nv| nv.iter().map(|&c| u32::from(c)).sum::<u32>() == 1)
            {
                first_touch[s.node as usize] += 1;
            }
            let (mru, lru) = sharing.block_vector(s.addr);
            sharing.record(task as u16, s.addr, &mut sm);
            for u in [mru, lru].into_iter().flatten().map(usize::from) {
                if u != task {
                    matrix[u][task] += 256.0;
                    matrix[task][u] += 256.0;
                    events += 1;
                }
            }
        }
        assert!(numa.dropped() > 0 && sharing.conflicts() > 0 && events > 1000);
        for batch in [1, 100, 4096, samples.len()] {
            let open = || {
                let batches: Vec<_> = samples.chunks(batch).map(|c| Ok(c.to_vec())).collect();
                Ok::<_, TraceError>(batches.into_iter())
            };
            let a = analyze(open, &TraceMeta::default(), &cfg).unwrap();
            assert_eq!(a.comm_source, CommSource::SharingTable);
            assert_eq!(a.communication_matrix, matrix, "batches of {batch}");
            assert_eq!(a.events, events);
            assert_eq!(a.pages.first_touch_per_node, first_touch);
            assert_eq!(a.pages.dropped_samples, numa.dropped());
            assert_eq!(a.pages.pages, numa.iter().count() as u64);
        }
    }

    #[test]
    fn dram_ratio_and_dynamics() {
        use crate::sample::DataSource;
        // Interval 0: 0→1 communicates; interval 1: 2→3; interval 2: 2→3 again. One change.
        let mut s = Vec::new();
        let mk = |t: u64, tid: u32, kind, addr, ds| Sample {
            time_ns: t,
            pid: 1,
            tid,
            cpu: 0,
            node: 0,
            addr,
            kind,
            latency_ns: Some(100),
            data_source: Some(ds),
        };
        for (iv, (w, r)) in [(0u32, 1u32), (2, 3), (2, 3)].into_iter().enumerate() {
            let t = iv as u64 * 1_000_000_000 + 10;
            let addr = 4096 * (iv as u64 + 1);
            s.push(mk(t, w, Kind::Store, addr, DataSource::L1));
            s.push(mk(t + 5, r, Kind::Load, addr, DataSource::LocalDram));
        }
        let a = analyze_samples(&s, &TraceMeta::default(), &AnalyzeConfig::default()).unwrap();
        assert_eq!(a.metrics.CommDyn, 1);
        assert_eq!(a.metrics.DramR, Some(0.5));
        assert_eq!(a.coverage.with_latency, 6);
    }

    fn fault(tid: u32, node: u32) -> Sample {
        Sample {
            time_ns: u64::from(tid),
            pid: 1,
            tid,
            cpu: 4_000_000_000,
            node,
            addr: 4096 * u64::from(tid),
            kind: Kind::Fault,
            latency_ns: None,
            data_source: None,
        }
    }

    #[test]
    fn a_node_id_beyond_the_cap_is_refused_before_anything_is_sized_by_it() {
        let cfg = AnalyzeConfig::default();
        let e = analyze_samples(&[fault(1, 4_000_000_000)], &TraceMeta::default(), &cfg)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("node 4000000000") && e.contains("below 1024"),
            "{e}"
        );
        // The largest node id allowed analyses (a cpu id is never a size).
        let a = analyze_samples(
            &[fault(1, MAX_TRACE_NODES - 1)],
            &TraceMeta::default(),
            &cfg,
        )
        .unwrap();
        assert_eq!(a.nodes, 1024);
    }

    #[test]
    fn more_distinct_threads_than_the_cap_are_refused() {
        let cfg = AnalyzeConfig::default();
        let at_cap: Vec<Sample> = (0..MAX_TRACE_THREADS as u32).map(|t| fault(t, 0)).collect();
        let a = analyze_samples(&at_cap, &TraceMeta::default(), &cfg).unwrap();
        assert_eq!(a.threads.len(), MAX_TRACE_THREADS);
        let mut over = at_cap;
        over.push(fault(70_000, 0));
        let e = analyze_samples(&over, &TraceMeta::default(), &cfg)
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than 1024 distinct threads"), "{e}");
    }

    #[test]
    fn many_nodes_shrink_the_numa_table_to_its_byte_cap() {
        assert_eq!(numa_table_pages(1 << 24, 8), 1 << 24);
        assert_eq!(numa_table_pages(1 << 24, 64), 1 << 24);
        // 1024 nodes: 1 Mi pages of 1 KiB vectors (1 GiB), not 16 Mi (16 GiB).
        assert_eq!(numa_table_pages(1 << 24, 1024), 1 << 20);
        assert_eq!(numa_table_pages(u64::MAX, 0), MAX_NUMA_TABLE_BYTES);
    }

    #[test]
    fn an_empty_trace_analyses_to_nothing() {
        let a = analyze_samples(&[], &TraceMeta::default(), &AnalyzeConfig::default()).unwrap();
        assert_eq!(a.comm_source, CommSource::None);
        assert!(a.communication_matrix.is_empty());
        assert_eq!(a.clustering.k, 0);
        assert_eq!(a.pages.pages, 0);
    }

    /// DeLocProf's groups (002 §3.3.2): two phases of messages, a ring then pairs (i, i+4), give
    /// two clusters whose groups hold exactly the pairs of their phase with their bytes.
    #[test]
    fn groups_of_concurrent_pairs_follow_the_clusters() {
        let mut m = Vec::new();
        for k in 0..10u64 {
            for i in 0..8usize {
                m.push(CommEvent {
                    time_ns: k * 1000 + i as u64,
                    from: i,
                    to: (i + 1) % 8,
                    bytes: 100,
                });
                m.push(CommEvent {
                    time_ns: 50_000_000 + k * 1000 + i as u64,
                    from: i,
                    to: (i + 4) % 8,
                    bytes: 10,
                });
            }
        }
        m.sort_by_key(|e| e.time_ns);
        let cfg = AnalyzeConfig {
            groups: true,
            ..AnalyzeConfig::default()
        };
        assert_eq!(analyze_messages(&m, &AnalyzeConfig::default()).groups, None);
        let a = analyze_messages(&m, &cfg);
        assert_eq!(a.clustering.k, 2);
        let g = a.groups.expect("groups");
        assert_eq!(g.len(), 2);
        let pairs = |grp: &[PairBytes]| {
            let mut v: Vec<(usize, usize, f64)> = grp.iter().map(|p| (p.a, p.b, p.bytes)).collect();
            v.sort_by_key(|x| (x.0, x.1));
            v
        };
        let mut ring: Vec<(usize, usize, f64)> = (0..8)
            .map(|i| (i.min((i + 1) % 8), i.max((i + 1) % 8), 1000.0))
            .collect();
        ring.sort_by_key(|x| (x.0, x.1));
        assert_eq!(pairs(&g[0]), ring);
        // (i, i+4) and (i+4, i) are one pair: 2 x 10 messages of 10 bytes.
        let across: Vec<(usize, usize, f64)> = (0..4).map(|i| (i, i + 4, 200.0)).collect();
        assert_eq!(pairs(&g[1]), across);
    }
}
