//! Issue 4 audit: the model's parts the issue lists one by one (2 MiB pages, page and thread
//! migration costs, every sampler with its cost, the energy formula), each asserted from outside.

#![allow(clippy::unwrap_used)]

mod common;

use numaff_engine::{AccessKind, Environment, PageMoveFailure, Sample, TaskId};
use numaff_machine::{catalog, CpuSet};
use numaff_sim::{
    Access, DataPolicy, HwSampling, InducedFaults, Op, ProcessSpec, Report, SimConfig, Simulator,
    ThreadSpec,
};

const BASE: u64 = 0x4000_0000; // 2 MiB aligned

/// One thread on `cpu` reading one line of each 4 KiB page of `bytes`, `sweeps` times.
fn pages_reader(cpu: u32, bytes: u64, sweeps: u64) -> ThreadSpec {
    let pages = bytes / 4096;
    ThreadSpec::new(
        "r",
        cpu,
        (0..sweeps * pages).map(move |i| Op::Access(Access::read(BASE + (i % pages) * 4096))),
    )
}

fn run_with_samples(cfg: SimConfig, spec: ProcessSpec) -> (Report, Vec<Sample>) {
    let m = catalog::load("kmaf-sim-4x2").unwrap();
    common::run_sampled(&mut Simulator::new(&m, cfg), spec)
}

#[test]
fn issue4_audit_2mib_pages_fault_and_migrate_as_one_page() {
    let m = catalog::load("kmaf-sim-4x2").unwrap();
    let spec = |huge: bool| {
        let s = ProcessSpec::new("h", DataPolicy::FirstTouch).thread(pages_reader(0, 4 << 20, 1));
        if huge {
            s.with_huge_pages()
        } else {
            s
        }
    };
    let small = Simulator::new(&m, SimConfig::default()).spawn_and_run(spec(false));
    let huge = Simulator::new(&m, SimConfig::default()).spawn_and_run(spec(true));
    assert_eq!((small.page_faults, huge.page_faults), (1024, 2));
    // A 2 MiB page moves as a whole: 2 MiB copied, costlier than a 4 KiB page.
    let cost = |huge: bool| {
        let mut sim = Simulator::new(&m, SimConfig::default());
        let pid = sim.spawn(spec(huge)).unwrap();
        while !sim.finished() {
            sim.advance(1_000_000).unwrap();
        }
        let mv = sim.move_pages(pid, &[BASE + 4096], 1).unwrap();
        assert_eq!(sim.page_nodes(pid, &[BASE + 4096]).unwrap(), vec![Some(1)]);
        let other = sim.page_nodes(pid, &[BASE + (1 << 20)]).unwrap()[0];
        (mv.bytes, mv.cost_ns, other)
    };
    let (b4, c4, other4) = cost(false);
    let (b2, c2, other2) = cost(true);
    assert_eq!((b4, b2), (4096, 2 << 20));
    assert_eq!(
        other4,
        Some(0),
        "a 4 KiB move leaves the next pages where they were"
    );
    assert_eq!(other2, Some(1), "the whole 2 MiB page moved");
    assert!(c2 > 10.0 * c4, "2 MiB copy {c2} ns vs 4 KiB {c4} ns");
}

#[test]
fn issue4_audit_page_migration_costs_copy_plus_kernel_and_blocks_the_page() {
    let m = catalog::load("kmaf-sim-4x2").unwrap();
    let cfg = SimConfig::default();
    let mut sim = Simulator::new(&m, cfg.clone());
    // Touch 64 pages, then compute for a long time so the process stays alive.
    let ops = (0..64u64)
        .map(|p| Op::Access(Access::read(BASE + p * 4096)))
        .chain([Op::Compute(100_000_000)]);
    let pid = sim
        .spawn(ProcessSpec::new("m", DataPolicy::FirstTouch).thread(ThreadSpec::new("t", 0, ops)))
        .unwrap();
    sim.advance(200_000).unwrap();
    let one = sim.move_pages(pid, &[BASE], 1).unwrap();
    let fixed = cfg.migration_call_ns + cfg.migration_page_ns;
    assert!(
        one.cost_ns > fixed,
        "kernel cost {fixed} ns plus a copy: {one:?}"
    );
    // The page is blocked while it is copied: a second request at once finds it busy.
    let again = sim.move_pages(pid, &[BASE], 2).unwrap();
    assert_eq!(again.failed, vec![(BASE, PageMoveFailure::Busy)]);
    // Eight pages two hops away cost eight copies (over two links) and eight kernel costs.
    let vas: Vec<u64> = (1..9u64).map(|p| BASE + p * 4096).collect();
    let eight = sim.move_pages(pid, &vas, 2).unwrap();
    assert_eq!((eight.moved, eight.bytes), (8, 8 * 4096));
    assert!(
        eight.cost_ns > cfg.migration_call_ns + 8.0 * (one.cost_ns - cfg.migration_call_ns),
        "one: {one:?}, eight: {eight:?}"
    );
    sim.advance(eight.cost_ns as u64 + 1_000).unwrap();
    let later = sim.move_pages(pid, &[BASE], 2).unwrap();
    assert_eq!((later.moved, later.failed.len()), (1, 0));
    let r = sim.report();
    assert_eq!(r.page_migrations, 1 + 8 + 1);
    let sum = one.cost_ns + again.cost_ns + eight.cost_ns + later.cost_ns;
    assert!((r.page_migration_cost_ns - sum).abs() < 1e-6);
}

