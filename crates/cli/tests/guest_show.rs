//! `numaff show` in a 2-node QEMU guest reports the pages of a test program on the
//! nodes they are on.
//!
//! The test program is C, compiled here with `cc` (build-essential, installed by scripts/setup.sh):
//! it places its pages by first touch from a thread pinned to a cpu of each node, as an ordinary
//! program does, with nothing from numaff in it, so `numaff show` is checked against placement it did
//! not make. (The guest payload `numaff-guest` belongs to another package, which `cargo test -p
//! numaff` does not build.)
#![allow(clippy::unwrap_used)] // helpers of tests

use std::io::Write;
use std::path::Path;

use numaff_testvm::Guest;

mod common;
use common::compile;

const PROGRAM: &str = r#"
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) { perror("sched_setaffinity"); exit(2); }
}

/* Two mappings, 1024 pages (a) and 512 pages (b), without transparent huge pages, kept apart by a
 * PROT_NONE page (two adjacent anonymous mappings would merge into one); each is touched first from
 * a cpu of a different node, which puts its pages on that node. */
int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: %s CPU_OF_NODE0 CPU_OF_NODE1\n", argv[0]); return 2; }
    size_t ps = (size_t)sysconf(_SC_PAGESIZE), len = (1024 + 1 + 512) * ps;
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); return 2; }
    if (madvise(p, len, MADV_NOHUGEPAGE) != 0) { perror("madvise"); return 2; }
    if (mprotect(p + 1024 * ps, ps, PROT_NONE) != 0) { perror("mprotect"); return 2; }
    char *a = p, *b = p + 1025 * ps;
    pin(atoi(argv[1]));
    memset(a, 0x5a, 1024 * ps);
    pin(atoi(argv[2]));
    memset(b, 0xa5, 512 * ps);
    printf("a=%lu b=%lu cpu=%d\n", (unsigned long)a, (unsigned long)b, sched_getcpu());
    fflush(stdout);
    for (;;) pause();
}
"#;

/// Starts the program, waits for its line, shows it with numaff (text, then JSON), stops it.
const SCRIPT: &str = r#"
/show-target 0 2 > /tmp/target.out 2>&1 &
pid=$!
i=0
while [ ! -s /tmp/target.out ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
echo "@@TARGET $pid $(cat /tmp/target.out)"
/numaff show $pid
echo "@@RC_TEXT $?"
/numaff show --json --cpu-window 0 $pid > /tmp/show.json
echo "@@RC_JSON $?"
echo "@@JSON"
cat /tmp/show.json
echo "@@END"
kill $pid
"#;

/// The test program, written and compiled into `dir`.
fn compile_show_target(dir: &Path) -> std::path::PathBuf {
    let src = dir.join("show-target.c");
    let exe = dir.join("show-target");
    std::fs::File::create(&src)
        .unwrap()
        .write_all(PROGRAM.as_bytes())
        .unwrap();
    compile("cc", &["-O2", "-Wall"], &src, &exe, "build-essential");
    exe
}

fn between<'a>(text: &'a str, from: &str, to: &str) -> &'a str {
    let s = text
        .find(from)
        .unwrap_or_else(|| panic!("no {from} in:\n{text}"))
        + from.len();
    let e = s + text[s..]
        .find(to)
        .unwrap_or_else(|| panic!("no {to} in:\n{text}"));
    &text[s..e]
}

#[test]
fn show_in_a_two_node_guest_finds_pages_on_their_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_show_target(dir.path());
    let guest = Guest::new(2, 2, 256)
        .kernel_arg("numa_balancing=disable")
        .file(env!("CARGO_BIN_EXE_numaff"), "/numaff")
        .file(&exe, "/show-target")
        .timeout(180);
    let run = guest
        .run(&["sh", "-c", SCRIPT])
        .unwrap_or_else(|e| panic!("{e}"));
    let all = &run.output;
    println!("{all}");
    assert_eq!(run.exit_code, 0, "{all}");
    assert_eq!(between(all, "@@RC_TEXT ", "\n").trim(), "0", "{all}");
    assert_eq!(between(all, "@@RC_JSON ", "\n").trim(), "0", "{all}");

    // "@@TARGET <pid> a=<addr> b=<addr> cpu=<cpu>"
    let target: Vec<&str> = between(all, "@@TARGET ", "\n").split_whitespace().collect();
    let pid: u64 = target[0].parse().unwrap();
    let field = |k: &str| -> u64 {
        target
            .iter()
            .find_map(|t| t.strip_prefix(k))
            .unwrap_or_else(|| panic!("no {k} in the target's line:\n{all}"))
            .parse()
            .unwrap()
    };
    let (a, b, cpu) = (field("a="), field("b="), field("cpu="));
    assert_eq!(cpu, 2, "the program did not run on cpu 2:\n{all}");

    let doc: serde_json::Value = serde_json::from_str(between(all, "@@JSON\n", "@@END"))
        .unwrap_or_else(|e| panic!("invalid JSON ({e}):\n{all}"));
    let procs = doc["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 1, "{doc}");
    let p = &procs[0];
    assert_eq!(p["pid"].as_u64(), Some(pid), "{doc}");

    // Its one thread, last on cpu 2 of node 1.
    let threads = p["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 1, "{doc}");
    assert_eq!(threads[0]["cpu"].as_u64(), Some(2), "{doc}");
    assert_eq!(threads[0]["node"].as_u64(), Some(1), "{doc}");

    // The two mappings, each wholly on the node whose cpu touched it.
    let mapping = |start: u64| -> &serde_json::Value {
        p["mappings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["start"].as_u64() == Some(start))
            .unwrap_or_else(|| panic!("no mapping at {start:#x}:\n{doc}"))
    };
    assert_eq!(
        mapping(a)["pages_per_node"],
        serde_json::json!({"0": 1024}),
        "{doc}"
    );
    assert_eq!(
        mapping(b)["pages_per_node"],
        serde_json::json!({"1": 512}),
        "{doc}"
    );
    assert_eq!(mapping(a)["kind"], mapping(b)["kind"], "{doc}");
    // The process total counts them (and its program, libraries and stack besides).
    let total = |node: &str| p["pages_per_node"][node].as_u64().unwrap_or(0);
    assert!(total("0") >= 1024 && total("1") >= 512, "{doc}");

    // The text view names the process and both nodes.
    let text = between(all, "\n", "@@RC_TEXT");
    assert!(text.contains(&pid.to_string()), "{text}");
    assert!(text.contains("1024") && text.contains("512"), "{text}");
    let _ = writeln!(std::io::stderr(), "show guest: {:.1} s", run.seconds);
}
