//! `numaff map` as a user runs it: the comparison table, the JSON shape, mapping files,
//! exports and the errors.
#![allow(clippy::unwrap_used)] // helpers of tests

mod common;
use common::{fixture, numaff};
use predicates::prelude::*;

#[test]
fn map_compare_snapshot() {
    let out = numaff()
        .args(["map", "--compare", "--machine", "kmaf-sim-4x2", "--matrix"])
        .arg(fixture("comm8.csv"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    insta::assert_snapshot!(String::from_utf8(out.stdout).unwrap());
}

#[test]
fn map_json_has_placement_and_hop_cost() {
    let out = numaff()
        .args([
            "map",
            "--algo",
            "locality",
            "--machine",
            "kmaf-sim-4x2",
            "--json",
            "--matrix",
        ])
        .arg(fixture("comm8.csv"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let placement: Vec<u64> = v["placement"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect();
    assert_eq!(placement.len(), 8);
    let mut sorted = placement.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..8).collect::<Vec<u64>>(), "one task per PU");
    assert!(v["hop_cost"].as_f64().unwrap() > 0.0);
    assert_eq!(v["algorithm"], "locality");
    assert_eq!(v["tasks"], 8);
    assert!(v["machine"]["fingerprint"]
        .as_str()
        .unwrap()
        .starts_with("fnv1a64:"));
    let names: Vec<&str> = v["baselines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["algorithm"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["compact", "scatter"]);
    assert!(v["baselines"][1]["hop_cost"].as_f64().unwrap() >= v["hop_cost"].as_f64().unwrap());
    // The JSON's hop cost is that of its placement under the tree distance, recomputed here.
    let m = numaff_machine::spec::resolve("kmaf-sim-4x2").unwrap();
    let tree = numaff_policy::Tree::from_machine(&m);
    let text = std::fs::read_to_string(fixture("comm8.csv")).unwrap();
    let comm = numaff_policy::CommMatrix::from_csv(&text, "comm8.csv").unwrap();
    let p32: Vec<u32> = placement.iter().map(|&x| x as u32).collect();
    assert_eq!(
        v["hop_cost"].as_f64().unwrap(),
        numaff_policy::quality::hop_cost(&tree, &comm, &p32)
    );
    let per_pu: Vec<(u32, usize)> = serde_json::from_value(v["tasks_per_pu"].clone()).unwrap();
    assert_eq!(per_pu, (0..8).map(|pu| (pu, 1)).collect::<Vec<_>>());
    assert!(v["moved"].is_null(), "no current placement from a matrix");
    // Locality keeps each communicating pair inside a node of this machine.
    for (a, b) in [(0, 1), (2, 3), (4, 5), (6, 7)] {
        assert_eq!(placement[a] / 2, placement[b] / 2, "{placement:?}");
    }
}

#[test]
fn map_saves_a_mapping_file_and_exports_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("app.toml");
    numaff()
        .args([
            "map",
            "--algo",
            "scatter",
            "--machine",
            "kmaf-sim-4x2",
            "--matrix",
        ])
        .arg(fixture("comm8.csv"))
        .arg("-o")
        .arg(&file)
        .assert()
        .success()
        .stdout(predicate::str::contains("saved to"));
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("algorithm = \"scatter\""), "{text}");
    assert!(text.contains("matrix_hash = \"fnv1a64:"), "{text}");
    assert!(text.contains("hop_cost = "), "{text}");
    // Every field of a mapping file: machine fingerprint, tasks -> PUs, algorithm, inputs.
    let f = numaff_policy::mapping::MappingFile::load(&file).unwrap();
    let m = numaff_machine::spec::resolve("kmaf-sim-4x2").unwrap();
    assert_eq!(
        f.machine.fingerprint,
        numaff_policy::mapping::fingerprint(&m)
    );
    assert!(f.matches(&m));
    assert_eq!(f.algorithm, "scatter");
    assert_eq!(f.tasks, 8);
    let tree = numaff_policy::Tree::from_machine(&m);
    assert_eq!(f.placement, numaff_policy::baselines::scatter(&tree, 8));
    assert!(
        f.input.matrix.as_deref().unwrap().ends_with("comm8.csv"),
        "{text}"
    );
    let csv = std::fs::read(fixture("comm8.csv")).unwrap();
    assert_eq!(
        f.input.matrix_hash.as_deref(),
        Some(numaff_policy::mapping::hash_bytes(&csv).as_str())
    );
    // Re-exported from the file: stdout is the syntax alone, usage on stderr.
    numaff()
        .args([
            "map",
            "--machine",
            "kmaf-sim-4x2",
            "--export",
            "slurm",
            "--from",
        ])
        .arg(&file)
        .assert()
        .success()
        .stdout(predicate::str::starts_with("--cpu-bind=map_cpu:"))
        .stdout(predicate::str::contains("--mem-bind=map_mem:"))
        .stderr(predicate::str::contains("srun"));
    numaff()
        .args([
            "map",
            "--machine",
            "kmaf-sim-4x2",
            "--export",
            "rankfile",
            "--host",
            "n1",
            "--from",
        ])
        .arg(&file)
        .assert()
        .success()
        .stdout(predicate::str::starts_with("rank 0=n1 slot="));
    // With --export while computing, the figures go to stderr and stdout is the export.
    numaff()
        .args([
            "map",
            "--algo",
            "compact",
            "--machine",
            "kmaf-sim-4x2",
            "--export",
            "gomp",
            "--matrix",
        ])
        .arg(fixture("comm8.csv"))
        .assert()
        .success()
        .stdout("OMP_NUM_THREADS=8 GOMP_CPU_AFFINITY=\"0-7\"\n")
        .stderr(predicate::str::contains("hop cost"));
}

#[test]
fn map_errors_say_where_and_what() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, "0,1,2\n1,0,x3\n2,3,0\n").unwrap();
    numaff()
        .args([
            "map",
            "--algo",
            "locality",
            "--machine",
            "kmaf-sim-4x2",
            "--matrix",
        ])
        .arg(&bad)
        .assert()
        .failure()
        .stderr(predicate::str::contains(
            "bad.csv: line 2, column 3: \"x3\" is not a number",
        ));
    numaff()
        .args([
            "map",
            "--algo",
            "treemap",
            "--machine",
            "kmaf-sim-4x2",
            "--matrix",
        ])
        .arg(fixture("comm8.csv"))
        .assert()
        .failure()
        .stderr(predicate::str::contains(
            "unknown mapping algorithm \"treemap\"; known: compact, scatter, round-robin, packed, \
             random, eagermap, locality, balance, deloc, ondeloc, cimar, nimar",
        ));
    numaff()
        .args(["map", "--algo", "locality", "--trace", "missing.parquet"])
        .assert()
        .failure()
        .stderr(predicate::str::contains(
            "cannot open trace missing.parquet",
        ));
    numaff()
        .args(["map", "--algo", "locality"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("--matrix M.csv"))
        .stderr(predicate::str::contains("--trace T"));
    numaff()
        .args([
            "map",
            "--algo",
            "cimar",
            "--machine",
            "kmaf-sim-4x2",
            "--matrix",
        ])
        .arg(fixture("comm8.csv"))
        .assert()
        .failure()
        .stderr(predicate::str::contains(
            "cimar: needs the current placement",
        ))
        .stderr(predicate::str::contains(
            "cimar also needs each thread's 3DyRM metrics",
        ));
    numaff()
        .args([
            "map",
            "--algo",
            "compact",
            "--machine",
            "kmaf-sim-4x2",
            "--export",
            "pbs",
            "--matrix",
        ])
        .arg(fixture("comm8.csv"))
        .assert()
        .failure()
        .stderr(predicate::str::contains(
            "unknown export kind \"pbs\"; known: omp, gomp",
        ));
    let broken = dir.path().join("broken.toml");
    std::fs::write(&broken, "format = 1\nalgorithm = \"x\"\ntasks = 2\nplacement = [0]\n[machine]\nname = \"m\"\nfingerprint = \"fnv1a64:0\"\n").unwrap();
    numaff()
        .args([
            "map",
            "--machine",
            "kmaf-sim-4x2",
            "--export",
            "omp",
            "--from",
        ])
        .arg(&broken)
        .assert()
        .failure()
        .stderr(predicate::str::contains(
            "broken.toml: tasks: says 2 but placement lists 1 tasks",
        ));
    // A PU the machine does not have (here edited into a file of that machine) is refused,
    // rather than exported as a cpu the launcher cannot bind.
    let kmaf = numaff_machine::spec::resolve("kmaf-sim-4x2").unwrap();
    let edited = dir.path().join("edited.toml");
    std::fs::write(
        &edited,
        format!(
            "format = 1\nalgorithm = \"x\"\ntasks = 2\nplacement = [0, 99]\n[machine]\nname = \"kmaf-sim-4x2\"\nfingerprint = \"{}\"\n",
            numaff_policy::mapping::fingerprint(&kmaf)
        ),
    )
    .unwrap();
    for kind in ["omp", "gomp", "slurm", "likwid"] {
        numaff()
            .args(["map", "--machine", "kmaf-sim-4x2", "--export", kind, "--from"])
            .arg(&edited)
            .assert()
            .failure()
            .stdout("")
            .stderr(predicate::str::contains(
                "edited.toml: task 1 is mapped to PU 99, which machine kmaf-sim-4x2 does not have (PUs 0-7); the file says it was computed for this machine",
            ));
    }
}

/// `--trace T`: the matrix comes from the trace's analysis. A trace of 8 threads
/// (tids 700..707) where thread i faults on 256-byte blocks thread i+1 touched just before (kMAF's
/// sharing table pairs them), recorded on kmaf-sim-4x2 (its machine in the metadata): locality maps
/// the ring at the hop cost of the best mapping for it, the JSON lists the tids in matrix order,
/// the current placement is each thread's last cpu, and the mapping file names the trace.
#[test]
fn map_from_a_trace_maps_its_ring_and_names_the_trace() {
    use numaff_behave::{Kind, Sample, TraceMeta};
    let dir = tempfile::tempdir().unwrap();
    let machine = numaff_machine::spec::resolve("kmaf-sim-4x2").unwrap();
    let mut samples = Vec::new();
    for round in 0..40u64 {
        for i in 0..8u32 {
            let j = (i + 1) % 8;
            let block = 0x1000_0000 + (u64::from(i) * 1000 + round) * 256;
            let t = (round * 8 + u64::from(i)) * 1000;
            for (dt, tid) in [(0, i), (10, j)] {
                samples.push(Sample {
                    time_ns: t + dt,
                    pid: 700,
                    tid: 700 + tid,
                    cpu: tid,
                    node: tid / 2,
                    addr: block,
                    kind: Kind::Fault,
                    latency_ns: None,
                    data_source: None,
                });
            }
        }
    }
    let meta = TraceMeta {
        machine: Some(numaff_machine::file::to_toml_string(&machine).unwrap()),
        ..Default::default()
    };
    let trace = dir.path().join("ring.parquet");
    numaff_behave::tracefile::write_trace(&trace, &meta, &samples).unwrap();
    let saved = dir.path().join("ring.toml");
    let out = numaff()
        .args([
            "map",
            "--algo",
            "locality",
            "--machine",
            "kmaf-sim-4x2",
            "--json",
            "--trace",
        ])
        .arg(&trace)
        .arg("-o")
        .arg(&saved)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let tids: Vec<u64> = serde_json::from_value(v["tids"].clone()).unwrap();
    assert_eq!(tids, (700..708).collect::<Vec<u64>>());
    let placement: Vec<u32> = serde_json::from_value(v["placement"].clone()).unwrap();
    assert_eq!(placement.len(), 8);
    // A ring of 8 on 4 nodes x 2 cores: neighbours share a core pair in the best mapping; the
    // same cost from a hand-made ring matrix.
    let matrix = dir.path().join("ring.csv");
    let rows: Vec<String> = (0..8)
        .map(|i| {
            (0..8)
                .map(|j| {
                    if (i + 1) % 8 == j || (j + 1) % 8 == i {
                        "1"
                    } else {
                        "0"
                    }
                })
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect();
    std::fs::write(&matrix, rows.join("\n")).unwrap();
    let by_hand = numaff()
        .args([
            "map",
            "--algo",
            "locality",
            "--machine",
            "kmaf-sim-4x2",
            "--json",
            "--matrix",
        ])
        .arg(&matrix)
        .output()
        .unwrap();
    let h: serde_json::Value = serde_json::from_slice(&by_hand.stdout).unwrap();
    let ratio = |x: &serde_json::Value| {
        x["hop_cost"].as_f64().unwrap() / x["baselines"][0]["hop_cost"].as_f64().unwrap()
    };
    assert!((ratio(&v) - ratio(&h)).abs() < 1e-9, "{v}\n{h}");
    // The trace's current placement is thread i on cpu i (= compact here): compact moves nobody;
    // scatter [0,2,4,6,1,3,5,7] splits every node's pair, and with whole nodes relabelled it keeps
    // one task per node in place, so 4 of 8 move.
    let moved = |x: &serde_json::Value| x["moved"].as_u64().unwrap();
    assert_eq!(v["baselines"][0]["algorithm"], "compact");
    assert_eq!(moved(&v["baselines"][0]), 0, "{v}");
    assert_eq!(moved(&v["baselines"][1]), 4, "{v}");
    assert!(
        h["moved"].is_null(),
        "no current placement from a matrix: {h}"
    );
    let file = std::fs::read_to_string(&saved).unwrap();
    assert!(file.contains("trace = "), "{file}");
    // The trace was recorded on kmaf-sim-4x2: ondeloc starts from each thread's last cpu, and
    // keeps pairs on their nodes when they have room.
    let out = numaff()
        .args([
            "map",
            "--algo",
            "ondeloc",
            "--machine",
            "kmaf-sim-4x2",
            "--trace",
        ])
        .arg(&trace)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("current placement (cpu of each at its last sample): yes"),
        "{text}"
    );
    // ondeloc finds room on every thread's current node, so every thread keeps its cpu.
    assert!(
        text.contains(
            "threads moved against the current placement (up to symmetric swaps): 0 of 8"
        ),
        "{text}"
    );
    // An empty trace is a clear error.
    let empty = dir.path().join("empty.parquet");
    numaff_behave::tracefile::write_trace(&empty, &meta, &[]).unwrap();
    numaff()
        .args(["map", "--algo", "locality", "--trace"])
        .arg(&empty)
        .assert()
        .failure()
        .stderr(predicate::str::contains("no samples"));
}

/// `--trace` feeds deloc DeLocProf's groups of concurrent pairs: MPI messages where ranks (0,1),
/// (2,3), (4,5), (6,7) exchange at the same time, then (0,2) and (4,6) later. DeLocMap puts each
/// pair of the first group on one node and the four pairs on four different nodes (002 §3.3.3:
/// concurrent communication spread over the memory controllers).
#[test]
fn deloc_from_a_trace_spreads_concurrent_pairs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.csv");
    let mut text = String::from("time_ns,sender,receiver,bytes\n");
    for k in 0..20u64 {
        for i in [0u64, 2, 4, 6] {
            text.push_str(&format!("{},{i},{},10000\n", k * 1000 + i, i + 1));
        }
    }
    for k in 0..20u64 {
        for (a, b) in [(0, 2), (4, 6)] {
            text.push_str(&format!("{},{a},{b},100\n", 90_000_000 + k * 1000 + a));
        }
    }
    std::fs::write(&path, text).unwrap();
    let out = numaff()
        .args([
            "map",
            "--algo",
            "deloc",
            "--machine",
            "kmaf-sim-4x2",
            "--json",
            "--trace",
        ])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let nodes: Vec<u32> = serde_json::from_value(v["nodes"].clone()).unwrap();
    let pair_nodes: Vec<u32> = [0, 2, 4, 6]
        .iter()
        .map(|&i| {
            assert_eq!(
                nodes[i],
                nodes[i + 1],
                "pair ({i}, {}) split: {nodes:?}",
                i + 1
            );
            nodes[i]
        })
        .collect();
    let distinct: std::collections::BTreeSet<u32> = pair_nodes.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        4,
        "concurrent pairs share a node: {nodes:?}"
    );
}

