//! Issue 4's validation of the simulator: the papers' MLC matrices, determinism, congestion.
//! Each test names the issue so `cargo test issue4` runs them all.

#![allow(clippy::unwrap_used)]

mod common;

use numaff_machine::catalog;
use numaff_sim::{measure, SimConfig};

fn check_matrices(name: &str) {
    let m = catalog::load(name).unwrap();
    let got = measure(&m, &SimConfig::default());
    let lat = m.latency_ns.as_ref().unwrap();
    let bw = m.bandwidth_mbps.as_ref().unwrap();
    let mut worst = (0.0f64, 0.0f64);
    for i in 0..lat.len() {
        for j in 0..lat.len() {
            let el = (got.latency_ns[i][j] - lat[i][j]).abs() / lat[i][j];
            let eb = (got.bandwidth_mbs[i][j] - bw[i][j]).abs() / bw[i][j];
            println!(
                "{name} {i}->{j}: latency {:.1} vs {:.1} ({:+.1} %), bandwidth {:.0} vs {:.0} ({:+.1} %)",
                got.latency_ns[i][j],
                lat[i][j],
                100.0 * (got.latency_ns[i][j] / lat[i][j] - 1.0),
                got.bandwidth_mbs[i][j],
                bw[i][j],
                100.0 * (got.bandwidth_mbs[i][j] / bw[i][j] - 1.0)
            );
            worst = (worst.0.max(el), worst.1.max(eb));
            assert!(
                el <= 0.10,
                "{name} latency {i}->{j}: {} vs {}",
                got.latency_ns[i][j],
                lat[i][j]
            );
            assert!(
                eb <= 0.15,
                "{name} bandwidth {i}->{j}: {} vs {}",
                got.bandwidth_mbs[i][j],
                bw[i][j]
            );
        }
    }
    println!(
        "{name}: worst latency error {:.2} %, worst bandwidth error {:.2} %",
        100.0 * worst.0,
        100.0 * worst.1
    );
}

#[test]
fn issue4_hpl_mlc_matrices_match_table_2() {
    check_matrices("laso-hpl");
}

#[test]
fn issue4_lpl_mlc_matrices_match_table_3() {
    check_matrices("laso-lpl");
}

use numaff_engine::{AccessKind, Environment, Sample, TaskId};
use numaff_sim::{Access, DataPolicy, HwSampling, Op, ProcessSpec, Report, Simulator, ThreadSpec};

/// Each thread streams over its own `lines` lines (independent loads, no compute).
fn streaming(threads: u32, lines: u64, policy: DataPolicy) -> ProcessSpec {
    let mut spec = ProcessSpec::new("stream", policy);
    for k in 0..threads {
        let base = 0x4000_0000 + u64::from(k) * lines * 64;
        let ops = (0..lines).map(move |l| Op::Access(Access::read(base + l * 64)));
        spec = spec.thread(ThreadSpec::new(format!("t{k}"), k, ops));
    }
    spec
}

fn mean_thread_time(r: &Report) -> f64 {
    r.threads.iter().map(|t| t.time_ns as f64).sum::<f64>() / r.threads.len() as f64
}

#[test]
fn issue4_bandwidth_bound_stream_congests_one_node_and_interleave_relieves_it() {
    let m = catalog::load("kmaf-sim-4x2").unwrap();
    // Page faults are not the point here: free first touches leave the memory side alone.
    let cfg = SimConfig {
        fault_ns: 0.0,
        ..SimConfig::default()
    };
    let run = |n, policy| Simulator::new(&m, cfg.clone()).spawn_and_run(streaming(n, 4000, policy));
    let times: Vec<f64> = [1, 2, 4, 8]
        .iter()
        .map(|&n| mean_thread_time(&run(n, DataPolicy::Bind(0))))
        .collect();
    println!("per-thread time, data on node 0, 1/2/4/8 threads: {times:?}");
    for w in times.windows(2) {
        assert!(w[1] > w[0] * 1.2, "no congestion: {times:?}");
    }
    let bound = run(8, DataPolicy::Bind(0));
    let inter = run(8, DataPolicy::Interleave);
    println!(
        "8 threads: bind makespan {} ns (IMC queue {:.0} ns), interleave {} ns (IMC queue {:.0} ns)",
        bound.makespan_ns, bound.imc_queue_ns, inter.makespan_ns, inter.imc_queue_ns
    );
    assert!(inter.makespan_ns as f64 * 1.5 < bound.makespan_ns as f64);
    assert!(inter.imc_queue_ns < bound.imc_queue_ns);
}

