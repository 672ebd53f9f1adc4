//! `numaff profile` on a real program: a C program (compiled here with cc) whose 4 threads each
//! touch their own 16 MiB buffer. Skipped where perf events are refused (perf_event_paranoid > 2)
//! or no C compiler exists.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use assert_cmd::cargo::cargo_bin;
use numaff_behave::TraceReader;

mod common;
use common::{perf_allowed, profile_program, try_compile};

/// The C test program `name`, compiled into `dir`; `None` without a working C compiler (the
/// test is then skipped).
fn compile(dir: &Path, name: &str) -> Option<PathBuf> {
    let exe = dir.join(name);
    try_compile(
        "cc",
        &["-O2", "-pthread"],
        profile_program(name),
        &exe,
        "build-essential",
    )
    .ok()
    .map(|()| exe)
}

/// touch4's report of its 4 buffers (`BUF tid start end`): tid -> [start, end).
fn buffers(stdout: &str) -> BTreeMap<u32, (u64, u64)> {
    let mut bufs = BTreeMap::new();
    for l in stdout.lines().filter(|l| l.starts_with("BUF ")) {
        let f: Vec<u64> = l[4..]
            .split(' ')
            .map(|x| x.parse().expect("number"))
            .collect();
        bufs.insert(f[0] as u32, (f[1], f[2]));
    }
    assert_eq!(bufs.len(), 4, "{stdout}");
    bufs
}

/// Asserts that each buffer got a number of samples in `expected`, all from the thread that owns
/// it.
fn assert_samples_per_buffer(
    samples: &[numaff_behave::Sample],
    bufs: &BTreeMap<u32, (u64, u64)>,
    expected: std::ops::RangeInclusive<usize>,
) {
    for (tid, (lo, hi)) in bufs {
        let in_buf: Vec<_> = samples
            .iter()
            .filter(|s| (*lo..*hi).contains(&s.addr))
            .collect();
        assert!(
            expected.contains(&in_buf.len()),
            "thread {tid}: {} samples in its buffer, expected {expected:?}",
            in_buf.len()
        );
        assert!(
            in_buf.iter().all(|s| s.tid == *tid),
            "thread {tid}: samples from other tids"
        );
    }
}

