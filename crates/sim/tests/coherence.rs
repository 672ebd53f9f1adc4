//! The coherence directory seen from outside: cache-to-cache transfers cost what the model says
//! (45 ns within a node, the latency between the nodes across them), writes invalidate other copies.

#![allow(clippy::unwrap_used)]

use numaff_engine::{AccessKind, Environment, Sample};
use numaff_machine::catalog;
use numaff_sim::{
    Access, DataPolicy, HwSampling, Op, ProcessSpec, Report, SimConfig, Simulator, ThreadSpec,
};

const X: u64 = 0x1000_0040;

/// Thread 0 on cpu 0 runs `a`, thread 1 on `cpu_b` runs `b`; every access is sampled with its latency.
fn run(cpu_b: u32, a: Vec<Op>, b: Vec<Op>) -> (Report, Vec<Sample>) {
    let m = catalog::load("laso-hpl").unwrap();
    let cfg = SimConfig {
        hw_sampling: Some(HwSampling::every_access()),
        first_touch_samples: false,
        ..SimConfig::default()
    };
    let mut sim = Simulator::new(&m, cfg);
    let spec = ProcessSpec::new("pc", DataPolicy::FirstTouch)
        .thread(ThreadSpec::new("a", 0, a.into_iter()))
        .thread(ThreadSpec::new("b", cpu_b, b.into_iter()));
    sim.spawn(spec).unwrap();
    let r = sim.run();
    let mut s = Vec::new();
    sim.drain_samples(&mut s).unwrap();
    (r, s)
}

fn latencies_of(s: &[Sample], cpu: u32) -> Vec<f64> {
    s.iter()
        .filter(|x| x.cpu == cpu && x.kind != AccessKind::Fault)
        .map(|x| x.latency_ns.unwrap())
        .collect()
}

#[test]
fn issue4_a_read_of_a_line_dirty_elsewhere_is_a_c2c_transfer_priced_by_distance() {
    let w = Op::Access(Access::write(X));
    let r = Op::Access(Access::read(X));
    // Same node, other core: 45 ns.
    let (rep, s) = run(1, vec![w, Op::Barrier], vec![Op::Barrier, r]);
    assert_eq!(latencies_of(&s, 1), vec![45.0]);
    assert_eq!((rep.c2c_transfers, rep.c2c_remote), (1, 0));
    // Node 1 reading a line dirty on node 0: Table 2a's 1 -> 0 latency.
    let (rep, s) = run(10, vec![w, Op::Barrier], vec![Op::Barrier, r]);
    assert_eq!(latencies_of(&s, 10), vec![254.9]);
    assert_eq!((rep.c2c_transfers, rep.c2c_remote), (1, 1));
    // A clean line is not a c2c transfer: node 1 reads it from node 0's memory.
    let (rep, s) = run(10, vec![r, Op::Barrier], vec![Op::Barrier, r]);
    assert_eq!(latencies_of(&s, 10), vec![254.9]);
    assert_eq!(rep.c2c_transfers, 0);
    assert_eq!(rep.remote_accesses, 1);
}

#[test]
fn issue4_writes_invalidate_other_copies_and_ping_pong() {
    let w = Op::Access(Access::write(X));
    let r = Op::Access(Access::read(X));
    let b = Op::Barrier;
    // a writes, b reads, a writes again (invalidating b's copy), b reads again.
    let (rep, s) = run(10, vec![w, b, b, w, b, b], vec![b, r, b, b, r, b]);
    assert_eq!(rep.c2c_transfers, 2);
    assert!(rep.invalidations >= 1);
    assert_eq!(latencies_of(&s, 10), vec![254.9, 254.9]);
    // Writing a line only this core holds costs an L1 hit.
    let (_, s) = run(1, vec![w, w], vec![]);
    let l1 = 4.0 * 1e3 / 2100.0;
    assert_eq!(latencies_of(&s, 0)[1], l1);
}

/// A cache entry keeps 62 bits of its line key, whose bits from 58 up name the process: the
/// simulator takes at most 16 processes, and the 16th one's lines hit the caches like the first's
/// (the 17th is refused instead of never hitting).
#[test]
fn issue4_sixteen_processes_hit_their_caches_and_a_seventeenth_is_refused() {
    let m = catalog::load("laso-hpl").unwrap();
    let mut sim = Simulator::new(&m, SimConfig::default());
    for i in 0..numaff_sim::MAX_PROCESSES as u32 {
        let ops = vec![Op::Access(Access::read(X)), Op::Access(Access::read(X))];
        let spec = ProcessSpec::new("p", DataPolicy::FirstTouch).thread(ThreadSpec::new(
            "t",
            i % 8,
            ops.into_iter(),
        ));
        sim.spawn(spec).unwrap();
    }
    let extra = ProcessSpec::new("p", DataPolicy::FirstTouch).thread(ThreadSpec::new(
        "t",
        0,
        vec![Op::Access(Access::read(X))].into_iter(),
    ));
    let e = sim.spawn(extra).unwrap_err();
    assert!(e.contains("16 at most"), "{e}");
    let r = sim.run();
    // Each process's second read hits its L1.
    assert_eq!(r.cache_hits[0], 16, "L1 hits: {:?}", r.cache_hits);
}
