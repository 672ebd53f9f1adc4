//! `numaff apply mapping.toml [--skip MASK] -- CMD ARGS...`: launches a program and pins its threads
//! to a mapping in creation order, following threads that appear later and child processes.

use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;

use numaff_linux::affinity;
use numaff_linux::follow::{Event, Follower, SkipMask};
use numaff_machine::CpuSet;
use numaff_policy::mapping::{self, MappingFile};

#[derive(Args)]
pub struct ApplyArgs {
    /// The mapping file (`numaff map ... -o FILE`).
    #[arg(value_name = "MAPPING")]
    mapping: PathBuf,
    /// Hex mask of threads not to pin, as likwid-pin -s: bit i set = the i-th created thread (0 =
    /// the main thread) is left unpinned and takes no entry of the mapping (OpenMP shepherd, MPI
    /// progress threads).
    #[arg(long, short = 's', value_name = "MASK")]
    skip: Option<String>,
    /// How often to look for new threads and processes, in milliseconds. A new thread runs where its
    /// creator runs for up to this long before it is pinned.
    #[arg(long, value_name = "MS", default_value_t = 2.0)]
    interval: f64,
    /// Do not follow child processes.
    #[arg(long)]
    no_children: bool,
    /// Look for new child processes every N-th poll only (reading every thread's
    /// /proc/PID/task/TID/children is most of a poll's cost for programs with many threads).
    #[arg(long, value_name = "N", default_value_t = 5)]
    children_every: u32,
    /// Print every thread as it is pinned (on stderr).
    #[arg(long, short = 'v')]
    verbose: bool,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<OsString>,
}

