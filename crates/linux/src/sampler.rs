//! Samplers of memory accesses for `numaff profile` (DESIGN.md "Sample"): what the kernel lets us
//! see of a program's accesses, as [`numaff_behave::Sample`]s.
//!
//! The one sampler that works on a stock machine is **page faults** through `perf_event_open`
//! (software event `PERF_COUNT_SW_PAGE_FAULTS`, sample TID|TIME|ADDR: the cpu is the ring's; user
//! space only so that it works under `perf_event_paranoid` 2), at a bounded rate by default or on
//! every fault or one in N ([`SamplePeriod`]). Like `perf record` it
//! opens one event per cpu with `inherit` set, each with its own mmapped ring buffer: an inherited
//! event opened on one task for all cpus (cpu = -1) cannot be mmapped (DESIGN.md). The events must
//! exist before the program's threads are created, so [`AccessSampler::open`] is called on a
//! freshly forked child that waits for a go signal before its exec ([`crate::launch`]).
//!
//! [`list_samplers`] says which samplers work on this machine and why not the others (PEBS, IBS,
//! soft-dirty induced faults, NUMA-balancing hinting faults). The decoding of hardware samples
//! (ADDR|WEIGHT|DATA_SRC) is in [`decode_sample`]; it is tested on synthetic records only.

use std::fmt;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Duration;

use numaff_behave::{Kind, Sample};
use perf_event::events::Software;
use perf_event::{Builder, Clock, SampleFlag, Sampler};

/// `PERF_RECORD_LOST`.
pub const PERF_RECORD_LOST: u32 = 2;
/// `PERF_RECORD_SAMPLE`.
pub const PERF_RECORD_SAMPLE: u32 = 9;

/// `perf_event_attr.sample_type` bits this decoder knows.
pub mod sample_type {
    pub const IP: u64 = 1 << 0;
    pub const TID: u64 = 1 << 1;
    pub const TIME: u64 = 1 << 2;
    pub const ADDR: u64 = 1 << 3;
    pub const ID: u64 = 1 << 6;
    pub const CPU: u64 = 1 << 7;
    pub const PERIOD: u64 = 1 << 8;
    pub const STREAM_ID: u64 = 1 << 9;
    pub const WEIGHT: u64 = 1 << 14;
    pub const DATA_SRC: u64 = 1 << 15;
    pub const IDENTIFIER: u64 = 1 << 16;
    /// Every bit [`super::decode_sample`] can walk over.
    pub const KNOWN: u64 =
        IP | TID | TIME | ADDR | ID | CPU | PERIOD | STREAM_ID | WEIGHT | DATA_SRC | IDENTIFIER;
}

/// One page fault in `N` is sampled, to bound the sampling overhead; 1 samples every fault.
///
/// Each sampled fault costs the faulting thread about 0.6 µs of kernel time here, a fault that is
/// only counted about 0.05 µs (README, "numaff profile"), so a program that first-touches memory
/// at 100 000 pages/s per thread pays 6 % at period 1 and about 1.3 % at period 8. A fixed period
/// subsamples every stream of faults alike: first touches, bursts of induced faults and the
/// rare faults of a steady program. The kernel's frequency mode (`perf_event_attr.freq`, a cap on
/// samples per second) does not fit: the period it raises during a burst of first touches stays
/// high while the program faults rarely, so induced faults are almost never sampled afterwards
/// (8 threads exchanging 16-page buffers give one sharing pair instead of the ring of eight).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SamplePeriod(pub u64);

/// The default of [`SamplePeriod`] as a command-line value (`--sample-period`).
pub const DEFAULT_SAMPLE_PERIOD_ARG: &str = "1";

impl SamplePeriod {
    /// Every fault.
    pub const EVERY: SamplePeriod = SamplePeriod(1);
}

impl Default for SamplePeriod {
    fn default() -> Self {
        SamplePeriod::EVERY
    }
}

impl fmt::Display for SamplePeriod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            1 => write!(f, "every fault (period 1)"),
            n => write!(f, "one fault in {n} (period {n})"),
        }
    }
}

impl std::str::FromStr for SamplePeriod {
    type Err = String;

    /// A period from 1 (every fault) to 1 000 000.
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().parse::<u64>() {
            Ok(n) if (1..=1_000_000).contains(&n) => Ok(SamplePeriod(n)),
            _ => Err(format!(
                "{s:?} is not a sample period: give N to sample one page fault in N (1 for every \
                 fault, at most 1000000)"
            )),
        }
    }
}

/// Data pages of each per-cpu ring buffer (as `perf record`'s default of 512 KiB with 4 KiB pages).
pub const RING_DATA_PAGES: usize = 128;

/// Memory [`ring_pages_for`] spreads over the per-cpu ring buffers of one profiled program.
pub const RING_BUDGET_BYTES: usize = 16 << 20;

/// The most data pages [`ring_pages_for`] gives a ring: larger rings cost more to set up and tear
/// down (the kernel allocates and zeroes them: about 1 ms per MiB measured here) than they save.
pub const RING_DATA_PAGES_MAX: usize = 512;

/// Data pages per ring buffer for `cpus` cpus within [`RING_BUDGET_BYTES`]: a power of two between
/// [`RING_DATA_PAGES`] and [`RING_DATA_PAGES_MAX`] (2 MiB). Larger rings let the reader wake up less often and fall
/// behind for longer without losing samples, so that it can leave the cpus to the program.
pub fn ring_pages_for(cpus: usize) -> usize {
    let per_cpu = RING_BUDGET_BYTES / page_size() / cpus.max(1);
    let pages = if per_cpu.is_power_of_two() {
        per_cpu
    } else {
        per_cpu.next_power_of_two() / 2
    };
    pages.clamp(RING_DATA_PAGES, RING_DATA_PAGES_MAX)
}

/// A sampler that failed: what, and what to do.
#[derive(Debug)]
pub struct SamplerError {
    /// What numaff was trying to do.
    pub what: String,
    /// The kernel's answer.
    pub source: io::Error,
    /// What the user can do about it.
    pub advice: String,
}

impl fmt::Display for SamplerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "could not {}: {}", self.what, self.source)?;
        if !self.advice.is_empty() {
            write!(f, "; {}", self.advice)?;
        }
        Ok(())
    }
}

