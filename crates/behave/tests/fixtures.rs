//! Small trace files kept in the repository (they also seed the fuzzers, scripts/fuzz.sh): the
//! format stays readable across versions. `NUMAFF_REGENERATE_FIXTURES=1 cargo test -p
//! numaff-behave --test fixtures` writes them again.

use std::path::PathBuf;

use numaff_behave::trace::write_trace;
use numaff_behave::{DataSource, Kind, Sample, TraceMeta, TraceReader};

fn samples() -> Vec<Sample> {
    (0..40u64)
        .map(|i| Sample {
            time_ns: 1_000_000 + i * 1000,
            pid: 500,
            tid: 500 + (i % 4) as u32,
            cpu: (i % 4) as u32,
            node: (i % 4 / 2) as u32,
            addr: 0x7f00_0000_0000 + (i % 8) * 64,
            kind: [Kind::Store, Kind::Load, Kind::Fault][(i % 3) as usize],
            latency_ns: (i % 2 == 1).then_some(80 + i),
            data_source: (i % 5 == 0).then_some(DataSource::ALL[(i / 5) as usize % 10]),
        })
        .collect()
}

fn meta() -> TraceMeta {
    let mut m = TraceMeta {
        machine: Some("pack:1 numa:2 core:2 pu:1".into()),
        command: Some("./fixture".into()),
        sampler: Some("synthetic".into()),
        page_size: Some(4096),
        ..Default::default()
    };
    m.rates.insert("samples_per_s".into(), 40000.0);
    m.thread_names.insert(500, "main".into());
    m
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

#[test]
fn stored_traces_read_back() {
    if std::env::var_os("NUMAFF_REGENERATE_FIXTURES").is_some() {
        write_trace(&fixture("trace-small.parquet"), &meta(), &samples()).expect("write");
        write_trace(&fixture("trace-small.csv"), &meta(), &samples()).expect("write");
    }
    let r = TraceReader::open(&fixture("trace-small.parquet")).expect("parquet fixture");
    assert_eq!(r.meta(), &meta());
    assert_eq!(r.read_all().expect("rows"), samples());
    let r = TraceReader::open(&fixture("trace-small.csv")).expect("csv fixture");
    assert_eq!(r.read_all().expect("rows"), samples());
}

/// Found by fuzzing: parquet 57.3.2 panics (an `unwrap` in its thrift metadata decoder) on this
/// file. numaff gives an error naming the file.
#[test]
fn a_file_on_which_the_parquet_crate_panics_is_an_error() {
    let path = fixture("parquet-thrift-panic.parquet");
    let err = TraceReader::open(&path)
        .and_then(|r| r.read_all())
        .expect_err("corrupt");
    let msg = err.to_string();
    assert!(
        msg.contains("parquet-thrift-panic.parquet is not a readable Parquet trace"),
        "{msg}"
    );
}

/// Found by fuzzing: a footer whose schema list declares ~30 million elements in 2.5 KB. parquet
/// (57.3.2 and 58.4.1 alike, `read_thrift_vec`) reserves the declared length (4.4 GB) before
/// reading an element; Linux grants the untouched reservation, and the read then fails, which
/// numaff reports. (Where the system refuses such a reservation the process aborts: an upstream
/// limitation, README "Trace files".)
#[test]
fn issue5_a_footer_declaring_a_huge_list_is_an_error() {
    let path = fixture("parquet-footer-4gib-list.parquet");
    let err = TraceReader::open(&path)
        .and_then(|r| r.read_all())
        .expect_err("corrupt");
    let msg = err.to_string();
    assert!(
        msg.contains("parquet-footer-4gib-list.parquet is not a readable Parquet trace"),
        "{msg}"
    );
}
