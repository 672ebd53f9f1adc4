//! `numaff topo` and `numaff demo` as a user runs them.
#![allow(clippy::unwrap_used)] // helpers of tests

use assert_cmd::Command;

mod common;
use common::{numaff, perf_allowed};
use predicates::prelude::*;

/// The PUs the kernel has online here, read from sysfs (not assumed).
fn online_cpus() -> usize {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    numaff_machine::CpuSet::parse(&text).unwrap().len()
}

#[test]
fn topo_json_describes_this_machine() {
    let out = numaff().args(["topo", "--json"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let pus = online_cpus();
    assert_eq!(v["summary"]["pus"], pus);
    assert_eq!(v["pus"].as_array().unwrap().len(), pus);
    assert!(v["summary"]["nodes"].as_u64().unwrap() >= 1);
    assert!(v["machine"]["nodes"][0]["memory_bytes"].as_u64().unwrap() > 0);
}

#[test]
fn topo_text_shows_tree_and_factor() {
    numaff()
        .args(["topo", "--machine", "kmaf-sim-4x2"])
        .assert()
        .success()
        .stdout(predicate::str::contains("Node 3 (1 GiB, cpus 6-7)"))
        .stdout(predicate::str::contains("└─ L2 512 KiB (8-way)"))
        .stdout(predicate::str::contains("Core 7: PU 7"))
        .stdout(predicate::str::contains("NUMA factor: 2.00–3.00"))
        .stdout(predicate::str::contains("Links per node: node 0: 2"));
}

#[test]
fn topo_snapshot_kmaf_sim() {
    let out = numaff()
        .args(["topo", "--machine", "kmaf-sim-4x2"])
        .output()
        .unwrap();
    insta::assert_snapshot!(String::from_utf8(out.stdout).unwrap());
}

#[test]
fn topo_snapshot_laso_hpl_matrices() {
    let out = numaff()
        .args(["topo", "--machine", "laso-hpl"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let figures = &text[text.find("Latency (ns)").unwrap()..];
    insta::assert_snapshot!(figures);
}

#[test]
fn topo_list_snapshot() {
    let out = numaff().args(["topo", "--list"]).output().unwrap();
    assert!(out.status.success());
    insta::assert_snapshot!(String::from_utf8(out.stdout).unwrap());
}

#[test]
fn topo_list_json_has_every_catalog_machine() {
    let out = numaff()
        .args(["topo", "--list", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    for name in [
        "kmaf-sim-4x2",
        "kmaf-itanium",
        "kmaf-xeon",
        "kmaf-opteron",
        "laso-hpl",
        "laso-lpl",
        "agung-xeon56",
        "agung-xeon2",
        "agung-knl4",
        "agung-sim-4x16",
        "minas-opteron",
        "minas-altix",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
}

#[test]
fn synthetic_machine_spec_gives_its_nodes_cores_and_pus() {
    let out = numaff()
        .args(["topo", "--machine", "pack:2 numa:2 core:4 pu:2", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["summary"]["nodes"], 4);
    assert_eq!(v["summary"]["cores"], 16);
    assert_eq!(v["summary"]["pus"], 32);
}

#[test]
fn export_then_load_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hpl.toml");
    numaff()
        .args(["topo", "--machine", "laso-hpl", "--export"])
        .arg(&path)
        .assert()
        .success();
    let exported = numaff_machine::file::load(&path).unwrap();
    assert_eq!(exported, numaff_machine::catalog::load("laso-hpl").unwrap());
    let a = numaff()
        .args(["topo", "--json", "--machine"])
        .arg(&path)
        .output()
        .unwrap();
    let b = numaff()
        .args(["topo", "--json", "--machine", "laso-hpl"])
        .output()
        .unwrap();
    assert_eq!(a.stdout, b.stdout);
}

#[test]
fn host_export_is_a_valid_machine_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("host.toml");
    numaff()
        .args(["topo", "--export"])
        .arg(&path)
        .assert()
        .success();
    let m = numaff_machine::file::load(&path).unwrap();
    assert_eq!(m.pu_count(), online_cpus());
}

#[test]
fn from_hwloc_imports_an_export() {
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../machine/tests/fixtures/hwloc-4node.xml"
    );
    let out = numaff()
        .args(["topo", "--json", "--from-hwloc", fixture])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["summary"]["nodes"], 4);
}

#[test]
fn errors_are_clear_and_exit_nonzero() {
    numaff()
        .args(["topo", "--machine", "no-such-machine"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "unknown machine \"no-such-machine\"",
        ))
        .stderr(predicate::str::contains("kmaf-sim-4x2"));
    numaff()
        .args(["topo", "--from-hwloc", "/nonexistent.xml"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("/nonexistent.xml does not exist"));
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "name = \"x\"\n[[node]]\nid = 0\ncpus = \"0\"\n[[package]]\nid = 0\ncores = [\"0\"]\n",
    )
    .unwrap();
    numaff()
        .args(["topo", "--machine"])
        .arg(&bad)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("bad.toml"))
        .stderr(predicate::str::contains("node[0]: no memory size"));
    numaff().args(["topo", "--bogus"]).assert().code(2);
}

#[test]
fn export_failure_leaves_no_partial_file() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("missing-dir").join("m.toml");
    numaff()
        .args(["topo", "--machine", "kmaf-xeon", "--export"])
        .arg(&target)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("cannot write"))
        .stderr(predicate::str::contains("missing-dir does not exist"));
    assert!(!target.exists());
}

#[test]
fn demo_shows_host_and_paper_machine() {
    numaff()
        .arg("demo")
        .assert()
        .success()
        .stdout(predicate::str::contains("This machine"))
        .stdout(predicate::str::contains("kmaf-sim-4x2 (from the papers)"))
        .stdout(predicate::str::contains("NUMA factor: 2.00–3.00"));
}

/// Fuzzing found XML that makes hwloc 2.9 itself crash (SIGSEGV in hwloc_bitmap_compare_first):
/// numaff loads XML in a child process, so the user gets an error, not a crash.
#[test]
fn xml_that_crashes_hwloc_is_an_error() {
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/hwloc-crashes-hwloc.xml"
    );
    numaff()
        .args(["topo", "--from-hwloc", fixture])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("hwloc crashed (signal"))
        .stderr(predicate::str::contains("hwloc-crashes-hwloc.xml"));
}

