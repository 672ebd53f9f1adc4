//! `numaff profile [-o trace.parquet] [--sampler page-faults] [--duration D] -- CMD` (or `--pid PID`):
//! samples a program's memory accesses into a trace for `numaff analyze`.
//!
//! The program is not traced (no ptrace): numaff forks, the child waits on a pipe, numaff opens one
//! inherited page-fault event per cpu on the child (enabled at exec, as `perf record` does), then
//! lets it exec. If numaff dies, the events go with it and the program runs on.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;

use numaff_behave::perf_script::PerfScriptReader;
use numaff_behave::{Sample, TraceError, TraceMeta, TraceReader, TraceWriter};
use numaff_linux::induce::{self, Induce, SoftDirtyRearmer};
use numaff_linux::pmu;
use numaff_linux::sampler::{self, AccessSampler, SamplePeriod, SamplerEvent};

#[derive(Args)]
pub struct ProfileArgs {
    /// The trace to write (Parquet; a .csv name writes CSV without metadata).
    #[arg(short, long, value_name = "TRACE", default_value = "trace.parquet")]
    output: PathBuf,
    /// The sampler (`numaff profile --list-samplers` says which work here).
    #[arg(long, default_value = "page-faults")]
    sampler: String,
    /// Sample one event in N: one page fault in N (default 1, every fault), or for pebs and ibs
    /// one qualifying load, store or op in N (default 10000). Each page-fault sample costs the
    /// faulting thread about 0.6 µs of kernel time here, a fault only counted about 0.05 µs: a
    /// larger N lowers the overhead on programs that fault often, at the price of pages without
    /// a first-touch sample (README "numaff profile", sampling overhead).
    #[arg(long, value_name = "N")]
    sample_period: Option<SamplePeriod>,
    /// PEBS load-latency threshold in core cycles: only loads slower than this are sampled
    /// (--sampler pebs; default 30, as `perf mem record`).
    #[arg(long, value_name = "CYCLES", value_parser = clap::value_parser!(u64).range(1..=65535))]
    ldlat: Option<u64>,
    /// Stop sampling after this long (e.g. 10, 10s, 500ms, 2m); the program runs on.
    #[arg(long, value_name = "D", value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Profile a running process instead (its existing threads, and what they start later).
    #[arg(long, value_name = "PID", conflicts_with = "command")]
    pid: Option<i32>,
    /// Induced extra faults, so that pages are sampled again after their first touch (kMAF
    /// §4.2.2): auto, uffd (LD_PRELOAD agent), soft-dirty, balancing or off.
    #[arg(long, value_name = "HOW", default_value = "auto")]
    induce: Induce,
    /// Re-arms per page per second for induced faults (soft-dirty: all pages every 1/RATE s).
    #[arg(long, value_name = "RATE", default_value_t = induce::DEFAULT_RATE, value_parser = parse_rate)]
    induce_rate: f64,
    /// The most the induced faults may cost, in per cent of the program's cpu time (`off`: no
    /// cap, the rate alone decides). Re-arms beyond it wait: each re-armed page in memory counts
    /// as one fault of 1.7 µs (measured, README).
    #[arg(long, value_name = "PERCENT", default_value_t = Budget(Some(induce::DEFAULT_BUDGET)), value_parser = parse_budget)]
    induce_budget: Budget,
    /// List the samplers, whether they work on this machine and why not.
    #[arg(long)]
    list_samplers: bool,
    /// Convert `perf script` text (e.g. from `perf mem record`) into a trace instead of sampling;
    /// cpus are mapped to this machine's nodes (see README "Importing perf script output"). A
    /// numaff trace (Parquet or CSV) is converted to the format of `-o` (CSV export or import).
    #[arg(long, value_name = "PERF_TXT", conflicts_with_all = ["command", "pid"])]
    import: Option<PathBuf>,
    /// The program and its arguments.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

/// The events of `--sampler`: page faults, or the PEBS / IBS events this machine's PMU describes.
/// A sampler that cannot work here is an error saying why (as `--list-samplers` does).
fn sampler_events(args: &ProfileArgs) -> Result<Vec<SamplerEvent>> {
    if args.ldlat.is_some() && args.sampler != "pebs" {
        bail!("--ldlat is the PEBS load-latency threshold: it needs --sampler pebs");
    }
    let devices = std::path::Path::new(pmu::SYSFS_DEVICES);
    let hw = match args.sampler.as_str() {
        "page-faults" => return Ok(vec![SamplerEvent::PageFaults]),
        "pebs" => pmu::pebs_events(devices, args.ldlat.unwrap_or(pmu::DEFAULT_LDLAT)),
        "ibs" => pmu::ibs_events(devices),
        other => {
            let why = sampler::list_samplers()
                .into_iter()
                .find(|s| s.name == other)
                .map(|s| s.why)
                .unwrap_or_else(|| {
                    "no such sampler (page-faults, pebs or ibs; soft-dirty and numa-hinting are \
                     --induce ways)"
                        .into()
                });
            bail!("sampler {other:?} cannot be used: {why} (see numaff profile --list-samplers)");
        }
    }
    .map_err(|e| {
        anyhow!(
            "sampler {:?} cannot be used: {e} (see numaff profile --list-samplers)",
            args.sampler
        )
    })?;
    for note in &hw.notes {
        eprintln!("numaff: {note}");
    }
    Ok(hw.events.into_iter().map(SamplerEvent::Hardware).collect())
}

/// `10`, `10s`, `500ms`, `2m`, `1.5h`.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, unit) = match s.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (e.g. 10, 10s, 500ms, 2m)"))?;
    let scale = match unit {
        "ms" => 1e-3,
        "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return Err(format!("unknown unit {unit:?} in {s:?} (ms, s, m or h)")),
    };
    let secs = v * scale;
    if !(secs.is_finite() && secs > 0.0) {
        return Err(format!("{s:?} is not a positive duration"));
    }
    Ok(Duration::from_secs_f64(secs))
}