/// Runs the program; returns its exit status (128 + signal when a signal ended it, as shells do).
pub fn run(args: &ApplyArgs) -> Result<u8> {
    if !(args.interval > 0.0 && args.interval.is_finite() && args.interval <= 10_000.0) {
        bail!(
            "--interval takes milliseconds above 0 and at most 10000, not {}",
            args.interval
        );
    }
    let skip = match &args.skip {
        Some(s) => SkipMask::parse(s).map_err(anyhow::Error::msg)?,
        None => SkipMask::default(),
    };
    let file = MappingFile::load(&args.mapping)?;
    // What numaff itself may use: the cpus of threads that are not pinned.
    let allowed = affinity::get(0).context("cannot read numaff's own cpu affinity")?;
    for (i, &pu) in file.placement.iter().enumerate() {
        if !allowed.contains(pu) {
            bail!(
                "{}: task {i} is mapped to PU {pu}, which this process may not use (allowed: {allowed}); \
                 compute the mapping for this machine (`numaff map --machine host ...`)",
                args.mapping.display()
            );
        }
    }
    match numaff_machine::discover_host() {
        Ok(host) if !file.matches(&host) => eprintln!(
            "numaff: warning: {} was computed for machine {} ({}, {}), which is not this machine \
             ({}, {}); the PUs exist here, so it is applied as written",
            args.mapping.display(),
            file.machine.name,
            file.machine.summary.as_deref().unwrap_or("?"),
            file.machine.fingerprint,
            mapping::summary(&host),
            mapping::fingerprint(&host),
        ),
        Ok(_) => {}
        Err(e) => eprintln!("numaff: warning: cannot check the mapping's machine: {e}"),
    }
    let slots: Vec<CpuSet> = file
        .placement
        .iter()
        .map(|&pu| std::iter::once(pu).collect())
        .collect();

    let (prog, rest) = args
        .command
        .split_first()
        .context("give the program to run after --")?;
    let mut cmd = Command::new(prog);
    cmd.args(rest);
    // The main thread starts on its PU (unless skipped): threads it creates before the first poll
    // then start there too rather than anywhere. Only a raw syscall runs between fork and exec.
    if !skip.skips(0) {
        let mask = affinity::to_mask(&slots[0]);
        // SAFETY: the closure only makes the sched_setaffinity syscall on a buffer allocated before
        // the fork, which is async-signal-safe; its failure is ignored (the first poll reports it).
        unsafe {
            cmd.pre_exec(move || {
                libc::syscall(
                    libc::SYS_sched_setaffinity,
                    0 as libc::pid_t,
                    mask.len() * std::mem::size_of::<libc::c_ulong>(),
                    mask.as_ptr(),
                );
                Ok(())
            });
        }
    }
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot run {}", prog.to_string_lossy()))?;
    // Ctrl-C and Ctrl-\ reach the program (same process group); numaff stays to report its status.
    // Set after the spawn so that the program does not inherit the ignored dispositions.
    // SAFETY: changing signal dispositions to SIG_IGN has no memory-safety preconditions.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
    }
    let pid = child.id() as i32;
    let mut follower = Follower::new(pid, slots, skip, allowed);
    follower.follow_children(!args.no_children);
    follower.children_every(args.children_every);
    let interval = Duration::from_secs_f64(args.interval / 1000.0);
    let start = Instant::now();
    let mut warned_beyond = false;
    let mut polls = 0u64;
    let mut poll_time = Duration::ZERO;
    let status = loop {
        let t = Instant::now();
        let events = follower.poll();
        poll_time += t.elapsed();
        polls += 1;
        for e in events {
            report(&e, args.verbose, file.placement.len(), &mut warned_beyond);
        }
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => std::thread::sleep(interval),
            Err(e) => bail!("cannot wait for {}: {e}", prog.to_string_lossy()),
        }
    };
    let tasks = file.placement.len();
    let used = follower.slots_used();
    if used < tasks {
        eprintln!(
            "numaff: warning: the mapping has {tasks} tasks but the program created {used} \
             threads to pin; tasks {used} to {} were not used, so the mapping may not be meant \
             for this program (map it again from a trace of this program, or with --tasks {used})",
            tasks - 1
        );
    }
    if args.verbose {
        let wall = start.elapsed();
        eprintln!(
            "numaff: {} threads seen, {} pinned; {polls} polls in {:.3} s, {:.1} µs each \
             ({:.2}% of one cpu)",
            follower.threads_seen(),
            follower.slots_used(),
            wall.as_secs_f64(),
            poll_time.as_secs_f64() * 1e6 / polls.max(1) as f64,
            100.0 * poll_time.as_secs_f64() / wall.as_secs_f64().max(1e-9)
        );
    }
    Ok(match (status.code(), status.signal()) {
        (Some(c), _) => c as u8,
        (None, Some(s)) => (128 + s) as u8,
        _ => 1,
    })
}

fn report(e: &Event, verbose: bool, slots: usize, warned_beyond: &mut bool) {
    match e {
        Event::Pinned {
            index,
            pid,
            tid,
            slot,
            cpus,
        } if verbose => {
            eprintln!("numaff: thread {index} (pid {pid}, tid {tid}) -> task {slot}, PU {cpus}")
        }
        Event::Skipped { index, pid, tid } if verbose => {
            eprintln!("numaff: thread {index} (pid {pid}, tid {tid}) skipped by the mask")
        }
        Event::Process { pid, parent } if verbose => {
            eprintln!("numaff: following process {pid} (child of {parent})")
        }
        Event::Beyond { index, pid, tid } => {
            if !*warned_beyond {
                *warned_beyond = true;
                eprintln!(
                    "numaff: warning: more threads than the mapping has tasks ({slots}): thread \
                     {index} (pid {pid}, tid {tid}) and later ones are not pinned"
                );
            } else if verbose {
                eprintln!("numaff: thread {index} (pid {pid}, tid {tid}) not pinned");
            }
        }
        Event::Failed { index, tid, error } => {
            eprintln!("numaff: warning: thread {index} (tid {tid}) not pinned: {error}")
        }
        _ => {}
    }
}
