//! Issue 4 audit: every workload the issue names, with its paper source, and every knob of a
//! program (init, compute, writes, phases, threads, start times, queues) and every placement policy
//! changing what the issue says it changes.

#![allow(clippy::unwrap_used)]

use numaff_machine::catalog as machines;
use numaff_sim::Report;
use numaff_workload::{
    catalog, placement, run, DataChoice, Init, RunOptions, ThreadPolicy, Workload,
};

const NAMED: [&str; 17] = [
    "nas-bt",
    "nas-cg",
    "nas-dc",
    "nas-ep",
    "nas-ft",
    "nas-is",
    "nas-lu",
    "nas-mg",
    "nas-sp",
    "nas-ua",
    "parsec-streamcluster",
    "parsec-canneal",
    "parsec-dedup",
    "parsec-ferret",
    "parsec-facesim",
    "parsec-fluidanimate",
    "parsec-x264",
];

#[test]
fn issue4_audit_every_named_workload_exists_and_says_what_it_follows() {
    let readme = include_str!("../README.md");
    for name in NAMED {
        assert!(
            catalog::names().contains(&name),
            "{name} not in the catalog"
        );
        let w = catalog::load(name).unwrap();
        assert_eq!(w.name, name);
        assert!(!w.description.trim().is_empty(), "{name}: no description");
        // A paper section (000/001/002 §...) or the benchmark suite's own description.
        assert!(
            w.follows.contains('§') || w.follows.contains("PARSEC") || w.follows.contains("NAS"),
            "{name}: follows names no paper description: {:?}",
            w.follows
        );
        assert!(
            readme.contains(name),
            "{name} missing from crates/workload/README.md"
        );
    }
}

fn sim(w: &Workload, threads: &str, data: DataChoice) -> Report {
    let m = machines::load("kmaf-sim-4x2").unwrap();
    let opts = RunOptions {
        threads: threads.parse().unwrap(),
        data,
        seed: 0,
    };
    run(&m, w, &opts).unwrap()
}

fn sp() -> Workload {
    catalog::load("nas-sp").unwrap().scaled(0.25)
}

fn remote_share(r: &Report) -> f64 {
    r.remote_accesses as f64 / (r.local_accesses + r.remote_accesses).max(1) as f64
}

#[test]
fn issue4_audit_master_init_puts_first_touched_pages_on_the_master_node() {
    let mut master = sp();
    master.programs[0].init = Init::Master;
    let mut parallel = sp();
    parallel.programs[0].init = Init::Parallel;
    let rm = sim(&master, "compact", DataChoice::FirstTouch);
    let rp = sim(&parallel, "compact", DataChoice::FirstTouch);
    println!(
        "remote share: master {:.3}, parallel {:.3}",
        remote_share(&rm),
        remote_share(&rp)
    );
    // Master: 6 of 8 threads find their slab on node 0.
    assert!(remote_share(&rm) > 0.6, "{}", remote_share(&rm));
    assert!(remote_share(&rp) < 0.2, "{}", remote_share(&rp));
}

#[test]
fn issue4_audit_compute_cycles_and_write_fraction_change_time_and_coherence() {
    let base = sp();
    let mut heavy = sp();
    heavy.programs[0].compute_cycles = 200;
    let (rb, rh) = (
        sim(&base, "compact", DataChoice::FirstTouch),
        sim(&heavy, "compact", DataChoice::FirstTouch),
    );
    assert_eq!(rb.accesses, rh.accesses, "compute adds time, not accesses");
    assert!(
        rh.makespan_ns > 5 * rb.makespan_ns,
        "{} vs {}",
        rh.makespan_ns,
        rb.makespan_ns
    );
    let mut ro = sp();
    ro.programs[0].write_fraction = 0.0;
    let mut rw = sp();
    rw.programs[0].write_fraction = 1.0;
    let (r0, r1) = (
        sim(&ro, "compact", DataChoice::FirstTouch),
        sim(&rw, "compact", DataChoice::FirstTouch),
    );
    println!(
        "write 0: c2c {} inval {} wb {}; write 1: c2c {} inval {} wb {}",
        r0.c2c_transfers,
        r0.invalidations,
        r0.writebacks,
        r1.c2c_transfers,
        r1.invalidations,
        r1.writebacks
    );
    assert!(
        r1.accesses > r0.accesses,
        "writes are extra accesses of swept lines"
    );
    assert!(r1.c2c_transfers > r0.c2c_transfers && r1.invalidations > r0.invalidations);
}

