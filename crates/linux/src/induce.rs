//! Induced extra page faults for `numaff profile` (kMAF §4.2.2, without a kernel module): re-arm
//! pages after their first touch so that the page-fault sampler sees them again, and by whom.
//!
//! kMAF clears the present bit of a share of the application's pages periodically, the share
//! scaling with the memory it uses. numaff cannot touch page tables, so it asks the kernel, in one of
//! these ways (`--induce`):
//!
//! - **uffd**: an in-process agent (`agent/numaff_agent.c`, loaded with `LD_PRELOAD`) write-protects
//!   a rotating share of the program's private anonymous pages through userfaultfd in asynchronous
//!   mode (`UFFD_FEATURE_WP_ASYNC`, Linux ≥ 6.7: the kernel resolves the next write itself, so no
//!   thread blocks, no system call gets `EFAULT`, no signal handler exists), and unmaps a rotating
//!   share of its *shared* memory with `MADV_DONTNEED` (the data stays in the page cache; the next
//!   read *or* write maps it back). Private pages show writes only; shared pages reads and writes.
//! - **soft-dirty**: numaff writes `4` to `/proc/PID/clear_refs`, which write-protects every page
//!   of the process (needs `CONFIG_MEM_SOFT_DIRTY`); the kernel resolves the next write. All pages
//!   at once, so the rate sets the period; writes only; works for `--pid` and static programs.
//! - **balancing**: the hinting faults of `kernel.numa_balancing`, when the administrator enabled
//!   it (numaff never does): reads and writes, at the kernel's scan rate; the kernel also migrates
//!   pages, and VMAs with an mbind policy are not scanned.
//!
//! All three are ordinary user-mode page faults, which the `PAGE_FAULTS` software event counts and
//! samples with the faulting thread and address (measured: see README, "numaff profile").
//! mprotect-based re-arming is deliberately absent (it splits mappings up to vm.max_map_count and
//! makes system calls on protected pages fail with EFAULT).

use std::fmt;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The agent, built by build.rs from `agent/numaff_agent.c`.
pub const AGENT_SO: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libnumaff_agent.so"));

/// Default re-arms per page per second (`--induce-rate`).
pub const DEFAULT_RATE: f64 = 0.1;

/// The agent's tick: it re-arms `rate × tick` of the eligible pages every tick.
pub const AGENT_TICK_MS: u64 = 100;

/// Default share of the program's cpu time that induced faults may cost (`--induce-budget`):
/// 0.5 %, so that with the first-touch sampler's own cost (about 1.1 % of a memory-bound
/// program's cpu time on a 512 MiB, 2-thread run, README) profiling stays within 2 % of the
/// program's cpu time.
pub const DEFAULT_BUDGET: f64 = 0.005;

/// The cost of one induced fault the budget assumes, in ns: the uffd write fault with its sample,
/// measured inside the program under `numaff profile` (1.42-1.52 µs), plus numaff reading and
/// writing that sample (0.25 µs: its cpu time with and without induced faults, over their count).
/// A re-armed page in memory is counted as one fault, the most it can make before it is re-armed
/// again; one not in memory (mincore, for the agent) as none: re-arming it makes no fault.
pub const FAULT_COST_NS: f64 = 1700.0;

/// The overhead budget of induced faults, a token bucket in ns of cpu time: the program's cpu
/// time earns `share` of itself, the re-arming's own cpu time is paid from it, and re-arming `n`
/// resident pages costs `n × fault_ns` (each faults at most once before its next re-arm, so the
/// induced faults cost at most `share` of the program's cpu time). The bucket holds at most one
/// full re-arm's worth, so an idle program banks nothing for later bursts. The uffd agent
/// (`agent/numaff_agent.c`, `earn` and `affordable`) keeps the same account in C.
#[derive(Debug, Clone, PartialEq)]
pub struct InduceBudget {
    share: f64,
    fault_ns: f64,
    credit_ns: f64,
}

