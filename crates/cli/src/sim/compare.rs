//! `numaff sim` with several placements (`--threads` or `--data` given more than once): every
//! combination runs on the same workload and seeds, and one table compares them with the first.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use numaff_machine::Machine;
use numaff_sim::{simulated_coherence, Report};

use super::{run_json, summary, Placement, RunJson, Spread};

/// The JSON of a comparison: the placements in the order given (threads outer, data inner).
#[derive(Serialize)]
pub(super) struct CompareJson<'a> {
    machine: &'a str,
    workload: &'a str,
    coherence: &'a str,
    seeds: &'a [u64],
    placements: Vec<PlacementJson<'a>>,
}

/// One placement of a comparison: its figures over the seeds and every run.
#[derive(Serialize)]
struct PlacementJson<'a> {
    threads: &'a str,
    data: &'a str,
    /// The first placement's mean makespan over this one's: above 1 is faster (null when this
    /// one's makespan is 0).
    speedup: Option<f64>,
    /// Each headline figure's mean, minimum and maximum over the seeds.
    summary: BTreeMap<&'static str, Spread>,
    runs: Vec<RunJson<'a>>,
}

/// Mean makespan of a placement's runs, ns.
fn mean_makespan(reports: &[Report]) -> f64 {
    reports.iter().map(|r| r.makespan_ns as f64).sum::<f64>() / reports.len().max(1) as f64
}

/// The first placement's mean makespan over `reports`' (None when theirs is 0).
fn speedup(base: f64, reports: &[Report]) -> Option<f64> {
    let m = mean_makespan(reports);
    (m > 0.0).then(|| base / m)
}

pub(super) fn json<'a>(
    machine: &'a Machine,
    workload: &'a str,
    seeds: &'a [u64],
    placements: &[(&'a Placement, &'a [Report])],
) -> CompareJson<'a> {
    let base = placements.first().map_or(0.0, |(_, r)| mean_makespan(r));
    CompareJson {
        machine: &machine.name,
        workload,
        coherence: simulated_coherence(machine).name(),
        seeds,
        placements: placements
            .iter()
            .map(|&(p, reports)| PlacementJson {
                threads: &p.threads,
                data: &p.data,
                speedup: speedup(base, reports),
                summary: summary(reports)
                    .into_iter()
                    .map(|f| (f.key, f.spread))
                    .collect(),
                runs: seeds
                    .iter()
                    .zip(reports)
                    .map(|(&seed, r)| run_json(machine, workload, p, seed, r))
                    .collect(),
            })
            .collect(),
    }
}

pub(super) fn text(
    machine: &Machine,
    workload: &str,
    seeds: &[u64],
    placements: &[(&Placement, &[Report])],
) -> String {
    let mut s = String::new();
    let runs = if let [seed] = seeds {
        format!("seed {seed}")
    } else {
        format!(
            "seeds {}-{}, means of {} runs each",
            seeds[0],
            seeds[seeds.len() - 1],
            seeds.len()
        )
    };
    let _ = writeln!(
        s,
        "{workload} on {}: {} placements, coherence {}, {runs}",
        machine.name,
        placements.len(),
        simulated_coherence(machine)
    );
    // A column as wide as its header and its longest value.
    let width = |header: &str, of: &dyn Fn(&Placement) -> usize| {
        placements
            .iter()
            .map(|(p, _)| of(p))
            .fold(header.len(), usize::max)
    };
    let tw = width("threads", &|p| p.threads.len());
    let dw = width("data", &|p| p.data.len());
    let range = seeds.len() > 1;
    let _ = writeln!(
        s,
        "  {:<tw$}  {:<dw$}  {:>13}{}  {:>6}  {:>6}  {:>11}  {:>9}  {:>10}  {:>9}",
        "threads",
        "data",
        "makespan (ms)",
        if range { "     range (ms)" } else { "" },
        "speed",
        "local",
        "LLC misses",
        "IMC (ms)",
        "links (MB)",
        "c2c"
    );
    let base = placements.first().map_or(0.0, |(_, r)| mean_makespan(r));
    for (p, reports) in placements {
        let mean = |get: &dyn Fn(&Report) -> f64| {
            reports.iter().map(get).sum::<f64>() / reports.len().max(1) as f64
        };
        let local: u64 = reports.iter().map(|r| r.local_accesses).sum();
        let memory: u64 = reports
            .iter()
            .map(|r| r.local_accesses + r.remote_accesses)
            .sum();
        let local = if memory > 0 {
            format!("{:.1} %", 100.0 * local as f64 / memory as f64)
        } else {
            "-".to_string()
        };
        let speed = speedup(base, reports).map_or("-".to_string(), |x| format!("{x:.2}x"));
        let spread = if range {
            let m = Spread::of(
                &reports
                    .iter()
                    .map(|r| r.makespan_ns as f64 / 1e6)
                    .collect::<Vec<_>>(),
            );
            format!("  {:>13}", format!("{:.3}-{:.3}", m.min, m.max))
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "  {:<tw$}  {:<dw$}  {:>13.3}{spread}  {speed:>6}  {local:>6}  {:>11.0}  {:>9.3}  {:>10.1}  {:>9.0}",
            p.threads,
            p.data,
            mean_makespan(reports) / 1e6,
            mean(&|r| r.llc_misses as f64),
            mean(&|r| r.imc_queue_ns) / 1e6,
            mean(&|r| r.interconnect_bytes as f64) / 1e6,
            mean(&|r| r.c2c_transfers as f64),
        );
    }
    s.push_str(
        "  speed: the first placement's makespan over each one's (above 1.00x: faster); local: of\n  \
         the memory accesses; IMC: controller queueing time, summed; links: interconnect bytes\n",
    );
    s
}
