//! `make install PREFIX=DIR` lays out lib/, include/ and lib/pkgconfig/ (and the CMake package), and
//! a C program builds against the installed library with `pkg-config --cflags --libs numaff` and
//! with CMake's find_package(numaff), and runs.
#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;

use common::{make_install, run};

const PROGRAM: &str = r#"
#include <stdio.h>
#include <numaff.h>
int main(void) {
  if (numaff_init() != 0) { printf("init: %s\n", numaff_last_error()); return 1; }
  double *a = numaff_alloc_1d(1 << 16, sizeof(double));
  int rc = numaff_cyclic(a);
  printf("installed %s cyclic %d nodes %d\n", numaff_version(), rc, numaff_node_count());
  numaff_free(a);
  return numaff_final();
}
"#;

#[test]
fn make_install_then_build_with_pkg_config_static_and_cmake() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("prefix");
    make_install(&prefix);
    for f in [
        "include/numaff.h",
        "lib/libnumaff.so",
        "lib/libnumaff.so.0",
        "lib/libnumaff.so.0.1.0",
        "lib/libnumaff.a",
        "lib/pkgconfig/numaff.pc",
        "lib/cmake/numaff/numaffConfig.cmake",
        "lib/cmake/numaff/numaffConfigVersion.cmake",
    ] {
        assert!(prefix.join(f).exists(), "{f} not installed");
    }

    // The same layout from the repository root's `make install PREFIX=DIR`.
    let root_prefix = dir.path().join("root-prefix");
    let profile = common::profile_dir();
    run(Command::new("make")
        .arg("-C")
        .arg(common::crate_dir().join("../.."))
        .arg("install")
        .arg(format!("PREFIX={}", root_prefix.display()))
        .arg(format!(
            "PROFILE={}",
            profile.file_name().unwrap().to_str().unwrap()
        ))
        .env("CARGO_TARGET_DIR", profile.parent().unwrap().as_os_str()));
    for f in [
        "include/numaff.h",
        "lib/libnumaff.so",
        "lib/libnumaff.a",
        "lib/pkgconfig/numaff.pc",
        "lib/cmake/numaff/numaffConfig.cmake",
    ] {
        assert!(
            root_prefix.join(f).exists(),
            "{f} not installed by the root make"
        );
    }

    // pkg-config
    let src = dir.path().join("prog.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let pc_path = prefix.join("lib/pkgconfig");
    let flags = run(Command::new("pkg-config")
        .args(["--cflags", "--libs", "numaff"])
        .env("PKG_CONFIG_PATH", &pc_path));
    assert!(flags.contains("-lnumaff"), "{flags}");
    let version = run(Command::new("pkg-config")
        .args(["--modversion", "numaff"])
        .env("PKG_CONFIG_PATH", &pc_path));
    assert_eq!(version.trim(), "0.1.0");
    let exe = dir.path().join("prog");
    let mut cc = Command::new("gcc");
    cc.args(["-std=c99", "-Wall", "-Werror"])
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .args(flags.split_whitespace());
    run(&mut cc);
    let out = run(Command::new(&exe).env("LD_LIBRARY_PATH", prefix.join("lib")));
    assert!(out.contains("installed 0.1.0 cyclic 0"), "{out}");

    // The static library: libnumaff.a with the libraries `pkg-config --static` adds
    // (Libs.private); the program then needs no libnumaff.so at run time.
    let private = run(Command::new("pkg-config")
        .args(["--static", "--libs-only-l", "numaff"])
        .env("PKG_CONFIG_PATH", &pc_path));
    let static_exe = dir.path().join("prog_static");
    let mut cc = Command::new("gcc");
    cc.args(["-std=c99", "-Wall", "-Werror"])
        .arg(format!("-I{}", prefix.join("include").display()))
        .arg(&src)
        .arg("-o")
        .arg(&static_exe)
        .arg(prefix.join("lib/libnumaff.a"))
        .args(private.split_whitespace().filter(|f| *f != "-lnumaff"));
    run(&mut cc);
    let ldd = run(Command::new("ldd").arg(&static_exe));
    assert!(!ldd.contains("libnumaff"), "{ldd}");
    let out = run(&mut Command::new(&static_exe));
    assert!(out.contains("installed 0.1.0 cyclic 0"), "{out}");

    // CMake: find_package(numaff 0.1 CONFIG) and the imported target.
    let proj = dir.path().join("cmake");
    std::fs::create_dir_all(&proj).unwrap();
    std::fs::write(proj.join("prog.c"), PROGRAM).unwrap();
    std::fs::write(
        proj.join("CMakeLists.txt"),
        "cmake_minimum_required(VERSION 3.13)\nproject(p C)\n\
         find_package(numaff 0.1 REQUIRED CONFIG)\n\
         add_executable(prog prog.c)\ntarget_link_libraries(prog numaff::numaff)\n",
    )
    .unwrap();
    let build = proj.join("build");
    run(Command::new("cmake")
        .arg("-S")
        .arg(&proj)
        .arg("-B")
        .arg(&build)
        .arg(format!("-DCMAKE_PREFIX_PATH={}", prefix.display())));
    run(Command::new("cmake").arg("--build").arg(&build));
    let out = run(Command::new(build.join("prog")).env("LD_LIBRARY_PATH", prefix.join("lib")));
    assert!(out.contains("installed 0.1.0 cyclic 0"), "{out}");
}

/// Without installing: `cargo build -p numaff-capi` (here through `make -C crates/capi build`)
/// leaves target/<profile>/libnumaff.so with its soname link libnumaff.so.0 beside it, so a
/// program linked with `-L target/<profile> -lnumaff` runs with LD_LIBRARY_PATH=target/<profile>,
/// as the README's C API section says.
#[test]
fn a_program_linked_against_the_build_tree_runs_with_ld_library_path() {
    let profile = common::profile_dir();
    run(Command::new("make")
        .arg("-C")
        .arg(common::crate_dir())
        .arg("build")
        .arg(format!(
            "PROFILE={}",
            profile.file_name().unwrap().to_str().unwrap()
        ))
        .env("CARGO_TARGET_DIR", profile.parent().unwrap().as_os_str()));
    let soname = profile.join("libnumaff.so.0");
    assert!(
        soname.exists(),
        "no {} (or it dangles) after the build",
        soname.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("prog.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let exe = dir.path().join("prog");
    run(Command::new("gcc")
        .args(["-std=c99", "-Wall", "-Werror"])
        .arg("-I")
        .arg(common::include_dir())
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .arg(format!("-L{}", profile.display()))
        .arg("-lnumaff"));
    let out = run(Command::new(&exe).env("LD_LIBRARY_PATH", &profile));
    assert!(out.starts_with("installed "), "{out}");
}
