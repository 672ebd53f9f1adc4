//! Induced faults in a 2-node QEMU guest: `numaff profile --induce auto` on
//! Debian's kernel (soft-dirty re-arming: CONFIG_MEM_SOFT_DIRTY is set there) samples pages more
//! than once, and the per-page NUMA vectors (numaff_behave::NumaTable) show the nodes of the
//! threads that use them: a thread pinned to node 0 and one pinned to node 1 each rewrite their own
//! buffer, and both rewrite a third.
//!
//! A second guest runs the ring of 8 threads (tests/profile/ring8.c) under `--induce uffd`: on the
//! guest's Linux 6.1 the agent cannot write-protect private memory (no UFFD_FEATURE_WP_ASYNC), says
//! so, and still re-arms the ring's shared buffers, whose communication matrix shows the
//! neighbour pairs.
//!
//! The trace stays in the guest (the serial console is slow): busybox awk reduces it to one line
//! per (page, node) of the three buffers with its sample count, which the test replays into a
//! NumaTable.
#![allow(clippy::unwrap_used)] // helpers of tests

use std::collections::BTreeMap;

mod common;
use common::compile_profile_program;
use numaff_behave::{NumaTable, NumaTableConfig};
use numaff_testvm::Guest;

const SCRIPT: &str = r#"
/numaff profile -o /tmp/t.csv --induce auto --induce-rate 10 --induce-budget off -- /twonodes 0 2 1500 > /tmp/p.out 2> /tmp/p.err
echo "@@RC $?"
cat /tmp/p.out /tmp/p.err
/numaff profile -o /tmp/b.csv --induce auto --induce-rate 10 --induce-budget 0.1 -- /twonodes 0 2 1500 > /tmp/b.out 2> /tmp/b.err
echo "@@BUDGET_RC $?"
cat /tmp/b.out /tmp/b.err | sed 's/^/@@B /'
awk '/^BUF/ { print "-v " $2 "lo=" $3 " -v " $2 "hi=" $4 }' /tmp/p.out > /tmp/bounds
awk -F, $(cat /tmp/bounds) 'NR > 1 {
  a = $6 + 0
  if ((a >= alo && a < ahi) || (a >= blo && a < bhi) || (a >= slo && a < shi)) c[int(a / 4096) " " $5]++
} END { for (k in c) print "@@P " k " " c[k] }' /tmp/t.csv
echo "@@DONE"
"#;

