//! The coherence directory seen from outside: cache-to-cache transfers cost what the model says
//! (45 ns within a node, the latency between the nodes across them), writes invalidate other copies.

#![allow(clippy::unwrap_used)]

mod common;

use numaff_engine::{AccessKind, Sample};
use numaff_machine::{catalog, Coherence, Machine};
use numaff_sim::{
    Access, DataPolicy, HwSampling, Op, ProcessSpec, Report, SimConfig, Simulator, ThreadSpec,
};

const X: u64 = 0x1000_0040;

/// Thread 0 on cpu 0 runs `a`, thread 1 on `cpu_b` runs `b`; every access is sampled with its latency.
fn run(cpu_b: u32, a: Vec<Op>, b: Vec<Op>) -> (Report, Vec<Sample>) {
    run_on(&[(0, a), (cpu_b, b)])
}

/// Threads on the given cpus, each running its ops, in one first-touch process on laso-hpl, every
/// access sampled with its latency.
fn run_on(threads: &[(u32, Vec<Op>)]) -> (Report, Vec<Sample>) {
    run_with(&catalog::load("laso-hpl").unwrap(), threads)
}

/// `run_on` on machine `m`.
fn run_with(m: &Machine, threads: &[(u32, Vec<Op>)]) -> (Report, Vec<Sample>) {
    let cfg = SimConfig {
        hw_sampling: Some(HwSampling::every_access()),
        first_touch_samples: false,
        ..SimConfig::default()
    };
    let mut spec = ProcessSpec::new("pc", DataPolicy::FirstTouch);
    for (i, (cpu, ops)) in threads.iter().enumerate() {
        spec = spec.thread(ThreadSpec::new(
            format!("t{i}"),
            *cpu,
            ops.clone().into_iter(),
        ));
    }
    common::run_sampled(&mut Simulator::new(m, cfg), spec)
}

fn latencies_of(s: &[Sample], cpu: u32) -> Vec<f64> {
    s.iter()
        .filter(|x| x.cpu == cpu && x.kind != AccessKind::Fault)
        .map(|x| x.latency_ns.unwrap())
        .collect()
}

