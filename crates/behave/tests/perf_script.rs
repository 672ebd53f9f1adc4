//! `perf script` import on the fixtures: one real page-fault recording made with perf 6.1 on this
//! machine, one hand-written `perf mem` file (PEBS cannot run here).

use std::collections::BTreeMap;
use std::path::PathBuf;

use numaff_behave::analyze::{analyze_samples, AnalyzeConfig};
use numaff_behave::perf_script::PerfScriptReader;
use numaff_behave::{DataSource, Kind, Sample, TraceMeta};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn read(name: &str, node_of_cpu: Vec<u32>) -> (Vec<Sample>, BTreeMap<u32, String>) {
    let mut r = PerfScriptReader::open(&fixture(name), node_of_cpu).expect("fixture opens");
    let mut all = Vec::new();
    for b in r.by_ref() {
        all.extend(b.expect("fixture parses"));
    }
    (all, r.thread_names().clone())
}

#[test]
fn real_page_fault_recording_imports_every_line() {
    let (s, names) = read("perf-script-page-faults.txt", vec![0, 1]);
    assert_eq!(s.len(), 184);
    let mut per_tid: BTreeMap<u32, usize> = BTreeMap::new();
    for x in &s {
        *per_tid.entry(x.tid).or_default() += 1;
        assert_eq!(x.kind, Kind::Fault);
        assert_eq!(x.pid, 30109);
        assert_eq!(x.node, x.cpu, "node of cpu 0 is 0, of cpu 1 is 1");
        assert_eq!(x.data_source, None, "perf says N/A for page faults");
    }
    assert_eq!(
        per_tid.into_iter().collect::<Vec<_>>(),
        [(30109, 49), (30112, 69), (30113, 66)]
    );
    assert_eq!(names.get(&30112).map(String::as_str), Some("pf"));
    assert!(s.windows(2).all(|w| w[0].time_ns <= w[1].time_ns));
}

#[test]
fn hand_written_perf_mem_file_gives_kinds_sources_and_communication() {
    let (s, names) = read("perf-script-mem.txt", vec![0, 0, 1, 1]);
    assert_eq!(s.len(), 12);
    let kinds: Vec<Kind> = s.iter().map(|x| x.kind).collect();
    assert_eq!(&kinds[..4], &[Kind::Store; 4]);
    assert_eq!(&kinds[4..], &[Kind::Load; 8]);
    let sources: Vec<Option<DataSource>> = s[4..8].iter().map(|x| x.data_source).collect();
    assert_eq!(
        sources,
        [
            Some(DataSource::LocalDram),
            Some(DataSource::L3),
            Some(DataSource::RemoteCache),
            Some(DataSource::LocalDram)
        ]
    );
    assert_eq!(
        s[4..8].iter().map(|x| x.latency_ns).collect::<Vec<_>>(),
        [Some(180), Some(220), Some(260), Some(300)]
    );
    assert_eq!(names.get(&103).map(String::as_str), Some("stream worker"));
    assert_eq!((s[8].pid, s[0].pid), (300, 0));
    assert_eq!((s[4].node, s[8].node), (1, 1));

    // Thread 101 wrote four lines that 102 read: their communication is the only one.
    let meta = TraceMeta {
        thread_names: names,
        ..TraceMeta::default()
    };
    let a = analyze_samples(&s, &meta, &AnalyzeConfig::default()).unwrap();
    let idx = |tid: u32| a.threads.iter().position(|t| t.tid == tid).unwrap();
    let (t1, t2, t3) = (idx(101), idx(102), idx(103));
    assert!(a.communication_matrix[t1][t2] > 0.0);
    assert_eq!(a.communication_matrix[t1][t3], 0.0);
    assert_eq!(a.communication_matrix[t2][t3], 0.0);
}
