//! The simulator's constants and options: core, scheduler, OS costs, samplers and energy, each with
//! where its default comes from. Machine figures (latency, bandwidth, caches) come from the Machine.

use serde::{Deserialize, Serialize};

/// Defaults for machines that do not give a figure. Used only where the Machine is silent.
pub mod defaults {
    /// Frequency when the Machine gives none, MHz.
    pub const FREQUENCY_MHZ: f64 = 2000.0;
    /// Local memory load-to-use latency when the Machine has no latency matrix, ns: a typical
    /// DDR3/DDR4 server figure (Intel MLC idle latency on 2-socket Xeons is 80-90 ns).
    pub const LOCAL_LATENCY_NS: f64 = 80.0;
    /// Latency per interconnect hop when neither a latency matrix, distances nor the interconnect's
    /// hop latency are given, ns.
    pub const HOP_LATENCY_NS: f64 = 40.0;
    /// Memory-controller bandwidth per node without a bandwidth matrix, MB/s: DDR3-1600 on one
    /// channel (12.8 GB/s). kMAF Table 1's DDR2-667 with 2 channels gives 10.7 GB/s, same order.
    pub const CONTROLLER_MBPS: f64 = 12_800.0;
    /// Link bandwidth per direction without a bandwidth matrix or `link_bandwidth_mbps`, MB/s
    /// (HyperTransport 3 at 16 bits, 6.4 GB/s per direction).
    pub const LINK_MBPS: f64 = 6_400.0;
    /// Hit latency in cycles by cache level (index 1..=4) when the Machine gives none (Intel
    /// Broadwell/Skylake: L1 4-5, L2 12-14, L3 40-60 cycles).
    pub const CACHE_LATENCY_CYCLES: [f64; 5] = [0.0, 4.0, 12.0, 40.0, 60.0];
    /// Associativity when the Machine gives none.
    pub const ASSOCIATIVITY: u32 = 8;
}

/// Hardware-like sampling (PEBS load latency, AMD IBS): one access in `period` is reported with
/// its latency; the period is jittered by ±`jitter` (a fraction) with the run's random generator so
/// that strided patterns do not alias with it, as perf does with random period offsets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HwSampling {
    /// Mean accesses between two samples.
    pub period: u64,
    /// Fraction of `period` by which each interval varies at random (0 = fixed period).
    pub jitter: f64,
    /// Only accesses at least this slow are reported (PEBS `ldlat`); 0 keeps all.
    pub min_latency_ns: f64,
    /// Cost of one sample to the sampled thread, ns (PEBS record write and, amortised, the
    /// interrupt that drains the buffer: a few hundred ns).
    pub cost_ns: f64,
}

impl HwSampling {
    /// Every access sampled, with its latency, at no cost to the thread: the exact view tests
    /// and analyses compare the sampled ones with.
    pub fn every_access() -> Self {
        HwSampling {
            period: 1,
            jitter: 0.0,
            min_latency_ns: 0.0,
            cost_ns: 0.0,
        }
    }
}

/// Induced page faults: every `interval_ns` the sampler marks `fraction` of each process's present
/// pages not present, so that the next access to each faults, is reported as a `Fault` sample, and
/// costs the faulting thread `cost_ns`. kMAF (000 §4.1) picks the pages at random (`scan` false);
/// Linux NUMA balancing's hinting faults walk the address space in windows (`scan` true: the next
/// pages in first-touch order from where the previous round stopped).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InducedFaults {
    /// Time between two rounds of marking.
    pub interval_ns: u64,
    /// Fraction of present pages marked per round.
    pub fraction: f64,
    /// Cost of one induced (minor) fault, ns: trap, kernel handler, PTE restore (kMAF measures a few
    /// microseconds).
    pub cost_ns: f64,
    /// Walk the pages in order (NUMA-balancing-like) instead of picking them at random (kMAF).
    pub scan: bool,
}

/// A Linux-scheduler-like default for unpinned threads (the "OS" baseline of the papers), after
/// CFS (kernel/sched/fair.c) with NUMA balancing off, as the papers' OS baseline has it. Every
/// `interval_ns` the balancer
/// - moves threads off PUs that run several onto idle PUs, the nearest first (periodic load
///   balancing works up the sched domains: the last-level cache's PUs, then the node's, then the
///   NUMA levels);
/// - moves each other running thread with probability `move_probability` to a random idle PU
///   within [`OsMoves`]'s reach (`Llc` by default: a thread that blocks and wakes again is put on
///   an idle cpu sharing its previous cpu's last-level cache, `select_idle_sibling`).
///
/// A balanced machine (one thread per busy PU, no idle PU near it) sees no moves: CFS never
/// exchanges two running tasks (only NUMA balancing's `task_numa_migrate` does), and its NUMA
/// levels balance every `sd_weight` ms times `busy_factor` 16 when busy (a second on a 64-cpu
/// machine), longer than the simulated runs. Each move costs `thread_migration_ns` and leaves
/// the caches cold. It acts on every thread of the run; the initial spread is
/// [`crate::os_placement`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OsScheduler {
    /// Time between two balancing rounds, ns (CFS balances busy domains every few ms; the
    /// default 1 ms is scaled down with the simulated programs, which run for milliseconds).
    /// Keep it well above `thread_migration_ns / move_probability`: a thread moved more often
    /// than it can pay for its moves falls behind for good (2 µs with probability 0.5 and the
    /// 5 µs move cost: 2.5 µs of moves per 2 µs round; a test run so set did not end in 15 min).
    pub interval_ns: u64,
    /// Probability that a balanced thread is moved anyway in a round.
    pub move_probability: f64,
    /// Where such a move may go.
    #[serde(default)]
    pub moves: OsMoves,
}

