//! Helpers of the libnumaff tests: where the built library is, compiling C against it.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// target/<profile>/deps, where `cargo test` builds libnumaff.so beside the test binary (it is
/// copied up to target/<profile> only by `cargo build`, so the copy there may be stale).
pub fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().to_path_buf();
    assert!(
        dir.join("libnumaff.so").exists(),
        "no libnumaff.so in {}",
        dir.display()
    );
    dir
}

/// target/<profile>.
pub fn profile_dir() -> PathBuf {
    lib_dir().parent().unwrap().to_path_buf()
}

pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn include_dir() -> PathBuf {
    crate_dir().join("include")
}

/// Runs a command, panicking with its output when it fails; returns stdout.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{text}",
        out.status
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Copies the built libnumaff.so into `dir` under its soname too (libnumaff.so.0, which programs
/// linked against it look for), as `make install` lays it out; returns `dir`.
pub fn stage_lib(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let so = lib_dir().join("libnumaff.so");
    for name in ["libnumaff.so", "libnumaff.so.0"] {
        std::fs::copy(&so, dir.join(name)).unwrap();
    }
    dir.to_path_buf()
}

/// Compiles the C program `src` against the built libnumaff.so (staged beside `out` in lib/,
/// rpath set) into `out`.
pub fn compile(src: &Path, out: &Path, extra: &[&str]) {
    let lib = stage_lib(&out.parent().unwrap().join("lib"));
    let mut cmd = Command::new("gcc");
    cmd.args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-O1"])
        .arg("-I")
        .arg(include_dir())
        .arg(src)
        .arg("-o")
        .arg(out)
        .arg(format!("-L{}", lib.display()))
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-lnumaff")
        .args(extra);
    run(&mut cmd);
}

/// `make -C crates/capi install PREFIX=prefix` with the tests' own target dir and profile (the
/// library is already built, so this only copies files).
pub fn make_install(prefix: &Path) {
    let profile = profile_dir();
    let mut make = Command::new("make");
    make.arg("-C")
        .arg(crate_dir())
        .arg("install")
        .arg(format!("PREFIX={}", prefix.display()))
        .arg(format!(
            "PROFILE={}",
            profile.file_name().unwrap().to_str().unwrap()
        ))
        // The test binary's own target dir, wherever CARGO_TARGET_DIR put it.
        .env("CARGO_TARGET_DIR", profile.parent().unwrap().as_os_str());
    run(&mut make);
}

/// The repository's examples/ directory.
pub fn examples_dir() -> PathBuf {
    crate_dir().join("../../examples").canonicalize().unwrap()
}

/// MApp (what `numaff mapp EXAMPLE.c --machine MACHINE -o BUILD/EXAMPLE_mapp.c` runs) on one of
/// the plain examples; returns the report.
pub fn mapp_example(example: &str, machine: &str, build: &Path) -> numaff_mapp::Report {
    let src = std::fs::read_to_string(examples_dir().join(format!("{example}.c"))).unwrap();
    let m = numaff_machine::spec::resolve(machine).unwrap();
    let t = numaff_mapp::transform(&src, &m).unwrap_or_else(|e| panic!("{example}.c: {e}"));
    std::fs::create_dir_all(build).unwrap();
    std::fs::write(build.join(format!("{example}_mapp.c")), &t.output).unwrap();
    t.report
}

/// `make -C examples BUILD=build targets...` against the libnumaff installed under `prefix`
/// (pkg-config through PKG_CONFIG_PATH), C99 with every warning an error. NUMAFF=false: the
/// MApp outputs must already be in `build` (from [`mapp_example`]); make must not regenerate them.
pub fn make_examples(prefix: &Path, build: &Path, targets: &[&str]) -> String {
    run(Command::new("make")
        .arg("-C")
        .arg(examples_dir())
        .arg(format!("BUILD={}", build.display()))
        .arg("CC=gcc")
        .arg("CFLAGS=-std=c99 -O2 -Wall -Wextra -Werror")
        .arg("NUMAFF=false")
        .args(targets)
        .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig")))
}

/// Names of the arrays MApp rewrote.
pub fn rewritten(report: &numaff_mapp::Report) -> Vec<&str> {
    report
        .arrays
        .iter()
        .filter(|a| a.rewritten)
        .map(|a| a.name.as_str())
        .collect()
}