fn parse_rate(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 1000.0 => Ok(v),
        _ => Err(format!(
            "{s:?} is not a rate: give re-arms per page per second, above 0 and at most 1000 (e.g. 1, 0.2)"
        )),
    }
}

/// `--induce-budget`: a share of the program's cpu time, or no cap.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Budget(Option<f64>);

impl std::fmt::Display for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(b) => write!(f, "{}", percent(b)),
            None => f.write_str("off"),
        }
    }
}

fn parse_budget(s: &str) -> Result<Budget, String> {
    if s.trim() == "off" {
        return Ok(Budget(None));
    }
    match s.trim().trim_end_matches('%').parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 100.0 => Ok(Budget(Some(v / 100.0))),
        _ => Err(format!(
            "{s:?} is not a budget: give per cent of the program's cpu time, above 0 and at most 100 (e.g. 1, 0.5), or off"
        )),
    }
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

pub fn run(args: &ProfileArgs) -> Result<()> {
    if args.list_samplers {
        for s in sampler::list_samplers() {
            println!("{s}");
        }
        let opts = induce::options();
        println!();
        println!("induced faults (--induce):");
        for o in &opts {
            println!("{o}");
        }
        println!(
            "--induce auto uses here: {} for a command, {} with --pid",
            induce::choose(&opts, true),
            induce::choose(&opts, false)
        );
        return Ok(());
    }
    if let Some(input) = &args.import {
        if is_trace(input) {
            return convert_trace(input, &args.output);
        }
        return import_perf_script(input, &args.output);
    }
    let events = sampler_events(args)?;
    let hardware = events != [SamplerEvent::PageFaults];
    if args.pid.is_none() && args.command.is_empty() {
        bail!("give the program to profile after --, or --pid PID (numaff profile -- ./prog args)");
    }

    let induce_opts = induce::options();
    // Induced faults feed the page-fault sampler; hardware samplers see accesses themselves.
    let induce = match (hardware, args.induce) {
        (true, Induce::Auto | Induce::Off) => Induce::Off,
        (true, other) => bail!(
            "--induce {other} makes extra page faults, which only --sampler page-faults sees; \
             --sampler {} samples accesses itself (leave --induce out)",
            args.sampler
        ),
        (false, way) => {
            induce::resolve(way, &induce_opts, args.pid.is_none()).map_err(|e| anyhow!(e))?
        }
    };
    // The uffd agent: written next to the trace's temporary files, its status beside it.
    let agent_dir = std::env::temp_dir();
    let status_prefix = agent_dir.join(format!("numaff-induce-{}", std::process::id()));
    let agent_env = if induce == Induce::Uffd {
        let so = induce::install_agent(&agent_dir).with_context(|| {
            format!(
                "cannot write numaff's agent into {} (set TMPDIR to a writable directory, or use --induce off)",
                agent_dir.display()
            )
        })?;
        induce::agent_env(&so, args.induce_rate, args.induce_budget.0, &status_prefix)
    } else {
        Vec::new()
    };

    let machine = discover_machine().context("cannot discover this machine")?;
    let (cpus, node_of_cpu) = cpus_and_nodes(&machine);
    let machine_toml = numaff_machine::file::to_toml_string(&machine).ok();

    let period = args.sample_period.unwrap_or(if hardware {
        SamplePeriod(sampler::DEFAULT_HW_PERIOD)
    } else {
        SamplePeriod::EVERY
    });
    // Open the samplers: on a waiting child (CMD) or on each thread of a running process (PID).
    let (target, mut samplers, child, command_line) = match args.pid {
        Some(pid) => {
            let threads = numaff_linux::tasks::threads(pid)?;
            let mut v = Vec::new();
            for t in &threads {
                v.push(AccessSampler::open_events(
                    t.tid,
                    &cpus,
                    node_of_cpu.clone(),
                    false,
                    sampler::RING_DATA_PAGES,
                    &events,
                    period,
                )?);
            }
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|b| {
                    b.split(|&c| c == 0)
                        .filter(|a| !a.is_empty())
                        .map(|a| String::from_utf8_lossy(a).into_owned())
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_else(|_| format!("pid {pid}"));
            (pid, v, None, cmdline)
        }
        None => {
            let child = WaitingChild::fork(&args.command, &agent_env)?;
            // Large rings (within a fixed budget shared by every cpu's events): the reader may
            // fall behind the program for longer, and wakes up less often.
            let ring = sampler::ring_pages_for(cpus.len() * events.len());
            let s = match AccessSampler::open_events(
                child.pid,
                &cpus,
                node_of_cpu.clone(),
                true,
                ring,
                &events,
                period,
            ) {
                Ok(s) => s,
                Err(e) => {
                    child.kill();
                    return Err(e.into());
                }
            };
            let cmdline = args
                .command
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" ");
            (child.pid, vec![s], Some(child), cmdline)
        }
    };
    if let Some(s) = samplers.first() {
        eprintln!("numaff: sampler {}", s.describe());
    }
    eprintln!(
        "numaff: induced faults: {}",
        describe_induce(induce, args.induce_rate, args.induce_budget.0)
    );
    // Transparent huge pages: a first touch of a huge page faults once per 2 MiB, so the sampler
    // sees one sample for 512 base pages there. Said at start, watched while the program runs.
    let thp = numaff_linux::thp::thp_mode();
    if let Some(m) = thp.filter(|&m| m != numaff_linux::thp::ThpMode::Never) {
        eprintln!(
            "numaff: transparent huge pages: {} (a first touch of a huge page faults once per 2 MiB: one sample for its 512 pages)",
            m.as_str()
        );
    }
    let mut thp_bytes_max: u64 = 0;
    let mut soft_dirty = (induce == Induce::SoftDirty).then(|| {
        let budget = args
            .induce_budget
            .0
            .map(|b| induce::InduceBudget::new(b, induce::FAULT_COST_NS));
        SoftDirtyRearmer::new(target, args.induce_rate, budget)
    });

    // SAFETY: the handler only stores to an atomic, which is async-signal-safe. Installed after the
    // fork so that the program keeps the default dispositions.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }

    let page_size = {
        // SAFETY: sysconf has no memory-safety preconditions.
        let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        (p > 0).then_some(p as u64)
    };
    let mut meta = TraceMeta {
        machine: machine_toml,
        command: Some(command_line.clone()),
        sampler: Some(args.sampler.clone()),
        page_size,
        ..TraceMeta::default()
    };
    let writer = BackgroundWriter::start(TraceWriter::create(&args.output, &meta)?);
    let mut pending: Vec<Sample> = Vec::with_capacity(WRITE_BATCH);

    let start = Instant::now();
    let mut child = child;
    if let Some(c) = &mut child {
        c.go()
            .with_context(|| format!("cannot run {command_line}"))?;
    }
    let mut names_poll = BoundedPoll::new(Duration::from_millis(200));
    let mut thp_poll = BoundedPoll::new(Duration::from_millis(200));
    let mut status = None;
    let mut stopped_by = "the program exited";
    loop {
        if let Some(s) = samplers.first() {
            let wait = soft_dirty.as_ref().map_or(Duration::from_millis(50), |r| {
                r.until_due().min(Duration::from_millis(50))
            });
            s.wait(wait);
        }
        if let Some(r) = &mut soft_dirty {
            // The process may be exiting: a failed re-arm ends re-arming, not the profile.
            if let Err(e) = r.tick() {
                if alive(target) {
                    eprintln!("numaff: soft-dirty re-arming stopped: {e}");
                }
                soft_dirty = None;
            }
        }
        for s in &mut samplers {
            s.drain(&mut |x| pending.push(x));
        }
        if pending.len() >= WRITE_BATCH
            && !writer.send(std::mem::replace(&mut pending, writer.empty_batch()))
        {
            break; // the writer failed: its error comes from finish() below
        }
        if names_poll.due() {
            let began = Instant::now();
            if let Ok(threads) = numaff_linux::tasks::threads(target) {
                for t in threads {
                    meta.thread_names.insert(t.tid as u32, t.name);
                }
            }
            names_poll.done(began);
        }
        if thp_poll.due() {
            let began = Instant::now();
            // The program's smaps_rollup walks its page tables: read only when the system has
            // huge pages at all (meminfo, cheap), and no more often than its cost allows.
            if numaff_linux::thp::system_anon_huge_bytes().is_some_and(|b| b > 0) {
                if let Some(b) = numaff_linux::thp::anon_huge_bytes(target) {
                    thp_bytes_max = thp_bytes_max.max(b);
                }
            }
            thp_poll.done(began);
        }
        match &child {
            Some(c) => {
                if let Some(st) = c.try_wait()? {
                    status = Some(st);
                    break;
                }
            }
            None => {
                if !alive(target) {
                    break;
                }
            }
        }
        if args.duration.is_some_and(|d| start.elapsed() >= d) {
            stopped_by = "--duration elapsed";
            break;
        }
        if STOP.load(Ordering::SeqCst) {
            stopped_by = "interrupted";
            break;
        }
    }
    let wall = start.elapsed();
    for s in &mut samplers {
        s.drain(&mut |x| pending.push(x));
    }
    writer.send(pending);
    let mut writer = writer.finish()?;
    let samples: u64 = samplers.iter().map(|s| s.samples()).sum();
    let lost: u64 = samplers.iter_mut().map(|s| s.lost_total()).sum();
    let faults: u64 = samplers.iter_mut().map(|s| s.counted()).sum();
    let secs = wall.as_secs_f64().max(1e-9);
    meta.rates.insert("samples".into(), samples as f64);
    meta.rates.insert("lost".into(), lost as f64);
    // What the events counted (faults, or qualifying loads, stores or ops): samples / that is the
    // share sampled.
    let counted_name = if hardware { "events" } else { "faults" };
    meta.rates.insert(counted_name.into(), faults as f64);
    meta.rates.insert("period".into(), period.0 as f64);
    let mut induce_line = None;
    if induce != Induce::Off {
        // The way as a key (`induce_uffd`, `induce_soft-dirty`, `induce_balancing`) set to 1.
        meta.rates.insert(format!("induce_{induce}"), 1.0);
        meta.rates.insert("induce_rate".into(), args.induce_rate);
        if let (Some(b), Induce::Uffd | Induce::SoftDirty) = (args.induce_budget.0, induce) {
            meta.rates.insert("induce_budget".into(), b);
        }
    }
    if let Some(r) = &soft_dirty {
        meta.rates.insert("induce_rearms".into(), r.rearms() as f64);
        meta.rates
            .insert("induce_deferred".into(), r.deferred() as f64);
        meta.rates
            .insert("induce_resident_rearmed".into(), r.pages() as f64);
        let waited = match r.deferred() {
            0 => String::new(),
            n => format!(
                "; a due re-arm waited for the budget at {n} checks ({})",
                budget_words(args.induce_budget.0)
            ),
        };
        induce_line = Some(format!(
            "soft-dirty: {} re-arms of every page ({} resident pages re-armed in all), {:.3} ms in clear_refs{waited}",
            r.rearms(),
            r.pages(),
            r.spent().as_secs_f64() * 1e3
        ));
    }
    if induce == Induce::Uffd {
        induce_line = Some(match induce::agent_status(&status_prefix, target) {
            Some(st) => {
                meta.rates
                    .insert("induce_private_rearmed".into(), st.private_rearmed as f64);
                meta.rates
                    .insert("induce_shared_rearmed".into(), st.shared_rearmed as f64);
                meta.rates.insert("induce_wanted".into(), st.wanted as f64);
                meta.rates
                    .insert("induce_agent_cpu_ms".into(), st.agent_cpu_ms);
                meta.rates
                    .insert("induce_limited_ticks".into(), st.limited_ticks as f64);
                let limited = match st.limited_ticks {
                    0 => String::new(),
                    n => format!(
                        "; the budget ({}) limited {n} ticks: {} of the {} pages the rate asked for re-armed",
                        budget_words(args.induce_budget.0),
                        st.private_rearmed + st.shared_rearmed,
                        st.wanted
                    ),
                };
                let last = match &st.last_error {
                    Some((call, e)) => format!(
                        " (the last: {call}, {})",
                        std::io::Error::from_raw_os_error(*e)
                    ),
                    None => String::new(),
                };
                let vanished = match st.vanished {
                    0 => String::new(),
                    n => format!(" ({n} calls on ranges the program had just unmapped)"),
                };
                format!(
                    "uffd agent {} ({}): {} ticks, {} private pages write-protected ({}), {} shared pages unmapped, {} errors{last}{vanished}, {:.1} ms of cpu in the agent{limited}",
                    st.state, st.uffd, st.ticks, st.private_rearmed, st.private, st.shared_rearmed, st.errors, st.agent_cpu_ms
                )
            }
            None => {
                "uffd agent did not report (a static program, or one that ran under 100 ms)".into()
            }
        });
        if let Ok(rd) = std::fs::read_dir(&agent_dir) {
            let prefix = status_prefix
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            for e in rd.flatten() {
                if e.file_name()
                    .to_string_lossy()
                    .starts_with(&format!("{prefix}."))
                {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }
    meta.rates.insert("wall_s".into(), wall.as_secs_f64());
    meta.rates
        .insert("samples_per_s".into(), samples as f64 / secs);
    if let Some(m) = thp {
        meta.rates.insert("thp_mode".into(), m.as_rate());
        meta.rates
            .insert("thp_bytes_max".into(), thp_bytes_max as f64);
    }
    writer.append_meta(&TraceMeta {
        rates: meta.rates.clone(),
        thread_names: meta.thread_names.clone(),
        ..TraceMeta::default()
    });
    drop(samplers);
    writer.finish()?;
    let cpu = cpu_times();

    let share = match period.0 {
        1 => String::new(),
        n => format!(" of {faults} {counted_name} (one in {n})"),
    };
    println!(
        "numaff: {samples} samples{share}, {lost} lost, {} threads named, in {:.3} s wall ({stopped_by}); wrote {}",
        meta.thread_names.len(),
        wall.as_secs_f64(),
        args.output.display()
    );
    if let Some(l) = induce_line {
        println!("numaff: induced faults: {l}");
    }
    if let Some((own, program)) = cpu {
        let per_sample = if samples > 0 {
            format!(" ({:.2} µs per sample)", own * 1e6 / samples as f64)
        } else {
            String::new()
        };
        println!("numaff: cpu time: numaff {own:.3} s{per_sample}, the program {program:.3} s");
    }
    if thp_bytes_max > 0 {
        println!(
            "numaff: transparent huge pages: up to {:.1} MiB of the program's memory ({} huge pages) was in 2 MiB pages, each sampled as one first touch (recorded as thp_bytes_max)",
            thp_bytes_max as f64 / (1u64 << 20) as f64,
            thp_bytes_max >> 21
        );
    }
    if lost > 0 {
        println!(
            "numaff: {lost} samples were lost (ring buffers full): the analysis sees fewer faults than happened"
        );
    }
    println!("next: numaff analyze {}", args.output.display());
    if let Some(st) = status {
        if st != 0 {
            eprintln!("numaff: the program exited with {}", describe_status(st));
        }
    }
    Ok(())
}

/// A periodic read of the program's /proc files whose own cost bounds its rate: the next read is
/// due after the interval or after [`BoundedPoll::COST_FACTOR`] times what the last one took,
/// whichever is longer, so that it takes at most about 1 % of a cpu (issue 5: sampling overhead;
/// smaps_rollup of a 512 MiB program took 50 ms of wall time here, every 200 ms it took 6 % of a
/// cpu and the program's mmap lock).
struct BoundedPoll {
    interval: Duration,
    next: Instant,
}

impl BoundedPoll {
    const COST_FACTOR: u32 = 100;

    /// A poll due now, then every `interval` at most.
    fn new(interval: Duration) -> Self {
        BoundedPoll {
            interval,
            next: Instant::now(),
        }
    }

    fn due(&self) -> bool {
        Instant::now() >= self.next
    }

    /// Schedules the next read after one that began at `began` and ends now.
    fn done(&mut self, began: Instant) {
        self.next = self.next_after(began, Instant::now());
    }

    /// When the read after one from `began` to `ended` is due.
    fn next_after(&self, began: Instant, ended: Instant) -> Instant {
        let cost = ended.saturating_duration_since(began);
        ended + self.interval.max(cost * Self::COST_FACTOR)
    }
}

/// Samples handed to the trace writer at a time (the writer's own batches are as large).
const WRITE_BATCH: usize = numaff_behave::tracefile::BATCH_ROWS;

/// Encodes and writes the trace on a thread of its own at the lowest priority (nice 19), off the
/// path that drains the ring buffers: Parquet encoding then takes cpu time the profiled program
/// leaves idle instead of competing with it (issue 5: sampling overhead). Batches queue up in
/// memory meanwhile, at most [`QUEUED_BATCHES`] of them (then the reader waits for the writer).
struct BackgroundWriter {
    tx: std::sync::mpsc::SyncSender<Vec<Sample>>,
    /// Emptied batches coming back for reuse: no fresh memory (and page faults) per batch.
    spare: std::sync::mpsc::Receiver<Vec<Sample>>,
    thread: std::thread::JoinHandle<Result<TraceWriter, TraceError>>,
}

/// Batches of [`WRITE_BATCH`] samples the writer may lag behind (64 × 64 Ki samples, about 250 MiB).
const QUEUED_BATCHES: usize = 64;

impl BackgroundWriter {
    fn start(mut writer: TraceWriter) -> Self {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Sample>>(QUEUED_BATCHES);
        let (back, spare) = std::sync::mpsc::sync_channel::<Vec<Sample>>(QUEUED_BATCHES + 2);
        let thread = std::thread::spawn(move || {
            // SAFETY: setpriority on this thread (who = its tid); no memory is involved. A failure
            // only leaves the writer at normal priority.
            unsafe {
                let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
                libc::setpriority(libc::PRIO_PROCESS, tid, 19);
            }
            for mut batch in rx {
                writer.write_all(&batch)?;
                batch.clear();
                let _ = back.try_send(batch);
            }
            Ok(writer)
        });
        BackgroundWriter { tx, spare, thread }
    }

    /// An empty batch of [`WRITE_BATCH`] capacity, reused when the writer has one.
    fn empty_batch(&self) -> Vec<Sample> {
        self.spare
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(WRITE_BATCH))
    }

    /// Queues samples; false if the writer stopped on an error ([`Self::finish`] returns it).
    fn send(&self, batch: Vec<Sample>) -> bool {
        batch.is_empty() || self.tx.send(batch).is_ok()
    }

    /// Waits for every queued sample to be written; the writer, or its error.
    fn finish(self) -> Result<TraceWriter> {
        drop(self.tx);
        match self.thread.join() {
            Ok(r) => Ok(r?),
            Err(_) => bail!("the trace writer thread panicked"),
        }
    }
}

/// hwloc's plugins that profiling does not need: I/O devices (numaff keeps no I/O objects) and the
/// libxml2 XML backend (hwloc's built-in one reads XML too). The cpus, caches and nodes come from
/// hwloc's built-in Linux backend, so the machine is the same without them (`numaff topo --export`
/// wrote the same file with and without them here), but loading them (dlopen of libpciaccess,
/// OpenCL, X11 libraries) took half of the discovery's 6.3 ms of cpu, spent before the program
/// starts (issue 5: sampling overhead).
const HWLOC_UNNEEDED_PLUGINS: &str = "hwloc_pci,hwloc_opencl,hwloc_gl,hwloc_xml_libxml";

/// This machine, discovered without [`HWLOC_UNNEEDED_PLUGINS`] unless the user set hwloc's list
/// (`HWLOC_PLUGINS_BLACKLIST`, hwloc 2.x). The variable is removed again before the program is
/// started, which gets numaff's environment.
fn discover_machine() -> numaff_machine::Result<numaff_machine::Machine> {
    const KEY: &str = "HWLOC_PLUGINS_BLACKLIST";
    if std::env::var_os(KEY).is_some() {
        return numaff_machine::discover_host();
    }
    // numaff has one thread here (the trace writer starts later), so changing the environment
    // races with no reader.
    std::env::set_var(KEY, HWLOC_UNNEEDED_PLUGINS);
    let m = numaff_machine::discover_host();
    std::env::remove_var(KEY);
    m
}

/// numaff's own cpu time and that of its waited-for children (the program), in seconds.
fn cpu_times() -> Option<(f64, f64)> {
    let get = |who| {
        // SAFETY: getrusage writes one rusage struct into a live local.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        (unsafe { libc::getrusage(who, &mut u) } == 0).then(|| {
            let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 * 1e-6;
            t(u.ru_utime) + t(u.ru_stime)
        })
    };
    Some((get(libc::RUSAGE_SELF)?, get(libc::RUSAGE_CHILDREN)?))
}

