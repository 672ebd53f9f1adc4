//! How the suite's figures depend on the scheduler's quantum (crates/sim/README.md): every
//! catalog workload on MACHINE with each quantum of the list.
//!
//! `cargo run --release -p numaff-workload --example quantum -- MACHINE Q1,Q2,... [compact]`
//! prints, per workload and quantum, the makespan's change and the IMC and link queue totals, the
//! cache-to-cache transfers and the host time as ratios to the first quantum's. `ABS=1`: the
//! makespan's change and the totals in ns; `SEED=S`: the run's seed, which drives the os
//! placement's moves; `ONLY=NAME`: one workload; `SCALE=F`: its size, as `numaff sim --scale`.

use numaff_sim::Simulator;
use numaff_workload::{build, catalog, Algorithm, RunOptions, ThreadPolicy};

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: quantum MACHINE Q1,Q2,... [compact]";
    let machine =
        numaff_machine::catalog::load(args.get(1).ok_or(usage)?).map_err(|e| e.to_string())?;
    let quanta = args
        .get(2)
        .ok_or(usage)?
        .split(',')
        .map(|q| q.parse::<f64>().map_err(|e| format!("quantum {q}: {e}")))
        .collect::<Result<Vec<f64>, String>>()?;
    let threads = match args.get(3).map(String::as_str) {
        Some("compact") => ThreadPolicy::Map(Algorithm::Compact),
        _ => ThreadPolicy::Os,
    };
    let absolute = std::env::var_os("ABS").is_some();
    let seed = match std::env::var("SEED") {
        Ok(s) => s.parse::<u64>().map_err(|e| format!("SEED {s}: {e}"))?,
        Err(_) => 0,
    };
    let only = std::env::var("ONLY").ok();
    let scale = match std::env::var("SCALE") {
        Ok(s) => s.parse::<f64>().map_err(|e| format!("SCALE {s}: {e}"))?,
        Err(_) => 1.0,
    };
    for name in catalog::names() {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        let w = catalog::load(name)
            .map_err(|e| e.to_string())?
            .scaled(scale);
        let mut first: Option<(f64, f64, f64, f64, f64)> = None;
        let mut line = format!("{name:22}");
        for &q in &quanta {
            let opts = RunOptions {
                threads: threads.clone(),
                seed,
                ..RunOptions::default()
            };
            let (procs, mut cfg) = build(&machine, &w, &opts).map_err(|e| e.to_string())?;
            cfg.quantum_ns = q;
            let mut sim = Simulator::new(&machine, cfg);
            for p in procs {
                sim.spawn(p).map_err(|e| e.to_string())?;
            }
            let t0 = std::time::Instant::now();
            let r = sim.run();
            let cpu = t0.elapsed().as_secs_f64();
            let v = (
                r.makespan_ns as f64,
                r.imc_queue_ns,
                r.link_queue_ns,
                r.c2c_transfers as f64,
                cpu,
            );
            let b = *first.get_or_insert(v);
            let mk = (v.0 / b.0 - 1.0) * 100.0;
            if absolute {
                line += &format!(
                    " | q{q}: mk {mk:+.1}% imc {:.0} link {:.0} c2c {}",
                    v.1, v.2, v.3
                );
            } else {
                line += &format!(
                    " | q{q}: mk {mk:+.1}% imc {:.3} link {:.3} c2c {:.3} time {:.2}",
                    v.1 / b.1.max(1.0),
                    v.2 / b.2.max(1.0),
                    v.3 / b.3.max(1.0),
                    v.4 / b.4
                );
            }
        }
        println!("{line}");
    }
    Ok(())
}
