//! Dual recursive bipartitioning of the communication graph along the hardware tree: the second
//! candidate of the Locality mapping, which keeps long runs of communicating tasks together.
//!
//! The tree hop cost (003 §2.2.5: the hierarchy as a tree) is the sum, over the tree levels, of the
//! weight cut between the vertices of that level. The tree is therefore split top-down, as Scotch's
//! static mapper does (Pellegrini, "dual recursive bipartitioning"): the tasks of a vertex are
//! split among its children, two halves of the children at a time, with part sizes exactly the
//! task slots below each half, and every split minimises the weight it cuts. A split
//! ([`multilevel`]) is a multilevel bisection (Karypis & Kumar's scheme, written here from its
//! description), in stages as METIS has them:
//!
//! - [`coarsen`]: heavy-edge matching and contraction, down to about [`multilevel::COARSE`]
//!   vertices;
//! - [`initial`]: several greedy graph-growing starts (from a pseudo-peripheral vertex and evenly
//!   spaced seeds, plus the tasks' given order) partition the coarsest graph; splits of at most
//!   [`EXACT`] tasks are enumerated instead;
//! - [`fm`]: Fiduccia–Mattheyses passes with the balance constraint refine the split at every
//!   level on the way back;
//! - [`kway`]: a vertex with more than two children then gets a k-way refinement (Kernighan–Lin-
//!   style pairwise exchanges between its children), since the level's share of the hop cost is
//!   the k-way cut, which the chain of bisections only approximates; 3-8 siblings holding two
//!   tasks each are paired directly instead ([`pairs`], a maximum-weight pairing: exactly that
//!   cut).
//!
//! A split into equal halves first strips the uniform part of hub edges
//! ([`multilevel::strip_hubs`], exact), and on request small coarsened splits get one more V-cycle
//! ([`multilevel::vcycle`]). On an expander (every bisection cuts a large share of the weight:
//! random sparse matrices) the splits search less ([`Effort`]: fewer starts, one FM pass per level,
//! shorter FM tails). Deterministic: no randomness, ties go to the lower index.

mod coarsen;
mod fm;
mod initial;
mod kway;
mod multilevel;
mod pairs;

use crate::graph::Graph;
use crate::tree::Tree;

use fm::GainHeap;
use kway::{kway_refine, KWork};
use multilevel::bisect;
use pairs::{best_pairs, PAIRED};

/// FM passes per level at most.
const PASSES: usize = 3;
/// Graph-growing starts from evenly spaced seeds on the coarsest graph (plus the order and the
/// pseudo-peripheral starts).
const STARTS: usize = 8;
/// Graphs of at most this many vertices are split optimally by enumeration.
const EXACT: usize = 12;
/// Share of the coarsest graph's weight that the first multilevel split's best start cuts from
/// which the graph counts as an expander and the mapping switches to [`Effort::Light`].
const EXPANDER: f64 = 0.25;
/// Light effort: FM passes per level, spaced starts (and no pseudo-peripheral start), and the base
/// of the FM tail.
const LIGHT_PASSES: usize = 1;
const LIGHT_STARTS: usize = 2;
const LIGHT_TAIL: usize = 4;
/// Full effort: the base of the FM tail (a pass stops after this many plus `n / 64` moves without
/// a new best).
const TAIL: usize = 16;

/// How hard the splits of one mapping search, decided once, at its first multilevel split.
///
/// On an expander (a random sparse graph: every bisection cuts a large share of the weight, here
/// at least [`EXPANDER`] on the first split's coarsest graph after its starts) more starts and FM
/// passes change the cut by a few tenths of a per cent, for about 40 % of the mapping time; stencils, chains and clustered
/// matrices, whose first coarse cut is at most 18 % of the weight, keep the full search.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
enum Effort {
    /// Not decided yet (no multilevel split so far): full effort.
    #[default]
    Undecided,
    /// [`STARTS`] spaced starts, [`PASSES`] passes per level, FM tails of [`TAIL`] `+ n / 64`.
    Full,
    /// [`LIGHT_STARTS`] (and no pseudo-peripheral start), [`LIGHT_PASSES`] and [`LIGHT_TAIL`]
    /// instead.
    Light,
}