/// The machine's cpus and, indexed by cpu, the node of each.
fn cpus_and_nodes(machine: &numaff_machine::Machine) -> (Vec<u32>, Vec<u32>) {
    let cpus: Vec<u32> = machine.pus().iter().collect();
    let max_cpu = cpus.iter().copied().max().unwrap_or(0) as usize;
    let mut node_of_cpu = vec![0u32; max_cpu + 1];
    for &c in &cpus {
        node_of_cpu[c as usize] = machine.node_of_pu(c).unwrap_or(0);
    }
    (cpus, node_of_cpu)
}

/// Whether `path` holds a numaff trace: Parquet (its `PAR1` magic) or CSV whose header (the first
/// line that is not blank or a `#` comment) names `time_ns`.
fn is_trace(path: &std::path::Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    let parquet = std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && &magic == b"PAR1";
    parquet
        || numaff_behave::messages::csv_header(path)
            .ok()
            .flatten()
            .is_some_and(|h| h.iter().any(|c| c == "time_ns"))
}

/// Streams every batch of `reader` into `writer`; returns the samples written.
fn copy_batches<E>(
    reader: impl Iterator<Item = std::result::Result<Vec<Sample>, E>>,
    writer: &mut TraceWriter,
) -> Result<u64>
where
    anyhow::Error: From<E>,
{
    let mut samples = 0u64;
    for batch in reader {
        let batch = batch?;
        samples += batch.len() as u64;
        writer.write_all(&batch)?;
    }
    Ok(samples)
}

