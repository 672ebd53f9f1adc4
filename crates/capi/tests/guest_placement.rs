//! libnumaff's placements in real multi-node kernels (QEMU guests of 2, 4 and 6 nodes): a C program
//! linked against libnumaff (tests/c/placement.c) applies each policy to an array, asks the kernel
//! where every page is (move_pages with nodes = NULL), and the pages must be exactly where the pure
//! page -> node functions of numaff::map put them; changing the policy moves the pages (and the data
//! survives); bind_block puts each thread's block on the node the thread actually runs on.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;

use numaff::map;
use numaff_testvm::Guest;

const NPAGES: u64 = 64;

struct Run {
    nodes: Vec<u32>,
    cpus: u32,
    policies: BTreeMap<String, Vec<i32>>,
    data: BTreeMap<String, i64>,
    migrated: BTreeMap<String, i64>,
    /// round (THREAD: pin schedule, UTHREAD: user mapping, OSTHREAD: OS schedule) -> thread ->
    /// its line
    threads: BTreeMap<String, BTreeMap<u32, ThreadLine>>,
    gsum: Option<i64>,
}

/// THREAD t rc R cpu C node N predicted P allowed K
#[derive(Debug, Clone, Copy)]
struct ThreadLine {
    rc: i32,
    cpu: u32,
    node: u32,
    predicted: i32,
    allowed: u32,
}

fn parse(out: &str) -> Run {
    let mut r = Run {
        nodes: Vec::new(),
        cpus: 0,
        policies: BTreeMap::new(),
        data: BTreeMap::new(),
        migrated: BTreeMap::new(),
        threads: BTreeMap::new(),
        gsum: None,
    };
    for line in out.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.first().copied() {
            Some("NODES") => r.nodes = w[2..].iter().map(|n| n.parse().unwrap()).collect(),
            Some("CPUS") => r.cpus = w[1].parse().unwrap(),
            Some("POLICY") => {
                let name = w[1].trim_end_matches(':').to_string();
                r.policies
                    .insert(name, w[2..].iter().map(|n| n.parse().unwrap()).collect());
            }
            Some("DATA") => {
                r.data.insert(w[1].into(), w[2].parse().unwrap());
            }
            Some("MIGRATED") => {
                r.migrated.insert(w[1].into(), w[2].parse().unwrap());
            }
            Some(round @ ("THREAD" | "UTHREAD" | "OSTHREAD")) => {
                r.threads.entry(round.to_string()).or_default().insert(
                    w[1].parse().unwrap(),
                    ThreadLine {
                        rc: w[3].parse().unwrap(),
                        cpu: w[5].parse().unwrap(),
                        node: w[7].parse().unwrap(),
                        predicted: w[9].parse().unwrap(),
                        allowed: w[11].parse().unwrap(),
                    },
                );
            }
            Some("GSUM") => r.gsum = Some(w[1].parse().unwrap()),
            _ => {}
        }
    }
    r
}

fn expect(r: &Run, name: &str, f: impl Fn(u64) -> u32, out: &str) {
    let got = r
        .policies
        .get(name)
        .unwrap_or_else(|| panic!("no {name} in guest output:\n{out}"));
    // Every test array has NPAGES pages but the 2-D one of the column migration (8 x 4 pages).
    let n = if name.starts_with("migrate_cols") {
        32
    } else {
        NPAGES
    };
    let want: Vec<i32> = (0..n).map(|i| r.nodes[f(i) as usize] as i32).collect();
    assert_eq!(
        got, &want,
        "{name}: pages (left) differ from the prediction\n{out}"
    );
}