impl std::error::Error for SamplerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Advice for a failed perf_event_open.
fn perf_advice(e: &io::Error) -> String {
    let paranoid = perf_event_paranoid();
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => format!(
            "perf_event_paranoid is {} here; set it to 2 or lower (sudo sysctl kernel.perf_event_paranoid=2) \
             or run numaff as root (or with CAP_PERFMON)",
            paranoid.map_or("unknown".to_string(), |p| p.to_string())
        ),
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) => {
            "this kernel or cpu does not support the event (is this a container or VM without a PMU?)".into()
        }
        Some(libc::EMFILE) => "too many open files: raise the limit (ulimit -n)".into(),
        Some(libc::ESRCH) => "the process is gone".into(),
        Some(libc::ENOMEM) => "raise kernel.perf_event_mlock_kb or run as root".into(),
        _ => String::new(),
    }
}

/// `/proc/sys/kernel/perf_event_paranoid`, if readable.
pub fn perf_event_paranoid() -> Option<i32> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// What a sampler can see and what it costs, said at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SamplerInfo {
    /// The name given to `--sampler`.
    pub name: &'static str,
    /// Whether it works on this machine.
    pub available: bool,
    /// Why it does or does not work here.
    pub why: String,
    /// What it sees: reads? writes? latency? all threads?
    pub sees: &'static str,
    /// Its rate.
    pub rate: &'static str,
    /// Its cost.
    pub cost: &'static str,
}

impl fmt::Display for SamplerInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<18} {}: {}",
            self.name,
            if self.available {
                "available"
            } else {
                "unavailable"
            },
            self.why
        )?;
        writeln!(f, "{:<18} sees: {}", "", self.sees)?;
        writeln!(f, "{:<18} rate: {}", "", self.rate)?;
        write!(f, "{:<18} cost: {}", "", self.cost)
    }
}

/// What the page-fault sampler sees, its rate and cost.
pub const PAGE_FAULTS_SEES: &str =
    "the first touch of every page (read or write, not told apart; no latency), \
     by every thread and child process started after the sampler, user space only";
/// The page-fault sampler's rate.
pub const PAGE_FAULTS_RATE: &str =
    "every fault by default, or one in N (--sample-period N); none for accesses to mapped pages";
/// What the hardware samplers (PEBS, IBS) see.
pub const HW_SEES: &str =
    "sampled loads and stores with their data address, latency (weight, core \
     cycles) and data source, by every thread and child process started after the sampler, user \
     space only (untested on hardware: numaff was developed on machines without a PMU)";
/// The hardware samplers' cost.
pub const HW_COST: &str =
    "a PEBS or IBS record per sample (hardware-assisted), plus 0.2-0.3 µs in numaff";

/// The page-fault sampler's cost.
pub const PAGE_FAULTS_COST: &str =
    "about 0.6 µs of kernel time per sample (measured on a 2-cpu KVM guest) and 0.2-0.3 µs in \
     numaff, about 0.05 µs per fault not sampled; nothing for accesses to mapped pages";

/// Every sampler numaff knows, and whether it works here.
pub fn list_samplers() -> Vec<SamplerInfo> {
    let mut out = Vec::new();

    // Page faults: paranoid level and a trial open on ourselves.
    let paranoid = perf_event_paranoid();
    let (available, why) = match trial_open() {
        Ok(()) => (
            true,
            format!(
                "perf_event_open works (perf_event_paranoid {})",
                paranoid.map_or("unreadable".into(), |p| p.to_string())
            ),
        ),
        Err(e) => (false, e.to_string()),
    };
    out.push(SamplerInfo {
        name: "page-faults",
        available,
        why,
        sees: PAGE_FAULTS_SEES,
        rate: PAGE_FAULTS_RATE,
        cost: PAGE_FAULTS_COST,
    });

    // PEBS (Intel) and IBS (AMD): hardware memory sampling, from the PMUs sysfs describes.
    let devs = Path::new(crate::pmu::SYSFS_DEVICES);
    out.push(hardware_info(
        "pebs",
        crate::pmu::pebs_events(devs, crate::pmu::DEFAULT_LDLAT),
    ));
    out.push(hardware_info("ibs", crate::pmu::ibs_events(devs)));

    // Soft-dirty induced faults need CONFIG_MEM_SOFT_DIRTY (bit 55 of pagemap, clear_refs 4).
    let soft_dirty = kernel_config_has("CONFIG_MEM_SOFT_DIRTY").or_else(soft_dirty_probe);
    out.push(SamplerInfo {
        name: "soft-dirty",
        available: false,
        why: match soft_dirty {
            Some(true) => {
                "CONFIG_MEM_SOFT_DIRTY is set: induced write faults with --induce soft-dirty".into()
            }
            Some(false) => {
                "this kernel has no CONFIG_MEM_SOFT_DIRTY (writes cannot be re-armed)".into()
            }
            None => {
                "cannot tell whether this kernel has CONFIG_MEM_SOFT_DIRTY (no /proc/config.gz or \
                     /boot/config-*); see --induce below"
                    .into()
            }
        },
        sees: "writes to pages, again and again (faults re-armed periodically), all threads",
        rate: "one fault per written page per period",
        cost: "a fault per written page per period",
    });

    // NUMA-balancing hinting faults.
    let nb = crate::balancing::numa_balancing();
    out.push(SamplerInfo {
        name: "numa-hinting",
        available: false,
        why: match nb {
            Ok(b) if b.is_enabled() => format!(
                "kernel.numa_balancing is on ({b:?}); its hinting faults are page faults that the \
                 page-fault sampler sees (--induce balancing)"
            ),
            Ok(b) => format!("kernel.numa_balancing is {b:?}: no hinting faults"),
            Err(e) => format!("cannot read kernel.numa_balancing: {e}"),
        },
        sees: "reads and writes of pages the kernel unmapped for NUMA balancing, all threads",
        rate: "the kernel's scan rate (numa_balancing_scan_*)",
        cost: "the kernel's own; present whether or not numaff listens",
    });
    out
}

