//! Decoding of the perf ring's records: `PERF_RECORD_SAMPLE` bodies of page-fault and hardware
//! (PEBS, IBS) events, `PERF_RECORD_LOST` counts, and their conversion into [`Sample`]s.

use numaff_behave::{Kind, Sample};
use perf_event::SampleFlag;

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
pub(super) const PAGE_FAULT_SAMPLE_FLAGS: SampleFlag = SampleFlag::TID
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
pub(super) const HW_SAMPLE_FLAGS: SampleFlag = SampleFlag::TID
    .union(SampleFlag::TIME)
    .union(SampleFlag::ADDR)
    .union(SampleFlag::WEIGHT)
    .union(SampleFlag::DATA_SRC);
/// A decoded record as a [`Sample`] of a ring of `cpu` on `node`: a page fault, or a hardware
/// sample whose DATA_SRC says load or store (weight as `latency_ns`, in core cycles as the PMU
/// gives it). None for a hardware sample that is neither a load nor a store (IBS samples every
/// kind of op) or has no data address.
pub(super) fn to_sample(r: &RawSample, hardware: bool, cpu: u32, node: u32) -> Option<Sample> {
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
}
