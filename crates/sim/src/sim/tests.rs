//! Tests of the simulator core: its specialised paths (common shape, private lines, directory
//! forms) give the general path's figures, and its bookkeeping stays exact.

#![allow(clippy::unwrap_used)]

use super::*;
use crate::cache::MODIFIED_OUTER;
use crate::config::{HwSampling, OsMoves, OsScheduler};
use crate::dir::FormKind;
use crate::stream::ThreadSpec;

/// Four threads on PUs far apart run random reads and writes (one in three) over a shared
/// 2 MiB region (L2 misses, L3 hits, sharing, invalidations, c2c transfers), over lines that
/// all fall in one set of the last-level cache of PU 0 (its evictions), and over a private
/// region, with barriers; every seventh access is sampled with its latency. Returns the
/// report and samples (Debug), and how many PUs have the common shape.
fn run(m: &Machine, general: bool) -> (String, String, usize) {
    run_with(m, general, None, true).unwrap()
}

/// `run` with the directory in form `form` (`None`: the one `new` picks); `None` if that form
/// cannot hold the machine's directory.
fn run_with(
    m: &Machine,
    general: bool,
    form: Option<FormKind>,
    private: bool,
) -> Option<(String, String, usize)> {
    let (mut sim, r, shaped) = mixed(m, general, form, None, private)?;
    let mut s = Vec::new();
    sim.take_samples(&mut s);
    Some((format!("{r:?}"), format!("{s:?}"), shaped))
}

/// The simulator after `run_with`'s run (with the os scheduler `os`, if given), its report
/// and how many PUs have the common shape.
fn mixed(
    m: &Machine,
    general: bool,
    form: Option<FormKind>,
    os: Option<OsScheduler>,
    private: bool,
) -> Option<(Simulator, Report, usize)> {
    let cfg = SimConfig {
        hw_sampling: Some(HwSampling {
            period: 7,
            jitter: 0.0,
            min_latency_ns: 0.0,
            cost_ns: 1.0,
        }),
        os_scheduler: os,
        ..SimConfig::default()
    };
    let mut sim = Simulator::new(m, cfg);
    if !private || general {
        sim = sim.without_private_lines();
    }
    if let Some(kind) = form {
        sim.dir = Directory::with_kind(sim.tracked.len(), sim.pus.len() as u32, kind)?;
    }
    let shaped = sim.pus.iter().filter(|pu| pu.p3.is_some()).count();
    if general {
        for pu in &mut sim.pus {
            // The dispatch on geometry goes with the shape: the general path throughout.
            pu.p3 = None;
            pu.geom = 0;
        }
    }
    // 48 lines of one set of PU 0's last level (more than its ways), from 0x2000_0000.
    let llc = *sim.pus[0].path.last().unwrap();
    let c = &sim.caches[llc].cache;
    let first = 0x2000_0000u64 >> 6;
    let set = c.set_of(first);
    let conflict: Vec<u64> = (first..).filter(|&l| c.set_of(l) == set).take(48).collect();
    let cpus: Vec<u32> = m.pus().iter().collect();
    let picks = [0, 1, cpus.len() / 2, cpus.len() - 1];
    let mut spec = ProcessSpec::new("shape", DataPolicy::Interleave);
    for (k, &i) in picks.iter().enumerate() {
        let conflict = conflict.clone();
        let mut rng = numaff_machine::rng::SplitMix64::new(k as u64 + 1);
        let ops: Vec<Op> = (0..4_000u64)
            .map(|i| {
                if i % 1_000 == 999 {
                    return Op::Barrier;
                }
                let x = rng.next_u64();
                let vaddr = match x % 8 {
                    0..=3 => 0x1000_0000 + (x >> 20) % (2 << 20),
                    4 | 5 => conflict[(x >> 24) as usize % conflict.len()] << 6,
                    _ => 0x4000_0000 + ((k as u64) << 24) + (x >> 28) % (64 << 10),
                };
                Op::Access(if (x >> 40).is_multiple_of(3) {
                    Access::write(vaddr)
                } else {
                    Access::read(vaddr)
                })
            })
            .collect();
        spec = spec.thread(ThreadSpec::new(format!("t{k}"), cpus[i], ops.into_iter()));
    }
    sim.spawn(spec).unwrap();
    let r = sim.run();
    Some((sim, r, shaped))
}

