//! Helpers shared by the workload tests: nas-sp at a test size, a run on kmaf-sim-4x2.

#![allow(clippy::unwrap_used)]

use numaff_machine::catalog as machines;
use numaff_sim::Report;
use numaff_workload::{catalog, run, DataChoice, RunOptions, Workload};

/// `w` on kmaf-sim-4x2 with these placements, seed 0.
pub fn sim(w: &Workload, threads: &str, data: DataChoice) -> Report {
    let m = machines::load("kmaf-sim-4x2").unwrap();
    let opts = RunOptions {
        threads: threads.parse().unwrap(),
        data,
        seed: 0,
    };
    run(&m, w, &opts).unwrap()
}

/// nas-sp at a quarter of its size.
pub fn sp() -> Workload {
    catalog::load("nas-sp").unwrap().scaled(0.25)
}

/// The share of the run's memory accesses served by a remote node.
pub fn remote_share(r: &Report) -> f64 {
    r.remote_accesses as f64 / (r.local_accesses + r.remote_accesses).max(1) as f64
}
