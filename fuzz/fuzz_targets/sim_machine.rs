//! Fuzzes the simulator on machine files: any TOML that loads as a machine, and is small, runs a
//! tiny two-thread program to its end, never a panic; the sizes are bounded so one run takes
//! milliseconds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use numaff_machine::file::from_toml_str;
use numaff_machine::Machine;
use numaff_sim::{Access, DataPolicy, Op, ProcessSpec, SimConfig, Simulator, ThreadSpec};

/// The machines simulated: at most this many PUs (ids below MAX_PU_ID), nodes, cache instances
/// and cache lines in all.
const MAX_PUS: usize = 64;
const MAX_PU_ID: u32 = 256;
const MAX_NODES: usize = 16;
const MAX_CACHES: usize = 256;
const MAX_CACHE_LINES: u64 = 1 << 20;

fn small(m: &Machine) -> bool {
    let pus = m.pus();
    let lines: u64 = m
        .caches
        .iter()
        .map(|c| c.size_bytes / u64::from(c.line_bytes.max(1)))
        .fold(0u64, u64::saturating_add);
    pus.len() <= MAX_PUS
        && pus.iter().all(|p| p < MAX_PU_ID)
        && m.nodes.len() <= MAX_NODES
        && m.caches.len() <= MAX_CACHES
        && lines <= MAX_CACHE_LINES
}

/// A thread's few ops: loads and stores on a shared page and its own, compute, a barrier.
fn ops(t: u64) -> Vec<Op> {
    let mut ops = Vec::new();
    for i in 0..32u64 {
        let shared = 0x1000_0000 + (i % 8) * 64;
        let own = 0x2000_0000 + t * 0x10_0000 + i * 64;
        ops.push(Op::Access(if i % 3 == 0 {
            Access::write(shared)
        } else {
            Access::read(own)
        }));
        if i % 8 == 0 {
            ops.push(Op::Compute(5));
        }
    }
    ops.push(Op::Barrier);
    ops
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(machine) = from_toml_str(text, "fuzz.toml") else {
        return;
    };
    if !small(&machine) {
        return;
    }
    let pus: Vec<u32> = machine.pus().iter().collect();
    let Some(&first) = pus.first() else {
        return;
    };
    let last = *pus.last().unwrap_or(&first);
    let spec = ProcessSpec::new("fuzz", DataPolicy::FirstTouch)
        .thread(ThreadSpec::new("t0", first, ops(0).into_iter()))
        .thread(ThreadSpec::new("t1", last, ops(1).into_iter()));
    let report = Simulator::new(&machine, SimConfig::default()).spawn_and_run(spec);
    assert_eq!(report.threads.len(), 2, "both threads are reported");
});
