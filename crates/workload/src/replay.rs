//! Replay of a recorded page-level trace (numaff_behave's Parquet or CSV traces, as `numaff
//! profile` writes them) as a workload: each recorded thread replays its samples in time order.
//!
//! A trace holds samples, not every access (faults, 1-in-N hardware samples), so the replay is the
//! sampled access stream: one simulated access per sample, at the recorded virtual address (a
//! store for `store`, a load for `load` and `fault`), after compute that fills the recorded gap
//! since the thread's previous sample (`gap_ns` x the machine's frequency), so the replay keeps
//! the recorded timeline and placement changes only what the accesses cost. Each recorded process
//! (pid) becomes a program that starts at its first sample (relative to the trace's first); its
//! threads are the recorded tids in ascending order, and `recorded_cpus` says where each ran
//! first (the `recorded` thread placement).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use numaff_behave::{Kind, Sample, TraceReader};

use crate::error::WorkloadError;
use crate::spec::{Init, Kernel, Program, Workload};

/// One replayed access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replayed {
    /// Virtual address.
    pub vaddr: u64,
    /// A store.
    pub write: bool,
    /// Compute cycles before it (the recorded gap since the thread's previous sample).
    pub gap_cycles: u64,
}

/// One recorded thread.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayThread {
    /// Recorded thread id.
    pub tid: u32,
    /// The cpu of its first sample.
    pub cpu: u32,
    /// Its accesses in time order.
    pub accesses: Arc<[Replayed]>,
}

/// The recorded threads of one process.
#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    /// Recorded process id.
    pub pid: u32,
    /// Threads by ascending tid.
    pub threads: Vec<ReplayThread>,
}

impl Replay {
    /// Where each thread ran first.
    pub fn recorded_cpus(&self) -> Vec<u32> {
        self.threads.iter().map(|t| t.cpu).collect()
    }
}

/// The longest recorded time a replay covers (one hour). The simulator advances in steps of
/// [`crate::PROGRESS_STEP_NS`] of simulated time, and recorded gaps become simulated time, so one
/// wrong timestamp years away would make the replay run for ever; `numaff profile` runs that are
/// replayed last seconds to minutes.
pub const MAX_REPLAY_SPAN_NS: u64 = 3_600_000_000_000;

/// A workload from samples: one program per pid (ascending), `cycles_per_ns` turning recorded
/// gaps into compute (the simulated machine's frequency in GHz). `name` names the workload.
pub fn from_samples(
    name: &str,
    samples: &[Sample],
    cycles_per_ns: f64,
) -> Result<Workload, WorkloadError> {
    if samples.is_empty() {
        return Err(WorkloadError::EmptyTrace(name.to_string()));
    }
    if !(cycles_per_ns.is_finite() && cycles_per_ns > 0.0) {
        return Err(WorkloadError::BadFrequency {
            name: name.to_string(),
            cycles_per_ns,
        });
    }
    let t0 = samples.iter().map(|s| s.time_ns).min().unwrap_or(0);
    let t1 = samples.iter().map(|s| s.time_ns).max().unwrap_or(0);
    if t1 - t0 > MAX_REPLAY_SPAN_NS {
        return Err(WorkloadError::TraceSpan {
            name: name.to_string(),
            span_s: (t1 - t0) as f64 * 1e-9,
            max_s: MAX_REPLAY_SPAN_NS as f64 * 1e-9,
        });
    }
    // pid -> tid -> samples (stable: equal times keep file order).
    let mut by: BTreeMap<u32, BTreeMap<u32, Vec<&Sample>>> = BTreeMap::new();
    for s in samples {
        by.entry(s.pid)
            .or_default()
            .entry(s.tid)
            .or_default()
            .push(s);
    }
    let mut programs = Vec::new();
    for (pid, threads) in by {
        let start = threads
            .values()
            .flat_map(|v| v.iter().map(|s| s.time_ns))
            .min()
            .unwrap_or(t0);
        let mut replay = Replay {
            pid,
            threads: Vec::new(),
        };
        for (tid, mut v) in threads {
            v.sort_by_key(|s| s.time_ns);
            let mut prev = start;
            let accesses: Vec<Replayed> = v
                .iter()
                .map(|s| {
                    let gap = s.time_ns.saturating_sub(prev);
                    prev = s.time_ns;
                    Replayed {
                        vaddr: s.addr,
                        write: s.kind == Kind::Store,
                        gap_cycles: (gap as f64 * cycles_per_ns).round() as u64,
                    }
                })
                .collect();
            replay.threads.push(ReplayThread {
                tid,
                cpu: v.first().map(|s| s.cpu).unwrap_or(0),
                accesses: accesses.into(),
            });
        }
        programs.push(Program {
            name: Some(format!("pid{pid}")),
            kernel: Kernel::Trace,
            threads: replay.threads.len() as u32,
            start_ns: start - t0,
            init: Init::Parallel,
            lines: 16,
            iterations: 1,
            compute_cycles: 0,
            write_fraction: 0.0,
            phases: 1,
            huge_pages: false,
            phase_shift: 0,
            seed: 0,
            then: Vec::new(),
            replay: Some(Arc::new(replay)),
        });
    }
    let w = Workload {
        name: name.to_string(),
        description: format!("replay of the recorded trace {name}"),
        follows: "a recorded page-level trace (numaff profile), replayed sample by sample".into(),
        programs,
    };
    w.check().map_err(|error| WorkloadError::InvalidTrace {
        name: name.to_string(),
        error,
    })?;
    Ok(w)
}

