//! `numaff show` on real processes of this machine.
#![allow(clippy::unwrap_used)] // helpers of tests

use std::process::{Child, Command as StdCommand};

mod common;
use common::numaff;
use predicates::prelude::*;

/// A process that lives long enough to be looked at, killed when dropped.
struct Sleeper(Child);

impl Sleeper {
    fn start(seconds: &str) -> Self {
        Sleeper(StdCommand::new("sleep").arg(seconds).spawn().unwrap())
    }
    fn pid(&self) -> String {
        self.0.id().to_string()
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn show_prints_threads_mappings_and_nodes() {
    let s = Sleeper::start("30");
    numaff()
        .args(["show", &s.pid()])
        .assert()
        .success()
        .stdout(predicate::str::contains(format!(
            "pid {} (1 thread",
            s.pid()
        )))
        .stdout(predicate::str::contains("sleep 30"))
        .stdout(predicate::str::contains("memory per node: node 0"))
        .stdout(predicate::str::contains("stack"))
        .stdout(
            predicate::str::contains("/usr/bin/sleep").or(predicate::str::contains("/bin/sleep")),
        );
}

#[test]
fn show_json_has_the_documented_shape() {
    let s = Sleeper::start("30");
    let me = std::process::id().to_string();
    let out = numaff()
        .args(["show", "--json", &s.pid(), &me])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let procs = v["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 2);
    let p = &procs[0];
    assert_eq!(p["pid"].as_i64().unwrap().to_string(), s.pid());
    let t = &p["threads"][0];
    assert_eq!(t["tid"], p["pid"]);
    assert_eq!(t["name"], "sleep");
    assert!(t["cpu"].is_u64() && t["node"].is_u64());
    let maps = p["mappings"].as_array().unwrap();
    assert!(!maps.is_empty());
    for m in maps {
        assert!(m["start"].is_u64() && m["end"].is_u64() && m["kind"].is_string());
        assert!(m["end"].as_u64() >= m["start"].as_u64());
        for (node, pages) in m["pages_per_node"].as_object().unwrap() {
            assert!(node.parse::<u32>().is_ok() && pages.is_u64());
        }
    }
    let total = p["pages_per_node"].as_object().unwrap();
    assert!(total["0"].as_u64().unwrap() > 0);
    // The test process itself has several threads (the harness): all are listed.
    assert!(procs[1]["threads"].as_array().unwrap().len() >= 2);
}

#[test]
fn show_of_an_exited_process_says_so() {
    let mut child = StdCommand::new("true").spawn().unwrap();
    let pid = child.id().to_string();
    child.wait().unwrap();
    numaff()
        .args(["show", &pid])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no such process"))
        // Said once, as the command's error, not also as a warning before it.
        .stderr(predicate::function(|e: &str| {
            e.matches("no such process").count() == 1
        }));
}

#[test]
fn show_of_a_pid_that_never_existed_is_no_such_process() {
    // Above the kernel's largest pid (4194304): no process ever had it.
    numaff()
        .args(["show", "5000000"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no such process 5000000"))
        .stderr(predicate::str::contains("has exited").not());
}

#[test]
fn a_refused_process_of_our_own_uid_is_not_advised_to_run_as_it() {
    // init is refused even to root in a container; elsewhere it may be shown, or refused to
    // another user, who is rightly told to run as uid 0.
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let out = numaff().args(["show", "1"]).output().unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(!e.contains(&format!("run as that user (uid {me})")), "{e}");
}

#[test]
fn show_watch_ends_when_the_process_exits() {
    let s = Sleeper::start("1");
    let out = numaff()
        .args([
            "show",
            "--json",
            "--watch",
            "0.2",
            "--cpu-window",
            "0",
            &s.pid(),
        ])
        .timeout(std::time::Duration::from_secs(20))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
    assert!(lines.len() >= 2, "{lines:?}");
    for l in &lines[..lines.len() - 1] {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert_eq!(
            v["processes"][0]["pid"].as_i64().unwrap().to_string(),
            s.pid()
        );
    }
    assert!(String::from_utf8_lossy(&out.stderr).contains("every process shown has exited"));
}

#[test]
fn show_rejects_bad_arguments() {
    numaff().args(["show"]).assert().code(2);
    numaff().args(["show", "abc"]).assert().code(2);
    numaff()
        .args(["show", "--watch=-1", "1"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("--watch"));
}
