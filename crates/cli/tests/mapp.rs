//! `numaff mapp` as a user runs it: the report (text and JSON), the transformed 004 Fig. 3.2-like
//! program built against the installed libnumaff with gcc -fopenmp and giving the original's output,
//! the policy per machine, and errors that leave no output file.
#![allow(clippy::unwrap_used)] // helpers of tests

use std::path::{Path, PathBuf};
use std::process::Command as Std;

mod common;
use common::numaff;
use predicates::prelude::*;

fn fig32() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../mapp/tests/c/fig32.c")
}

/// A temp dir holding fig32.c, so reports name it by a relative path.
fn workdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(fig32(), dir.path().join("fig32.c")).unwrap();
    dir
}

fn run(cmd: &mut Std) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn mapp_report_on_minas_opteron_snapshot() {
    let dir = workdir();
    let out = numaff()
        .current_dir(dir.path())
        .args([
            "mapp",
            "fig32.c",
            "-o",
            "out.c",
            "--machine",
            "minas-opteron",
            "--report",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    insta::assert_snapshot!(String::from_utf8(out.stdout).unwrap());
    let transformed = std::fs::read_to_string(dir.path().join("out.c")).unwrap();
    insta::assert_snapshot!("mapp_fig32_transformed_minas_opteron", transformed);
}

#[test]
fn mapp_json_and_policy_per_machine() {
    let dir = workdir();
    for (machine, policy, rewritten) in [
        ("minas-opteron", "cyclic", vec!["vel", "vxy", "tem"]),
        ("minas-altix", "cyclic", vec!["tem"]),
        ("kmaf-opteron", "bind_block", vec!["tem"]),
    ] {
        let out = numaff()
            .current_dir(dir.path())
            .args([
                "mapp",
                "fig32.c",
                "-o",
                "out.c",
                "--json",
                "--machine",
                machine,
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["decision"]["policy"], policy, "{machine}: {v}");
        let names: Vec<&str> = v["arrays"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["rewritten"] == true)
            .map(|a| a["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, rewritten, "{machine}");
        let func = format!("numaff_{policy}(tem)");
        let text = std::fs::read_to_string(dir.path().join("out.c")).unwrap();
        assert!(text.contains(&func), "{machine}: {text}");
    }
}

#[test]
fn mapp_syntax_error_names_the_line_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("bad.c"),
        "#include <stdio.h>\nstatic double a[1 << 20];\nint main(void) {\n  a[0] = 1.0 +;\n  return 0;\n}\n",
    )
    .unwrap();
    numaff()
        .current_dir(dir.path())
        .args(["mapp", "bad.c", "-o", "out.c", "--machine", "minas-opteron"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("bad.c:4:").and(predicate::str::contains("syntax error")));
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 1, "only bad.c should be there: {left:?}");
}

#[test]
fn mapp_without_eligible_arrays_copies_the_file_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let src = "#include <stdio.h>\nstatic int small[16];\nint main(void) { small[1] = 2; printf(\"%d\\n\", small[1]); return 0; }\n";
    std::fs::write(dir.path().join("s.c"), src).unwrap();
    numaff()
        .current_dir(dir.path())
        .args(["mapp", "s.c", "-o", "o.c", "--machine", "minas-opteron"])
        .assert()
        .success()
        .stdout(predicate::str::contains("no eligible array"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("o.c")).unwrap(),
        src
    );
}

/// `make -C crates/capi install PREFIX=prefix` with the test's own target dir and profile.
fn make_install(prefix: &Path) {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().unwrap().parent().unwrap(); // target/debug
    let target_dir = profile_dir.parent().unwrap();
    let profile = profile_dir.file_name().unwrap().to_str().unwrap();
    run(Std::new("make")
        .arg("-C")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../capi"))
        .arg("install")
        .arg(format!("PREFIX={}", prefix.display()))
        .arg(format!("PROFILE={profile}"))
        .env("CARGO_TARGET_DIR", target_dir));
}

#[test]
fn mapp_output_builds_against_installed_libnumaff_and_prints_the_same() {
    let dir = workdir();
    let prefix = dir.path().join("prefix");
    make_install(&prefix);
    numaff()
        .current_dir(dir.path())
        .args([
            "mapp",
            "fig32.c",
            "-o",
            "fig32_numa.c",
            "--machine",
            "minas-opteron",
        ])
        .assert()
        .success();
    let pc = prefix.join("lib/pkgconfig");
    let flags = run(Std::new("pkg-config")
        .args(["--cflags", "--libs", "numaff"])
        .env("PKG_CONFIG_PATH", &pc));
    let mut outputs = Vec::new();
    for (src, exe) in [("fig32.c", "plain"), ("fig32_numa.c", "numa")] {
        run(Std::new("gcc")
            .current_dir(dir.path())
            .args([
                "-std=c99", "-O1", "-Wall", "-Werror", "-fopenmp", src, "-o", exe,
            ])
            .args(flags.split_whitespace()));
        outputs.push(run(Std::new(dir.path().join(exe))
            .env("OMP_NUM_THREADS", "2")
            .env("LD_LIBRARY_PATH", prefix.join("lib"))));
    }
    assert!(outputs[0].starts_with("sum "), "{}", outputs[0]);
    assert_eq!(outputs[0], outputs[1]);
}

/// `--report`: without it one summary line, with it every array with its line, size
/// and reason; without -o the code goes to stdout and the report to stderr.
#[test]
fn mapp_report_option_lists_every_array_with_its_reason() {
    let dir = workdir();
    let base = ["mapp", "fig32.c", "--machine", "minas-opteron"];
    let out = numaff()
        .current_dir(dir.path())
        .args(base)
        .args(["-o", "a.c"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text,
        "fig32.c: 3 arrays rewritten (cyclic), 1 kept (--report says why)\n"
    );
    let out = numaff()
        .current_dir(dir.path())
        .args(base)
        .arg("--report")
        .output()
        .unwrap();
    assert!(out.status.success());
    let code = String::from_utf8(out.stdout).unwrap();
    let report = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        code,
        std::fs::read_to_string(dir.path().join("a.c")).unwrap()
    );
    assert!(report.starts_with("policy: cyclic ("), "{report}");
    assert!(
        report.contains("fig32.c:9: xux double[64] (512 B): kept: 512 bytes < 2097152 bytes"),
        "{report}"
    );
    assert_eq!(
        report
            .lines()
            .filter(|l| l.contains(": rewritten, cyclic:"))
            .count(),
        3
    );
}

/// Bad input, through the command: each gets a message naming the file and line (the
/// 50 MB file: its size) and a failure status, and no output file is left.
#[test]
fn mapp_bad_inputs_name_the_line_and_leave_no_output_file() {
    let main = "int main(void) { ok[0] = 1; return 0; }\n";
    let head = "#include <stdio.h>\nstatic double ok[1 << 20];\n";
    let cases: Vec<(String, String, &str)> = vec![
        (
            "syntax".into(),
            format!("{head}int main(void) {{\n  ok[0] = 1.0 +;\n  return 0;\n}}\n"),
            "bad.c:4:",
        ),
        (
            "unknown size".into(),
            format!("{head}static double unk[];\n{main}"),
            "bad.c:3: array `unk`: unknown size ([]) and no initializer",
        ),
        (
            "vla".into(),
            format!("{head}int n = 8;\ndouble v[n][n];\n{main}"),
            "bad.c:4: array `v`: variable-length array (`n` is a variable)",
        ),
        (
            "extern".into(),
            format!("{head}extern float e[1 << 22];\n{main}"),
            "bad.c:3: array `e`: extern array of 16777216 bytes",
        ),
        (
            "no main".into(),
            "#include <stdio.h>\n\ndouble big[1 << 20];\nvoid f(void) { big[0] = 1; }\n".into(),
            "bad.c:3: no main function with a body",
        ),
    ];
    for (what, src, says) in cases {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("bad.c"), &src).unwrap();
        numaff()
            .current_dir(dir.path())
            .args(["mapp", "bad.c", "-o", "out.c", "--machine", "minas-opteron"])
            .assert()
            .failure()
            .stderr(predicate::str::contains(says).and(predicate::str::contains("panick").not()));
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(
            left.len(),
            1,
            "{what}: only bad.c should be there: {left:?}"
        );
        // Without -o nothing goes to stdout either.
        numaff()
            .current_dir(dir.path())
            .args(["mapp", "bad.c", "--machine", "minas-opteron"])
            .assert()
            .failure()
            .stdout(predicate::str::is_empty());
    }

    // A 50 MB C file: refused before it is read, with its size and the limit.
    let dir = tempfile::tempdir().unwrap();
    let mut src = String::from("int main(void) { return 0; }\n");
    let line = "/* padding padding padding padding padding padding padding padding */\n";
    while src.len() < 50_000_000 {
        src.push_str(line);
    }
    std::fs::write(dir.path().join("huge.c"), &src).unwrap();
    numaff()
        .current_dir(dir.path())
        .args([
            "mapp",
            "huge.c",
            "-o",
            "out.c",
            "--machine",
            "minas-opteron",
        ])
        .assert()
        .failure()
        .stderr(predicate::str::contains(format!(
            "huge.c: {} bytes; MApp takes C files up to 16777216 bytes",
            src.len()
        )));
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 1, "only huge.c should be there: {left:?}");
}

