//! numaff-linux on real multi-node kernels: each test boots one QEMU guest (2, 4 or 8 nodes), runs
//! several subcommands of the payload `numaff-guest` (src/bin/numaff-guest.rs) there, and checks
//! the `key=value` lines it printed. Placement is confirmed twice, by a move_pages query and by
//! /proc/PID/numa_maps; data is checked byte for byte against its pattern.
//!
//! The payload's buffers use MADV_NOHUGEPAGE (the guest kernel's THP is "always"), so page counts are
//! exact. The guests that assert where pages are boot with `numa_balancing=disable` (the Debian
//! kernel enables NUMA balancing on multi-node machines, and it may move DEFAULT-policy pages back
//! towards the cpu that touches them); the 8-node guest keeps it on, as one more migrator racing
//! the stress test.
//!
//! Stress seeds: `NUMAFF_STRESS_SEED=S` makes the runs of the first guest use seeds S, S+1, ... (the
//! 4- and 8-node guests use S+1000... and S+2000...); otherwise S comes from the clock. The seeds and
//! any failing seed are printed.
#![allow(clippy::unwrap_used)] // helpers of tests

use std::collections::BTreeMap;
use std::io::Write;

use numaff_machine::CpuSet;
use numaff_testvm::Guest;

const PAYLOAD: &str = env!("CARGO_BIN_EXE_numaff-guest");

/// The payload's output: `key=value` lines in order (other lines kept only in `raw`).
struct Report {
    raw: String,
    kv: Vec<(String, String)>,
    seconds: f64,
}

impl Report {
    fn get(&self, key: &str) -> &str {
        self.kv
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("no {key}= in the guest's output:\n{}", self.raw))
    }
    fn all(&self, key: &str) -> Vec<&str> {
        self.kv
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect()
    }
    fn num(&self, key: &str) -> u64 {
        self.get(key)
            .parse()
            .unwrap_or_else(|_| panic!("{key}={} is not a number:\n{}", self.get(key), self.raw))
    }
    /// A `0:12,1:4084` value as a map.
    fn nodes(&self, key: &str) -> BTreeMap<u32, u64> {
        parse_map(self.get(key))
    }
    /// A `moved:4096,already_there:0,...` value as a map.
    fn counts(&self, key: &str) -> BTreeMap<String, u64> {
        self.get(key)
            .split(',')
            .map(|kv| {
                let (k, v) = kv.split_once(':').unwrap();
                (k.to_string(), v.parse().unwrap())
            })
            .collect()
    }
}

fn parse_map(v: &str) -> BTreeMap<u32, u64> {
    v.split(',')
        .filter(|x| !x.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once(':').unwrap();
            (k.parse().unwrap(), v.parse().unwrap())
        })
        .collect()
}

fn map(pairs: &[(u32, u64)]) -> BTreeMap<u32, u64> {
    pairs.iter().copied().collect()
}

/// Boots `guest` with the payload at /numaff-guest, runs each of `commands` (payload arguments) in
/// turn and checks that each exited 0 (`rc.<subcommand>=0`).
fn run(guest: Guest, commands: &[String]) -> Report {
    let mut script = String::new();
    for c in commands {
        let name = c.split_whitespace().next().unwrap();
        script.push_str(&format!("/numaff-guest {c}; echo \"rc.{name}=$?\"\n"));
    }
    let run = guest
        .file(PAYLOAD, "/numaff-guest")
        .run(&["sh", "-c", &script])
        .unwrap_or_else(|e| panic!("{e}"));
    let kv = run
        .output
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim_end().to_string()))
        .collect();
    // Shown with --nocapture, and by the test harness when the test fails.
    println!("{}", run.output);
    let r = Report {
        raw: run.output,
        kv,
        seconds: run.seconds,
    };
    assert_eq!(run.exit_code, 0, "{}", r.raw);
    for c in commands {
        let name = c.split_whitespace().next().unwrap();
        assert_eq!(
            r.get(&format!("rc.{name}")),
            "0",
            "{name} failed:\n{}",
            r.raw
        );
    }
    assert!(r.all("error").is_empty(), "{}", r.raw);
    r
}

