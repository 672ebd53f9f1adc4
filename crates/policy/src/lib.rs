//! numaff's placement policies: pure functions from what was observed (a machine, a communication
//! matrix, per-task metrics) to where tasks should run, and the figures that judge a placement.

pub mod baselines;
mod bisect;
pub mod comm;
pub mod deloc;
pub mod export;
mod graph;
pub mod hier;
pub mod imar;
pub mod kmaf_data;
pub mod mapping;
pub mod quality;
pub mod tree;

use std::str::FromStr;

use numaff_machine::Machine;

pub use comm::{CommError, CommMatrix};
pub use tree::{LevelKind, Tree};

/// Where each task runs: entry `i` is the PU (kernel cpu id) of task `i`.
pub type Placement = Vec<u32>;

/// Why a mapping could not be computed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PolicyError {
    /// The algorithm name is unknown.
    #[error("unknown mapping algorithm {0:?}; known: {names}", names = Algorithm::NAMES.join(", "))]
    UnknownAlgorithm(String),
    /// The machine has no PU to place tasks on.
    #[error("machine {0} has no processing unit to place tasks on")]
    NoPus(String),
    /// An input the algorithm needs is missing or inconsistent.
    #[error("{algo}: {problem}")]
    Input {
        /// Algorithm name.
        algo: &'static str,
        /// What is wrong and what to give.
        problem: String,
    },
}

/// The thread mapping algorithms, by their command-line names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// [`baselines::compact`].
    Compact,
    /// [`baselines::scatter`].
    Scatter,
    /// [`baselines::round_robin`].
    RoundRobin,
    /// [`baselines::packed`].
    Packed,
    /// [`baselines::random`].
    Random,
    /// [`hier::eagermap`].
    Eagermap,
    /// [`hier::locality`] ([`hier::locality_from`] when the current placement is given).
    Locality,
    /// [`hier::balance`].
    Balance,
    /// [`deloc::delocmap`].
    Deloc,
    /// [`deloc::ondelocmap`].
    Ondeloc,
    /// [`imar::cimar`].
    Cimar,
    /// [`imar::nimar`].
    Nimar,
}

impl Algorithm {
    /// Every algorithm, in the order `numaff map --compare` lists them.
    pub const ALL: [Algorithm; 12] = [
        Algorithm::Compact,
        Algorithm::Scatter,
        Algorithm::RoundRobin,
        Algorithm::Packed,
        Algorithm::Random,
        Algorithm::Eagermap,
        Algorithm::Locality,
        Algorithm::Balance,
        Algorithm::Deloc,
        Algorithm::Ondeloc,
        Algorithm::Cimar,
        Algorithm::Nimar,
    ];

    /// Command-line names, in the order of [`Algorithm::ALL`].
    pub const NAMES: [&'static str; 12] = [
        "compact",
        "scatter",
        "round-robin",
        "packed",
        "random",
        "eagermap",
        "locality",
        "balance",
        "deloc",
        "ondeloc",
        "cimar",
        "nimar",
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        let i = Self::ALL.iter().position(|&a| a == self).unwrap_or(0);
        Self::NAMES[i]
    }

    /// Whether the algorithm reads the communication matrix.
    pub fn needs_comm(self) -> bool {
        matches!(
            self,
            Algorithm::Eagermap
                | Algorithm::Locality
                | Algorithm::Balance
                | Algorithm::Deloc
                | Algorithm::Ondeloc
        )
    }
}

impl FromStr for Algorithm {
    type Err = PolicyError;
    fn from_str(s: &str) -> Result<Self, PolicyError> {
        let s = s.trim().to_ascii_lowercase();
        let s = match s.as_str() {
            "roundrobin" | "round_robin" | "rr" => "round-robin",
            "treematch" => "locality",
            "ondeloc+" | "ondelocmap+" => "ondeloc",
            other => other,
        };
        Self::NAMES
            .iter()
            .position(|&n| n == s)
            .map(|i| Self::ALL[i])
            .ok_or_else(|| PolicyError::UnknownAlgorithm(s.to_string()))
    }
}