/// Matrices beyond the caps: a 1e308 cell (whose sums were inf, printed as `inf` and `NaN%` with
/// exit 0) and files claiming more than 4096 tasks, refused from their first row or rows before
/// they are read whole.
#[test]
fn map_refuses_matrices_beyond_the_caps_quickly() {
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let out = numaff()
            .args(["map", "--compare", "--machine", "kmaf-sim-4x2", "--matrix"])
            .arg(&path)
            .timeout(std::time::Duration::from_secs(20))
            .output()
            .unwrap();
        assert!(!out.status.success());
        assert!(!String::from_utf8_lossy(&out.stdout).contains("inf"));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = run("huge.csv", "0,1e308,1\n1e308,0,1\n1,1,0\n");
    assert!(
        err.contains("huge.csv: line 1, column 2: 1e308 is larger than 1e18"),
        "{err}"
    );
    let mut wide = vec!["0"; 20_000].join(",");
    wide.push('\n');
    let err = run("wide.csv", &wide);
    assert!(
        err.contains("wide.csv: line 1 has more than 4096 cells (at least 20000)")
            && err.contains("would need 3.0 GiB per copy"),
        "{err}"
    );
    let err = run("tall.csv", &"0\n".repeat(5000));
    assert!(err.contains("tall.csv: more than 4096 rows"), "{err}");
}