impl Effort {
    fn light(self) -> bool {
        self == Effort::Light
    }
}

/// A graph with vertex weights (task counts) in compressed rows.
#[derive(Default)]
struct Sub {
    off: Vec<usize>,
    adj: Vec<u32>,
    w: Vec<f64>,
    vw: Vec<i64>,
}

impl Sub {
    fn len(&self) -> usize {
        self.vw.len()
    }

    fn row(&self, x: usize) -> impl Iterator<Item = (usize, f64)> + '_ {
        let r = self.off[x]..self.off[x + 1];
        self.adj[r.clone()]
            .iter()
            .zip(&self.w[r])
            .map(|(&y, &w)| (y as usize, w))
    }

    fn max_vw(&self) -> i64 {
        self.vw.iter().copied().max().unwrap_or(1)
    }

    /// Weight of the edges between the two sides.
    fn cut(&self, side: &[u8]) -> f64 {
        let mut c = 0.0;
        for x in 0..self.len() {
            let sx = side[x];
            let r = self.off[x]..self.off[x + 1];
            for (&y, &w) in self.adj[r.clone()].iter().zip(&self.w[r]) {
                if y as usize > x && side[y as usize] != sx {
                    c += w;
                }
            }
        }
        c
    }

    /// Empties the graph, keeping its buffers for reuse.
    fn clear(&mut self) {
        self.off.clear();
        self.adj.clear();
        self.w.clear();
        self.vw.clear();
    }
}

/// The leaf of every vertex of `graph` (tasks, then dummies) with `slots[leaf]` tasks per leaf
/// (`graph.len()` must be the sum of `slots`).
///
/// Tree vertices are handled one at a time, top-down: a vertex's tasks are split among all its
/// children by recursive bisection (halves of the children, sizes the task slots below each
/// half), then, with more than two children, [`kway_refine`] exchanges tasks between the children
/// while that lowers the weight cut between them (the level's share of the hop cost).
///
/// With `vcycle`, every multilevel split of at most [`multilevel::VCYCLE`] tasks gets one more
/// V-cycle ([`multilevel::vcycle`]). The splits' search effort is decided at the first multilevel split ([`Effort`]).
pub(crate) fn recursive_bisection(
    tree: &Tree,
    graph: &Graph,
    slots: &[usize],
    vcycle: bool,
) -> Vec<usize> {
    bisection_with(tree, graph, slots, vcycle, Effort::Undecided).0
}

