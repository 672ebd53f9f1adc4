//! Induced faults on this machine. `numaff profile --induce uffd` (the LD_PRELOAD
//! agent) on real C programs: the ring of 8 threads (thread i writes a buffer that thread i+1
//! reads) gives a communication matrix whose heaviest entries are the neighbour pairs, and private
//! pages rewritten after their first touch are sampled again, and the overhead budget
//! (`--induce-budget`) bounds the induced faults. Skipped where perf events are refused
//! or userfaultfd with asynchronous write-protection is missing (Linux < 6.7): the test says so.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use assert_cmd::cargo::cargo_bin;
use numaff_behave::TraceReader;

mod common;
use common::{compile_profile_program, perf_allowed};

fn uffd_usable() -> bool {
    match numaff_linux::induce::uffd_async_probe() {
        Ok(_) => true,
        Err(e) => {
            eprintln!("skipped: {e}");
            false
        }
    }
}

fn profile(trace: &Path, args: &[&str], prog: &Path, prog_args: &[&str]) -> (String, String) {
    let out = Command::new(cargo_bin("numaff"))
        .args(["profile", "-o"])
        .arg(trace)
        .args(args)
        .arg("--")
        .arg(prog)
        .args(prog_args)
        .output()
        .expect("run numaff");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "numaff failed: {stdout}\n{stderr}");
    // The program's output, then numaff's summary (on stderr).
    (format!("{stdout}{stderr}"), stderr)
}

/// The ring is found from induced faults. Without a budget (the budget has its own test below):
/// with the default one, on a loaded machine the ring's cpu time falls, and 0.5 % of it barely
/// pays the agent's own cpu time, leaving too few induced faults to find the ring.
#[test]
fn ring_of_eight_threads_gives_neighbour_pairs() {
    if !perf_allowed() || !uffd_usable() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let prog = compile_profile_program(dir.path(), "ring8", &["-O2", "-pthread"]);
    let trace = dir.path().join("ring.parquet");
    let (stdout, stderr) = profile(
        &trace,
        &[
            "--induce",
            "uffd",
            "--induce-rate",
            "10",
            "--induce-budget",
            "off",
        ],
        &prog,
        &["2500"],
    );
    assert!(stderr.contains("induced faults: uffd agent"), "{stderr}");
    assert!(
        stdout.contains("uffd agent on") && stdout.contains("shared pages unmapped"),
        "the agent reports what it did: {stdout}"
    );
    // THREAD i tid
    let tids: Vec<u64> = {
        let mut v = vec![0u64; 8];
        for l in stdout.lines().filter(|l| l.starts_with("THREAD ")) {
            let f: Vec<u64> = l[7..]
                .split(' ')
                .map(|x| x.parse().expect("number"))
                .collect();
            v[f[0] as usize] = f[1];
        }
        v
    };
    assert!(tids.iter().all(|&t| t != 0), "{stdout}");

    let out = Command::new(cargo_bin("numaff"))
        .args(["analyze", "--json"])
        .arg(&trace)
        .output()
        .expect("run numaff analyze");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let threads = doc["threads"].as_array().expect("threads");
    let index_of = |tid: u64| -> usize {
        threads
            .iter()
            .position(|t| t["tid"].as_u64() == Some(tid))
            .unwrap_or_else(|| panic!("thread {tid} not in the trace: {doc}"))
    };
    let idx: Vec<usize> = tids.iter().map(|&t| index_of(t)).collect();
    let m: Vec<Vec<f64>> = doc["communication_matrix"]
        .as_array()
        .expect("matrix")
        .iter()
        .map(|r| {
            r.as_array()
                .expect("row")
                .iter()
                .map(|x| x.as_f64().expect("number"))
                .collect()
        })
        .collect();
    let c = |i: usize, j: usize| m[idx[i]][idx[j]];
    // Every worker's two heaviest partners are its ring neighbours, and every neighbour pair
    // communicates more than any pair that is not.
    let mut min_neighbour = f64::INFINITY;
    let mut max_other = 0.0f64;
    for i in 0..8 {
        for j in 0..8 {
            if i == j {
                continue;
            }
            if (i + 1) % 8 == j || (j + 1) % 8 == i {
                min_neighbour = min_neighbour.min(c(i, j));
            } else {
                max_other = max_other.max(c(i, j));
            }
        }
    }
    assert!(
        min_neighbour > 0.0 && min_neighbour > max_other,
        "neighbour pairs (min {min_neighbour}) are not the heaviest (other pairs up to {max_other}): {m:?}"
    );
}

