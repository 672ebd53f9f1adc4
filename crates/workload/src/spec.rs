//! Workload files (`workloads/*.toml`): one or more programs, each a kernel with its parameters,
//! thread count, initialisation and start time; a program may queue further kernels on its threads.
//!
//! ```toml
//! name = "nas-sp"
//! description = "..."
//! follows = "which paper description the generator follows"
//!
//! [[program]]
//! kernel = "sp"          # bt cg dc ep ft is lu mg sp ua streamcluster canneal dedup ferret
//!                        # facesim fluidanimate x264
//! threads = 8
//! init = "parallel"      # or "master": the main thread touches all data first
//! lines = 16384          # 64-byte lines of the main array per thread
//! iterations = 6
//! compute_cycles = 2     # compute before each access (the compute-to-memory ratio)
//! write_fraction = 0.5   # stores per load of the sweeps (read/write mix)
//! phases = 1             # phases with different behaviour (dynamic behaviour)
//! phase_shift = 0        # blocks each thread's share moves by from one phase to the next
//! start_ns = 0           # arrival time (several programs at once)
//! [[program.then]]       # a queue: the same threads run these kernels afterwards
//! kernel = "cg"
//! ...
//! ```

use serde::{Deserialize, Serialize};

use crate::error::{SpecError, WorkloadError};

/// The kernels, named after the benchmarks whose access and sharing patterns they follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kernel {
    /// NAS BT: block-tridiagonal ADI solver; domain decomposition with neighbour exchange, more
    /// compute per point than SP.
    Bt,
    /// NAS CG: conjugate gradient; sparse irregular gather over the whole vector.
    Cg,
    /// NAS DC: data cube; streaming over the input, random updates of private views, a merge.
    Dc,
    /// NAS EP: embarrassingly parallel; compute on private data.
    Ep,
    /// NAS FT: 3-D FFT; local FFTs and an all-to-all transpose.
    Ft,
    /// NAS IS: integer sort; random scatter into shared buckets.
    Is,
    /// NAS LU: SSOR; pipelined wavefronts between neighbours.
    Lu,
    /// NAS MG: multigrid; V-cycle over grids of decreasing size with neighbour exchange.
    Mg,
    /// NAS SP: scalar-pentadiagonal ADI solver; domain decomposition with neighbour exchange.
    Sp,
    /// NAS UA: unstructured adaptive mesh; irregular neighbours that change as the mesh adapts.
    Ua,
    /// PARSEC streamcluster: every thread reads its points and the shared centres.
    Streamcluster,
    /// PARSEC canneal: pointer chasing over a large shared netlist, occasional swaps.
    Canneal,
    /// PARSEC dedup: a 3-stage pipeline with a shared hash table.
    Dedup,
    /// PARSEC ferret: a 4-stage pipeline with a shared database search.
    Ferret,
    /// PARSEC facesim: mesh physics; compute-heavy sweeps, shared boundary nodes written by both sides.
    Facesim,
    /// PARSEC fluidanimate: grid cells; neighbour border cells read and written under locks.
    Fluidanimate,
    /// PARSEC x264: frame-parallel encoding; motion search in the previous frame of another thread.
    X264,
    /// A recorded trace replayed thread by thread ([`crate::replay`]; `numaff sim --trace`).
    Trace,
}

impl Kernel {
    /// The file name of the kernel.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Bt => "bt",
            Kernel::Cg => "cg",
            Kernel::Dc => "dc",
            Kernel::Ep => "ep",
            Kernel::Ft => "ft",
            Kernel::Is => "is",
            Kernel::Lu => "lu",
            Kernel::Mg => "mg",
            Kernel::Sp => "sp",
            Kernel::Trace => "trace",
            Kernel::Ua => "ua",
            Kernel::Streamcluster => "streamcluster",
            Kernel::Canneal => "canneal",
            Kernel::Dedup => "dedup",
            Kernel::Ferret => "ferret",
            Kernel::Facesim => "facesim",
            Kernel::Fluidanimate => "fluidanimate",
            Kernel::X264 => "x264",
        }
    }
}

/// Who touches the data first (and so, under first touch, where it lands).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Init {
    /// The main thread initialises everything, the others wait (serial setup, input read by one
    /// thread): under first touch all pages land on its node.
    Master,
    /// Each thread initialises its own share (parallel setup loops).
    #[default]
    Parallel,
}

fn one() -> u32 {
    1
}

fn eight() -> u32 {
    8
}

/// One program of a workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Program {
    /// Name in reports (default: the kernel's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What it does.
    pub kernel: Kernel,
    /// Threads (for queued kernels: ignored, the program's threads run them).
    #[serde(default = "eight")]
    pub threads: u32,
    /// Arrival, ns (for queued kernels: ignored, they start when the previous one ends).
    #[serde(default)]
    pub start_ns: u64,
    /// Master or parallel initialisation.
    #[serde(default)]
    pub init: Init,
    /// Lines (64 bytes) of the main array per thread.
    pub lines: u64,
    /// Outer iterations (time steps, sweeps, pipeline chunks per thread).
    pub iterations: u32,
    /// Compute cycles before each access.
    pub compute_cycles: u32,
    /// Fraction of swept lines also written.
    pub write_fraction: f64,
    /// Phases; the iterations are split evenly among them.
    #[serde(default = "one")]
    pub phases: u32,
    /// From one phase to the next, thread t works on the share of thread t + phase_shift.
    #[serde(default)]
    pub phase_shift: u32,
    /// Seed of the generator's random choices (part of the workload, not of the run).
    #[serde(default)]
    pub seed: u64,
    /// Back the program's memory with 2 MiB pages (transparent huge pages) instead of the
    /// machine's base pages; queued kernels run in the same process and share this choice.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub huge_pages: bool,
    /// Kernels the same threads run afterwards, one after the other (a queue of tasks).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub then: Vec<Program>,
    /// For kernel `trace`: the recorded accesses of each thread ([`crate::replay::load`]).
    #[serde(skip)]
    pub replay: Option<std::sync::Arc<crate::replay::Replay>>,
}

