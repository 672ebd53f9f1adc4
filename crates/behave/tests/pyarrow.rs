//! Other tools read numaff traces as they are: pyarrow opens a written trace and sees the rows, the
//! column types and the metadata (scripts/setup.sh installs pyarrow).

use std::ffi::OsStr;
use std::process::{Command, Output};

use numaff_behave::parquet_pages::check_pages;
use numaff_behave::tracefile::write_trace;
use numaff_behave::{DataSource, Kind, Sample, TraceMeta};
use parquet::arrow::arrow_reader::ArrowReaderMetadata;

/// Runs a Python `script` with `arg` as `sys.argv[1]`; it must succeed.
fn python(script: &str, arg: &OsStr) -> Output {
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(arg)
        .output()
        .expect("python3 runs (scripts/setup.sh installs it with pyarrow)");
    assert!(
        out.status.success(),
        "pyarrow failed (scripts/setup.sh installs pyarrow): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

const SCRIPT: &str = r#"
import json, sys
import pyarrow.parquet as pq
t = pq.read_table(sys.argv[1])
meta = {k.decode(): v.decode() for k, v in (t.schema.metadata or {}).items() if k.startswith(b"numaff.")}
cols = t.to_pydict()
print(json.dumps({
    "names": t.column_names,
    "types": [str(f.type) for f in t.schema],
    "rows": t.num_rows,
    "row2": {c: cols[c][2] for c in t.column_names},
    "row0_latency": cols["latency_ns"][0],
    "meta": meta,
}))
"#;

#[test]
fn pyarrow_reads_a_written_trace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.parquet");
    let samples: Vec<Sample> = (0..1000u64)
        .map(|i| Sample {
            time_ns: 5_000 + i,
            pid: 77,
            tid: 77 + (i % 3) as u32,
            cpu: (i % 4) as u32,
            node: (i % 2) as u32,
            addr: 0x7fff_0000_0000 + i * 8,
            kind: [Kind::Fault, Kind::Load, Kind::Store][(i % 3) as usize],
            latency_ns: (i % 2 == 0).then_some(i * 10).filter(|&l| l > 0),
            data_source: (i == 2).then_some(DataSource::RemoteDram),
        })
        .collect();
    let mut meta = TraceMeta {
        command: Some("./comm 8".into()),
        sampler: Some("synthetic".into()),
        ..Default::default()
    };
    meta.thread_names.insert(78, "worker".into());
    write_trace(&path, &meta, &samples).expect("write");
    let out = python(SCRIPT, path.as_os_str());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        v["names"],
        serde_json::json!([
            "time_ns",
            "pid",
            "tid",
            "cpu",
            "node",
            "addr",
            "kind",
            "latency_ns",
            "data_source"
        ])
    );
    assert_eq!(v["types"][0], "uint64");
    assert_eq!(v["types"][6], "string");
    assert_eq!(v["rows"], 1000);
    assert_eq!(
        v["row2"],
        serde_json::json!({
            "time_ns": 5002, "pid": 77, "tid": 79, "cpu": 2, "node": 0,
            "addr": 0x7fff_0000_0010u64, "kind": "store", "latency_ns": 20,
            "data_source": "remote_dram"
        })
    );
    assert!(v["row0_latency"].is_null());
    assert_eq!(v["meta"]["numaff.command"], "./comm 8");
    assert_eq!(v["meta"]["numaff.sampler"], "synthetic");
    assert_eq!(v["meta"]["numaff.thread_names"], r#"{"78":"worker"}"#);
}

/// Writes the same trace-shaped table with pyarrow in each page layout it offers (page checksums,
/// data page v2, dictionaries and page statistics on or off, Snappy or none, small pages so that
/// there are many) and prints the file names.
const WRITE_SCRIPT: &str = r#"
import sys
import pyarrow as pa, pyarrow.parquet as pq
n = 20000
t = pa.table({
    "time_ns": pa.array([1000 + 7 * i for i in range(n)], pa.int64()),
    "pid": pa.array([5] * n, pa.int64()),
    "tid": pa.array([5 + i % 3 for i in range(n)], pa.int64()),
    "cpu": pa.array([i % 4 for i in range(n)], pa.int32()),
    "node": pa.array([i % 2 for i in range(n)], pa.int32()),
    "addr": pa.array([0x7f0000000000 + (i * 7919 % 4096) * 64 for i in range(n)], pa.uint64()),
    "kind": pa.array([["load", "store", "fault"][i % 3] for i in range(n)]),
    "latency_ns": pa.array([None if i % 2 else i for i in range(n)], pa.int64()),
})
for i, (v2, crc, dic, stats, codec) in enumerate([
    (False, False, True, True, "snappy"),
    (True, True, True, True, "snappy"),
    (True, False, False, False, "snappy"),
    (False, True, True, True, "none"),
    (True, True, False, True, "none"),
]):
    path = f"{sys.argv[1]}/p{i}.parquet"
    pq.write_table(t, path, compression=codec, use_dictionary=dic, write_statistics=stats,
                   data_page_version="2.0" if v2 else "1.0", write_page_checksum=crc,
                   data_page_size=4096, row_group_size=7000)
    print(path)
"#;

/// numaff's page-header check (parquet_pages.rs) accepts what pyarrow writes, in every layout
/// above: the rows read back.
#[test]
fn numaff_reads_traces_pyarrow_writes_in_every_page_layout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = python(WRITE_SCRIPT, dir.path().as_os_str());
    let paths: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(paths.len(), 5);
    for path in paths {
        let samples = numaff_behave::TraceReader::open(std::path::Path::new(&path))
            .and_then(|r| r.read_all())
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(samples.len(), 20_000, "{path}");
        assert_eq!(samples[19_999].time_ns, 1000 + 7 * 19_999, "{path}");
        assert_eq!(samples[3].latency_ns, None, "{path}");
        assert_eq!(samples[4].latency_ns, Some(4), "{path}");
        // And the check walked every chunk's pages: 3 row groups of 8 columns, several pages
        // each.
        let file = std::fs::File::open(&path).expect("open");
        let meta = ArrowReaderMetadata::load(&file, Default::default()).expect("metadata");
        let pages = check_pages(&file, meta.metadata()).expect("accepted");
        assert!(pages > 3 * 8, "{path}: {pages} pages");
    }
}
