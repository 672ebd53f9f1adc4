//! numaff's view of and hands on a real Linux machine: tasks and their children, thread affinity,
//! page placement (query, move in bounded batches, migrate a whole process), memory policies, the
//! kernel's NUMA balancing state and per-task NUMA faults, and launching a program held before its
//! exec.
//! Every function takes plain pids, addresses and node sets and returns plain data, so a small program
//! in a QEMU guest can drive it as well as the engine.
//! Every kernel call and /proc read returns a [`LinuxError`] that says what failed, on what, and what to do.

pub mod affinity;
pub mod balancing;
pub mod error;
pub mod follow;
pub mod induce;
pub mod launch;
pub mod maps;
pub mod mempolicy;
pub mod moves;
pub mod mpol;
pub mod numa_maps;
pub mod pages;
pub mod pmu;
pub mod sampler;
pub mod sched;
pub mod tasks;
pub mod thp;
pub mod view;

pub use error::{LinuxError, Op, Result, SysError, Target};