#[test]
fn uffd_agent_resamples_rewritten_private_pages() {
    if !perf_allowed() || !uffd_usable() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let prog = compile_profile_program(dir.path(), "rewrite", &["-O2", "-pthread"]);
    let count = |induce: &str| -> (u64, u64) {
        let trace = dir.path().join(format!("{induce}.parquet"));
        // 8 MiB (2048 pages), rewritten 20,000 times (about 2 s here).
        let (stdout, _) = profile(
            &trace,
            // The rate alone decides here (the budget has its own test).
            &[
                "--induce",
                induce,
                "--induce-rate",
                "5",
                "--induce-budget",
                "off",
            ],
            &prog,
            &["8", "20000"],
        );
        let buf = stdout
            .lines()
            .find_map(|l| l.strip_prefix("BUF "))
            .unwrap_or_else(|| panic!("{stdout}"));
        let f: Vec<u64> = buf.split(' ').map(|x| x.parse().expect("number")).collect();
        let samples = TraceReader::open(&trace)
            .expect("open")
            .read_all()
            .expect("read");
        let inside = samples
            .iter()
            .filter(|s| (f[0]..f[1]).contains(&s.addr))
            .count() as u64;
        (inside, (f[1] - f[0]) / 4096)
    };
    let (off, pages) = count("off");
    // Without induced faults each page is sampled once, at its first touch.
    assert!(off <= pages + pages / 20, "{off} samples for {pages} pages");
    let (on, _) = count("uffd");
    assert!(
        on >= 2 * pages,
        "with the agent only {on} samples for {pages} pages rewritten for about 2 s at 5 re-arms \
         per page per second"
    );
}

/// The cost of a fault the budget counts (numaff_linux::induce::FAULT_COST_NS), in seconds.
const FAULT_COST_S: f64 = numaff_linux::induce::FAULT_COST_NS * 1e-9;

#[test]
fn induce_budget_bounds_the_cost_of_induced_faults() {
    if !perf_allowed() || !uffd_usable() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let prog = compile_profile_program(dir.path(), "rewrite", &["-O2", "-pthread"]);
    // 32 MiB (8192 pages) rewritten 6000 times (about 1 s here); at 5 re-arms per page per second
    // the rate alone asks for about 40 000 induced faults per second, 7 % of a cpu.
    let run = |args: &[&str]| -> (u64, f64, String) {
        let trace = dir.path().join("b.parquet");
        let (stdout, _) = profile(&trace, args, &prog, &["32", "6000"]);
        let faults = stdout
            .lines()
            .find_map(|l| l.strip_prefix("FAULTS "))
            .and_then(|f| f.trim().parse().ok())
            .unwrap_or_else(|| panic!("no FAULTS line:\n{stdout}"));
        let cpu = stdout
            .lines()
            .find_map(|l| {
                l.split_once("the program ")?
                    .1
                    .strip_suffix(" s")?
                    .parse()
                    .ok()
            })
            .unwrap_or_else(|| panic!("no program cpu time:\n{stdout}"));
        (faults, cpu, stdout)
    };
    let (first_touch, _, _) = run(&["--induce", "off"]);
    let (capped, cpu, out) = run(&["--induce", "uffd", "--induce-rate", "5"]);
    let (uncapped, _, _) = run(&[
        "--induce",
        "uffd",
        "--induce-rate",
        "5",
        "--induce-budget",
        "off",
    ]);
    let budget = numaff_linux::induce::DEFAULT_BUDGET;
    assert!(
        out.contains(&format!(
            "the budget ({}% of the program's cpu time) limited",
            budget * 100.0
        )),
        "the default budget did not say it limited the re-arms:\n{out}"
    );
    // What the default budget allows, plus the agent thread's own first touches (its stack and its
    // 1 MiB buffer for /proc/self/maps: at most 300 pages).
    let induced = capped.saturating_sub(first_touch);
    let allowed = budget * cpu / FAULT_COST_S + 300.0;
    assert!(
        induced as f64 <= allowed,
        "{induced} induced faults in {cpu:.3} s of the program's cpu time: more than the default \
         budget's {allowed:.0}"
    );
    let free = uncapped.saturating_sub(first_touch);
    assert!(
        free >= 3 * induced.max(300),
        "without a budget {free} induced faults, with it {induced}: the budget did not limit"
    );
}

