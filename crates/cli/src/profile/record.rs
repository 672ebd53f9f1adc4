//! Recording a program: the uffd agent's set-up, the machine, the samplers opened on a held child
//! or a running process, and the loop that drains them into the trace writer until the end.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use numaff_behave::{Sample, TraceMeta};
use numaff_linux::induce::{self, AgentStatus, Induce, SoftDirtyRearmer};
use numaff_linux::launch::WaitingChild;
use numaff_linux::sampler::{self, AccessSampler};
use numaff_machine::Machine;

use super::plan::{Plan, Program};
use super::writer::{BackgroundWriter, WRITE_BATCH};

/// The uffd agent (`--induce uffd`): written next to the trace's temporary files, its status files
/// beside it.
pub(super) struct Agent {
    dir: PathBuf,
    status_prefix: PathBuf,
    /// What the program's environment gets (LD_PRELOAD and the agent's settings); empty without
    /// the agent.
    pub env: Vec<(String, String)>,
}

impl Agent {
    /// Writes the agent's library when the plan induces faults through it.
    pub(super) fn install(plan: &Plan) -> Result<Self> {
        let dir = std::env::temp_dir();
        let status_prefix = dir.join(format!("numaff-induce-{}", std::process::id()));
        let env = if plan.induce == Induce::Uffd {
            let so = induce::install_agent(&dir).with_context(|| {
                format!(
                    "cannot write numaff's agent into {} (set TMPDIR to a writable directory, or use --induce off)",
                    dir.display()
                )
            })?;
            induce::agent_env(&so, plan.induce_rate, plan.induce_budget, &status_prefix)
        } else {
            Vec::new()
        };
        Ok(Agent {
            dir,
            status_prefix,
            env,
        })
    }

    /// The agent's own thread in `pid`, once its status names it (its status file is kept).
    fn thread(&self, pid: i32) -> Option<u32> {
        if self.env.is_empty() {
            return None;
        }
        induce::agent_status(&self.status_prefix, pid)?.tid
    }

