//! Prints the simulator's full reports (Debug, so floats round-trip exactly) for a set of catalog
//! workloads, machines and options: `cargo run --release -p numaff-workload --example simcheck`.
//! Diff the output of two builds to check that a speed change left the model unchanged.
//! `simcheck SCALE directory` keeps every line in the directory (`Simulator::private_lines` off):
//! its output must equal the default's.

use numaff_machine::catalog as machines;
use numaff_sim::{HwSampling, InducedFaults, Simulator};
use numaff_workload::{build, catalog, Algorithm, DataChoice, RunOptions, ThreadPolicy};

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let scale: f64 = match args.get(1) {
        Some(s) => s.parse().map_err(|e| format!("scale {s:?}: {e}"))?,
        None => 0.05,
    };
    let directory_only = match args.get(2).map(String::as_str) {
        None => false,
        Some("directory") => true,
        Some(other) => {
            return Err(format!(
                "unknown mode {other:?}: give 'directory' or nothing"
            ))
        }
    };
    let runs: [(&str, &str, ThreadPolicy, DataChoice, u8); 10] = [
        (
            "laso-hpl",
            "nas-cg",
            ThreadPolicy::Os,
            DataChoice::FirstTouch,
            0,
        ),
        (
            "laso-hpl",
            "nas-sp",
            ThreadPolicy::Map(Algorithm::Compact),
            DataChoice::Interleave,
            1,
        ),
        (
            "kmaf-sim-4x2",
            "nas-sp",
            ThreadPolicy::Map(Algorithm::Scatter),
            DataChoice::OracleRemote,
            0,
        ),
        (
            "kmaf-sim-4x2",
            "nas-ft",
            ThreadPolicy::Os,
            DataChoice::FirstTouch,
            2,
        ),
        (
            "laso-lpl",
            "parsec-streamcluster",
            ThreadPolicy::Map(Algorithm::Random),
            DataChoice::FirstTouch,
            1,
        ),
        (
            "kmaf-opteron",
            "parsec-canneal",
            ThreadPolicy::Os,
            DataChoice::Interleave,
            2,
        ),
        (
            "agung-xeon2",
            "parsec-dedup",
            ThreadPolicy::Os,
            DataChoice::FirstTouch,
            0,
        ),
        (
            "minas-altix",
            "nas-mg",
            ThreadPolicy::Map(Algorithm::RoundRobin),
            DataChoice::FirstTouch,
            1,
        ),
        (
            "agung-knl4",
            "mix-queue",
            ThreadPolicy::Os,
            DataChoice::FirstTouch,
            0,
        ),
        (
            "laso-hpl",
            "mix-arrivals",
            ThreadPolicy::Os,
            DataChoice::Bind(1),
            2,
        ),
    ];
    for (mname, wname, threads, data, sampler) in runs {
        let m = machines::load(mname).map_err(|e| e.to_string())?;
        let w = catalog::load(wname)
            .map_err(|e| e.to_string())?
            .scaled(scale);
        let opts = RunOptions {
            threads,
            data,
            seed: 3,
        };
        let (procs, mut cfg) = build(&m, &w, &opts).map_err(|e| e.to_string())?;
        match sampler {
            1 => {
                cfg.hw_sampling = Some(HwSampling {
                    period: 997,
                    jitter: 0.2,
                    min_latency_ns: 30.0,
                    cost_ns: 200.0,
                })
            }
            2 => {
                cfg.induced_faults = Some(InducedFaults {
                    interval_ns: 100_000,
                    fraction: 0.05,
                    cost_ns: 2_000.0,
                    scan: sampler == 2 && mname == "laso-hpl",
                })
            }
            _ => {}
        }
        let mut sim = Simulator::new(&m, cfg);
        if directory_only {
            sim = sim.without_private_lines();
        }
        for p in procs {
            sim.spawn(p).map_err(|e| e.to_string())?;
        }
        let r = sim.run();
        println!("== {mname} {wname} {opts:?} sampler {sampler}\n{r:?}");
    }
    Ok(())
}
