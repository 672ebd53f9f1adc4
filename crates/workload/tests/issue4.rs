//! Issue 4 (part B): the workload suite on the simulator.

#![allow(clippy::unwrap_used)]

use numaff_machine::catalog as machines;
use numaff_workload::{catalog, run, DataChoice, RunOptions, ThreadPolicy};

#[test]
fn issue4_every_named_workload_runs_on_a_catalog_machine() {
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
    }
    let _ = (DataChoice::FirstTouch, ThreadPolicy::Os);
}