#[test]
fn induced_faults_in_a_two_node_guest_resample_pages_with_their_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_profile_program(dir.path(), "twonodes", &["-O2", "-Wall", "-pthread"]);
    let guest = Guest::new(2, 2, 256)
        .kernel_arg("numa_balancing=disable")
        .file(env!("CARGO_BIN_EXE_numaff"), "/numaff")
        .file(&exe, "/twonodes")
        .timeout(120);
    let run = guest
        .run(&["sh", "-c", SCRIPT])
        .unwrap_or_else(|e| panic!("{e}"));
    let all = &run.output;
    assert_eq!(run.exit_code, 0, "{all}");
    assert!(all.contains("@@RC 0"), "numaff profile failed:\n{all}");
    assert!(all.contains("@@DONE"), "{all}");
    assert!(
        all.contains("induced faults: soft-dirty"),
        "auto did not pick soft-dirty on Debian's kernel:\n{all}"
    );

    // The buffers, in pages.
    let mut bufs: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for l in all.lines().filter(|l| l.starts_with("BUF ")) {
        let f: Vec<&str> = l.split_whitespace().collect();
        let lo: u64 = f[2].parse().unwrap();
        let hi: u64 = f[3].parse().unwrap();
        bufs.insert(f[1].to_string(), (lo / 4096, hi / 4096));
    }
    assert_eq!(bufs.len(), 3, "{all}");

    // Replay the (page, node, count) lines into kMAF's NUMA table.
    let mut table = NumaTable::new(NumaTableConfig::new(2, 1 << 20));
    let mut samples: BTreeMap<u64, u64> = BTreeMap::new();
    for l in all.lines().filter(|l| l.starts_with("@@P ")) {
        let f: Vec<u64> = l[4..]
            .split_whitespace()
            .map(|x| x.parse().unwrap())
            .collect();
        let (page, node, count) = (f[0], f[1], f[2]);
        for _ in 0..count {
            table.record(page, node as usize).unwrap();
        }
        *samples.entry(page).or_default() += count;
    }

    let check = |name: &str, want: [bool; 2]| {
        let (lo, hi) = bufs[name];
        let pages = hi - lo;
        let resampled = (lo..hi)
            .filter(|p| samples.get(p).copied().unwrap_or(0) >= 2)
            .count() as u64;
        // Pages sampled more than once: induced faults, not only the first touch.
        assert!(
            resampled * 10 >= pages * 9,
            "buffer {name}: only {resampled} of {pages} pages sampled more than once:\n{all}"
        );
        let matching = (lo..hi)
            .filter(|&p| {
                table
                    .vector(p)
                    .is_some_and(|v| (v[0] > 0) == want[0] && (v[1] > 0) == want[1])
            })
            .count() as u64;
        assert!(
            matching * 10 >= pages * 9,
            "buffer {name}: {matching} of {pages} pages have the NUMA vector of nodes {want:?}:\n{all}"
        );
        // A buffer used from one node only is never seen from the other.
        if want != [true, true] {
            let other = usize::from(want[0]);
            assert!(
                (lo..hi).all(|p| table.vector(p).is_none_or(|v| v[other] == 0)),
                "buffer {name} sampled from node {other}:\n{all}"
            );
        }
    };
    check("a", [true, false]);
    check("b", [false, true]);
    check("s", [true, true]);

    // The same run within a budget of 0.1 % of the program's cpu time: the resident pages
    // re-armed (each can fault once) cost at most that, and the re-arms waited for it.
    assert!(all.contains("@@BUDGET_RC 0"), "{all}");
    let line = |prefix: &str| -> String {
        all.lines()
            .filter_map(|l| l.strip_prefix("@@B "))
            .find_map(|l| l.split_once(prefix).map(|(_, rest)| rest.to_string()))
            .unwrap_or_else(|| panic!("no {prefix:?} line in the budget run:\n{all}"))
    };
    let soft = line("induced faults: soft-dirty: ");
    let number_before = |text: &str, word: &str| -> f64 {
        let i = text
            .find(word)
            .unwrap_or_else(|| panic!("no {word:?} in {text:?}"));
        text[..i]
            .split(|c: char| !(c.is_ascii_digit() || c == '.'))
            .rev()
            .find(|w| !w.is_empty())
            .and_then(|w| w.parse().ok())
            .unwrap_or_else(|| panic!("no number before {word:?} in {text:?}"))
    };
    let rearms = number_before(&soft, " re-arms");
    let resident = number_before(&soft, " resident pages re-armed");
    let cpu: f64 = line("cpu time: ")
        .split_once("the program ")
        .and_then(|(_, t)| t.trim().strip_suffix(" s")?.parse().ok())
        .unwrap_or_else(|| panic!("no program cpu time in the budget run:\n{all}"));
    let clear_refs_ms = number_before(&soft, " ms in clear_refs");
    // Each re-arm's faults are paid before it is made (its clear_refs walk after, from the next
    // re-arm's share: the walks' times are not printed one by one, so only the faults are checked).
    let cost = resident * numaff_linux::induce::FAULT_COST_NS * 1e-9;
    let allowed = 0.001 * cpu;
    let unbudgeted = all
        .lines()
        .find_map(|l| l.strip_prefix("numaff: induced faults: soft-dirty: "))
        .map(|l| number_before(l, " re-arms"))
        .unwrap_or_else(|| panic!("no soft-dirty line in the run without a budget:\n{all}"));
    eprintln!(
        "induce guest, budget 0.1 %: {rearms} re-arms ({unbudgeted} without), {resident} \
         resident pages re-armed, cost {:.2} ms, allowed {:.2} ms by {cpu} s of program cpu; {soft}",
        cost * 1e3,
        allowed * 1e3
    );
    assert!(
        soft.contains("waited for the budget") && rearms < unbudgeted,
        "no re-arm waited for a budget of 0.1 % ({rearms} re-arms, {unbudgeted} without):\n{all}"
    );
    assert!(
        cost <= allowed,
        "{resident} resident pages re-armed ({rearms} re-arms, {clear_refs_ms} ms in clear_refs) in \
         {cpu} s of program cpu: more than 0.1 % allows:\n{all}"
    );
    eprintln!("induce guest: {:.1} s", run.seconds);
}

/// The rate alone decides here (`--induce-budget off`): under TCG each of the agent's ticks takes
/// about 4 ms of emulated cpu, which a 0.5 % budget of the ring's cpu time cannot pay.
const RING_SCRIPT: &str = r#"
/numaff profile -o /tmp/r.parquet --induce uffd --induce-rate 10 --induce-budget off -- /ring8 2000 > /tmp/p.out 2> /tmp/p.err
echo "@@RC $?"
cat /tmp/p.out /tmp/p.err
/numaff analyze --json /tmp/r.parquet > /tmp/a.json
echo "@@ARC $?"
echo "@@JSON"
cat /tmp/a.json
echo "@@END"
"#;

