//! Figures that judge a placement: tree hop cost and its latency-weighted variant,
//! shares of communication inside a core / cache / node, the busiest tree edge, loads and stability.

use numaff_machine::{CacheKind, Machine};
use serde::Serialize;

use crate::tree::Tree;
use crate::{CommMatrix, Placement};

/// Symmetric weight of the pair (i, j): (comm[i][j] + comm[j][i]) / 2, so that an asymmetric matrix
/// counts both directions and a symmetric one counts comm[i][j] once per pair.
pub(crate) fn pair_weight(comm: &CommMatrix, i: usize, j: usize) -> f64 {
    (comm.get(i, j) + comm.get(j, i)) / 2.0
}

/// Leaf index of every task; `None` for a PU the tree does not know.
pub(crate) fn leaves(tree: &Tree, p: &Placement) -> Vec<Option<usize>> {
    let idx = tree.leaf_index();
    p.iter()
        .map(|&pu| idx.get(pu as usize).copied().flatten())
        .collect()
}

/// Hop cost: C = Σ_{i<j} w(i,j) · d(pu(i), pu(j)) with w the symmetric pair weight and d
/// the [`Tree::distance`]. Tasks on PUs unknown to the tree count as at the root distance.
///
/// Computed as `½ Σ_{i≠j} comm[i][j] · d` (d is symmetric), one scan of the matrix in row order.
pub fn hop_cost(tree: &Tree, comm: &CommMatrix, p: &Placement) -> f64 {
    let lv = leaves(tree, p);
    let n = p.len().min(comm.len());
    let far = tree.depth() as u32;
    let mut c = 0.0;
    for i in 0..n {
        for j in 0..n {
            let v = comm.get(i, j);
            if v == 0.0 || i == j {
                continue;
            }
            let d = match (lv[i], lv[j]) {
                (Some(a), Some(b)) => tree.distance(a, b),
                _ => far,
            };
            c += v * f64::from(d);
        }
    }
    c / 2.0
}

/// Latency-weighted cost: Σ_{i<j} w(i,j) · lat(node(pu(i)), node(pu(j))), with lat the mean of the
/// two directions of the machine's latency matrix (ns), else of its SLIT distances. `None` when the
/// machine has neither matrix or a PU has no node.
pub fn latency_cost(m: &Machine, comm: &CommMatrix, p: &Placement) -> Option<f64> {
    let lat: Vec<Vec<f64>> = match (&m.latency_ns, &m.distances) {
        (Some(l), _) => l.clone(),
        (None, Some(d)) => d
            .iter()
            .map(|r| r.iter().map(|&x| f64::from(x)).collect())
            .collect(),
        _ => return None,
    };
    let node: Vec<usize> = p
        .iter()
        .map(|&pu| m.node_of_pu(pu).and_then(|id| m.node_index(id)))
        .collect::<Option<Vec<_>>>()?;
    let n = p.len().min(comm.len());
    let mut c = 0.0;
    for i in 0..n {
        for j in i + 1..n {
            let w = pair_weight(comm, i, j);
            if w == 0.0 {
                continue;
            }
            let (a, b) = (node[i], node[j]);
            let l = (lat.get(a)?.get(b)? + lat.get(b)?.get(a)?) / 2.0;
            c += w * l;
        }
    }
    Some(c)
}

/// Shares of the total pair communication that stays inside a core, a cache, a node.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Shares {
    /// Both tasks on PUs of the same core (SMT siblings or the same PU).
    pub core: f64,
    /// Both tasks on PUs sharing some data/unified cache instance; `None` without cache data.
    pub cache: Option<f64>,
    /// Both tasks on the same NUMA node.
    pub node: f64,
}

