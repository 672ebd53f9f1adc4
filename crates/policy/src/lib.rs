//! numaff's placement policies: pure functions from what was observed (a machine, a communication
//! matrix, per-task metrics) to where tasks should run, and the figures that judge a placement.

pub mod comm;

pub use comm::{CommError, CommMatrix};

/// Where each task runs: entry `i` is the PU (kernel cpu id) of task `i`.
pub type Placement = Vec<u32>;