impl InduceBudget {
    /// A budget of `share` (0 < share ≤ 1) of the program's cpu time, `fault_ns` per induced fault.
    pub fn new(share: f64, fault_ns: f64) -> InduceBudget {
        InduceBudget {
            share,
            fault_ns: fault_ns.max(1.0),
            credit_ns: 0.0,
        }
    }

    /// Credits `share` of `program_ns` of the program's cpu time, pays `own_ns` of re-arming.
    pub fn earn(&mut self, program_ns: f64, own_ns: f64) {
        self.credit_ns += self.share * program_ns.max(0.0) - own_ns.max(0.0);
    }

    /// How many of `want` pages may be re-armed now (all or none when `whole`, as clear_refs
    /// re-arms every page at once); spends their cost. Caps the credit at `want` pages' cost.
    pub fn take(&mut self, want: u64, whole: bool) -> u64 {
        let cost = want as f64 * self.fault_ns;
        self.credit_ns = self.credit_ns.min(cost);
        let fit = (self.credit_ns.max(0.0) / self.fault_ns).floor() as u64;
        let n = match whole {
            true if fit >= want => want,
            true => 0,
            false => fit.min(want),
        };
        self.credit_ns -= n as f64 * self.fault_ns;
        n
    }

    /// The share of the program's cpu time.
    pub fn share(&self) -> f64 {
        self.share
    }
}

/// A way of inducing faults, as given to `--induce`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Induce {
    /// The best that works here (see [`choose`]).
    Auto,
    /// The LD_PRELOAD userfaultfd agent.
    Uffd,
    /// `/proc/PID/clear_refs` soft-dirty re-arming.
    SoftDirty,
    /// NUMA-balancing hinting faults (only listened to).
    Balancing,
    /// No induced faults: each page is sampled at its first touch only.
    Off,
}

impl Induce {
    /// The name `--induce` takes.
    pub fn name(self) -> &'static str {
        match self {
            Induce::Auto => "auto",
            Induce::Uffd => "uffd",
            Induce::SoftDirty => "soft-dirty",
            Induce::Balancing => "balancing",
            Induce::Off => "off",
        }
    }
}

impl std::str::FromStr for Induce {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "auto" => Induce::Auto,
            "uffd" => Induce::Uffd,
            "soft-dirty" => Induce::SoftDirty,
            "balancing" => Induce::Balancing,
            "off" => Induce::Off,
            _ => {
                return Err(format!(
                    "unknown --induce {s:?}: use auto, uffd, soft-dirty, balancing or off"
                ))
            }
        })
    }
}

impl fmt::Display for Induce {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One way of inducing faults and whether it works on this machine.
#[derive(Debug, Clone, PartialEq)]
pub struct InduceOption {
    /// The way.
    pub induce: Induce,
    /// Whether it works here.
    pub available: bool,
    /// Whether it works in full here (uffd: private memory too, not only shared memory).
    pub full: bool,
    /// Why it does or does not.
    pub why: String,
    /// What the extra faults show.
    pub sees: &'static str,
    /// Measured cost per induced fault (README, "numaff profile").
    pub cost: &'static str,
}

impl fmt::Display for InduceOption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = if self.available {
            "available"
        } else {
            "unavailable"
        };
        writeln!(f, "{:<18} {state}: {}", self.induce.name(), self.why)?;
        writeln!(f, "{:<18} sees: {}", "", self.sees)?;
        write!(f, "{:<18} cost: {}", "", self.cost)
    }
}

/// What the uffd agent's faults show.
pub const UFFD_SEES: &str = "writes to private anonymous pages (heap, mmap); reads and writes to \
     shared memory (MAP_SHARED anonymous, memfd, /dev/shm, SysV); a rotating share of the pages \
     re-armed every 100 ms; programs linked dynamically only (LD_PRELOAD)";
/// What soft-dirty faults show.
pub const SOFT_DIRTY_SEES: &str =
    "writes to any private page of the process, all pages re-armed at \
     once every 1/rate seconds; works with --pid and static programs";
