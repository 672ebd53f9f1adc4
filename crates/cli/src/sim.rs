//! `numaff sim`: runs a workload on a simulated machine with a static thread and data placement and
//! prints the figures the papers measure; `--measure` prints the simulated machine's own MLC
//! matrices; `--list-workloads` lists the shipped workloads.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

use numaff_machine::{spec, Coherence, Machine};
use numaff_sim::{measure, simulated_coherence, Report, SimConfig};
use numaff_workload::{catalog, DataChoice, RunOptions, ThreadPolicy, WorkloadError};

mod compare;

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
    /// Thread placement: os (Linux-like: spread, now and then moved within the LLC), a mapping
    /// algorithm of `numaff map` (compact, scatter, round-robin, packed, random, eagermap,
    /// locality, balance, deloc, ondeloc), map:FILE (a mapping file from `numaff map -o FILE`, one
    /// PU per thread of all programs in file order), recorded (a trace's threads where they ran), or a cpu list
    /// such as 0,2,4,6 (thread i on the i-th cpu). eagermap, locality, balance, deloc and ondeloc
    /// map the workload's own communication matrix (kMAF's sharing detection over its access
    /// streams); ondeloc starts from the os placement; deloc takes all communicating pairs as one
    /// group (no time clusters, as `numaff map --matrix`); cimar and nimar are refused (they need
    /// metrics measured while the threads run). Given more than once (or with --data
    /// more than once), every thread placement runs with every data placement and a table
    /// compares them, the first as the baseline.
    #[arg(long, value_name = "POLICY", default_value = "os", action = clap::ArgAction::Append)]
    threads: Vec<String>,
    /// Data placement: first-touch, interleave, bind:N, oracle (kMAF's Oracle: a page with more
    /// than 80 % of its accesses from one node on that node, every other page interleaved by
    /// page number), oracle-local (each page on the node that accesses it most) or oracle-remote
    /// (on the node that accesses it least); the oracles come from a profiling replay of the
    /// workload's access streams with the run's thread placement. May be given more than once
    /// (see --threads).
    #[arg(long, value_name = "POLICY", default_value = "first-touch", action = clap::ArgAction::Append)]
    data: Vec<String>,
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
    /// Simulate the machine with this cache-coherence protocol instead of its own: MESI (a
    /// dirty line read from another cache goes back to memory), MESIF (Intel: the same between
    /// nodes, kept dirty in the node's L3 within one) or MOESI (AMD: the dirty copy becomes
    /// Owned and serves later readers; memory is written when it leaves). A machine that names
    /// none (`coherence` in its file) is simulated with MESIF's rule.
    #[arg(long, value_name = "PROTOCOL", conflicts_with = "list_workloads")]
    coherence: Option<Coherence>,
    /// Seed (random placement, os scheduler moves, samplers).
    #[arg(long, value_name = "S", default_value_t = 0)]
    seed: u64,
    /// Run the workload with N seeds, --seed S to S+N-1, and print each figure's mean, minimum
    /// and maximum over them. The os placement's moves follow any change of timing, so one run
    /// of it is one sample (nas-sp on laso-hpl, seeds 0-4: makespan 1.93 to 2.03 ms, remote
    /// accesses 9,920 to 13,888).
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=1000), conflicts_with = "measure")]
    seeds: u32,
    /// Simulate up to N runs (placements times --seeds) at once, one per thread (default: the
    /// cpus numaff may use, at most the runs). Each run holds its own simulator in memory; the
    /// figures do not depend on N.
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=1024), conflicts_with = "measure")]
    jobs: Option<u32>,
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
pub(crate) struct RunJson<'a> {
    machine: &'a str,
    workload: &'a str,
    threads: &'a str,
    data: &'a str,
    coherence: &'a str,
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

/// Most NUMA nodes of a simulated machine: setting up and running the simulator grows much faster
/// than its nodes (256 nodes take seconds, 512 a minute, 1024 minutes), while the papers' machines
/// have at most 8 nodes and the largest real ones 32. Its PUs are bounded by the machine files'
/// own cap (`numaff_machine::validate::MAX_PUS`: 8192 PUs simulate in seconds).
const MAX_SIM_NODES: usize = 128;

