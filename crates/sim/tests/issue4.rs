//! Issue 4's validation of the simulator: the papers' MLC matrices, determinism, congestion.
//! Each test names the issue so `cargo test issue4` runs them all.

#![allow(clippy::unwrap_used)]

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