/// What hinting faults show.
pub const BALANCING_SEES: &str = "reads and writes of pages the kernel's NUMA balancing unmapped \
     (its scan rate, not --induce-rate); the kernel also migrates those pages itself";

/// Measured cost per induced fault of the uffd agent.
pub const UFFD_COST: &str = "measured inside the program 1.1-1.3 µs per induced write fault \
     on private memory at the default rate (1.4-1.5 µs with its sample), 2.8-6.8 µs per re-armed \
     shared page (Linux 6.18 on a 2-cpu KVM guest, README)";
/// Measured cost per induced fault of soft-dirty re-arming.
pub const SOFT_DIRTY_COST: &str = "measured 2.9-6.3 µs per induced write fault in a QEMU TCG \
     guest (emulated, indicative only; README), plus a clear_refs page-table walk per period and \
     the sampler's cost per sample";

/// Measured cost per NUMA-balancing hinting fault.
pub const BALANCING_COST: &str = "measured inside the program 1.4-3.3 µs per hinting fault (the \
     kernel's scan included; one node, no migration: Linux 6.18 on a 2-cpu KVM guest, README), \
     the kernel's page migrations on top; present whether or not numaff listens";

/// `userfaultfd` with `UFFD_FEATURE_WP_ASYNC` in this process: `Ok("full")`, `Ok("user-mode-only")`
/// or why not. The agent makes the same calls in the profiled program.
pub fn uffd_async_probe() -> Result<&'static str, String> {
    const UFFD_USER_MODE_ONLY: libc::c_int = 1;
    const UFFD_API: u64 = 0xAA;
    const UFFD_FEATURE_WP_ASYNC: u64 = 1 << 15;
    // _IOWR(0xAA, 0x3F, struct uffdio_api) with sizeof(struct uffdio_api) = 24.
    const UFFDIO_API: libc::c_ulong = 0xC018_AA3F;
    #[repr(C)]
    struct UffdioApi {
        api: u64,
        features: u64,
        ioctls: u64,
    }
    let flags = libc::O_CLOEXEC | libc::O_NONBLOCK;
    // SAFETY: userfaultfd takes flags only and returns a new fd or -1.
    let mut fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) } as libc::c_int;
    let mut mode = "full";
    if fd < 0 {
        let e = io::Error::last_os_error();
        if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) {
            // SAFETY: as above.
            fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags | UFFD_USER_MODE_ONLY) }
                as libc::c_int;
            mode = "user-mode-only";
        }
        if fd < 0 {
            return Err(format!(
                "userfaultfd: {} (vm.unprivileged_userfaultfd, or a kernel without \
                 CONFIG_USERFAULTFD)",
                io::Error::last_os_error()
            ));
        }
    }
    let mut api = UffdioApi {
        api: UFFD_API,
        features: UFFD_FEATURE_WP_ASYNC,
        ioctls: 0,
    };
    // SAFETY: UFFDIO_API reads and writes one struct uffdio_api, which lives across the call.
    let r = unsafe { libc::ioctl(fd, UFFDIO_API, &mut api as *mut UffdioApi) };
    let err = io::Error::last_os_error();
    // SAFETY: closing the fd opened above.
    unsafe { libc::close(fd) };
    if r != 0 {
        return Err(format!(
            "userfaultfd works but not asynchronous write-protection (UFFD_FEATURE_WP_ASYNC, \
             Linux 6.7 or later): {err}"
        ));
    }
    Ok(mode)
}

/// Whether this kernel tracks soft-dirty bits (CONFIG_MEM_SOFT_DIRTY), by pagemap bit 55.
pub fn soft_dirty_available() -> Option<bool> {
    crate::sampler::soft_dirty_probe()
}

