//! `numaff apply` on a C pthreads program (compiled with cc here): every thread is pinned
//! where the mapping says, read back from /proc/PID/task/TID/status (Cpus_allowed_list), including
//! threads created after a delay and threads of a child process; the skip mask; more threads than
//! the mapping; the program's exit status; the program survives numaff being killed.
#![allow(clippy::unwrap_used)] // helpers of tests

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;
use std::time::Duration;

mod common;
use common::{compile, fixture, numaff};

/// The test program, compiled into `dir`. No C compiler is a failure with the reason, not a skip.
fn compile_pin_threads(dir: &Path) -> PathBuf {
    let exe = dir.join("pin_threads");
    compile(
        "cc",
        &["-O1", "-pthread"],
        fixture("pin_threads.c"),
        &exe,
        "build-essential",
    );
    exe
}

/// This test process's allowed cpus, which numaff inherits and gives to threads it does not pin.
fn own_allowed() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_string()
}

/// A mapping file for this machine (its fingerprint from `numaff map --machine host`) with the
/// given placement.
fn mapping(dir: &Path, name: &str, placement: &[u32]) -> PathBuf {
    let allowed = numaff_machine::CpuSet::parse(&own_allowed()).unwrap();
    assert!(
        allowed.contains(0) && allowed.contains(1),
        "these tests need cpus 0 and 1 to be allowed, not only {allowed}"
    );
    let csv = dir.join("zero2.csv");
    std::fs::write(&csv, "0,1\n1,0\n").unwrap();
    let base = dir.join("base.toml");
    numaff()
        .args(["map", "--algo", "compact", "--matrix"])
        .arg(&csv)
        .arg("-o")
        .arg(&base)
        .assert()
        .success();
    let list: Vec<String> = placement.iter().map(|p| p.to_string()).collect();
    let text: String = std::fs::read_to_string(&base)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("nodes = "))
        .map(|l| {
            if l.starts_with("placement = ") {
                format!("placement = [{}]\n", list.join(", "))
            } else if l.starts_with("tasks = ") {
                format!("tasks = {}\n", placement.len())
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Report lines by creation index: index -> (pid, allowed list).
fn reports(stdout: &[u8]) -> BTreeMap<usize, (i32, String)> {
    let mut out = BTreeMap::new();
    for line in String::from_utf8_lossy(stdout).lines() {
        let f: BTreeMap<&str, &str> = line
            .strip_prefix("report ")
            .unwrap_or_else(|| panic!("unexpected line {line:?}"))
            .split(' ')
            .map(|kv| kv.split_once('=').unwrap())
            .collect();
        let idx = f["idx"].parse().unwrap();
        out.insert(idx, (f["pid"].parse().unwrap(), f["allowed"].to_string()));
    }
    out
}

fn allowed_of(r: &BTreeMap<usize, (i32, String)>) -> Vec<&str> {
    r.values().map(|(_, a)| a.as_str()).collect()
}

#[test]
fn apply_pins_each_thread_in_creation_order_including_late_ones() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_pin_threads(dir.path());
    let map = mapping(dir.path(), "m.toml", &[1, 0, 1, 0, 0]);
    let out = numaff()
        .arg("apply")
        .arg(&map)
        .args(["-v", "--"])
        .arg(&exe)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(7),
        "the program's exit status; stderr: {err}"
    );
    let r = reports(&out.stdout);
    // Thread 4 was created 200 ms after the others and still went to its entry.
    assert_eq!(allowed_of(&r), ["1", "0", "1", "0", "0"], "stderr: {err}");
    assert!(err.contains("5 threads seen, 5 pinned"), "{err}");
    assert!(!err.contains("warning"), "{err}");
}

#[test]
fn apply_follows_child_processes_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_pin_threads(dir.path());
    let map = mapping(dir.path(), "m.toml", &[1, 0, 1, 0, 0, 1, 1, 0]);
    let out = numaff()
        .arg("apply")
        .arg(&map)
        .args(["-v", "--"])
        .arg(&exe)
        .arg("fork")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "stderr: {err}");
    let r = reports(&out.stdout);
    // Parent threads 0-3, the child process' main thread 4 and its thread 5, the parent's late 6.
    assert_eq!(
        allowed_of(&r),
        ["1", "0", "1", "0", "0", "1", "1"],
        "stderr: {err}"
    );
    assert_ne!(r[&4].0, r[&0].0, "4 and 5 run in the child process");
    assert_eq!(r[&4].0, r[&5].0);
    assert!(err.contains("following process"), "{err}");
}

