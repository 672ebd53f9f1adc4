//! `numaff profile`'s arguments and the validated plan built from them: which task, which events,
//! which program, which induced faults, checked before anything is started.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use clap::Args;

use numaff_linux::induce::{self, Induce};
use numaff_linux::pmu;
use numaff_linux::sampler::{self, SamplePeriod, SamplerEvent};

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

/// What `numaff profile` was asked to do.
pub(super) enum Task<'a> {
    /// `--list-samplers`.
    ListSamplers,
    /// `--import FILE -o TRACE`: convert a trace or `perf script` text, sample nothing.
    Import {
        input: &'a PathBuf,
        output: &'a PathBuf,
    },
    /// Sample a program into a trace.
    Record(Plan<'a>),
}

/// The program whose accesses are sampled.
pub(super) enum Program<'a> {
    /// A running process (`--pid`).
    Running(i32),
    /// A command to start (after `--`).
    Command(&'a [OsString]),
}

/// A checked recording: every choice the arguments leave open is made here.
pub(super) struct Plan<'a> {
    /// The trace to write.
    pub output: &'a PathBuf,
    /// `--sampler`, as given.
    pub sampler: &'a str,
    /// The events to open.
    pub events: Vec<SamplerEvent>,
    /// Whether the events are hardware (PEBS / IBS) samples rather than page faults.
    pub hardware: bool,
    /// One event in `period` is sampled.
    pub period: SamplePeriod,
    pub program: Program<'a>,
    /// The way of inducing faults, `auto` resolved (off for hardware samplers).
    pub induce: Induce,
    /// `--induce-rate`.
    pub induce_rate: f64,
    /// `--induce-budget`: a share of the program's cpu time, or no cap.
    pub induce_budget: Option<f64>,
    /// `--duration`.
    pub duration: Option<Duration>,
}

impl<'a> Task<'a> {
    /// Checks the arguments, in this order: the sampler (and `--ldlat`), that a program is given,
    /// the induced-fault way. The first failed check is the error.
    pub(super) fn from_args(args: &'a ProfileArgs) -> Result<Self> {
        if args.list_samplers {
            return Ok(Task::ListSamplers);
        }
        // The trace's path is checked before anything is started or read.
        crate::output::check(&args.output)?;
        if let Some(input) = &args.import {
            return Ok(Task::Import {
                input,
                output: &args.output,
            });
        }
        let events = sampler_events(args)?;
        let hardware = events != [SamplerEvent::PageFaults];
        let program = match args.pid {
            Some(pid) => Program::Running(pid),
            None if args.command.is_empty() => bail!(
                "give the program to profile after --, or --pid PID (numaff profile -- ./prog args)"
            ),
            None => {
                check_program(&args.command[0])?;
                Program::Command(&args.command)
            }
        };
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
        let period = args.sample_period.unwrap_or(if hardware {
            SamplePeriod(sampler::DEFAULT_HW_PERIOD)
        } else {
            SamplePeriod::EVERY
        });
        Ok(Task::Record(Plan {
            output: &args.output,
            sampler: &args.sampler,
            events,
            hardware,
            period,
            program,
            induce,
            induce_rate: args.induce_rate,
            induce_budget: args.induce_budget.0,
            duration: args.duration,
        }))
    }
}

/// Checks that `program` can be started as execvp would find it (a path, or a name in `PATH`), so
/// that a missing program fails before anything is created or started.
fn check_program(program: &std::ffi::OsStr) -> Result<()> {
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;
    let runnable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file())
            && std::ffi::CString::new(p.as_os_str().as_bytes())
                // SAFETY: access reads a NUL-terminated string that lives across the call.
                .is_ok_and(|c| unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0)
    };
    let shown = Path::new(program).display();
    if program.as_bytes().contains(&b'/') {
        let p = Path::new(program);
        return match std::fs::metadata(p) {
            Err(e) => bail!("cannot run {shown}: {e}"),
            Ok(m) if m.is_dir() => bail!("cannot run {shown}: it is a directory"),
            Ok(_) if !runnable(p) => {
                bail!("cannot run {shown}: it is not executable (chmod +x it, or run it through its interpreter)")
            }
            Ok(_) => Ok(()),
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    if std::env::split_paths(&path).any(|d| runnable(&d.join(program))) {
        return Ok(());
    }
    bail!("cannot run {shown}: no such program in PATH (give its path, e.g. ./{shown})")
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

/// A share as per cent, without the float noise of `/ 100 * 100` (0.7 stays 0.7).
pub(super) fn percent(share: f64) -> f64 {
    (share * 100.0 * 1e9).round() / 1e9
}

/// `--induce-budget` in words.
pub(super) fn budget_words(budget: Option<f64>) -> String {
    match budget {
        Some(b) => format!("{}% of the program's cpu time", percent(b)),
        None => "none".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::{budget_words, parse_budget, parse_duration, Budget};
    use std::time::Duration;

    #[test]
    fn induce_budget_is_per_cent_or_off() {
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
    fn durations_take_ms_s_m_h_and_refuse_non_positive_or_unknown_units() {
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("-1").is_err());
        assert!(parse_duration("3 parsecs").is_err());
    }
}
