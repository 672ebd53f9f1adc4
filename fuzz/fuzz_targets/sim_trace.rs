//! Fuzzes `numaff sim --trace`: samples read from the input as a CSV trace become a replay
//! workload (numaff_workload::replay) that runs on kmaf-sim-4x2 to its end, or an error; never a
//! panic, and never an unbounded run (the replay caps the recorded time span).
#![no_main]

#[path = "common.rs"]
mod common;

use libfuzzer_sys::fuzz_target;
use numaff_workload::{replay, RunOptions, ThreadPolicy};

/// At most this many samples are replayed, so one run stays short.
const MAX_SAMPLES: usize = 512;
/// At most this much recorded time (1 s) is replayed: the simulator steps through it.
const MAX_SPAN_NS: u64 = 1_000_000_000;

fuzz_target!(|data: &[u8]| {
    let Some((samples, _)) = common::csv_samples(data, MAX_SAMPLES) else {
        return;
    };
    let t0 = samples.iter().map(|s| s.time_ns).min().unwrap_or(0);
    if samples.iter().any(|s| s.time_ns - t0 > MAX_SPAN_NS) {
        return;
    }
    let Ok(machine) = numaff_machine::catalog::load("kmaf-sim-4x2") else {
        return;
    };
    let Ok(workload) = replay::from_samples("fuzz", &samples, replay::cycles_per_ns(&machine))
    else {
        return;
    };
    for threads in [ThreadPolicy::Os, ThreadPolicy::Recorded] {
        let opts = RunOptions {
            threads,
            ..RunOptions::default()
        };
        let _ = numaff_workload::run(&machine, &workload, &opts);
    }
});
