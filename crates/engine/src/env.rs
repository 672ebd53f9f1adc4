//! The `Environment` trait: what the engine sees of a machine (tasks, samples, page placement) and
//! what it can do to it (move a thread, move pages), each action with its cost in nanoseconds.

use numaff_machine::{CpuSet, Machine};
use serde::{Deserialize, Serialize};

/// A schedulable entity numaff may place: a thread `tid` of process `pid` (kernel ids; in the
/// simulator, ids the simulator hands out). For MPI, a rank is the main thread of its process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TaskId {
    /// Process id.
    pub pid: u32,
    /// Thread id (equal to `pid` for the main thread on Linux).
    pub tid: u32,
}

/// A task and where it runs now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    /// Which task.
    pub id: TaskId,
    /// The PU it last ran on (or runs on), if known.
    pub cpu: Option<u32>,
    /// The PUs it may run on (its affinity mask).
    pub allowed: CpuSet,
    /// Short name (`comm` on Linux, the workload thread name in the simulator).
    pub name: String,
}

/// What an observed access was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccessKind {
    /// A page fault (first touch, or a fault numaff or NUMA balancing induced).
    Fault,
    /// A load (hardware sampling: PEBS, IBS).
    Load,
    /// A store.
    Store,
}

/// One observed memory access (DESIGN.md "Sample").
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// When, in ns since the environment's epoch (simulated time in the simulator).
    pub time_ns: u64,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The PU the access ran on.
    pub cpu: u32,
    /// The node of that PU.
    pub node: u32,
    /// The virtual address accessed.
    pub vaddr: u64,
    /// Fault, load or store.
    pub kind: AccessKind,
    /// Load-to-use latency in ns, where the sampler reports it (PEBS/IBS; not faults).
    pub latency_ns: Option<f64>,
}

/// The result of moving a thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadMove {
    /// Which task moved.
    pub task: TaskId,
    /// The PU it ran on before, if known.
    pub from_cpu: Option<u32>,
    /// The PU it runs on now (or will run on next), if known.
    pub to_cpu: Option<u32>,
    /// What the move cost, in ns (of the task's time in the simulator; of numaff's time on Linux).
    pub cost_ns: f64,
}

/// Why one page did not move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PageMoveFailure {
    /// The page is not present (never touched): nothing to move.
    NotPresent,
    /// The page is busy (being migrated, pinned); try later.
    Busy,
    /// No memory on the target node.
    NoMemory,
    /// Not allowed (cpuset, permissions).
    NotAllowed,
}

/// The result of one page-move request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PageMove {
    /// Pages asked for.
    pub requested: usize,
    /// Pages that now live on the target node (already there counts).
    pub moved: usize,
    /// Bytes copied between nodes.
    pub bytes: u64,
    /// Pages that did not move and why, by virtual address.
    pub failed: Vec<(u64, PageMoveFailure)>,
    /// What the request cost the caller, in ns (copy plus kernel overhead).
    pub cost_ns: f64,
}

/// What went wrong with an environment query or action.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EnvError {
    /// The task does not exist (any more).
    #[error("no task {pid}/{tid}: it has exited or never existed")]
    NoSuchTask {
        /// Process id.
        pid: u32,
        /// Thread id.
        tid: u32,
    },
    /// The process does not exist (any more).
    #[error("no process {0}: it has exited or never existed")]
    NoSuchProcess(u32),
    /// A cpu set had no PU of this machine.
    #[error("cpu set {0} has no PU of this machine; pick PUs from `numaff topo`")]
    BadCpus(String),
    /// A node id is not one of the machine's memory nodes.
    #[error("node {0} is not a memory node of this machine")]
    BadNode(u32),
    /// Not permitted (Linux: permissions or capabilities).
    #[error("{0}")]
    NotPermitted(String),
    /// Anything else, said in words.
    #[error("{0}")]
    Other(String),
}

/// A machine numaff observes and acts on: the real Linux machine or the simulator.
///
/// The engine's loop is `advance` → `drain_samples` → (decide) → `move_thread` / `move_pages`, and
/// repeats until `finished`. Every method takes `&mut self` where a real implementation has to do
/// I/O. The trait is object safe: the engine can hold a `Box<dyn Environment>`.
pub trait Environment {
    /// The machine's topology and figures.
    fn machine(&self) -> &Machine;

    /// Now, in ns since the environment's epoch: wall-clock time on Linux, simulated time in the
    /// simulator.
    fn now_ns(&self) -> u64;

    /// Lets the environment run for `ns` nanoseconds: on Linux, sleep; in the simulator, simulate.
    /// Returns the time reached.
    fn advance(&mut self, ns: u64) -> Result<u64, EnvError>;

    /// Whether every observed task has finished (nothing more to observe or act on).
    fn finished(&self) -> bool;

    /// The live tasks and where they run, sorted by id.
    fn tasks(&mut self) -> Result<Vec<Task>, EnvError>;

    /// Moves the samples gathered since the last call into `out` (appending, in time order per
    /// sampler) and returns how many were added.
    fn drain_samples(&mut self, out: &mut Vec<Sample>) -> Result<usize, EnvError>;

    /// The node of each page holding `vaddrs` in process `pid`; `None` for pages not present.
    fn page_nodes(&mut self, pid: u32, vaddrs: &[u64]) -> Result<Vec<Option<u32>>, EnvError>;

    /// Restricts a task to `cpus` (and moves it there if it runs elsewhere).
    fn move_thread(&mut self, task: TaskId, cpus: &CpuSet) -> Result<ThreadMove, EnvError>;

    /// Moves the pages holding `vaddrs` of process `pid` to memory node `node`.
    fn move_pages(&mut self, pid: u32, vaddrs: &[u64], node: u32) -> Result<PageMove, EnvError>;
}