/// The ways of inducing faults and whether each works here (for a command, or for `--pid`).
pub fn options() -> Vec<InduceOption> {
    let uffd = uffd_async_probe();
    let sd = soft_dirty_available();
    let nb = crate::balancing::numa_balancing();
    vec![
        InduceOption {
            induce: Induce::Uffd,
            // Shared memory needs no userfaultfd: the agent works, if only there.
            available: true,
            full: uffd.is_ok(),
            why: match &uffd {
                Ok(m) => format!(
                    "userfaultfd with asynchronous write-protection works ({m}); \
                     for a command only (not --pid)"
                ),
                Err(e) => format!("shared memory only: {e}; for a command only (not --pid)"),
            },
            sees: UFFD_SEES,
            cost: UFFD_COST,
        },
        InduceOption {
            induce: Induce::SoftDirty,
            available: sd == Some(true),
            full: sd == Some(true),
            why: match sd {
                Some(true) => "CONFIG_MEM_SOFT_DIRTY: /proc/PID/clear_refs 4 re-arms writes".into(),
                Some(false) => "this kernel has no CONFIG_MEM_SOFT_DIRTY (pagemap bit 55 is never \
                                set; clear_refs 4 does nothing)"
                    .into(),
                None => "cannot read /proc/self/pagemap to tell whether this kernel has \
                         CONFIG_MEM_SOFT_DIRTY"
                    .into(),
            },
            sees: SOFT_DIRTY_SEES,
            cost: SOFT_DIRTY_COST,
        },
        InduceOption {
            induce: Induce::Balancing,
            available: nb.as_ref().is_ok_and(|b| b.is_enabled()),
            full: nb.as_ref().is_ok_and(|b| b.is_enabled()),
            why: match &nb {
                Ok(b) if b.is_enabled() => {
                    format!("kernel.numa_balancing is on ({b:?}): its hinting faults are sampled")
                }
                Ok(b) => format!(
                    "kernel.numa_balancing is {b:?} (numaff does not enable it; an administrator \
                     can: sysctl kernel.numa_balancing=1)"
                ),
                Err(e) => format!("cannot read kernel.numa_balancing: {e}"),
            },
            sees: BALANCING_SEES,
            cost: BALANCING_COST,
        },
    ]
}

/// What `--induce auto` picks among `opts` (from [`options`]): the uffd agent for a command where
/// it re-arms private memory too, else soft-dirty, else NUMA-balancing hinting faults, else the
/// agent for shared memory only (a command), else off.
pub fn choose(opts: &[InduceOption], for_command: bool) -> Induce {
    let ok = |i: Induce| opts.iter().any(|o| o.induce == i && o.available);
    let full = |i: Induce| opts.iter().any(|o| o.induce == i && o.available && o.full);
    if for_command && full(Induce::Uffd) {
        Induce::Uffd
    } else if ok(Induce::SoftDirty) {
        Induce::SoftDirty
    } else if ok(Induce::Balancing) {
        Induce::Balancing
    } else if for_command && ok(Induce::Uffd) {
        Induce::Uffd
    } else {
        Induce::Off
    }
}

/// Resolves `--induce`: `Auto` to the choice, an explicit way to itself if it works here, else an
/// error that says why and what to do.
pub fn resolve(asked: Induce, opts: &[InduceOption], for_command: bool) -> Result<Induce, String> {
    match asked {
        Induce::Auto => Ok(choose(opts, for_command)),
        Induce::Off => Ok(Induce::Off),
        Induce::Uffd if !for_command => Err(
            "--induce uffd needs a command to start (the agent is loaded with LD_PRELOAD); with \
             --pid use --induce soft-dirty or balancing"
                .into(),
        ),
        i => match opts.iter().find(|o| o.induce == i) {
            Some(o) if o.available => Ok(i),
            Some(o) => Err(format!(
                "--induce {i} does not work here: {} (see numaff profile --list-samplers; \
                 --induce auto picks what works)",
                o.why
            )),
            None => Err(format!("--induce {i} is not known here")),
        },
    }
}

