//! The shipped workloads: every paper workload is in the catalog with its source, and every
//! catalog workload runs, issuing the accesses it announces in the batches the simulator takes.

#![allow(clippy::unwrap_used)]

use numaff_machine::catalog as machines;
use numaff_workload::calibration::KMAF_SUITE;
use numaff_workload::{catalog, run, total_accesses, RunOptions};

#[test]
fn every_paper_workload_is_in_the_catalog_and_says_what_it_follows() {
    let readme = include_str!("../README.md");
    for name in KMAF_SUITE {
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

#[test]
fn every_catalog_workload_runs_and_issues_the_accesses_it_announces() {
    let m = machines::load("kmaf-sim-4x2").unwrap();
    for name in catalog::names() {
        let w = catalog::load(name).unwrap();
        let t = std::time::Instant::now();
        let r = run(&m, &w, &RunOptions::default()).unwrap();
        println!(
            "{name}: makespan {} ns, accesses {}, local {} remote {}, llc misses {}, imc queue {:.0} ns, c2c {}, migrations {} ({:.2} s)",
            r.makespan_ns, r.accesses, r.local_accesses, r.remote_accesses, r.llc_misses, r.imc_queue_ns, r.c2c_transfers, r.migrations,
            t.elapsed().as_secs_f64()
        );
        assert!(r.makespan_ns > 0 && r.accesses > 0, "{name}");
        assert_eq!(r.threads.len(), w.threads(), "{name}");
        // What `numaff sim`'s progress bar counts towards.
        assert_eq!(total_accesses(&w), r.accesses, "{name}");
    }
}

/// The simulator takes the suite's ops in batches (`Batched`, `Ops::fill_ops`, one loop per run
/// of a step's accesses): for every thread of every catalog workload, batches of 32 (the
/// simulator's) and of ragged sizes give exactly the ops of the iterator.
#[test]
fn batched_ops_of_every_catalog_workload_are_the_iterators_ops() {
    use numaff_sim::{Op, OpSource};
    use numaff_workload::{thread_ops, Batched};
    for name in catalog::names() {
        let w = catalog::load(name).unwrap().scaled(0.25);
        for p in &w.programs {
            for (t, ops) in thread_ops(p).into_iter().enumerate() {
                let expected: Vec<Op> = ops.clone().collect();
                for sizes in [&[32][..], &[7, 1, 2, 32]] {
                    let mut src = Batched(ops.clone());
                    let mut got = Vec::with_capacity(expected.len());
                    let mut buf = [Op::Compute(0); 32];
                    for &k in sizes.iter().cycle() {
                        let n = src.fill(&mut buf[..k]);
                        if n == 0 {
                            break;
                        }
                        got.extend_from_slice(&buf[..n]);
                    }
                    assert!(got == expected, "{name} thread {t}, batches {sizes:?}");
                }
            }
        }
    }
}