/// Regression: the directory's holders are exactly the tracked caches that hold each line, and
/// no entry outlives the line's last cached copy. The bug: a write that hit in the first or
/// second level set the non-inclusive last level's bit whether it held the line or not; the
/// stale bit kept the entry (and a dirty owner) after the line left every cache.
/// On every catalog machine whose tracked caches have a bit each (no aliasing), on the common
/// shape's path and the general one, after `run`'s mix (its conflict lines leave lines in the
/// second level that the last level dropped, and its writes then hit them), and with an os
/// scheduler that moves threads every 20 µs or so (lines left in the caches a thread moved from).
#[test]
fn directory_holders_are_the_caches_that_hold_the_line() {
    let mut checked = 0;
    // Every 20 µs (a move costs 5 µs: moving every 2 µs at this rate starves the threads).
    let moving = OsScheduler {
        interval_ns: 20_000,
        move_probability: 0.5,
        moves: OsMoves::Anywhere,
    };
    for name in numaff_machine::catalog::names() {
        let m = numaff_machine::catalog::load(name).unwrap();
        for (general, os) in [(false, None), (true, None), (false, Some(moving.clone()))] {
            let (sim, r, _) = mixed(&m, general, None, os.clone(), true).unwrap();
            if os.is_some() {
                assert!(r.migrations >= 4, "{name}: {} thread moves", r.migrations);
            }
            if sim.tracked.len() > DIR_BITS {
                continue;
            }
            let mut lines = std::collections::BTreeSet::new();
            for (b, &k) in sim.tracked.iter().enumerate() {
                for line in sim.caches[k].cache.lines() {
                    lines.insert(line);
                    let e = sim.coherence_entry(line);
                    let held = e.is_some_and(|e| e.holders[b / 64] >> (b % 64) & 1 == 1);
                    assert!(held, "{name}: cache {k} holds {line:#x}, its bit is clear");
                    // Where a line's coherence state is kept shows in its states (with
                    // private lines, no tracked cache is a first level, whose state is its own).
                    if sim.private_lines {
                        let st = sim.caches[k].cache.state_of(line).unwrap();
                        let private = sim.private_domain(line).is_some();
                        assert_eq!(st != SHARED, private, "{name}: {line:#x} in {k}: {st}");
                    }
                }
            }
            let mut private = 0;
            let mut shared_dirty = 0;
            let mut owned_across = 0;
            for &line in &lines {
                if let Some(d) = sim.private_domain(line) {
                    private += 1;
                    // The states hold the dirty bit (`private_lines`): with the second
                    // level holding the line, the third's copy is dirty exactly when the
                    // second's is `MODIFIED_OUTER`; a written first-level copy is a written
                    // second-level one.
                    let f = sim.pus[sim.domain_pu[d]].p3.unwrap();
                    let c = |k: usize| sim.caches[k].cache.state_of(line);
                    let (s1, s2, s3) = (c(f.l1), c(f.l2), c(f.l3));
                    if let Some(s2) = s2 {
                        let outer = s2 == MODIFIED_OUTER;
                        assert_eq!(outer, s3 == Some(MODIFIED), "{name}: {line:#x} {s2} {s3:?}");
                    }
                    if s1 == Some(MODIFIED) {
                        assert!(
                            matches!(s2, Some(MODIFIED | MODIFIED_OUTER)),
                            "{name}: {line:#x}"
                        );
                    }
                }
                let e = sim.coherence_entry(line).unwrap();
                let nodes: std::collections::BTreeSet<usize> = (0..sim.tracked.len())
                    .filter(|&b| e.holders[b / 64] >> (b % 64) & 1 == 1)
                    .map(|b| sim.caches[sim.tracked[b]].node)
                    .collect();
                let moesi = sim.coherence == Coherence::Moesi;
                // An owner holds the line in a cache of its path. A dirty line is held on
                // one node only (a read from another node wrote it back), but under MOESI,
                // whose owner keeps it dirty (Owned) for readers anywhere; and only MESIF
                // keeps a line dirty without an owner (a transfer within a node).
                if let Some(o) = (e.owner as usize).checked_sub(1) {
                    let bits = sim.pus[o].path_bits;
                    let held = (e.holders[0] & bits[0]) | (e.holders[1] & bits[1]) != 0;
                    assert!(held, "{name}: {line:#x}'s owner {o} holds it nowhere");
                    if e.dirty && nodes.len() > 1 {
                        assert!(moesi, "{name}: {line:#x} dirty on {nodes:?}");
                        owned_across += 1;
                    }
                } else if e.dirty {
                    assert_eq!(sim.coherence, Coherence::Mesif, "{name}: {line:#x}");
                    assert_eq!(nodes.len(), 1, "{name}: {line:#x} dirty on {nodes:?}");
                    shared_dirty += 1;
                }
                for (b, &k) in sim.tracked.iter().enumerate() {
                    if e.holders[b / 64] >> (b % 64) & 1 == 1 {
                        let c = &sim.caches[k].cache;
                        assert!(c.contains(line), "{name}: {line:#x}'s bit {b} is stale");
                    }
                }
            }
            // Every entry is one of those lines: none outlives the last cached copy.
            assert_eq!(
                sim.dir.len(),
                lines.len() - private,
                "{name}: entries of uncached lines"
            );
            if name == "laso-hpl" && !general && os.is_none() {
                // The private lines were exercised: each thread's own region (threads the
                // os scheduler moves share theirs with the domains they move to).
                assert!(private > 1000, "{name}: {private} private lines");
                // And lines written on one core and read on another of the node.
                assert!(shared_dirty > 0, "{name}: no line dirty without an owner");
            }
            if name == "kmaf-opteron" && !general && os.is_none() {
                // MOESI: lines written on one node and read on another.
                assert!(owned_across > 0, "{name}: no owned line read elsewhere");
            }
            checked += 1;
        }
    }
    assert!(checked >= 4, "{checked} runs checked");
}

