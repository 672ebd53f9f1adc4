//! numaff's engine: the observe → accumulate → decide → act → log loop, written once over an
//! [`Environment`] that is either the real Linux machine (numaff-linux) or the simulator (numaff-sim).

pub mod env;

pub use env::{
    AccessKind, EnvError, Environment, PageMove, PageMoveFailure, Sample, Task, TaskId, ThreadMove,
};