/// Computes [`Shares`]; all zero when there is no communication.
pub fn shares(m: &Machine, comm: &CommMatrix, p: &Placement) -> Shares {
    let n = p.len().min(comm.len());
    let core_of = |pu: u32| {
        m.cores()
            .position(|(_, c)| c.pus.contains(pu))
            .unwrap_or(usize::MAX)
    };
    let cores: Vec<usize> = p.iter().map(|&pu| core_of(pu)).collect();
    let nodes: Vec<Option<u32>> = p.iter().map(|&pu| m.node_of_pu(pu)).collect();
    let caches: Vec<_> = m
        .caches
        .iter()
        .filter(|c| c.kind != CacheKind::Instruction)
        .collect();
    let (mut total, mut in_core, mut in_cache, mut in_node) = (0.0, 0.0, 0.0, 0.0);
    for i in 0..n {
        for j in i + 1..n {
            let w = pair_weight(comm, i, j);
            if w == 0.0 {
                continue;
            }
            total += w;
            if cores[i] == cores[j] {
                in_core += w;
            }
            if nodes[i].is_some() && nodes[i] == nodes[j] {
                in_node += w;
            }
            if caches
                .iter()
                .any(|c| c.cpus.contains(p[i]) && c.cpus.contains(p[j]))
            {
                in_cache += w;
            }
        }
    }
    let f = |x: f64| if total > 0.0 { x / total } else { 0.0 };
    Shares {
        core: f(in_core),
        cache: (!caches.is_empty()).then(|| f(in_cache)),
        node: f(in_node),
    }
}

/// The tree edge (a vertex and the link to its parent) that carries the most communication.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BusiestEdge {
    /// Level name of the vertex below the edge ("package", "L3", "core", "pu").
    pub level: String,
    /// Kernel cpu ids under the vertex.
    pub pus: Vec<u32>,
    /// Communication crossing the edge: pairs with exactly one task under the vertex.
    pub traffic: f64,
}

/// The busiest tree edge; `None` without communication crossing any edge.
pub fn busiest_edge(tree: &Tree, comm: &CommMatrix, p: &Placement) -> Option<BusiestEdge> {
    let lv = leaves(tree, p);
    let n = p.len().min(comm.len());
    let mut traffic: Vec<Vec<f64>> = (0..tree.levels())
        .map(|l| vec![0.0; tree.width(l)])
        .collect();
    for i in 0..n {
        for j in i + 1..n {
            let w = pair_weight(comm, i, j);
            let (Some(a), Some(b)) = (lv[i], lv[j]) else {
                continue;
            };
            if w == 0.0 || a == b {
                continue;
            }
            let shared = tree.common_level(a, b);
            for (l, t) in traffic.iter_mut().enumerate().skip(shared + 1) {
                t[tree.vertex_of(l, a)] += w;
                t[tree.vertex_of(l, b)] += w;
            }
        }
    }
    let mut best: Option<(usize, usize, f64)> = None;
    for (l, t) in traffic.iter().enumerate().skip(1) {
        for (v, &x) in t.iter().enumerate() {
            if x > 0.0 && best.is_none_or(|(_, _, b)| x > b) {
                best = Some((l, v, x));
            }
        }
    }
    best.map(|(l, v, traffic)| BusiestEdge {
        level: tree.kind(l).name(),
        pus: tree.range(l, v).map(|leaf| tree.pu(leaf)).collect(),
        traffic,
    })
}

/// Number of tasks on each PU of the tree, in leaf order (kernel cpu id, count).
pub fn tasks_per_pu(tree: &Tree, p: &Placement) -> Vec<(u32, usize)> {
    let mut c = vec![0usize; tree.pu_count()];
    for leaf in leaves(tree, p).into_iter().flatten() {
        c[leaf] += 1;
    }
    tree.pus().iter().copied().zip(c).collect()
}

/// Number of tasks on each NUMA node with cpus (node id, count).
pub fn tasks_per_node(m: &Machine, p: &Placement) -> Vec<(u32, usize)> {
    m.cpu_nodes()
        .map(|n| (n.id, p.iter().filter(|&&pu| n.cpus.contains(pu)).count()))
        .collect()
}