/// Private lines (`Simulator::private_lines`) keep the coherence state of lines only one domain has
/// touched in the cache tags instead of the directory; the figures must be the directory's, bit for
/// bit: on every catalog machine, with threads that stay (each keeps its region private) and with
/// threads the os scheduler moves (their regions turn shared while their lines are in the caches
/// they left, dirty ones among them).
#[test]
fn private_lines_give_the_directorys_figures() {
    let moving = OsScheduler {
        interval_ns: 20_000,
        move_probability: 0.5,
        moves: OsMoves::Anywhere,
    };
    let mut with_private = 0;
    for name in numaff_machine::catalog::names() {
        let m = numaff_machine::catalog::load(name).unwrap();
        for os in [None, Some(moving.clone())] {
            let (mut a, ra, _) = mixed(&m, false, None, os.clone(), true).unwrap();
            let (mut b, rb, _) = mixed(&m, false, None, os.clone(), false).unwrap();
            assert!(!b.private_lines());
            assert_eq!(
                format!("{ra:?}"),
                format!("{rb:?}"),
                "{name} {os:?}: report"
            );
            let (mut sa, mut sb) = (Vec::new(), Vec::new());
            a.take_samples(&mut sa);
            b.take_samples(&mut sb);
            assert_eq!(
                format!("{sa:?}"),
                format!("{sb:?}"),
                "{name} {os:?}: samples"
            );
            if a.private_lines() {
                with_private += 1;
                // The run went past the point where pages stop being made private
                // (`Process::takes_pages`): figures equal on both sides of it.
                let pr = &a.procs[0];
                assert!(
                    pr.private_pages >= 256 && !pr.takes_pages(),
                    "{name} {os:?}"
                );
                // The directory held fewer lines: the private ones were in the tags (all
                // may have turned shared where threads moved).
                let (da, db) = (a.directory_len(), b.directory_len());
                assert!(
                    da < db || (os.is_some() && da == db),
                    "{name} {os:?}: {da} {db}"
                );
            }
        }
    }
    // laso-hpl, laso-lpl, kmaf-xeon, agung-xeon2, agung-xeon56, agung-sim-4x16.
    assert!(with_private >= 12, "{with_private} runs with private lines");
}

