//! Thread and data placements: every policy places as its name says, and the oracles' page
//! profile counts every access once.

#![allow(clippy::unwrap_used)]

mod common;

use common::{remote_share, sim, sp};
use numaff_machine::catalog as machines;
use numaff_workload::{catalog, placement, DataChoice, ThreadPolicy};

#[test]
fn every_thread_policy_places_as_named() {
    let m = machines::load("kmaf-sim-4x2").unwrap(); // 4 nodes x 2 PUs, cpus 2k, 2k+1 on node k
    let w = sp().with_threads(4);
    let place = |p: &str, seed| {
        placement(&m, &w, &p.parse::<ThreadPolicy>().unwrap(), seed).unwrap()[0].clone()
    };
    let nodes = |c: &[u32]| {
        let mut n: Vec<u32> = c.iter().map(|&c| m.node_of_pu(c).unwrap()).collect();
        n.sort();
        n.dedup();
        n.len()
    };
    let compact = place("compact", 0);
    assert_eq!(nodes(&compact), 2, "compact fills nodes: {compact:?}");
    let scatter = place("scatter", 0);
    assert_eq!(nodes(&scatter), 4, "scatter spreads: {scatter:?}");
    // round-robin (003 §A.1.5): thread i on the i-th PU by kernel cpu id.
    assert_eq!(place("round-robin", 0), vec![0, 1, 2, 3]);
    assert_eq!(place("6,1,4", 0), vec![6, 1, 4, 6]);
    let randoms: Vec<Vec<u32>> = (0..8).map(|s| place("random", s)).collect();
    assert_eq!(randoms[0], place("random", 0), "same seed, same mapping");
    assert!(
        randoms.iter().any(|r| r != &randoms[0]),
        "seeds change it: {randoms:?}"
    );
    let os = place("os", 0);
    let mut distinct = os.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 4, "os spreads for load balance: {os:?}");
    // os moves threads now and then during the run (to an idle PU sharing their last-level
    // cache: 4 threads leave idle cores on the processors); a pinned policy never does.
    let long = catalog::load("nas-sp").unwrap().with_threads(4);
    let moves = |threads: &str, seed| {
        let opts = numaff_workload::RunOptions {
            threads: threads.parse().unwrap(),
            data: DataChoice::FirstTouch,
            seed,
        };
        numaff_workload::run(&m, &long, &opts).unwrap().migrations
    };
    let os_moves: u64 = (0..8).map(|seed| moves("os", seed)).sum();
    println!("os: {os_moves} migrations over 8 runs");
    assert!(os_moves > 0 && moves("compact", 0) == 0);
}

#[test]
fn every_data_policy_places_as_named() {
    let w = sp();
    // compact: threads 0-1 on node 0, ..., 6-7 on node 3.
    let bind = sim(&w, "compact", DataChoice::Bind(3));
    let own: u64 = bind.threads[6..].iter().map(|t| t.remote_accesses).sum();
    let others: u64 = bind.threads[..6].iter().map(|t| t.local_accesses).sum();
    assert_eq!((own, others), (0, 0), "bind:3: local only on node 3");
    let inter = sim(&w, "compact", DataChoice::Interleave);
    let share = remote_share(&inter);
    assert!(
        (0.6..0.9).contains(&share),
        "interleave over 4 nodes: 3/4 remote, got {share}"
    );
    let ol = sim(&w, "compact", DataChoice::OracleLocal);
    let or = sim(&w, "compact", DataChoice::OracleRemote);
    let ft = sim(&w, "compact", DataChoice::FirstTouch);
    println!(
        "remote share: first-touch {:.3}, oracle-local {:.3}, oracle-remote {:.3}, interleave {share:.3}",
        remote_share(&ft),
        remote_share(&ol),
        remote_share(&or)
    );
    assert!(remote_share(&ol) <= remote_share(&ft) + 1e-9);
    assert!(remote_share(&ol) < 0.2 && remote_share(&or) > 0.95);
}

/// The oracles' profile counts a thread's accesses to a page in a row as one run, from batched
/// ops: per page and node it must equal one count per access of the ops' iterator, on every
/// shipped workload (random, swept, shared and huge-paged pages), and the pages come in the order
/// they were first accessed.
#[test]
fn oracle_profile_counts_every_access_once() {
    use numaff_sim::Op;
    use std::collections::HashMap;
    let m = machines::load("kmaf-sim-4x2").unwrap();
    let nodes = m.nodes.len();
    for (i, name) in catalog::names().iter().enumerate() {
        let mut w = catalog::load(name).unwrap().scaled(0.25);
        if i % 2 == 1 {
            w = w.with_huge_pages();
        }
        for p in &w.programs {
            // Threads on cpus of different nodes, so that rows have more than one count.
            let cpus: Vec<u32> = (0..p.threads).map(|t| (t * 3) % 8).collect();
            let shift = if p.huge_pages { 21 } else { 12 };
            let mut naive: HashMap<u64, Vec<u64>> = HashMap::new();
            let mut first_seen = Vec::new();
            for (t, ops) in numaff_workload::thread_ops(p).into_iter().enumerate() {
                let node = m.node_index(m.node_of_pu(cpus[t]).unwrap()).unwrap();
                for op in ops {
                    if let Op::Access(a) = op {
                        let row = naive.entry(a.vaddr >> shift).or_insert_with(|| {
                            first_seen.push(a.vaddr >> shift);
                            vec![0; nodes]
                        });
                        row[node] += 1;
                    }
                }
            }
            let profile = numaff_workload::profile(&m, p, &cpus);
            assert_eq!(profile.len(), naive.len(), "{name}");
            let pages: Vec<u64> = profile.iter().map(|(page, _)| page).collect();
            assert_eq!(pages, first_seen, "{name}: pages in first-access order");
            for (page, counts) in profile.iter() {
                assert_eq!(counts, &naive[&page][..], "{name}: page {page:#x}");
            }
        }
    }
}