/// Writes the agent to `dir` (once per content) and returns its path.
pub fn install_agent(dir: &Path) -> io::Result<PathBuf> {
    let sum = AGENT_SO.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    let path = dir.join(format!("numaff-agent-{sum:016x}.so"));
    if fs::read(&path).is_ok_and(|b| b == AGENT_SO) {
        return Ok(path);
    }
    let tmp = dir.join(format!(
        "numaff-agent-{sum:016x}.{}.tmp",
        std::process::id()
    ));
    {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(AGENT_SO)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, &path)?;
    Ok(path)
}

/// The environment the agent reads: (name, value) pairs to add to the program's.
/// `budget` is the share of the program's cpu time the induced faults may cost (None: no cap).
pub fn agent_env(
    agent: &Path,
    rate: f64,
    budget: Option<f64>,
    status_prefix: &Path,
) -> Vec<(String, String)> {
    let preload = match std::env::var("LD_PRELOAD") {
        Ok(p) if !p.is_empty() => format!("{} {p}", agent.display()),
        _ => agent.display().to_string(),
    };
    vec![
        ("LD_PRELOAD".into(), preload),
        ("NUMAFF_INDUCE_RATE".into(), format!("{rate}")),
        // 0: no budget.
        (
            "NUMAFF_INDUCE_BUDGET".into(),
            format!("{}", budget.unwrap_or(0.0)),
        ),
        ("NUMAFF_INDUCE_FAULT_NS".into(), format!("{FAULT_COST_NS}")),
        ("NUMAFF_INDUCE_TICK_MS".into(), AGENT_TICK_MS.to_string()),
        (
            "NUMAFF_INDUCE_STATUS".into(),
            status_prefix.display().to_string(),
        ),
        // The agent stops (and removes its status file) once this process is gone.
        ("NUMAFF_INDUCE_OWNER".into(), std::process::id().to_string()),
    ]
}

/// The name of the agent's thread in the program: numaff's own, no task of the program, so left
/// out of traces.
pub const AGENT_THREAD_NAME: &str = "numaff-agent";

/// The agent's status line for process `pid` (`key=value` words), if it wrote one.
pub fn agent_status(status_prefix: &Path, pid: i32) -> Option<AgentStatus> {
    let mut p = status_prefix.as_os_str().to_owned();
    p.push(format!(".{pid}"));
    let text = fs::read_to_string(PathBuf::from(p)).ok()?;
    Some(AgentStatus::parse(&text))
}

/// What the agent reported.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentStatus {
    /// `started`, `on`, or `off:<why>`.
    pub state: String,
    /// `full`, `user-mode-only` or `none` (private memory not re-armed).
    pub uffd: String,
    /// Ticks done.
    pub ticks: u64,
    /// Pages eligible at the last tick.
    pub eligible_pages: u64,
    /// Private pages write-protected, in all.
    pub private_rearmed: u64,
    /// Shared pages unmapped, in all.
    pub shared_rearmed: u64,
    /// Failed re-arm or register calls.
    pub errors: u64,
    /// Calls on a range the program had unmapped meanwhile (not errors).
    pub vanished: u64,
    /// The last failed call (`register`, `write-protect`, `madvise`) and its errno, if any.
    pub last_error: Option<(String, i32)>,
    /// Pages the rate asked to re-arm, in all (more than re-armed when the budget limited it).
    pub wanted: u64,
    /// Ticks at which the budget re-armed fewer pages than the rate asked.
    pub limited_ticks: u64,
    /// The agent thread's own cpu time, ms (at the last report; the status at start: the
    /// constructor's thread, not the agent's).
    pub agent_cpu_ms: f64,
    /// Why private memory is not re-armed (`write-protect` when it is).
    pub private: String,
    /// The agent's own thread in the program ([`AGENT_THREAD_NAME`]), once it runs.
    pub tid: Option<u32>,
}