/// Threads that move from `prev` to `next`, counted up to symmetries of the tree.
///
/// Definition: two placements that differ only by exchanging whole interchangeable subtrees (two
/// packages, two cores of a package, two SMT siblings, ...: sibling vertices with the same shape)
/// describe the same mapping, so the count is `n - stay`, where `stay` is the largest number of tasks
/// that keep their PU over every relabelling of `prev` by such exchanges. It is computed exactly,
/// bottom-up: `stay(a, b)` for two same-shape vertices is, at PUs, the number of tasks on `a` in
/// `next` and on `b` in `prev`; above, a maximum-weight matching (Hungarian method) of the children
/// of `a` with those of `b` of the same shape. Tasks beyond `min(len)` or on unknown PUs count as moved.
pub fn moved_threads(tree: &Tree, prev: &Placement, next: &Placement) -> usize {
    let n = prev.len().min(next.len());
    if tree.pu_count() == 0 {
        return n;
    }
    let (lp, ln) = (leaves(tree, prev), leaves(tree, next));
    let shapes = shapes(tree);
    // Leaf contents.
    let mut on_next: Vec<Vec<usize>> = vec![Vec::new(); tree.pu_count()];
    let mut on_prev: Vec<Vec<usize>> = vec![Vec::new(); tree.pu_count()];
    for t in 0..n {
        if let (Some(a), Some(b)) = (ln[t], lp[t]) {
            on_next[a].push(t);
            on_prev[b].push(t);
        }
    }
    let d = tree.depth();
    // stay[l]: map (a, b) -> value, for pairs of same-shape vertices at level l.
    let mut memo: Vec<std::collections::HashMap<(usize, usize), usize>> =
        vec![Default::default(); tree.levels()];
    #[allow(clippy::too_many_arguments)]
    fn stay(
        tree: &Tree,
        shapes: &[Vec<u32>],
        l: usize,
        a: usize,
        b: usize,
        d: usize,
        on: (&[Vec<usize>], &[Vec<usize>]),
        memo: &mut Vec<std::collections::HashMap<(usize, usize), usize>>,
    ) -> usize {
        if let Some(&v) = memo[l].get(&(a, b)) {
            return v;
        }
        let v = if l == d {
            on.0[a].iter().filter(|t| on.1[b].contains(t)).count()
        } else {
            let ca: Vec<usize> = tree.children(l, a).collect();
            let cb: Vec<usize> = tree.children(l, b).collect();
            let mut w = vec![vec![0i64; cb.len()]; ca.len()];
            for (i, &x) in ca.iter().enumerate() {
                for (j, &y) in cb.iter().enumerate() {
                    if shapes[l + 1][x] == shapes[l + 1][y] {
                        w[i][j] = stay(tree, shapes, l + 1, x, y, d, on, memo) as i64;
                    }
                }
            }
            max_matching(&w) as usize
        };
        memo[l].insert((a, b), v);
        v
    }
    let s = stay(tree, &shapes, 0, 0, 0, d, (&on_next, &on_prev), &mut memo);
    n - s
}

/// Shape id of every vertex (equal ids = isomorphic subtrees), per level.
pub(crate) fn shapes(tree: &Tree) -> Vec<Vec<u32>> {
    let mut ids: std::collections::HashMap<(usize, Vec<u32>), u32> = Default::default();
    let mut out: Vec<Vec<u32>> = vec![Vec::new(); tree.levels()];
    for l in (0..tree.levels()).rev() {
        let mut row = Vec::with_capacity(tree.width(l));
        for v in 0..tree.width(l) {
            let mut key: Vec<u32> = if l == tree.depth() {
                Vec::new()
            } else {
                tree.children(l, v).map(|c| out[l + 1][c]).collect()
            };
            key.sort_unstable();
            let next = ids.len() as u32;
            row.push(*ids.entry((tree.depth() - l, key)).or_insert(next));
        }
        out[l] = row;
    }
    out
}