#[test]
fn profile_four_threads_touching_their_buffers() {
    if !perf_allowed() {
        eprintln!("skipped: perf_event_paranoid > 2 and not root");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(prog) = compile(dir.path(), "touch4") else {
        eprintln!("skipped: no C compiler");
        return;
    };
    let trace = dir.path().join("t.parquet");
    let out = Command::new(cargo_bin("numaff"))
        .args(["profile", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(&prog)
        .output()
        .expect("run numaff");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "numaff failed: {stdout}\n{stderr}");
    // numaff's summary is on stderr: stdout is the program's alone.
    assert!(
        stderr.contains("samples") && stderr.contains("lost"),
        "{stderr}"
    );
    assert!(stderr.contains("numaff analyze"), "{stderr}");
    assert!(!stdout.contains("numaff"), "{stdout}");
    assert!(
        stderr.contains("sees") && stderr.contains("rate:") && stderr.contains("cost:"),
        "the sampler says what it sees, its rate and its cost: {stderr}"
    );

    let bufs = buffers(&stdout);

    let reader = TraceReader::open(&trace).expect("open trace");
    let meta = reader.meta().clone();
    assert_eq!(meta.sampler.as_deref(), Some("page-faults"));
    assert!(meta
        .command
        .as_deref()
        .is_some_and(|c| c.contains("touch4")));
    assert!(meta.machine.is_some());
    assert!(meta.rates.contains_key("samples") && meta.rates.contains_key("lost"));
    let samples = reader.read_all().expect("read trace");
    let tids: BTreeSet<u32> = samples.iter().map(|s| s.tid).collect();
    assert!(tids.len() >= 4, "samples from only {} tids", tids.len());
    // 4096 pages; allow a little slack for faults lost or merged (fault-around is for files).
    assert_samples_per_buffer(&samples, &bufs, 3900..=4200);

    let out = Command::new(cargo_bin("numaff"))
        .arg("analyze")
        .arg(&trace)
        .output()
        .expect("run numaff analyze");
    assert!(
        out.status.success(),
        "analyze failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn list_samplers_says_why() {
    let out = Command::new(cargo_bin("numaff"))
        .args(["profile", "--list-samplers"])
        .output()
        .expect("run numaff");
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    for name in ["page-faults", "pebs", "ibs", "soft-dirty", "numa-hinting"] {
        assert!(s.contains(name), "{name} missing: {s}");
    }
    assert!(s.contains("mem-loads") && s.contains("ibs_op"), "{s}");
}

#[test]
fn profile_needs_a_command_and_a_known_sampler() {
    let out = Command::new(cargo_bin("numaff"))
        .arg("profile")
        .output()
        .expect("run numaff");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--pid"));
    let out = Command::new(cargo_bin("numaff"))
        .args(["profile", "--sampler", "pebs", "--", "true"])
        .output()
        .expect("run numaff");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("list-samplers"));
    let out = Command::new(cargo_bin("numaff"))
        .args(["profile", "--ldlat", "50", "--", "true"])
        .output()
        .expect("run numaff");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs --sampler pebs"));
    for bad in ["0", "1.5", "every"] {
        let out = Command::new(cargo_bin("numaff"))
            .args(["profile", "--sample-period", bad, "--", "true"])
            .output()
            .expect("run numaff");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(stderr.contains("one page fault in N"), "{bad}: {stderr}");
    }
}

/// A program that does not exist is refused before anything is created: no trace and no
/// temporary file.
#[test]
fn profile_reports_a_missing_program_and_leaves_no_trace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(cargo_bin("numaff"))
        .args(["profile", "-o"])
        .arg(dir.path().join("t.parquet"))
        .args(["--", "/nonexistent/prog"])
        .output()
        .expect("run numaff");
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("cannot run /nonexistent/prog"), "{e}");
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .expect("read dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// A trace that cannot be written fails before the program starts: the program (which would
/// make a marker file) never runs.
#[test]
fn profile_with_a_bad_output_does_not_start_the_program() {
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = dir.path().join("ran");
    for bad in ["/nonexistent/x.parquet", &dir.path().to_string_lossy()] {
        let out = Command::new(cargo_bin("numaff"))
            .args(["profile", "-o", bad, "--", "touch"])
            .arg(&marker)
            .output()
            .expect("run numaff");
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{e}");
        assert!(e.contains("cannot write"), "{e}");
    }
    // A program left to run on would have made its marker by now.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(!marker.exists(), "the program ran");
}

/// `numaff profile CMD` exits as CMD did: its status, or 128 + the signal that killed it.
#[test]
fn profile_exits_with_the_programs_status() {
    if !perf_allowed() {
        eprintln!("skipped: perf events are not allowed here");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    for (cmd, code) in [
        ("exit 42", 42),
        ("false", 1),
        ("exit 0", 0),
        ("kill -SEGV $$", 139),
    ] {
        let out = Command::new(cargo_bin("numaff"))
            .args(["profile", "-o"])
            .arg(dir.path().join("t.parquet"))
            .args(["--", "sh", "-c", cmd])
            .output()
            .expect("run numaff");
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{cmd}: {e}");
    }
}

/// numaff's own words go to stderr: the program's stdout is the program's alone.
#[test]
fn profile_leaves_stdout_to_the_program() {
    if !perf_allowed() {
        eprintln!("skipped: perf events are not allowed here");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(cargo_bin("numaff"))
        .args(["profile", "-o"])
        .arg(dir.path().join("t.parquet"))
        .args(["--", "sh", "-c", "echo only this"])
        .output()
        .expect("run numaff");
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{e}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "only this\n");
    assert!(
        e.contains("samples") && e.contains("next: numaff analyze"),
        "{e}"
    );
}

#[test]
fn the_program_runs_on_if_numaff_dies() {
    if !perf_allowed() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (started, done) = (dir.path().join("started"), dir.path().join("done"));
    let mut numaff = Command::new(cargo_bin("numaff"))
        .args(["profile", "-o"])
        .arg(dir.path().join("t.parquet"))
        .args(["--", "sh", "-c"])
        .arg(format!(
            "echo > {}; sleep 1; echo ok > {}",
            started.display(),
            done.display()
        ))
        .spawn()
        .expect("run numaff");
    // Killed while the program runs (a fixed wait could kill it before the start on a busy
    // machine, and the test would then see no program at all).
    for _ in 0..200 {
        if started.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(started.exists(), "the program did not start in 10 s");
    numaff.kill().expect("kill numaff");
    numaff.wait().expect("wait numaff");
    for _ in 0..50 {
        if done.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(
        done.exists(),
        "the program did not finish after numaff died"
    );
}

#[test]
fn profile_a_running_process_by_pid() {
    if !perf_allowed() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(prog) = compile(dir.path(), "touch4") else {
        return;
    };
    // The shell waits until numaff has attached (it says so on stderr: "numaff: sampler ..."),
    // then execs the program in the same process: its threads start after numaff attached, and
    // inherit the events. (A fixed wait of 0.5 s could end before numaff attached on a busy
    // machine.)
    let go = dir.path().join("go");
    let mut target = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "i=0; while [ ! -e {} ] && [ $i -lt 1000 ]; do sleep 0.02; i=$((i+1)); done; exec {}",
            go.display(),
            prog.display()
        ))
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("start the target");
    let trace = dir.path().join("p.parquet");
    let mut numaff = Command::new(cargo_bin("numaff"))
        .args(["profile", "--duration", "20s", "-o"])
        .arg(&trace)
        .args(["--pid", &target.id().to_string()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run numaff");
    let stderr = numaff.stderr.take().expect("stderr");
    let lines = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut all = String::new();
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if line.starts_with("numaff: sampler ") {
                std::fs::write(&go, "").expect("write the go file");
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let out = numaff.wait_with_output().expect("wait for numaff");
    let stderr = lines.join().expect("stderr reader");
    let _ = target.wait();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stderr.contains("the program exited"), "{stderr}");
    let reader = TraceReader::open(&trace).expect("open");
    let faults = reader.meta().rates.get("faults").copied().unwrap_or(0.0);
    let samples = reader.read_all().expect("read");
    let tids: BTreeSet<u32> = samples.iter().map(|s| s.tid).collect();
    assert!(tids.len() >= 4, "{} tids", tids.len());
    assert!(samples.len() >= 4 * 3900, "{} samples", samples.len());
    assert!(faults >= samples.len() as f64, "{faults} faults counted");
}

/// A busy process that touches no new pages gives no samples when attached: numaff says why and
/// what to do, and reports the process's own cpu time over the run (not 0).
#[test]
fn profile_of_a_busy_process_explains_why_no_samples_came() {
    if !perf_allowed() {
        eprintln!("skipped: perf events are not allowed here");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut busy = Command::new("sh")
        .args(["-c", "while :; do :; done"])
        .spawn()
        .expect("start a busy loop");
    // Past the shell's start-up, whose first touches would be samples.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let out = Command::new(cargo_bin("numaff"))
        .args(["profile", "--induce", "off", "--duration", "1s", "-o"])
        .arg(dir.path().join("t.parquet"))
        .args(["--pid", &busy.id().to_string()])
        .output()
        .expect("run numaff");
    let _ = busy.kill();
    let _ = busy.wait();
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{e}");
    assert!(e.contains("0 samples"), "{e}");
    assert!(
        e.contains("no samples: an attached process shows only the first touches")
            && e.contains("--induce soft-dirty"),
        "{e}"
    );
    let cpu: f64 = e
        .lines()
        .find_map(|l| {
            l.split_once("the program ")?
                .1
                .strip_suffix(" s")?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no program cpu time: {e}"));
    assert!(cpu > 0.0, "the busy process's cpu time: {cpu} s\n{e}");
}

/// An unprivileged user attaching to root's process is told it is another user's process, not
/// to lower perf_event_paranoid. Run as root, the test drops to uid 65534 for numaff.
#[test]
fn profile_of_another_users_process_says_whose_it_is() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root, to run numaff as another user");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let mut sleeper = Command::new("sleep")
        .arg("10")
        .spawn()
        .expect("start sleep");
    let mut cmd = Command::new(cargo_bin("numaff"));
    cmd.args(["profile", "--induce", "off", "--duration", "1s", "-o"])
        .arg(dir.path().join("t.parquet"))
        .args(["--pid", &sleeper.id().to_string()]);
    // SAFETY: setgid and setuid are async-signal-safe; nothing else runs in the child.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setgid(65534) != 0 || libc::setuid(65534) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().expect("run numaff");
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{e}");
    assert!(e.contains("another user (uid 0)"), "{e}");
    assert!(!e.contains("set it to 2 or lower"), "{e}");
}

/// Sampling overhead: `--sample-period 8` samples one first touch in 8, each still from
/// the thread that touched the page, and the trace records the period and how many faults there
/// were.
#[test]
fn sample_period_samples_one_fault_in_n() {
    if !perf_allowed() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(prog) = compile(dir.path(), "touch4") else {
        return;
    };
    let trace = dir.path().join("t.parquet");
    let out = Command::new(cargo_bin("numaff"))
        .args(["profile", "--induce", "off", "--sample-period", "8", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(&prog)
        .output()
        .expect("run numaff");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stderr.contains("rate: one fault in 8 (period 8)"),
        "the sampler states its rate: {stderr}"
    );
    assert!(stderr.contains("faults (one in 8), 0 lost"), "{stderr}");
    let bufs = buffers(&stdout);
    let reader = TraceReader::open(&trace).expect("open trace");
    let rates = reader.meta().rates.clone();
    assert_eq!(rates.get("period"), Some(&8.0));
    let faults = rates.get("faults").copied().unwrap_or(0.0);
    assert!(faults >= 4.0 * 4096.0, "{faults} faults counted");
    let samples = reader.read_all().expect("read trace");
    // 4096 first touches, one in 8 sampled: 512, give or take the phase of each cpu's event and
    // the slack of the every-fault test.
    assert_samples_per_buffer(&samples, &bufs, 480..=540);
    // The analysis says the trace is a one-in-8 sample.
    let out = Command::new(cargo_bin("numaff"))
        .arg("analyze")
        .arg(&trace)
        .output()
        .expect("run numaff analyze");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("sampler page-faults, one fault in 8"),
        "{text}"
    );
}

/// `numaff profile --import`: `perf script` text to a trace that `numaff analyze` reads; a bad
/// line is an error naming the line, and no trace is left behind.
#[test]
fn import_turns_perf_script_text_into_a_trace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = dir.path().join("perf.txt");
    // Two threads fault on the same 256-byte blocks, on cpu 0 (every machine has one).
    let mut lines = String::from("# perf script -F comm,pid,tid,cpu,time,event,addr\n");
    for i in 0..20u64 {
        let tid = 101 + i % 2;
        lines.push_str(&format!(
            "  worker {tid} 100/{tid} [000] 50.{:06}: page-faults:u:  {:x}\n",
            i + 1,
            0x7f00_0000_0000u64 + (i / 2) * 4096
        ));
    }
    std::fs::write(&text, &lines).expect("write perf.txt");
    let trace = dir.path().join("t.parquet");
    let out = Command::new(cargo_bin("numaff"))
        .args(["profile", "--import"])
        .arg(&text)
        .arg("-o")
        .arg(&trace)
        .output()
        .expect("run numaff");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("imported 20 samples of 2 threads"),
        "{stdout}"
    );
    let reader = TraceReader::open(&trace).expect("trace opens");
    assert_eq!(reader.meta().sampler.as_deref(), Some("perf-script"));
    assert_eq!(
        reader.meta().thread_names.get(&102).map(String::as_str),
        Some("worker 102")
    );
    let samples = reader.read_all().expect("trace reads");
    assert_eq!(samples.len(), 20);
    assert_eq!(samples[1].time_ns, 50_000_002_000);
    assert_eq!(samples[3].addr, 0x7f00_0000_1000);
    let out = Command::new(cargo_bin("numaff"))
        .args(["analyze", "--json"])
        .arg(&trace)
        .output()
        .expect("run numaff analyze");
    assert!(out.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(doc["threads"].as_array().map(Vec::len), Some(2));

    // Handing the text to analyze says to import it.
    let out = Command::new(cargo_bin("numaff"))
        .arg("analyze")
        .arg(&text)
        .output()
        .expect("run numaff analyze");
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("numaff profile --import"), "{e}");

    // A bad line: the error names it; nothing is written.
    std::fs::write(
        &text,
        format!("{lines}  worker 101 100/101 [000] 50.5: page-faults:u:\n"),
    )
    .expect("write perf.txt");
    let bad = dir.path().join("bad.parquet");
    let out = Command::new(cargo_bin("numaff"))
        .args(["profile", "--import"])
        .arg(&text)
        .arg("-o")
        .arg(&bad)
        .output()
        .expect("run numaff");
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("line 22: no data address"), "{e}");
    assert!(!bad.exists());
    assert_eq!(
        std::fs::read_dir(dir.path()).expect("dir").count(),
        2,
        "only perf.txt and t.parquet: no temporary file left"
    );
}

#[test]
fn the_program_gets_numaffs_environment_and_samples_name_real_cpus() {
    if !perf_allowed() {
        return;
    }
    // numaff sets hwloc's plugin list for its own discovery only (it loads no I/O plugins, to
    // start faster): the program must see the environment numaff was given.
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = dir.path().join("t.parquet");
    let run = |given: Option<&str>| {
        let mut cmd = Command::new(cargo_bin("numaff"));
        match given {
            Some(v) => cmd.env("HWLOC_PLUGINS_BLACKLIST", v),
            None => cmd.env_remove("HWLOC_PLUGINS_BLACKLIST"),
        };
        let out = cmd
            .args(["profile", "--induce", "off", "-o"])
            .arg(&trace)
            .args(["--", "sh", "-c", "env; head -c 4000000 /dev/zero | wc -c"])
            .output()
            .expect("run numaff");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{stdout}");
        stdout
    };
    let stdout = run(Some("given_by_the_user"));
    assert!(
        stdout.contains("HWLOC_PLUGINS_BLACKLIST=given_by_the_user"),
        "{stdout}"
    );
    let stdout = run(None);
    assert!(!stdout.contains("HWLOC_PLUGINS_BLACKLIST"), "{stdout}");
    // The cpu of a sample comes from the ring it was read from: every one must be a cpu of this
    // machine.
    let samples = TraceReader::open(&trace)
        .expect("open trace")
        .read_all()
        .expect("read trace");
    assert!(samples.len() > 100, "{} samples", samples.len());
    // SAFETY: sysconf has no memory-safety preconditions.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(1) as u32;
    assert!(samples.iter().all(|s| s.cpu < cpus), "a cpu out of range");
}

/// With transparent huge pages a first touch faults once per 2 MiB: numaff says so at start, watches
/// the program's huge pages, records `thp_mode` and `thp_bytes_max` in the trace and reports them,
/// and `numaff analyze` repeats it.
#[test]
fn transparent_huge_pages_are_reported_and_recorded() {
    if !perf_allowed() {
        eprintln!("skipped: perf_event_paranoid > 2 and not root");
        return;
    }
    let mode =
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    if mode.is_empty() || mode.contains("[never]") {
        eprintln!("skipped: transparent huge pages are off here ({mode:?})");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(prog) = compile(dir.path(), "thp") else {
        eprintln!("skipped: no C compiler");
        return;
    };
    let trace = dir.path().join("t.parquet");
    let out = Command::new(cargo_bin("numaff"))
        .args(["profile", "--induce", "off", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(&prog)
        .output()
        .expect("run numaff");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "numaff failed: {stdout}\n{stderr}");
    assert!(
        stderr.contains("transparent huge pages: ") && stderr.contains("once per 2 MiB"),
        "THP mode said at start: {stderr}"
    );
    let line = stdout
        .lines()
        .find(|l| l.starts_with("BUF "))
        .expect("BUF line");
    let f: Vec<u64> = line[4..]
        .split(' ')
        .map(|x| x.parse().expect("number"))
        .collect();
    let given_kb: u64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("THP_KB "))
        .and_then(|v| v.trim().parse().ok())
        .expect("THP_KB line");
    let reader = TraceReader::open(&trace).expect("open trace");
    let rates = reader.meta().rates.clone();
    let expected_mode = if mode.contains("[always]") { 2.0 } else { 1.0 };
    assert_eq!(rates.get("thp_mode"), Some(&expected_mode), "{rates:?}");
    let thp_bytes = rates.get("thp_bytes_max").copied().unwrap_or(0.0);
    let samples = reader.read_all().expect("read trace");
    let in_buf = samples
        .iter()
        .filter(|s| (f[0]..f[1]).contains(&s.addr))
        .count();
    if given_kb < 4096 {
        // A fragmented host gave (almost) no huge pages: then every 4 KiB page faults, and numaff
        // must not claim more huge-page memory than the process had.
        eprintln!("note: the kernel gave only {given_kb} kB of huge pages here");
        assert!(in_buf >= 1024, "{in_buf} samples in the buffer");
        assert!(
            thp_bytes <= (given_kb * 1024) as f64,
            "thp_bytes_max {thp_bytes}"
        );
        return;
    }
    // 8 MiB = 4 huge pages (2048 base pages): a handful of faults, not 2048.
    assert!(
        (1..=64).contains(&in_buf),
        "{in_buf} samples in the huge-page buffer"
    );
    assert!(
        thp_bytes >= (4u64 << 20) as f64 && thp_bytes <= (given_kb * 1024) as f64 + 8e6,
        "thp_bytes_max {thp_bytes}, the process had {given_kb} kB"
    );
    assert!(
        stderr.contains("MiB of the program's memory") && stderr.contains("huge pages"),
        "{stderr}"
    );
    let out = Command::new(cargo_bin("numaff"))
        .arg("analyze")
        .arg(&trace)
        .output()
        .expect("run numaff analyze");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("transparent huge pages: up to"), "{text}");
}