#[test]
fn ranges_unmapped_while_the_agent_rearms_them_are_not_errors() {
    if !perf_allowed() || !uffd_usable() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let prog = compile_profile_program(dir.path(), "churn", &["-O2", "-pthread"]);
    let trace = dir.path().join("churn.parquet");
    // Private and shared buffers mapped and unmapped about 1000 times a second for 2 s, re-armed
    // 20 times per page per second: some ticks write-protect, unmap or register a range that is
    // gone by then (before the agent told them apart, 2 of about 50 such 1 s runs here reported
    // an error: EINVAL from registering over a hole, and one not identified).
    let (stdout, _) = profile(
        &trace,
        &[
            "--induce",
            "uffd",
            "--induce-rate",
            "20",
            "--induce-budget",
            "off",
        ],
        &prog,
        &["2000"],
    );
    assert!(stdout.contains("ROUNDS "), "{stdout}");
    let line = stdout
        .lines()
        .find(|l| l.contains("uffd agent on"))
        .unwrap_or_else(|| panic!("no agent line:\n{stdout}"));
    assert!(line.contains(" 0 errors"), "{line}");
}

#[test]
fn agent_never_makes_system_calls_fail() {
    if !perf_allowed() || !uffd_usable() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let prog = compile_profile_program(dir.path(), "syscalls", &["-O2", "-pthread"]);
    // Full userfaultfd (root here) and what an unprivileged user gets (UFFD_USER_MODE_ONLY, where a
    // synchronous write-protect fault from the kernel would give EFAULT).
    for user_mode_only in ["0", "1"] {
        let trace = dir.path().join(format!("sys{user_mode_only}.parquet"));
        let out = Command::new(cargo_bin("numaff"))
            .env("NUMAFF_INDUCE_USER_MODE_ONLY", user_mode_only)
            .args(["profile", "-o"])
            .arg(&trace)
            .args([
                "--induce",
                "uffd",
                "--induce-rate",
                "20",
                "--induce-budget",
                "off",
            ])
            .arg("--")
            .arg(&prog)
            .arg("1000")
            .output()
            .expect("run numaff");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stdout}\n{stderr}");
        assert!(
            stdout.contains("OK ") && !stderr.contains("the program exited with"),
            "a system call failed under the agent (user_mode_only={user_mode_only}): {stdout}\n{stderr}"
        );
        let mode = if user_mode_only == "1" {
            "(user-mode-only)"
        } else {
            "(full)"
        };
        // numaff's summary is on stderr.
        assert!(
            stderr.contains(&format!("uffd agent on {mode}")),
            "{stderr}"
        );
        // The agent did write-protect pages while the kernel wrote into them.
        let rearmed: u64 = stderr
            .split("ticks, ")
            .nth(1)
            .and_then(|s| s.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{stderr}"));
        assert!(rearmed >= 1024, "{stderr}");
    }
}

/// The agent's status files of numaff process `pid` in `dir` (`numaff-induce-PID.CHILD`).
fn agent_status_files(dir: &Path, pid: u32) -> Vec<String> {
    let prefix = format!("numaff-induce-{pid}.");
    std::fs::read_dir(dir)
        .expect("read the temporary directory")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with(&prefix))
        .collect()
}