/// The child that hwloc crashes in dies with the default action and writes no core file, even
/// where core files are allowed (its crash is expected and reported). Guards against a signal
/// handler inherited by the child (a fuzzer's, which writes a `crash-*` file per crash, or the Rust
/// runtime's SIGSEGV handler, which lets the kernel dump a core in the working directory).
#[test]
fn the_child_hwloc_crashes_in_leaves_no_core_file() {
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/hwloc-crashes-hwloc.xml"
    );
    let dir = tempfile::tempdir().unwrap();
    let bin = assert_cmd::cargo::cargo_bin("numaff");
    let script = format!(
        "ulimit -c unlimited 2>/dev/null || ulimit -c 100000 2>/dev/null; exec '{}' topo --from-hwloc '{fixture}'",
        bin.display()
    );
    Command::new("sh")
        .args(["-c", &script])
        .current_dir(dir.path())
        .assert()
        .code(1)
        .stderr(predicate::str::contains("hwloc crashed (signal"));
    let left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// The demo's mapping example: locality beats the communication-blind compact and scatter.
#[test]
fn demo_shows_locality_beating_compact_and_scatter() {
    let out = numaff().arg("demo").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let cost = |name: &str| -> f64 {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap();
        let after = line.split("hop cost").nth(1).unwrap();
        after.split_whitespace().next().unwrap().parse().unwrap()
    };
    assert!(cost("locality") < cost("compact"), "{text}");
    assert!(cost("locality") < cost("scatter"), "{text}");
}

/// The demo's simulation: on the paper machine, neighbours together with local pages (T_L D_L) beat
/// threads apart with remote pages (T_R D_R), as in kMAF Fig. 1.
#[test]
fn demo_simulation_shows_placement_matters() {
    let out = numaff().arg("demo").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let ms = |label: &str| -> f64 {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(label))
            .unwrap();
        line[label.len() + 2..]
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(
        ms("compact, oracle-local") < ms("scatter, oracle-remote"),
        "{text}"
    );
}

/// Checks the demo's observing step in `text`: where perf events and userfaultfd work, the ring's
/// neighbour pairs are the heaviest of a 4 x 4 matrix; elsewhere the demo says it cannot show it.
fn assert_demo_found_the_ring(text: &str) {
    let uffd = numaff_linux::induce::uffd_async_probe().is_ok();
    if perf_allowed() && uffd {
        assert!(
            text.contains("The heaviest pairs are the ring's neighbours"),
            "{text}"
        );
        // The matrix: 4 rows t0..t3 of 4 cells.
        let rows = text
            .lines()
            .filter(|l| l.trim_start().starts_with('t') && l.split_whitespace().count() == 5)
            .count();
        assert_eq!(rows, 4, "{text}");
    } else {
        assert!(
            text.contains("Observing a program") && text.contains("cannot show it here")
                || text.contains("not the heaviest"),
            "{text}"
        );
    }
}

/// The demo's observing step: `numaff profile` on the built-in ring of 4 threads finds the ring
/// (its neighbour pairs are the heaviest of the communication matrix). Where perf events or
/// userfaultfd are refused, the demo says it cannot show it, and still succeeds.
#[test]
fn demo_profiles_a_ring_and_finds_its_neighbours() {
    let out = numaff().arg("demo").output().unwrap();
    assert!(out.status.success());
    assert_demo_found_the_ring(&String::from_utf8(out.stdout).unwrap());
}

/// The demo on a busy machine, where the ring gets little cpu: with the default induce budget
/// (0.5 % of that cpu) its buffers were re-armed about once in 1.5 s and the matrix was noise.
/// Here six threads spin while the demo runs; it must still find the ring.
#[test]
fn demo_finds_the_ring_on_a_loaded_machine() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let stop = AtomicBool::new(false);
    let out = std::thread::scope(|s| {
        for _ in 0..6 {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            });
        }
        let out = numaff().arg("demo").output();
        stop.store(true, Ordering::Relaxed);
        out.unwrap()
    });
    assert!(out.status.success());
    assert_demo_found_the_ring(&String::from_utf8(out.stdout).unwrap());
}

