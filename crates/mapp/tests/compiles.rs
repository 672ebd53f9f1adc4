//! MApp's output compiles whenever its input does: gcc checks the rewritten output of every C
//! file MApp's tests and examples run it on, and of the cases that once broke it.
#![allow(clippy::unwrap_used)]

use numaff_machine::spec::resolve;
use numaff_mapp::transform;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn c_files(dir: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "c"))
        .collect();
    files.sort();
    files
}

/// `gcc -fsyntax-only` on `file`, with numaff.h and the examples' header found; the error text
/// when it fails.
fn gcc_check(file: &Path) -> Result<(), String> {
    let out = Command::new("gcc")
        .args(["-std=gnu11", "-fsyntax-only", "-fopenmp", "-Wall"])
        .arg("-I")
        .arg(root().join("crates/capi/include"))
        .arg("-I")
        .arg(root().join("examples"))
        .arg(file)
        .output()
        .unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// Static initializers that name an array, and thread-local declarations in each spelling gcc
/// takes in C11 (`thread_local` is C23 or <threads.h>).
const CASES: [(&str, &str); 2] = [
    (
        "static_initializer.c",
        "#define N (1 << 20)\nstatic double q[N];\nstatic double *p = q;\n\
         static double r[N];\nstatic double *pr = &r[3];\nstatic double w[N];\nstatic double v[N];\n\
         int main(void) { static double *ps = w; double *pv = v; q[0] = 1.0;\n\
         return (int)(p[0] + pr[0] + ps[0] + pv[0]); }\n",
    ),
    (
        "thread_local.c",
        "#define N (1 << 20)\n_Thread_local double t1[N];\nstatic __thread double t2[N];\n\
         static double plain[N];\n_Thread_local double *tp = plain;\nstatic double big[N];\n\
         int main(void) { static _Thread_local int calls; calls++;\n\
         return (int)(t1[0] + t2[0] + tp[0] + big[0]) + calls; }\n",
    ),
];

#[test]
fn rewritten_output_of_every_fixture_and_example_compiles_with_gcc() {
    if Command::new("gcc").arg("--version").output().is_err() {
        eprintln!("note: gcc not found; MApp's output was not compiled");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut inputs: Vec<(String, String)> = Vec::new();
    for d in [
        "crates/mapp/tests/c",
        "crates/cli/tests/fixtures",
        "examples",
    ] {
        for f in c_files(d) {
            let name = format!(
                "{}_{}",
                d.replace('/', "_"),
                f.file_name().unwrap().to_string_lossy()
            );
            inputs.push((name, std::fs::read_to_string(&f).unwrap()));
        }
    }
    for (name, src) in CASES {
        inputs.push((name.to_string(), src.to_string()));
    }
    // minas-opteron's largest cache is small (2 MiB), so most large arrays are rewritten.
    let machine = resolve("minas-opteron").unwrap();
    let mut changed = Vec::new();
    let mut skipped = Vec::new();
    for (name, src) in &inputs {
        let input = dir.path().join(format!("in_{name}"));
        std::fs::write(&input, src).unwrap();
        if let Err(e) = gcc_check(&input) {
            // Only a header this host lacks (mpi.h) may excuse an input.
            assert!(
                e.contains("No such file or directory"),
                "{name} does not compile as it is:\n{e}"
            );
            eprintln!("note: {name} skipped, its input does not compile here:\n{e}");
            skipped.push(name.clone());
            continue;
        }
        let t = transform(src, &machine).unwrap_or_else(|e| panic!("{name}: {e}"));
        if t.report.changed {
            changed.push(name.clone());
        }
        let output = dir.path().join(format!("out_{name}"));
        std::fs::write(&output, &t.output).unwrap();
        if let Err(e) = gcc_check(&output) {
            panic!(
                "MApp's output for {name} does not compile:\n{e}\n--- output ---\n{}",
                t.output
            );
        }
    }
    assert!(
        skipped.iter().all(|s| s.contains("mpi")),
        "skipped: {skipped:?}"
    );
    for must in [
        "fig32.c",
        "examples_cg.c",
        "examples_stencil.c",
        "static_initializer.c",
        "thread_local.c",
    ] {
        assert!(
            changed.iter().any(|c| c.ends_with(must)),
            "{must} was not rewritten, so its check proves nothing: {changed:?}"
        );
    }
}
