//! NUMA effects of the suite on the simulator: kMAF Fig. 1's ordering and compounding of thread
//! and data placement, memory-controller congestion, and queues that keep enough history.

#![allow(clippy::unwrap_used)]

use numaff_machine::catalog as machines;
use numaff_workload::{calibration, catalog, run, Algorithm, DataChoice, RunOptions, ThreadPolicy};

/// kMAF Fig. 1's four makespans (`calibration::fig1`).
fn fig1(scale: f64, seed: u64) -> [f64; 4] {
    let m = machines::load("kmaf-sim-4x2").unwrap();
    let reports = calibration::fig1(&m, scale, seed).unwrap();
    // Every controller and link served its lines as the time-ordered FIFO: none came before the
    // history its queue remembers.
    for r in &reports {
        assert_eq!(r.queue_past_history, 0);
    }
    reports.map(|r| r.makespan_ns as f64)
}

/// Fig. 1's order, T_L D_L < T_R D_L < T_L D_R < T_R D_R, and the compounding: T_L D_L's gain
/// over T_R D_R exceeds the sum of the other two. With T_R's pairs two ring hops apart instead
/// (`0,4,1,5,2,6,3,7`) the last step does not hold: D_R can then put a page two processors share
/// only one hop from both, and T_L D_R is slower (crates/workload/README.md, "kMAF Fig. 1";
/// `cargo run -p numaff-workload --example fig1`).
fn fig1_holds([ll, rl, lr, rr]: [f64; 4]) -> (bool, bool) {
    (
        ll < rl && rl < lr && lr < rr,
        rr - ll > (rr - rl) + (rr - lr),
    )
}

#[test]
fn nas_sp_follows_kmaf_fig1_order_and_compounding() {
    for scale in [0.5, 1.0] {
        let r = fig1(scale, 0);
        check_fig1(scale, r);
    }
}

fn check_fig1(scale: f64, r: [f64; 4]) {
    let [ll, rl, lr, rr] = r;
    println!("scale {scale}:");
    println!("nas-sp: T_L D_L {ll}, T_R D_L {rl}, T_L D_R {lr}, T_R D_R {rr} ns");
    println!(
        "gains over T_R D_R: T_L D_L {:.1} %, T_R D_L {:.1} %, T_L D_R {:.1} %",
        100.0 * (rr / ll - 1.0),
        100.0 * (rr / rl - 1.0),
        100.0 * (rr / lr - 1.0)
    );
    let (order, compounding) = fig1_holds(r);
    println!(
        "T_L D_R vs T_R D_R: {:+.2} % (the paper: T_L D_R 15 % faster)",
        100.0 * (lr / rr - 1.0)
    );
    assert!(order, "kMAF Fig. 1 ordering: {r:?}");
    assert!(compounding, "compounding (000 §3.2): {r:?}");
}

/// The queues remember enough busy intervals for the late lines of heavily queued runs (a bug
/// when they kept 64: lines came after the history they remembered): nas-sp scattered with its
/// pages on the nodes that use them least (`simcheck`'s third run), and nas-is compact on
/// minas-opteron under MOESI.
#[test]
fn queues_remember_the_busy_intervals_late_lines_need() {
    for (machine, workload, scale, threads, data) in [
        (
            "kmaf-sim-4x2",
            "nas-sp",
            0.5,
            "scatter",
            DataChoice::OracleRemote,
        ),
        (
            "minas-opteron",
            "nas-is",
            1.0,
            "compact",
            DataChoice::FirstTouch,
        ),
    ] {
        let m = machines::load(machine).unwrap();
        let w = catalog::load(workload).unwrap().scaled(scale);
        let opts = RunOptions {
            threads: threads.parse().unwrap(),
            data,
            seed: 0,
        };
        let r = run(&m, &w, &opts).unwrap();
        assert!(r.remote_accesses > 0, "{machine} {workload}");
        assert_eq!(r.queue_past_history, 0, "{machine} {workload}");
    }
}

#[test]
fn bandwidth_bound_workload_congests_one_node_and_interleave_relieves_it() {
    let m = machines::load("kmaf-sim-4x2").unwrap();
    // nas-sp without compute: memory-bound sweeps over 256 KiB per thread.
    let base = catalog::load("nas-sp").unwrap().scaled(0.25);
    let mut base = base;
    base.programs[0].compute_cycles = 0;
    let run_n = |n: u32, data: DataChoice| {
        let w = base.clone().with_threads(n);
        let opts = RunOptions {
            threads: ThreadPolicy::Map(Algorithm::Compact),
            data,
            seed: 0,
        };
        run(&m, &w, &opts).unwrap()
    };
    let per_thread: Vec<f64> = [1, 2, 4, 8]
        .iter()
        .map(|&n| {
            let r = run_n(n, DataChoice::Bind(0));
            r.threads.iter().map(|t| t.time_ns as f64).sum::<f64>() / f64::from(n)
        })
        .collect();
    println!("mean time per thread, all data on node 0, 1/2/4/8 threads: {per_thread:?}");
    for w in per_thread.windows(2) {
        assert!(w[1] > w[0] * 1.1, "{per_thread:?}");
    }
    let bound = run_n(8, DataChoice::Bind(0));
    let inter = run_n(8, DataChoice::Interleave);
    println!(
        "8 threads: bind:0 {} ns (IMC queue {:.0} ns), interleave {} ns (IMC queue {:.0} ns)",
        bound.makespan_ns, bound.imc_queue_ns, inter.makespan_ns, inter.imc_queue_ns
    );
    assert!((inter.makespan_ns as f64) * 1.3 < bound.makespan_ns as f64);
}