/// Maximum-weight assignment of rows to columns (non-negative weights; rectangular allowed); the
/// Hungarian method on costs `max - w`, padded to a square.
pub(crate) fn max_matching(w: &[Vec<i64>]) -> i64 {
    let r = w.len();
    let c = w.first().map_or(0, |x| x.len());
    let n = r.max(c);
    if n == 0 {
        return 0;
    }
    let big = w.iter().flatten().copied().max().unwrap_or(0);
    let cost = |i: usize, j: usize| -> i64 {
        if i < r && j < c {
            big - w[i][j]
        } else {
            big
        }
    };
    // e-maxx Hungarian, 1-based.
    let inf = i64::MAX / 4;
    let (mut u, mut v) = (vec![0i64; n + 1], vec![0i64; n + 1]);
    let (mut p, mut way) = (vec![0usize; n + 1], vec![0usize; n + 1]);
    for i in 1..=n {
        p[0] = i;
        let mut j0 = 0;
        let mut minv = vec![inf; n + 1];
        let mut used = vec![false; n + 1];
        loop {
            used[j0] = true;
            let i0 = p[j0];
            let mut delta = inf;
            let mut j1 = 0;
            for j in 1..=n {
                if !used[j] {
                    let cur = cost(i0 - 1, j - 1) - u[i0] - v[j];
                    if cur < minv[j] {
                        minv[j] = cur;
                        way[j] = j0;
                    }
                    if minv[j] < delta {
                        delta = minv[j];
                        j1 = j;
                    }
                }
            }
            for j in 0..=n {
                if used[j] {
                    u[p[j]] += delta;
                    v[j] -= delta;
                } else {
                    minv[j] -= delta;
                }
            }
            j0 = j1;
            if p[j0] == 0 {
                break;
            }
        }
        loop {
            let j1 = way[j0];
            p[j0] = p[j1];
            j0 = j1;
            if j0 == 0 {
                break;
            }
        }
    }
    (1..=n)
        .filter(|&j| p[j] >= 1 && p[j] <= r && j <= c)
        .map(|j| w[p[j] - 1][j - 1])
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (Machine, Tree, CommMatrix) {
        let m = numaff_machine::spec::resolve("pack:2 core:2 pu:2").unwrap();
        let t = Tree::from_machine(&m);
        let mut c = CommMatrix::new(4);
        c.add_pair(0, 1, 10.0);
        c.add_pair(2, 3, 5.0);
        (m, t, c)
    }

    #[test]
    fn hop_cost_and_shares() {
        let (m, t, c) = setup();
        // 0,1 SMT siblings (d 1), 2,3 on different packages (d 3).
        let p = vec![0, 1, 2, 4];
        assert_eq!(hop_cost(&t, &c, &p), 10.0 + 15.0);
        let s = shares(&m, &c, &p);
        assert!((s.core - 10.0 / 15.0).abs() < 1e-12);
        assert_eq!(s.cache, None);
        assert!((s.node - 1.0).abs() < 1e-12); // one NUMA node
        let e = busiest_edge(&t, &c, &p).unwrap();
        // the PU edges of tasks 0 and 1 carry their 10; the package edges carry 5
        assert_eq!(
            (e.level.as_str(), e.traffic, e.pus.clone()),
            ("pu", 10.0, vec![0])
        );
        assert_eq!(tasks_per_pu(&t, &p)[0], (0, 1));
        assert_eq!(tasks_per_node(&m, &p), vec![(0, 4)]);
    }

    #[test]
    fn moved_counts_up_to_symmetry() {
        let (_, t, _) = setup();
        let prev = vec![0, 1, 2, 3];
        // swapping the two packages wholesale, or SMT siblings, moves nobody
        assert_eq!(moved_threads(&t, &prev, &vec![4, 5, 6, 7]), 0);
        assert_eq!(moved_threads(&t, &prev, &vec![1, 0, 3, 2]), 0);
        // separating one thread from its core mate moves one thread
        assert_eq!(moved_threads(&t, &prev, &vec![0, 4, 2, 3]), 1);
        assert_eq!(max_matching(&[vec![1, 5], vec![4, 1]]), 9);
    }
}
