//! Small trace files kept in the repository (they also seed the fuzzers, scripts/fuzz.sh): the
//! format stays readable across versions. `NUMAFF_REGENERATE_FIXTURES=1 cargo test -p
//! numaff-behave --test fixtures` writes them again.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use numaff_behave::tracefile::write_trace;
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

/// The peak resident memory of this process (VmHWM), bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM");
    kib * 1024
}

/// How numaff refused a corrupt fixture: the error message, by how much the peak resident memory
/// grew meanwhile, and how long it took. Panics if the fixture reads (`why` says why it must not).
fn refusal(name: &str, why: &str) -> (String, u64, Duration) {
    let before = peak_rss();
    let started = Instant::now();
    let err = TraceReader::open(&fixture(name))
        .and_then(|r| r.read_all())
        .map(|samples| samples.len())
        .expect_err(why);
    let took = started.elapsed();
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("{name} is not a readable Parquet trace")),
        "{msg}"
    );
    (msg, peak_rss().saturating_sub(before), took)
}

/// The refused file did not make numaff resident by what it claimed (gigabytes).
fn assert_small_growth(grown: u64) {
    assert!(
        grown < 256 << 20,
        "peak resident memory grew by {grown} bytes"
    );
}

/// Found by fuzzing: parquet 57.3.2 panicked (an `unwrap` in its thrift metadata decoder) on this
/// file, which numaff's guard turned into an error; parquet 60 rejects it itself. Either way the
/// error names the file.
#[test]
fn a_file_on_which_the_parquet_crate_panics_is_an_error() {
    refusal("parquet-thrift-panic.parquet", "corrupt");
}

/// Found by fuzzing: a footer whose schema list declares ~30 million elements in 2.5 KB. parquet
/// up to 59.3 reserved the declared length (4.4 GB) before reading an element; 60 bounds a list
/// by the bytes left (apache/arrow-rs#10979), so the read fails at once with an error.
#[test]
fn a_footer_declaring_a_huge_list_is_an_error() {
    refusal("parquet-footer-4gib-list.parquet", "corrupt");
}

/// CI's fuzz run found a file (lost with its machine) that ended the fuzzer this way: a footer
/// (24 bytes here) whose schema list declares 2^31 - 1 elements. parquet 57.3.2 asked for 206 GB
/// for them and Linux refused, which aborts the process ("memory allocation of 206158430112 bytes
/// failed": numaff analyze died with SIGABRT). parquet 60 rejects the list; numaff reports it.
#[test]
fn a_footer_declaring_more_than_memory_is_an_error_not_an_abort() {
    refusal("parquet-footer-2g-schema-list.parquet", "corrupt");
}

/// Found by fuzzing: a page header claiming 1.9 GB uncompressed from a few hundred Snappy bytes.
/// parquet zero-fills the claimed size before decompressing (numaff analyze peaked at 1.86 GB
/// resident on the fuzzed file, which parquet 60 now rejects for its footer). This fixture is
/// numaff's own trace with the same claim written into its first page header (made by
/// `trace_claiming` in parquet_pages.rs); numaff's page check rejects the page before the crate
/// decodes it.
#[test]
fn a_page_claiming_more_than_snappy_can_produce_is_an_error_without_the_memory() {
    let (msg, grown, _) = refusal(
        "parquet-page-claims-2gb.parquet",
        "corrupt (parquet alone reads its 4,000 rows, after zero-filling 1.9 GB)",
    );
    assert!(msg.contains("more than Snappy can produce"), "{msg}");
    assert_small_growth(grown);
}

/// Found by fuzzing the page check: a column chunk whose offset is negative.
/// `ColumnChunkMetaData::byte_range` asserts on that (parquet 60.1), so the page check reads the
/// offsets itself and leaves the chunk to the crate, whose panic numaff's reader turns into an
/// error naming the file.
#[test]
fn a_column_chunk_at_a_negative_offset_is_an_error() {
    refusal("parquet-negative-chunk-offset.parquet", "corrupt");
}

/// Found by fuzzing the page check: a dictionary page claiming 536,870,905 INT32 values in a few
/// bytes. parquet sizes the dictionary from the claim and zero-fills it (2 GB) before decoding a
/// value; numaff's page check rejects a dictionary page claiming more values than its bytes hold.
#[test]
fn a_dictionary_page_claiming_more_values_than_its_bytes_hold_is_an_error() {
    let (msg, grown, _) = refusal("parquet-dictionary-claims-2gb.parquet", "corrupt");
    assert!(msg.contains("the dictionary page claims"), "{msg}");
    assert_small_growth(grown);
}

/// Found by fuzzing the page check: a page header whose list declares a vast number of elements
/// past the end of the data. parquet's page-header reader (a stream, not bounded by the bytes
/// left) skipped them one by one: 65 s on this 3 KB file in the fuzzer's build. numaff's page
/// check refuses a header that does not parse within its column chunk, at once.
#[test]
fn a_page_header_that_runs_past_its_chunk_is_an_error_at_once() {
    let (msg, _, took) = refusal("parquet-page-header-slow-list.parquet", "corrupt");
    assert!(msg.contains("page header"), "{msg}");
    assert!(took.as_secs_f64() < 5.0, "took {took:?}");
}
