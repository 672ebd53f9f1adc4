//! A program's parameters (initialisation, compute, writes, phases, threads, start times, queues,
//! huge pages) change what they say they change, and parameters a run cannot hold are refused.

#![allow(clippy::unwrap_used)]

mod common;

use common::{remote_share, sim, sp};
use numaff_machine::catalog as machines;
use numaff_workload::{catalog, run, DataChoice, Init, RunOptions, Workload};

#[test]
fn master_init_puts_first_touched_pages_on_the_master_node() {
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
fn compute_cycles_and_write_fraction_change_time_and_coherence() {
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
fn phases_move_the_working_set_between_threads() {
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
fn thread_count_start_times_and_queues_shape_the_run() {
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
fn huge_pages_are_used_when_asked_by_file_or_option() {
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
fn arrays_larger_than_their_room_are_refused() {
    let m = machines::load("kmaf-sim-4x2").unwrap();
    let huge = sp().scaled(1e9);
    let err = run(&m, &huge, &RunOptions::default())
        .unwrap_err()
        .to_string();
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
        .to_string()
        .contains("lower lines, threads or --scale"));
    // So is a thread count that would take more host memory than a run should.
    let err = sp().with_threads(70_000).check().unwrap_err().to_string();
    assert!(
        err.contains("70000 threads is more than the 65536"),
        "{err}"
    );
    assert_eq!(sp().with_threads(1 << 16).check(), Ok(()));
    let text = "name = \"big\"\ndescription = \"d\"\nfollows = \"a test\"\n[[program]]\n\
                kernel = \"ep\"\nthreads = 4\nlines = 1099511627776\niterations = 1\n\
                compute_cycles = 1\nwrite_fraction = 0.0\n";
    let err = Workload::from_toml(text, "big.toml")
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("big.toml: ep: 4 threads x 1099511627776 lines"),
        "{err}"
    );
}

/// A workload file whose steps the host could not hold is an error at load, not an allocation
/// of tens of GB (4e9 iterations of 2 SP threads would fill them within seconds).
#[test]
fn a_workload_too_long_to_hold_in_memory_is_refused_at_load() {
    let text = |iterations: u64, threads: u32| {
        format!(
            "name = \"w\"\ndescription = \"d\"\nfollows = \"f\"\n[[program]]\nkernel = \"sp\"\n\
             threads = {threads}\nlines = 16\niterations = {iterations}\ncompute_cycles = 0\n\
             write_fraction = 0.5\n"
        )
    };
    let e = numaff_workload::Workload::from_toml(&text(4_000_000_000, 2), "w.toml")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("w.toml: about "), "{e}");
    assert!(e.contains("sp x 4000000000 iterations"), "{e}");
    // Just under and just over the bound (12 steps per SP iteration, 8 more per thread).
    let max = numaff_workload::kernels::MAX_STEPS;
    let fits = (max / 2 - 8) / 12;
    assert!(numaff_workload::Workload::from_toml(&text(fits, 2), "w.toml").is_ok());
    assert!(numaff_workload::Workload::from_toml(&text(fits + 1, 2), "w.toml").is_err());
}
