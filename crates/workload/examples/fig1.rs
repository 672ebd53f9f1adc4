//! kMAF Fig. 1 (000 §3.2) with nas-sp on kmaf-sim-4x2, with the figures behind the makespans:
//! `cargo run -p numaff-workload --example fig1 [SCALE] [LINK_MBPS]` (LINK_MBPS overrides the
//! ring links' bandwidth, which kMAF Table 1 does not give, to see how the order depends on it).
//! Two remote thread mappings: T_R, scatter (each neighbour pair on neighbouring processors of the
//! ring, the test's), and T_R2 (6 of 8 pairs on opposite processors, two hops apart).

use numaff_machine::catalog as machines;
use numaff_workload::{catalog, run, DataChoice, RunOptions};

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let num = |i: usize| -> Result<Option<f64>, String> {
        args.get(i)
            .map(|s| {
                s.parse::<f64>()
                    .map_err(|e| format!("argument {i} ({s:?}): {e}"))
            })
            .transpose()
    };
    let scale = num(1)?.unwrap_or(1.0);
    let mut m = machines::load("kmaf-sim-4x2").map_err(|e| e.to_string())?;
    if let (Some(bw), Some(ic)) = (num(2)?, m.interconnect.as_mut()) {
        ic.link_bandwidth_mbps = Some(bw);
    }
    let w = catalog::load("nas-sp")
        .map_err(|e| e.to_string())?
        .scaled(scale);
    for (tn, t) in [
        ("T_L", "0,1,2,3,4,5,6,7"),
        ("T_R", "0,2,4,6,1,3,5,7"),
        ("T_R2", "0,4,1,5,2,6,3,7"),
    ] {
        for (dn, d) in [
            ("D_L", DataChoice::OracleLocal),
            ("D_R", DataChoice::OracleRemote),
        ] {
            let opts = RunOptions {
                threads: t
                    .parse()
                    .map_err(|e: numaff_workload::WorkloadError| e.to_string())?,
                data: d,
                seed: 0,
            };
            let r = run(&m, &w, &opts).map_err(|e| e.to_string())?;
            println!(
                "{tn} {dn}: makespan {:.3} ms, hits {:?}, llc misses {}, remote {}, imc queue {:.1} ms, link queue {:.1} ms, link {:.1} MB, c2c {} ({} remote)",
                r.makespan_ns as f64 / 1e6,
                r.cache_hits,
                r.llc_misses,
                r.remote_accesses,
                r.imc_queue_ns / 1e6,
                r.link_queue_ns / 1e6,
                r.interconnect_bytes as f64 / 1e6,
                r.c2c_transfers,
                r.c2c_remote
            );
        }
    }
    Ok(())
}