#[test]
fn apply_skip_mask_leaves_helper_threads_unpinned() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_pin_threads(dir.path());
    let map = mapping(dir.path(), "m.toml", &[1, 0, 1, 0]);
    // Bit 2: the third created thread is a "helper"; it takes no entry of the mapping.
    let out = numaff()
        .arg("apply")
        .arg(&map)
        .args(["--skip", "0x4", "--"])
        .arg(&exe)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "stderr: {err}");
    let all = own_allowed();
    assert_eq!(
        allowed_of(&reports(&out.stdout)),
        ["1", "0", all.as_str(), "1", "0"],
        "stderr: {err}"
    );
}

#[test]
fn apply_warns_when_more_threads_than_the_mapping() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_pin_threads(dir.path());
    let map = mapping(dir.path(), "m.toml", &[1, 0, 1]);
    let out = numaff()
        .arg("apply")
        .arg(&map)
        .arg("--")
        .arg(&exe)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "stderr: {err}");
    assert!(
        err.contains("warning: more threads than the mapping has tasks (3): thread 3"),
        "{err}"
    );
    let all = own_allowed();
    assert_eq!(
        allowed_of(&reports(&out.stdout)),
        ["1", "0", "1", all.as_str(), all.as_str()]
    );
}

#[test]
fn apply_warns_when_the_mapping_has_more_tasks_than_threads() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_pin_threads(dir.path());
    // The program creates 5 threads; a mapping of 7 tasks (say, from a trace with numaff's own
    // threads in it) leaves two tasks unused.
    let map = mapping(dir.path(), "m.toml", &[1, 0, 1, 0, 0, 1, 0]);
    let out = numaff()
        .arg("apply")
        .arg(&map)
        .arg("--")
        .arg(&exe)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "stderr: {err}");
    assert!(
        err.contains("warning: the mapping has 7 tasks but the program created 5 threads"),
        "{err}"
    );
    assert_eq!(
        allowed_of(&reports(&out.stdout)),
        ["1", "0", "1", "0", "0"],
        "stderr: {err}"
    );
}

#[test]
fn apply_program_runs_on_when_numaff_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    // sh and its sleep child: two threads in creation order.
    let map = mapping(dir.path(), "m.toml", &[1, 1]);
    let (started, done) = (dir.path().join("started"), dir.path().join("done"));
    let mut numaff = StdCommand::new(assert_cmd::cargo::cargo_bin("numaff"))
        .arg("apply")
        .arg(&map)
        .args(["--", "sh", "-c"])
        .arg(format!(
            "echo > {}; sleep 1; echo ok > {}",
            started.display(),
            done.display()
        ))
        .spawn()
        .unwrap();
    // Killed while the program runs (a fixed wait could kill it before the start on a busy
    // machine, and the test would then see no program at all).
    for _ in 0..200 {
        if started.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(started.exists(), "the program did not start in 10 s");
    numaff.kill().unwrap();
    numaff.wait().unwrap();
    for _ in 0..50 {
        if done.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(std::fs::read_to_string(&done).unwrap(), "ok\n");
}

#[test]
fn apply_checks_the_mapping_against_this_machine() {
    let dir = tempfile::tempdir().unwrap();
    // Computed for another machine: a warning, then applied (its PUs exist here).
    let csv = dir.path().join("m.csv");
    std::fs::write(&csv, "0,1\n1,0\n").unwrap();
    let other = dir.path().join("other.toml");
    numaff()
        .args([
            "map",
            "--algo",
            "compact",
            "--machine",
            "pack:2 core:4 pu:2",
            "--matrix",
        ])
        .arg(&csv)
        .arg("-o")
        .arg(&other)
        .assert()
        .success();
    numaff()
        .arg("apply")
        .arg(&other)
        .args(["--", "sh", "-c", "exit 3"])
        .assert()
        .code(3)
        .stderr(predicates::str::contains("which is not this machine"));
    // A PU this process may not use: refused before anything runs.
    let far = mapping(dir.path(), "far.toml", &[0, 100_000]);
    numaff()
        .arg("apply")
        .arg(&far)
        .args(["--", "true"])
        .assert()
        .failure()
        .stderr(predicates::str::contains(
            "task 1 is mapped to PU 100000, which this process may not use",
        ));
    numaff()
        .arg("apply")
        .arg(&other)
        .args(["--skip", "0xq", "--", "true"])
        .assert()
        .failure()
        .stderr(predicates::str::contains("'q' is not a hex digit"));
    // A zero interval is refused with the range it must be in (the message once said "between
    // 0 and 10000" of 0 itself).
    numaff()
        .arg("apply")
        .arg(&other)
        .args(["--interval", "0", "--", "true"])
        .assert()
        .failure()
        .stderr(predicates::str::contains(
            "--interval takes milliseconds above 0 and at most 10000, not 0",
        ));
}
