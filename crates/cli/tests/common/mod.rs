//! Helpers shared by the CLI's integration tests: the numaff binary, the fixtures and C test
//! programs, compiling them, and whether perf events may be opened here.

// Each test file uses a part of these.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The `numaff` binary of this build, as an assert_cmd command.
pub fn numaff() -> assert_cmd::Command {
    assert_cmd::Command::cargo_bin("numaff").expect("the numaff binary")
}

/// A file of tests/fixtures.
pub fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// The source of a C test program of tests/profile (`name` without `.c`).
pub fn profile_program(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/profile/{name}.c"))
}

/// Whether perf events may be opened here: as root, or with perf_event_paranoid at most 2.
pub fn perf_allowed() -> bool {
    let p = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok());
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    root || p.is_some_and(|p| p <= 2)
}

/// Runs `compiler flags -o exe src`; why not, when the compiler cannot be run (`install` names
/// what provides it) or fails (with its messages).
pub fn try_compile(
    compiler: &str,
    flags: &[&str],
    src: impl AsRef<Path>,
    exe: &Path,
    install: &str,
) -> Result<(), String> {
    let src = src.as_ref();
    let out = Command::new(compiler)
        .args(flags)
        .arg("-o")
        .arg(exe)
        .arg(src)
        .output()
        .map_err(|e| {
            format!("cannot run {compiler} ({e}); install {install} (scripts/setup.sh)")
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{compiler} {} failed:\n{}",
            src.display(),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// [`try_compile`], panicking with the reason when it fails.
pub fn compile(compiler: &str, flags: &[&str], src: impl AsRef<Path>, exe: &Path, install: &str) {
    if let Err(e) = try_compile(compiler, flags, src, exe, install) {
        panic!("{e}");
    }
}

/// Compiles the C test program `name` of tests/profile with cc and `flags` into `dir`.
pub fn compile_profile_program(dir: &Path, name: &str, flags: &[&str]) -> PathBuf {
    let exe = dir.join(name);
    compile("cc", flags, profile_program(name), &exe, "build-essential");
    exe
}