/// `numaff profile --import TRACE -o TRACE2`: a trace streamed into the format of `-o` (Parquet to
/// CSV is the CSV export; CSV to Parquet the import), the metadata kept where the format holds it.
fn convert_trace(input: &std::path::Path, output: &std::path::Path) -> Result<()> {
    let mut reader = TraceReader::open(input)?;
    let meta = reader.meta().clone();
    let mut writer = TraceWriter::create(output, &meta)?;
    let samples = copy_batches(reader.by_ref(), &mut writer)?;
    writer.finish()?;
    println!(
        "numaff: converted {samples} samples from {} to {}",
        input.display(),
        output.display()
    );
    Ok(())
}

/// `numaff profile --import PERF_TXT -o TRACE`: `perf script` text to a trace, the node of each
/// sample from its cpu on this machine. The trace is written whole or not at all.
fn import_perf_script(input: &std::path::Path, output: &std::path::Path) -> Result<()> {
    let machine = numaff_machine::discover_host().context("cannot discover this machine")?;
    let (_, node_of_cpu) = cpus_and_nodes(&machine);
    let mut reader = PerfScriptReader::open(input, node_of_cpu)?;
    let mut meta = TraceMeta {
        machine: numaff_machine::file::to_toml_string(&machine).ok(),
        command: Some(format!("imported from {}", input.display())),
        sampler: Some("perf-script".into()),
        ..TraceMeta::default()
    };
    let mut writer = TraceWriter::create(output, &meta)?;
    let samples = copy_batches(reader.by_ref(), &mut writer)?;
    if samples == 0 {
        bail!(
            "{} has no samples (is it the output of `{}`?)",
            input.display(),
            numaff_behave::perf_script::RECOMMENDED
        );
    }
    meta.thread_names = reader.thread_names().clone();
    meta.rates.insert("samples".into(), samples as f64);
    writer.append_meta(&TraceMeta {
        rates: meta.rates.clone(),
        thread_names: meta.thread_names.clone(),
        ..TraceMeta::default()
    });
    writer.finish()?;
    println!(
        "numaff: imported {samples} samples of {} threads from {}; wrote {}",
        meta.thread_names.len(),
        input.display(),
        output.display()
    );
    println!("next: numaff analyze {}", output.display());
    Ok(())
}

