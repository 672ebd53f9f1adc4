//! Mappings that ignore communication, as runtimes offer them (003 §A.1.5, 002 §2.3.3 Fig. 2.5):
//! compact, scatter, round-robin, packed and a seeded random mapping.
//!
//! Every baseline is an order of the PUs; task `i` goes to `order[i mod P]`. With more tasks than
//! PUs the order wraps around, so every PU gets `⌊n/P⌋` or `⌈n/P⌉` tasks; with fewer, the first `n`
//! PUs of the order are used and no PU gets two tasks.

use numaff_machine::rng::SplitMix64;

use crate::tree::Tree;
use crate::Placement;

fn wrap(order: &[u32], n: usize) -> Placement {
    if order.is_empty() {
        return Vec::new();
    }
    (0..n).map(|i| order[i % order.len()]).collect()
}

/// Compact (003 §A.1.5: "neighboring threads are mapped close to each other in the hardware
/// hierarchy"): PUs in tree order, so SMT siblings, then cores of a cache, then packages fill up.
pub fn compact(tree: &Tree, n: usize) -> Placement {
    wrap(tree.pus(), n)
}

/// Child index of every leaf at every level below the root (position among its siblings).
fn paths(tree: &Tree) -> Vec<Vec<usize>> {
    (0..tree.pu_count())
        .map(|leaf| {
            (1..tree.levels())
                .map(|l| {
                    let v = tree.vertex_of(l, leaf);
                    let parent = tree.vertex_of(l - 1, leaf);
                    v - tree.children(l - 1, parent).start
                })
                .collect()
        })
        .collect()
}

/// Scatter (003 §A.1.5: "distributes threads as evenly as possible within the machine", as
/// KMP_AFFINITY=scatter): consecutive tasks go to different top-level subtrees first, then to
/// different children within them: PUs sorted by their path of child indices read bottom-up.
pub fn scatter(tree: &Tree, n: usize) -> Placement {
    let paths = paths(tree);
    let mut order: Vec<usize> = (0..tree.pu_count()).collect();
    order.sort_by(|&a, &b| {
        let ka: Vec<usize> = paths[a].iter().rev().copied().collect();
        let kb: Vec<usize> = paths[b].iter().rev().copied().collect();
        ka.cmp(&kb).then(a.cmp(&b))
    });
    let pus: Vec<u32> = order.iter().map(|&l| tree.pu(l)).collect();
    wrap(&pus, n)
}

/// Round-robin (003 §A.1.5, "thread 0 is mapped to core 0, thread 1 to core 1, and so on"): PUs in
/// increasing kernel cpu id. This is also the identity mapping the quality tests compare against.
pub fn round_robin(tree: &Tree, n: usize) -> Placement {
    let mut pus = tree.pus().to_vec();
    pus.sort_unstable();
    wrap(&pus, n)
}

/// Packed (002 §2.3.3 Fig. 2.5: "maps the neighboring tasks to the same NUMA node"): nodes filled
/// one after the other; within a node, one PU per core first and SMT siblings after, so that a
/// partly used node spreads its tasks over its cores.
pub fn packed(tree: &Tree, n: usize) -> Placement {
    let nl = tree.node_level();
    let d = tree.depth();
    let mut order: Vec<usize> = (0..tree.pu_count()).collect();
    let rank = |leaf: usize| {
        // position of the leaf among its SMT siblings
        if d == 0 {
            return 0;
        }
        leaf - tree.range(d - 1, tree.vertex_of(d - 1, leaf)).start
    };
    order.sort_by_key(|&leaf| (tree.vertex_of(nl, leaf), rank(leaf), leaf));
    let pus: Vec<u32> = order.iter().map(|&l| tree.pu(l)).collect();
    wrap(&pus, n)
}

/// Random (002 §2.3.3: "the task mapping is randomly generated"): a seeded Fisher-Yates shuffle of
/// the PUs, then wrapped as the other baselines, so it never stacks tasks while a PU is free.
pub fn random(tree: &Tree, n: usize, seed: u64) -> Placement {
    let mut pus = tree.pus().to_vec();
    let mut rng = SplitMix64::new(seed);
    for i in (1..pus.len()).rev() {
        let j = rng.below(i + 1);
        pus.swap(i, j);
    }
    wrap(&pus, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_on_two_by_two_by_two() {
        let m = numaff_machine::spec::resolve("pack:2 core:2 pu:2").unwrap();
        let t = Tree::from_machine(&m);
        assert_eq!(compact(&t, 4), vec![0, 1, 2, 3]);
        assert_eq!(scatter(&t, 8), vec![0, 4, 2, 6, 1, 5, 3, 7]);
        assert_eq!(round_robin(&t, 10), vec![0, 1, 2, 3, 4, 5, 6, 7, 0, 1]);
        assert_eq!(packed(&t, 8), vec![0, 2, 1, 3, 4, 6, 5, 7]);
        let r = random(&t, 8, 7);
        assert_eq!(r, random(&t, 8, 7));
        let mut s = r.clone();
        s.sort_unstable();
        assert_eq!(s, (0..8).collect::<Vec<u32>>());
    }
}