/// [`recursive_bisection`] starting from `effort` (`Undecided`: decided at the first multilevel
/// split, as in [`recursive_bisection`]; `Full` or `Light`: kept), with the effort used.
fn bisection_with(
    tree: &Tree,
    graph: &Graph,
    slots: &[usize],
    vcycle: bool,
    effort: Effort,
) -> (Vec<usize>, Effort) {
    let total = graph.len();
    let mut prefix = vec![0usize; slots.len() + 1];
    for (i, &s) in slots.iter().enumerate() {
        prefix[i + 1] = prefix[i] + s;
    }
    let mut leaf_of = vec![0usize; total];
    if tree.pu_count() == 0 || prefix[slots.len()] != total {
        return (leaf_of, effort);
    }
    let mut loc = vec![u32::MAX; total];
    let mut wk = Work {
        vcycle,
        effort,
        ..Work::default()
    };
    let mut kw = KWork::default();
    // (tree level, vertex, its tasks)
    let mut stack: Vec<(usize, usize, Vec<u32>)> = vec![(0, 0, (0..total as u32).collect())];
    let mut ranges: Vec<(usize, usize, Vec<u32>)> = Vec::new();
    while let Some((l, v, tasks)) = stack.pop() {
        if l == tree.depth() {
            let leaf = tree.range(l, v).start;
            for t in tasks {
                leaf_of[t as usize] = leaf;
            }
            continue;
        }
        let ch = tree.children(l, v);
        let k = ch.len();
        let cap = |a: usize, b: usize| {
            prefix[tree.range(l + 1, b - 1).end] - prefix[tree.range(l + 1, a).start]
        };
        let mut all = (k > 2).then(|| tasks.clone());
        // the children's tasks, by bisection of ranges of siblings
        let mut parts: Vec<Vec<u32>> = vec![Vec::new(); k];
        ranges.push((ch.start, ch.end, tasks));
        while let Some((lo, hi, tasks)) = ranges.pop() {
            if hi - lo == 1 {
                parts[lo - ch.start] = tasks;
                continue;
            }
            // 3 to PAIRED siblings holding two tasks each (the cores of an L3 with one task per
            // PU): the cut between them is exactly the weight left outside pairs, so they get
            // the pairing that keeps the most (`best_pairs`) instead of a chain of bisections,
            // whose halves only approximate it. Where that pairing is all the vertex's children
            // and the search was complete, it is optimal: no exchange of the k-way step below can
            // lower its cut, so that step is skipped (the same parts, in the same order).
            if (3..=PAIRED).contains(&(hi - lo))
                && tasks.len() == 2 * (hi - lo)
                && (lo..hi).all(|c| cap(c, c + 1) == 2)
            {
                let (pairs, complete) = best_pairs(graph, &tasks, &mut loc);
                if complete && lo == ch.start && hi == ch.end {
                    all = None;
                }
                for (i, pair) in pairs.into_iter().enumerate() {
                    parts[lo - ch.start + i] = pair;
                }
                continue;
            }
            let whole = cap(lo, hi);
            let mid = (lo + 1..hi)
                .min_by_key(|&m| ((cap(lo, m) * 2).abs_diff(whole), m))
                .unwrap_or(lo + 1);
            let (a, b) = bisect(graph, tasks, cap(lo, mid), &mut loc, &mut wk);
            ranges.push((mid, hi, b));
            ranges.push((lo, mid, a));
        }
        if let Some(all) = all {
            kway_refine(graph, &all, &mut parts, &mut loc, &mut kw);
        }
        for (c, p) in ch.zip(parts).rev() {
            stack.push((l + 1, c, p));
        }
    }
    (leaf_of, wk.effort)
}

/// Scratch buffers of the FM passes and graph growing, kept across calls (no allocation per
/// pass).
#[derive(Default)]
struct Work {
    /// Whether small multilevel splits get a [`multilevel::vcycle`].
    vcycle: bool,
    /// The search effort of this mapping's splits.
    effort: Effort,
    gain: Vec<f64>,
    locked: Vec<bool>,
    moves: Vec<usize>,
    heaps: [GainHeap; 2],
    /// Graphs and matchings of earlier splits, reused for their buffers (no allocation per
    /// split: 127 multilevel splits at 1024 tasks on 16x4x8x2).
    spare: Vec<Sub>,
    spare_maps: Vec<Vec<u32>>,
    /// [`coarsen::contract`]'s scratch: the members of each coarse vertex (`first`, `fill`, `members`),
    /// the summed weight to each coarse neighbour (`acc`) and the neighbours met (`touched`).
    first: Vec<usize>,
    fill: Vec<usize>,
    members: Vec<u32>,
    acc: Vec<f64>,
    touched: Vec<u32>,
    /// The [`coarsen::class_of`] cache.
    classes: Vec<(u64, i32)>,
    /// [`initial::initial`]'s buffers: the distinct grown starts one after the other, the start being
    /// grown, the start being refined, the vertex degrees; [`initial::peripheral`]'s search.
    seen: Vec<u8>,
    grown: Vec<u8>,
    cand: Vec<u8>,
    deg: Vec<f64>,
    /// [`fm::refine_pass`]'s weights of each vertex to the locked vertices of either side.
    to_locked: Vec<[f64; 2]>,
    /// Passes of this mapping with [`fm::refine_pass`]'s bound, and those of them that stopped early.
    stops: [u32; 2],
    bfs_seen: Vec<u32>,
    bfs_queue: Vec<usize>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use numaff_machine::rng::SplitMix64;

