//! Mapping quality: the survey's worked example (003 §2.2.6 Fig. 3), properties of every mapping
//! algorithm on random matrices and random synthetic trees (valid, deterministic, no worse than the
//! identity), locality against known optima, and the latency-weighted cost.
#![allow(clippy::unwrap_used)]

mod common;

use common::random_metrics;
use numaff_machine::{spec, Machine};
use numaff_policy::quality::hop_cost;
use numaff_policy::{map, Algorithm, CommMatrix, MapInput, Placement, Tree};
use proptest::prelude::*;

/// 003 §2.2.6 Fig. 3a: pairs (0,4) and (1,3) exchange 100 each, thread 2 nothing.
fn survey_matrix() -> CommMatrix {
    let mut c = CommMatrix::new(5);
    c.add_pair(0, 4, 100.0);
    c.add_pair(1, 3, 100.0);
    c
}

fn package(m: &Machine, pu: u32) -> u32 {
    m.package_of_pu(pu).unwrap()
}

#[test]
fn survey_fig3_example_locality_and_balance() {
    // Fig. 3b: 2 processors x 2 cores x 2 SMT; each processor has a cache shared by its cores.
    let m = spec::resolve("pack:2 l3:1 core:2 pu:2").unwrap();
    let c = survey_matrix();
    let input = MapInput::with_comm(&m, &c);
    let tree = Tree::from_machine(&m);
    let shares_l3 = |a: u32, b: u32| {
        m.caches
            .iter()
            .any(|k| k.level == 3 && k.cpus.contains(a) && k.cpus.contains(b))
    };
    for algo in [Algorithm::Locality, Algorithm::Eagermap] {
        let p = map(algo, &input).unwrap();
        // each pair shares a processor's cache (in fact a core); most communication on one processor
        assert!(
            shares_l3(p[0], p[4]) && shares_l3(p[1], p[3]),
            "{algo}: {p:?}"
        );
        assert_eq!(package(&m, p[0]), package(&m, p[1]), "{algo}: {p:?}");
        assert_eq!(
            hop_cost(&tree, &c, &p),
            200.0,
            "{algo}: both pairs on SMT siblings"
        );
    }
    let p = map(Algorithm::Balance, &input).unwrap();
    assert!(
        shares_l3(p[0], p[4]) && shares_l3(p[1], p[3]),
        "balance: {p:?}"
    );
    assert_ne!(
        package(&m, p[0]),
        package(&m, p[1]),
        "balance spreads the pairs: {p:?}"
    );
    // the plain synthetic machine without cache objects gives the same picture
    let m2 = spec::resolve("pack:2 core:2 pu:2").unwrap();
    let p = map(Algorithm::Balance, &MapInput::with_comm(&m2, &c)).unwrap();
    assert_ne!(package(&m2, p[0]), package(&m2, p[1]));
    assert_eq!(package(&m2, p[0]), package(&m2, p[4]));
}

/// Random synthetic machines: 1-3 levels above cores, SMT 1-2, sometimes NUMA nodes and caches.
fn machines() -> impl Strategy<Value = String> {
    (
        1usize..=3,
        1usize..=3,
        1usize..=4,
        1usize..=2,
        any::<bool>(),
    )
        .prop_map(|(pk, grp, cores, pu, numa)| {
            let node = if numa { " numa:1" } else { "" };
            let l3 = if grp > 1 {
                format!(" l3:{grp}")
            } else {
                String::new()
            };
            format!("pack:{pk}{node}{l3} core:{cores} pu:{pu}")
        })
}

fn matrix(n: usize, seed: u64) -> CommMatrix {
    let mut rng = numaff_machine::rng::SplitMix64::new(seed);
    let mut c = CommMatrix::new(n);
    for i in 0..n {
        for j in i + 1..n {
            if rng.below(3) == 0 {
                c.add_pair(i, j, rng.below(1000) as f64);
            }
        }
    }
    c
}