impl AgentStatus {
    /// Parses the agent's `key=value ...` line; unknown keys are ignored.
    pub fn parse(line: &str) -> AgentStatus {
        let mut s = AgentStatus::default();
        for w in line.split_whitespace() {
            let Some((k, v)) = w.split_once('=') else {
                continue;
            };
            let n = || v.parse().unwrap_or(0);
            match k {
                "state" => s.state = v.into(),
                "uffd" => s.uffd = v.into(),
                "ticks" => s.ticks = n(),
                "eligible_pages" => s.eligible_pages = n(),
                "private_rearmed" => s.private_rearmed = n(),
                "shared_rearmed" => s.shared_rearmed = n(),
                "errors" => s.errors = n(),
                "vanished" => s.vanished = n(),
                "last_error" => {
                    s.last_error = v
                        .split_once(':')
                        .filter(|(call, _)| *call != "none")
                        .and_then(|(call, e)| Some((call.to_string(), e.parse().ok()?)));
                }
                "wanted" => s.wanted = n(),
                "limited_ticks" => s.limited_ticks = n(),
                "agent_cpu_ms" => s.agent_cpu_ms = v.parse().unwrap_or(0.0),
                "private" => s.private = v.into(),
                "tid" => s.tid = v.parse().ok().filter(|&t| t != 0),
                _ => {}
            }
        }
        s
    }
}

/// Soft-dirty re-arming of a process from outside: `4` into `/proc/PID/clear_refs` every period,
/// when the [`InduceBudget`] (if any) holds the cost of re-arming every resident page; else the
/// re-arm waits (checked again every [`SoftDirtyRearmer::RECHECK`]) until the program's cpu
/// time has earned it.
pub struct SoftDirtyRearmer {
    pid: i32,
    path: PathBuf,
    period: Duration,
    last: Instant,
    rearms: u64,
    deferred: u64,
    pages: u64,
    spent: Duration,
    budget: Option<InduceBudget>,
    /// The program's cpu time (ns) when the budget last earned, and the re-arming time not yet paid.
    program_ns: Option<u64>,
    unpaid: Duration,
    next_check: Instant,
}

impl SoftDirtyRearmer {
    /// How often a re-arm the budget cannot pay yet is checked again.
    pub const RECHECK: Duration = Duration::from_millis(200);

    /// Re-arms `pid` every `1 / rate` seconds (the first time one period after now), within
    /// `budget` if given.
    pub fn new(pid: i32, rate: f64, budget: Option<InduceBudget>) -> SoftDirtyRearmer {
        let now = Instant::now();
        let mut r = SoftDirtyRearmer {
            pid,
            path: PathBuf::from(format!("/proc/{pid}/clear_refs")),
            period: Duration::from_secs_f64(1.0 / rate.max(1e-3)),
            last: now,
            rearms: 0,
            deferred: 0,
            pages: 0,
            spent: Duration::ZERO,
            budget,
            program_ns: None,
            unpaid: Duration::ZERO,
            next_check: now,
        };
        r.program_ns = r.program_cpu_ns();
        r
    }

    /// How long until the next re-arm is due (or is checked again).
    pub fn until_due(&self) -> Duration {
        self.period
            .saturating_sub(self.last.elapsed())
            .max(self.next_check.saturating_duration_since(Instant::now()))
    }

    /// The process's cpu time (all its threads), from /proc/PID/stat.
    fn program_cpu_ns(&self) -> Option<u64> {
        let line = fs::read_to_string(format!("/proc/{}/stat", self.pid)).ok()?;
        let st = crate::tasks::parse_stat(&line).ok()?;
        Some(crate::tasks::ticks_to_ns(
            st.cpu_ticks,
            crate::tasks::clock_ticks_per_second(),
        ))
    }

    /// The process's resident pages (/proc/PID/statm): each may fault once after a re-arm.
    fn resident_pages(&self) -> Option<u64> {
        let text = fs::read_to_string(format!("/proc/{}/statm", self.pid)).ok()?;
        text.split_whitespace().nth(1)?.parse().ok()
    }

