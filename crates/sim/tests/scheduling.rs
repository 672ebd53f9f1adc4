//! Scheduling: threads sharing a PU take turns, a barrier holds its threads until the last arrives
//! and releases them in time order.

#![allow(clippy::unwrap_used)]

use numaff_machine::catalog;
use numaff_sim::{Access, DataPolicy, Op, ProcessSpec, SimConfig, Simulator, ThreadSpec};

#[test]
fn two_threads_on_one_pu_take_twice_as_long_and_a_barrier_waits_for_the_slowest() {
    let m = catalog::load("kmaf-sim-4x2").unwrap();
    // Two compute-only threads on one PU take twice as long as one.
    let one = Simulator::new(&m, SimConfig::default()).spawn_and_run(
        ProcessSpec::new("c", DataPolicy::FirstTouch).thread(ThreadSpec::new(
            "a",
            0,
            std::iter::repeat_n(Op::Compute(1000), 1000),
        )),
    );
    let two = Simulator::new(&m, SimConfig::default()).spawn_and_run(
        ProcessSpec::new("c", DataPolicy::FirstTouch)
            .thread(ThreadSpec::new(
                "a",
                0,
                std::iter::repeat_n(Op::Compute(1000), 1000),
            ))
            .thread(ThreadSpec::new(
                "b",
                0,
                std::iter::repeat_n(Op::Compute(1000), 1000),
            )),
    );
    let ratio = two.makespan_ns as f64 / one.makespan_ns as f64;
    assert!((1.95..2.1).contains(&ratio), "{ratio}");
    // A barrier holds the fast thread until the slow one arrives.
    let r = Simulator::new(&m, SimConfig::default()).spawn_and_run(
        ProcessSpec::new("b", DataPolicy::FirstTouch)
            .thread(ThreadSpec::new(
                "fast",
                0,
                [Op::Compute(10), Op::Barrier].into_iter(),
            ))
            .thread(ThreadSpec::new(
                "slow",
                2,
                [Op::Compute(1_000_000), Op::Barrier].into_iter(),
            )),
    );
    assert!(r.threads[0].end_ns >= r.threads[1].end_ns - 1, "{r:?}");
}

/// The last thread to reach a barrier does not run on ahead of the threads it releases: the
/// simulator issues accesses in time order up to its quantum, so that queues and caches see them in
/// that order. Every access is sampled, and samples are recorded in the order accesses are
/// simulated: their times may step back by the PUs' skew (a quantum, a memory latency), never by a
/// phase: at most 98 ns here. Regression: a last thread running on to the horizon computed before
/// it released the others ran its whole second sweep first, and the samples stepped back by
/// thousands of ns.
#[test]
fn a_barrier_releases_its_threads_in_time_order() {
    use numaff_engine::Environment as _;
    let m = catalog::load("laso-hpl").unwrap();
    let cfg = SimConfig {
        hw_sampling: Some(numaff_sim::HwSampling::every_access()),
        first_touch_samples: false,
        ..SimConfig::default()
    };
    let mut sim = Simulator::new(&m, cfg);
    let mut spec = ProcessSpec::new("phases", DataPolicy::FirstTouch);
    for t in 0..4u64 {
        let base = 0x1000_0000 + t * (1 << 24);
        let sweep = move |lines: u64| {
            (0..lines).map(move |l| Op::Access(Access::read(base + l * 64).after(2)))
        };
        // Thread 3 has more to do before the barrier, so it is the last to reach it.
        let first = if t == 3 { 3_000 } else { 1_000 };
        let ops: Vec<Op> = sweep(first)
            .chain([Op::Barrier])
            .chain(sweep(2_000))
            .collect();
        spec = spec.thread(ThreadSpec::new(format!("t{t}"), t as u32, ops.into_iter()));
    }
    let pid = sim.spawn(spec).unwrap();
    // Pages in place: no first-touch fault (a 1 µs stall) between the samples.
    for t in 0..4u64 {
        sim.place(pid, 0x1000_0000 + t * (1 << 24), 4_000 * 64, 0)
            .unwrap();
    }
    sim.run();
    let mut samples = Vec::new();
    sim.drain_samples(&mut samples).unwrap();
    assert_eq!(samples.len(), 4 * 2_000 + 3 * 1_000 + 3_000);
    let mut latest = 0u64;
    let mut back = 0u64;
    for s in &samples {
        back = back.max(latest.saturating_sub(s.time_ns));
        latest = latest.max(s.time_ns);
    }
    println!("stepped back at most {back} ns");
    assert!(back < 500, "samples stepped back by {back} ns");
}

/// The os balancer after CFS: a balanced thread's occasional move goes to an idle PU sharing its
/// last-level cache (wake-up placement), never to another node; a PU running two threads gives
/// one to an idle PU in its last-level cache before any farther one; a machine with every PU
/// busy sees no move at all (CFS does not exchange running tasks).
#[test]
fn os_balancer_moves_threads_within_their_last_level_cache_and_never_exchanges_them() {
    let m = catalog::load("kmaf-xeon").unwrap();
    let cfg = SimConfig {
        os_scheduler: Some(numaff_sim::OsScheduler {
            interval_ns: 20_000,
            move_probability: 0.5,
            ..numaff_sim::OsScheduler::default()
        }),
        ..SimConfig::default()
    };
    let run = |cpus: &[u32]| {
        let mut spec = ProcessSpec::new("c", DataPolicy::FirstTouch);
        for (i, &cpu) in cpus.iter().enumerate() {
            spec = spec.thread(ThreadSpec::new(
                format!("t{i}"),
                cpu,
                // 995 µs at 2 GHz: every thread ends between two balancing rounds.
                std::iter::repeat_n(Op::Compute(1000), 1990),
            ));
        }
        Simulator::new(&m, cfg.clone()).spawn_and_run(spec)
    };
    let node_of = |cpu: u32| m.node_of_pu(cpu).unwrap();
    // Eight threads on node 0's first eight PUs: node 0 has eight idle PUs (the SMT siblings).
    let r = run(&(0..8).collect::<Vec<u32>>());
    assert!(
        r.migrations > 0,
        "balanced threads with idle PUs nearby moved"
    );
    for t in &r.threads {
        assert_eq!(node_of(t.cpu), 0, "{} ended on cpu {}", t.name, t.cpu);
    }
    // Two threads on cpu 8 (node 1), the rest of the machine idle: the second stays on node 1.
    let r = run(&[8, 8]);
    assert!(r.threads.iter().all(|t| node_of(t.cpu) == 1), "{r:?}");
    assert_ne!(r.threads[0].cpu, r.threads[1].cpu);
    // Every PU busy: nobody moves.
    let r = run(&m.pus().iter().collect::<Vec<u32>>());
    assert_eq!(r.migrations, 0);
}