/// Valid: every task on a PU of the machine, no PU with two tasks while another is free, and with
/// more tasks than PUs no PU above ⌈n/P⌉.
fn check_valid(m: &Machine, p: &Placement, n: usize, what: &str) {
    let pus = m.pus();
    assert_eq!(p.len(), n, "{what}");
    let mut count = std::collections::BTreeMap::new();
    for &x in p {
        assert!(pus.contains(x), "{what}: PU {x} not in the machine");
        *count.entry(x).or_insert(0usize) += 1;
    }
    let max = count.values().copied().max().unwrap_or(0);
    let used = count.len();
    if max > 1 {
        assert_eq!(
            used,
            pus.len(),
            "{what}: a PU holds {max} tasks while another is free: {p:?}"
        );
    }
    assert!(max <= n.div_ceil(pus.len()), "{what}: {p:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn every_algorithm_valid_deterministic_and_no_worse_than_identity(
        desc in machines(), n in 1usize..40, seed in any::<u64>()
    ) {
        let m = spec::resolve(&desc).unwrap();
        let tree = Tree::from_machine(&m);
        let c = matrix(n, seed);
        let mut input = MapInput::with_comm(&m, &c);
        input.seed = seed;
        let current = numaff_policy::baselines::round_robin(&tree, n);
        let metrics = random_metrics(n, seed);
        input.current = Some(&current);
        input.metrics = Some(&metrics);
        let identity = map(Algorithm::RoundRobin, &input).unwrap();
        let id_cost = hop_cost(&tree, &c, &identity);
        for algo in Algorithm::ALL {
            let p = map(algo, &input).unwrap();
            check_valid(&m, &p, n, &format!("{algo} on {desc} with {n} tasks"));
            prop_assert_eq!(&p, &map(algo, &input).unwrap(), "{} not deterministic", algo);
            if matches!(algo, Algorithm::Eagermap | Algorithm::Locality | Algorithm::Deloc) {
                let cost = hop_cost(&tree, &c, &p);
                prop_assert!(cost <= id_cost + 1e-6, "{} {} > identity {}", algo, cost, id_cost);
            }
        }
    }
}

#[test]
fn ondeloc_keeps_pairs_on_their_current_nodes() {
    // 2 nodes x 4 PUs. Pairs (0,1) 50, (2,3) 40, (4,5) 30; current: 0,1 on node 1, 2 on node 0 and
    // 3 on node 1, 4 and 5 on node 0.
    let m = spec::resolve("pack:2 numa:1 core:4 pu:1").unwrap();
    let node = |pu: u32| m.node_of_pu(pu).unwrap();
    let mut c = CommMatrix::new(6);
    c.add_pair(0, 1, 50.0);
    c.add_pair(2, 3, 40.0);
    c.add_pair(4, 5, 30.0);
    let current: Placement = vec![4, 5, 0, 6, 1, 2];
    let mut input = MapInput::with_comm(&m, &c);
    input.current = Some(&current);
    let p = map(Algorithm::Ondeloc, &input).unwrap();
    for t in 0..6 {
        assert_eq!(
            node(p[t]),
            node(current[t]),
            "task {t} left its node: {p:?}"
        );
    }
    // nobody even changes PU: every current PU is still free when its task comes
    assert_eq!(p, current);
    // node 1 full (4 tasks there now): the pair (4,5) whose nodes have no room goes round-robin
    let current: Placement = vec![4, 5, 6, 7, 0, 4];
    input.current = Some(&current);
    let p = map(Algorithm::Ondeloc, &input).unwrap();
    assert_eq!(&p[..4], &[4, 5, 6, 7], "pairs with room stay: {p:?}");
    assert_eq!(node(p[4]), 0);
    assert_eq!(
        node(p[5]),
        0,
        "(4,5): node 1 is full, so both go to the next node with room"
    );
}

#[test]
fn deloc_spreads_a_group_and_keeps_pairs_together() {
    // one group of two concurrent pairs: DeLocMap puts them on different nodes, each pair together
    let m = spec::resolve("pack:2 numa:1 core:2 pu:2").unwrap();
    let node = |pu: u32| m.node_of_pu(pu).unwrap();
    let mut c = CommMatrix::new(4);
    c.add_pair(0, 1, 10.0);
    c.add_pair(2, 3, 10.0);
    let groups = vec![vec![
        numaff_policy::deloc::Pair {
            a: 0,
            b: 2,
            comm: 10.0,
        },
        numaff_policy::deloc::Pair {
            a: 1,
            b: 3,
            comm: 9.0,
        },
    ]];
    let mut input = MapInput::with_comm(&m, &c);
    input.groups = Some(&groups);
    let tree = Tree::from_machine(&m);
    // Algorithm 1 alone: L_pair (0,2) = 10/19 > (1,3) = 9/19; (0,2) on node 0, (1,3) on the next node
    let raw = numaff_policy::deloc::delocmap_unchecked(&tree, &c, Some(&groups), 4);
    assert_eq!(node(raw[0]), node(raw[2]), "{raw:?}");
    assert_eq!(node(raw[1]), node(raw[3]), "{raw:?}");
    assert_ne!(node(raw[0]), node(raw[1]), "{raw:?}");
    assert_eq!(raw, vec![0, 4, 1, 5], "pair members on SMT siblings");
    // with the safeguard: that costs 60 hops against the matrix, the identity 20, so the identity
    let p = map(Algorithm::Deloc, &input).unwrap();
    assert_eq!(hop_cost(&tree, &c, &p), 20.0);
    // without groups, every pair of the matrix is one group: (0,1) and (2,3) on different nodes
    let raw = numaff_policy::deloc::delocmap_unchecked(&tree, &c, None, 4);
    assert_eq!(raw, vec![0, 1, 4, 5]);
}

