//! A thread's ops are pulled a few ahead of the one it runs, so that the host fetches of their
//! tables start early; this must not change which ops run or their order.

#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use numaff_engine::{AccessKind, Environment as _, Sample};
use numaff_machine::catalog;
use numaff_sim::{
    Access, DataPolicy, HwSampling, Op, ProcessSpec, SimConfig, Simulator, ThreadSpec,
};

/// Yields `n` accesses missing every cache level, then None once, then accesses again (not fused);
/// counts the calls of `next`.
struct Unfused {
    i: u64,
    n: u64,
    calls: Arc<AtomicUsize>,
}

impl Iterator for Unfused {
    type Item = Op;
    fn next(&mut self) -> Option<Op> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.i += 1;
        if self.i == self.n + 1 {
            return None;
        }
        Some(Op::Access(Access::read(0x1000_0000 + self.i * 4096 * 17)))
    }
}

#[test]
fn lookahead_stops_at_the_first_none() {
    let m = catalog::load("laso-hpl").unwrap();
    for n in [0u64, 1, 5, 8, 9, 1000] {
        let calls = Arc::new(AtomicUsize::new(0));
        let ops = Unfused {
            i: 0,
            n,
            calls: calls.clone(),
        };
        let sim = Simulator::new(&m, SimConfig::default());
        let r = sim.spawn_and_run(
            ProcessSpec::new("p", DataPolicy::FirstTouch).thread(ThreadSpec::new("t", 0, ops)),
        );
        assert_eq!(r.accesses, n, "n = {n}");
        assert_eq!(calls.load(Ordering::Relaxed) as u64, n + 1, "n = {n}");
    }
}

#[test]
fn ops_run_in_generator_order_through_hits_and_misses() {
    // Runs of first-level hits (one 4 KiB page) and of misses (a 256 MiB region), with compute and
    // barriers between them, so that the thread switches in and out of pulling ahead.
    let mut want = Vec::new();
    let mut ops = Vec::new();
    let mut rng = numaff_machine::rng::SplitMix64::new(0x2545_f491_4f6c_dd1d);
    for phase in 0..12u64 {
        for _ in 0..(50 + phase * 37) {
            let x = rng.next_u64();
            let a = if phase % 2 == 0 {
                0x2000_0000 + (x % 4096)
            } else {
                0x4000_0000 + (x % (256 << 20))
            };
            want.push((a, x & 3 == 0));
            ops.push(Op::Access(if x & 3 == 0 {
                Access::write(a)
            } else {
                Access::read(a)
            }));
            if x.is_multiple_of(7) {
                ops.push(Op::Compute(x % 50));
            }
        }
        ops.push(Op::Barrier);
    }
    let m = catalog::load("laso-hpl").unwrap();
    let cfg = SimConfig {
        hw_sampling: Some(HwSampling::every_access()),
        ..SimConfig::default()
    };
    let mut sim = Simulator::new(&m, cfg);
    sim.spawn(
        ProcessSpec::new("p", DataPolicy::FirstTouch).thread(ThreadSpec::new(
            "t",
            3,
            ops.into_iter(),
        )),
    )
    .unwrap();
    let r = sim.run();
    assert_eq!(r.accesses, want.len() as u64);
    let mut samples: Vec<Sample> = Vec::new();
    sim.drain_samples(&mut samples).unwrap();
    let got: Vec<(u64, bool)> = samples
        .iter()
        .filter(|s| s.kind != AccessKind::Fault)
        .map(|s| (s.vaddr, s.kind == AccessKind::Store))
        .collect();
    assert_eq!(got.len(), want.len());
    assert_eq!(got, want);
}