/// A hardware sampler's entry in [`list_samplers`]: its events, and a trial open of the first.
fn hardware_info(
    name: &'static str,
    found: Result<crate::pmu::HwEvents, crate::pmu::PmuError>,
) -> SamplerInfo {
    let (available, why) = match found {
        Err(e) => (false, e.to_string()),
        Ok(hw) => {
            let labels: Vec<&str> = hw.events.iter().map(|e| e.label.as_str()).collect();
            let notes = if hw.notes.is_empty() {
                String::new()
            } else {
                format!(" ({})", hw.notes.join("; "))
            };
            match hw.events.first().map(trial_open_hardware) {
                Some(Ok(())) => (true, format!("{} open here{notes}", labels.join(" and "))),
                Some(Err(e)) => (false, format!("{}: {e}{notes}", labels.join(" and "))),
                None => (false, format!("no event{notes}")),
            }
        }
    };
    SamplerInfo {
        name,
        available,
        why,
        sees: HW_SEES,
        rate: "one event in N (--sample-period, default 10000); PEBS loads only above the \
               latency threshold (--ldlat, default 30 cycles)",
        cost: HW_COST,
    }
}

/// Opens `event` on numaff itself, disabled, as `numaff profile` would open it.
fn trial_open_hardware(event: &crate::pmu::HwEvent) -> Result<(), SamplerError> {
    let mut b = Builder::new(event.event);
    b.observe_self()
        .any_cpu()
        .precise_ip(event.precise)
        .exclude_kernel(true)
        .exclude_hv(true)
        .sample_period(DEFAULT_HW_PERIOD)
        .sample(HW_SAMPLE_FLAGS)
        .enabled(false);
    b.build().map(|_| ()).map_err(|e| SamplerError {
        what: format!("open {} (trial on numaff itself)", event.label),
        advice: perf_advice(&e),
        source: e,
    })
}

/// The default period of the hardware samplers: one qualifying load or store in 10 000.
pub const DEFAULT_HW_PERIOD: u64 = 10_000;

/// Whether the running kernel's config sets `key` (None: no config found).
fn kernel_config_has(key: &str) -> Option<bool> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let path = format!("/boot/config-{}", release.trim());
    let text = std::fs::read_to_string(path).ok()?;
    let set = text
        .lines()
        .any(|l| l.starts_with(&format!("{key}=y")) || l.starts_with(&format!("{key}=m")));
    Some(set)
}

/// Whether the kernel tracks soft-dirty bits: a freshly mapped and written page shows bit 55 in
/// `/proc/self/pagemap` (new mappings are soft-dirty) only with CONFIG_MEM_SOFT_DIRTY.
pub(crate) fn soft_dirty_probe() -> Option<bool> {
    use std::io::{Read, Seek, SeekFrom};
    let page = page_size();
    // SAFETY: a fresh private anonymous mapping of one page, written once and unmapped below.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            page,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    // SAFETY: p points to one writable page.
    unsafe { std::ptr::write_volatile(p.cast::<u8>(), 1) };
    let entry = (|| {
        let mut f = std::fs::File::open("/proc/self/pagemap").ok()?;
        f.seek(SeekFrom::Start((p as u64 / page as u64) * 8)).ok()?;
        let mut b = [0u8; 8];
        f.read_exact(&mut b).ok()?;
        Some(u64::from_ne_bytes(b))
    })();
    // SAFETY: unmapping the page mapped above.
    unsafe { libc::munmap(p, page) };
    let e = entry?;
    // Bit 63: present. Without it the answer means nothing.
    (e >> 63 & 1 == 1).then_some(e >> 55 & 1 == 1)
}

/// A trial page-fault event on this process, cpu any, not mmapped.
fn trial_open() -> Result<(), SamplerError> {
    let mut b = Builder::new(Software::PAGE_FAULTS);
    b.observe_self()
        .any_cpu()
        .exclude_kernel(true)
        .exclude_hv(true)
        .enabled(false);
    b.build().map(|_| ()).map_err(|e| SamplerError {
        what: "open a page-fault perf event (trial on numaff itself)".into(),
        advice: perf_advice(&e),
        source: e,
    })
}

/// A decoded `PERF_RECORD_SAMPLE` with the fields numaff uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RawSample {
    pub pid: u32,
    pub tid: u32,
    pub time: u64,
    pub addr: u64,
    pub cpu: u32,
    pub weight: Option<u64>,
    pub data_src: Option<u64>,
}

/// Decode the body (after the 8-byte header) of a `PERF_RECORD_SAMPLE` taken with `sample_type`.
/// Errors on bits it does not know (their layout would shift the later fields) and short records.
pub fn decode_sample(body: &[u8], sample_type: u64) -> Result<RawSample, String> {
    use self::sample_type as st;
    if sample_type & !st::KNOWN != 0 {
        return Err(format!(
            "sample_type {:#x} has fields numaff cannot decode ({:#x})",
            sample_type,
            sample_type & !st::KNOWN
        ));
    }
    let mut pos = 0usize;
    let u64_at = |pos: &mut usize| -> Result<u64, String> {
        let b = body
            .get(*pos..*pos + 8)
            .ok_or_else(|| format!("sample record of {} bytes is too short", body.len()))?;
        *pos += 8;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_ne_bytes(a))
    };
    let lo_hi = |v: u64| -> (u32, u32) {
        let b = v.to_ne_bytes();
        (
            u32::from_ne_bytes([b[0], b[1], b[2], b[3]]),
            u32::from_ne_bytes([b[4], b[5], b[6], b[7]]),
        )
    };
    let mut s = RawSample::default();
    if sample_type & st::IDENTIFIER != 0 {
        u64_at(&mut pos)?;
    }
    if sample_type & st::IP != 0 {
        u64_at(&mut pos)?;
    }
    if sample_type & st::TID != 0 {
        let (pid, tid) = lo_hi(u64_at(&mut pos)?);
        s.pid = pid;
        s.tid = tid;
    }
    if sample_type & st::TIME != 0 {
        s.time = u64_at(&mut pos)?;
    }
    if sample_type & st::ADDR != 0 {
        s.addr = u64_at(&mut pos)?;
    }
    if sample_type & st::ID != 0 {
        u64_at(&mut pos)?;
    }
    if sample_type & st::STREAM_ID != 0 {
        u64_at(&mut pos)?;
    }
    if sample_type & st::CPU != 0 {
        s.cpu = lo_hi(u64_at(&mut pos)?).0;
    }
    if sample_type & st::PERIOD != 0 {
        u64_at(&mut pos)?;
    }
    if sample_type & st::WEIGHT != 0 {
        s.weight = Some(u64_at(&mut pos)?);
    }
    if sample_type & st::DATA_SRC != 0 {
        s.data_src = Some(u64_at(&mut pos)?);
    }
    Ok(s)
}