/// A chain 0–1–…–(n−1) (weight 100 per link) whose thread ids are shuffled by a seeded
/// permutation; returns the matrix and `perm` (chain position → thread id).
fn shuffled_chain(n: usize, seed: u64) -> (CommMatrix, Vec<usize>) {
    let mut rng = numaff_machine::rng::SplitMix64::new(seed);
    let mut perm: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        perm.swap(i, rng.below(i + 1));
    }
    let mut c = CommMatrix::new(n);
    for k in 0..n - 1 {
        c.add_pair(perm[k], perm[k + 1], 100.0);
    }
    (c, perm)
}

/// Hop cost at most Scotch's on chains: on 4x8x2 with 4 and 16 threads per PU, greedy grouping
/// (eagermap) fragments a shuffled chain (2.0-2.4x Scotch's cost); locality (its dual recursive
/// bipartitioning candidate) must place it as well as the chain
/// order laid out in blocks of consecutive PUs — near-optimal, and what Scotch finds — and
/// clearly better than the greedy grouping.
#[test]
fn locality_beats_greedy_on_shuffled_chain_4x8x2() {
    let m = spec::resolve("pack:4 core:8 pu:2").unwrap();
    let tree = Tree::from_machine(&m);
    let p_n = tree.pu_count();
    for n in [256usize, 1024] {
        let (c, perm) = shuffled_chain(n, 7 + n as u64);
        // chain position k on leaf k / (n / P): every PU holds a run of consecutive links
        let mut blocks: Placement = vec![0; n];
        for (k, &t) in perm.iter().enumerate() {
            blocks[t] = tree.pu(k / (n / p_n));
        }
        let block_cost = hop_cost(&tree, &c, &blocks);
        let input = MapInput::with_comm(&m, &c);
        let local = map(Algorithm::Locality, &input).unwrap();
        check_valid(&m, &local, n, "locality on a shuffled chain");
        let greedy = map(Algorithm::Eagermap, &input).unwrap();
        let (lc, gc) = (hop_cost(&tree, &c, &local), hop_cost(&tree, &c, &greedy));
        assert!(
            lc <= block_cost + 1e-6,
            "n={n}: locality {lc} > chain blocks {block_cost}"
        );
        assert!(
            lc < 0.7 * gc,
            "n={n}: locality {lc} not well below greedy {gc}"
        );
    }
}

/// Hop cost at most Scotch's on master-worker matrices: a master exchanging 100 with every worker
/// and the workers 10 with the next one, one task per PU, thread ids shuffled. The optimum is known:
/// the master's own cost is the same on every PU (all PUs see the same distances), and at every
/// tree level the workers' chain must cross from each vertex holding a worker to the next, so it is
/// cut at least (vertices holding a worker − 1) times per level; the chain order laid out on
/// consecutive PUs after the master's reaches both bounds. A regression test: without stripping
/// the hub's edges, locality cut the chain once more at the package level (18280 against 18260 on
/// 4x8x2: the master's edges made every imbalance of the coarse bisections worth more than the
/// chain); it must find the optimum.
#[test]
fn locality_optimal_on_shuffled_master_worker() {
    for (desc, n) in [("pack:4 core:8 pu:2", 64usize), ("pack:2 core:12 pu:2", 48)] {
        let m = spec::resolve(desc).unwrap();
        let tree = Tree::from_machine(&m);
        assert_eq!(tree.pu_count(), n);
        for seed in 1..=4u64 {
            // perm: position → thread id; position 0 is the master, 1.. the chain of workers
            let (_, perm) = shuffled_chain(n, seed * 0x9e37 + n as u64);
            let mut c = CommMatrix::new(n);
            for k in 1..n {
                c.add_pair(perm[0], perm[k], 100.0);
                if k + 1 < n {
                    c.add_pair(perm[k], perm[k + 1], 10.0);
                }
            }
            let mut laid_out: Placement = vec![0; n];
            for (k, &t) in perm.iter().enumerate() {
                laid_out[t] = tree.pu(k);
            }
            let optimum = hop_cost(&tree, &c, &laid_out);
            let input = MapInput::with_comm(&m, &c);
            let local = map(Algorithm::Locality, &input).unwrap();
            check_valid(&m, &local, n, "locality on a shuffled master-worker matrix");
            let lc = hop_cost(&tree, &c, &local);
            assert!(
                (lc - optimum).abs() < 1e-6,
                "{desc} seed {seed}: locality {lc}, optimum {optimum}"
            );
        }
    }
}