#[test]
fn algorithms_without_a_matrix_map_a_number_of_tasks() {
    let dir = tempfile::tempdir().unwrap();
    for algo in ["compact", "scatter", "round-robin", "packed", "random"] {
        let file = dir.path().join(format!("{algo}.toml"));
        let out = numaff()
            .args(["map", "--algo", algo, "--tasks", "6", "--json"])
            .args(["--machine", "kmaf-sim-4x2", "-o"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{algo}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["tasks"], 6, "{algo}: {doc}");
        assert_eq!(doc["placement"].as_array().unwrap().len(), 6, "{algo}");
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.contains(&format!("algorithm = \"{algo}\"")), "{text}");
    }
    // Compact fills the PUs in order; the table has no costs without a matrix.
    numaff()
        .args(["map", "--algo", "compact", "--tasks", "3"])
        .args(["--machine", "kmaf-sim-4x2"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "placement (PU of each task, in matrix order): 0 1 2",
        ))
        .stdout(predicate::str::contains("no communication matrix"));
}

#[test]
fn algorithms_that_read_the_matrix_say_so_when_given_only_tasks() {
    for algo in ["eagermap", "locality", "balance", "deloc", "ondeloc"] {
        numaff()
            .args(["map", "--algo", algo, "--tasks", "6"])
            .args(["--machine", "kmaf-sim-4x2"])
            .assert()
            .failure()
            .stderr(predicate::str::contains(format!(
                "{algo} reads the communication between tasks: give --matrix M.csv or --trace T"
            )));
    }
    numaff()
        .args(["map", "--algo", "compact", "--tasks", "0"])
        .args(["--machine", "kmaf-sim-4x2"])
        .assert()
        .failure()
        .stderr(predicate::str::contains(
            "--tasks takes a number of tasks from 1",
        ));
}