/// Whether a process exists and is not a zombie.
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rfind(')')
            .and_then(|i| s[i + 1..].trim_start().chars().next())
            .is_some_and(|state| state != 'Z' && state != 'X')
    })
}

/// A share as per cent, without the float noise of `/ 100 * 100` (0.7 stays 0.7).
fn percent(share: f64) -> f64 {
    (share * 100.0 * 1e9).round() / 1e9
}

/// `--induce-budget` in words.
fn budget_words(budget: Option<f64>) -> String {
    match budget {
        Some(b) => format!("{}% of the program's cpu time", percent(b)),
        None => "none".into(),
    }
}

fn describe_induce(i: Induce, rate: f64, budget: Option<f64>) -> String {
    let within = match budget {
        Some(_) => format!(", within {} (--induce-budget)", budget_words(budget)),
        None => ", no budget (--induce-budget off)".into(),
    };
    match i {
        Induce::Off => "off: each page is sampled at its first touch only".into(),
        Induce::Uffd => format!(
            "uffd agent (LD_PRELOAD), {rate} re-arms per page per second{within}: {}; cost: {}",
            induce::UFFD_SEES,
            induce::UFFD_COST
        ),
        Induce::SoftDirty => format!(
            "soft-dirty, every page re-armed every {:.3} s{within}: {}; cost: {}",
            1.0 / rate,
            induce::SOFT_DIRTY_SEES,
            induce::SOFT_DIRTY_COST
        ),
        Induce::Balancing => format!(
            "NUMA-balancing hinting faults: {}; cost: {}",
            induce::BALANCING_SEES,
            induce::BALANCING_COST
        ),
        Induce::Auto => "auto".into(),
    }
}

