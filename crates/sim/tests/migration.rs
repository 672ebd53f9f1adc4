//! Page and thread migration through the Environment: what moves, what it costs (copy plus
//! kernel for a page, the switch and cold caches for a thread), and 2 MiB pages moving whole.

#![allow(clippy::unwrap_used)]

mod common;

use common::{pages_reader, streaming, BASE};
use numaff_engine::{AccessKind, Environment, PageMoveFailure, TaskId};
use numaff_machine::{catalog, CpuSet};
use numaff_sim::{Access, DataPolicy, Op, ProcessSpec, SimConfig, Simulator, ThreadSpec};

#[test]
fn environment_moves_pages_and_threads_with_costs() {
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
fn huge_pages_fault_and_migrate_as_one_2mib_page() {
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
fn page_migration_costs_copy_plus_kernel_and_blocks_the_page() {
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
fn thread_migration_costs_the_switch_and_leaves_caches_cold() {
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