fn check_guest(nodes: usize, cpus_per_node: usize) {
    // In the target dir, whose path the guest mirrors (the program's rpath points there).
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let exe = dir.path().join("placement");
    common::compile(
        &common::crate_dir().join("tests/c/placement.c"),
        &exe,
        &["-lpthread"],
    );
    let guest = Guest::new(nodes, cpus_per_node, 128).file(&exe, "/placement");
    let run = guest.run(&["/placement"]).unwrap_or_else(|e| panic!("{e}"));
    let out = run.output.as_str();
    assert_eq!(run.exit_code, 0, "guest output:\n{out}");
    assert!(out.contains("DONE"), "{out}");
    let r = parse(out);
    let m = nodes as u32;
    assert_eq!(r.nodes, (0..m).collect::<Vec<_>>(), "{out}");
    assert_eq!(r.cpus as usize, nodes * cpus_per_node, "{out}");

    expect(&r, "cyclic", |i| map::cyclic(i, m), out);
    expect(&r, "skew_mapp", |i| map::skew_mapp(i, m), out);
    expect(&r, "prime_mapp", |i| map::prime_mapp(i, m), out);
    expect(&r, "cyclic_block3", |i| map::cyclic_block(i, 3, m), out);
    expect(&r, "random42", |i| map::random(i, 42, m), out);
    expect(&r, "random_block4", |i| map::random_block(i, 4, 42, m), out);
    expect(&r, "bind_all_last", |_| m - 1, out);
    expect(
        &r,
        "migrate_8_16_first",
        |i| if (8..16).contains(&i) { 0 } else { m - 1 },
        out,
    );
    expect(&r, "bind_all_last_first", |_| m - 1, out);
    expect(&r, "skew_mapp_fresh", |i| map::skew_mapp(i, m), out);

    // bind_block: T threads, blocks of ceil(64 / T) pages; thread t's block on the node thread t
    // really runs on after numaff_bind_thread pinned it: under the pin schedule, and under the
    // user's mapping (thread t on cpu T-1-t).
    let t = r.cpus;
    let block = map::auto_block_rows(NPAGES, t);
    for (round, policy) in [("THREAD", "bind_block"), ("UTHREAD", "bind_block_user")] {
        let threads = &r.threads[round];
        assert_eq!(threads.len() as u32, t, "{round}: {out}");
        for (th, l) in threads {
            assert_eq!(l.rc, 0, "{round} thread {th}: {out}");
            assert_eq!(l.allowed, 1, "{round} thread {th} is not pinned: {out}");
            assert_eq!(
                l.node as i32, l.predicted,
                "{round} thread {th} runs elsewhere: {out}"
            );
            if round == "UTHREAD" {
                assert_eq!(
                    l.cpu,
                    t - 1 - th,
                    "thread {th} not on the user's cpu: {out}"
                );
            }
        }
        let got = &r.policies[policy];
        for i in 0..NPAGES {
            let th = map::bind_block(i, 4096, 4096, block, t);
            assert_eq!(
                got[i as usize] as u32, threads[&th].node,
                "{policy}: page {i} of thread {th}'s block is not on its node\n{out}"
            );
        }
        // With one thread per cpu and cpus spread over all nodes, every node holds a block.
        for n in 0..m {
            assert!(
                got.contains(&(n as i32)),
                "{policy}: node {n} holds no block: {out}"
            );
        }
    }
    // The pin schedule puts the threads (as many as cpus, each its own core here) on distinct cpus.
    let pinned: std::collections::BTreeSet<u32> =
        r.threads["THREAD"].values().map(|l| l.cpu).collect();
    assert_eq!(pinned.len() as u32, t, "one thread per cpu: {out}");
    // cyclic_block with no block size: rows / threads (64 / T pages) per block.
    expect(
        &r,
        "cyclic_block_auto",
        |i| map::cyclic_block(i, map::auto_block_rows(NPAGES, t), m),
        out,
    );
    // The statistics list the fresh skew_mapp array with the pages per node the kernel reports.
    let fresh = &r.policies["skew_mapp_fresh"];
    let per_node: Vec<String> = r
        .nodes
        .iter()
        .filter_map(|n| {
            let c = fresh.iter().filter(|x| **x == *n as i32).count();
            (c > 0).then(|| format!("node{n} {c}"))
        })
        .collect();
    let stats = format!(
        "[64] x 4096 B, 64 pages, skew_mapp: {}",
        per_node.join(", ")
    );
    assert!(out.contains(&stats), "no '{stats}' in\n{out}");
    // The user's mapping reverses the threads, so the blocks are where the pin schedule's were,
    // in reverse order of threads: the two placements differ.
    assert_ne!(
        r.policies["bind_block"], r.policies["bind_block_user"],
        "{out}"
    );
    // The OS schedule pins nothing: every cpu stays allowed to every thread.
    for (th, l) in &r.threads["OSTHREAD"] {
        assert_eq!((l.rc, l.allowed), (0, t), "OS schedule, thread {th}: {out}");
    }

    // Columns 512.. of 8 rows x 4 pages, split over (last node, first node): pages 1 and 2 of
    // each row to the last node, page 3 to the first, page 0 still cyclic; the data survived.
    let cols: BTreeMap<u64, u32> = map::column_pages(8, 16384, 8, 512, 1536, 2, 4096)
        .into_iter()
        .collect();
    expect(
        &r,
        "migrate_cols_512",
        |i| match cols.get(&i) {
            Some(0) => m - 1,
            Some(_) => 0,
            None => map::cyclic(i, m),
        },
        out,
    );
    assert!(r.policies["migrate_cols_512"][..32]
        .iter()
        .enumerate()
        .all(|(i, n)| match i % 4 {
            0 => *n == (i as u32 % m) as i32,
            3 => *n == 0,
            _ => *n == (m - 1) as i32,
        }));
    let gsum: i64 = (0..8)
        .flat_map(|r| (0..2048).step_by(512).map(move |c| r + c))
        .sum();
    assert_eq!(r.gsum, Some(gsum), "{out}");

    // Changing the policy moved pages; the data written after the first placement survived.
    let order = [
        "cyclic",
        "skew_mapp",
        "prime_mapp",
        "cyclic_block3",
        "random42",
        "random_block4",
        "bind_all_last",
        "migrate_8_16_first",
        "bind_all_last_first",
    ];
    assert_eq!(
        r.migrated["cyclic"], 0,
        "fresh pages are faulted in, not moved: {out}"
    );
    for w in order.windows(2) {
        let moved = r.migrated[w[1]] - r.migrated[w[0]];
        let differ = r.policies[w[0]]
            .iter()
            .zip(&r.policies[w[1]])
            .filter(|(a, b)| a != b)
            .count() as i64;
        assert_eq!(
            moved, differ,
            "{} -> {}: pages moved vs pages whose node changed\n{out}",
            w[0], w[1]
        );
    }
    let sum: i64 = (0..NPAGES as i64).map(|i| i % 100).sum();
    for name in order {
        assert_eq!(r.data[name], sum, "data after {name}\n{out}");
    }
    assert!(out.contains("numaff: nodes in use"), "{out}");
}