    /// Whether the budget allows re-arming `pages` resident pages now (earning the program's cpu
    /// time since last asked).
    fn affordable(&mut self, pages: Option<u64>) -> bool {
        let now_ns = self.program_cpu_ns();
        let Some(b) = self.budget.as_mut() else {
            return true;
        };
        // Unreadable /proc files mean the process is going: re-arm as without a budget, and let
        // the write say what happened.
        let (Some(now_ns), Some(pages)) = (now_ns, pages) else {
            return true;
        };
        let earned = now_ns.saturating_sub(self.program_ns.unwrap_or(now_ns));
        self.program_ns = Some(now_ns);
        b.earn(earned as f64, self.unpaid.as_nanos() as f64);
        self.unpaid = Duration::ZERO;
        b.take(pages, true) == pages
    }

    /// Re-arms if a period has passed and the budget allows. Errors name the file and what to do.
    pub fn tick(&mut self) -> Result<bool, String> {
        if self.last.elapsed() < self.period || Instant::now() < self.next_check {
            return Ok(false);
        }
        let pages = self.resident_pages();
        if !self.affordable(pages) {
            self.deferred += 1;
            self.next_check = Instant::now() + Self::RECHECK;
            return Ok(false);
        }
        self.last = Instant::now();
        let t = Instant::now();
        fs::write(&self.path, b"4").map_err(|e| {
            format!(
                "cannot write 4 to {}: {e} (the process is gone, or numaff may not write its \
                 clear_refs: run numaff as the program's user or root)",
                self.path.display()
            )
        })?;
        self.spent += t.elapsed();
        self.unpaid += t.elapsed();
        self.rearms += 1;
        self.pages += pages.unwrap_or(0);
        Ok(true)
    }

    /// Resident pages at the re-arms, summed: the most faults they can have induced.
    pub fn pages(&self) -> u64 {
        self.pages
    }

    /// Re-arms done.
    pub fn rearms(&self) -> u64 {
        self.rearms
    }

    /// Checks at which a due re-arm waited for the budget.
    pub fn deferred(&self) -> u64 {
        self.deferred
    }

