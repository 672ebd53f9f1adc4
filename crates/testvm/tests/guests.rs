//! The QEMU harness itself, in real guests with busybox commands as payloads.
//! Each test boots one small guest (a few seconds with TCG); they run one at a time.
#![allow(clippy::unwrap_used)] // helpers of tests

use numaff_testvm::{Error, Guest};

const NODE: &str = "/sys/devices/system/node";

/// A shell command line in the guest (busybox sh).
fn sh(script: &str) -> [&str; 3] {
    ["sh", "-c", script]
}

/// Runs `script` and insists it exits 0; a missing qemu/busybox fails here with the install advice.
fn ok(guest: &Guest, script: &str) -> String {
    let run = guest.run(&sh(script)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(run.exit_code, 0, "guest output:\n{}", run.output);
    run.output
}

#[test]
fn two_nodes_report_online_nodes_and_distances() {
    let guest = Guest::new(2, 2, 256).distances(&[[10, 21], [21, 10]]);
    let out = ok(
        &guest,
        &format!(
            "cat {NODE}/online; cat {NODE}/node0/distance {NODE}/node1/distance; \
             cat {NODE}/node0/cpulist {NODE}/node1/cpulist"
        ),
    );
    let lines: Vec<&str> = out.lines().map(str::trim).collect();
    assert_eq!(lines, ["0-1", "10 21", "21 10", "0-1", "2-3"], "{out}");
}

#[test]
fn four_and_eight_nodes_report_counts_and_cpulists() {
    let script = format!("ls -d {NODE}/node* | wc -l; cat {NODE}/online {NODE}/node*/cpulist");
    // Nodes sort as node0 node1 ... in the shell glob up to 8 nodes (single digits).
    let out = ok(&Guest::new(4, 1, 128), &script);
    let lines: Vec<&str> = out.lines().map(str::trim).collect();
    assert_eq!(lines, ["4", "0-3", "0", "1", "2", "3"], "{out}");

    let out = ok(&Guest::new(8, 1, 128), &script);
    let lines: Vec<&str> = out.lines().map(str::trim).collect();
    assert_eq!(
        lines,
        ["8", "0-7", "0", "1", "2", "3", "4", "5", "6", "7"],
        "{out}"
    );
}

#[test]
fn a_64_mib_node_shows_its_size_and_kernel_args_pass() {
    let guest = Guest::new(2, 1, 256)
        .node_memory(1, 64)
        .kernel_arg("transparent_hugepage=never");
    let out = ok(
        &guest,
        &format!(
            "grep MemTotal {NODE}/node0/meminfo {NODE}/node1/meminfo; \
             cat /sys/kernel/mm/transparent_hugepage/enabled; cat /proc/cmdline"
        ),
    );
    let kib = |node: usize| -> u64 {
        let line = out
            .lines()
            .find(|l| l.contains(&format!("node{node}/meminfo")))
            .unwrap_or_else(|| panic!("no node{node} meminfo in:\n{out}"));
        line.split_whitespace()
            .rev()
            .nth(1)
            .unwrap()
            .parse()
            .unwrap()
    };
    // MemTotal is the node's present pages less what the kernel reserved at boot.
    let (n0, n1) = (kib(0), kib(1));
    assert!(
        (40 * 1024..=64 * 1024).contains(&n1),
        "node 1: {n1} kB\n{out}"
    );
    assert!(
        n0 > 128 * 1024 && n0 <= 256 * 1024,
        "node 0: {n0} kB\n{out}"
    );
    assert!(out.contains("[never]"), "{out}");
    assert!(out.contains("transparent_hugepage=never"), "{out}");
}

#[test]
fn exit_status_and_long_output_come_back_whole() {
    // One guest for both: 2000 numbered lines, then exit 3.
    let guest = Guest::new(1, 1, 128);
    let run = guest
        .run(&sh("seq 1 2000; exit 3"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(run.exit_code, 3, "{}", run.output);
    let lines: Vec<&str> = run.output.lines().collect();
    let want: Vec<String> = (1..=2000).map(|i| i.to_string()).collect();
    assert_eq!(lines, want);
    assert!(run.seconds > 0.0);
}

#[test]
fn a_hanging_payload_hits_the_timeout() {
    let guest = Guest::new(1, 1, 128).timeout(12);
    match guest.run(&sh("echo started; sleep 1000")) {
        Err(e @ Error::Timeout { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("timed out after 12 s"), "{msg}");
            assert!(msg.contains("sleep 1000"), "{msg}");
            assert!(msg.contains("started"), "console tail missing: {msg}");
            // A payload that hangs is not a kernel that hangs.
            assert!(!msg.contains("kernel itself hung"), "{msg}");
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
}

#[test]
fn files_come_with_their_shared_libraries() {
    // A dynamically linked host program (this machine's `true` links libc) runs in the guest.
    let guest = Guest::new(1, 1, 128).file("/bin/true", "/opt/host-true");
    let run = guest
        .run(&sh("/opt/host-true && echo ran"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (run.exit_code, run.output.trim()),
        (0, "ran"),
        "{}",
        run.output
    );
}

/// Toggling a tracepoint patches the kernel text of every site that calls it (jump labels, with
/// an int3 while the bytes change) while the other vCPUs run those sites. With multi-threaded
/// TCG a vCPU can keep its stale translation of the int3 and spin on it (a bug that hung most
/// guests running this script, and rare plain boots); the harness runs TCG single-threaded.
#[test]
fn a_guest_survives_kernel_text_patched_while_other_cpus_run_it() {
    let script = r#"
mount -t tracefs none /sys/kernel/tracing
e=/sys/kernel/tracing/events/kmem/kmalloc/enable
(while :; do cat /proc/self/status > /dev/null; done) &
(while :; do ls / > /dev/null; done) &
i=0
while [ $i -lt 32 ]; do echo 1 > $e; echo 0 > $e; i=$((i + 1)); done
echo "toggled $i"
"#;
    let out = ok(&Guest::new(2, 2, 256).timeout(90), script);
    assert!(out.contains("toggled 32"), "{out}");
}