/// The kind (load/store) and source of a `perf_mem_data_src` value: one decoder for the records
/// of the sampler and the text of `perf script` (numaff_behave::perf_script). Untested on hardware.
pub use numaff_behave::perf_script::decode_data_src;

/// The count of lost samples in the body of a `PERF_RECORD_LOST` (`u64 id; u64 lost; ...`).
pub fn decode_lost(body: &[u8]) -> Option<u64> {
    let b: [u8; 8] = body.get(8..16)?.try_into().ok()?;
    Some(u64::from_ne_bytes(b))
}

/// The sample_type the page-fault sampler asks for: TID, TIME and ADDR. Not CPU: every ring
/// belongs to one cpu's event, which gives the cpu (each field costs the kernel time per fault:
/// README, "numaff profile").
pub const PAGE_FAULT_SAMPLE_TYPE: u64 = sample_type::TID | sample_type::TIME | sample_type::ADDR;

/// [`PAGE_FAULT_SAMPLE_TYPE`] as perf-event2's flags.
const PAGE_FAULT_SAMPLE_FLAGS: SampleFlag = SampleFlag::TID
    .union(SampleFlag::TIME)
    .union(SampleFlag::ADDR);

/// The sample_type of hardware memory samples (PEBS, IBS): TID, TIME, ADDR, WEIGHT (latency in
/// core cycles) and DATA_SRC (load or store, and where the data came from).
pub const HW_SAMPLE_TYPE: u64 = sample_type::TID
    | sample_type::TIME
    | sample_type::ADDR
    | sample_type::WEIGHT
    | sample_type::DATA_SRC;

/// [`HW_SAMPLE_TYPE`] as perf-event2's flags.
const HW_SAMPLE_FLAGS: SampleFlag = SampleFlag::TID
    .union(SampleFlag::TIME)
    .union(SampleFlag::ADDR)
    .union(SampleFlag::WEIGHT)
    .union(SampleFlag::DATA_SRC);

/// What an event of an [`AccessSampler`] samples.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SamplerEvent {
    /// Page faults: the software event `PERF_COUNT_SW_PAGE_FAULTS`.
    PageFaults,
    /// A hardware memory-sampling event of a sysfs PMU (PEBS loads or stores, IBS op).
    Hardware(crate::pmu::HwEvent),
}

impl SamplerEvent {
    fn label(&self) -> &str {
        match self {
            SamplerEvent::PageFaults => "page-faults",
            SamplerEvent::Hardware(h) => &h.label,
        }
    }
}

/// One cpu's event and its ring buffer (perf-event2's reader): the samples carry no CPU field,
/// the ring says which cpu they come from.
struct CpuRing {
    sampler: Sampler,
    cpu: u32,
    /// Hardware samples ([`HW_SAMPLE_TYPE`]) rather than page faults.
    hardware: bool,
}

/// Memory accesses of a task and its descendants: page faults or hardware samples, one inherited
/// event per cpu (and per hardware event) with its ring buffer.
pub struct AccessSampler {
    rings: Vec<CpuRing>,
    node_of_cpu: Vec<u32>,
    events: Vec<SamplerEvent>,
    period: SamplePeriod,
    lost: u64,
    samples: u64,
    undecodable: u64,
    not_memory: u64,
}

impl AccessSampler {
    /// Open one page-fault event per cpu in `cpus` on task `pid` (inherit: the threads and
    /// children it creates later), each with a ring buffer of [`RING_DATA_PAGES`] pages, sampling
    /// one fault in `period`. With `enable_on_exec` the events start counting at the task's next
    /// exec. `node_of_cpu[cpu]` gives the node of a cpu.
    pub fn open(
        pid: i32,
        cpus: &[u32],
        node_of_cpu: Vec<u32>,
        enable_on_exec: bool,
        period: SamplePeriod,
    ) -> Result<Self, SamplerError> {
        Self::open_with_ring(
            pid,
            cpus,
            node_of_cpu,
            enable_on_exec,
            RING_DATA_PAGES,
            period,
        )
    }

    /// As [`Self::open`], with rings of `ring_pages` data pages (a power of two) where the kernel
    /// allows it: if it refuses a ring that large (the locked-memory limit of an unprivileged
    /// user), that cpu falls back to [`RING_DATA_PAGES`]. Each ring wakes the reader when a quarter
    /// of it is full.
    pub fn open_with_ring(
        pid: i32,
        cpus: &[u32],
        node_of_cpu: Vec<u32>,
        enable_on_exec: bool,
        ring_pages: usize,
        period: SamplePeriod,
    ) -> Result<Self, SamplerError> {
        Self::open_events(
            pid,
            cpus,
            node_of_cpu,
            enable_on_exec,
            ring_pages,
            &[SamplerEvent::PageFaults],
            period,
        )
    }