    /// Time numaff spent in the clear_refs writes (the kernel walking the page tables).
    pub fn spent(&self) -> Duration {
        self.spent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opt(i: Induce, available: bool) -> InduceOption {
        InduceOption {
            induce: i,
            available,
            full: available,
            why: "x".into(),
            sees: "",
            cost: "",
        }
    }

    #[test]
    fn auto_prefers_uffd_then_soft_dirty_then_balancing() {
        let all = [
            opt(Induce::Uffd, true),
            opt(Induce::SoftDirty, true),
            opt(Induce::Balancing, true),
        ];
        assert_eq!(choose(&all, true), Induce::Uffd);
        assert_eq!(choose(&all, false), Induce::SoftDirty);
        let no_uffd = [
            opt(Induce::Uffd, false),
            opt(Induce::SoftDirty, false),
            opt(Induce::Balancing, true),
        ];
        assert_eq!(choose(&no_uffd, true), Induce::Balancing);
        let none = [
            opt(Induce::Uffd, false),
            opt(Induce::SoftDirty, false),
            opt(Induce::Balancing, false),
        ];
        assert_eq!(choose(&none, true), Induce::Off);
        // The agent for shared memory only (Linux < 6.7) comes after soft-dirty and balancing.
        let mut shared_only = opt(Induce::Uffd, true);
        shared_only.full = false;
        let old = [
            shared_only.clone(),
            opt(Induce::SoftDirty, true),
            opt(Induce::Balancing, false),
        ];
        assert_eq!(choose(&old, true), Induce::SoftDirty);
        let bare = [
            shared_only,
            opt(Induce::SoftDirty, false),
            opt(Induce::Balancing, false),
        ];
        assert_eq!(choose(&bare, true), Induce::Uffd);
        assert_eq!(choose(&bare, false), Induce::Off);
    }

    #[test]
    fn an_unavailable_way_is_an_error_that_says_why() {
        let opts = [opt(Induce::Uffd, true), opt(Induce::SoftDirty, false)];
        let e = resolve(Induce::SoftDirty, &opts, true).expect_err("unavailable");
        assert!(
            e.contains("soft-dirty") && e.contains("--induce auto"),
            "{e}"
        );
        let e = resolve(Induce::Uffd, &opts, false).expect_err("uffd with --pid");
        assert!(e.contains("--pid"), "{e}");
        assert_eq!(resolve(Induce::Uffd, &opts, true), Ok(Induce::Uffd));
        assert_eq!(resolve(Induce::Off, &opts, true), Ok(Induce::Off));
        assert!("mprotect".parse::<Induce>().is_err());
        assert_eq!("soft-dirty".parse::<Induce>(), Ok(Induce::SoftDirty));
    }

    #[test]
    fn budget_pays_faults_from_a_share_of_the_programs_cpu_time() {
        let mut b = InduceBudget::new(0.01, 1000.0);
        // Nothing earned yet: nothing may be re-armed.
        assert_eq!(b.take(10, false), 0);
        // 1 ms of the program's cpu time earns 10 µs: 10 faults of 1 µs.
        b.earn(1e6, 0.0);
        assert_eq!(b.take(25, false), 10);
        assert_eq!(b.take(25, false), 0);
        // The re-arming's own cpu time is paid first: 10 µs earned, 4 µs spent.
        b.earn(1e6, 4000.0);
        assert_eq!(b.take(25, false), 6);
        // All or nothing (clear_refs): 10 affordable, 12 asked, none re-armed, nothing spent.
        b.earn(1e6, 0.0);
        assert_eq!(b.take(12, true), 0);
        b.earn(0.2e6, 0.0);
        assert_eq!(b.take(12, true), 12);
        // An idle stretch banks at most one full re-arm: 1 s of cpu, then 5 pages at most twice.
        b.earn(1e9, 0.0);
        assert_eq!(b.take(5, false), 5);
        assert_eq!(b.take(5, false), 0);
        // Overspending (own time above the earnings) is paid back before any re-arm.
        b.earn(0.0, 20_000.0);
        b.earn(1e6, 0.0);
        assert_eq!(b.take(100, false), 0);
        b.earn(2e6, 0.0);
        assert_eq!(b.take(100, false), 10);
    }

    #[test]
    fn parses_the_agent_status_line() {
        let s = AgentStatus::parse(
            "state=on uffd=full ticks=12 eligible_pages=300 private_rearmed=3600 \
             shared_rearmed=10 errors=0 vanished=2 wanted=4000 limited_ticks=3 budget=0.01 agent_cpu_ms=1.5 last_error=register:22 \
             rate=1 \
             tick_ms=100 private=write-protect tid=4321\n",
        );
        assert_eq!((s.wanted, s.limited_ticks, s.agent_cpu_ms), (4000, 3, 1.5));
        assert_eq!(s.tid, Some(4321));
        assert_eq!(AgentStatus::parse("state=started tid=0").tid, None);
        assert_eq!(s.vanished, 2);
        assert_eq!(s.last_error, Some(("register".to_string(), 22)));
        assert_eq!(AgentStatus::parse("last_error=none:0").last_error, None);
        assert_eq!(s.state, "on");
        assert_eq!(s.uffd, "full");
        assert_eq!(
            (
                s.ticks,
                s.eligible_pages,
                s.private_rearmed,
                s.shared_rearmed
            ),
            (12, 300, 3600, 10)
        );
        assert_eq!(s.private, "write-protect");
    }

    #[test]
    fn the_embedded_agent_is_a_shared_object() {
        assert_eq!(&AGENT_SO[..4], b"\x7fELF");
        let dir = tempfile_dir();
        let p = install_agent(&dir).expect("install");
        let again = install_agent(&dir).expect("install again");
        assert_eq!(p, again);
        assert_eq!(fs::read(&p).expect("read"), AGENT_SO);
        let _ = fs::remove_dir_all(&dir);
    }

    fn tempfile_dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("numaff-induce-test-{}", std::process::id()));
        fs::create_dir_all(&d).expect("mkdir");
        d
    }
}
