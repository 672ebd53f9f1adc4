//! Determinism: the same machine, workload, configuration and seed give the same figures and
//! samples bit for bit; another seed changes the seeded choices (which accesses are sampled).

#![allow(clippy::unwrap_used)]

mod common;

use numaff_engine::{AccessKind, Sample};
use numaff_machine::catalog;
use numaff_sim::{
    Access, DataPolicy, HwSampling, Op, ProcessSpec, Report, SimConfig, Simulator, ThreadSpec,
};

/// Threads that share a region: random reads and writes, barriers, hardware sampling with jitter.
fn mixed(seed: u64) -> (Report, Vec<Sample>) {
    let m = catalog::load("laso-hpl").unwrap();
    let cfg = SimConfig {
        seed,
        hw_sampling: Some(HwSampling {
            period: 97,
            jitter: 0.5,
            min_latency_ns: 0.0,
            cost_ns: 200.0,
        }),
        ..SimConfig::default()
    };
    let mut sim = Simulator::new(&m, cfg);
    let mut spec = ProcessSpec::new("mixed", DataPolicy::FirstTouch);
    for k in 0..8u32 {
        // A fixed pseudo-random stream (the workload is an input: the same for both seeds).
        let mut rng = numaff_machine::rng::SplitMix64::new(0x1234_5678 + u64::from(k));
        let ops = (0..6000u64).map(move |i| {
            if i % 1500 == 1499 {
                return Op::Barrier;
            }
            let x = rng.next_u64();
            let a = 0x1000_0000 + (x % (1 << 22));
            Op::Access(
                if matches!(x % 5, 0) {
                    Access::write(a)
                } else {
                    Access::read(a)
                }
                .after((x % 7) as u32),
            )
        });
        spec = spec.thread(ThreadSpec::new(format!("w{k}"), k * 5, ops));
    }
    common::run_sampled(&mut sim, spec)
}

#[test]
fn same_seed_same_figures_different_seed_different_choices() {
    let (a, sa) = mixed(1);
    let (b, sb) = mixed(1);
    let (c, sc) = mixed(2);
    assert_eq!(a, b);
    assert_eq!(sa, sb);
    assert_eq!(format!("{a:?}"), format!("{b:?}"), "bit for bit");
    let loads = |s: &[Sample]| {
        s.iter()
            .filter(|x| x.kind != AccessKind::Fault)
            .map(|x| (x.tid, x.vaddr))
            .collect::<Vec<_>>()
    };
    assert_ne!(
        loads(&sa),
        loads(&sc),
        "the seed picks which accesses are sampled"
    );
    assert_ne!(a.makespan_ns, 0);
    assert!(a.c2c_transfers > 0 && a.invalidations > 0, "{a:?}");
    println!(
        "mixed: makespan {} ns, c2c {}, invalidations {}, samples {}, energy {:.6} J; seed 2 makespan {}",
        a.makespan_ns, a.c2c_transfers, a.invalidations, a.samples, a.energy_j, c.makespan_ns
    );
}