/// The `numaff sim` commands the demo suggests print the demo's simulated numbers: the os row's
/// mean over its seeds, and the makespans of the two oracle placements.
#[test]
fn demo_suggests_the_sim_commands_its_numbers_come_from() {
    let out = numaff().arg("demo").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let demo_ms = |label: &str| -> String {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(label))
            .unwrap_or_else(|| panic!("no {label} row: {text}"));
        line[line.find(label).unwrap() + label.len()..]
            .split_whitespace()
            .next()
            .unwrap()
            .to_string()
    };
    let commands: Vec<Vec<&str>> = text
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("numaff sim ") && l.contains("--workload"))
        .map(|l| l.split_whitespace().skip(1).collect())
        .collect();
    assert_eq!(commands.len(), 2, "{text}");
    let run = |args: &[&str]| -> String {
        let out = numaff().args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let two = |x: &str| format!("{:.2}", x.parse::<f64>().unwrap());
    // The os row: the mean makespan over the seeds.
    let os = run(&commands[0]);
    let mean = os
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("makespan (ms)"))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no mean makespan: {os}"));
    assert_eq!(two(mean), demo_ms("os, first-touch"), "{os}\n{text}");
    // The oracle rows: their makespans in the comparison table.
    let table = run(&commands[1]);
    for (threads, data) in [("scatter", "oracle-remote"), ("compact", "oracle-local")] {
        let ms = table
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|w| w.len() > 2 && w[0] == threads && w[1] == data)
            .map(|w| w[2].to_string())
            .unwrap_or_else(|| panic!("no {threads} {data} row: {table}"));
        assert_eq!(
            two(&ms),
            demo_ms(&format!("{threads}, {data}")),
            "{table}\n{text}"
        );
    }
}

/// `--export` writes the format its extension names: hwloc XML that hwloc reads back into the same
/// machine (and hwloc-calc accepts), a TOML machine file, and refuses any other extension.
#[test]
fn export_writes_the_format_of_its_extension() {
    let dir = tempfile::tempdir().unwrap();
    let json = |args: &[&str]| -> serde_json::Value {
        let out = numaff().args(args).arg("--json").output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    // Node 1 of kmaf-itanium spans two packages: hwloc needs a group to hold it.
    for machine in ["laso-hpl", "kmaf-itanium"] {
        let xml = dir.path().join(format!("{machine}.xml"));
        numaff()
            .args(["topo", "--machine", machine, "--export"])
            .arg(&xml)
            .assert()
            .success();
        let text = std::fs::read_to_string(&xml).unwrap();
        assert!(text.starts_with("<?xml"), "{text}");
        let original = json(&["topo", "--machine", machine]);
        let back = json(&["topo", "--from-hwloc", xml.to_str().unwrap()]);
        for key in ["nodes", "packages", "cores", "pus", "memory_bytes"] {
            assert_eq!(
                back["summary"][key], original["summary"][key],
                "{machine} {key}"
            );
        }
        assert_eq!(back["pus"], original["pus"], "{machine}");
        assert_eq!(
            back["machine"]["distances"], original["machine"]["distances"],
            "{machine}"
        );
        match std::process::Command::new("hwloc-calc")
            .arg("-i")
            .arg(&xml)
            .args(["--number-of", "pu", "machine:0"])
            .output()
        {
            Ok(out) => {
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                assert_eq!(
                    String::from_utf8_lossy(&out.stdout).trim(),
                    original["summary"]["pus"].to_string()
                );
            }
            Err(e) => eprintln!("hwloc-calc not run ({e}): install hwloc (scripts/setup.sh)"),
        }
    }
    let toml = dir.path().join("m.toml");
    numaff()
        .args(["topo", "--machine", "kmaf-sim-4x2", "--export"])
        .arg(&toml)
        .assert()
        .success();
    assert!(!std::fs::read_to_string(&toml).unwrap().starts_with('<'));
    let back = json(&["topo", "--machine", toml.to_str().unwrap()]);
    assert_eq!(back["summary"]["pus"], 8);
    for name in ["m.txt", "m"] {
        let path = dir.path().join(name);
        numaff()
            .args(["topo", "--machine", "kmaf-sim-4x2", "--export"])
            .arg(&path)
            .assert()
            .failure()
            .stderr(
                predicate::str::contains("FILE.toml").and(predicate::str::contains("FILE.xml")),
            );
        assert!(!path.exists(), "{name} was written");
    }
}

#[test]
fn an_hwloc_error_says_its_errno_in_words() {
    let dir = tempfile::tempdir().unwrap();
    let xml = dir.path().join("bad.xml");
    std::fs::write(
        &xml,
        "<?xml version=\"1.0\"?>\n<topology><object type=\"Machine\"></object></topology>\n",
    )
    .unwrap();
    let out = numaff()
        .args(["topo", "--machine"])
        .arg(&xml)
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{e}");
    assert!(!e.contains("Errno {") && !e.contains("Some("), "{e}");
}
