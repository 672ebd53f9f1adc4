//! Other tools read numaff traces as they are: pyarrow opens a written trace and sees the rows, the
//! column types and the metadata (scripts/setup.sh installs pyarrow).

use std::process::Command;

use numaff_behave::trace::write_trace;
use numaff_behave::{DataSource, Kind, Sample, TraceMeta};

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
fn issue5_pyarrow_reads_a_written_trace() {
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
    let out = Command::new("python3")
        .arg("-c")
        .arg(SCRIPT)
        .arg(&path)
        .output()
        .expect("python3 runs (scripts/setup.sh installs it with pyarrow)");
    assert!(
        out.status.success(),
        "pyarrow failed (scripts/setup.sh installs pyarrow): {}",
        String::from_utf8_lossy(&out.stderr)
    );
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
