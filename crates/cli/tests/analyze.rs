//! `numaff analyze`: a synthetic trace (8 threads, thread i stores lines that thread i+1 loads, in
//! three bursts) analysed from Parquet and CSV, as text, JSON and an HTML report rendered by
//! headless Chromium (scripts/setup.sh installs it).

use std::path::{Path, PathBuf};
use std::process::Command;

use assert_cmd::cargo::CommandCargoExt;
use numaff_behave::tracefile::write_trace;
use numaff_behave::{Kind, Sample, TraceMeta};

/// 8 threads; thread i stores 50 lines per burst that thread i+1 (mod 8) then loads; three bursts
/// (about normal, 0.6 ms standard deviation) at 10, 50 and 90 ms. Threads 0-3 on node 0, 4-7 on 1.
fn neighbour_trace() -> Vec<Sample> {
    let mut out = Vec::new();
    let mut seed = 5u64;
    for (burst, centre) in [10_000_000u64, 50_000_000, 90_000_000]
        .into_iter()
        .enumerate()
    {
        for round in 0..50u64 {
            for i in 0..8u32 {
                let j = (i + 1) % 8;
                let line = 0x10_0000u64 * (u64::from(i) + 1) + (burst as u64 * 50 + round) * 64;
                let mut t = centre;
                for _ in 0..4 {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    t += (seed >> 33) % 1_000_000;
                }
                let s = |time_ns, tid: u32, kind| Sample {
                    time_ns,
                    pid: 4000,
                    tid: 4000 + tid,
                    cpu: tid,
                    node: tid / 4,
                    addr: line,
                    kind,
                    latency_ns: None,
                    data_source: None,
                };
                out.push(s(t, i, Kind::Store));
                out.push(s(t + 50, j, Kind::Load));
            }
        }
    }
    out.sort_by_key(|s| s.time_ns);
    out
}

fn meta() -> TraceMeta {
    let mut m = TraceMeta {
        command: Some("./neighbours 8".into()),
        sampler: Some("synthetic".into()),
        ..Default::default()
    };
    m.rates.insert("samples_per_s".into(), 30000.0);
    for i in 0..8u32 {
        m.thread_names.insert(4000 + i, format!("worker-{i}"));
    }
    m
}

fn numaff(args: &[&str]) -> std::process::Output {
    Command::cargo_bin("numaff")
        .expect("numaff binary")
        .args(args)
        .output()
        .expect("numaff runs")
}

fn trace_in(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    write_trace(&path, &meta(), &neighbour_trace()).expect("write trace");
    path
}