    /// As [`Self::open_with_ring`], for each of `events` on every cpu: page faults, or hardware
    /// samples (ADDR, WEIGHT, DATA_SRC, with the event's `precise_ip`), one event in `period`.
    pub fn open_events(
        pid: i32,
        cpus: &[u32],
        node_of_cpu: Vec<u32>,
        enable_on_exec: bool,
        ring_pages: usize,
        events: &[SamplerEvent],
        period: SamplePeriod,
    ) -> Result<Self, SamplerError> {
        let page = page_size();
        let ring_pages = ring_pages.max(1).next_power_of_two();
        let mut rings = Vec::with_capacity(cpus.len() * events.len());
        for &cpu in cpus {
            for event in events {
                let (mut b, hardware) = match event {
                    SamplerEvent::PageFaults => (Builder::new(Software::PAGE_FAULTS), false),
                    SamplerEvent::Hardware(h) => {
                        let mut b = Builder::new(h.event);
                        b.precise_ip(h.precise);
                        (b, true)
                    }
                };
                b.observe_pid(pid)
                    .one_cpu(cpu as usize)
                    .inherit(true)
                    .exclude_kernel(true)
                    .exclude_hv(true)
                    .sample_period(period.0.max(1))
                    .sample(if hardware {
                        HW_SAMPLE_FLAGS
                    } else {
                        PAGE_FAULT_SAMPLE_FLAGS
                    })
                    .clockid(Clock::MONOTONIC)
                    .enabled(!enable_on_exec)
                    .enable_on_exec(enable_on_exec);
                let label = event.label();
                let open = |b: &mut Builder, pages: usize| {
                    b.wakeup_watermark(pages * page / 4);
                    b.build().map_err(|e| SamplerError {
                        what: format!("open a {label} perf event on task {pid}, cpu {cpu}"),
                        advice: perf_advice(&e),
                        source: e,
                    })
                };
                let map_err = |pages: usize, e: io::Error| SamplerError {
                    what: format!("mmap the {label} ring buffer of cpu {cpu} ({pages} pages)"),
                    advice: "raise kernel.perf_event_mlock_kb or ulimit -l, or run as root".into(),
                    source: e,
                };
                let sampler = match open(&mut b, ring_pages)?.sampled(ring_pages * page) {
                    Ok(r) => r,
                    Err(_) if ring_pages > RING_DATA_PAGES => open(&mut b, RING_DATA_PAGES)?
                        .sampled(RING_DATA_PAGES * page)
                        .map_err(|e| map_err(RING_DATA_PAGES, e))?,
                    Err(e) => return Err(map_err(ring_pages, e)),
                };
                rings.push(CpuRing {
                    sampler,
                    cpu,
                    hardware,
                });
            }
        }
        Ok(AccessSampler {
            rings,
            node_of_cpu,
            events: events.to_vec(),
            period,
            lost: 0,
            samples: 0,
            undecodable: 0,
            not_memory: 0,
        })
    }

    /// What this sampler sees, its rate and cost, in one paragraph.
    pub fn describe(&self) -> String {
        let cpus = self.rings.len() / self.events.len().max(1);
        if self.events.iter().all(|e| *e == SamplerEvent::PageFaults) {
            return format!(
                "page-faults on {cpus} cpus: sees {PAGE_FAULTS_SEES}; rate: {}; cost: {PAGE_FAULTS_COST}",
                self.period
            );
        }
        let labels: Vec<&str> = self.events.iter().map(SamplerEvent::label).collect();
        format!(
            "{} on {cpus} cpus: sees {HW_SEES}; rate: one event in {}; cost: {HW_COST}",
            labels.join(" and "),
            self.period.0
        )
    }

    /// Wait up to `timeout` for a ring buffer to fill past its watermark (or for hang-up).
    pub fn wait(&self, timeout: Duration) {
        let mut fds: Vec<libc::pollfd> = self
            .rings
            .iter()
            .map(|r| libc::pollfd {
                fd: r.sampler.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: fds is a valid array of fds.len() pollfd structs for the duration of the call.
        unsafe {
            libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms);
        }
    }

    /// Read every record in the ring buffers: samples go to `out`, losses are counted.
    /// Returns the number of samples read. A sample's cpu is its ring's (each ring belongs to the
    /// event of one cpu), so the records do not carry it.
    pub fn drain(&mut self, out: &mut dyn FnMut(Sample)) -> u64 {
        let mut n = 0;
        let (mut lost, mut undecodable, mut not_memory) = (0, 0, 0);
        for ring in &mut self.rings {
            let cpu = ring.cpu;
            let node = self.node_of_cpu.get(cpu as usize).copied().unwrap_or(0);
            while let Some(rec) = ring.sampler.next_record() {
                let body = rec.to_contiguous();
                let sample_type = if ring.hardware {
                    HW_SAMPLE_TYPE
                } else {
                    PAGE_FAULT_SAMPLE_TYPE
                };
                match rec.ty() {
                    PERF_RECORD_SAMPLE => match decode_sample(&body, sample_type) {
                        Ok(r) => match to_sample(&r, ring.hardware, cpu, node) {
                            Some(x) => {
                                n += 1;
                                out(x);
                            }
                            None => not_memory += 1,
                        },
                        Err(_) => undecodable += 1,
                    },
                    PERF_RECORD_LOST => lost += decode_lost(&body).unwrap_or(0),
                    _ => {}
                }
            }
        }
        self.lost += lost;
        self.undecodable += undecodable;
        self.not_memory += not_memory;
        self.samples += n;
        n
    }

    /// Hardware samples dropped because they were not a load or store with a data address.
    pub fn not_memory(&self) -> u64 {
        self.not_memory
    }

    /// Samples the kernel dropped because a ring buffer was full (PERF_RECORD_LOST).
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// The faults the events counted (the inherited counts of exited threads included): compared
    /// with [`Self::samples`], the samples lost without a PERF_RECORD_LOST (the kernel writes
    /// that record only once the ring has room again, so losses at the end go unreported).
    pub fn counted(&mut self) -> u64 {
        self.rings
            .iter_mut()
            .filter_map(|r| r.sampler.read().ok())
            .sum()
    }

    /// Lost samples: the PERF_RECORD_LOST counts, or, sampling every fault, the faults counted but
    /// never sampled if more (the kernel writes PERF_RECORD_LOST only once a ring has room again,
    /// so losses at the end go unreported). With a period above 1 only the kernel's counts: each
    /// thread's event on each cpu skips up to period − 1 faults at its end, a number not known
    /// here. Call after the last [`Self::drain`].
    pub fn lost_total(&mut self) -> u64 {
        if self.period != SamplePeriod::EVERY {
            return self.lost;
        }
        let unsampled = self.counted().saturating_sub(self.samples);
        self.lost.max(unsampled)
    }

    /// The period this sampler was opened with.
    pub fn period(&self) -> SamplePeriod {
        self.period
    }

    /// Samples read so far.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Records that could not be decoded.
    pub fn undecodable(&self) -> u64 {
        self.undecodable
    }
}

/// A decoded record as a [`Sample`] of a ring of `cpu` on `node`: a page fault, or a hardware
/// sample whose DATA_SRC says load or store (weight as `latency_ns`, in core cycles as the PMU
/// gives it). None for a hardware sample that is neither a load nor a store (IBS samples every
/// kind of op) or has no data address.
fn to_sample(r: &RawSample, hardware: bool, cpu: u32, node: u32) -> Option<Sample> {
    let (kind, data_source, latency_ns) = if hardware {
        match decode_data_src(r.data_src.unwrap_or(0)) {
            (Some(kind), src) if r.addr != 0 => (kind, src, r.weight),
            _ => return None,
        }
    } else {
        (Kind::Fault, None, None)
    };
    Some(Sample {
        time_ns: r.time,
        pid: r.pid,
        tid: r.tid,
        cpu,
        node,
        addr: r.addr,
        kind,
        latency_ns,
        data_source,
    })
}

fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use numaff_behave::DataSource;