/// Where the os balancer's occasional moves of balanced threads go.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OsMoves {
    /// To an idle PU sharing the thread's last-level cache (its node where the machine gives no
    /// caches): CFS's wake-up placement. No move when none is idle.
    #[default]
    Llc,
    /// To any idle PU, or an exchange with a random running thread when none is idle. Not a Linux
    /// behaviour: a stress of the lines threads leave behind in caches on other nodes, for tests
    /// of the coherence invariants.
    Anywhere,
}

impl Default for OsScheduler {
    fn default() -> Self {
        OsScheduler {
            interval_ns: 1_000_000,
            move_probability: 0.05,
            moves: OsMoves::Llc,
        }
    }
}

/// Energy model: static power times makespan plus energy per event. The per-event figures are the
/// order of magnitude McPAT/CACTI (kMAF §3) and DRAM datasheets give for 22-32 nm servers; they
/// make the energy estimate proportional to what moved, not a calibrated measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnergyModel {
    /// Static (leakage + uncore) power per package, W.
    pub static_w_per_package: f64,
    /// Static (background + refresh) power per memory node, W.
    pub static_w_per_node: f64,
    /// Energy of one L1 access, nJ.
    pub l1_nj: f64,
    /// Energy of one L2 access, nJ.
    pub l2_nj: f64,
    /// Energy of one last-level (or deeper) cache access, nJ.
    pub llc_nj: f64,
    /// Energy of one 64-byte DRAM read or write (about 20 pJ/bit with I/O), nJ.
    pub dram_line_nj: f64,
    /// Energy of moving 64 bytes over one interconnect link (about 10 pJ/bit), nJ.
    pub link_line_nj: f64,
}

impl Default for EnergyModel {
    fn default() -> Self {
        EnergyModel {
            static_w_per_package: 20.0,
            static_w_per_node: 3.0,
            l1_nj: 0.05,
            l2_nj: 0.2,
            llc_nj: 1.0,
            dram_line_nj: 10.0,
            link_line_nj: 5.0,
        }
    }
}

/// Everything about a run that is not the machine or the workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimConfig {
    /// Seed of the run's random generator (sampler jitter, induced-fault choices).
    pub seed: u64,
    /// Outstanding accesses per hardware thread (memory-level parallelism): Intel cores have 10-12
    /// line fill buffers; independent misses overlap up to this many.
    pub mlp: usize,
    /// Issue cost of any access, cycles (a pointer chase then measures latency + 1 cycle).
    pub issue_cycles: f64,
    /// How far one hardware thread's clock may run ahead of the next one before the scheduler
    /// switches, ns. The memory controllers and links keep their requests in time order whatever
    /// it is (fabric.rs); a smaller quantum makes each thread see the others' effects sooner.
    pub quantum_ns: f64,
    /// Time slice when several software threads share a PU, ns (Linux CFS: a few ms).
    pub slice_ns: f64,
    /// Cost of a context switch between software threads on one PU, ns.
    pub context_switch_ns: f64,
    /// Cost of moving a thread to another PU, ns (the switch and the run-queue work; the cold caches
    /// cost by themselves afterwards).
    pub thread_migration_ns: f64,
    /// Cost of a first-touch (allocating, zeroing) fault on a base page, ns.
    pub fault_ns: f64,
    /// Cost of a first-touch fault on a 2 MiB page, ns (zeroing 2 MiB dominates).
    pub huge_fault_ns: f64,
    /// Fixed cost of one page-migration request (system call, locking, TLB shootdown), ns.
    pub migration_call_ns: f64,
    /// Kernel cost per migrated page besides the copy (unmap, remap), ns.
    pub migration_page_ns: f64,
    /// Latency of a cache-to-cache transfer between caches of the same node, ns (Intel MLC HitM
    /// latency within a socket is 40-60 ns). Between nodes it is the latency between the nodes.
    pub c2c_local_ns: f64,
    /// Report each first-touch fault as a `Fault` sample, for an online policy to take
    /// (`Environment::drain_samples`). Off by default, as the other samplers: a run without a
    /// policy has nobody to read them, and kept they cost 56 bytes per page and, over a 1 GiB
    /// working set, a large share of the simulation's time.
    pub first_touch_samples: bool,
    /// Hardware-like 1-in-N sampling, off when `None`.
    pub hw_sampling: Option<HwSampling>,
    /// kMAF-style induced faults, off when `None`.
    pub induced_faults: Option<InducedFaults>,
    /// Energy constants.
    pub energy: EnergyModel,
    /// Linux-like balancing of the threads (the "os" thread placement), off when `None`.
    #[serde(default)]
    pub os_scheduler: Option<OsScheduler>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 0,
            mlp: 10,
            issue_cycles: 1.0,
            quantum_ns: 20.0,
            slice_ns: 1_000_000.0,
            context_switch_ns: 2_000.0,
            thread_migration_ns: 5_000.0,
            fault_ns: 1_000.0,
            huge_fault_ns: 60_000.0,
            migration_call_ns: 5_000.0,
            migration_page_ns: 1_000.0,
            c2c_local_ns: 45.0,
            first_touch_samples: false,
            hw_sampling: None,
            induced_faults: None,
            energy: EnergyModel::default(),
            os_scheduler: None,
        }
    }
}