#[test]
fn analyze_json_recovers_neighbour_pairs_and_three_bursts() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["t.parquet", "t.csv"] {
        let path = trace_in(dir.path(), name);
        let out = numaff(&["analyze", path.to_str().unwrap(), "--json"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let threads = v["threads"].as_array().unwrap();
        assert_eq!(threads.len(), 8);
        assert_eq!(threads[2]["tid"], 4002);
        let m: Vec<Vec<f64>> = serde_json::from_value(v["communication_matrix"].clone()).unwrap();
        // The heaviest partner of every thread is a neighbour.
        for (i, row) in m.iter().enumerate() {
            let best = (0..8).max_by(|&a, &b| row[a].total_cmp(&row[b])).unwrap();
            assert!(
                best == (i + 1) % 8 || (best + 1) % 8 == i,
                "{name}: row {i}: {row:?}"
            );
            assert_eq!(row[(i + 1) % 8], 150.0 * 64.0);
        }
        assert_eq!(v["clusters"], 3, "{name}");
        for key in ["Lcomm", "CommR", "CommC", "DramR", "CommLoc", "CommDyn"] {
            assert!(v["metrics"].get(key).is_some(), "{name}: metrics.{key}");
        }
        assert_eq!(v["metrics"]["CommC"], 1.0);
        assert!(v["metrics"]["DramR"].is_null(), "no data source: unknown");
        assert_eq!(v["class"], "Static");
    }
}

#[test]
fn analyze_text_names_the_class_and_its_meaning() {
    let dir = tempfile::tempdir().unwrap();
    let path = trace_in(dir.path(), "t.parquet");
    let out = numaff(&["analyze", path.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("2400 samples (0 faults, 1200 loads, 1200 stores) of 8 threads on 2 nodes"),
        "{text}"
    );
    assert!(
        text.contains("class: Static — a stable communication pattern"),
        "{text}"
    );
    assert!(text.contains("DramR"), "{text}");
    assert!(text.contains("unknown"), "{text}");
}

/// A trace with a header and no sample is analysed as empty: no "-0 B", no blank per-node lists.
#[test]
fn analyze_of_an_empty_trace_says_none() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("empty.csv");
    std::fs::write(
        &csv,
        "time_ns,pid,tid,cpu,node,addr,kind,latency_ns,data_source\n",
    )
    .unwrap();
    let out = numaff(&["analyze", csv.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("0 samples"), "{text}");
    assert!(text.contains("Lcomm           0 B"), "{text}");
    assert!(!text.contains("-0"), "{text}");
    assert!(
        text.contains("first touch per node none; most used from none"),
        "{text}"
    );
}

#[test]
fn analyze_of_a_corrupt_trace_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = trace_in(dir.path(), "t.parquet");
    let data = std::fs::read(&path).unwrap();
    std::fs::write(&path, &data[..data.len() - 100]).unwrap();
    let out = numaff(&["analyze", path.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("numaff: error: "), "{err}");
    assert!(
        err.contains("t.parquet is not a readable Parquet trace"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let csv = dir.path().join("bad.csv");
    std::fs::write(
        &csv,
        "time_ns,pid,tid,cpu,node,addr,kind\n1,1,1,0,0,64,load\n2,1,1,0,0,x,load\n",
    )
    .unwrap();
    let out = numaff(&["analyze", csv.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.csv, line 3: addr \"x\" is not a non-negative integer"),
        "{err}"
    );
}

/// Headless Chromium, with the flags of DESIGN.md.
fn chromium(args: &[&str]) -> std::process::Output {
    let profile = tempfile::tempdir().expect("a temporary profile directory");
    let user_data = format!("--user-data-dir={}", profile.path().display());
    let bin = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .expect("headless Chromium (scripts/setup.sh installs Debian's chromium)");
    Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
            &user_data,
        ])
        .args(args)
        .output()
        .expect("chromium runs")
}

#[test]
fn html_report_renders_in_headless_chromium() {
    // Kept under target/ so the figures can be looked at after the test.
    let out_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("analyze-report");
    let _ = std::fs::remove_dir_all(&out_dir);
    std::fs::create_dir_all(&out_dir).unwrap();
    let path = trace_in(&out_dir, "t.parquet");
    let html = out_dir.join("report.html");
    let out = numaff(&[
        "analyze",
        path.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for fig in ["matrix", "events", "exclusivity", "pages", "coverage"] {
        for ext in ["svg", "png"] {
            let f = out_dir.join(format!("report-{fig}.{ext}"));
            let len = std::fs::metadata(&f).map(|m| m.len()).unwrap_or(0);
            assert!(len > 1000, "{} has {len} bytes", f.display());
        }
        let png = std::fs::read(out_dir.join(format!("report-{fig}.png"))).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    }
    let doc = std::fs::read_to_string(&html).unwrap();
    assert!(
        !doc.contains("<script src") && !doc.contains("<img src=\"http"),
        "self-contained"
    );
    assert_eq!(doc.matches("<svg").count(), 5);

    let url = format!("file://{}", html.display());
    let shot = out_dir.join("screenshot.png");
    let out = chromium(&[
        &format!("--screenshot={}", shot.display()),
        "--window-size=1400,2400",
        &url,
    ]);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "chromium failed: {log}");
    for line in log.lines() {
        assert!(
            !(line.contains("CONSOLE") || line.contains("Uncaught")),
            "console message while rendering the report: {line}"
        );
    }
    let png = std::fs::read(&shot).expect("a screenshot");
    assert!(
        png.len() > 20_000,
        "screenshot of {} bytes: blank?",
        png.len()
    );
    // The DOM chromium built has the figures and tables.
    let out = chromium(&["--dump-dom", &url]);
    assert!(out.status.success());
    let dom = String::from_utf8_lossy(&out.stdout);
    for id in [
        "class",
        "metrics",
        "fig-matrix",
        "fig-events",
        "fig-exclusivity",
        "fig-pages",
        "fig-coverage",
        "threads",
        "coverage",
    ] {
        assert!(
            dom.contains(&format!("id=\"{id}\"")),
            "no #{id} in the rendered DOM"
        );
    }
    assert!(dom.contains("Static"));
}

/// DeLocProf's MPI events: a CSV of MPI messages (time_ns, sender, receiver,
/// bytes) gets the same analysis: ranks as tasks, each message one event of its size. Two phases,
/// a ring (10 messages of 1000 bytes from each rank to the next, 0-0.4 s) then pairs (i, i+4)
/// (20 messages each way, 1.0-1.4 s): the matrix is exactly those bytes, the two phases are two
/// clusters in time, and CommR and DramR are unknown (no memory traffic in a message trace).
#[test]
fn analyze_of_mpi_messages_gives_their_bytes_and_phases() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("messages.csv");
    let mut text = String::from("time_ns,sender,receiver,bytes\n");
    for k in 0..10u64 {
        for i in 0..8u64 {
            text.push_str(&format!(
                "{},{i},{},1000\n",
                k * 40_000_000 + i,
                (i + 1) % 8
            ));
        }
    }
    for k in 0..20u64 {
        for i in 0..8u64 {
            let t = 1_000_000_000 + k * 20_000_000 + i;
            text.push_str(&format!("{t},{i},{},1000\n", (i + 4) % 8));
        }
    }
    std::fs::write(&path, text).unwrap();
    let out = numaff(&["analyze", path.to_str().unwrap(), "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["comm_source"], "messages");
    let tids: Vec<u64> = v["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["tid"].as_u64().unwrap())
        .collect();
    assert_eq!(tids, (0..8).collect::<Vec<u64>>());
    let m: Vec<Vec<f64>> = serde_json::from_value(v["communication_matrix"].clone()).unwrap();
    for (i, row) in m.iter().enumerate() {
        for (j, &cell) in row.iter().enumerate() {
            let want = if (i + 1) % 8 == j || (j + 1) % 8 == i {
                10_000.0
            } else if (i + 4) % 8 == j {
                40_000.0
            } else {
                0.0
            };
            assert_eq!(cell, want, "cell ({i}, {j})");
        }
    }
    assert_eq!(v["events"], 8 * 10 + 8 * 20);
    assert_eq!(v["clusters"], 2, "{}", v["cluster_means_ns"]);
    assert!(v["metrics"]["CommR"].is_null() && v["metrics"]["DramR"].is_null());
    assert_ne!(v["class"], "NonMapping");

    let html = dir.path().join("r.html");
    let out = numaff(&[
        "analyze",
        path.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("240 MPI messages between 8 ranks"),
        "{stdout}"
    );
    assert!(stdout.contains("heaviest pairs (ranks): "), "{stdout}");
    assert!(html.exists() && dir.path().join("r-matrix.svg").exists());
    assert!(
        !dir.path().join("r-pages.svg").exists(),
        "no pages in a message trace"
    );

    // A bad line is an error naming it.
    std::fs::write(
        &path,
        "time_ns,sender,receiver,bytes\n1,0,1,64\n2,0,one,64\n",
    )
    .unwrap();
    let out = numaff(&["analyze", path.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("line 3") && stderr.contains("receiver"),
        "{stderr}"
    );
}

/// The reader streams, so a trace larger than memory can be analysed. A trace of
/// 3 M fault samples (160 MiB as `Sample`s in memory, written batch by batch) is analysed by
/// `numaff analyze` with a peak resident set (the child's own, from wait4) well under the size of
/// its samples: the analysis holds a batch of rows and its tables, never the whole trace.
#[test]
fn analyze_streams_a_trace_larger_than_its_memory() {
    use numaff_behave::tracefile::TraceWriter;
    use std::os::unix::process::ExitStatusExt;
    const N: u64 = 3_000_000;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.parquet");
    let mut w = TraceWriter::create(&path, &TraceMeta::default()).expect("create");
    let mut batch = Vec::with_capacity(65_536);
    for i in 0..N {
        let tid = (i % 16) as u32;
        batch.push(Sample {
            time_ns: i * 100,
            pid: 9,
            tid: 100 + tid,
            cpu: tid,
            node: tid / 8,
            // 4096 pages, each touched by the 16 threads in turn.
            addr: 0x7f00_0000_0000 + ((i / 16) % 4096) * 4096 + u64::from(tid) * 256,
            kind: Kind::Fault,
            latency_ns: None,
            data_source: None,
        });
        if batch.len() == batch.capacity() {
            w.write_all(&batch).expect("write");
            batch.clear();
        }
    }
    w.write_all(&batch).expect("write");
    w.finish().expect("finish");
    let in_memory = N * std::mem::size_of::<Sample>() as u64;

    let out_path = dir.path().join("out.json");
    // Reaped by wait4 below (for its own rusage), not by Child::wait.
    #[allow(clippy::zombie_processes)]
    let child = Command::cargo_bin("numaff")
        .expect("numaff binary")
        .args(["analyze", path.to_str().unwrap(), "--json"])
        .stdout(std::fs::File::create(&out_path).unwrap())
        .spawn()
        .expect("numaff runs");
    let mut status = 0i32;
    // SAFETY: rusage is plain integers, for which all-zero bytes are valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child with valid pointers to a status and a rusage.
    let r = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    assert_eq!(r, child.id() as libc::pid_t);
    assert!(
        std::process::ExitStatus::from_raw(status).success(),
        "analyze failed: {status}"
    );
    let peak = usage.ru_maxrss as u64 * 1024;
    assert!(
        peak < in_memory / 2,
        "peak RSS {peak} bytes for a trace of {in_memory} bytes in memory"
    );
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&out_path).unwrap()).expect("JSON");
    assert_eq!(v["coverage"]["samples"], N);
    assert_eq!(v["threads"].as_array().map(Vec::len), Some(16));
    assert_eq!(v["pages"]["pages"], 4096);
    eprintln!(
        "peak RSS {} MiB, samples {} MiB",
        peak >> 20,
        in_memory >> 20
    );
}

/// CSV export and import from the command line. `numaff profile --import` converts
/// a Parquet trace to CSV and back, sample for sample (CSV carries no metadata).
#[test]
fn profile_import_exports_csv_and_imports_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let parquet = trace_in(dir.path(), "t.parquet");
    let csv = dir.path().join("t.csv");
    let back = dir.path().join("back.parquet");
    for (from, to) in [(&parquet, &csv), (&csv, &back)] {
        let out = numaff(&[
            "profile",
            "--import",
            from.to_str().unwrap(),
            "-o",
            to.to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("converted 2400 samples"));
    }
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(
        text.starts_with("time_ns,pid,tid,cpu,node,addr,kind"),
        "{text:.80}"
    );
    assert_eq!(text.lines().count(), 2401);
    let read = |p: &Path| {
        numaff_behave::TraceReader::open(p)
            .unwrap()
            .read_all()
            .unwrap()
    };
    assert_eq!(read(&csv), neighbour_trace());
    assert_eq!(read(&back), neighbour_trace());
}

/// A trace whose ids claim huge sizes (a node id of 4e9, more threads than the analysis's cap)
/// is refused at once by `analyze` and `map --trace`, naming the cap; a huge cpu id is no size.
#[test]
fn traces_beyond_the_caps_are_refused_quickly() {
    let dir = tempfile::tempdir().unwrap();
    let header = "time_ns,pid,tid,cpu,node,addr,kind\n";
    let node = dir.path().join("node.csv");
    std::fs::write(&node, format!("{header}1,1,1,0,4000000000,4096,fault\n")).unwrap();
    let mut rows = String::from(header);
    for t in 0..1100 {
        rows.push_str(&format!("{t},1,{t},0,0,{},fault\n", 4096 * t));
    }
    let threads = dir.path().join("threads.csv");
    std::fs::write(&threads, rows).unwrap();
    let run = |args: &[&str]| {
        let out = assert_cmd::Command::cargo_bin("numaff")
            .unwrap()
            .args(args)
            .timeout(std::time::Duration::from_secs(20))
            .output()
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    for prefix in [
        &["analyze"][..],
        &[
            "map",
            "--algo",
            "deloc",
            "--machine",
            "kmaf-sim-4x2",
            "--trace",
        ][..],
    ] {
        let arg = |p: &Path| {
            let mut v: Vec<String> = prefix.iter().map(|s| s.to_string()).collect();
            v.push(p.to_str().unwrap().to_string());
            v
        };
        let run = |v: Vec<String>| run(&v.iter().map(String::as_str).collect::<Vec<_>>());
        let err = run(arg(&node));
        assert!(
            err.contains("node.csv: a sample of thread 1 (pid 1) has node 4000000000")
                && err.contains("below 1024"),
            "{err}"
        );
        let err = run(arg(&threads));
        assert!(
            err.contains("threads.csv: more than 1024 distinct threads"),
            "{err}"
        );
    }
    let cpu = dir.path().join("cpu.csv");
    std::fs::write(&cpu, format!("{header}1,1,1,4000000000,0,4096,fault\n")).unwrap();
    assert_cmd::Command::cargo_bin("numaff")
        .unwrap()
        .args(["analyze", cpu.to_str().unwrap()])
        .timeout(std::time::Duration::from_secs(20))
        .assert()
        .success();
}

/// Every algorithm analyze's advice names (as `--algo NAME`) is one `numaff map --algo` lists and
/// maps a matrix with; the advice for mapping names at least one.
#[test]
fn every_algorithm_analyze_recommends_is_accepted_by_map() {
    use numaff_behave::analyze::{advice, CommSource};
    use numaff_behave::delocprof::{Class, Metrics};
    let metrics = Metrics {
        Lcomm: 1e6,
        CommR: Some(0.5),
        CommC: 0.5,
        DramR: Some(0.5),
        CommLoc: 0.1,
        CommDyn: 3,
    };
    for class in [Class::NonMapping, Class::Static, Class::Dynamic] {
        for source in [
            CommSource::LoadsAndStores,
            CommSource::SharingTable,
            CommSource::Messages,
        ] {
            let text = advice(class, &metrics, source);
            assert!(
                !text.to_ascii_lowercase().contains("treematch policies"),
                "{text}"
            );
            let named: Vec<&str> = text
                .split("--algo ")
                .skip(1)
                .filter_map(|rest| {
                    rest.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                        .next()
                })
                .collect();
            if class != Class::NonMapping {
                assert!(!named.is_empty(), "no algorithm named in {text:?}");
            }
            for name in named {
                assert!(
                    numaff_policy::Algorithm::NAMES.contains(&name),
                    "{name} (in {text:?}) is not one of map's algorithms"
                );
                let out = Command::cargo_bin("numaff")
                    .expect("numaff binary")
                    .args([
                        "map",
                        "--algo",
                        name,
                        "--machine",
                        "kmaf-sim-4x2",
                        "--matrix",
                    ])
                    .arg(concat!(
                        env!("CARGO_MANIFEST_DIR"),
                        "/tests/fixtures/comm8.csv"
                    ))
                    .output()
                    .expect("run numaff map");
                assert!(
                    out.status.success(),
                    "numaff map --algo {name}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
}
