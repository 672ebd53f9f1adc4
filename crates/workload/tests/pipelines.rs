//! The PARSEC-like pipelines (dedup, ferret) hand items from stage to stage through
//! queues (`Step::Post` / `Step::Wait`), not barriers per round.

#![allow(clippy::unwrap_used)]

use numaff_machine::catalog as machines;
use numaff_workload::{catalog, kernels, run, Algorithm, RunOptions, Step, ThreadPolicy};

#[test]
fn pipeline_stages_wait_for_items_not_for_barriers() {
    let w = catalog::load("parsec-dedup").unwrap();
    let p = &w.programs[0];
    let n = p.threads;
    for t in 0..n {
        let steps = kernels::thread_steps(p, n, t);
        let barriers = steps.iter().filter(|s| **s == Step::Barrier).count();
        let waits = steps.iter().filter(|s| matches!(s, Step::Wait(_))).count();
        let posts = steps.iter().filter(|s| matches!(s, Step::Post(_))).count();
        // One barrier after initialisation, one at the end.
        assert_eq!(barriers, 2, "thread {t}");
        let stage = t * 3 / n;
        assert_eq!(waits > 0, stage > 0, "thread {t}: {waits} waits");
        assert_eq!(posts > 0, stage < 2, "thread {t}: {posts} posts");
    }
}

#[test]
fn pipelines_run_for_every_thread_count_and_hand_items_between_cores() {
    let m = machines::load("kmaf-sim-4x2").unwrap();
    for name in ["parsec-dedup", "parsec-ferret"] {
        for n in 1..=9 {
            let w = catalog::load(name).unwrap().with_threads(n).scaled(0.125);
            let opts = RunOptions {
                threads: ThreadPolicy::Map(Algorithm::Compact),
                ..RunOptions::default()
            };
            let r = run(&m, &w, &opts).unwrap_or_else(|e| panic!("{name} {n}: {e}"));
            if n >= 2 {
                // Items written by one stage are read by the next stage on another core.
                assert!(r.c2c_transfers > 0, "{name} {n}: {r:?}");
            }
        }
    }
}