/// The compute cycles per ns of `machine`'s PUs, as the simulator runs them.
pub fn cycles_per_ns(machine: &numaff_machine::Machine) -> f64 {
    machine
        .frequency_mhz
        .filter(|&f| f > 0.0)
        .unwrap_or(numaff_sim::config::defaults::FREQUENCY_MHZ)
        / 1000.0
}

/// Reads a trace file (Parquet, or CSV by its extension) and makes it a workload for a machine
/// running at `cycles_per_ns` GHz ([`cycles_per_ns`]).
pub fn load(path: &Path, cycles_per_ns: f64) -> Result<Workload, WorkloadError> {
    let unreadable = |error| WorkloadError::ReadTrace {
        path: path.to_path_buf(),
        error,
    };
    let samples = TraceReader::open(path)
        .and_then(TraceReader::read_all)
        .map_err(unreadable)?;
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "trace".into());
    from_samples(&name, &samples, cycles_per_ns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Ops;
    use numaff_sim::Op;

    fn s(time_ns: u64, pid: u32, tid: u32, cpu: u32, addr: u64, kind: Kind) -> Sample {
        Sample {
            time_ns,
            pid,
            tid,
            cpu,
            node: 0,
            addr,
            kind,
            latency_ns: None,
            data_source: None,
        }
    }

    #[test]
    fn samples_become_programs_threads_and_gaps() {
        let v = vec![
            s(1_300, 7, 2, 3, 0x2000, Kind::Load),
            s(1_000, 7, 1, 1, 0x1000, Kind::Store),
            s(1_100, 7, 1, 1, 0x1040, Kind::Fault),
            s(5_000, 9, 4, 0, 0x9000, Kind::Load),
        ];
        let w = from_samples("t", &v, 2.0).unwrap();
        assert_eq!(w.programs.len(), 2);
        assert_eq!(w.threads(), 3);
        let p = &w.programs[0];
        assert_eq!((p.threads, p.start_ns), (2, 0));
        assert_eq!(w.programs[1].start_ns, 4_000);
        let r = p.replay.as_ref().unwrap();
        assert_eq!(r.recorded_cpus(), vec![1, 3]);
        let t1: Vec<Op> = Ops::new(crate::kernels::thread_steps(p, 2, 0)).collect();
        // tid 1: store at its start, a fault-load 100 ns (200 cycles at 2 GHz) later.
        assert_eq!(t1.len(), 3);
        assert!(matches!(t1[0], Op::Access(a) if a.write && a.vaddr == 0x1000));
        assert_eq!(t1[1], Op::Compute(200));
        assert!(matches!(t1[2], Op::Access(a) if !a.write && a.vaddr == 0x1040));
        // tid 2 waits 300 ns from the program's start.
        let t2: Vec<Op> = Ops::new(crate::kernels::thread_steps(p, 2, 1)).collect();
        assert_eq!(t2[0], Op::Compute(600));
    }

    /// Regression: a sample with a timestamp years after the others made `numaff sim --trace`
    /// step through that simulated time for ever.
    #[test]
    fn a_trace_spanning_more_than_an_hour_is_refused() {
        let v = vec![
            s(0, 1, 1, 0, 0x1000, Kind::Load),
            s(MAX_REPLAY_SPAN_NS + 1, 2, 2, 0, 0x2000, Kind::Store),
        ];
        let e = from_samples("far", &v, 2.0).unwrap_err().to_string();
        assert!(e.contains("a replay covers at most 3600 s"), "{e}");
        let v = vec![v[0], s(MAX_REPLAY_SPAN_NS, 2, 2, 0, 0x2000, Kind::Store)];
        assert!(from_samples("hour", &v, 2.0).is_ok());
    }

    #[test]
    fn an_empty_trace_is_an_error_that_says_so() {
        let e = from_samples("empty", &[], 2.0).unwrap_err().to_string();
        assert!(e.contains("no samples"), "{e}");
    }
}