#[test]
fn agent_stops_when_numaff_dies_and_the_program_runs_on() {
    if !perf_allowed() || !uffd_usable() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let done = dir.path().join("done");
    // sh and its sleep both load the agent (LD_PRELOAD is inherited); each writes a status file.
    let mut numaff = Command::new(cargo_bin("numaff"))
        .env("TMPDIR", dir.path())
        .args(["profile", "--induce", "uffd", "-o"])
        .arg(dir.path().join("t.parquet"))
        .args(["--", "sh", "-c"])
        .arg(format!("sleep 1.5; echo ok > {}", done.display()))
        .spawn()
        .expect("run numaff");
    let pid = numaff.id();
    let deadline = Instant::now() + Duration::from_secs(10);
    while agent_status_files(dir.path(), pid).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !agent_status_files(dir.path(), pid).is_empty(),
        "the agent never started in the program"
    );
    numaff.kill().expect("kill numaff");
    numaff.wait().expect("wait numaff");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !(done.exists() && agent_status_files(dir.path(), pid).is_empty())
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        done.exists(),
        "the program did not finish after numaff died"
    );
    assert_eq!(std::fs::read_to_string(&done).expect("read done"), "ok\n");
    assert_eq!(
        agent_status_files(dir.path(), pid),
        Vec::<String>::new(),
        "the agent kept running after numaff died"
    );
}

#[test]
fn bad_induce_options_are_clear_errors() {
    let run = |args: &[&str]| {
        let out = Command::new(cargo_bin("numaff"))
            .arg("profile")
            .args(args)
            .args(["--", "true"])
            .output()
            .expect("run numaff");
        assert!(!out.status.success(), "{args:?} was accepted");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let e = run(&["--induce", "mprotect"]);
    assert!(
        e.contains("unknown --induce") && e.contains("soft-dirty"),
        "{e}"
    );
    let e = run(&["--induce-rate", "0"]);
    assert!(e.contains("not a rate"), "{e}");
    for bad in ["0", "101", "-1", "none", "NaN"] {
        let e = run(&[&format!("--induce-budget={bad}")]);
        assert!(e.contains("not a budget") && e.contains("off"), "{e}");
    }
    // A way this machine lacks says why and what to do.
    let opts = numaff_linux::induce::options();
    if let Some(o) = opts.iter().find(|o| !o.available) {
        let e = run(&["--induce", o.induce.name()]);
        assert!(
            e.contains("does not work here") && e.contains("--induce auto"),
            "{e}"
        );
    }
}

/// numaff's agent is a thread of the program but none of its tasks: the trace has samples of the
/// program's threads only (the ring's workers and its main thread) and no thread named for the
/// agent, so a mapping made from it has one task per thread of the program.
#[test]
fn the_agent_thread_is_left_out_of_the_trace() {
    if !perf_allowed() || !uffd_usable() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let prog = compile_profile_program(dir.path(), "ring8", &["-O2", "-pthread"]);
    let trace = dir.path().join("ring.parquet");
    let out = Command::new(cargo_bin("numaff"))
        .args(["profile", "-o"])
        .arg(&trace)
        .args(["--induce", "uffd", "--induce-rate", "20"])
        .args(["--induce-budget", "off", "--"])
        .arg(&prog)
        .arg("400")
        .output()
        .expect("run numaff");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let workers: std::collections::BTreeSet<u32> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("THREAD "))
        .filter_map(|l| l.split(' ').nth(1)?.parse().ok())
        .collect();
    assert_eq!(workers.len(), 8, "{stdout}");
    let reader = TraceReader::open(&trace).expect("trace opens");
    let names = reader.meta().thread_names.clone();
    assert!(
        names.values().all(|n| n != "numaff-agent"),
        "the agent is named in the trace: {names:?}"
    );
    let samples = reader.read_all().expect("trace reads");
    let strangers: std::collections::BTreeSet<u32> = samples
        .iter()
        .filter(|s| s.tid != s.pid && !workers.contains(&s.tid))
        .map(|s| s.tid)
        .collect();
    assert!(
        strangers.is_empty(),
        "samples of threads the program did not create: {strangers:?} (names {names:?})"
    );
}