#[test]
fn common_shape_path_gives_the_general_paths_figures() {
    let mut shaped_machines = 0;
    for name in numaff_machine::catalog::names() {
        let m = numaff_machine::catalog::load(name).unwrap();
        let (r3, s3, shaped) = run(&m, false);
        let (r, s, _) = run(&m, true);
        assert_eq!(r3, r, "{name}: report");
        assert_eq!(s3, s, "{name}: samples");
        if shaped > 0 {
            shaped_machines += 1;
        }
        if name == "laso-hpl" {
            assert_eq!(shaped, m.pus().iter().count(), "laso-hpl: every PU shaped");
            // ... and on the geometry of `P8W20Geom`, so that its lookups ran.
            let sim = Simulator::new(&m, SimConfig::default());
            let f = sim.pus[0].p3.unwrap();
            let c = |k: usize| &sim.caches[k].cache;
            assert!(c(f.l1).is_p8() && c(f.l2).is_p8() && c(f.l3).is_w20());
        }
    }
    assert!(shaped_machines > 0);
}

/// One thread on laso-hpl's first PU: a read of one line, `Compute(100_000)` (past the
/// first read's miss, so that nothing later waits for it), `n` more reads of that line (first
/// level hits), then `tail`. Returns the thread's end (ns), the hardware samples taken (those
/// with a latency: not the first touch's fault sample), the first level's hit latency and the
/// cycle time.
fn one_line(n: usize, tail: &[Op], cfg: SimConfig) -> (f64, u64, f64, f64) {
    let m = numaff_machine::catalog::load("laso-hpl").unwrap();
    let mut sim = Simulator::new(&m, cfg);
    let a = Op::Access(Access::read(0x1000_0000));
    let mut ops = vec![a, Op::Compute(100_000)];
    ops.extend(std::iter::repeat_n(a, n));
    ops.extend_from_slice(tail);
    let cpu = m.pus().iter().next().unwrap();
    let spec = ProcessSpec::new("line", DataPolicy::FirstTouch).thread(ThreadSpec::new(
        "t",
        cpu,
        ops.into_iter(),
    ));
    sim.spawn(spec).unwrap();
    sim.run();
    let mut samples = Vec::new();
    sim.take_samples(&mut samples);
    let hw = samples.iter().filter(|s| s.latency_ns.is_some()).count() as u64;
    let p = sim.threads[0].pu;
    (sim.threads[0].end, hw, sim.pus[p].lat[0], sim.cycle_ns)
}

#[test]
fn hot_state_follows_its_thread() {
    // Two threads time-sliced on one PU every 300 ns and a third on another PU, each with its
    // own number of accesses over a private 8 MiB region (memory reads, local and remote
    // under interleaving), with a compute op every 50th: each thread's hot state (its ops,
    // window, access and memory counts) must come back to it at every slice's end, horizon
    // and finish (`Simulator::run` holds it only while the thread runs).
    let m = numaff_machine::catalog::load("laso-hpl").unwrap();
    let cfg = SimConfig {
        slice_ns: 300.0,
        ..SimConfig::default()
    };
    let mut sim = Simulator::new(&m, cfg);
    let cpus: Vec<u32> = m.pus().iter().collect();
    let counts = [3_000u64, 2_000, 2_500];
    let mut spec = ProcessSpec::new("hot", DataPolicy::Interleave);
    for (k, &n) in counts.iter().enumerate() {
        let mut rng = numaff_machine::rng::SplitMix64::new(0x2545_f491_4f6c_dd1d ^ (k as u64 + 1));
        let mut ops = Vec::new();
        for i in 0..n {
            let x = rng.next_u64();
            ops.push(Op::Access(Access::read(
                0x1000_0000 + ((k as u64) << 24) + (x >> 20) % (8 << 20),
            )));
            if i % 50 == 49 {
                ops.push(Op::Compute(100));
            }
        }
        let cpu = cpus[if k < 2 { 0 } else { cpus.len() - 1 }];
        spec = spec.thread(ThreadSpec::new(format!("t{k}"), cpu, ops.into_iter()));
    }
    sim.spawn(spec).unwrap();
    let r = sim.run();
    assert!(sim.all_done());
    assert_eq!(r.accesses, counts.iter().sum::<u64>());
    for (t, &n) in r.threads.iter().zip(&counts) {
        assert_eq!(t.accesses, n, "{}", t.name);
        let mem = t.local_accesses + t.remote_accesses;
        assert!(mem > n / 2 && mem <= n, "{}: {mem} memory reads", t.name);
    }
    let local: u64 = r.threads.iter().map(|t| t.local_accesses).sum();
    let remote: u64 = r.threads.iter().map(|t| t.remote_accesses).sum();
    assert_eq!((local, remote), (r.local_accesses, r.remote_accesses));
    assert!(local > 0 && remote > 0);
    // The two threads sharing PU 0 took turns: each ended after the other had started.
    let (a, b) = (&r.threads[0], &r.threads[1]);
    assert!(a.end_ns > b.start_ns && b.end_ns > a.start_ns);
}

