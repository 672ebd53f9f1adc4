//! numaff's view of and hands on a real Linux machine: tasks, thread affinity, page placement.
//! Every kernel call and /proc read returns a [`LinuxError`] that says what failed, on what, and what to do.

pub mod affinity;
pub mod balancing;
pub mod error;
pub mod moves;
pub mod mpol;
pub mod numa_maps;
pub mod pages;
pub mod policy;
pub mod sched;
pub mod tasks;

pub use error::{LinuxError, Op, Result, SysError, Target};
