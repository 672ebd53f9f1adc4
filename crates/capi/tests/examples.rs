//! examples/: the CG-like (irregular) and 3-D stencil (regular) examples build through
//! examples/Makefile against a `make install`ed libnumaff (pkg-config); MApp (the transform behind
//! `numaff mapp`) rewrites the large static arrays of both plain examples; and the plain, libnumaff
//! and MApp versions all print exactly the same results (run here).
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::Command;

use numaff_mapp::Policy;

/// Problem sizes of the runs here (argv): small, so the test is quick; the MApp versions still
/// allocate and place their full static arrays.
const CG_ARGS: [&str; 2] = ["65536", "10"];
const STENCIL_ARGS: [&str; 2] = ["64", "10"];

fn run_example(exe: &Path, args: &[&str], threads: &str) -> String {
    common::run(
        Command::new(exe)
            .args(args)
            .env("OMP_NUM_THREADS", threads)
            .env_remove("EXAMPLES_PLACEMENT"),
    )
}

#[test]
fn examples_plain_libnumaff_and_mapp_versions_print_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("prefix");
    common::make_install(&prefix);

    // MApp on both plain examples for two machines: cyclic on minas-opteron (NUMA factor <= 1.5,
    // >= 2 links per node; largest cache 2 MiB) and bind_block on kmaf-opteron (factor 2.3;
    // largest cache 6 MiB, so the 4 MiB rowptr stays static there).
    let cases = [
        (
            "minas-opteron",
            Policy::Cyclic,
            vec!["val", "col", "rowptr", "x", "r", "p", "q"],
        ),
        (
            "kmaf-opteron",
            Policy::BindBlock,
            vec!["val", "col", "x", "r", "p", "q"],
        ),
    ];
    let mut outputs: Vec<(String, String, String)> = Vec::new(); // (example, version, output)
    for (machine, policy, cg_arrays) in &cases {
        let build = dir.path().join(machine);
        let cg = common::mapp_example("cg", machine, &build);
        assert_eq!(cg.decision.policy, *policy, "{}", cg.decision.reason);
        assert_eq!(common::rewritten(&cg), *cg_arrays, "{machine}");
        let part = cg.arrays.iter().find(|a| a.name == "part").unwrap();
        assert!(
            !part.rewritten && part.reason.contains("small"),
            "{}",
            part.reason
        );
        let st = common::mapp_example("stencil", machine, &build);
        assert_eq!(st.decision.policy, *policy);
        assert_eq!(common::rewritten(&st), ["u", "v"], "{machine}");
        let text = std::fs::read_to_string(build.join("stencil_mapp.c")).unwrap();
        assert!(
            text.contains("static double (*u)[NMAX][NMAX];"),
            "{machine}: {text}"
        );
        assert!(
            text.contains(&format!("(void){}(u);", policy.function())),
            "{text}"
        );

        // Plain and libnumaff versions through the Makefile, then the MApp outputs, all with
        // gcc -std=c99 -Wall -Wextra -Werror -fopenmp.
        common::make_examples(&prefix, &build, &["all", "mapp"]);
        for (example, args) in [("cg", &CG_ARGS[..]), ("stencil", &STENCIL_ARGS[..])] {
            for version in ["", "_numaff", "_mapp"] {
                let exe = build.join(format!("{example}{version}"));
                let out = run_example(&exe, args, "2");
                outputs.push((example.into(), format!("{machine}{version}"), out));
            }
        }
        // The Makefile's own check (runs every version built, compares with cmp).
        let check = common::make_examples(&prefix, &build, &["check"]);
        assert!(
            check.contains("stencil_mapp 64 10: same output as stencil"),
            "{check}"
        );
    }

    // One thread and two give the same results (fixed-order sums), so the comparison below does
    // not depend on how many cpus a machine has.
    let build = dir.path().join("minas-opteron");
    for (example, args) in [("cg", &CG_ARGS[..]), ("stencil", &STENCIL_ARGS[..])] {
        let one = run_example(&build.join(example), args, "1");
        let plain = &outputs
            .iter()
            .find(|(e, v, _)| e == example && v == "minas-opteron")
            .unwrap()
            .2;
        assert_eq!(&one, plain, "{example}: 1 vs 2 threads");
    }

    for example in ["cg", "stencil"] {
        let mine: Vec<&(String, String, String)> =
            outputs.iter().filter(|(e, _, _)| e == example).collect();
        assert_eq!(mine.len(), 6);
        let reference = &mine[0].2;
        let first = if example == "cg" {
            "cg: n 65536 nnz "
        } else {
            "stencil: n 64 steps 10\n"
        };
        assert!(reference.starts_with(first), "{reference}");
        assert_eq!(
            reference.lines().count(),
            if example == "cg" { 13 } else { 5 }
        );
        for (_, version, out) in &mine[1..] {
            assert_eq!(
                out, reference,
                "{example}: {version} differs from the plain version"
            );
        }
    }
}

#[test]
fn examples_refuse_bad_sizes_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("prefix");
    common::make_install(&prefix);
    let build = dir.path().join("build");
    common::make_examples(&prefix, &build, &["all"]);
    for (exe, args, says) in [
        ("cg", vec!["10"], "n must be an integer from 64 to 1048576"),
        (
            "cg_numaff",
            vec!["12x"],
            "n must be an integer from 64 to 1048576",
        ),
        ("cg", vec!["4096", "0"], "iters must be"),
        ("stencil", vec!["169"], "n must be an integer from 3 to 168"),
        ("stencil_numaff", vec!["8", "-1"], "steps must be"),
    ] {
        let out = Command::new(build.join(exe)).args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{exe} {args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(says) && err.starts_with(exe),
            "{exe} {args:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "{exe} {args:?}");
    }
}