#[test]
fn uffd_agent_on_linux_6_1_falls_back_to_shared_memory_and_finds_the_ring() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_profile_program(dir.path(), "ring8", &["-O2", "-Wall", "-pthread"]);
    let guest = Guest::new(2, 2, 256)
        .kernel_arg("numa_balancing=disable")
        .file(env!("CARGO_BIN_EXE_numaff"), "/numaff")
        .file(&exe, "/ring8")
        .timeout(120);
    let run = guest
        .run(&["sh", "-c", RING_SCRIPT])
        .unwrap_or_else(|e| panic!("{e}"));
    let all = &run.output;
    assert_eq!(run.exit_code, 0, "{all}");
    assert!(all.contains("@@RC 0") && all.contains("@@ARC 0"), "{all}");
    assert!(
        all.contains("uffd agent on") && all.contains("no-async-write-protect"),
        "the agent says why private memory is not re-armed:\n{all}"
    );
    assert!(all.contains("SUM "), "the program did not finish:\n{all}");
    let mut tids = [0u64; 8];
    for l in all.lines().filter(|l| l.starts_with("THREAD ")) {
        let f: Vec<u64> = l[7..]
            .split_whitespace()
            .map(|x| x.parse().unwrap())
            .collect();
        tids[f[0] as usize] = f[1];
    }
    assert!(tids.iter().all(|&t| t != 0), "{all}");
    let json = &all[all.find("@@JSON\n").unwrap() + 7..all.find("@@END").unwrap()];
    let doc: serde_json::Value =
        serde_json::from_str(json).unwrap_or_else(|e| panic!("invalid JSON ({e}):\n{all}"));
    let threads = doc["threads"].as_array().unwrap();
    let idx: Vec<usize> = tids
        .iter()
        .map(|&t| {
            threads
                .iter()
                .position(|x| x["tid"].as_u64() == Some(t))
                .unwrap_or_else(|| panic!("thread {t} not in the trace:\n{all}"))
        })
        .collect();
    let m = &doc["communication_matrix"];
    let c = |i: usize, j: usize| m[idx[i]][idx[j]].as_f64().unwrap();
    let mut min_neighbour = f64::INFINITY;
    let mut max_other = 0.0f64;
    for i in 0..8 {
        for j in (0..8).filter(|&j| j != i) {
            if (i + 1) % 8 == j || (j + 1) % 8 == i {
                min_neighbour = min_neighbour.min(c(i, j));
            } else {
                max_other = max_other.max(c(i, j));
            }
        }
    }
    assert!(
        min_neighbour > 0.0 && min_neighbour > max_other,
        "neighbour pairs (min {min_neighbour}) are not the heaviest (others up to {max_other}):\n{all}"
    );
    eprintln!("uffd ring guest: {:.1} s", run.seconds);
}

/// NUMA balancing on, its scan delay and minimum period cut to 100 ms (debugfs, Linux 6.1) so that
/// a 3 s run sees several scans.
const BALANCING_SCRIPT: &str = r#"
mount -t debugfs none /sys/kernel/debug 2>/dev/null
for f in scan_delay_ms scan_period_min_ms; do echo 100 > /sys/kernel/debug/sched/numa_balancing/$f; done
/numaff profile -o /tmp/t.csv --induce balancing -- /twonodes 0 2 3000 > /tmp/p.out 2> /tmp/p.err
echo "@@RC $?"
cat /tmp/p.out /tmp/p.err
awk '/^BUF/ { print "-v " $2 "lo=" $3 " -v " $2 "hi=" $4 }' /tmp/p.out > /tmp/bounds
awk -F, $(cat /tmp/bounds) 'NR > 1 {
  a = $6 + 0
  if ((a >= alo && a < ahi) || (a >= blo && a < bhi) || (a >= slo && a < shi)) n++
} END { print "@@INSIDE " n }' /tmp/t.csv
grep numa_hint_faults /proc/vmstat
"#;

#[test]
fn numa_balancing_hinting_faults_are_sampled_when_enabled() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_profile_program(dir.path(), "twonodes", &["-O2", "-Wall", "-pthread"]);
    // Explicitly: --induce auto picks soft-dirty on this kernel.
    let guest = Guest::new(2, 2, 256)
        .kernel_arg("numa_balancing=enable")
        .file(env!("CARGO_BIN_EXE_numaff"), "/numaff")
        .file(&exe, "/twonodes")
        .timeout(120);
    let run = guest
        .run(&["sh", "-c", BALANCING_SCRIPT])
        .unwrap_or_else(|e| panic!("{e}"));
    let all = &run.output;
    assert!(all.contains("@@RC 0"), "{all}");
    assert!(
        all.contains("induced faults: NUMA-balancing hinting faults"),
        "{all}"
    );
    let inside: u64 = all
        .lines()
        .find_map(|l| l.strip_prefix("@@INSIDE "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("{all}"));
    // 3 buffers of 64 pages: first touches give 192 samples; hinting faults add more.
    assert!(
        inside > 192 + 64,
        "only {inside} samples in 192 pages with NUMA balancing on:\n{all}"
    );
    eprintln!(
        "balancing guest: {:.1} s, {inside} samples in the buffers",
        run.seconds
    );
}