#[test]
fn issue4_audit_phases_move_the_working_set_between_threads() {
    let one = sp();
    let mut shifting = sp();
    shifting.programs[0].phases = 3;
    shifting.programs[0].phase_shift = 2;
    let (r1, r3) = (
        sim(&one, "compact", DataChoice::FirstTouch),
        sim(&shifting, "compact", DataChoice::FirstTouch),
    );
    println!(
        "remote share: 1 phase {:.3}, 3 shifting phases {:.3}",
        remote_share(&r1),
        remote_share(&r3)
    );
    assert!(remote_share(&r3) > remote_share(&r1) + 0.2);
}

#[test]
fn issue4_audit_thread_count_and_program_start_times_and_queues() {
    for n in [1, 3, 8] {
        let r = sim(&sp().with_threads(n), "compact", DataChoice::FirstTouch);
        assert_eq!(r.threads.len(), n as usize);
    }
    let w = catalog::load("mix-arrivals").unwrap().scaled(0.125);
    let r = sim(&w, "os", DataChoice::FirstTouch);
    for p in &w.programs {
        let name = p.display_name();
        let ts: Vec<_> = r
            .threads
            .iter()
            .filter(|t| t.name.starts_with(&format!("{name}.")))
            .collect();
        assert_eq!(ts.len(), p.threads as usize, "{name}");
        assert!(
            ts.iter().all(|t| t.start_ns >= p.start_ns),
            "{name} starts at {}",
            p.start_ns
        );
    }
    assert!(r.threads.iter().any(|t| t.start_ns >= 3_160_000));
    // A queue: the same threads run the next kernel after the previous one.
    let q = catalog::load("mix-queue").unwrap().scaled(0.125);
    let mut first_only = q.clone();
    for p in &mut first_only.programs {
        p.then.clear();
    }
    let (rq, rf) = (
        sim(&q, "compact", DataChoice::FirstTouch),
        sim(&first_only, "compact", DataChoice::FirstTouch),
    );
    assert_eq!(rq.threads.len(), rf.threads.len());
    assert!(rq.accesses > rf.accesses && rq.makespan_ns > rf.makespan_ns);
}

#[test]
fn issue4_audit_every_thread_policy_places_as_named() {
    let m = machines::load("kmaf-sim-4x2").unwrap(); // 4 nodes x 2 PUs, cpus 2k, 2k+1 on node k
    let w = sp().with_threads(4);
    let place = |p: &str, seed| {
        placement(&m, &w, &p.parse::<ThreadPolicy>().unwrap(), seed).unwrap()[0].clone()
    };
    let nodes = |c: &[u32]| {
        let mut n: Vec<u32> = c.iter().map(|&c| m.node_of_pu(c).unwrap()).collect();
        n.sort();
        n.dedup();
        n.len()
    };
    let compact = place("compact", 0);
    assert_eq!(nodes(&compact), 2, "compact fills nodes: {compact:?}");
    let scatter = place("scatter", 0);
    assert_eq!(nodes(&scatter), 4, "scatter spreads: {scatter:?}");
    // round-robin (003 §A.1.5): thread i on the i-th PU by kernel cpu id.
    assert_eq!(place("round-robin", 0), vec![0, 1, 2, 3]);
    assert_eq!(place("6,1,4", 0), vec![6, 1, 4, 6]);
    let randoms: Vec<Vec<u32>> = (0..8).map(|s| place("random", s)).collect();
    assert_eq!(randoms[0], place("random", 0), "same seed, same mapping");
    assert!(
        randoms.iter().any(|r| r != &randoms[0]),
        "seeds change it: {randoms:?}"
    );
    let os = place("os", 0);
    let mut distinct = os.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 4, "os spreads for load balance: {os:?}");
    // os moves threads now and then during the run; a pinned policy never does.
    let long = catalog::load("nas-sp").unwrap();
    let ros = sim(&long, "os", DataChoice::FirstTouch);
    let rc = sim(&long, "compact", DataChoice::FirstTouch);
    println!(
        "os: {} migrations over {} ns",
        ros.migrations, ros.makespan_ns
    );
    assert!(ros.migrations > 0 && rc.migrations == 0);
}

