//! `numaff sim`: runs a workload on a simulated machine with a static thread and data placement and
//! prints the figures the papers measure; `--measure` prints the simulated machine's own MLC
//! matrices; `--list-workloads` lists the shipped workloads.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

use numaff_machine::spec;
use numaff_sim::{measure, Report, SimConfig};
use numaff_workload::{catalog, DataChoice, RunOptions, ThreadPolicy};

#[derive(Args)]
pub struct SimArgs {
    /// The simulated machine: a catalog name (`numaff topo --list`), a machine file, an hwloc XML
    /// export or a synthetic description.
    #[arg(long, value_name = "M", required_unless_present = "list_workloads")]
    machine: Option<String>,
    /// The workload: a shipped name (`--list-workloads`) or a workload file (TOML).
    #[arg(long, value_name = "W", required_unless_present_any = ["measure", "list_workloads", "trace"], conflicts_with_all = ["measure", "trace"])]
    workload: Option<String>,
    /// Replay a recorded trace (Parquet, or CSV by extension, as numaff profile writes) instead
    /// of a workload: each recorded thread replays its samples, gaps kept as compute. Use
    /// `--threads recorded` to put the threads where they ran.
    #[arg(long, value_name = "T", conflicts_with_all = ["measure", "nthreads", "scale"])]
    trace: Option<std::path::PathBuf>,
    /// Thread placement: os (Linux-like: spread, occasionally moved), compact, scatter,
    /// round-robin, random, recorded (a trace's threads where they ran), or a cpu list such as
    /// 0,2,4,6 (thread i on the i-th cpu).
    #[arg(long, value_name = "POLICY", default_value = "os")]
    threads: String,
    /// Data placement: first-touch, interleave, bind:N, oracle-local (each page on the node that
    /// accesses it most) or oracle-remote (on the node that accesses it least); the oracles come
    /// from a profiling replay of the workload's access streams.
    #[arg(long, value_name = "POLICY", default_value = "first-touch")]
    data: String,
    /// Threads per program (overrides the workload's; at least 1).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    nthreads: Option<u32>,
    /// Scale every array of the workload by this factor.
    #[arg(long, value_name = "F")]
    scale: Option<f64>,
    /// Back every program's memory with 2 MiB pages instead of the machine's base pages (as
    /// `huge_pages = true` in a workload file's `[[program]]`).
    #[arg(long)]
    huge_pages: bool,
    /// Seed (random placement, os scheduler moves, samplers).
    #[arg(long, value_name = "S", default_value_t = 0)]
    seed: u64,
    /// Print the simulated machine's latency and bandwidth matrices (pointer chase and streaming
    /// read from every cpu node to every memory node, as Intel MLC).
    #[arg(long)]
    measure: bool,
    /// List the shipped workloads.
    #[arg(long, conflicts_with_all = ["machine", "workload", "measure"])]
    list_workloads: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// The JSON of a run: the headline figures first, then the full report.
#[derive(Serialize)]
struct RunJson<'a> {
    machine: &'a str,
    workload: &'a str,
    threads: &'a str,
    data: &'a str,
    seed: u64,
    makespan_ns: u64,
    accesses: u64,
    local_accesses: u64,
    remote_accesses: u64,
    llc_misses: u64,
    imc_queue_ns: f64,
    link_queue_ns: f64,
    interconnect_bytes: u64,
    c2c_transfers: u64,
    migrations: u64,
    page_migrations: u64,
    energy_j: f64,
    report: &'a Report,
}

#[derive(Serialize)]
struct ListJson {
    name: String,
    description: String,
    follows: String,
    programs: usize,
    threads: usize,
}

