//! The flags pipelines hand items through (`Op::Post` / `Op::Wait`): a consumer waits
//! for the producer's post, resumes when the item is ready, and reads it from the producer's cache.

#![allow(clippy::unwrap_used)]

use numaff_machine::catalog;
use numaff_sim::{Access, DataPolicy, Op, ProcessSpec, Report, SimConfig, Simulator, ThreadSpec};

const X: u64 = 0x1000_0040;

fn run(a: Vec<Op>, b: Vec<Op>) -> (Report, bool) {
    let m = catalog::load("kmaf-sim-4x2").unwrap();
    let mut sim = Simulator::new(&m, SimConfig::default());
    let spec = ProcessSpec::new("pc", DataPolicy::FirstTouch)
        .thread(ThreadSpec::new("producer", 0, a.into_iter()))
        .thread(ThreadSpec::new("consumer", 2, b.into_iter()));
    sim.spawn(spec).unwrap();
    use numaff_engine::Environment as _;
    while !sim.all_done() && !sim.stuck() {
        sim.advance(1_000_000).unwrap();
    }
    (sim.report(), sim.stuck())
}

#[test]
fn wait_resumes_after_the_post_and_reads_the_item_from_the_producer() {
    // 1.8 GHz: 180,000 cycles of compute = 100 us before the item is written and posted.
    let producer = vec![
        Op::Compute(180_000),
        Op::Access(Access::write(X)),
        Op::Post(7),
    ];
    let consumer = vec![Op::Wait(7), Op::Access(Access::read(X))];
    let (r, stuck) = run(producer, consumer);
    assert!(!stuck);
    let (p, c) = (&r.threads[0], &r.threads[1]);
    assert!(c.end_ns >= 100_000, "consumer ended at {} ns", c.end_ns);
    assert!(c.end_ns >= p.end_ns, "{} vs {}", c.end_ns, p.end_ns);
    // The item is dirty in the producer's cache on another node: a remote c2c transfer.
    assert_eq!((r.c2c_transfers, r.c2c_remote), (1, 1));
}

#[test]
fn wait_on_a_flag_already_set_does_not_block() {
    let producer = vec![Op::Post(1)];
    let consumer = vec![
        Op::Compute(180_000),
        Op::Wait(1),
        Op::Access(Access::read(X)),
    ];
    let (r, stuck) = run(producer.clone(), consumer);
    assert!(!stuck);
    // The same end as without the wait: its own 100 us of compute, the fault and one access.
    let (r0, _) = run(
        producer,
        vec![Op::Compute(180_000), Op::Access(Access::read(X))],
    );
    assert!(r.threads[1].end_ns >= 100_000);
    assert_eq!(r.threads[1].end_ns, r0.threads[1].end_ns);
}

#[test]
fn wait_for_a_flag_nobody_posts_is_stuck() {
    let (_, stuck) = run(vec![Op::Compute(10)], vec![Op::Wait(3)]);
    assert!(stuck);
}
