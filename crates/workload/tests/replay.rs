//! Replay of a recorded page-level trace (numaff_behave's Parquet and CSV traces) as a simulator
//! workload: the recorded threads, cpus and gaps are kept, and placement changes only the cost.

#![allow(clippy::unwrap_used)]

use numaff_behave::{tracefile, Kind, Sample, TraceMeta};
use numaff_machine::catalog as machines;
use numaff_workload::{replay, run, DataChoice, RunOptions, ThreadPolicy};

/// Two threads of one process on kmaf-sim-4x2, thread 1 on cpu 0 (node 0) and thread 2 on cpu 4
/// (node 2), each storing to and then loading 64 pages of its own, 1 sample per 50 ns.
fn samples() -> Vec<Sample> {
    let mut v = Vec::new();
    for (tid, cpu, node, base) in [(1u32, 0u32, 0u32, 0x10_0000u64), (2, 4, 2, 0x80_0000)] {
        for pass in 0..2u64 {
            for page in 0..64u64 {
                v.push(Sample {
                    time_ns: 1_000_000 + (pass * 64 + page) * 50,
                    pid: 4242,
                    tid,
                    cpu,
                    node,
                    addr: base + page * 4096 + pass * 64,
                    kind: if pass == 0 { Kind::Store } else { Kind::Load },
                    latency_ns: None,
                    data_source: None,
                });
            }
        }
    }
    v
}

fn load(ext: &str) -> numaff_workload::Workload {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("rec.{ext}"));
    let n = tracefile::write_trace(&path, &TraceMeta::default(), &samples()).unwrap();
    assert_eq!(n, 256);
    let m = machines::load("kmaf-sim-4x2").unwrap();
    replay::load(&path, m.frequency_mhz.unwrap() / 1000.0).unwrap()
}

#[test]
fn replay_runs_each_recorded_thread_on_its_cpu() {
    let m = machines::load("kmaf-sim-4x2").unwrap();
    for ext in ["parquet", "csv"] {
        let w = load(ext);
        assert_eq!(w.threads(), 2, "{ext}");
        let opts = RunOptions {
            threads: ThreadPolicy::Recorded,
            data: DataChoice::FirstTouch,
            seed: 0,
        };
        let r = run(&m, &w, &opts).unwrap();
        assert_eq!(r.accesses, 256, "{ext}: one access per sample");
        let cpus: Vec<u32> = r.threads.iter().map(|t| t.cpu).collect();
        assert_eq!(cpus, vec![0, 4], "{ext}");
        // First touch by the recorded threads: every page on its own thread's node.
        assert_eq!(r.remote_accesses, 0, "{ext}");
        assert!(r.local_accesses >= 128, "{ext}: {}", r.local_accesses);
        assert_eq!(r.page_faults, 128, "{ext}");
        // The recorded gaps are kept: 128 samples 50 ns apart, so each thread runs >= 6.35 us.
        assert!(r.threads.iter().all(|t| t.time_ns >= 6_350), "{ext}: {r:?}");
    }
}

#[test]
fn replay_placement_changes_the_cost_not_the_accesses() {
    let m = machines::load("kmaf-sim-4x2").unwrap();
    let w = load("parquet");
    let go = |data| {
        run(
            &m,
            &w,
            &RunOptions {
                threads: ThreadPolicy::Recorded,
                data,
                seed: 0,
            },
        )
        .unwrap()
    };
    let local = go(DataChoice::OracleLocal);
    let remote = go(DataChoice::OracleRemote);
    assert_eq!(local.accesses, remote.accesses);
    assert_eq!(local.remote_accesses, 0);
    assert!(remote.remote_accesses >= 128 && remote.local_accesses == 0);
    assert!(
        remote.makespan_ns > local.makespan_ns,
        "{} vs {}",
        remote.makespan_ns,
        local.makespan_ns
    );
}

#[test]
fn bad_trace_input_says_what_and_where() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.parquet");
    let e = replay::load(&missing, 1.8).unwrap_err().to_string();
    assert!(e.contains("nope.parquet"), "{e}");
    let garbage = dir.path().join("bad.csv");
    std::fs::write(&garbage, "not,a,trace\n1,2,3\n").unwrap();
    let e = replay::load(&garbage, 1.8).unwrap_err().to_string();
    assert!(e.contains("bad.csv"), "{e}");
    // A generated workload has no recorded cpus.
    let m = machines::load("kmaf-sim-4x2").unwrap();
    let w = numaff_workload::catalog::load("nas-ep").unwrap();
    let e = numaff_workload::placement(&m, &w, &ThreadPolicy::Recorded, 0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("--trace"), "{e}");
}
