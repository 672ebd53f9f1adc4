//! The samplers seen from outside: first-touch faults, hardware sampling of one access in N with
//! its latency and cost, induced faults (kMAF's random pages, NUMA balancing's scan) and their cost.

#![allow(clippy::unwrap_used)]

mod common;

use common::{pages_reader, BASE};
use numaff_engine::{AccessKind, Environment, Sample};
use numaff_machine::catalog;
use numaff_sim::{
    Access, DataPolicy, HwSampling, InducedFaults, Op, ProcessSpec, Report, SimConfig, Simulator,
    ThreadSpec,
};

fn run_with_samples(cfg: SimConfig, spec: ProcessSpec) -> (Report, Vec<Sample>) {
    let m = catalog::load("kmaf-sim-4x2").unwrap();
    common::run_sampled(&mut Simulator::new(&m, cfg), spec)
}

#[test]
fn induced_and_hinting_faults_sample_pages_again() {
    let m = catalog::load("kmaf-sim-4x2").unwrap();
    for scan in [false, true] {
        let cfg = SimConfig {
            first_touch_samples: false,
            induced_faults: Some(numaff_sim::InducedFaults {
                interval_ns: 20_000,
                fraction: 0.25,
                cost_ns: 2_000.0,
                scan,
            }),
            ..SimConfig::default()
        };
        let mut sim = Simulator::new(&m, cfg);
        // 4 threads sweep 64 pages 20 times (misses the 512 KiB L2 every sweep).
        let mut spec = ProcessSpec::new("sweep", DataPolicy::FirstTouch);
        for k in 0..4u32 {
            let base = 0x1000_0000 + u64::from(k) * (1 << 20);
            let ops =
                (0..20 * 16384u64).map(move |i| Op::Access(Access::read(base + (i % 16384) * 64)));
            spec = spec.thread(ThreadSpec::new(format!("s{k}"), k * 2, ops));
        }
        sim.spawn(spec).unwrap();
        let r = sim.run();
        let mut s = Vec::new();
        sim.drain_samples(&mut s).unwrap();
        assert!(
            s.len() > 10 && s.iter().all(|x| x.kind == AccessKind::Fault),
            "scan {scan}: {}",
            s.len()
        );
        assert_eq!(r.samples as usize, s.len());
    }
}

#[test]
fn first_touch_faults_are_samples_one_per_page() {
    let spec = || ProcessSpec::new("f", DataPolicy::FirstTouch).thread(pages_reader(3, 1 << 20, 2));
    let on = SimConfig {
        first_touch_samples: true,
        ..SimConfig::default()
    };
    let (r, s) = run_with_samples(on, spec());
    assert_eq!(r.page_faults, 256);
    assert_eq!(s.len(), 256);
    assert!(s.iter().all(|x| x.kind == AccessKind::Fault
        && x.cpu == 3
        && x.node == 1
        && x.latency_ns.is_none()));
    // Off by default (a run without a policy keeps none), and the faults still happen.
    let (r, s) = run_with_samples(SimConfig::default(), spec());
    assert_eq!((r.page_faults, r.samples, s.len()), (256, 0, 0));
}

#[test]
fn induced_faults_cost_the_faulting_thread() {
    let spec =
        || ProcessSpec::new("i", DataPolicy::FirstTouch).thread(pages_reader(0, 1 << 20, 40));
    let run = |cost_ns: f64| {
        let cfg = SimConfig {
            first_touch_samples: false,
            induced_faults: Some(InducedFaults {
                interval_ns: 20_000,
                fraction: 0.25,
                cost_ns,
                scan: false,
            }),
            ..SimConfig::default()
        };
        run_with_samples(cfg, spec())
    };
    let (free, s0) = run(0.0);
    let (paid, s1) = run(20_000.0);
    assert!(s0.len() > 10 && s1.len() > 10);
    // Each induced fault costs its thread 20 us (the paid run is longer, so it faults more).
    let extra = paid.makespan_ns as f64 - free.makespan_ns as f64;
    assert!(
        extra >= 0.9 * 20_000.0 * s0.len() as f64,
        "extra {extra} ns for {} faults",
        s1.len()
    );
}

#[test]
fn hardware_sampling_one_in_n_with_latency_and_cost() {
    let spec = || ProcessSpec::new("s", DataPolicy::Bind(2)).thread(pages_reader(0, 1 << 20, 20));
    let hw = |period, min_latency_ns, cost_ns| SimConfig {
        first_touch_samples: false,
        hw_sampling: Some(HwSampling {
            period,
            jitter: 0.0,
            min_latency_ns,
            cost_ns,
        }),
        ..SimConfig::default()
    };
    let (r, s) = run_with_samples(hw(100, 0.0, 0.0), spec());
    assert_eq!(r.accesses, 20 * 256);
    let n = s.len() as i64;
    assert!((n - 20 * 256 / 100).abs() <= 1, "{n} samples");
    assert!(s.iter().all(|x| x.kind == AccessKind::Load));
    // Data two hops away: every sampled latency is a remote memory latency, tens of ns at least.
    assert!(
        s.iter().all(|x| x.latency_ns.unwrap() > 50.0),
        "{:?}",
        s.iter().map(|x| x.latency_ns).collect::<Vec<_>>()
    );
    // ldlat: nothing is that slow, nothing reported.
    assert!(run_with_samples(hw(100, 1e9, 0.0), spec()).1.is_empty());
    // Each sample costs its thread.
    let (paid, _) = run_with_samples(hw(100, 0.0, 10_000.0), spec());
    assert!(paid.makespan_ns as f64 >= r.makespan_ns as f64 + 0.9 * 10_000.0 * n as f64);
}

#[test]
fn hinting_faults_walk_pages_in_order_kmaf_faults_pick_at_random() {
    let spec =
        || ProcessSpec::new("w", DataPolicy::FirstTouch).thread(pages_reader(0, 1 << 20, 2000));
    let rounds = |scan: bool| {
        let cfg = SimConfig {
            first_touch_samples: false,
            induced_faults: Some(InducedFaults {
                interval_ns: 20_000,
                fraction: 0.25,
                cost_ns: 100.0,
                scan,
            }),
            ..SimConfig::default()
        };
        let (_, s) = run_with_samples(cfg, spec());
        let pages: Vec<u64> = s.iter().map(|x| (x.vaddr - BASE) >> 12).collect();
        assert!(pages.len() >= 128, "{}", pages.len());
        pages
    };
    // NUMA-balancing-like: each round marks the next quarter of the pages in first-touch order.
    let scan = rounds(true);
    let mut first: Vec<u64> = scan[..64].to_vec();
    first.sort();
    assert_eq!(first, (0..64).collect::<Vec<_>>());
    let mut second: Vec<u64> = scan[64..128].to_vec();
    second.sort();
    assert_eq!(second, (64..128).collect::<Vec<_>>());
    // kMAF-like: a random quarter each round (with repeats, so fewer than 64 distinct pages).
    let random = rounds(false);
    let mut first: Vec<u64> = random.iter().copied().take(48).collect();
    first.sort();
    first.dedup();
    assert_ne!(
        first,
        (0..first.len() as u64).collect::<Vec<_>>(),
        "not in order"
    );
}
