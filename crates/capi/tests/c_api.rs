//! libnumaff through its C header on this machine: numaff.h compiles cleanly as C99 and C++ with
//! the required signatures, and a C program exercises every call and error path (tests/c/api.c).
#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;

use common::{compile, include_dir, run};

/// Assigning each entry point to a pointer of the exact type the API specifies fails to compile
/// if a signature differs.
const SIGNATURES: &str = r#"
#include <numaff.h>
int (*p_init)(void) = numaff_init;
int (*p_final)(void) = numaff_final;
void *(*p_alloc_1d)(size_t, size_t) = numaff_alloc_1d;
void *(*p_alloc_2d)(size_t, size_t, size_t) = numaff_alloc_2d;
void *(*p_alloc_3d)(size_t, size_t, size_t, size_t) = numaff_alloc_3d;
int (*p_free)(void *) = numaff_free;
int (*p_cyclic)(void *) = numaff_cyclic;
int (*p_skew)(void *) = numaff_skew_mapp;
int (*p_prime)(void *) = numaff_prime_mapp;
int (*p_bind_block)(void *) = numaff_bind_block;
int (*p_bind_all)(void *, const int *, int) = numaff_bind_all;
int (*p_cyclic_block)(void *, size_t) = numaff_cyclic_block;
int (*p_random)(void *) = numaff_random;
int (*p_random_block)(void *, size_t) = numaff_random_block;
int (*p_migrate)(void *, size_t, size_t, const int *, int) = numaff_migrate;
int (*p_migrate_cols)(void *, size_t, size_t, const int *, int) = numaff_migrate_cols;
int (*p_print)(void) = numaff_print_stats;
const char *(*p_strerror)(int) = numaff_strerror;
const char *(*p_version)(void) = numaff_version;
int main(void) { return p_init == 0; }
"#;

#[test]
fn header_compiles_as_c99_and_cxx_with_the_required_signatures() {
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("sig.c");
    std::fs::write(&c, SIGNATURES).unwrap();
    let cc = dir.path().join("sig.cpp");
    std::fs::write(&cc, SIGNATURES).unwrap();
    for (compiler, std, src) in [
        ("gcc", "-std=c99", &c),
        ("gcc", "-std=c11", &c),
        ("g++", "-std=c++11", &cc),
        ("g++", "-std=c++17", &cc),
    ] {
        run(Command::new(compiler)
            .args([std, "-Wall", "-Wextra", "-Werror", "-pedantic", "-c", "-o"])
            .arg(dir.path().join("sig.o"))
            .arg("-I")
            .arg(include_dir())
            .arg(src));
    }
}

#[test]
fn c_program_uses_every_call_and_gets_error_codes_not_aborts() {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("api");
    compile(&common::crate_dir().join("tests/c/api.c"), &exe, &[]);
    let out = Command::new(&exe).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("api: 0 failures"), "{text}");
    // The statistics name the arrays with their policies and the migration count.
    assert!(text.contains("numaff: machine"), "{text}");
    assert!(text.contains("pages migrated"), "{text}");
    assert!(text.contains("bind_block"), "{text}");
}

/// numaff.h documents every call as safe from several threads: 8 threads each allocate, place
/// under several policies, check and free their own arrays at once, and read the statistics.
const THREADS: &str = r#"
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <numaff.h>
static int errors[8];
static void *work(void *p) {
  int t = (int)(intptr_t)p;
  for (int round = 0; round < 20; round++) {
    long *a = numaff_alloc_2d(64, 512 + t, sizeof(long));
    if (!a) { errors[t]++; continue; }
    for (long i = 0; i < 64L * (512 + t); i++) a[i] = i + t;
    if (numaff_cyclic(a) != 0) errors[t]++;
    if (numaff_skew_mapp(a) != 0) errors[t]++;
    if (numaff_cyclic_block(a, 3) != 0) errors[t]++;
    if (numaff_bind_block(a) != 0) errors[t]++;
    if (numaff_pages_on_node(a, -1) != 0) errors[t]++;
    if (numaff_migrated_pages() < 0) errors[t]++;
    for (long i = 0; i < 64L * (512 + t); i++) if (a[i] != i + t) { errors[t]++; break; }
    if (numaff_free(a) != 0) errors[t]++;
  }
  return NULL;
}
int main(void) {
  if (numaff_init() != 0) return 1;
  pthread_t th[8];
  for (int t = 0; t < 8; t++) pthread_create(&th[t], NULL, work, (void *)(intptr_t)t);
  for (int t = 0; t < 8; t++) pthread_join(th[t], NULL);
  int total = 0;
  for (int t = 0; t < 8; t++) total += errors[t];
  printf("threads: %d errors, last error '%s'\n", total, numaff_last_error());
  return numaff_final() != 0 || total != 0;
}
"#;

#[test]
fn calls_from_several_threads_at_once_all_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("threads.c");
    std::fs::write(&src, THREADS).unwrap();
    let exe = dir.path().join("threads");
    compile(&src, &exe, &["-lpthread"]);
    let out = Command::new(&exe).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("threads: 0 errors"), "{text}");
}
