//! The simulator against the papers' measurements: the MLC matrices of laso-hpl and laso-lpl
//! (Tables 2 and 3) and the ordering of kMAF Fig. 1's four placements.

#![allow(clippy::unwrap_used)]

use numaff_machine::catalog;
use numaff_sim::{measure, Access, DataPolicy, Op, ProcessSpec, SimConfig, Simulator, ThreadSpec};

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
fn hpl_mlc_matrices_match_table_2() {
    check_matrices("laso-hpl");
}

#[test]
fn lpl_mlc_matrices_match_table_3() {
    check_matrices("laso-lpl");
}

/// kMAF Fig. 1's experiment (000 §3.2) with a stand-in for SP: 8 threads on kmaf-sim-4x2, each
/// sweeping (read, then write) its own 1 MiB block 6 times and, between barriers, reading the last
/// 2,048 lines its partner (thread t ^ 1) just wrote: a domain decomposition with neighbour
/// exchange. T_L puts partners on one node, T_R puts them two hops apart; D_L puts each block on its
/// thread's node, D_R two hops away.
#[test]
fn kmaf_fig1_ordering_from_a_halo_exchange_stand_in() {
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
    // The compounding (T_L D_L's gain above the sum of the other two) is not asserted here: this
    // stand-in's gains are nearly additive in time. The suite's SP (nas-sp) has it, and
    // crates/workload's tests assert it there.
}
