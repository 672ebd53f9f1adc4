//! Output files (`-o`, `--export`, `--html`): a symlink is written through, a device is written in
//! place, a bad path fails before any work and nothing partial or temporary is left behind.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::numaff;

/// A 2-task communication matrix in `dir`.
fn matrix(dir: &Path) -> String {
    let m = dir.join("m.csv");
    std::fs::write(&m, "0,1\n1,0\n").expect("write the matrix");
    m.to_string_lossy().into_owned()
}

/// `numaff map --algo compact` of a 2-task matrix to `out`.
fn map_to(m: &str, out: &Path) -> assert_cmd::assert::Assert {
    numaff()
        .args(["map", "--algo", "compact", "--matrix", m])
        .args(["--machine", "kmaf-sim-4x2", "-o"])
        .arg(out)
        .assert()
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("read the directory")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    v.sort();
    v
}

#[test]
fn output_to_a_symlink_writes_through_to_its_target() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = matrix(dir.path());
    std::fs::write(dir.path().join("real.toml"), "old").expect("write");
    std::os::unix::fs::symlink("real.toml", dir.path().join("link")).expect("symlink");
    map_to(&m, &dir.path().join("link")).success();
    let link = std::fs::symlink_metadata(dir.path().join("link")).expect("the link");
    assert!(link.file_type().is_symlink(), "the link was replaced");
    let text = std::fs::read_to_string(dir.path().join("real.toml")).expect("the target");
    assert!(text.contains("placement"), "{text}");
    assert_eq!(names(dir.path()), ["link", "m.csv", "real.toml"]);
}

#[test]
fn output_to_a_character_device_keeps_it_a_device() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let m = matrix(dir.path());
    let null = dir.path().join("null");
    // A node like /dev/null (1, 3); making one needs root (CAP_MKNOD).
    let made = std::process::Command::new("mknod")
        .arg(&null)
        .args(["c", "1", "3"])
        .status()
        .is_ok_and(|s| s.success());
    if !made {
        eprintln!("skipped: cannot make a device node here (not root?)");
        return;
    }
    map_to(&m, &null).success();
    let meta = std::fs::symlink_metadata(&null).expect("the node");
    assert!(meta.file_type().is_char_device(), "the device was replaced");
    assert_eq!(names(dir.path()), ["m.csv", "null"]);
}

#[test]
fn output_to_a_directory_fails_fast_and_leaves_no_temporary() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = matrix(dir.path());
    let target = dir.path().join("sub");
    std::fs::create_dir(&target).expect("mkdir");
    map_to(&m, &target)
        .failure()
        .stderr(predicates::str::contains("is a directory"));
    assert_eq!(names(dir.path()), ["m.csv", "sub"]);
    assert!(names(&target).is_empty());
}

#[test]
fn output_in_a_missing_directory_fails_before_any_work() {
    // Measuring this machine takes seconds; the path is refused before it starts.
    let began = Instant::now();
    numaff()
        .args(["topo", "--measure", "--export"])
        .arg("/nonexistent/x.toml")
        .assert()
        .failure()
        .stderr(predicates::str::contains("/nonexistent does not exist"));
    assert!(
        began.elapsed() < Duration::from_secs(2),
        "{:?}",
        began.elapsed()
    );
}

#[test]
fn a_failed_write_leaves_neither_the_output_nor_a_temporary() {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let csv = dir.path().join("t.csv");
    let mut text = String::from("time_ns,pid,tid,cpu,node,addr,kind,latency_ns,data_source\n");
    for i in 0..100 {
        text += &format!("{i}000,1,1,0,0,{},fault,,\n", 4096 * (i + 1));
    }
    std::fs::write(&csv, text).expect("write the trace");
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("numaff"));
    cmd.args(["profile", "--import"])
        .arg(&csv)
        .arg("-o")
        .arg(dir.path().join("t.parquet"));
    // Files of at most 256 bytes (the Parquet trace is larger): writes fail as
    // on a full disk.
    // SAFETY: setrlimit and signal are async-signal-safe; nothing else runs in the child.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let lim = libc::rlimit {
                rlim_cur: 256,
                rlim_max: 256,
            };
            libc::setrlimit(libc::RLIMIT_FSIZE, &lim);
            Ok(())
        });
    }
    let out = cmd.output().expect("run numaff");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("cannot write trace"), "{stderr}");
    assert!(!stderr.contains("not a readable"), "{stderr}");
    assert_eq!(names(dir.path()), ["t.csv"]);
}

#[test]
fn html_report_to_a_bad_place_leaves_no_figure_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = dir.path().join("msgs.csv");
    std::fs::write(
        &trace,
        "time_ns,sender,receiver,bytes\n1000,0,1,64\n2000,1,0,64\n3000,0,1,64\n",
    )
    .expect("write the trace");
    // The report's name is a directory: refused before the figures are drawn beside it.
    std::fs::create_dir(dir.path().join("r.html")).expect("mkdir");
    numaff()
        .arg("analyze")
        .arg(&trace)
        .arg("--html")
        .arg(dir.path().join("r.html"))
        .assert()
        .failure()
        .stderr(predicates::str::contains("is a directory"));
    assert_eq!(names(dir.path()), ["msgs.csv", "r.html"]);
    // A report in a missing directory: the same, before the trace is read.
    numaff()
        .arg("analyze")
        .arg(&trace)
        .arg("--html")
        .arg(dir.path().join("no/r.html"))
        .assert()
        .failure()
        .stderr(predicates::str::contains("does not exist"));
    assert_eq!(names(dir.path()), ["msgs.csv", "r.html"]);
}
