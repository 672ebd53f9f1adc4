//! The errors of loading, checking, placing and running workloads: [`SpecError`] for a workload
//! whose parameters cannot run, [`WorkloadError`] for everything else. Their texts are what
//! `numaff sim` prints.

use std::num::ParseIntError;
use std::path::PathBuf;

use numaff_machine::CpuSet;

use crate::kernels::MAX_ARRAY_BYTES;
use crate::spec::MAX_THREADS;

/// Why a workload's parameters cannot run ([`crate::Workload::check`]). `kernel` is the name of
/// the offending program's kernel.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// The workload has no program.
    #[error("no [[program]]")]
    NoProgram,
    /// A replayed trace's program was queued behind another, or its thread count changed.
    #[error("{kernel}: a trace program cannot be queued or change its thread count")]
    TraceReshaped { kernel: &'static str },
    /// Kernel `trace` in a workload file, which holds no recorded accesses.
    #[error("{kernel}: kernel trace replays a recorded trace; run it with numaff sim --trace FILE (Parquet or CSV from numaff profile)")]
    TraceNotRecorded { kernel: &'static str },
    /// A program with no threads.
    #[error("{kernel}: threads must be at least 1")]
    NoThreads { kernel: &'static str },
    /// A program with more than [`MAX_THREADS`] threads.
    #[error(
        "{kernel}: {threads} threads is more than the {max} a program can have (each simulated thread takes host memory)",
        max = MAX_THREADS
    )]
    TooManyThreads { kernel: &'static str, threads: u32 },
    /// Arrays of fewer than 16 lines per thread.
    #[error("{kernel}: lines must be at least 16")]
    TooFewLines { kernel: &'static str },
    /// An array larger than the room the generators lay it out in (`kernels::MAX_ARRAY_BYTES`).
    #[error(
        "{kernel}: {threads} threads x {lines} lines of 64 bytes is more than the {gib} GiB an array can take; lower lines, threads or --scale",
        gib = MAX_ARRAY_BYTES >> 30
    )]
    ArrayTooLarge {
        kernel: &'static str,
        threads: u32,
        lines: u64,
    },
    /// A program with no phases.
    #[error("{kernel}: phases must be at least 1")]
    NoPhases { kernel: &'static str },
    /// A write fraction outside `[0, 1]`.
    #[error("{kernel}: write_fraction must be in [0, 1]")]
    WriteFraction { kernel: &'static str },
    /// More generator steps than a run can hold in memory (`kernels::MAX_STEPS`); `longest`
    /// names the program with the most iterations.
    #[error("about {steps} generator steps for all threads ({longest}), more than the {max} a run can hold in memory; lower iterations or threads (or split the run)")]
    TooManySteps {
        steps: u64,
        longest: String,
        max: u64,
    },
}

/// Why a workload cannot be loaded, placed or run.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// A workload file that is not valid TOML or not a workload; `origin` names the file.
    #[error("{origin}: {error}")]
    Parse {
        origin: String,
        error: toml::de::Error,
    },
    /// A workload file whose parameters cannot run.
    #[error("{origin}: {error}")]
    Invalid { origin: String, error: SpecError },
    /// A workload (changed after loading) whose parameters cannot run.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// No shipped workload of that name; `known` lists the names.
    #[error("no workload named {name:?}; known workloads: {known} (or give a workload file)")]
    UnknownWorkload { name: String, known: String },
    /// A workload file that cannot be read.
    #[error("cannot read workload file {path}: {error}")]
    ReadWorkload { path: String, error: std::io::Error },
    /// A trace file that cannot be read.
    #[error("cannot read trace {}: {error}", .path.display())]
    ReadTrace {
        path: PathBuf,
        error: numaff_behave::TraceError,
    },
    /// A trace with no samples.
    #[error("trace {0}: no samples to replay (record one with numaff profile)")]
    EmptyTrace(String),
    /// A machine frequency that cannot turn recorded gaps into compute cycles.
    #[error("trace {name}: the machine's frequency must be positive to turn gaps into compute, not {cycles_per_ns} GHz")]
    BadFrequency { name: String, cycles_per_ns: f64 },
    /// A trace recorded over more time than a replay covers ([`crate::replay::MAX_REPLAY_SPAN_NS`]).
    #[error("trace {name}: its samples span {span_s:.0} s of recorded time; a replay covers at most {max_s:.0} s (a bad timestamp? cut the trace to the part to replay)")]
    TraceSpan {
        name: String,
        span_s: f64,
        max_s: f64,
    },
    /// A replayed trace whose workload cannot run.
    #[error("trace {name}: {error}")]
    InvalidTrace { name: String, error: SpecError },
    /// A thread placement that is neither a known name nor a cpu list.
    #[error("unknown thread placement {0:?}: os, recorded (traces), a mapping algorithm ({names}), map:FILE (a mapping file from numaff map -o FILE) or a cpu list such as 0,2,4,6", names = numaff_policy::Algorithm::NAMES.join(", "))]
    UnknownThreadPolicy(String),
    /// A cpu list with an entry that is not a cpu number.
    #[error("bad cpu list {list:?}: {error}")]
    BadCpuList { list: String, error: ParseIntError },
    /// A data placement that is not a known name.
    #[error(
        "unknown data policy {0:?}: first-touch, interleave, bind:N, oracle, oracle-local, oracle-remote"
    )]
    UnknownDataPolicy(String),
    /// `bind` without a node id.
    #[error("bad data policy {0:?}: bind takes a node id, as bind:0")]
    BadBind(String),
    /// The `recorded` thread placement for a workload with generated programs.
    #[error("thread placement recorded needs a trace (numaff sim --trace FILE); workload {workload} has generated program {program}")]
    NotRecorded { workload: String, program: String },
    /// A recorded cpu the machine does not have.
    #[error("recorded cpu {cpu} is not on machine {machine} (cpus {cpus}); choose another --threads placement")]
    RecordedCpuMissing {
        cpu: u32,
        machine: String,
        cpus: CpuSet,
    },
    /// A cpu list with no cpu.
    #[error("empty cpu list")]
    EmptyCpuList,
    /// A listed cpu the machine does not have.
    #[error("cpu {cpu} is not on machine {machine} (cpus {cpus})")]
    CpuMissing {
        cpu: u32,
        machine: String,
        cpus: CpuSet,
    },
    /// A mapping algorithm that needs metrics measured while the threads run.
    #[error("thread placement {0}: needs 3DyRM metrics (operations, memory accesses and latency of each thread) measured while the threads run, which a static simulated placement does not have (they decide online); use another algorithm")]
    NeedsRunMetrics(&'static str),
    /// A mapping file that could not be read.
    #[error(transparent)]
    Mapping(#[from] numaff_policy::mapping::MappingError),
    /// A mapping file with another number of tasks than the workload's threads.
    #[error("mapping file {file} places {tasks} tasks but workload {workload} has {threads} threads (all programs together, in file order); give one PU per thread")]
    MappingTasks {
        file: String,
        tasks: usize,
        workload: String,
        threads: usize,
    },
    /// Too many threads for the sharing detection's thread ids.
    #[error("the workload's communication matrix covers at most {max} threads (kMAF's 2-byte thread ids), not {threads}")]
    CommThreads { threads: usize, max: usize },
    /// A mapping algorithm that failed.
    #[error(transparent)]
    Policy(#[from] numaff_policy::PolicyError),
    /// A `bind` node the machine does not have.
    #[error("no node {node} on machine {machine}")]
    NoNode { node: u32, machine: String },
    /// The simulator refused a process or a step, in its own words.
    #[error("{0}")]
    Simulator(String),
    /// Threads that wait at a barrier the others never reach.
    #[error("workload {0}: threads wait at a barrier the others never reach (a generator bug)")]
    Stuck(String),
}