/// The text report keeps one line per array: a declaration whose size spans lines, or runs to
/// 200 KB (100 000 nested parentheses), is shown flattened and cut; `--json` has it whole.
#[test]
fn mapp_report_shows_each_array_on_one_short_line() {
    let dir = tempfile::tempdir().unwrap();
    let deep = format!("{}1 << 24{}", "(".repeat(100_000), ")".repeat(100_000));
    let src = format!(
        "#define N 1024\ndouble a[N *\n    N];\ndouble b[{deep}];\nint main(void) {{ a[0] = b[0]; return 0; }}\n"
    );
    std::fs::write(dir.path().join("w.c"), &src).unwrap();
    // With -o the report (or the JSON) is on stdout.
    let mapp = |flag: &str| {
        numaff()
            .current_dir(dir.path())
            .args([
                "mapp",
                "w.c",
                "--machine",
                "kmaf-sim-4x2",
                "-o",
                "out.c",
                flag,
            ])
            .output()
            .unwrap()
    };
    let out = mapp("--report");
    assert!(out.status.success());
    let report = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = report.lines().filter(|l| l.starts_with("w.c:")).collect();
    assert!(
        lines[0].starts_with("w.c:2: a double[N * N] (8.0 MiB): rewritten"),
        "{report}"
    );
    assert!(lines[1].starts_with("w.c:4: b double[((((("), "{report}");
    assert!(lines[1].contains("…"), "{}", lines[1]);
    assert!(lines[1].contains("nests parentheses"), "{}", lines[1]);
    assert!(lines.iter().all(|l| l.chars().count() < 400), "{report}");
    let json = mapp("--json");
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let declared = doc["arrays"][1]["declared"].as_str().unwrap();
    assert_eq!(
        declared.len(),
        "double[]".len() + deep.len(),
        "whole in JSON"
    );
}