impl Program {
    /// The name in reports.
    pub fn display_name(&self) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| self.kernel.name().to_string())
    }
}

/// A workload file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Name (catalog name for the shipped ones).
    pub name: String,
    /// One line.
    pub description: String,
    /// The paper descriptions the generator follows.
    pub follows: String,
    /// The programs, started at their `start_ns`.
    #[serde(rename = "program")]
    pub programs: Vec<Program>,
}

/// Threads per program at most: a simulated thread takes about 3 KB of host memory beside its
/// caches' share, so this bounds a run to a few hundred MB of thread state (a machine has far
/// fewer PUs; more threads than PUs time-share).
pub const MAX_THREADS: u32 = 1 << 16;

impl Workload {
    /// Parses and checks a workload file's text; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Workload, WorkloadError> {
        let w: Workload = toml::from_str(text).map_err(|error| WorkloadError::Parse {
            origin: origin.to_string(),
            error,
        })?;
        w.check().map_err(|error| WorkloadError::Invalid {
            origin: origin.to_string(),
            error,
        })?;
        Ok(w)
    }

    /// Checks the parameters.
    pub fn check(&self) -> Result<(), SpecError> {
        if self.programs.is_empty() {
            return Err(SpecError::NoProgram);
        }
        fn check(p: &Program, queued: bool, threads: u32) -> Result<(), SpecError> {
            let kernel = p.kernel.name();
            if p.kernel == Kernel::Trace {
                return match &p.replay {
                    Some(r) if !queued && r.threads.len() == p.threads as usize => Ok(()),
                    Some(_) => Err(SpecError::TraceReshaped { kernel }),
                    None => Err(SpecError::TraceNotRecorded { kernel }),
                };
            }
            if p.threads == 0 && !queued {
                return Err(SpecError::NoThreads { kernel });
            }
            if p.threads > MAX_THREADS {
                return Err(SpecError::TooManyThreads {
                    kernel,
                    threads: p.threads,
                });
            }
            if p.lines < 16 {
                return Err(SpecError::TooFewLines { kernel });
            }
            // Queued kernels run on their program's threads (`kernels::thread_steps`).
            let array = u64::from(threads.max(1))
                .checked_mul(p.lines)
                .and_then(|l| l.checked_mul(crate::ops::LINE))
                .filter(|&b| b <= crate::kernels::MAX_ARRAY_BYTES);
            if array.is_none() {
                return Err(SpecError::ArrayTooLarge {
                    kernel,
                    threads: threads.max(1),
                    lines: p.lines,
                });
            }
            if p.phases == 0 {
                return Err(SpecError::NoPhases { kernel });
            }
            if !(0.0..=1.0).contains(&p.write_fraction) {
                return Err(SpecError::WriteFraction { kernel });
            }
            for q in &p.then {
                check(q, true, threads)?;
            }
            Ok(())
        }
        self.programs
            .iter()
            .try_for_each(|p| check(p, false, p.threads))?;
        // The steps every thread holds before the run: bounded, or a typo in `iterations` takes
        // the host's memory (4e9 iterations of 2 threads would fill tens of GB).
        let steps = self.steps_bound();
        let max = crate::kernels::MAX_STEPS;
        if steps > max {
            let longest = self
                .programs
                .iter()
                .max_by_key(|p| p.iterations)
                .map(|p| format!("{} x {} iterations", p.display_name(), p.iterations))
                .unwrap_or_default();
            return Err(SpecError::TooManySteps {
                steps,
                longest,
                max,
            });
        }
        Ok(())
    }

    /// At least as many generator steps as all threads of all programs hold before a run
    /// ([`crate::kernels::steps_bound`] per thread); `check` refuses more than
    /// [`crate::kernels::MAX_STEPS`].
    pub fn steps_bound(&self) -> u64 {
        self.programs
            .iter()
            .map(|p| {
                let n = u64::from(p.threads.max(1));
                crate::kernels::steps_bound(p, n).saturating_mul(n)
            })
            .fold(0, u64::saturating_add)
    }

    /// Total threads of all programs.
    pub fn threads(&self) -> usize {
        self.programs.iter().map(|p| p.threads as usize).sum()
    }

    /// The same workload with `threads` threads in every program (`--nthreads`).
    pub fn with_threads(mut self, threads: u32) -> Self {
        for p in &mut self.programs {
            if p.replay.is_none() {
                p.threads = threads.max(1);
            }
        }
        self
    }

    /// The same workload with every program on 2 MiB pages (`numaff sim --huge-pages`).
    pub fn with_huge_pages(mut self) -> Self {
        for p in &mut self.programs {
            p.huge_pages = true;
        }
        self
    }

    /// The same workload with every array `factor` times as large (at least 16 lines): smaller
    /// runs for tests, larger ones for experiments.
    pub fn scaled(mut self, factor: f64) -> Self {
        fn scale(p: &mut Program, f: f64) {
            p.lines = ((p.lines as f64 * f).round() as u64).max(16);
            for q in &mut p.then {
                scale(q, f);
            }
        }
        for p in &mut self.programs {
            scale(p, factor);
        }
        self
    }
}