pub fn run(args: &SimArgs) -> Result<()> {
    if args.list_workloads {
        return list(args.json);
    }
    let mspec = args
        .machine
        .as_deref()
        .ok_or_else(|| anyhow!("--machine is required"))?;
    let machine = spec::resolve(mspec).with_context(|| format!("cannot load machine {mspec:?}"))?;
    if args.measure {
        return print_measure(&machine, args);
    }
    let mut workload = match &args.trace {
        Some(path) => {
            numaff_workload::trace::load(path, numaff_workload::trace::cycles_per_ns(&machine))
                .map_err(anyhow::Error::msg)?
        }
        None => {
            let wspec = args
                .workload
                .as_deref()
                .ok_or_else(|| anyhow!("--workload is required (or --trace, or --measure)"))?;
            catalog::resolve(wspec).map_err(anyhow::Error::msg)?
        }
    };
    if let Some(n) = args.nthreads {
        workload = workload.with_threads(n);
    }
    if args.huge_pages {
        workload = workload.with_huge_pages();
    }
    if let Some(f) = args.scale {
        if f.is_nan() || f <= 0.0 {
            bail!("--scale must be positive, not {f}");
        }
        workload = workload.scaled(f);
    }
    let threads: ThreadPolicy = args.threads.parse().map_err(anyhow::Error::msg)?;
    let data: DataChoice = args.data.parse().map_err(anyhow::Error::msg)?;
    let opts = RunOptions {
        threads,
        data,
        seed: args.seed,
    };
    // A bar that appears only when the run takes more than a second, towards the accesses the
    // run will issue (known from the workload's steps), with the time left at the rate so far.
    let total = numaff_workload::total_accesses(&workload);
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
    bar.set_style(
        ProgressStyle::with_template("simulating {msg} {bar:20} {percent:>3}%, {eta} left")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let started = Instant::now();
    let mut shown = false;
    let mut started_sim = false;
    let report = numaff_workload::run_with(&machine, &workload, &opts, |now, accesses| {
        // The rate behind the time left counts from the first step simulated, not from before
        // the workload was built (an oracle's profiling pass can take seconds).
        if !started_sim {
            bar.reset_eta();
            started_sim = true;
        }
        // Kept up to date while hidden, so that its first frame is complete.
        bar.set_position(accesses);
        bar.set_message(format!(
            "{}: {:.1} ms, {:.1}/{:.1} M accesses",
            workload.name,
            now as f64 / 1e6,
            accesses as f64 / 1e6,
            total as f64 / 1e6
        ));
        if !shown && started.elapsed() > Duration::from_secs(1) {
            bar.set_draw_target(ProgressDrawTarget::stderr());
            shown = true;
        }
    })
    .map_err(anyhow::Error::msg)
    .with_context(|| format!("cannot simulate {} on {}", workload.name, machine.name))?;
    bar.finish_and_clear();
    if args.json {
        let j = RunJson {
            machine: &machine.name,
            workload: &workload.name,
            threads: &args.threads,
            data: &args.data,
            seed: args.seed,
            makespan_ns: report.makespan_ns,
            accesses: report.accesses,
            local_accesses: report.local_accesses,
            remote_accesses: report.remote_accesses,
            llc_misses: report.llc_misses,
            imc_queue_ns: report.imc_queue_ns,
            link_queue_ns: report.link_queue_ns,
            interconnect_bytes: report.interconnect_bytes,
            c2c_transfers: report.c2c_transfers,
            migrations: report.migrations,
            page_migrations: report.page_migrations,
            energy_j: report.energy_j,
            report: &report,
        };
        println!("{}", serde_json::to_string_pretty(&j)?);
    } else {
        print!("{}", text(&machine.name, &workload.name, args, &report));
    }
    Ok(())
}

fn text(machine: &str, workload: &str, args: &SimArgs, r: &Report) -> String {
    let mut s = String::new();
    let pct = |a: u64, b: u64| {
        if b == 0 {
            0.0
        } else {
            100.0 * a as f64 / b as f64
        }
    };
    let mem = r.local_accesses + r.remote_accesses;
    let _ = writeln!(
        s,
        "{workload} on {machine}: threads {}, data {}, seed {}",
        args.threads, args.data, args.seed
    );
    let _ = writeln!(
        s,
        "  makespan            {:>14.3} ms",
        r.makespan_ns as f64 / 1e6
    );
    let _ = writeln!(s, "  accesses            {:>14}", r.accesses);
    let _ = writeln!(
        s,
        "  LLC misses          {:>14}  ({:.1} % of accesses)",
        r.llc_misses,
        pct(r.llc_misses, r.accesses)
    );
    let _ = writeln!(
        s,
        "  memory accesses     {:>14}  local {} / remote {} ({:.1} % remote)",
        mem,
        r.local_accesses,
        r.remote_accesses,
        pct(r.remote_accesses, mem)
    );
    let _ = writeln!(
        s,
        "  IMC queue           {:>14.3} ms  (summed over requests)",
        r.imc_queue_ns / 1e6
    );
    let _ = writeln!(
        s,
        "  link queue          {:>14.3} ms  (summed over requests)",
        r.link_queue_ns / 1e6
    );
    let _ = writeln!(
        s,
        "  interconnect        {:>14.1} MB  (per link crossed)",
        r.interconnect_bytes as f64 / 1e6
    );
    let _ = writeln!(
        s,
        "  c2c transfers       {:>14}  ({} between nodes)",
        r.c2c_transfers, r.c2c_remote
    );
    let _ = writeln!(
        s,
        "  thread migrations   {:>14}  ({:.3} ms)",
        r.migrations,
        r.migration_cost_ns / 1e6
    );
    let _ = writeln!(s, "  page faults         {:>14}", r.page_faults);
    let _ = writeln!(s, "  energy              {:>14.6} J", r.energy_j);
    let _ = writeln!(s, "  per thread (cpu at the end, time, local/remote):");
    for t in &r.threads {
        let _ = writeln!(
            s,
            "    {:<16} cpu {:>3}  {:>10.3} ms  {} / {}",
            t.name,
            t.cpu,
            t.time_ns as f64 / 1e6,
            t.local_accesses,
            t.remote_accesses
        );
    }
    s
}

fn list(json: bool) -> Result<()> {
    let mut rows = Vec::new();
    for e in catalog::entries() {
        let w = e.load().map_err(anyhow::Error::msg)?;
        rows.push(ListJson {
            name: w.name.clone(),
            description: w.description.clone(),
            programs: w.programs.len(),
            threads: w.threads(),
            follows: w.follows,
        });
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    let width = rows.iter().map(|r| r.name.len()).max().unwrap_or(0);
    for r in &rows {
        println!(
            "{:<width$}  {:>2} program(s), {:>2} threads  {}",
            r.name, r.programs, r.threads, r.description
        );
    }
    println!(
        "\nEach file's `follows` field names the paper description it follows (--json shows it)."
    );
    Ok(())
}

#[derive(Serialize)]
struct MeasureJson<'a> {
    machine: &'a str,
    cpu_nodes: &'a [u32],
    memory_nodes: &'a [u32],
    latency_ns: &'a [Vec<f64>],
    bandwidth_mbs: &'a [Vec<f64>],
}

fn print_measure(machine: &numaff_machine::Machine, args: &SimArgs) -> Result<()> {
    let cfg = SimConfig {
        seed: args.seed,
        ..SimConfig::default()
    };
    let m = measure(machine, &cfg);
    if args.json {
        let j = MeasureJson {
            machine: &machine.name,
            cpu_nodes: &m.cpu_nodes,
            memory_nodes: &m.memory_nodes,
            latency_ns: &m.latency_ns,
            bandwidth_mbs: &m.bandwidth_mbs,
        };
        println!("{}", serde_json::to_string_pretty(&j)?);
        return Ok(());
    }
    println!(
        "{}: simulated MLC (rows: cpu node, columns: memory node)",
        machine.name
    );
    for (title, mat, prec) in [
        ("latency (ns), pointer chase", &m.latency_ns, 1usize),
        (
            "bandwidth (MB/s), all PUs of the cpu node streaming",
            &m.bandwidth_mbs,
            0,
        ),
    ] {
        println!("\n{title}");
        let mut head = String::from("        ");
        for n in &m.memory_nodes {
            let _ = write!(head, "{:>10}", format!("node {n}"));
        }
        println!("{head}");
        for (i, row) in mat.iter().enumerate() {
            let mut line = format!("node {:<3}", m.cpu_nodes[i]);
            for v in row {
                let _ = write!(line, "{v:>10.prec$}");
            }
            println!("{line}");
        }
    }
    Ok(())
}