#[test]
fn issue4_audit_every_data_policy_places_as_named() {
    let w = sp();
    // compact: threads 0-1 on node 0, ..., 6-7 on node 3.
    let bind = sim(&w, "compact", DataChoice::Bind(3));
    let own: u64 = bind.threads[6..].iter().map(|t| t.remote_accesses).sum();
    let others: u64 = bind.threads[..6].iter().map(|t| t.local_accesses).sum();
    assert_eq!((own, others), (0, 0), "bind:3: local only on node 3");
    let inter = sim(&w, "compact", DataChoice::Interleave);
    let share = remote_share(&inter);
    assert!(
        (0.6..0.9).contains(&share),
        "interleave over 4 nodes: 3/4 remote, got {share}"
    );
    let ol = sim(&w, "compact", DataChoice::OracleLocal);
    let or = sim(&w, "compact", DataChoice::OracleRemote);
    let ft = sim(&w, "compact", DataChoice::FirstTouch);
    println!(
        "remote share: first-touch {:.3}, oracle-local {:.3}, oracle-remote {:.3}, interleave {share:.3}",
        remote_share(&ft),
        remote_share(&ol),
        remote_share(&or)
    );
    assert!(remote_share(&ol) <= remote_share(&ft) + 1e-9);
    assert!(remote_share(&ol) < 0.2 && remote_share(&or) > 0.95);
}

#[test]
fn issue4_audit_huge_pages_when_asked_by_file_or_option() {
    let text = r#"name = "h"
description = "SP on 2 MiB pages"
follows = "000 §3.1 SP"
[[program]]
kernel = "sp"
threads = 4
lines = 8192
iterations = 2
compute_cycles = 2
write_fraction = 0.5
huge_pages = true
"#;
    let huge = Workload::from_toml(text, "h.toml").unwrap();
    assert!(huge.programs[0].huge_pages);
    let mut base = huge.clone();
    base.programs[0].huge_pages = false;
    let (rh, rb) = (
        sim(&huge, "compact", DataChoice::FirstTouch),
        sim(&base, "compact", DataChoice::FirstTouch),
    );
    println!(
        "page faults: 4 KiB {}, 2 MiB {}",
        rb.page_faults, rh.page_faults
    );
    // 4 threads x 512 KiB: 512 base pages, 1 or 2 huge pages.
    assert!(
        rb.page_faults >= 512 && rh.page_faults <= 2,
        "{} {}",
        rb.page_faults,
        rh.page_faults
    );
    assert_eq!(rh.accesses, rb.accesses);
    // The oracles work on the page size the program uses: one 2 MiB page, one node.
    let ol = sim(&huge, "scatter", DataChoice::OracleLocal);
    assert!(ol.remote_accesses > 0 && ol.local_accesses > 0);
    assert!(base.with_huge_pages().programs[0].huge_pages);
}

/// A program's arrays must fit the room the generator lays them out in (32 GiB each), and its
/// threads the host (at most 65,536); larger ones, from a file or from `--scale` / `--nthreads`
/// on a checked workload, are refused with a message instead of running with arrays that overlap
/// or until the host runs out of memory.
#[test]
fn issue4_audit_arrays_larger_than_their_room_are_refused() {
    let m = machines::load("kmaf-sim-4x2").unwrap();
    let huge = sp().scaled(1e9);
    let err = run(&m, &huge, &RunOptions::default()).unwrap_err();
    assert!(err.contains("an array can take"), "{err}");
    // Exactly 32 GiB per array is accepted, one line more is not.
    let threads = sp().programs[0].threads;
    let mut w = sp();
    w.programs[0].lines = (32u64 << 30) / 64 / u64::from(threads);
    assert_eq!(w.check(), Ok(()));
    w.programs[0].lines += 1;
    assert!(w
        .check()
        .unwrap_err()
        .contains("lower lines, threads or --scale"));
    // So is a thread count that would take more host memory than a run should.
    let err = sp().with_threads(70_000).check().unwrap_err();
    assert!(
        err.contains("70000 threads is more than the 65536"),
        "{err}"
    );
    assert_eq!(sp().with_threads(1 << 16).check(), Ok(()));
    let text = "name = \"big\"\ndescription = \"d\"\nfollows = \"a test\"\n[[program]]\n\
                kernel = \"ep\"\nthreads = 4\nlines = 1099511627776\niterations = 1\n\
                compute_cycles = 1\nwrite_fraction = 0.0\n";
    let err = Workload::from_toml(text, "big.toml").unwrap_err();
    assert!(
        err.starts_with("big.toml: ep: 4 threads x 1099511627776 lines"),
        "{err}"
    );
}
