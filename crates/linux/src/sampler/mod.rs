//! Samplers of memory accesses for `numaff profile`: what the kernel lets us see of a program's
//! accesses, as [`numaff_behave::Sample`]s.
//!
//! The one sampler that works on a stock machine is **page faults** through `perf_event_open`
//! (software event `PERF_COUNT_SW_PAGE_FAULTS`, sample TID|TIME|ADDR: the cpu is the ring's; user
//! space only so that it works under `perf_event_paranoid` 2), on every fault by default or one in
//! N ([`SamplePeriod`]). Like `perf record` it opens one event per cpu with `inherit` set, each
//! with its own mmapped ring buffer: an inherited event opened on one task for all cpus (cpu = -1)
//! cannot be mmapped. The events must exist before the program's threads are created, so
//! [`AccessSampler::open`] is called on a freshly forked child that waits for a go signal before
//! its exec ([`crate::launch`]).
//!
//! [`list_samplers`] says which samplers work on this machine and why not the others (PEBS, IBS,
//! soft-dirty induced faults, NUMA-balancing hinting faults). The decoding of hardware samples
//! (ADDR|WEIGHT|DATA_SRC) is in [`decode_sample`]; it is tested on synthetic records only.
//!
//! Modules: `access` (the sampler: events, rings, draining), `decode` (records to samples),
//! `ring` (ring buffer sizes), `period` (sample periods), `list` (which samplers work here),
//! `error` (failures and advice). Every public item is re-exported here.

mod access;
mod decode;
mod error;
mod list;
mod period;
mod ring;

pub use access::{AccessSampler, SamplerEvent};
pub use decode::{
    decode_data_src, decode_lost, decode_sample, sample_type, RawSample, HW_SAMPLE_TYPE,
    PAGE_FAULT_SAMPLE_TYPE, PERF_RECORD_LOST, PERF_RECORD_SAMPLE,
};
pub use error::{perf_event_paranoid, SamplerError};
pub(crate) use list::soft_dirty_probe;
pub use list::{
    list_samplers, SamplerInfo, HW_COST, HW_SEES, PAGE_FAULTS_COST, PAGE_FAULTS_RATE,
    PAGE_FAULTS_SEES,
};
pub use period::{SamplePeriod, DEFAULT_HW_PERIOD, DEFAULT_SAMPLE_PERIOD_ARG};
pub use ring::{ring_pages_for, RING_BUDGET_BYTES, RING_DATA_PAGES, RING_DATA_PAGES_MAX};

/// The system page size (4096 if sysconf does not say).
fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}