#[test]
fn more_tasks_than_pus_says_the_pus_are_oversubscribed() {
    let dir = tempfile::tempdir().unwrap();
    // 12 tasks in a ring on kmaf-sim-4x2's 8 PUs.
    let n = 12;
    let rows: Vec<String> = (0..n)
        .map(|i| {
            (0..n)
                .map(|j| {
                    if (i + 1) % n == j || (j + 1) % n == i {
                        "10"
                    } else {
                        "0"
                    }
                })
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect();
    let csv = dir.path().join("ring12.csv");
    std::fs::write(&csv, rows.join("\n") + "\n").unwrap();
    let expected = "PUs oversubscribed: 12 tasks on 8 PUs, 1.50 tasks per PU";
    for how in [["--algo", "locality"], ["--compare", "--seed=0"]] {
        numaff()
            .arg("map")
            .args(how)
            .args(["--machine", "kmaf-sim-4x2", "--matrix"])
            .arg(&csv)
            .assert()
            .success()
            .stdout(predicate::str::contains(expected))
            .stdout(predicate::str::contains("vs best"));
    }
    // As many tasks as PUs: no such line.
    numaff()
        .args([
            "map",
            "--algo",
            "locality",
            "--machine",
            "kmaf-sim-4x2",
            "--matrix",
        ])
        .arg(fixture("comm8.csv"))
        .assert()
        .success()
        .stdout(predicate::str::contains("oversubscribed").not());
}
