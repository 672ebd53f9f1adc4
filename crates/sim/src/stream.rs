//! How workloads drive the simulator: per thread, a lazy sequence of [`Op`]s (memory accesses with
//! the compute before them, and barriers), grouped into processes with a start time and data policy.
//!
//! A workload generator is any `Iterator<Item = Op>`; the simulator pulls a few dozen ops at a
//! time ([`OpSource`]), so a stream of billions of accesses costs no memory. Virtual addresses are
//! per process (two processes may use the same numbers); page placement follows the process's
//! [`DataPolicy`] at first touch.
//!
//! ```
//! use numaff_sim::{Access, Op, ProcessSpec, ThreadSpec, DataPolicy};
//! // A thread that streams over 1 MiB, reading each line after 4 cycles of compute.
//! let stream = (0..1 << 14).map(|i| Op::Access(Access::read(0x1000_0000 + i * 64).after(4)));
//! let process = ProcessSpec::new("stream", DataPolicy::FirstTouch)
//!     .thread(ThreadSpec::new("t0", 0, stream));
//! assert_eq!(process.threads.len(), 1);
//! ```

use std::collections::BTreeMap;

/// One memory access of a simulated thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    /// Virtual address (byte) in the process's address space.
    pub vaddr: u64,
    /// A store (true) or a load (false).
    pub write: bool,
    /// Core cycles of non-memory work the thread does before issuing this access.
    pub compute_cycles: u32,
    /// The address depends on the previous access's data (pointer chasing): the access cannot be
    /// issued before the previous one completes. Independent accesses overlap, up to the core's
    /// memory-level parallelism ([`crate::SimConfig::mlp`] outstanding accesses).
    pub dependent: bool,
}

impl Access {
    /// An independent load with no compute before it.
    pub fn read(vaddr: u64) -> Self {
        Access {
            vaddr,
            write: false,
            compute_cycles: 0,
            dependent: false,
        }
    }

    /// An independent store with no compute before it.
    pub fn write(vaddr: u64) -> Self {
        Access {
            write: true,
            ..Access::read(vaddr)
        }
    }

    /// The same access after `cycles` cycles of compute.
    pub fn after(mut self, cycles: u32) -> Self {
        self.compute_cycles = cycles;
        self
    }

    /// The same access, dependent on the previous one (pointer chase).
    pub fn dependent(mut self) -> Self {
        self.dependent = true;
        self
    }
}

/// What a simulated thread does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// A memory access.
    Access(Access),
    /// Wait until every live thread of the process has reached its next barrier (an OpenMP barrier,
    /// the end of a parallel phase). Threads that finished no longer count.
    Barrier,
    /// Pure compute for this many cycles (no memory access).
    Compute(u64),
    /// Set the process's flag `id` once this thread's outstanding accesses are done (a producer
    /// hands an item to the next stage of a pipeline: the queue's push). Waiters resume.
    Post(u64),
    /// Wait until the process's flag `id` has been set (a consumer takes the item: the queue's
    /// pop); no wait if it already was. A flag nobody sets leaves the thread stuck.
    Wait(u64),
}

/// Where a process's pages go when first touched (static data policies; an online policy moves
/// them afterwards through the Environment).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum DataPolicy {
    /// On the node of the cpu that touches the page first (Linux's default).
    #[default]
    FirstTouch,
    /// Round-robin over the memory nodes by page number (`numactl --interleave=all`).
    Interleave,
    /// On this node id (`numactl --membind`).
    Bind(u32),
    /// Page number (vaddr / page size) to node id; pages not listed fall back to first touch
    /// (how oracle placements are given).
    Explicit(BTreeMap<u64, u32>),
}

/// A thread's ops as the simulator pulls them: a batch per call, so that the dynamic call is paid
/// once per batch and the generator's `next` is inlined into the loop that fills it, instead of one
/// call through the box per op. Every `Iterator<Item = Op>` is one ([`ThreadSpec::new`] fuses it
/// first).
pub trait OpSource: Send {
    /// Writes the next ops into `buf` from its start and returns how many: 0 only when the ops
    /// have ended (the simulator then pulls no more), any other count up to `buf.len()` otherwise.
    fn fill(&mut self, buf: &mut [Op]) -> usize;
}

impl<I: Iterator<Item = Op> + Send> OpSource for I {
    #[inline]
    fn fill(&mut self, buf: &mut [Op]) -> usize {
        for (n, slot) in buf.iter_mut().enumerate() {
            match self.next() {
                Some(op) => *slot = op,
                None => return n,
            }
        }
        buf.len()
    }
}

/// One simulated software thread.
pub struct ThreadSpec {
    /// Name in reports and task lists.
    pub name: String,
    /// The PU (kernel cpu id) it starts on.
    pub cpu: u32,
    /// What it does.
    pub ops: Box<dyn OpSource>,
}

impl ThreadSpec {
    /// A thread named `name` starting on `cpu` running `ops` up to their first `None`.
    pub fn new(
        name: impl Into<String>,
        cpu: u32,
        ops: impl Iterator<Item = Op> + Send + 'static,
    ) -> Self {
        Self::from_source(name, cpu, ops.fuse())
    }

    /// A thread running the ops of `source` (a generator with its own [`OpSource::fill`]).
    pub fn from_source(name: impl Into<String>, cpu: u32, source: impl OpSource + 'static) -> Self {
        ThreadSpec {
            name: name.into(),
            cpu,
            ops: Box::new(source),
        }
    }
}

impl std::fmt::Debug for ThreadSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadSpec")
            .field("name", &self.name)
            .field("cpu", &self.cpu)
            .finish_non_exhaustive()
    }
}

/// One simulated program: threads sharing an address space.
#[derive(Debug)]
pub struct ProcessSpec {
    /// Name in reports.
    pub name: String,
    /// When it starts, in simulated ns (several programs at once, arrivals).
    pub start_ns: u64,
    /// Where its pages go at first touch.
    pub data_policy: DataPolicy,
    /// Use 2 MiB pages instead of the machine's base pages (transparent huge pages).
    pub huge_pages: bool,
    /// Its threads; the first is the main thread (tid = pid).
    pub threads: Vec<ThreadSpec>,
}

impl ProcessSpec {
    /// A process starting at time 0 with base pages and no threads yet.
    pub fn new(name: impl Into<String>, data_policy: DataPolicy) -> Self {
        ProcessSpec {
            name: name.into(),
            start_ns: 0,
            data_policy,
            huge_pages: false,
            threads: Vec::new(),
        }
    }

    /// Adds a thread.
    pub fn thread(mut self, t: ThreadSpec) -> Self {
        self.threads.push(t);
        self
    }

    /// Starts the process at `ns`.
    pub fn starting_at(mut self, ns: u64) -> Self {
        self.start_ns = ns;
        self
    }

    /// Uses 2 MiB pages.
    pub fn with_huge_pages(mut self) -> Self {
        self.huge_pages = true;
        self
    }
}