#[test]
fn a_read_of_a_line_dirty_elsewhere_is_a_c2c_transfer_priced_by_distance() {
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
fn writes_invalidate_other_copies_and_ping_pong() {
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
fn sixteen_processes_hit_their_caches_and_a_seventeenth_is_refused() {
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
    assert!(e.to_string().contains("16 at most"), "{e}");
    let r = sim.run();
    // Each process's second read hits its L1.
    assert_eq!(r.cache_hits[0], 16, "L1 hits: {:?}", r.cache_hits);
}

/// laso-hpl's caches: 64 L1 sets, 512 L2 sets (both 8-way), 20,480 L3 sets (20-way). A line key is
/// the address / 64, its set the key modulo the set count.
const L3_SETS: u64 = 20_480;
/// laso-hpl's L3 hit: 40 cycles at 2.1 GHz.
const L3_HIT_NS: f64 = 40.0 * 1e3 / 2100.0;

/// Thread a (cpu 0) leaves `X` dirty in its L2 only, after the L3 dropped it, then evicts it from
/// the L2. Steps: write `X`; 24 rounds of a new line of `X`'s L3 set (so also of its L1 and L2
/// sets), `X` again (out of the L1, so an L2 hit: the L2's LRU moves, the L3's does not) and eight
/// lines of `X`'s L1 set in other L2 sets (pushing `X` out of the L1) — the L3 evicts `X` while the
/// L2 keeps it; read `X` (into the L1), write it (an L1 hit); eight more new lines of the L3 set
/// push it out of the L2.
fn dirty_in_the_l2_only_then_evicted() -> Vec<Op> {
    let read = |a: u64| Op::Access(Access::read(a));
    let l3_mate = |i: u64| X + i * L3_SETS * 64;
    let l1_mates: Vec<u64> = [1u64, 2, 3, 4, 5, 6, 7, 9]
        .iter()
        .map(|j| X + j * 64 * 64)
        .collect();
    let mut ops = vec![Op::Access(Access::write(X))];
    for i in 1..=24 {
        ops.push(read(l3_mate(i)));
        ops.push(read(X));
        ops.extend(l1_mates.iter().map(|&a| read(a)));
    }
    ops.push(read(X));
    ops.push(Op::Access(Access::write(X)));
    ops.extend((25..=32).map(|i| read(l3_mate(i))));
    ops
}

/// Regression: a write that hit in the L1 or L2 set the directory bits of
/// the whole path, the non-inclusive L3's among them, whether the L3 held the line or not. When
/// the L2 then dropped the dirty line, the stale L3 bit kept the entry and its owner: no writeback,
/// and a later read from another node was priced as a cache-to-cache transfer from a cache that
/// no longer held the line.
#[test]
fn a_dirty_line_leaving_its_last_cache_is_written_back() {
    let ops = dirty_in_the_l2_only_then_evicted();
    let (rep, _) = run(10, ops.clone(), vec![]);
    assert_eq!(rep.writebacks, 1, "X's dirty data leaves its last cache");
    // Node 1 then reads X: from node 0's memory, not from a cache of node 0.
    let mut a = ops;
    a.push(Op::Barrier);
    let (rep, s) = run(10, a, vec![Op::Barrier, Op::Access(Access::read(X))]);
    assert_eq!(rep.c2c_transfers, 0, "no cache holds X");
    assert_eq!(latencies_of(&s, 10), vec![254.9]);
}

/// Regression: a line whose dirty copy is only in a shared cache of the
/// reader's path is a hit there, not a cache-to-cache transfer. Core 0 writes `X`, then eight
/// lines of `X`'s L1 and L2 sets but other L3 sets push it out of its L1 and L2: the dirty line
/// stays in node 0's L3. Core 1 (node 0) reads it: an L3 hit (laso-hpl's L3 latency is the
/// default 40 cycles), no c2c transfer and no writeback (the L3 still holds the dirty line). It
/// was priced as a 45 ns transfer from core 0, which no longer held it, and written back.
#[test]
fn a_dirty_line_in_a_shared_cache_is_a_hit_there() {
    let mut a = vec![Op::Access(Access::write(X))];
    a.extend((1..=8).map(|k| Op::Access(Access::read(X + k * 512 * 64))));
    a.push(Op::Barrier);
    let (rep, s) = run(1, a, vec![Op::Barrier, Op::Access(Access::read(X))]);
    assert_eq!(latencies_of(&s, 1), vec![L3_HIT_NS]);
    assert_eq!((rep.c2c_transfers, rep.writebacks), (0, 0));
}

/// Regression (private lines): a line dirty in one core's private pages and
/// pushed out of the shared L3 by another core hands its dirty bit to the first core's L2 if that
/// still holds it (no writeback yet), and is written back if not; the L2 copy is written back when
/// it leaves in turn. On laso-hpl, core 0 writes 10 lines of its own pages that share one L3 set
/// (and one L2 set: its L2 keeps the last 8); core 1 reads 25 lines of that L3 set in its own pages
/// (20 ways: core 0's 10 leave the L3); core 0 then reads 10 lines of its L2 set elsewhere. Each of
/// the 10 lines is written back once. Then core 0 reads a line and writes it (an L1 hit: dirty in
/// its L2 only) and pushes it out of its L2 while the L3 holds it: the L3 copy takes the dirty bit,
/// no writeback. The figures equal those with every line in the directory.
#[test]
fn a_private_dirty_line_leaving_the_shared_l3_keeps_its_dirty_bit_in_the_l2() {
    let m = catalog::load("laso-hpl").unwrap();
    // 25 MiB / 64 B / 20 ways = 20,480 sets: lines 20,480 apart share an L3 set (and an L2 set).
    let stride = 20_480 * 64;
    let a0 = 0x1000_0000u64;
    let mine: Vec<Op> = (0..10)
        .map(|k| Op::Access(Access::write(a0 + k * stride)))
        .collect();
    let theirs: Vec<Op> = (0..25)
        .map(|k| Op::Access(Access::read(a0 + (100 + k) * stride)))
        .collect();
    // Core 0's L2 set, another L3 set (32 KiB apart: L2 set 0 of 512; j = 8 is the L3 set above).
    let later: Vec<Op> = [1u64, 2, 3, 4, 5, 6, 7, 9, 10, 11]
        .iter()
        .map(|j| Op::Access(Access::read(0x2000_0000 + j * (32 << 10))))
        .collect();
    let d = 0x3000_0000u64;
    let dirty_in_l2 = [Op::Access(Access::read(d)), Op::Access(Access::write(d))]
        .into_iter()
        .chain((1..=8).map(|j| Op::Access(Access::read(d + j * (32 << 10)))));
    let a: Vec<Op> = mine
        .into_iter()
        .chain([Op::Barrier, Op::Barrier])
        .chain(later)
        .chain(dirty_in_l2)
        .collect();
    let b: Vec<Op> = [Op::Barrier]
        .into_iter()
        .chain(theirs)
        .chain([Op::Barrier])
        .collect();
    let run = |private: bool| {
        let mut sim = Simulator::new(&m, SimConfig::default());
        if !private {
            sim = sim.without_private_lines();
        }
        assert_eq!(sim.private_lines(), private);
        let spec = ProcessSpec::new("l3", DataPolicy::FirstTouch)
            .thread(ThreadSpec::new("a", 0, a.clone().into_iter()))
            .thread(ThreadSpec::new("b", 1, b.clone().into_iter()));
        sim.spawn(spec).unwrap();
        let r = sim.run();
        (r, sim.directory_len())
    };
    let (with, dir_with) = run(true);
    let (without, dir_without) = run(false);
    assert_eq!(format!("{with:?}"), format!("{without:?}"));
    assert_eq!(with.writebacks, 10, "{with:?}");
    // Nothing was shared: with private lines the directory stayed empty.
    assert_eq!(dir_with, 0);
    assert!(dir_without > 0);
}

/// Regression: a read of a line dirty in another core's caches on the same node is a 45 ns transfer
/// and the line stays dirty in the node's caches (an inclusive L3 takes it on Intel): no write to
/// memory. The bug: every such read was written back, so threads sharing written data on one node
/// sent their controller a write per transfer. Core 0 writes `X`; core 1 (node 0) reads it: a
/// transfer, no writeback. Core 2 (node 0) then reads it from the shared L3 (40 cycles), no
/// transfer. Core 10 (node 1) reads it: a transfer across the nodes, and the line goes back to
/// memory then (MESIF: copies shared across nodes are clean). The old model gave one transfer and
/// one writeback at core 1's read.
#[test]
fn a_line_read_within_its_node_stays_dirty_there_until_it_leaves_the_node() {
    let w = Op::Access(Access::write(X));
    let r = Op::Access(Access::read(X));
    let b = Op::Barrier;
    let (rep, s) = run_on(&[(0, vec![w, b]), (1, vec![b, r])]);
    assert_eq!(latencies_of(&s, 1), vec![45.0]);
    assert_eq!((rep.c2c_transfers, rep.writebacks), (1, 0), "{rep:?}");
    let (rep, s) = run_on(&[
        (0, vec![w, b, b, b]),
        (1, vec![b, r, b, b]),
        (2, vec![b, b, r, b]),
        (10, vec![b, b, b, r]),
    ]);
    assert_eq!(latencies_of(&s, 1), vec![45.0]);
    assert_eq!(latencies_of(&s, 2), vec![L3_HIT_NS], "an L3 hit");
    assert_eq!(latencies_of(&s, 10), vec![254.9], "Table 2a's 1 -> 0");
    assert_eq!(
        (rep.c2c_transfers, rep.c2c_remote, rep.writebacks),
        (2, 1, 1),
        "{rep:?}"
    );
}

/// The dirty line of a transfer within a node is written back once, when its last copy leaves:
/// core 0 writes `X`, core 1 reads it (no writeback), then core 1 reads 24 lines of `X`'s L3 set
/// (pushing it out of its L1, L2 and the shared L3) and core 0 eight lines of its L1 and L2 sets
/// in other L3 sets (out of core 0's caches): one writeback, not none (the data is not lost) and
/// not two. Without those pushes, none.
#[test]
fn a_dirty_line_shared_within_a_node_is_written_back_once_when_it_leaves() {
    let read = |a: u64| Op::Access(Access::read(a));
    let b = Op::Barrier;
    let l3_mates = (1..=24).map(|i| read(X + i * L3_SETS * 64));
    let l2_mates = (1..=8).map(|k| read(X + k * 512 * 64));
    let a: Vec<Op> = [Op::Access(Access::write(X)), b, b]
        .into_iter()
        .chain(l2_mates)
        .collect();
    let c: Vec<Op> = [b, read(X)]
        .into_iter()
        .chain(l3_mates)
        .chain([b])
        .collect();
    let (rep, _) = run_on(&[(0, a.clone()), (1, c.clone())]);
    assert_eq!((rep.c2c_transfers, rep.writebacks), (1, 1), "{rep:?}");
    let (rep, _) = run_on(&[(0, a[..3].to_vec()), (1, c[..2].to_vec())]);
    assert_eq!((rep.c2c_transfers, rep.writebacks), (1, 0), "{rep:?}");
}

/// laso-hpl with another coherence protocol: the same caches, latencies and links.
fn laso_hpl_with(c: Coherence) -> Machine {
    let mut m = catalog::load("laso-hpl").unwrap();
    assert_eq!(
        m.coherence,
        Some(Coherence::Mesif),
        "the catalog's laso-hpl"
    );
    m.coherence = Some(c);
    m
}

/// Core 0 (node 0) writes `X`; core 10 (node 1) reads it, then core 11 (node 1) and core 20 (node
/// 2); then (if
/// `evict`) core 0 reads 24 lines of `X`'s L3 set (out of its L1, L2 and node 0's L3); then core 30
/// (node 3) reads it.
fn owned_then_evicted(evict: bool) -> Vec<(u32, Vec<Op>)> {
    let read = |a: u64| Op::Access(Access::read(a));
    let b = Op::Barrier;
    let l3_mates = (1..=24).map(|i| read(X + i * L3_SETS * 64));
    let writer: Vec<Op> = [Op::Access(Access::write(X)), b, b, b]
        .into_iter()
        .chain(l3_mates.take(if evict { 24 } else { 0 }))
        .chain([b])
        .collect();
    vec![
        (0, writer),
        (10, vec![b, read(X), b, b, b]),
        (11, vec![b, b, read(X), b, b]),
        (20, vec![b, b, read(X), b, b]),
        (30, vec![b, b, b, b, read(X)]),
    ]
}

/// MOESI (AMD): a read of a line dirty on another node leaves the owner's copy dirty (Owned), no
/// write to memory; later readers on other nodes are served by that owner too (transfers from
/// node 0, at Table 2a's latencies), but a reader whose L3 got a copy from that owner hits there;
/// memory is written once, when the owner's copy leaves, and
/// a reader after that reads memory (at the same latency, but no transfer). Under MESIF (the
/// catalog's laso-hpl) the first transfer writes the line back and the later readers read
/// memory.
#[test]
fn under_moesi_a_dirty_line_read_from_other_nodes_stays_owned_until_it_leaves() {
    let m = laso_hpl_with(Coherence::Moesi);
    let lat = m.latency_ns.clone().unwrap();
    let (rep, s) = run_with(&m, &owned_then_evicted(false));
    assert_eq!(latencies_of(&s, 10), vec![lat[1][0]]);
    assert_eq!(
        latencies_of(&s, 11),
        vec![L3_HIT_NS],
        "node 1's L3 holds a current copy"
    );
    assert_eq!(latencies_of(&s, 20), vec![lat[2][0]], "from node 0's owner");
    assert_eq!(latencies_of(&s, 30), vec![lat[3][0]], "from node 0's owner");
    assert_eq!(
        (rep.c2c_transfers, rep.c2c_remote, rep.writebacks),
        (3, 3, 0),
        "{rep:?}"
    );
    let (rep, s) = run_with(&m, &owned_then_evicted(true));
    assert_eq!(
        latencies_of(&s, 30),
        vec![lat[3][0]],
        "from node 0's memory"
    );
    assert_eq!(
        (rep.c2c_transfers, rep.c2c_remote, rep.writebacks),
        (2, 2, 1),
        "{rep:?}"
    );

    let mesif = catalog::load("laso-hpl").unwrap();
    let (rep, _) = run_with(&mesif, &owned_then_evicted(false));
    assert_eq!(
        (rep.c2c_transfers, rep.c2c_remote, rep.writebacks),
        (1, 1, 1),
        "MESIF: {rep:?}"
    );
}

/// MOESI: a sharer that writes the line it holds (a current copy: the owner has not written
/// since) upgrades it, waiting for the owner's copy on node 0 to be invalidated (Table 2a's
/// 1 -> 0 latency), without a second transfer or more link traffic than MESIF, where the line
/// is clean by then; the writer becomes the owner and nothing is written back.
#[test]
fn under_moesi_a_sharer_writing_its_current_copy_is_an_upgrade_not_a_transfer() {
    let w = Op::Access(Access::write(X));
    let r = Op::Access(Access::read(X));
    let b = Op::Barrier;
    let ops = [(0, vec![w, b]), (10, vec![b, r, w])];
    let m = laso_hpl_with(Coherence::Moesi);
    let lat = m.latency_ns.clone().unwrap();
    let (rep, s) = run_with(&m, &ops);
    assert_eq!(latencies_of(&s, 10), vec![lat[1][0], lat[1][0]]);
    assert_eq!(
        (rep.c2c_transfers, rep.c2c_remote, rep.writebacks),
        (1, 1, 0),
        "{rep:?}"
    );
    let (mesif, _) = run_on(&ops);
    assert_eq!((mesif.c2c_transfers, mesif.writebacks), (1, 1), "{mesif:?}");
    assert_eq!(rep.interconnect_bytes, mesif.interconnect_bytes);
}

/// MESI (Itanium 2 on NUMAlink): every read of a dirty line from another cache writes it back,
/// within a node too, where MESIF keeps it dirty in the node's caches.
#[test]
fn under_mesi_every_transfer_of_a_dirty_line_writes_it_back() {
    let w = Op::Access(Access::write(X));
    let r = Op::Access(Access::read(X));
    let b = Op::Barrier;
    let within = [(0, vec![w, b]), (1, vec![b, r])];
    let (rep, s) = run_with(&laso_hpl_with(Coherence::Mesi), &within);
    assert_eq!(latencies_of(&s, 1), vec![45.0]);
    assert_eq!((rep.c2c_transfers, rep.writebacks), (1, 1), "{rep:?}");
    let (rep, _) = run_on(&within);
    assert_eq!(
        (rep.c2c_transfers, rep.writebacks),
        (1, 0),
        "MESIF: {rep:?}"
    );
    // A second reader on the node finds the line clean in the shared L3 either way; a reader on
    // node 1 then reads memory (no transfer) under MESI.
    let across = [(0, vec![w, b, b]), (1, vec![b, r, b]), (10, vec![b, b, r])];
    let (rep, _) = run_with(&laso_hpl_with(Coherence::Mesi), &across);
    assert_eq!(
        (rep.c2c_transfers, rep.c2c_remote, rep.writebacks),
        (1, 0, 1),
        "{rep:?}"
    );
}
