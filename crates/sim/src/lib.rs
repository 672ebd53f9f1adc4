//! numaff's simulated NUMA machine (the second Environment of DESIGN.md): per-PU clocks, coherent
//! set-associative caches, memory controllers and links as queues, pages, samplers, energy.
//!
//! Drive it with access streams ([`stream`]): build a [`Simulator`] for a Machine,
//! [`Simulator::spawn`] programs made of threads that each yield [`Op`]s, then [`Simulator::run`]
//! for a [`Report`], or let the engine drive it through [`numaff_engine::Environment`].
//! [`measure()`] ([`mlc`]) is the simulator's own Memory Latency Checker. Same machine, workload,
//! config and seed give the same report bit for bit.

pub mod cache;
pub mod config;
mod dir;
mod error;
pub mod fabric;
mod hostmem;
mod linemap;
pub mod mlc;
mod pages;
pub mod report;
pub mod rng;
mod sim;
pub mod stream;
mod window;

pub use config::{EnergyModel, HwSampling, InducedFaults, OsMoves, OsScheduler, SimConfig};
pub use error::SimError;
pub use mlc::{measure, Measurement};
pub use report::{Report, ThreadReport};
pub use sim::{os_placement, simulated_coherence, Simulator, MAX_PROCESSES};
pub use stream::{Access, DataPolicy, Op, OpSource, ProcessSpec, ThreadSpec};