#[test]
fn issue4_audit_thread_migration_costs_the_switch_and_leaves_caches_cold() {
    let m = catalog::load("kmaf-sim-4x2").unwrap();
    let cfg = SimConfig::default();
    // Re-read 128 KiB (fits the caches) 100 times; move the thread to another node after a few.
    let run = |moved: bool| {
        let mut sim = Simulator::new(&m, cfg.clone());
        let ops = (0..100 * 2048u64).map(|i| Op::Access(Access::read(BASE + (i % 2048) * 64)));
        let pid = sim
            .spawn(
                ProcessSpec::new("c", DataPolicy::FirstTouch).thread(ThreadSpec::new("t", 0, ops)),
            )
            .unwrap();
        sim.advance(100_000).unwrap();
        let mut cost = 0.0;
        if moved {
            let mut to = CpuSet::new();
            to.insert(2);
            let tm = sim.move_thread(TaskId { pid, tid: pid }, &to).unwrap();
            assert_eq!((tm.from_cpu, tm.to_cpu), (Some(0), Some(2)));
            cost = tm.cost_ns;
        }
        while !sim.finished() {
            sim.advance(1_000_000).unwrap();
        }
        (sim.report(), cost)
    };
    let (stay, _) = run(false);
    let (go, cost) = run(true);
    assert_eq!(cost, cfg.thread_migration_ns);
    assert_eq!((go.migrations, go.migration_cost_ns), (1, cost));
    assert!(
        go.llc_misses >= stay.llc_misses + 2048,
        "cold caches after the move: {} vs {}",
        go.llc_misses,
        stay.llc_misses
    );
    assert!(go.makespan_ns as f64 > stay.makespan_ns as f64 + cost);
}

#[test]
fn issue4_audit_first_touch_faults_are_samples_one_per_page() {
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
fn issue4_audit_induced_faults_cost_the_faulting_thread() {
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
fn issue4_audit_hardware_sampling_one_in_n_with_latency_and_cost() {
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
fn issue4_audit_energy_is_static_power_times_time_plus_events() {
    let m = catalog::load("kmaf-sim-4x2").unwrap();
    let cfg = SimConfig::default();
    let e = &cfg.energy;
    // Compute only: static power x makespan, nothing else.
    let r = Simulator::new(&m, cfg.clone()).spawn_and_run(
        ProcessSpec::new("c", DataPolicy::FirstTouch).thread(ThreadSpec::new(
            "t",
            0,
            std::iter::repeat_n(Op::Compute(1000), 1000),
        )),
    );
    let watts = e.static_w_per_package * m.packages.len() as f64
        + e.static_w_per_node * m.nodes.len() as f64;
    let want = watts * r.makespan_ns as f64 * 1e-9;
    // (the reported makespan is whole ns; energy uses the exact one: at most 1 ns apart)
    assert!(
        (r.energy_j - want).abs() <= watts * 1e-9,
        "{} vs {want}",
        r.energy_j
    );
    // Memory traffic adds per-event energy beyond static power: at least one DRAM line per miss.
    let spec = ProcessSpec::new("s", DataPolicy::Bind(2)).thread(pages_reader(0, 1 << 20, 1));
    let r = Simulator::new(&m, cfg.clone()).spawn_and_run(spec);
    let stat = watts * r.makespan_ns as f64 * 1e-9;
    let dram = r.llc_misses as f64 * e.dram_line_nj * 1e-9;
    assert!(
        r.energy_j >= stat + dram,
        "{} vs {stat} + {dram}",
        r.energy_j
    );
}

#[test]
fn issue4_audit_hinting_faults_walk_pages_in_order_kmaf_faults_pick_at_random() {
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