#[test]
fn placement_in_a_two_node_guest() {
    check_guest(2, 2);
}

#[test]
fn placement_in_a_four_node_guest() {
    check_guest(4, 1);
}

/// With 6 nodes prime_mapp uses P = 7 virtual nodes and skew_mapp's period is 6, neither a power
/// of two.
#[test]
fn placement_in_a_six_node_guest() {
    check_guest(6, 1);
}

/// bind_all "fills the first node before the next": in a 2-node x 256 MiB guest, a 320 MiB array
/// bound to nodes {0, 1} does not fit in node 0's free memory; its pages must be a prefix on node 0
/// (as much as node 0 holds) and the rest on node 1, every page present.
#[test]
fn bind_all_fills_the_first_node_before_the_next() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let exe = dir.path().join("fill");
    common::compile(&common::crate_dir().join("tests/c/fill.c"), &exe, &[]);
    let guest = Guest::new(2, 1, 256).timeout(120).file(&exe, "/fill");
    let run = guest
        .run(&["/fill", "320"])
        .unwrap_or_else(|e| panic!("{e}"));
    let out = run.output.as_str();
    assert_eq!(run.exit_code, 0, "{out}");
    assert!(out.contains("BIND_ALL rc 0 "), "{out}");
    let line = out
        .lines()
        .find(|l| l.starts_with("FILL "))
        .unwrap_or_else(|| panic!("{out}"));
    let w: Vec<i64> = line
        .split_whitespace()
        .skip(1)
        .step_by(2)
        .zip(line.split_whitespace().skip(2).step_by(2))
        .map(|(_, v)| v.parse().unwrap())
        .collect();
    println!("{line}");
    let [pages, node0, node1, other, last0, first1] = w[..] else {
        panic!("{line}")
    };
    assert_eq!(pages, 320 * 256, "{line}");
    assert_eq!(other, 0, "every page present on node 0 or 1: {line}");
    assert_eq!(node0 + node1, pages, "{line}");
    // Node 0 (256 MiB, less the guest's own memory) cannot hold 320 MiB: both nodes are used.
    assert!(node0 > pages / 4 && node1 > 0, "{line}");
    // Node 0's pages are exactly the first ones.
    assert_eq!((last0, first1), (node0 - 1, node0), "{line}\n{out}");
}