/// Hop cost at most Scotch's on 2-D stencils: a 16x16 five-point stencil with shuffled
/// thread ids on 4x8x2 (4 threads per PU). Laid out in blocks — an 8x8 quadrant per package, a
/// 4-wide, 2-tall tile per core, its 2x2 halves per PU — it costs 41600. Without the V-cycle,
/// locality cuts a shuffled 8x8 quadrant in halves along a staircase (10 edges instead of 8) and
/// costs more (42900 and 42200 on these two shuffles); with it, it reaches the blocks on them (not
/// on every shuffle).
#[test]
fn locality_shuffled_2d_stencil_as_good_as_blocks() {
    let m = spec::resolve("pack:4 core:8 pu:2").unwrap();
    let tree = Tree::from_machine(&m);
    let (side, n) = (16usize, 256usize);
    for seed in [15u64, 29] {
        let (_, perm) = shuffled_chain(n, seed * 0x51ed + 3);
        let mut c = CommMatrix::new(n);
        let mut blocks: Placement = vec![0; n];
        for r in 0..side {
            for col in 0..side {
                let k = r * side + col;
                if col + 1 < side {
                    c.add_pair(perm[k], perm[k + 1], 100.0);
                }
                if r + 1 < side {
                    c.add_pair(perm[k], perm[k + side], 100.0);
                }
                let package = (r / 8) * 2 + col / 8;
                let core = ((r % 8) / 2) * 2 + (col % 8) / 4;
                let pu = (col % 4) / 2;
                blocks[perm[k]] = tree.pu(package * 16 + core * 2 + pu);
            }
        }
        let block_cost = hop_cost(&tree, &c, &blocks);
        assert!((block_cost - 41600.0).abs() < 1e-6, "{block_cost}");
        let input = MapInput::with_comm(&m, &c);
        let local = map(Algorithm::Locality, &input).unwrap();
        check_valid(&m, &local, n, "locality on a shuffled 2-D stencil");
        let lc = hop_cost(&tree, &c, &local);
        assert!(
            lc <= block_cost + 1e-6,
            "seed {seed}: locality {lc} > blocks {block_cost}"
        );
    }
}