    /// What the agent in `pid` reported, if it did; its status files are removed.
    pub(super) fn take_status(&self, pid: i32) -> Option<AgentStatus> {
        let status = induce::agent_status(&self.status_prefix, pid);
        if let Ok(rd) = std::fs::read_dir(&self.dir) {
            let prefix = self
                .status_prefix
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
        status
    }
}

/// hwloc's plugins that profiling does not need: I/O devices (numaff keeps no I/O objects) and the
/// libxml2 XML backend (hwloc's built-in one reads XML too). The cpus, caches and nodes come from
/// hwloc's built-in Linux backend, so the machine is the same without them, but loading them
/// (dlopen of libpciaccess, OpenCL, X11 libraries) costs cpu time before the program starts.
const HWLOC_UNNEEDED_PLUGINS: &str = "hwloc_pci,hwloc_opencl,hwloc_gl,hwloc_xml_libxml";

/// This machine, discovered without [`HWLOC_UNNEEDED_PLUGINS`] unless the user set hwloc's list
/// (`HWLOC_PLUGINS_BLACKLIST`, hwloc 2.x). The variable is removed again before the program is
/// started, which gets numaff's environment.
pub(super) fn discover_machine() -> numaff_machine::Result<Machine> {
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

/// The machine's cpus and, indexed by cpu, the node of each.
pub(super) fn cpus_and_nodes(machine: &Machine) -> (Vec<u32>, Vec<u32>) {
    let cpus: Vec<u32> = machine.pus().iter().collect();
    let max_cpu = cpus.iter().copied().max().unwrap_or(0) as usize;
    let mut node_of_cpu = vec![0u32; max_cpu + 1];
    for &c in &cpus {
        node_of_cpu[c as usize] = machine.node_of_pu(c).unwrap_or(0);
    }
    (cpus, node_of_cpu)
}

/// The process being sampled and its samplers.
pub(super) struct Target {
    /// The process's pid.
    pub pid: i32,
    /// One sampler for a started command, one per thread of a running process.
    pub samplers: Vec<AccessSampler>,
    /// The started command, held before its exec until [`sample`] lets it go.
    child: Option<WaitingChild>,
    /// The command line, for the trace and messages.
    pub command_line: String,
    /// A running process's cpu time when the samplers were opened, in seconds.
    pub cpu_at_start: Option<f64>,
}

impl Target {
    /// Opens the samplers: on a waiting child (a command) or on each thread of a running process.
    pub(super) fn open(
        plan: &Plan,
        machine: &Machine,
        agent: &Agent,
        command_line: String,
    ) -> Result<Self> {
        let (cpus, node_of_cpu) = cpus_and_nodes(machine);
        match plan.program {
            Program::Running(pid) => {
                let threads = numaff_linux::tasks::threads(pid)?;
                let mut v = Vec::new();
                // A program started by an earlier `numaff profile` may still hold its agent.
                for t in threads
                    .iter()
                    .filter(|t| t.name != induce::AGENT_THREAD_NAME)
                {
                    v.push(AccessSampler::open_events(
                        t.tid,
                        &cpus,
                        node_of_cpu.clone(),
                        false,
                        sampler::RING_DATA_PAGES,
                        &plan.events,
                        plan.period,
                    )?);
                }
                Ok(Target {
                    pid,
                    samplers: v,
                    child: None,
                    command_line,
                    cpu_at_start: process_cpu_s(pid),
                })
            }
            Program::Command(command) => {
                let child = WaitingChild::fork(command, &agent.env)?;
                // Large rings (within a fixed budget shared by every cpu's events): the reader may
                // fall behind the program for longer, and wakes up less often.
                let ring = sampler::ring_pages_for(cpus.len() * plan.events.len());
                let s = match AccessSampler::open_events(
                    child.pid(),
                    &cpus,
                    node_of_cpu.clone(),
                    true,
                    ring,
                    &plan.events,
                    plan.period,
                ) {
                    Ok(s) => s,
                    Err(e) => {
                        child.kill();
                        return Err(e.into());
                    }
                };
                Ok(Target {
                    pid: child.pid(),
                    samplers: vec![s],
                    child: Some(child),
                    command_line,
                    cpu_at_start: None,
                })
            }
        }
    }
}

/// The program's command line, for the trace and messages: the command given, or a running
/// process's /proc/PID/cmdline.
pub(super) fn command_line(plan: &Plan) -> String {
    match plan.program {
        Program::Running(pid) => std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|b| {
                b.split(|&c| c == 0)
                    .filter(|a| !a.is_empty())
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_else(|_| format!("pid {pid}")),
        Program::Command(command) => command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" "),
    }
}

/// The soft-dirty re-armer of `--induce soft-dirty`, within the budget.
pub(super) fn soft_dirty_rearmer(plan: &Plan, pid: i32) -> Option<SoftDirtyRearmer> {
    (plan.induce == Induce::SoftDirty).then(|| {
        let budget = plan
            .induce_budget
            .map(|b| induce::InduceBudget::new(b, induce::FAULT_COST_NS));
        SoftDirtyRearmer::new(pid, plan.induce_rate, budget)
    })
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// SIGINT and SIGTERM end the recording (the trace is still finished) instead of numaff.
/// Installed after the fork, so that the program keeps the default dispositions.
pub(super) fn stop_on_signals() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
}

/// The trace's metadata known before sampling: the machine, the command, the sampler, the page size.
pub(super) fn trace_meta(plan: &Plan, machine: &Machine, command_line: &str) -> TraceMeta {
    let page_size = {
        // SAFETY: sysconf has no memory-safety preconditions.
        let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        (p > 0).then_some(p as u64)
    };
    TraceMeta {
        machine: numaff_machine::file::to_toml_string(machine).ok(),
        command: Some(command_line.to_string()),
        sampler: Some(plan.sampler.to_string()),
        page_size,
        ..TraceMeta::default()
    }
}

/// How a recording ended.
pub(super) struct Recorded {
    /// From the program's start (or the samplers', for a running process) to the end.
    pub wall: Duration,
    /// The started command's wait status, when it exited.
    pub status: Option<i32>,
    /// What ended the recording, in words.
    pub stopped_by: &'static str,
    /// The most anonymous memory the program had in transparent huge pages, in bytes.
    pub thp_bytes_max: u64,
}

/// numaff's own threads in the program (the uffd agent's): their samples and names are left out
/// of the trace, since they are no task of the program.
#[derive(Default)]
struct OwnThreads {
    tids: Vec<u32>,
    /// Whether the agent's status named its thread (then it is not looked up again).
    agent_known: bool,
}

impl OwnThreads {
    fn contains(&self, tid: u32) -> bool {
        self.tids.contains(&tid)
    }

    fn add(&mut self, tid: u32) -> bool {
        let new = !self.contains(tid);
        if new {
            self.tids.push(tid);
        }
        new
    }

    /// Learns the agent's thread from its status; true when it is new.
    fn learn_agent(&mut self, agent: &Agent, pid: i32) -> bool {
        if self.agent_known {
            return false;
        }
        match agent.thread(pid) {
            Some(tid) => {
                self.agent_known = true;
                self.add(tid)
            }
            None => false,
        }
    }
}

/// Lets a started command go, then drains the samplers into `writer` until the program exits,
/// `--duration` elapses or a signal comes; thread names go into `meta` as they are seen.
/// numaff's own threads (the agent's) are left out of both.
pub(super) fn sample(
    plan: &Plan,
    agent: &Agent,
    target: &mut Target,
    soft_dirty: &mut Option<SoftDirtyRearmer>,
    writer: &BackgroundWriter,
    meta: &mut TraceMeta,
) -> Result<Recorded> {
    let mut pending: Vec<Sample> = Vec::with_capacity(WRITE_BATCH);
    let start = Instant::now();
    if let Some(c) = &mut target.child {
        c.go()
            .with_context(|| format!("cannot run {}", target.command_line))?;
    }
    let mut names_poll = BoundedPoll::new(Duration::from_millis(200));
    let mut thp_poll = BoundedPoll::new(Duration::from_millis(200));
    let mut thp_bytes_max: u64 = 0;
    let mut status = None;
    let mut stopped_by = "the program exited";
    let mut own = OwnThreads::default();
    loop {
        if own.learn_agent(agent, target.pid) {
            pending.retain(|x| !own.contains(x.tid));
        }
        if let Some(s) = target.samplers.first() {
            let wait = soft_dirty.as_ref().map_or(Duration::from_millis(50), |r| {
                r.until_due().min(Duration::from_millis(50))
            });
            s.wait(wait);
        }
        if let Some(r) = soft_dirty {
            // The process may be exiting: a failed re-arm ends re-arming, not the profile.
            if let Err(e) = r.tick() {
                if alive(target.pid) {
                    eprintln!("numaff: soft-dirty re-arming stopped: {e}");
                }
                *soft_dirty = None;
            }
        }
        for s in &mut target.samplers {
            s.drain(&mut |x| {
                if !own.contains(x.tid) {
                    pending.push(x)
                }
            });
        }
        if pending.len() >= WRITE_BATCH
            && !writer.send(std::mem::replace(&mut pending, writer.empty_batch()))
        {
            break; // the writer failed: its error comes from finish()
        }
        if names_poll.due() {
            let began = Instant::now();
            if let Ok(threads) = numaff_linux::tasks::threads(target.pid) {
                for t in threads {
                    let tid = t.tid as u32;
                    if t.name == induce::AGENT_THREAD_NAME {
                        if own.add(tid) {
                            pending.retain(|x| x.tid != tid);
                        }
                    } else if !own.contains(tid) {
                        meta.thread_names.insert(tid, t.name);
                    }
                }
            }
            names_poll.done(began);
        }
        if thp_poll.due() {
            let began = Instant::now();
            // The program's smaps_rollup walks its page tables: read only when the system has
            // huge pages at all (meminfo, cheap), and no more often than its cost allows.
            if numaff_linux::thp::system_anon_huge_bytes().is_some_and(|b| b > 0) {
                if let Some(b) = numaff_linux::thp::anon_huge_bytes(target.pid) {
                    thp_bytes_max = thp_bytes_max.max(b);
                }
            }
            thp_poll.done(began);
        }
        match &target.child {
            Some(c) => {
                if let Some(st) = c.try_wait()? {
                    status = Some(st);
                    break;
                }
            }
            None => {
                if !alive(target.pid) {
                    break;
                }
            }
        }
        if plan.duration.is_some_and(|d| start.elapsed() >= d) {
            stopped_by = "--duration elapsed";
            break;
        }
        if STOP.load(Ordering::SeqCst) {
            stopped_by = "interrupted";
            break;
        }
    }
    let wall = start.elapsed();
    own.learn_agent(agent, target.pid);
    for s in &mut target.samplers {
        s.drain(&mut |x| pending.push(x));
    }
    pending.retain(|x| !own.contains(x.tid));
    for tid in &own.tids {
        meta.thread_names.remove(tid);
    }
    writer.send(pending);
    Ok(Recorded {
        wall,
        status,
        stopped_by,
        thp_bytes_max,
    })
}

/// A periodic read of the program's /proc files whose own cost bounds its rate: the next read is
/// due after the interval or after [`BoundedPoll::COST_FACTOR`] times what the last one took,
/// whichever is longer, so that it takes at most about 1 % of a cpu (smaps_rollup of a large
/// program walks its page tables under the program's mmap lock).
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

/// A process's cpu time so far (user and system, all its threads), in seconds, from
/// /proc/PID/stat; `None` once it is gone.
pub(super) fn process_cpu_s(pid: i32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name: state is field 3, utime and stime fields 14 and 15.
    let rest = &s[s.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no memory-safety preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then(|| ticks as f64 / hz as f64)
}

/// Whether a process exists and is not a zombie.
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rfind(')')
            .and_then(|i| s[i + 1..].trim_start().chars().next())
            .is_some_and(|state| state != 'Z' && state != 'X')
    })
}

#[cfg(test)]
mod tests {
    use super::BoundedPoll;
    use std::time::{Duration, Instant};

    #[test]
    fn a_costly_proc_read_is_repeated_less_often() {
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
}
