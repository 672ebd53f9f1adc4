//! Steps the simulator's integration tests share (included by `mod common;` in each file).
//! Each file uses some of them.

#![allow(dead_code)]

use numaff_engine::{Environment, Sample};
use numaff_sim::{Access, DataPolicy, Op, ProcessSpec, Report, Simulator, ThreadSpec};

/// Spawns `spec` on `sim`, runs it to the end and returns the report with every sample taken.
pub fn run_sampled(sim: &mut Simulator, spec: ProcessSpec) -> (Report, Vec<Sample>) {
    sim.spawn(spec).expect("spawn");
    let r = sim.run();
    let mut s = Vec::new();
    sim.drain_samples(&mut s).expect("drain samples");
    (r, s)
}

/// Each thread streams over its own `lines` lines (independent loads, no compute).
pub fn streaming(threads: u32, lines: u64, policy: DataPolicy) -> ProcessSpec {
    let mut spec = ProcessSpec::new("stream", policy);
    for k in 0..threads {
        let base = 0x4000_0000 + u64::from(k) * lines * 64;
        let ops = (0..lines).map(move |l| Op::Access(Access::read(base + l * 64)));
        spec = spec.thread(ThreadSpec::new(format!("t{k}"), k, ops));
    }
    spec
}

/// Base address of `pages_reader`'s region, 2 MiB aligned.
pub const BASE: u64 = 0x4000_0000;

/// One thread on `cpu` reading one line of each 4 KiB page of `bytes`, `sweeps` times.
pub fn pages_reader(cpu: u32, bytes: u64, sweeps: u64) -> ThreadSpec {
    let pages = bytes / 4096;
    ThreadSpec::new(
        "r",
        cpu,
        (0..sweeps * pages).map(move |i| Op::Access(Access::read(BASE + (i % pages) * 4096))),
    )
}