fn describe_status(st: i32) -> String {
    if libc::WIFEXITED(st) {
        format!("status {}", libc::WEXITSTATUS(st))
    } else if libc::WIFSIGNALED(st) {
        format!("signal {}", libc::WTERMSIG(st))
    } else {
        format!("wait status {st}")
    }
}

/// A forked child that waits for [`WaitingChild::go`] before it execs the program.
struct WaitingChild {
    pid: i32,
    go_fd: i32,
    err_fd: i32,
}

impl WaitingChild {
    fn fork(command: &[OsString], extra_env: &[(String, String)]) -> Result<Self> {
        let args: Vec<CString> = command
            .iter()
            .map(|a| {
                CString::new(a.as_bytes()).map_err(|_| anyhow!("an argument contains a NUL byte"))
            })
            .collect::<Result<_>>()?;
        let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        // The program's environment: numaff's, with `extra_env` set over it (built before the fork).
        let mut env: Vec<CString> = Vec::new();
        for (k, v) in std::env::vars_os() {
            if extra_env
                .iter()
                .any(|(ek, _)| k.as_bytes() == ek.as_bytes())
            {
                continue;
            }
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            if let Ok(c) = CString::new(kv) {
                env.push(c);
            }
        }
        for (k, v) in extra_env {
            env.push(
                CString::new(format!("{k}={v}"))
                    .map_err(|_| anyhow!("environment variable {k} contains a NUL byte"))?,
            );
        }
        let mut envp: Vec<*const libc::c_char> = env.iter().map(|a| a.as_ptr()).collect();
        envp.push(std::ptr::null());
        let mut go = [0i32; 2];
        let mut err = [0i32; 2];
        // SAFETY: pipe2 writes two fds into the arrays, which live across the calls.
        unsafe {
            if libc::pipe2(go.as_mut_ptr(), libc::O_CLOEXEC) != 0
                || libc::pipe2(err.as_mut_ptr(), libc::O_CLOEXEC) != 0
            {
                bail!("cannot create a pipe: {}", std::io::Error::last_os_error());
            }
        }
        // SAFETY: between fork and exec the child only makes async-signal-safe calls (read, close,
        // execvpe on buffers prepared before the fork, write, _exit); numaff has no other threads.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            bail!("cannot fork: {}", std::io::Error::last_os_error());
        }
        if pid == 0 {
            // SAFETY: see above.
            unsafe {
                libc::close(go[1]);
                libc::close(err[0]);
                let mut b = 0u8;
                // Go on EOF too: if numaff dies, the program runs unprofiled.
                while libc::read(go[0], (&mut b as *mut u8).cast(), 1) < 0
                    && *libc::__errno_location() == libc::EINTR
                {}
                libc::close(go[0]);
                libc::execvpe(argv[0], argv.as_ptr(), envp.as_ptr());
                let e = *libc::__errno_location();
                libc::write(err[1], (&e as *const i32).cast(), 4);
                libc::_exit(127);
            }
        }
        // SAFETY: closing our copies of the child's ends.
        unsafe {
            libc::close(go[0]);
            libc::close(err[1]);
        }
        Ok(WaitingChild {
            pid,
            go_fd: go[1],
            err_fd: err[0],
        })
    }

    /// Lets the child exec; fails if the exec failed.
    fn go(&mut self) -> Result<()> {
        let mut e = 0i32;
        // SAFETY: writes one byte from and reads 4 bytes into live locals; the fds are ours.
        let n = unsafe {
            libc::write(self.go_fd, [1u8].as_ptr().cast(), 1);
            libc::close(self.go_fd);
            self.go_fd = -1;
            let n = libc::read(self.err_fd, (&mut e as *mut i32).cast(), 4);
            libc::close(self.err_fd);
            self.err_fd = -1;
            n
        };
        if n == 4 {
            let _ = self.try_wait();
            bail!("exec failed: {}", std::io::Error::from_raw_os_error(e));
        }
        Ok(())
    }

    /// The wait status, once the child has exited.
    fn try_wait(&self) -> Result<Option<i32>> {
        let mut st = 0;
        // SAFETY: waitpid writes the status into a live local.
        let r = unsafe { libc::waitpid(self.pid, &mut st, libc::WNOHANG) };
        match r {
            0 => Ok(None),
            r if r == self.pid => Ok(Some(st)),
            _ => Err(anyhow!(
                "cannot wait for the program: {}",
                std::io::Error::last_os_error()
            )),
        }
    }

    /// Kills a child that has not exec'd yet (the samplers could not be opened).
    fn kill(self) {
        // SAFETY: plain syscalls on our own child and fds.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            let mut st = 0;
            libc::waitpid(self.pid, &mut st, 0);
            libc::close(self.go_fd);
            libc::close(self.err_fd);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{budget_words, parse_budget, parse_duration, BoundedPoll, Budget};
    use std::time::{Duration, Instant};

    #[test]
    fn issue5_induce_budget_is_per_cent_or_off() {
        assert_eq!(parse_budget("off"), Ok(Budget(None)));
        assert_eq!(parse_budget("2"), Ok(Budget(Some(0.02))));
        assert_eq!(parse_budget("0.5%"), Ok(Budget(Some(0.005))));
        for bad in ["0", "-1", "100.5", "inf", "NaN", "", "half"] {
            assert!(parse_budget(bad).is_err(), "{bad:?} accepted");
        }
        // Printed as given, without float noise (0.7 / 100 * 100 is 0.7000000000000001).
        let b = parse_budget("0.7").map(|b| b.0);
        assert_eq!(
            b.map(budget_words),
            Ok("0.7% of the program's cpu time".into())
        );
        assert_eq!(parse_budget("0.7").map(|b| b.to_string()), Ok("0.7".into()));
    }

    #[test]
    fn issue5_a_costly_proc_read_is_repeated_less_often() {
        let poll = BoundedPoll::new(Duration::from_millis(200));
        let t0 = Instant::now();
        // A cheap read (1 ms): the next one after the interval.
        let cheap = poll.next_after(t0, t0 + Duration::from_millis(1));
        assert_eq!(cheap - t0, Duration::from_millis(201));
        // A read that took 50 ms (smaps_rollup of a large program): 100 times that later, so that
        // it takes at most about 1 % of the time.
        let costly = poll.next_after(t0, t0 + Duration::from_millis(50));
        assert_eq!(costly - t0, Duration::from_millis(50 + 5000));
        // A new poll is due at once.
        assert!(poll.due());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("-1").is_err());
        assert!(parse_duration("3 parsecs").is_err());
    }
}
