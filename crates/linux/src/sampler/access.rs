//! The access sampler: one inherited perf event per cpu (and per hardware event) on a task and
//! its descendants, each with its mmapped ring buffer, drained into [`Sample`]s.

use std::io;
use std::os::fd::AsRawFd;
use std::time::Duration;

use numaff_behave::Sample;
use perf_event::events::Software;
use perf_event::{Builder, Clock, Sampler};

use super::decode::{
    decode_lost, decode_sample, to_sample, HW_SAMPLE_FLAGS, HW_SAMPLE_TYPE,
    PAGE_FAULT_SAMPLE_FLAGS, PAGE_FAULT_SAMPLE_TYPE, PERF_RECORD_LOST, PERF_RECORD_SAMPLE,
};
use super::error::{perf_advice_on, SamplerError};
use super::list::{HW_COST, HW_SEES, PAGE_FAULTS_COST, PAGE_FAULTS_SEES};
use super::page_size;
use super::period::SamplePeriod;
use super::ring::RING_DATA_PAGES;

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
                        advice: perf_advice_on(&e, Some(pid)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampler::error::perf_event_paranoid;

    /// A fresh private anonymous mapping of small pages, each written once by this thread (one
    /// page fault per page), unmapped when dropped.
    struct FreshPages(memmap2::MmapMut);

    impl FreshPages {
        fn touch(pages: usize) -> Self {
            let mut map = memmap2::MmapMut::map_anon(pages * page_size()).unwrap();
            // Small pages: one fault per page also where transparent huge pages are always on.
            let _ = map.advise(memmap2::Advice::NoHugePage);
            for i in 0..pages {
                // SAFETY: i * page is inside the mapping.
                unsafe { std::ptr::write_volatile(map.as_mut_ptr().add(i * page_size()), 1) };
            }
            FreshPages(map)
        }

        fn range(&self) -> std::ops::Range<u64> {
            self.0.as_ptr() as u64..self.0.as_ptr() as u64 + self.0.len() as u64
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
    fn hardware_ring_records_decode_from_a_real_kernel() {
        // No PMU needed: the software page-fault event, opened as if it were a sysfs PMU event
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