    fn rec(fields: &[u64]) -> Vec<u8> {
        fields.iter().flat_map(|v| v.to_ne_bytes()).collect()
    }

    fn pair(lo: u32, hi: u32) -> u64 {
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&lo.to_ne_bytes());
        b[4..].copy_from_slice(&hi.to_ne_bytes());
        u64::from_ne_bytes(b)
    }

    /// A fresh private anonymous mapping of small pages, each written once by this thread (one
    /// page fault per page), unmapped when dropped.
    struct FreshPages {
        buf: *mut libc::c_void,
        len: usize,
    }

    impl FreshPages {
        fn touch(pages: usize) -> Self {
            let len = pages * page_size();
            // SAFETY: a fresh private anonymous mapping, checked, written inside, unmapped on drop.
            let buf = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            assert_ne!(buf, libc::MAP_FAILED);
            // SAFETY: advice on the mapping made above. Small pages: one fault per page also
            // where transparent huge pages are always on.
            unsafe { libc::madvise(buf, len, libc::MADV_NOHUGEPAGE) };
            for i in 0..pages {
                // SAFETY: i * page is inside the mapping.
                unsafe { std::ptr::write_volatile(buf.cast::<u8>().add(i * page_size()), 1) };
            }
            FreshPages { buf, len }
        }

        fn range(&self) -> std::ops::Range<u64> {
            self.buf as u64..self.buf as u64 + self.len as u64
        }
    }

    impl Drop for FreshPages {
        fn drop(&mut self) {
            // SAFETY: unmapping the mapping made in `touch`.
            unsafe { libc::munmap(self.buf, self.len) };
        }
    }

    /// As [`own_thread`], with this thread pinned to the last cpu: (cpus, that cpu, tid).
    fn own_thread_pinned() -> Option<(Vec<u32>, u32, i32)> {
        let (cpus, tid) = own_thread()?;
        let pin = *cpus.last()?;
        // SAFETY: sched_setaffinity on this thread with a local cpu set.
        let pinned = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(pin as usize, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) == 0
        };
        if !pinned {
            eprintln!("skipped: cannot pin to cpu {pin}");
            return None;
        }
        Some((cpus, pin, tid))
    }

    /// The cpus and this thread's tid, if this machine lets it sample itself.
    fn own_thread() -> Option<(Vec<u32>, i32)> {
        if perf_event_paranoid().is_none_or(|p| p > 2) {
            eprintln!("skipped: perf_event_paranoid > 2");
            return None;
        }
        let cpus =
            (0..std::thread::available_parallelism().map_or(1, |n| n.get()) as u32).collect();
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
        Some((cpus, tid))
    }

    #[test]
    fn decodes_a_page_fault_record() {
        let body = rec(&[pair(100, 101), 5_000, 0x7f00_0000_1000]);
        let s = decode_sample(&body, PAGE_FAULT_SAMPLE_TYPE).expect("decodes");
        assert_eq!(
            s,
            RawSample {
                pid: 100,
                tid: 101,
                time: 5_000,
                addr: 0x7f00_0000_1000,
                cpu: 0,
                weight: None,
                data_src: None
            }
        );
    }

    #[test]
    fn decodes_a_synthetic_pebs_record() {
        use self::sample_type as st;
        // IP | TID | TIME | ADDR | CPU | WEIGHT | DATA_SRC as a PEBS mem-loads event would report.
        let t = st::IP | st::TID | st::TIME | st::ADDR | st::CPU | st::WEIGHT | st::DATA_SRC;
        // data_src: op LOAD (2), lvl HIT|REM_RAM1 (0x102 << 5).
        let src = 0x2 | (0x102 << 5);
        let body = rec(&[0x40_1000, pair(7, 8), 9, 0xdead_b000, pair(1, 0), 312, src]);
        let s = decode_sample(&body, t).expect("decodes");
        assert_eq!(
            (s.pid, s.tid, s.time, s.addr, s.cpu),
            (7, 8, 9, 0xdead_b000, 1)
        );
        assert_eq!(s.weight, Some(312));
        assert_eq!(
            decode_data_src(src),
            (Some(Kind::Load), Some(DataSource::RemoteDram))
        );
        // A store that hit the L1; a load from local DRAM; a HITM in a remote cache.
        assert_eq!(
            decode_data_src(0x4 | (0xa << 5)),
            (Some(Kind::Store), Some(DataSource::L1))
        );
        assert_eq!(
            decode_data_src(0x2 | (0x82 << 5)),
            (Some(Kind::Load), Some(DataSource::LocalDram))
        );
        assert_eq!(
            decode_data_src(0x2 | (0x402 << 5) | (0x10 << 19)),
            (Some(Kind::Load), Some(DataSource::RemoteCache))
        );
    }

    #[test]
    fn eacces_says_to_lower_paranoid_or_run_as_root() {
        let e = SamplerError {
            what: "open a page-fault perf event on task 1, cpu 0".into(),
            advice: perf_advice(&io::Error::from_raw_os_error(libc::EACCES)),
            source: io::Error::from_raw_os_error(libc::EACCES),
        };
        let text = e.to_string();
        assert!(
            text.contains("could not open a page-fault perf event"),
            "{text}"
        );
        assert!(
            text.contains("perf_event_paranoid") && text.contains("set it to 2"),
            "{text}"
        );
        assert!(text.contains("root"), "{text}");
    }

    #[test]
    fn ring_pages_stay_within_budget_and_bounds() {
        let page = page_size();
        for cpus in [1, 2, 3, 8, 64, 1024] {
            let p = ring_pages_for(cpus);
            assert!(p.is_power_of_two(), "{cpus} cpus: {p}");
            assert!(
                (RING_DATA_PAGES..=RING_DATA_PAGES_MAX).contains(&p),
                "{cpus} cpus: {p}"
            );
            assert!(
                p == RING_DATA_PAGES || p * page * cpus <= RING_BUDGET_BYTES,
                "{cpus} cpus: {p} pages"
            );
        }
        assert_eq!(ring_pages_for(1024), RING_DATA_PAGES);
        if page == 4096 {
            assert_eq!(ring_pages_for(2), 512);
            assert_eq!(ring_pages_for(16), 256);
            assert_eq!(ring_pages_for(32), 128);
        }
    }

    #[test]
    fn decodes_lost_records() {
        assert_eq!(decode_lost(&rec(&[42, 17, 0])), Some(17));
        assert_eq!(decode_lost(&[0u8; 10]), None);
    }

    #[test]
    fn rejects_short_and_unknown_records() {
        assert!(decode_sample(&[0u8; 12], PAGE_FAULT_SAMPLE_TYPE).is_err());
        assert!(decode_sample(&[0u8; 64], 1 << 5).is_err()); // CALLCHAIN
    }

    #[test]
    fn hardware_samplers_say_which_events_and_why_not() {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs");
        // Found in sysfs: the entry names the events; on this PMU-less VM the trial open fails
        // and says why, on a Skylake it would open.
        let pebs = hardware_info(
            "pebs",
            crate::pmu::pebs_events(&fixtures.join("skylake"), 30),
        );
        assert!(
            pebs.why
                .starts_with("cpu/mem-loads,ldlat=30/ and cpu/mem-stores/"),
            "{}",
            pebs.why
        );
        assert_eq!(pebs.available, !pebs.why.contains(": "), "{}", pebs.why);
        let spr = hardware_info(
            "pebs",
            crate::pmu::pebs_events(&fixtures.join("sapphire-rapids"), 30),
        );
        assert!(spr.why.contains("mem-loads-aux"), "{}", spr.why);
        let none = hardware_info("ibs", crate::pmu::ibs_events(&fixtures.join("kvm")));
        assert!(!none.available);
        assert!(none.why.contains("no ibs_op PMU"), "{}", none.why);
    }

    #[test]
    fn list_samplers_names_all_and_says_why() {
        let l = list_samplers();
        let names: Vec<_> = l.iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            ["page-faults", "pebs", "ibs", "soft-dirty", "numa-hinting"]
        );
        assert!(l.iter().all(|s| !s.why.is_empty()));
    }

    #[test]
    fn small_ring_wraps_without_losses_and_gives_the_cpu() {
        // Pinned to one cpu: every sample must say that cpu, which now comes from the ring.
        let Some((cpus, pin, tid)) = own_thread_pinned() else {
            return;
        };
        let node_of_cpu: Vec<u32> = (0..=pin).map(|c| c + 10).collect();
        // 8 data pages hold about 1300 records of 24 + 8 bytes: rounds of 600 faults, drained
        // between rounds, wrap the ring many times.
        let Ok(mut s) =
            AccessSampler::open_with_ring(tid, &cpus, node_of_cpu, false, 8, SamplePeriod::EVERY)
        else {
            eprintln!("skipped: perf_event_open refused");
            return;
        };
        let (mut inside, mut touched, mut wrong_cpu) = (0u64, 0u64, 0u64);
        for _ in 0..20 {
            let pages = FreshPages::touch(600);
            touched += 600;
            s.drain(&mut |x| {
                if pages.range().contains(&x.addr) {
                    inside += 1;
                    if x.cpu != pin || x.node != pin + 10 || x.tid != tid as u32 {
                        wrong_cpu += 1;
                    }
                }
            });
        }
        assert_eq!(s.lost(), 0, "lost samples");
        assert_eq!(s.undecodable(), 0);
        assert_eq!(wrong_cpu, 0, "samples with another cpu, node or thread");
        // Fresh mappings: one fault per page, each sampled once.
        assert_eq!(inside, touched, "faults sampled of the pages touched");
    }

    #[test]
    fn an_overflowing_ring_counts_its_losses() {
        let Some((cpus, pin, tid)) = own_thread_pinned() else {
            return;
        };
        let node_of_cpu = vec![0; pin as usize + 1];
        // 8 data pages hold about 1300 records: 6000 faults without draining overflow the ring.
        let Ok(mut s) =
            AccessSampler::open_with_ring(tid, &cpus, node_of_cpu, false, 8, SamplePeriod::EVERY)
        else {
            eprintln!("skipped: perf_event_open refused");
            return;
        };
        let pages = FreshPages::touch(6000);
        // A few more faults once the ring has room again make the kernel write its
        // PERF_RECORD_LOST.
        let mut inside = 0u64;
        s.drain(&mut |x| inside += u64::from(pages.range().contains(&x.addr)));
        let more = FreshPages::touch(10);
        s.drain(&mut |x| inside += u64::from(pages.range().contains(&x.addr)));
        drop(more);
        assert!(inside < 6000, "a full ring kept every sample: {inside}");
        assert!(s.lost() > 0, "the kernel's PERF_RECORD_LOST count");
        let lost = s.lost_total();
        assert!(
            s.samples() + lost >= 6000,
            "samples {} + lost {lost} cover the 6000 faults",
            s.samples()
        );
    }

    #[test]
    fn samples_own_faults_when_allowed() {
        let Some((cpus, tid)) = own_thread() else {
            return;
        };
        let Ok(mut s) =
            AccessSampler::open(tid, &cpus, vec![0; cpus.len()], false, SamplePeriod::EVERY)
        else {
            eprintln!("skipped: perf_event_open refused");
            return;
        };
        let buf = vec![1u8; 64 << 20];
        let lo = buf.as_ptr() as u64;
        let hi = lo + buf.len() as u64;
        let mut inside = 0;
        s.drain(&mut |x| {
            if (lo..hi).contains(&x.addr) {
                inside += 1;
            }
        });
        drop(buf);
        assert!(inside > 1000, "only {inside} faults in the buffer");
    }

    #[test]
    fn sample_period_parses_and_says_what_is_wrong() {
        assert_eq!("1".parse::<SamplePeriod>(), Ok(SamplePeriod::EVERY));
        assert_eq!(" 8 ".parse::<SamplePeriod>(), Ok(SamplePeriod(8)));
        for bad in ["0", "-5", "1.5", "all", "", "1000001"] {
            let e = bad.parse::<SamplePeriod>().expect_err(bad);
            assert!(e.contains("one page fault in N"), "{bad}: {e}");
        }
        assert_eq!(
            DEFAULT_SAMPLE_PERIOD_ARG.parse(),
            Ok(SamplePeriod::default())
        );
        assert_eq!(SamplePeriod(8).to_string(), "one fault in 8 (period 8)");
    }

    #[test]
    fn a_period_samples_one_fault_in_n() {
        let Some((cpus, tid)) = own_thread() else {
            return;
        };
        const PERIOD: u64 = 16;
        let Ok(mut s) =
            AccessSampler::open(tid, &cpus, vec![0; cpus.len()], false, SamplePeriod(PERIOD))
        else {
            eprintln!("skipped: perf_event_open refused");
            return;
        };
        let pages = 40_000;
        let fresh = FreshPages::touch(pages);
        let mut inside = 0u64;
        s.drain(&mut |x| {
            if fresh.range().contains(&x.addr) {
                inside += 1;
            }
        });
        drop(fresh);
        // Every fault was counted, one in 16 sampled (each cpu's event counts its own faults, and
        // the faults before the loop shift its phase: one sample more or less per cpu).
        assert!(s.counted() >= pages as u64, "counted {}", s.counted());
        let expected = pages as u64 / PERIOD;
        let slack = cpus.len() as u64;
        assert!(
            (expected - slack..=expected + slack).contains(&inside),
            "{inside} samples of {pages} faults at period {PERIOD}"
        );
        assert_eq!(s.lost_total(), 0, "faults the period skips are not losses");
    }

    #[test]
    fn hardware_records_become_loads_and_stores_with_latency() {
        // A synthetic PEBS load in HW_SAMPLE_TYPE's layout: pid/tid, time, addr, weight,
        // data_src (op LOAD, lvl HIT|REM_RAM1).
        let load = rec(&[pair(8, 7), 1_000, 0x7f00_0000_1000, 312, 0x2 | (0x102 << 5)]);
        let r = decode_sample(&load, HW_SAMPLE_TYPE).expect("decodes");
        let x = to_sample(&r, true, 3, 1).expect("a load");
        assert_eq!((x.pid, x.tid, x.cpu, x.node), (8, 7, 3, 1));
        assert_eq!(x.kind, Kind::Load);
        assert_eq!(x.latency_ns, Some(312));
        assert_eq!(x.data_source, Some(DataSource::RemoteDram));
        assert_eq!(x.addr, 0x7f00_0000_1000);
        // A store hitting L1.
        let store = rec(&[pair(8, 7), 1_001, 0x1000, 5, 0x4 | (0xa << 5)]);
        let r = decode_sample(&store, HW_SAMPLE_TYPE).expect("decodes");
        assert_eq!(to_sample(&r, true, 0, 0).map(|x| x.kind), Some(Kind::Store));
        // An IBS op that is not a memory access (op NA), and a load without an address.
        let op = rec(&[pair(8, 7), 1_002, 0, 0, 0x1]);
        let r = decode_sample(&op, HW_SAMPLE_TYPE).expect("decodes");
        assert_eq!(to_sample(&r, true, 0, 0), None);
        let no_addr = rec(&[pair(8, 7), 1_003, 0, 40, 0x2 | (0x102 << 5)]);
        let r = decode_sample(&no_addr, HW_SAMPLE_TYPE).expect("decodes");
        assert_eq!(to_sample(&r, true, 0, 0), None);
        // A page fault stays a fault, whatever its fields.
        let fault = rec(&[pair(8, 7), 1_004, 0x2000]);
        let r = decode_sample(&fault, PAGE_FAULT_SAMPLE_TYPE).expect("decodes");
        let x = to_sample(&r, false, 1, 0).expect("a fault");
        assert_eq!(
            (x.kind, x.latency_ns, x.data_source),
            (Kind::Fault, None, None)
        );
    }

    #[test]
    fn hardware_ring_records_decode_from_a_real_kernel() {
        // No PMU here: the software page-fault event, opened as if it were a sysfs PMU event
        // (type 1, config 2), with the hardware samplers' sample_type. The kernel writes WEIGHT
        // and DATA_SRC as zeros, so every record must decode (the layout is right) and be
        // dropped as "not a memory access" (no load/store in DATA_SRC).
        let Some((cpus, tid)) = own_thread() else {
            return;
        };
        let event = SamplerEvent::Hardware(crate::pmu::HwEvent {
            label: "software/page-faults/".into(),
            event: crate::pmu::PmuEvent {
                ty: 1,
                config: [2, 0, 0],
            },
            precise: perf_event::SampleSkid::Arbitrary,
        });
        let Ok(mut s) = AccessSampler::open_events(
            tid,
            &cpus,
            vec![0; cpus.len()],
            false,
            RING_DATA_PAGES,
            &[event],
            SamplePeriod::EVERY,
        ) else {
            eprintln!("skipped: perf_event_open refused");
            return;
        };
        assert!(
            s.describe().starts_with("software/page-faults/ on"),
            "{}",
            s.describe()
        );
        // `black_box`: an optimised build otherwise drops the unused buffer, and its faults.
        let buf = std::hint::black_box(vec![1u8; 4 << 20]);
        let mut samples = 0;
        s.drain(&mut |_| samples += 1);
        drop(buf);
        assert_eq!(samples, 0, "records without a load or store became samples");
        assert_eq!(s.undecodable(), 0, "records that did not decode");
        assert!(s.not_memory() >= 1000, "only {} records", s.not_memory());
    }
}