impl std::fmt::Display for Algorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Everything an algorithm may look at. Only the machine and the number of tasks are always needed;
/// see each algorithm for what else it reads.
#[derive(Debug, Clone)]
pub struct MapInput<'a> {
    /// The machine to place on.
    pub machine: &'a Machine,
    /// Number of tasks to place.
    pub tasks: usize,
    /// Communication between tasks (`tasks` x `tasks`).
    pub comm: Option<&'a CommMatrix>,
    /// The current placement (for migration algorithms and stability).
    pub current: Option<&'a Placement>,
    /// Per-task 3DyRM metrics (for CIMAR and NIMAR).
    pub metrics: Option<&'a [imar::TaskMetrics]>,
    /// DeLocProf's groups of concurrently communicating pairs (for DeLocMap).
    pub groups: Option<&'a [Vec<deloc::Pair>]>,
    /// Seed for the random mapping.
    pub seed: u64,
}

impl<'a> MapInput<'a> {
    /// Input for `tasks` tasks on a machine, with nothing else known.
    pub fn new(machine: &'a Machine, tasks: usize) -> Self {
        MapInput {
            machine,
            tasks,
            comm: None,
            current: None,
            groups: None,
            metrics: None,
            seed: 0,
        }
    }

    /// Input for the tasks of a communication matrix.
    pub fn with_comm(machine: &'a Machine, comm: &'a CommMatrix) -> Self {
        MapInput {
            comm: Some(comm),
            ..MapInput::new(machine, comm.len())
        }
    }
}

/// Computes a placement with one algorithm: the common entry of `numaff map`.
pub fn map(algo: Algorithm, input: &MapInput) -> Result<Placement, PolicyError> {
    let tree = Tree::from_machine(input.machine);
    if tree.pu_count() == 0 {
        return Err(PolicyError::NoPus(input.machine.name.clone()));
    }
    let n = input.tasks;
    if let Some(c) = input.comm {
        if c.len() != n {
            return Err(PolicyError::Input {
                algo: algo.name(),
                problem: format!(
                    "the communication matrix is {0}x{0} but there are {n} tasks",
                    c.len()
                ),
            });
        }
    }
    Ok(match algo {
        Algorithm::Compact => baselines::compact(&tree, n),
        Algorithm::Scatter => baselines::scatter(&tree, n),
        Algorithm::RoundRobin => baselines::round_robin(&tree, n),
        Algorithm::Packed => baselines::packed(&tree, n),
        Algorithm::Random => baselines::random(&tree, n, input.seed),
        Algorithm::Eagermap => hier::eagermap(&tree, need_comm(algo, input)?, n),
        Algorithm::Locality => {
            hier::locality_from(&tree, need_comm(algo, input)?, n, input.current)
        }
        Algorithm::Balance => hier::balance(&tree, need_comm(algo, input)?, n),
        Algorithm::Deloc => deloc::delocmap(&tree, need_comm(algo, input)?, input.groups, n),
        Algorithm::Ondeloc => deloc::ondelocmap(&tree, need_comm(algo, input)?, input.current, n),
        Algorithm::Cimar | Algorithm::Nimar => {
            let problem = |what: &str| PolicyError::Input {
                algo: algo.name(),
                problem: format!("needs {what} for each of the {n} tasks"),
            };
            let cur = input
                .current
                .filter(|c| c.len() == n)
                .ok_or_else(|| problem("the current placement"))?;
            let ts = input
                .metrics
                .filter(|t| t.len() == n)
                .ok_or_else(|| problem("3DyRM metrics (operations, accesses, latency)"))?;
            let params = imar::ImarParams {
                line_bytes: input
                    .machine
                    .caches
                    .first()
                    .map_or(64.0, |c| f64::from(c.line_bytes.max(1))),
                ..imar::ImarParams::default()
            };
            if algo == Algorithm::Cimar {
                imar::cimar(input.machine, ts, cur, params)
            } else {
                imar::nimar(input.machine, ts, cur, params)
            }
        }
    })
}

fn need_comm<'a>(algo: Algorithm, input: &MapInput<'a>) -> Result<&'a CommMatrix, PolicyError> {
    input.comm.ok_or_else(|| PolicyError::Input {
        algo: algo.name(),
        problem: "needs a communication matrix (--matrix M.csv or --trace T)".into(),
    })
}