/// Straight to fd 2 (as the harness does): the seeds and costs belong in CI logs even on success.
fn note(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// The first seed of this run of the test binary (one for all three guests; each adds its offset).
fn stress_base() -> u64 {
    static BASE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *BASE.get_or_init(first_seed)
}

fn first_seed() -> u64 {
    match std::env::var("NUMAFF_STRESS_SEED") {
        Ok(s) => s.parse().expect("NUMAFF_STRESS_SEED must be a number"),
        Err(_) => {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap();
            (t.as_secs() % 1_000_000) * 10_000
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Checks of one subcommand's output each.

/// `move --to ...`: every page moved, seen on the target by query and numa_maps, data identical.
fn check_move(r: &Report, targets: &[u32]) {
    let n = r.num("move.pages");
    assert_eq!(r.nodes("move.start.query"), map(&[(0, n)]), "{}", r.raw);
    assert_eq!(r.nodes("move.start.numa_maps"), map(&[(0, n)]), "{}", r.raw);
    let sum = r.get("move.start.checksum");
    for t in targets {
        let k = format!("move.to{t}");
        let c = r.counts(&format!("{k}.counts"));
        assert_eq!(c["moved"], n, "{k}: {c:?}\n{}", r.raw);
        assert_eq!(c.values().sum::<u64>(), n, "{k}: {c:?}");
        assert_eq!(r.nodes(&format!("{k}.query")), map(&[(*t, n)]), "{}", r.raw);
        assert_eq!(
            r.nodes(&format!("{k}.numa_maps")),
            map(&[(*t, n)]),
            "{}",
            r.raw
        );
        assert_eq!(r.get(&format!("{k}.checksum")), sum, "{}", r.raw);
        assert_eq!(r.num(&format!("{k}.bad_pages")), 0, "{}", r.raw);
        assert_eq!(r.num(&format!("{k}.again.already_there")), n, "{}", r.raw);
    }
}

/// `migrate`: the child's buffer and every other page of it left node 0 for node `to`, data intact.
fn check_migrate(r: &Report, to: u32) {
    let n = r.num("migrate.pages");
    assert_eq!(r.nodes("migrate.before.query"), map(&[(0, n)]), "{}", r.raw);
    assert_eq!(
        r.nodes("migrate.before.numa_maps"),
        map(&[(0, n)]),
        "{}",
        r.raw
    );
    assert_eq!(r.num("migrate.not_moved"), 0, "{}", r.raw);
    assert_eq!(r.nodes("migrate.after.query"), map(&[(to, n)]), "{}", r.raw);
    assert_eq!(
        r.nodes("migrate.after.numa_maps"),
        map(&[(to, n)]),
        "{}",
        r.raw
    );
    let before = r.nodes("migrate.before.process");
    let after = r.nodes("migrate.after.process");
    assert!(before.get(&0).copied().unwrap_or(0) >= n, "{}", r.raw);
    assert_eq!(after.get(&0), None, "pages left on node 0:\n{}", r.raw);
    assert!(r.get("migrate.intact").starts_with("true "), "{}", r.raw);
    assert_eq!(r.num("migrate.child_exit"), 0);
}

/// `exit-during`: every run ends cleanly; a move cut short says target_exited or "has exited".
fn check_exit_during(r: &Report) {
    let runs: Vec<&str> =
        r.kv.iter()
            .filter(|(k, _)| k.starts_with("exit_during.run"))
            .map(|(_, v)| v.as_str())
            .collect();
    assert!(runs.len() >= 6, "{}", r.raw);
    let mut cut = 0;
    for line in &runs {
        let (during, after) = line.split_once(" | afterwards: ").unwrap();
        let clean = during.contains(" target_exited ")
            || during.contains(" has exited")
            || during.contains("migrate finished")
            || during.contains(" finished done:");
        assert!(clean, "not a clean ending: {line}\n{}", r.raw);
        assert!(
            !during.contains("migrate error") || during.contains(" has exited"),
            "{line}"
        );
        if during.contains(" target_exited ") || during.contains(" has exited") {
            cut += 1;
        }
        assert!(after.contains(" has exited"), "{line}");
    }
    assert!(
        cut >= 1,
        "no move was cut short by its target's exit:\n{}",
        r.raw
    );
}

/// `eperm`: uid 65534 is refused a root process's pages with the CAP_SYS_PTRACE advice.
fn check_eperm(r: &Report) {
    assert_eq!(r.get("eperm.uid"), "65534", "{}", r.raw);
    let suffix =
        "(owned by uid 0): permission denied; run as that user (uid 0) or with CAP_SYS_PTRACE";
    for (key, prefix) in [
        ("eperm.move", "cannot move pages of pid "),
        ("eperm.query", "cannot query the page placement of pid "),
        ("eperm.migrate", "cannot migrate the pages of pid "),
    ] {
        let m = r.get(key);
        assert!(m.starts_with(prefix), "{key}: {m}");
        let rest = &m[prefix.len()..];
        let (pid, tail) = rest.split_once(' ').unwrap();
        assert!(pid.parse::<u32>().is_ok(), "{key}: {m}");
        assert!(tail.starts_with(suffix), "{key}: {m}");
    }
    // Its own pages it may move.
    assert!(r.get("eperm.own").starts_with("moved:4,"), "{}", r.raw);
}

/// `stress`: every run passed; prints the seeds.
fn check_stress(r: &Report, guest: &str) {
    let runs = r.all("stress.run");
    note(&format!(
        "stress ({guest}): {} runs, seeds {}, {} s",
        runs.len(),
        r.get("stress.seeds"),
        r.get("stress.seconds")
    ));
    let failed: Vec<&&str> = runs.iter().filter(|l| !l.starts_with("ok ")).collect();
    assert!(
        failed.is_empty(),
        "stress failures (the same random choices again: NUMAFF_STRESS_SEED={} cargo test -p \
         numaff-testvm --test numaff_linux_in_guests):\n{}",
        stress_base(),
        failed
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(runs.len() as u64, r.num("stress.runs"), "{}", r.raw);
    assert_eq!(r.num("stress.failures"), 0);
    // Every mode came up, and the runs where numaff survived checked every page at the end.
    for mode in ["kill-writer", "kill-mover", "kill-migrator"] {
        assert!(
            runs.iter().any(|l| l.contains(&format!(" mode:{mode} "))),
            "no {mode} run among {} runs:\n{}",
            runs.len(),
            r.raw
        );
    }
    for l in runs.iter().filter(|l| !l.contains("mode:kill-writer")) {
        assert!(l.contains("final:[bad:0 "), "{l}");
    }
}

/// `contend`: moves racing a second mover of the same pages end without an error, the busy pages
/// the kernel reported were tried again (a bug: a placement failed on 2 busy pages), and a last
/// move alone puts every page on node 1 with its data intact.
fn check_contend(r: &Report) {
    let n = r.num("contend.pages");
    note(&format!(
        "contend (2 nodes): {} rounds against {} moves of the other thread, {} \
         move_pages calls, {} busy pages tried again, {} still busy after the retries",
        r.get("contend.rounds"),
        r.get("contend.other_moves"),
        r.get("contend.calls"),
        r.get("contend.busy_retried"),
        r.get("contend.still_busy")
    ));
    assert!(r.num("contend.other_moves") > 0, "{}", r.raw);
    assert!(
        r.num("contend.still_busy") <= r.num("contend.busy_retried"),
        "{}",
        r.raw
    );
    let fin = r.counts("contend.final");
    assert_eq!(fin["moved"] + fin["already_there"], n, "{}", r.raw);
    assert_eq!(fin["busy"], 0, "{}", r.raw);
    assert_eq!(r.nodes("contend.final.query"), map(&[(1, n)]), "{}", r.raw);
    assert_eq!(r.num("contend.bad"), 0, "{}", r.raw);
}

/// `policy`: interleave and bind put new pages where they say, by query and numa_maps.
fn check_policy(r: &Report, nodes: u32) {
    let all: Vec<u32> = (0..nodes).collect();
    let last = nodes - 1;
    let list = |ns: &[u32]| -> String { ns.iter().copied().collect::<CpuSet>().to_string() };
    let per = 64u64;
    let total = per * nodes as u64;
    // VMA interleave over every node: the same count on each, page by page in address order.
    let k = "policy.vma.interleave_all";
    assert_eq!(
        r.get(&format!("{k}.mode")),
        format!("interleave:{}", list(&all))
    );
    let want: BTreeMap<u32, u64> = all.iter().map(|&n| (n, per)).collect();
    assert_eq!(r.nodes(&format!("{k}.query")), want, "{}", r.raw);
    assert_eq!(r.nodes(&format!("{k}.numa_maps")), want, "{}", r.raw);
    assert_eq!(r.num(&format!("{k}.off_round_robin")), 0, "{}", r.raw);
    // Interleave over the odd nodes.
    let odd: Vec<u32> = all.iter().copied().filter(|n| n % 2 == 1).collect();
    let k = "policy.vma.interleave_odd";
    let want: BTreeMap<u32, u64> = odd.iter().map(|&n| (n, total / odd.len() as u64)).collect();
    assert_eq!(r.nodes(&format!("{k}.query")), want, "{}", r.raw);
    assert_eq!(r.nodes(&format!("{k}.numa_maps")), want, "{}", r.raw);
    assert_eq!(r.num(&format!("{k}.off_round_robin")), 0, "{}", r.raw);
    // Bind and preferred to the last node.
    for (k, mode) in [
        ("policy.vma.bind_last", "bind"),
        ("policy.vma.preferred_last", "preferred"),
    ] {
        assert_eq!(r.get(&format!("{k}.mode")), format!("{mode}:{last}"));
        assert_eq!(
            r.nodes(&format!("{k}.query")),
            map(&[(last, total)]),
            "{}",
            r.raw
        );
        assert_eq!(
            r.nodes(&format!("{k}.numa_maps")),
            map(&[(last, total)]),
            "{}",
            r.raw
        );
    }
    // Thread policies: 4 x 64 pages each.
    let n = 4 * per;
    assert_eq!(r.get("policy.thread.bind_1.mode"), "bind:1");
    assert_eq!(
        r.nodes("policy.thread.bind_1.query"),
        map(&[(1, n)]),
        "{}",
        r.raw
    );
    let want: BTreeMap<u32, u64> = all.iter().map(|&x| (x, n / nodes as u64)).collect();
    assert_eq!(
        r.nodes("policy.thread.interleave_all.query"),
        want,
        "{}",
        r.raw
    );
    assert_eq!(
        r.nodes("policy.thread.preferred_last.query"),
        map(&[(last, n)]),
        "{}",
        r.raw
    );
    if r.get("policy.supported").contains("prefer (many)") && nodes >= 4 {
        let q = r.nodes("policy.thread.preferred_many_1_3.query");
        assert!(q.keys().all(|n| *n == 1 || *n == 3), "{q:?}");
        assert_eq!(q.values().sum::<u64>(), n);
    }
    assert_eq!(r.get("policy.main_thread_after"), "default");
}

/// `affinity --node K`: the thread runs on the cpu it was given, and says so.
fn check_affinity(r: &Report, node: u32) {
    assert_eq!(r.num("affinity.node"), node as u64);
    let cpu = r.get("affinity.target_cpu").to_string();
    assert_eq!(r.get("affinity.after"), cpu, "{}", r.raw);
    assert_eq!(
        r.get("affinity.thread.sched_getcpu_first"),
        cpu,
        "{}",
        r.raw
    );
    assert_eq!(
        r.get("affinity.thread.sched_getcpu_later"),
        cpu,
        "{}",
        r.raw
    );
    assert_eq!(r.get("affinity.thread.getcpu_cpu"), cpu, "{}", r.raw);
    assert_eq!(
        r.num("affinity.thread.getcpu_node"),
        node as u64,
        "{}",
        r.raw
    );
    assert_eq!(r.get("affinity.proc_cpu"), cpu, "{}", r.raw);
    let bogus = r.get("affinity.bogus");
    assert!(
        bogus.starts_with("cannot set the cpu affinity of thread ")
            && bogus.contains("invalid argument"),
        "{bogus}"
    );
}

// ---------------------------------------------------------------------------------------------
// The guests.

#[test]
fn two_nodes_move_migrate_exit_refuse_stress_and_contend() {
    let base = stress_base();
    let guest = Guest::new(2, 2, 256)
        .kernel_arg("numa_balancing=disable")
        .timeout(240);
    let r = run(
        guest,
        &[
            "move --pages 4096 --to 1".into(),
            "migrate --pages 2048 --from 0 --to 1".into(),
            "exit-during --pages 16384 --runs 6".into(),
            "eperm".into(),
            format!("stress --runs 20 --seed {base} --pages 1024 --max-ms 300"),
            // The batch benchmark's smoke run (the measurement is `cargo bench -p numaff-testvm --bench move_pages`).
            "bench --pages 1024 --reps 1".into(),
            "contend --pages 256 --rounds 40".into(),
        ],
    );
    note(&format!("2-node guest: {:.1} s", r.seconds));
    assert_eq!(r.get("numa_balancing"), "Disabled", "{}", r.raw);
    check_move(&r, &[1]);
    check_migrate(&r, 1);
    check_exit_during(&r);
    check_eperm(&r);
    check_stress(&r, "2 nodes");
    assert_eq!(r.all("bench.batch").len(), 4, "{}", r.raw);
    check_contend(&r);
}

#[test]
fn four_nodes_move_policies_affinity_stress() {
    let base = stress_base() + 1000;
    let guest = Guest::new(4, 1, 256)
        .kernel_arg("numa_balancing=disable")
        .timeout(240);
    let r = run(
        guest,
        &[
            "move --pages 4096 --to 1,3".into(),
            "policy".into(),
            "affinity --node 2".into(),
            format!("stress --runs 20 --seed {base} --pages 1024 --max-ms 300"),
        ],
    );
    note(&format!("4-node guest: {:.1} s", r.seconds));
    check_move(&r, &[1, 3]);
    check_policy(&r, 4);
    check_affinity(&r, 2);
    check_stress(&r, "4 nodes");
}

#[test]
fn eight_nodes_policies_affinity_stress_with_numa_balancing() {
    let base = stress_base() + 2000;
    let guest = Guest::new(8, 1, 128).timeout(240);
    let r = run(
        guest,
        &[
            "policy".into(),
            "affinity --node 2".into(),
            "migrate --pages 1024 --from 0 --to 7".into(),
            format!("stress --runs 15 --seed {base} --pages 1024 --max-ms 300"),
        ],
    );
    note(&format!("8-node guest: {:.1} s", r.seconds));
    check_policy(&r, 8);
    check_affinity(&r, 2);
    check_migrate(&r, 7);
    check_stress(&r, "8 nodes, NUMA balancing on");
}

#[test]
fn small_node_counts_no_memory_and_keeps_every_byte() {
    // Node 1 has 64 MiB; 96 MiB of pages cannot all go there.
    let guest = Guest::new(2, 1, 384)
        .node_memory(1, 64)
        .kernel_arg("numa_balancing=disable")
        .timeout(120);
    let r = run(guest, &["enomem --pages 24576 --to 1".into()]);
    note(&format!("small-node guest: {:.1} s", r.seconds));
    let n = r.num("enomem.pages");
    assert_eq!(r.nodes("enomem.start.query"), map(&[(0, n)]), "{}", r.raw);
    assert_eq!(r.get("enomem.result"), "ok", "{}", r.raw);
    let c = r.counts("enomem.counts");
    assert!(c["moved"] > 0 && c["no_memory"] > 0, "{c:?}\n{}", r.raw);
    assert_eq!(c["moved"] + c["no_memory"], n, "{c:?}");
    assert_eq!(r.num("enomem.total"), n);
    let want = map(&[(0, c["no_memory"]), (1, c["moved"])]);
    assert_eq!(r.nodes("enomem.after.query"), want, "{}", r.raw);
    assert_eq!(r.nodes("enomem.after.numa_maps"), want, "{}", r.raw);
    assert_eq!(
        r.get("enomem.after.checksum"),
        r.get("enomem.start.checksum"),
        "{}",
        r.raw
    );
    assert_eq!(r.num("enomem.after.bad_pages"), 0);
    assert_eq!(r.num("enomem.final.bad_pages"), 0);
    note(&format!(
        "small node, raw kernel answer: {}",
        r.get("enomem.raw")
    ));
}
