//! `numaff sim` as a user runs it: the workload list, the JSON of a run and of --measure,
//! workload files, errors.
#![allow(clippy::unwrap_used)] // helpers of tests

mod common;
use common::numaff;
use predicates::prelude::*;

fn json(args: &[&str]) -> serde_json::Value {
    let out = numaff().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Asserts that `numaff args` fails with `says` in its error.
fn fails_saying(args: Vec<String>, says: &str) {
    numaff()
        .args(args)
        .assert()
        .failure()
        .stderr(predicate::str::contains(says));
}

/// `numaff sim` of nas-is at a quarter of its size on kmaf-sim-4x2 (a run of a few ms), with
/// `extra` arguments.
fn nas_is(extra: &[&str]) -> Vec<String> {
    [
        "sim",
        "--machine",
        "kmaf-sim-4x2",
        "--workload",
        "nas-is",
        "--scale",
        "0.25",
    ]
    .iter()
    .chain(extra)
    .map(|a| a.to_string())
    .collect()
}

/// The JSON `nas_is(extra)` prints (`extra` holds `--json`).
fn nas_is_json(extra: &[&str]) -> serde_json::Value {
    let a = nas_is(extra);
    json(&a.iter().map(String::as_str).collect::<Vec<&str>>())
}

#[test]
fn sim_list_workloads_snapshot() {
    let out = numaff().args(["sim", "--list-workloads"]).output().unwrap();
    assert!(out.status.success());
    insta::assert_snapshot!(String::from_utf8(out.stdout).unwrap());
}

#[test]
fn sim_json_has_the_documented_shape() {
    let v = json(&[
        "sim",
        "--machine",
        "kmaf-sim-4x2",
        "--workload",
        "nas-sp",
        "--scale",
        "0.25",
        "--threads",
        "compact",
        "--data",
        "oracle-local",
        "--json",
    ]);
    for key in [
        "makespan_ns",
        "local_accesses",
        "remote_accesses",
        "llc_misses",
        "imc_queue_ns",
        "interconnect_bytes",
        "c2c_transfers",
        "migrations",
        "energy_j",
    ] {
        assert!(v[key].is_number(), "{key} missing in {v}");
    }
    assert!(v["makespan_ns"].as_u64().unwrap() > 0);
    assert_eq!(v["report"]["threads"].as_array().unwrap().len(), 8);
    // The queue model's approximation is reported (none in this run).
    assert_eq!(v["report"]["queue_past_history"], 0);
    // The os policy moves threads now and then; the same seed gives the same run.
    let os = |seed: &str| nas_is_json(&["--seed", seed, "--json"]);
    assert_eq!(os("3")["report"], os("3")["report"]);
}

#[test]
fn sim_measure_json_gives_latency_and_bandwidth_matrices() {
    let v = json(&["sim", "--machine", "kmaf-sim-4x2", "--measure", "--json"]);
    let lat = v["latency_ns"].as_array().unwrap();
    let bw = v["bandwidth_mbs"].as_array().unwrap();
    assert_eq!((lat.len(), bw.len()), (4, 4));
    for i in 0..4 {
        let row = lat[i].as_array().unwrap();
        assert_eq!(row.len(), 4);
        let local = row[i].as_f64().unwrap();
        assert!(row.iter().all(|x| x.as_f64().unwrap() >= local));
        assert!(bw[i][i].as_f64().unwrap() > bw[i][(i + 2) % 4].as_f64().unwrap());
    }
}

#[test]
fn sim_runs_a_workload_file_on_explicit_cpus_and_names_its_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("two.toml");
    std::fs::write(
        &path,
        r#"name = "two"
description = "two CG-like programs"
follows = "a test"
[[program]]
kernel = "cg"
threads = 2
lines = 512
iterations = 2
compute_cycles = 1
write_fraction = 0.0
[[program]]
kernel = "ep"
threads = 2
lines = 64
iterations = 2
compute_cycles = 10
write_fraction = 0.5
start_ns = 5000
"#,
    )
    .unwrap();
    let v = json(&[
        "sim",
        "--machine",
        "kmaf-sim-4x2",
        "--workload",
        path.to_str().unwrap(),
        "--threads",
        "0,2,4,6",
        "--data",
        "bind:1",
        "--json",
    ]);
    let cpus: Vec<u64> = v["report"]["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["cpu"].as_u64().unwrap())
        .collect();
    assert_eq!(cpus, vec![0, 2, 4, 6]);
    numaff()
        .args(["sim", "--machine", "kmaf-sim-4x2", "--workload", "nas-xx"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("known workloads: nas-bt"));
    // nas-ep on kmaf-sim-4x2 with a bad option: an error that names it.
    let refused = |option: &str, value: &str, says: &str| {
        numaff()
            .args(["sim", "--machine", "kmaf-sim-4x2", "--workload", "nas-ep"])
            .args([option, value])
            .assert()
            .failure()
            .stderr(predicate::str::contains(says));
    };
    refused("--data", "bind:9", "no node 9");
    refused("--threads", "0,99", "cpu 99");
    // No thread at all is refused, not run as one thread.
    refused("--nthreads", "0", "--nthreads");
    // Arrays past the room the generator lays them out in (they would overlap).
    refused("--scale", "1e9", "more than the 32 GiB an array can take");
}

/// `--trace` replays a recorded trace (here a CSV one written by numaff_behave) thread by thread.
#[test]
fn sim_replays_a_recorded_trace() {
    use numaff_behave::{tracefile, Kind, Sample, TraceMeta};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rec.csv");
    let samples: Vec<Sample> = (0..40u64)
        .map(|i| Sample {
            time_ns: 500 + i * 100,
            pid: 77,
            tid: 10 + (i % 2) as u32,
            cpu: if i % 2 == 0 { 2 } else { 6 },
            node: 0,
            addr: 0x40_0000 + i * 4096,
            kind: if i < 20 { Kind::Store } else { Kind::Load },
            latency_ns: None,
            data_source: None,
        })
        .collect();
    tracefile::write_trace(&path, &TraceMeta::default(), &samples).unwrap();
    let v = json(&[
        "sim",
        "--machine",
        "kmaf-sim-4x2",
        "--trace",
        path.to_str().unwrap(),
        "--threads",
        "recorded",
        "--json",
    ]);
    assert_eq!(v["workload"], "rec");
    assert_eq!(v["accesses"], 40);
    let cpus: Vec<u64> = v["report"]["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["cpu"].as_u64().unwrap())
        .collect();
    assert_eq!(cpus, vec![2, 6]);
    numaff()
        .args([
            "sim",
            "--machine",
            "kmaf-sim-4x2",
            "--trace",
            "/nonexistent/t.parquet",
        ])
        .assert()
        .failure()
        .stderr(predicate::str::contains("/nonexistent/t.parquet"));
}

/// `--huge-pages` backs the workload with 2 MiB pages: far fewer first-touch faults, same accesses.
#[test]
fn sim_huge_pages_cut_first_touch_faults_not_accesses() {
    let run = |huge: bool| {
        let mut args = vec![
            "sim",
            "--machine",
            "kmaf-sim-4x2",
            "--workload",
            "nas-sp",
            "--scale",
            "0.25",
            "--threads",
            "compact",
            "--json",
        ];
        if huge {
            args.push("--huge-pages");
        }
        json(&args)
    };
    let (base, huge) = (run(false), run(true));
    let faults = |v: &serde_json::Value| v["report"]["page_faults"].as_u64().unwrap();
    assert_eq!(base["accesses"], huge["accesses"]);
    assert!(
        faults(&huge) * 100 < faults(&base),
        "{} vs {}",
        faults(&huge),
        faults(&base)
    );
}

/// `--seeds N` runs seeds S..S+N-1 and summarises each figure; every run is the one `--seed`
/// gives alone, and the summary is taken over them.
#[test]
fn sim_seeds_summarise_the_os_placement_over_runs() {
    let with = nas_is;
    let json_of = nas_is_json;
    let v = json_of(&["--seed", "5", "--seeds", "3", "--json"]);
    assert_eq!(v["seeds"], serde_json::json!([5, 6, 7]));
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    let alone = json_of(&["--seed", "6", "--json"]);
    assert_eq!(runs[1], alone, "the second run is --seed 6's");
    let makespans: Vec<f64> = runs
        .iter()
        .map(|r| r["makespan_ns"].as_f64().unwrap())
        .collect();
    let s = &v["summary"]["makespan_ns"];
    let min = makespans.iter().copied().fold(f64::INFINITY, f64::min);
    let max = makespans.iter().copied().fold(0.0, f64::max);
    assert_eq!(s["min"].as_f64().unwrap(), min);
    assert_eq!(s["max"].as_f64().unwrap(), max);
    let mean = makespans.iter().sum::<f64>() / 3.0;
    assert!((s["mean"].as_f64().unwrap() - mean).abs() < 1e-6 * mean);
    for key in ["imc_queue_ns", "llc_misses", "c2c_transfers", "energy_j"] {
        assert!(v["summary"][key]["mean"].is_number(), "{key} in {v}");
    }
    // The text: a row per figure and the makespan of each seed.
    numaff()
        .args(with(&["--seed", "5", "--seeds", "3"]))
        .assert()
        .success()
        .stdout(predicate::str::contains("seeds 5-7 (3 runs)"))
        .stdout(predicate::str::contains("makespan (ms)"))
        .stdout(predicate::str::contains("makespan by seed (ms): 5: "));
    // Refused: no run, with --measure, past the largest seed.
    for (extra, says) in [
        (vec!["--seeds", "0"], "--seeds"),
        (
            vec!["--seed", "18446744073709551615", "--seeds", "2"],
            "past the largest seed",
        ),
    ] {
        fails_saying(with(&extra), says);
    }
    numaff()
        .args([
            "sim",
            "--machine",
            "kmaf-sim-4x2",
            "--measure",
            "--seeds",
            "2",
        ])
        .assert()
        .failure()
        .stderr(predicate::str::contains("--seeds"));
}

/// `--jobs N` simulates the seeds' runs N at a time: the figures, and their order, are those of
/// one run after another; a failure names the first failing seed whatever N.
#[test]
fn sim_jobs_run_the_seeds_at_once_with_the_same_figures() {
    let seeds = ["--seed", "5", "--seeds", "3"];
    let with = |extra: &[&str]| nas_is(&[&seeds[..], extra].concat());
    let json_of = |extra: &[&str]| nas_is_json(&[&seeds[..], extra].concat());
    let one_by_one = json_of(&["--jobs", "1", "--json"]);
    let at_once = json_of(&["--jobs", "3", "--json"]);
    assert_eq!(one_by_one, at_once);
    // The seeds differ, so a mixed-up order would show.
    let makespans: Vec<&serde_json::Value> = at_once["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["makespan_ns"])
        .collect();
    assert!(makespans[0] != makespans[1] || makespans[1] != makespans[2]);
    // More jobs than runs is fine: no more threads than runs are started.
    assert_eq!(json_of(&["--jobs", "64", "--json"]), one_by_one);
    for (extra, says) in [
        (vec!["--jobs", "0"], "--jobs"),
        (vec!["--jobs", "1025"], "--jobs"),
        // A cpu the machine lacks fails every run; the first seed's is the one reported.
        (
            vec!["--jobs", "3", "--threads", "0,99"],
            "cannot simulate nas-is on kmaf-sim-4x2 (seed 5)",
        ),
    ] {
        fails_saying(with(&extra), says);
    }
}

/// Billions of iterations (a typo, or a unit mixed up) filled 20 GB of host memory in 20 s while
/// the generators built the threads' steps; now the file is refused at once, and so is an
/// `--nthreads` that pushes a sane file past the limit (sim checks again after its options).
#[test]
fn sim_refuses_a_workload_too_long_to_hold() {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, iterations: u64| {
        let path = dir.path().join(name);
        let text = format!(
            "name = \"long\"\ndescription = \"d\"\nfollows = \"a test\"\n[[program]]\n\
             kernel = \"ft\"\nthreads = 2\nlines = 16\niterations = {iterations}\n\
             compute_cycles = 0\nwrite_fraction = 0.5\n"
        );
        std::fs::write(&path, text).unwrap();
        path
    };
    let long = file("long.toml", 4_000_000_000);
    let started = std::time::Instant::now();
    numaff()
        .args(["sim", "--machine", "kmaf-sim-4x2", "--workload"])
        .arg(&long)
        .assert()
        .failure()
        .stderr(predicate::str::contains("ft x 4000000000 iterations"))
        .stderr(predicate::str::contains("lower iterations or threads"));
    assert!(started.elapsed().as_secs() < 10, "{:?}", started.elapsed());
    // Sane with 2 threads; 60,000 threads of the all-to-all transpose are not.
    let sane = file("sane.toml", 100);
    numaff()
        .args(["sim", "--machine", "kmaf-sim-4x2", "--json", "--workload"])
        .arg(&sane)
        .assert()
        .success();
    numaff()
        .args([
            "sim",
            "--machine",
            "kmaf-sim-4x2",
            "--nthreads",
            "60000",
            "--workload",
        ])
        .arg(&sane)
        .assert()
        .failure()
        .stderr(predicate::str::contains("workload long: about"));
}

/// `--coherence` simulates the machine with another protocol: kmaf-opteron is MOESI (its file),
/// where nas-sp's halo lines read across the nodes stay Owned (no write to memory while the
/// small run's lines stay cached); under MESIF each such read writes the line back. A machine
/// without a protocol (kmaf-sim-4x2) runs MESIF's rule. A bad name is refused with the list.
#[test]
fn sim_coherence_flag_overrides_the_machines_protocol() {
    let run = |machine: &str, extra: &[&str]| {
        let mut args = vec![
            "sim",
            "--machine",
            machine,
            "--workload",
            "nas-sp",
            "--scale",
            "0.25",
            "--threads",
            "scatter",
            "--json",
        ];
        args.extend_from_slice(extra);
        json(&args)
    };
    let own = run("kmaf-opteron", &[]);
    let mesif = run("kmaf-opteron", &["--coherence", "mesif"]);
    assert_eq!(own["coherence"], "MOESI");
    assert_eq!(mesif["coherence"], "MESIF");
    let writebacks = |v: &serde_json::Value| v["report"]["writebacks"].as_u64().unwrap();
    let transfers = own["c2c_transfers"].as_u64().unwrap();
    assert!(transfers > 0, "{own}");
    assert_eq!(writebacks(&own), 0, "{own}");
    assert!(writebacks(&mesif) >= transfers, "{mesif}");
    assert_eq!(run("kmaf-sim-4x2", &[])["coherence"], "MESIF");
    numaff()
        .args(["sim", "--machine", "kmaf-opteron", "--workload", "nas-sp"])
        .args(["--coherence", "MOSI"])
        .assert()
        .failure()
        .stderr(predicate::str::contains(
            "unknown coherence protocol \"MOSI\"; expected one of MESI, MESIF, MOESI",
        ));
}

/// `--threads` and `--data` given more than once run every combination (kMAF Fig. 1's T x D) and
/// compare them with the first: each placement's run is the run `numaff sim` gives for that
/// placement alone, and its speed is the first one's makespan over its own.
#[test]
fn sim_compares_every_thread_and_data_placement_given() {
    let with = nas_is;
    let json_of = nas_is_json;
    let placements = [
        "--threads",
        "compact",
        "--threads",
        "scatter",
        "--data",
        "oracle-local",
        "--data",
        "oracle-remote",
    ];
    let v = json_of(&[&placements[..], &["--json"]].concat());
    let ps = v["placements"].as_array().unwrap();
    let order: Vec<(&str, &str)> = ps
        .iter()
        .map(|p| (p["threads"].as_str().unwrap(), p["data"].as_str().unwrap()))
        .collect();
    assert_eq!(
        order,
        [
            ("compact", "oracle-local"),
            ("compact", "oracle-remote"),
            ("scatter", "oracle-local"),
            ("scatter", "oracle-remote"),
        ]
    );
    let first = ps[0]["runs"][0]["makespan_ns"].as_f64().unwrap();
    for p in ps {
        let (t, d) = (p["threads"].as_str().unwrap(), p["data"].as_str().unwrap());
        let alone = json_of(&["--threads", t, "--data", d, "--json"]);
        assert_eq!(p["runs"][0], alone, "{t} / {d}");
        let makespan = alone["makespan_ns"].as_f64().unwrap();
        // Within a rounding: serde_json's default float parsing may be a unit in the last
        // place off.
        let speedup = p["speedup"].as_f64().unwrap();
        assert!(
            (speedup - first / makespan).abs() < 1e-12,
            "{t} / {d}: {speedup}"
        );
        assert_eq!(
            p["summary"]["makespan_ns"]["mean"].as_f64().unwrap(),
            makespan
        );
    }
    // Pages on the nodes that use them least make the same threads slower (kMAF §3.1).
    assert!(ps[1]["speedup"].as_f64().unwrap() < 1.0);
    // The table: a row per placement, the first at 1.00x.
    numaff()
        .args(with(&placements))
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "nas-is on kmaf-sim-4x2: 4 placements",
        ))
        .stdout(predicate::str::is_match(r"\n  compact  oracle-local +[0-9.]+ +1\.00x").unwrap())
        .stdout(predicate::str::contains("scatter  oracle-remote"));
    // Over seeds: each placement's runs are its seeds', with the makespan's range.
    let os_and_compact = ["--threads", "os", "--threads", "compact", "--seeds", "2"];
    let v = json_of(&[&os_and_compact[..], &["--json"]].concat());
    assert_eq!(v["seeds"], serde_json::json!([0, 1]));
    for p in v["placements"].as_array().unwrap() {
        assert_eq!(p["runs"].as_array().unwrap().len(), 2);
        assert_eq!(p["runs"][1]["seed"], 1);
    }
    numaff()
        .args(with(&os_and_compact))
        .assert()
        .success()
        .stdout(predicate::str::contains("seeds 0-1, means of 2 runs each"))
        .stdout(predicate::str::contains("range (ms)"));
    // A bad placement among several is refused before anything runs; a failing run names its
    // placement.
    for (extra, says) in [
        (
            vec!["--data", "first-touch", "--data", "nowhere"],
            "unknown data policy \"nowhere\"",
        ),
        (
            vec!["--threads", "compact", "--threads", "0,99"],
            "cannot simulate nas-is on kmaf-sim-4x2 (threads 0,99, data first-touch, seed 0)",
        ),
    ] {
        fails_saying(with(&extra), says);
    }
}

/// Runs beyond numaff sim's caps are refused at once with the cap and what to do: a machine
/// of more than 128 nodes (a machine file of 200 one-PU nodes), more than 1024 threads, a
/// `--scale` above 64.
#[test]
fn sim_refuses_runs_beyond_its_caps_quickly() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::from("name = \"wide\"\n");
    for n in 0..200 {
        text.push_str(&format!(
            "[[node]]\nid = {n}\nmemory = \"1 GiB\"\ncpus = \"{n}\"\n"
        ));
    }
    text.push_str(&format!(
        "[[package]]\nid = 0\ncores = [{}]\n",
        (0..200)
            .map(|c| format!("\"{c}\""))
            .collect::<Vec<_>>()
            .join(",")
    ));
    let wide = dir.path().join("wide.toml");
    std::fs::write(&wide, text).unwrap();
    let started = std::time::Instant::now();
    let refused = |args: Vec<String>, says: &str| {
        numaff()
            .args(args)
            .timeout(std::time::Duration::from_secs(20))
            .assert()
            .failure()
            .stderr(predicate::str::contains(says.to_string()));
    };
    refused(
        vec![
            "sim".into(),
            "--machine".into(),
            wide.to_str().unwrap().into(),
            "--workload".into(),
            "nas-is".into(),
        ],
        "machine wide has 200 NUMA nodes; numaff sim simulates at most 128",
    );
    refused(
        nas_is(&["--nthreads", "4096"]),
        "workload nas-is has 4096 threads; numaff sim simulates at most 1024",
    );
    let mut scaled = nas_is(&[]);
    scaled.retain(|a| a != "--scale" && a != "0.25");
    scaled.extend(["--scale".into(), "1000".into()]);
    refused(scaled, "--scale 1000 is above 64");
    // A replayed trace with one timestamp years after the others (it ran for ever before).
    let far = dir.path().join("far.csv");
    std::fs::write(
        &far,
        "time_ns,pid,tid,cpu,node,addr,kind\n0,1,1,0,0,4096,load\n1000000000000000000,2,2,0,0,8192,store\n",
    )
    .unwrap();
    refused(
        vec![
            "sim".into(),
            "--machine".into(),
            "kmaf-sim-4x2".into(),
            "--trace".into(),
            far.to_str().unwrap().into(),
        ],
        "a replay covers at most 3600 s",
    );
    assert!(started.elapsed().as_secs() < 20, "{:?}", started.elapsed());
}

/// `numaff sim` of nas-sp at a quarter of its size with 8 threads on kmaf-sim-4x2 (its threads
/// share with their ring neighbours), with `extra` arguments.
fn nas_sp8(extra: &[&str]) -> Vec<String> {
    [
        "sim",
        "--machine",
        "kmaf-sim-4x2",
        "--workload",
        "nas-sp",
        "--scale",
        "0.25",
        "--nthreads",
        "8",
    ]
    .iter()
    .chain(extra)
    .map(|s| s.to_string())
    .collect()
}

/// kMAF's Oracle (000 §5.3): threads by EagerMap on the workload's own sharing, pages with a high
/// exclusivity local and the others interleaved; any mapping algorithm and a mapping file as
/// --threads, in a comparison too.
#[test]
fn sim_maps_threads_with_any_algorithm_or_file_and_places_data_with_the_oracle() {
    let json_of = |extra: &[&str]| {
        let a = nas_sp8(extra);
        json(&a.iter().map(String::as_str).collect::<Vec<&str>>())
    };
    let oracle = json_of(&["--threads", "eagermap", "--data", "oracle", "--json"]);
    assert_eq!(oracle["threads"], "eagermap");
    assert_eq!(oracle["data"], "oracle");
    // Ring neighbours share a node (4 nodes of 2 PUs: cpus 2k and 2k+1 on node k).
    let cpus: Vec<u64> = oracle["report"]["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["cpu"].as_u64().unwrap())
        .collect();
    assert_eq!(cpus.len(), 8);
    for t in 0..8 {
        let mate = (0..8)
            .find(|&u| u != t && cpus[u] / 2 == cpus[t] / 2)
            .unwrap();
        let d = mate.abs_diff(t);
        assert!(d == 1 || d == 7, "thread {t} with {mate}: {cpus:?}");
    }
    let remote = |v: &serde_json::Value| {
        let (l, r) = (
            v["local_accesses"].as_f64().unwrap(),
            v["remote_accesses"].as_f64().unwrap(),
        );
        r / (l + r)
    };
    let interleaved = json_of(&["--threads", "eagermap", "--data", "interleave", "--json"]);
    assert!(
        remote(&oracle) < 0.5 * remote(&interleaved),
        "oracle {} vs interleave {}",
        remote(&oracle),
        remote(&interleaved)
    );
    // Several --threads: a table row each.
    numaff()
        .args(nas_sp8(&[
            "--threads",
            "compact",
            "--threads",
            "eagermap",
            "--threads",
            "deloc",
            "--data",
            "oracle",
        ]))
        .assert()
        .success()
        .stdout(predicate::str::contains("3 placements"))
        .stdout(predicate::str::is_match(r"\n  eagermap +oracle +[0-9.]+ +[0-9.]+x").unwrap())
        .stdout(predicate::str::contains("deloc"));
    // A mapping file: each thread on the PU written for it.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hand.toml");
    let written = [7u64, 0, 6, 1, 5, 2, 4, 3];
    std::fs::write(
        &file,
        "format = 1\nalgorithm = \"hand\"\ntasks = 8\nplacement = [7, 0, 6, 1, 5, 2, 4, 3]\n\n\
         [machine]\nname = \"kmaf-sim-4x2\"\nfingerprint = \"fnv1a64:0000000000000000\"\n",
    )
    .unwrap();
    let spec = format!("map:{}", file.display());
    let v = json_of(&["--threads", &spec, "--json"]);
    let cpus: Vec<u64> = v["report"]["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["cpu"].as_u64().unwrap())
        .collect();
    assert_eq!(cpus, written);
    // Clear errors: a file of another size, an algorithm a static run cannot feed, a name.
    let short = dir.path().join("short.toml");
    std::fs::write(
        &short,
        "format = 1\nalgorithm = \"hand\"\ntasks = 2\nplacement = [0, 1]\n\n\
         [machine]\nname = \"kmaf-sim-4x2\"\nfingerprint = \"fnv1a64:0000000000000000\"\n",
    )
    .unwrap();
    let short = format!("map:{}", short.display());
    for (extra, says) in [
        (
            vec!["--threads", short.as_str()],
            "places 2 tasks but workload nas-sp has 8 threads",
        ),
        (vec!["--threads", "cimar"], "cimar: needs 3DyRM metrics"),
        (vec!["--threads", "eagermapp"], "eagermap, locality"),
    ] {
        fails_saying(nas_sp8(&extra), says);
    }
    numaff()
        .args(["sim", "--help"])
        .assert()
        .success()
        .stdout(predicate::str::contains("map:FILE"))
        .stdout(predicate::str::contains("oracle (kMAF's"))
        .stdout(predicate::str::contains("--threads eagermap --data oracle"));
}
