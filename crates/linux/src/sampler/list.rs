//! The samplers numaff knows (page faults, PEBS, IBS, soft-dirty, NUMA hinting), whether each
//! works on this machine and why not, with what it sees, its rate and its cost.

use std::fmt;
use std::path::Path;

use perf_event::events::Software;
use perf_event::Builder;

use super::decode::HW_SAMPLE_FLAGS;
use super::error::{perf_advice, perf_event_paranoid, SamplerError};
use super::page_size;
use super::period::DEFAULT_HW_PERIOD;

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
    let mut map = memmap2::MmapMut::map_anon(page).ok()?;
    let p = map.as_mut_ptr();
    // SAFETY: p points to the mapping's first byte, writable and alive until `map` drops.
    unsafe { std::ptr::write_volatile(p, 1) };
    let entry = (|| {
        let mut f = std::fs::File::open("/proc/self/pagemap").ok()?;
        f.seek(SeekFrom::Start((p as u64 / page as u64) * 8)).ok()?;
        let mut b = [0u8; 8];
        f.read_exact(&mut b).ok()?;
        Some(u64::from_ne_bytes(b))
    })();
    drop(map);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hardware_samplers_say_which_events_and_why_not() {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs");
        // Found in sysfs: the entry names the events; without a PMU the trial open fails and
        // says why, on a Skylake it opens.
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
}