/// Most threads of a simulated run, all programs together: the run's time grows with its threads
/// (4096 threads of nas-sp took over two minutes), while the papers' largest runs have 64 to 256.
const MAX_SIM_THREADS: usize = 1024;

/// The largest `--scale`: the run's time grows with the arrays (nas-sp at 1000 took three
/// minutes); the catalog's workloads already fill their papers' machines at scale 1.
const MAX_SCALE: f64 = 64.0;

pub fn run(args: &SimArgs) -> Result<()> {
    if args.list_workloads {
        return list(args.json);
    }
    let mspec = args
        .machine
        .as_deref()
        .ok_or_else(|| anyhow!("--machine is required"))?;
    let mut machine =
        spec::resolve(mspec).with_context(|| format!("cannot load machine {mspec:?}"))?;
    if let Some(c) = args.coherence {
        machine.coherence = Some(c);
    }
    if machine.nodes.len() > MAX_SIM_NODES {
        bail!(
            "machine {} has {} NUMA nodes; numaff sim simulates at most {MAX_SIM_NODES} (its \
             time grows much faster than the nodes): simulate a smaller machine",
            machine.name,
            machine.nodes.len()
        );
    }
    if args.measure {
        return print_measure(&machine, args);
    }
    let mut workload = match &args.trace {
        Some(path) => {
            numaff_workload::replay::load(path, numaff_workload::replay::cycles_per_ns(&machine))
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
    // Again after --nthreads and --scale: the limits hold for the workload that will run, and
    // before the progress bar below builds its steps.
    workload
        .check()
        .map_err(|e| anyhow!("workload {}: {e}", workload.name))?;
    // After the workload's own limits (an array beyond the host's memory says so first).
    if let Some(f) = args.scale.filter(|&f| f > MAX_SCALE) {
        bail!(
            "--scale {f} is above {MAX_SCALE}, the largest numaff sim takes (the run's time grows \
             with the arrays); use a smaller factor"
        );
    }
    if workload.threads() > MAX_SIM_THREADS {
        bail!(
            "workload {} has {} threads; numaff sim simulates at most {MAX_SIM_THREADS} (its \
             time grows with the threads): lower --nthreads or the programs' threads",
            workload.name,
            workload.threads()
        );
    }
    let placements = Placement::all(&args.threads, &args.data)?;
    let last = args
        .seed
        .checked_add(u64::from(args.seeds) - 1)
        .ok_or_else(|| {
            anyhow!(
                "--seed {} with --seeds {} runs past the largest seed",
                args.seed,
                args.seeds
            )
        })?;
    let seeds: Vec<u64> = (args.seed..=last).collect();
    let runs: Vec<(&Placement, u64)> = placements
        .iter()
        .flat_map(|p| seeds.iter().map(move |&seed| (p, seed)))
        .collect();
    let jobs = jobs_for(args.jobs, runs.len());
    let all = run_all(&machine, &workload, &runs, placements.len() > 1, jobs)?;
    if placements.len() > 1 {
        let by_placement: Vec<(&Placement, &[Report])> = placements
            .iter()
            .zip(all.chunks_exact(seeds.len()))
            .collect();
        if args.json {
            let j = compare::json(&machine, &workload.name, &seeds, &by_placement);
            println!("{}", serde_json::to_string_pretty(&j)?);
        } else {
            print!(
                "{}",
                compare::text(&machine, &workload.name, &seeds, &by_placement)
            );
        }
        return Ok(());
    }
    let placement = &placements[0];
    let reports = all;
    let runs: Vec<RunJson> = seeds
        .iter()
        .zip(&reports)
        .map(|(&seed, report)| run_json(&machine, &workload.name, placement, seed, report))
        .collect();
    match (args.json, &runs[..]) {
        (true, [one]) => println!("{}", serde_json::to_string_pretty(one)?),
        (true, _) => {
            let j = SeedsJson {
                machine: &machine.name,
                workload: &workload.name,
                threads: &placement.threads,
                data: &placement.data,
                coherence: simulated_coherence(&machine).name(),
                seeds: &seeds,
                summary: summary(&reports)
                    .into_iter()
                    .map(|f| (f.key, f.spread))
                    .collect(),
                runs,
            };
            println!("{}", serde_json::to_string_pretty(&j)?);
        }
        (false, [_]) => print!(
            "{}",
            text(&machine, &workload.name, placement, args.seed, &reports[0])
        ),
        (false, _) => print!(
            "{}",
            seeds_text(&machine, &workload.name, placement, &seeds, &reports)
        ),
    }
    Ok(())
}

/// How many runs `--jobs` simulates at once: N given, or the cpus this process may use, never
/// more than the runs.
fn jobs_for(jobs: Option<u32>, runs: usize) -> usize {
    let wanted = match jobs {
        Some(n) => n as usize,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    wanted.clamp(1, runs.max(1))
}

/// A thread and a data placement, as given and parsed.
pub(crate) struct Placement {
    pub(crate) threads: String,
    pub(crate) data: String,
    thread_policy: ThreadPolicy,
    data_choice: DataChoice,
}

impl Placement {
    /// Every thread placement with every data placement, threads first, in the order given;
    /// any that does not parse is refused before anything runs.
    fn all(threads: &[String], data: &[String]) -> Result<Vec<Placement>> {
        let mut out = Vec::with_capacity(threads.len() * data.len());
        for t in threads {
            let thread_policy: ThreadPolicy = t.parse().map_err(anyhow::Error::msg)?;
            for d in data {
                let data_choice: DataChoice = d.parse().map_err(anyhow::Error::msg)?;
                out.push(Placement {
                    threads: t.clone(),
                    data: d.clone(),
                    thread_policy: thread_policy.clone(),
                    data_choice,
                });
            }
        }
        Ok(out)
    }
}

/// Simulates each run (a placement and a seed), `jobs` at a time on scoped threads that take
/// the next run as they finish one, and returns the reports in the runs' order. A bar appears
/// when the runs take more than a second. After a failure no new run starts, and the error of
/// the first failing run is returned (every earlier run had started, so it is the same for any
/// `jobs`); it names the placement when `name_placement` (a comparison), else the seed only.
fn run_all(
    machine: &Machine,
    workload: &numaff_workload::Workload,
    runs: &[(&Placement, u64)],
    name_placement: bool,
    jobs: usize,
) -> Result<Vec<Report>> {
    // The bar counts towards the accesses the runs will issue (known from the workload's
    // steps), with the time left at the rate so far.
    let per_run = numaff_workload::total_accesses(workload);
    let total = per_run.saturating_mul(runs.len() as u64);
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
    bar.set_style(
        ProgressStyle::with_template("simulating {msg} {bar:20} {percent:>3}%, {eta} left")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let accesses: Vec<AtomicU64> = runs.iter().map(|_| AtomicU64::new(0)).collect();
    let now_ns: Vec<AtomicU64> = runs.iter().map(|_| AtomicU64::new(0)).collect();
    let stepped = AtomicBool::new(false);
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let mut results: Vec<Option<Result<Report, WorkloadError>>> =
        runs.iter().map(|_| None).collect();
    let started = Instant::now();
    std::thread::scope(|scope| {
        let (done_tx, done_rx) = mpsc::channel::<(usize, Result<Report, WorkloadError>)>();
        for _ in 0..jobs {
            let done_tx = done_tx.clone();
            let (accesses, now_ns, stepped, next, failed) =
                (&accesses, &now_ns, &stepped, &next, &failed);
            scope.spawn(move || {
                while !failed.load(Ordering::Relaxed) {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(placement, seed)) = runs.get(k) else {
                        break;
                    };
                    let opts = RunOptions {
                        threads: placement.thread_policy.clone(),
                        data: placement.data_choice.clone(),
                        seed,
                    };
                    let report =
                        numaff_workload::run_with(machine, workload, &opts, |now, done| {
                            accesses[k].store(done, Ordering::Relaxed);
                            now_ns[k].store(now, Ordering::Relaxed);
                            stepped.store(true, Ordering::Relaxed);
                        });
                    if report.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    if done_tx.send((k, report)).is_err() {
                        break;
                    }
                }
            });
        }
        // The workers hold the only senders left: the channel closes when the last one ends.
        drop(done_tx);
        let (mut eta_reset, mut shown) = (false, false);
        let mut finished = 0;
        loop {
            match done_rx.recv_timeout(Duration::from_millis(100)) {
                Ok((k, report)) => {
                    results[k] = Some(report);
                    finished += 1;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
            // The rate behind the time left counts from the first step simulated, not from
            // before the workload was built (an oracle's profiling pass can take seconds).
            if !eta_reset && stepped.load(Ordering::Relaxed) {
                bar.reset_eta();
                eta_reset = true;
            }
            // Kept up to date while hidden, so that its first frame is complete.
            let position = accesses
                .iter()
                .map(|a| a.load(Ordering::Relaxed))
                .fold(0, u64::saturating_add);
            bar.set_position(position);
            bar.set_message(if runs.len() == 1 {
                format!(
                    "{}: {:.1} ms, {:.1}/{:.1} M accesses",
                    workload.name,
                    now_ns[0].load(Ordering::Relaxed) as f64 / 1e6,
                    position as f64 / 1e6,
                    per_run as f64 / 1e6
                )
            } else {
                format!(
                    "{}: {finished} of {} runs done ({jobs} at a time)",
                    workload.name,
                    runs.len()
                )
            });
            if !shown && started.elapsed() > Duration::from_secs(1) {
                bar.set_draw_target(ProgressDrawTarget::stderr());
                shown = true;
            }
        }
    });
    bar.finish_and_clear();
    let mut reports = Vec::with_capacity(runs.len());
    for (result, &(placement, seed)) in results.into_iter().zip(runs) {
        let which = if name_placement {
            format!(
                "threads {}, data {}, seed {seed}",
                placement.threads, placement.data
            )
        } else {
            format!("seed {seed}")
        };
        match result {
            Some(Ok(report)) => reports.push(report),
            Some(Err(e)) => {
                return Err(anyhow!(e)).with_context(|| {
                    format!(
                        "cannot simulate {} on {} ({which})",
                        workload.name, machine.name
                    )
                })
            }
            // Only runs after a failed one are left unrun, and the loop returned at it.
            None => bail!("the run with {which} was not simulated"),
        }
    }
    Ok(reports)
}

pub(crate) fn run_json<'a>(
    machine: &'a Machine,
    workload: &'a str,
    placement: &'a Placement,
    seed: u64,
    report: &'a Report,
) -> RunJson<'a> {
    RunJson {
        machine: &machine.name,
        workload,
        threads: &placement.threads,
        data: &placement.data,
        coherence: simulated_coherence(machine).name(),
        seed,
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
        report,
    }
}

/// The JSON of `--seeds N` (N > 1): each figure's mean, minimum and maximum over the runs, then
/// every run as a single run's JSON.
#[derive(Serialize)]
struct SeedsJson<'a> {
    machine: &'a str,
    workload: &'a str,
    threads: &'a str,
    data: &'a str,
    coherence: &'a str,
    seeds: &'a [u64],
    summary: std::collections::BTreeMap<&'static str, Spread>,
    runs: Vec<RunJson<'a>>,
}

/// Mean, minimum and maximum of one figure over the runs of `--seeds`.
#[derive(Serialize, Clone, Copy, Debug, PartialEq)]
pub(crate) struct Spread {
    pub(crate) mean: f64,
    pub(crate) min: f64,
    pub(crate) max: f64,
}

impl Spread {
    pub(crate) fn of(values: &[f64]) -> Self {
        let n = values.len().max(1) as f64;
        Spread {
            mean: values.iter().sum::<f64>() / n,
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        }
    }
}

/// One figure of the `--seeds` summary: its JSON key, its label and unit in the text, the factor
/// from the JSON's unit to the text's, and its spread (in the JSON's unit).
pub(crate) struct Figure {
    key: &'static str,
    label: &'static str,
    unit: &'static str,
    scale: f64,
    spread: Spread,
}

/// The headline figures of `RunJson` over the runs.
pub(crate) fn summary(reports: &[Report]) -> Vec<Figure> {
    let fig = |key, label, unit, scale, get: &dyn Fn(&Report) -> f64| Figure {
        key,
        label,
        unit,
        scale,
        spread: Spread::of(&reports.iter().map(get).collect::<Vec<f64>>()),
    };
    vec![
        fig("makespan_ns", "makespan", "ms", 1e-6, &|r| {
            r.makespan_ns as f64
        }),
        fig("llc_misses", "LLC misses", "", 1.0, &|r| {
            r.llc_misses as f64
        }),
        fig("local_accesses", "local accesses", "", 1.0, &|r| {
            r.local_accesses as f64
        }),
        fig("remote_accesses", "remote accesses", "", 1.0, &|r| {
            r.remote_accesses as f64
        }),
        fig("imc_queue_ns", "IMC queue", "ms", 1e-6, &|r| r.imc_queue_ns),
        fig("link_queue_ns", "link queue", "ms", 1e-6, &|r| {
            r.link_queue_ns
        }),
        fig("interconnect_bytes", "interconnect", "MB", 1e-6, &|r| {
            r.interconnect_bytes as f64
        }),
        fig("c2c_transfers", "c2c transfers", "", 1.0, &|r| {
            r.c2c_transfers as f64
        }),
        fig("migrations", "thread migrations", "", 1.0, &|r| {
            r.migrations as f64
        }),
        fig("page_migrations", "page migrations", "", 1.0, &|r| {
            r.page_migrations as f64
        }),
        fig("energy_j", "energy", "J", 1.0, &|r| r.energy_j),
    ]
}

fn seeds_text(
    machine: &Machine,
    workload: &str,
    placement: &Placement,
    seeds: &[u64],
    reports: &[Report],
) -> String {
    let mut s = String::new();
    let (first, last) = (seeds[0], seeds[seeds.len() - 1]);
    let _ = writeln!(
        s,
        "{workload} on {}: threads {}, data {}, coherence {}, seeds {first}-{last} ({} runs)",
        machine.name,
        placement.threads,
        placement.data,
        simulated_coherence(machine),
        seeds.len()
    );
    let _ = writeln!(
        s,
        "  {:<18} {:>12} {:>12} {:>12}  spread",
        "", "mean", "min", "max"
    );
    for f in summary(reports) {
        let Spread { mean, min, max } = f.spread;
        let spread = if mean > 0.0 {
            format!("{:5.1} %", 100.0 * (max - min) / mean)
        } else {
            "    -".to_string()
        };
        // Counts: the mean with one decimal, the extremes whole.
        let v = |x: f64, digits: usize| {
            let digits = if f.unit.is_empty() { digits } else { 3 };
            format!("{:>12.digits$}", x * f.scale)
        };
        let label = if f.unit.is_empty() {
            f.label.to_string()
        } else {
            format!("{} ({})", f.label, f.unit)
        };
        let _ = writeln!(
            s,
            "  {label:<18} {} {} {}  {spread}",
            v(mean, 1),
            v(min, 0),
            v(max, 0)
        );
    }
    let makespans: Vec<String> = seeds
        .iter()
        .zip(reports)
        .map(|(seed, r)| format!("{seed}: {:.3}", r.makespan_ns as f64 / 1e6))
        .collect();
    let _ = writeln!(s, "  makespan by seed (ms): {}", makespans.join(", "));
    s
}

fn text(machine: &Machine, workload: &str, placement: &Placement, seed: u64, r: &Report) -> String {
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
        "{workload} on {}: threads {}, data {}, coherence {}, seed {}",
        machine.name,
        placement.threads,
        placement.data,
        simulated_coherence(machine),
        seed
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
    if r.queue_past_history > 0 {
        // The queue model's one approximation made visible (crates/sim, "Queues remember
        // longer"): such lines waited for the end of a history their queue had forgotten.
        let _ = writeln!(
            s,
            "  late queue lines    {:>14}  (came before their queue's history: waits approximate)",
            r.queue_past_history
        );
    }
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
