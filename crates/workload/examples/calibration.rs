//! The simulator against the papers' published results (`numaff_workload::calibration`): kMAF
//! §6.1's suite gains on its three machines and Fig. 1, published next to simulated.
//! `cargo run --release -p numaff-workload --example calibration [ci]`: `ci` runs the suites at
//! the size `tests/calibration.rs` runs them (`SuiteSize::CI`) instead of the full one.

use std::io::Write as _;

use numaff_machine::catalog as machines;
use numaff_workload::calibration::{
    fig1, fig1_gains, suite, suite_gains, SuiteSize, KMAF_FIG1_PUBLISHED, KMAF_SUITE,
    KMAF_SUITE_PUBLISHED,
};

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let size = match args.first().map(String::as_str) {
        None => SuiteSize::FULL,
        Some("ci") => SuiteSize::CI,
        Some(other) => return Err(format!("unknown argument {other:?}: give `ci` or nothing")),
    };
    let jobs = std::thread::available_parallelism().map_or(1, usize::from);
    println!("| figure | paper | published | simulated |");
    println!("|---|---|---|---|");
    for p in KMAF_SUITE_PUBLISHED {
        let m = machines::load(p.machine).map_err(|e| e.to_string())?;
        let progress = |done: usize, total: usize| {
            eprint!("\r{}: {done}/{total} simulations", p.machine);
            let _ = std::io::stderr().flush();
        };
        let runs =
            suite(&m, p.threads, &KMAF_SUITE, size, jobs, &progress).map_err(|e| e.to_string())?;
        eprintln!();
        for r in &runs {
            eprintln!("  {r}");
        }
        let (compact, oracle) = suite_gains(&runs);
        println!(
            "| {}, {} threads: Compact over OS, geometric mean | {} | {:+.1} % | {:+.1} % |",
            p.machine, p.threads, p.source, p.compact, compact
        );
        println!(
            "| {}, {} threads: Oracle over OS, geometric mean | {} | {:+.1} % | {:+.1} % |",
            p.machine, p.threads, p.source, p.oracle, oracle
        );
    }
    let m = machines::load("kmaf-sim-4x2").map_err(|e| e.to_string())?;
    let gains = fig1_gains(&fig1(&m, 1.0, 0).map_err(|e| e.to_string())?);
    for ((name, published), simulated) in ["T_R D_L", "T_L D_R", "T_L D_L"]
        .iter()
        .zip(KMAF_FIG1_PUBLISHED)
        .zip(gains)
    {
        println!(
            "| kmaf-sim-4x2, nas-sp: {name} over T_R D_R | 000 §3.2, Fig. 1 | {published:+.1} % | {simulated:+.1} % |"
        );
    }
    Ok(())
}