/// A matrix of `kind`: 0 a chain, 1 a 2-D stencil, 2 random partners, 3 uniform all-to-all.
fn sparse_matrix(n: usize, kind: u8, seed: u64) -> CommMatrix {
    let mut rng = numaff_machine::rng::SplitMix64::new(seed);
    let mut c = CommMatrix::new(n);
    match kind {
        0 => (0..n - 1).for_each(|i| c.add_pair(i, i + 1, 1.0 + rng.below(100) as f64)),
        1 => {
            let w = (n as f64).sqrt().ceil() as usize;
            for i in 0..n {
                if i % w + 1 < w && i + 1 < n {
                    c.add_pair(i, i + 1, 10.0);
                }
                if i + w < n {
                    c.add_pair(i, i + w, 10.0);
                }
            }
        }
        2 => {
            for i in 0..n {
                for _ in 0..1 + rng.below(4) {
                    let j = rng.below(n);
                    if j != i {
                        c.add_pair(i, j, 1.0 + rng.below(50) as f64);
                    }
                }
            }
        }
        _ => {
            for i in 0..n {
                for j in i + 1..n {
                    c.add_pair(i, j, 3.0);
                }
            }
        }
    }
    // shuffle the ids
    let mut perm: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        perm.swap(i, rng.below(i + 1));
    }
    let mut out = CommMatrix::new(n);
    for i in 0..n {
        for j in 0..n {
            out.set(perm[i], perm[j], c.get(i, j));
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// Sparse matrices (chains, 2-D stencils, random partners) and uniform all-to-all matrices,
    /// with up to 5 tasks per PU: the paths the small dense proptest above does not reach
    /// (multilevel coarsening, the uniform short cut) still give valid, deterministic placements
    /// no worse than the identity.
    #[test]
    fn sparse_and_uniform_valid_deterministic_and_no_worse_than_identity(
        desc in machines(), per_pu in 0.3f64..5.0, kind in 0u8..4, seed in any::<u64>()
    ) {
        let m = spec::resolve(&desc).unwrap();
        let tree = Tree::from_machine(&m);
        let n = ((tree.pu_count() as f64 * per_pu).round() as usize).max(2);
        let c = sparse_matrix(n, kind, seed);
        let input = MapInput::with_comm(&m, &c);
        let id_cost = hop_cost(&tree, &c, &map(Algorithm::RoundRobin, &input).unwrap());
        for algo in [Algorithm::Eagermap, Algorithm::Locality, Algorithm::Balance] {
            let p = map(algo, &input).unwrap();
            check_valid(&m, &p, n, &format!("{algo} on {desc} with {n} tasks, kind {kind}"));
            prop_assert_eq!(&p, &map(algo, &input).unwrap(), "{} not deterministic", algo);
            if algo != Algorithm::Balance {
                let cost = hop_cost(&tree, &c, &p);
                prop_assert!(cost <= id_cost + 1e-6, "{} {} > identity {}", algo, cost, id_cost);
            }
        }
    }
}

/// A regression test: NIMAR chose two single moves against the last free core of node 0 (both
/// scored against the current placement), which put two tasks on one PU while node 0 still had a
/// free one (found by the property test above); a single move needs a free core left on its
/// destination once the better migrations are taken.
#[test]
fn nimar_moves_never_overfill_a_node() {
    let desc = "pack:2 numa:1 l3:2 core:4 pu:1";
    let (n, seed) = (15, 7938300441429320277u64);
    let m = spec::resolve(desc).unwrap();
    let tree = Tree::from_machine(&m);
    let c = matrix(n, seed);
    let mut input = MapInput::with_comm(&m, &c);
    input.seed = seed;
    let current = numaff_policy::baselines::round_robin(&tree, n);
    let metrics = random_metrics(n, seed);
    input.current = Some(&current);
    input.metrics = Some(&metrics);
    let p = map(Algorithm::Nimar, &input).unwrap();
    check_valid(&m, &p, n, "nimar");
    assert_ne!(p, current, "NIMAR still migrates here");
}

/// The latency-weighted cost: each pair's weight times the mean of the two
/// directions of the latency matrix between their nodes, the SLIT distances when no latency was
/// measured, and no figure without either. Shares inside a cache count pairs under a shared L3.
#[test]
fn latency_cost_and_cache_share_by_hand() {
    use numaff_policy::quality::{latency_cost, shares, tasks_per_node, tasks_per_pu};
    let mut m = spec::resolve("pack:2 numa:1 l3:1 core:2 pu:1").unwrap();
    let mut c = CommMatrix::new(3);
    c.add_pair(0, 1, 10.0); // same node
    c.add_pair(0, 2, 4.0); // across nodes
    let p: Placement = vec![0, 1, 2];
    m.distances = None;
    m.latency_ns = None;
    assert_eq!(latency_cost(&m, &c, &p), None);
    m.distances = Some(vec![vec![10, 21], vec![21, 10]]);
    assert_eq!(latency_cost(&m, &c, &p), Some(10.0 * 10.0 + 4.0 * 21.0));
    // asymmetric measured latencies: 0->1 130 ns, 1->0 150 ns, so 140 across
    m.latency_ns = Some(vec![vec![90.0, 130.0], vec![150.0, 95.0]]);
    assert_eq!(latency_cost(&m, &c, &p), Some(10.0 * 90.0 + 4.0 * 140.0));
    let s = shares(&m, &c, &p);
    assert_eq!(s.core, 0.0);
    assert_eq!(s.cache, Some(10.0 / 14.0));
    assert_eq!(s.node, 10.0 / 14.0);
    let tree = Tree::from_machine(&m);
    assert_eq!(
        tasks_per_pu(&tree, &p),
        vec![(0, 1), (1, 1), (2, 1), (3, 0)]
    );
    let ids: Vec<u32> = m.nodes.iter().map(|n| n.id).collect();
    assert_eq!(tasks_per_node(&m, &p), vec![(ids[0], 2), (ids[1], 1)]);
}