/// `run_pu_in` keeps the PU's clock in a local while a thread's accesses run and `step` hands
/// it back: an op after the accesses must start from the clock they left, and a
/// hardware sample's cost must still move it. With the clock written back too late, the
/// `Compute` below would start from the time the thread was picked (0), and with a sample's
/// cost dropped, sampling would cost nothing.
#[test]
fn ops_and_samples_see_the_clock_the_accesses_left() {
    let n = 2_000;
    let c = 1_000_000;
    let (plain, _, lat1, cycle) = one_line(n, &[], SimConfig::default());
    let (computed, ..) = one_line(n, &[Op::Compute(c)], SimConfig::default());
    // Without the tail the thread ends when its last hit is done; with it, `c` cycles after
    // that hit was issued (long after it is done).
    let want = c as f64 * cycle - lat1;
    assert!(lat1 > 0.0 && plain > 1_000.0, "{lat1} {plain}");
    assert!(
        (computed - plain - want).abs() < 1e-6 * computed,
        "compute after accesses: {computed} - {plain} != {want}"
    );
    // Every sample delays the later accesses by its cost (all hits of one latency, each
    // cost far above it), so the thread ends that much later in all.
    let cost = 50.0;
    let sampled = SimConfig {
        hw_sampling: Some(HwSampling {
            period: 10,
            jitter: 0.0,
            min_latency_ns: 0.0,
            cost_ns: cost,
        }),
        ..SimConfig::default()
    };
    let (with, samples, ..) = one_line(n, &[], sampled);
    assert_eq!(samples, (n as u64 + 1) / 10, "one sample per 10 accesses");
    let want = samples as f64 * cost;
    assert!(
        (with - plain - want).abs() < 1e-6 * with,
        "sampling: {with} - {plain} != {samples} x {cost}"
    );
}

/// The access path is generic over the directory's form (`dir::Form`, picked once per
/// `run_pu`): every form that can hold a machine's directory gives the figures of the form
/// `new` picks, on every catalog machine, on the common-shape and the general paths.
#[test]
fn every_directory_form_gives_the_same_figures() {
    let mut runs = [0; 3];
    for name in numaff_machine::catalog::names() {
        let m = numaff_machine::catalog::load(name).unwrap();
        for general in [false, true] {
            let (r, s, _) = run(&m, general);
            for (i, kind) in [FormKind::Packed, FormKind::Narrow, FormKind::Wide]
                .into_iter()
                .enumerate()
            {
                let Some((rk, sk, _)) = run_with(&m, general, Some(kind), true) else {
                    continue;
                };
                runs[i] += 1;
                assert_eq!(rk, r, "{name} {kind:?} general {general}: report");
                assert_eq!(sk, s, "{name} {kind:?} general {general}: samples");
            }
        }
    }
    // laso-hpl's directory fits the packed form; every machine's fits the wide one.
    assert!(runs[0] > 0 && runs[1] > 0, "{runs:?}");
    assert_eq!(runs[2], 2 * numaff_machine::catalog::names().len());
}