    /// A 1024-task tree (16x4x8x2) and matrices of the benchmark's families: a random sparse one
    /// (4-16 partners, weights 1-100), a 3-D stencil with shuffled ids, a chain, clustered groups.
    fn effort_matrices() -> Vec<(&'static str, crate::CommMatrix)> {
        let n = 1024;
        let mut rng = SplitMix64::new(63);
        let mut random = crate::CommMatrix::new(n);
        for i in 0..n {
            for _ in 0..(4 + rng.below(13)) / 2 {
                let j = rng.below(n);
                if j != i {
                    random.add_pair(i, j, 1.0 + rng.below(100) as f64);
                }
            }
        }
        let mut perm: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            perm.swap(i, rng.below(i + 1));
        }
        let id = |x: usize, y: usize, z: usize| perm[(x * 8 + y) * 8 + z];
        let mut stencil = crate::CommMatrix::new(n);
        for x in 0..16 {
            for y in 0..8 {
                for z in 0..8 {
                    for (dx, dy, dz) in [(1, 0, 0), (0, 1, 0), (0, 0, 1)] {
                        if x + dx < 16 && y + dy < 8 && z + dz < 8 {
                            stencil.add_pair(id(x, y, z), id(x + dx, y + dy, z + dz), 10.0);
                        }
                    }
                }
            }
        }
        let mut chain = crate::CommMatrix::new(n);
        for i in 1..n {
            chain.add_pair(i - 1, i, 100.0);
        }
        let mut clustered = crate::CommMatrix::new(n);
        let mut start = 0;
        for size in [5, 7, 11, 3, 13].into_iter().cycle() {
            let end = (start + size).min(n);
            for i in start..end {
                for j in i + 1..end {
                    clustered.add_pair(i, j, 100.0);
                }
            }
            start = end;
            if start == n {
                break;
            }
        }
        for i in 0..n {
            let j = rng.below(n);
            if j != i {
                clustered.add_pair(i, j, 1.0 + rng.below(5) as f64);
            }
        }
        vec![
            ("random", random),
            ("stencil", stencil),
            ("chain", chain),
            ("clustered", clustered),
        ]
    }

    /// The leaf-level hop cost of a bisection's leaves (every edge once).
    fn leaves_cost(tree: &Tree, g: &Graph, leaf_of: &[usize]) -> f64 {
        let leaf: Vec<Option<usize>> = leaf_of.iter().map(|&l| Some(l)).collect();
        g.hop_cost(tree, &leaf)
    }

    /// The search effort is decided from the graph, not from its origin: the random sparse
    /// matrix (an expander: its first coarse cut is a large share of the weight) gets the light
    /// search, the stencil, the chain and the clustered groups the full one; the light mapping
    /// is a valid one (each leaf's slot count) and costs at most 2 % more than the full search's
    /// on the same graph, and a mapping decided `Full` is the one forced `Full`.
    #[test]
    fn effort_is_light_on_expanders_only() {
        let m = numaff_machine::spec::resolve("pack:16 l3:4 core:8 pu:2").unwrap();
        let tree = Tree::from_machine(&m);
        let n = 1024;
        let slots = crate::hier::slots(&tree, n);
        for (name, c) in effort_matrices() {
            let g = Graph::from_comm(&c, n, n);
            let (auto, effort) = bisection_with(&tree, &g, &slots, false, Effort::Undecided);
            let (full, _) = bisection_with(&tree, &g, &slots, false, Effort::Full);
            let mut count = vec![0usize; slots.len()];
            for &l in &auto {
                count[l] += 1;
            }
            assert_eq!(count, slots, "{name}");
            if name == "random" {
                assert_eq!(effort, Effort::Light, "{name}");
                let (light, cf) = (leaves_cost(&tree, &g, &auto), leaves_cost(&tree, &g, &full));
                assert!(light <= 1.02 * cf, "{name}: light {light}, full {cf}");
            } else {
                assert_eq!(effort, Effort::Full, "{name}");
                assert_eq!(auto, full, "{name}");
            }
        }
    }
}
