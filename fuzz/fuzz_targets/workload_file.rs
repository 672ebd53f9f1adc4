//! Fuzzes workload files (`numaff sim --workload FILE`): any text gives a workload or an error,
//! never a panic; a workload that loads writes back to text that loads the same, its generators
//! start (the first ops of each thread), and it builds on a catalog machine.
#![no_main]

use libfuzzer_sys::fuzz_target;
use numaff_workload::{build, thread_ops, total_accesses, RunOptions, Workload};

/// Past this many steps (a check-valid but long run) the generators are not built: the fuzzer
/// would spend its time allocating, not exploring.
const STEPS_TO_BUILD: u64 = 100_000;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(w) = Workload::from_toml(text, "fuzz.toml") else {
        return;
    };
    let written = toml::to_string(&w).expect("a valid workload can be written");
    let again = Workload::from_toml(&written, "rewritten.toml").expect("a written workload loads");
    assert_eq!(w, again, "round trip changed the workload");
    let steps = w.steps_bound();
    if steps > STEPS_TO_BUILD {
        return;
    }
    let _ = total_accesses(&w);
    for p in &w.programs {
        for ops in thread_ops(p).into_iter().take(16) {
            ops.take(2048).for_each(drop);
        }
    }
    let machine = numaff_machine::catalog::load("kmaf-sim-4x2").expect("catalog machine");
    let _ = build(&machine, &w, &RunOptions::default());
});