/// Each thread chases pointers through its own `lines` lines (one load in flight at a time).
fn chasing(cpus: &[u32], lines: u64, policy: DataPolicy) -> ProcessSpec {
    let mut spec = ProcessSpec::new("chase", policy);
    for (k, &cpu) in cpus.iter().enumerate() {
        let base = 0x4000_0000 + k as u64 * lines * 64;
        // A stride of 67 lines: no two loads in one page in a row, every one a miss.
        let ops = (0..lines)
            .map(move |l| Op::Access(Access::read(base + (l * 67 % lines) * 64).dependent()));
        spec = spec.thread(ThreadSpec::new(format!("t{k}"), cpu, ops));
    }
    spec
}

#[test]
fn issue4_queues_see_requests_in_time_order() {
    // Ten threads of laso-hpl's node 0 chasing pointers through memory on that node: one load
    // each in flight, some 86 ns apart, 1.08 ns of controller time each, so the controller is
    // about 12 % busy (M/D/1 with random arrivals: 0.07 ns of wait per load; these arrivals fall
    // into step and wait less). A dependent load is issued when the one before completes, up to
    // a memory latency past the other PUs' clocks. Queued in simulation order, the others' loads,
    // simulated after it but from earlier times, were taken at its arrival: 0.537 ns per load
    // at the 20 ns quantum, 0.003 ns at 0.5 ns (2026-11-27, before the queues kept time order).
    let m = catalog::load("laso-hpl").unwrap();
    let cpus: Vec<u32> = m.nodes[0].cpus.iter().collect();
    assert_eq!(cpus.len(), 10);
    let run = |quantum_ns| {
        let cfg = SimConfig {
            fault_ns: 0.0,
            quantum_ns,
            ..SimConfig::default()
        };
        Simulator::new(&m, cfg).spawn_and_run(chasing(&cpus, 3000, DataPolicy::Bind(0)))
    };
    for quantum_ns in [20.0, 0.5] {
        let r = run(quantum_ns);
        let per_miss = r.imc_queue_ns / r.llc_misses as f64;
        println!(
            "quantum {quantum_ns} ns: {} LLC misses, IMC queue {:.0} ns, {per_miss:.3} ns per miss, makespan {} ns",
            r.llc_misses, r.imc_queue_ns, r.makespan_ns
        );
        assert!(r.llc_misses >= 30_000);
        assert!(
            per_miss < 0.05,
            "quantum {quantum_ns}: {per_miss} ns per miss"
        );
    }
}

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
        let mut x = 0x1234_5678_u64 + u64::from(k);
        let ops = (0..6000u64).map(move |i| {
            if i % 1500 == 1499 {
                return Op::Barrier;
            }
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
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
fn issue4_same_seed_same_figures_different_seed_different_choices() {
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

#[test]
fn issue4_environment_moves_pages_and_threads_with_costs() {
    let m = catalog::load("laso-lpl").unwrap();
    // The first-touch sampler, as an online policy would turn it on (off by default).
    let cfg = SimConfig {
        first_touch_samples: true,
        ..SimConfig::default()
    };
    let mut sim = Simulator::new(&m, cfg);
    let pid = sim
        .spawn(streaming(2, 20_000, DataPolicy::FirstTouch))
        .unwrap();
    assert_eq!(sim.advance(20_000).unwrap(), 20_000);
    let tasks = sim.tasks().unwrap();
    assert_eq!(tasks.len(), 2);
    assert_eq!(tasks[0].cpu, Some(0));
    let mut samples = Vec::new();
    assert!(sim.drain_samples(&mut samples).unwrap() > 0);
    let fault = samples[0];
    assert_eq!(
        (fault.kind, fault.pid, fault.node),
        (AccessKind::Fault, pid, 0)
    );
    assert_eq!(sim.page_nodes(pid, &[fault.vaddr]).unwrap(), vec![Some(0)]);
    let mv = sim
        .move_pages(pid, &[fault.vaddr, 0xdead_0000_0000], 2)
        .unwrap();
    assert_eq!(
        (mv.requested, mv.moved, mv.bytes, mv.failed.len()),
        (2, 1, 4096, 1)
    );
    assert!(mv.cost_ns > 5_000.0, "{mv:?}");
    assert_eq!(sim.page_nodes(pid, &[fault.vaddr]).unwrap(), vec![Some(2)]);
    let t = TaskId { pid, tid: pid + 1 };
    let mut to = numaff_machine::CpuSet::new();
    to.insert(45);
    let tm = sim.move_thread(t, &to).unwrap();
    assert_eq!((tm.from_cpu, tm.to_cpu), (Some(1), Some(45)));
    assert!(sim.move_thread(TaskId { pid, tid: 7 }, &to).is_err());
    while !sim.finished() {
        sim.advance(100_000).unwrap();
    }
    let r = sim.report();
    assert_eq!(r.migrations, 1);
    assert_eq!(r.page_migrations, 1);
    assert_eq!(r.threads[1].cpu, 45);
    assert!(
        r.threads[1].remote_accesses > 0,
        "after the move its new pages are first-touched on node 2, its old ones are remote"
    );
}

#[test]
fn issue4_time_sharing_and_barriers() {
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

#[test]
fn issue4_induced_and_hinting_faults_sample_pages_again() {
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

/// kMAF Fig. 1's experiment (000 §3.2) with a stand-in for SP: 8 threads on kmaf-sim-4x2, each
/// sweeping (read, then write) its own 1 MiB block 6 times and, between barriers, reading the last
/// 2,048 lines its partner (thread t ^ 1) just wrote: a domain decomposition with neighbour
/// exchange. T_L puts partners on one node, T_R puts them two hops apart; D_L puts each block on its
/// thread's node, D_R two hops away. The workload generators (part B) will replace this stand-in.
#[test]
fn issue4_kmaf_fig1_ordering_from_a_halo_exchange_stand_in() {
    let m = catalog::load("kmaf-sim-4x2").unwrap();
    let (lines, halo, iters) = (16_384u64, 2_048u64, 6);
    let base = move |t: u64| 0x1000_0000 + t * lines * 64;
    let run = |t_remote: bool, d_remote: bool| {
        let cpu_of = |t: u64| -> u32 {
            if !t_remote || t & 1 == 0 {
                t as u32
            } else {
                (2 * ((t / 2 + 2) % 4) + 1) as u32
            }
        };
        let mut pages = std::collections::BTreeMap::new();
        for t in 0..8u64 {
            let node = u64::from(cpu_of(t)) / 2;
            let node = if d_remote { (node + 2) % 4 } else { node };
            for p in (base(t) >> 12)..((base(t) + lines * 64) >> 12) {
                pages.insert(p, node as u32);
            }
        }
        let mut spec = ProcessSpec::new("sp-like", DataPolicy::Explicit(pages));
        for t in 0..8u64 {
            let (me, partner) = (base(t), base(t ^ 1));
            let ops = (0..iters).flat_map(move |_| {
                let sweep = (0..lines).flat_map(move |l| {
                    [
                        Op::Access(Access::read(me + l * 64).after(2)),
                        Op::Access(Access::write(me + l * 64).after(2)),
                    ]
                });
                let exchange = (0..halo).map(move |l| {
                    Op::Access(Access::read(partner + (lines - halo + l) * 64).after(2))
                });
                sweep
                    .chain([Op::Barrier])
                    .chain(exchange)
                    .chain([Op::Barrier])
            });
            spec = spec.thread(ThreadSpec::new(format!("t{t}"), cpu_of(t), ops));
        }
        Simulator::new(&m, SimConfig::default())
            .spawn_and_run(spec)
            .makespan_ns as f64
    };
    let (ll, rl, lr, rr) = (
        run(false, false),
        run(true, false),
        run(false, true),
        run(true, true),
    );
    println!("makespans: T_L D_L {ll}, T_R D_L {rl}, T_L D_R {lr}, T_R D_R {rr} ns");
    println!(
        "gains over T_R D_R: T_L D_L {}, T_R D_L {}, T_L D_R {} (sum of the last two {})",
        rr - ll,
        rr - rl,
        rr - lr,
        (rr - rl) + (rr - lr)
    );
    assert!(ll < rl && rl < lr && lr < rr, "kMAF Fig. 1 ordering");
    // The compounding is not asserted here any more. This stand-in had it (T_L D_L's gain 9.06 ms
    // against 8.78 summed) while the last thread to reach a barrier ran its whole next phase
    // before the threads it released (fixed 2026-11-27, `Simulator::run_pu_in`): phases were
    // partly serialised, and the makespans 30 % longer. Now the gains are nearly additive here
    // (6.40 against 6.81 ms; as speedups, 287 % against 229 + 10 %, it holds). The suite's SP
    // (nas-sp), the SP-like workload the issue names, keeps it in time and is where it is
    // asserted: crates/workload/tests/issue4.rs.
}

#[test]
fn issue4_every_catalog_machine_simulates() {
    for name in catalog::names() {
        let m = catalog::load(name).unwrap();
        let cpus: Vec<u32> = m.pus().iter().collect();
        let last = *cpus.last().unwrap();
        let mut spec = ProcessSpec::new("smoke", DataPolicy::Interleave);
        for (k, cpu) in [cpus[0], last].into_iter().enumerate() {
            let ops = (0..2_000u64).map(move |i| {
                let a = 0x1000_0000 + (i % 500) * 64;
                Op::Access(if matches!((i + k as u64) % 3, 0) {
                    Access::write(a)
                } else {
                    Access::read(a)
                })
            });
            spec = spec.thread(ThreadSpec::new(format!("t{k}"), cpu, ops));
        }
        let r = Simulator::new(&m, SimConfig::default()).spawn_and_run(spec);
        assert_eq!(r.accesses, 4_000, "{name}");
        assert!(r.makespan_ns > 0, "{name}");
    }
}

/// The last thread to reach a barrier does not run on ahead of the threads it releases: the
/// simulator issues accesses in time order up to its quantum, so that queues and caches see them
/// in that order. Every access is sampled, and samples are recorded in the order accesses are
/// simulated: their times may step back by the PUs' skew (a quantum, a memory latency), never by a
/// phase: at most 98 ns here. Before the fix the last thread ran its whole second sweep first, and
/// the samples stepped back by 2,855 ns (tried).
#[test]
fn issue4_a_barrier_releases_its_threads_in_time_order() {
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

/// Two threads' ops: random-ish loads and stores with compute, a barrier, a flag handed over.
fn batch_test_ops(t: u64) -> Vec<Op> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ t;
    let mut ops = Vec::new();
    for phase in 0..3u64 {
        for i in 0..(97 + 13 * t) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let a = 0x2000_0000 + (x % (1 << 20)) / 64 * 64;
            let acc = if x.is_multiple_of(5) {
                Access::write(a)
            } else {
                Access::read(a)
            };
            ops.push(Op::Access(acc.after((i % 4) as u32)));
            if i.is_multiple_of(29) {
                ops.push(Op::Compute(7 + phase));
            }
        }
        ops.push(if t == 0 {
            Op::Post(phase)
        } else {
            Op::Wait(phase)
        });
        ops.push(Op::Barrier);
    }
    ops
}

/// An `OpSource` that hands over at most 1, 2 or 3 ops per call, in turn.
struct Ragged {
    ops: Vec<Op>,
    at: usize,
    calls: usize,
}

impl numaff_sim::OpSource for Ragged {
    fn fill(&mut self, buf: &mut [Op]) -> usize {
        self.calls += 1;
        let n = (1 + self.calls % 3)
            .min(buf.len())
            .min(self.ops.len() - self.at);
        buf[..n].copy_from_slice(&self.ops[self.at..self.at + n]);
        self.at += n;
        n
    }
}

fn batch_test_run(ragged: bool) -> Report {
    let m = catalog::load("laso-hpl").unwrap();
    let mut spec = ProcessSpec::new("batches", DataPolicy::FirstTouch);
    for t in 0..2u64 {
        let ops = batch_test_ops(t);
        let thread = if ragged {
            let source = Ragged {
                ops,
                at: 0,
                calls: 0,
            };
            ThreadSpec::from_source(format!("t{t}"), t as u32 * 12, source)
        } else {
            ThreadSpec::new(format!("t{t}"), t as u32 * 12, ops.into_iter())
        };
        spec = spec.thread(thread);
    }
    Simulator::new(&m, SimConfig::default()).spawn_and_run(spec)
}

/// The simulator takes ops in batches (`OpSource`): a source that fills only part of each batch
/// is not taken to have ended, and gives the figures of the same ops from an iterator.
#[test]
fn issue4_a_source_filling_a_few_ops_per_call_gives_the_iterators_figures() {
    let whole = batch_test_run(false);
    let ragged = batch_test_run(true);
    let expected: u64 = (0..2).map(|t| (97 + 13 * t) * 3).sum();
    assert_eq!(whole.accesses, expected);
    assert_eq!(ragged, whole);
}

/// Every op of a thread runs once, whatever its count against the batch size (empty, one,
/// around a batch of 32 and two), and a thread ends at its iterator's first `None` even when
/// the iterator would go on after it (it is fused).
#[test]
fn issue4_every_op_runs_once_across_batches_and_a_thread_ends_at_the_first_none() {
    let m = catalog::load("laso-hpl").unwrap();
    for n in [0u64, 1, 31, 32, 33, 63, 64, 65, 1000] {
        let ops = (0..n).map(|i| Op::Access(Access::read(0x3000_0000 + i * 64)));
        let spec =
            ProcessSpec::new("n", DataPolicy::FirstTouch).thread(ThreadSpec::new("t", 0, ops));
        let r = Simulator::new(&m, SimConfig::default()).spawn_and_run(spec);
        assert_eq!(r.accesses, n, "{n} ops");
        assert_eq!(r.threads[0].accesses, n, "{n} ops");
    }
    // Yields 40 accesses, then None, then 40 more, then None for good.
    let mut i = 0u64;
    let unfused = std::iter::from_fn(move || {
        i += 1;
        (i != 41 && i <= 81).then(|| Op::Access(Access::read(0x3000_0000 + i * 64)))
    });
    let spec = ProcessSpec::new("unfused", DataPolicy::FirstTouch)
        .thread(ThreadSpec::new("t", 0, unfused));
    let r = Simulator::new(&m, SimConfig::default()).spawn_and_run(spec);
    assert_eq!(r.accesses, 40);
}
