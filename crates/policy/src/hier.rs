//! Communication-aware hierarchical mappings over the hardware tree: EagerMap-style greedy grouping
//! (000 §4.4), a TreeMatch-style Locality mapping and the Balance mapping (002 §2.3.3 Fig. 2.5).
//!
//! All three share one frame, the one EagerMap and TreeMatch use: tasks are grouped bottom-up, one
//! group per tree vertex, level by level (PUs, cores, caches, packages/nodes, machine), the
//! communication between groups being the sum over their members; the finished group tree is then
//! laid onto the hardware tree top-down. They differ in how one level's groups are formed.
//! Locality also computes the top-down recursive bisection of `bisect` and keeps the
//! cheaper of the two (above `GROUPING_MAX` tasks without a hub, only the bisection).
//!
//! Counts: with `n ≤ P` tasks the `P - n` missing ones are dummies without communication, which the
//! grouping places after every real task (so partly used machines are packed by communication, and no
//! PU holds two tasks); with `n > P` every PU gets `⌊n/P⌋` slots and the first `n mod P` PUs in tree
//! order one more, so no PU is free and none holds more than `⌈n/P⌉` tasks.

use std::collections::HashMap;

use crate::graph::Graph;
use crate::tree::Tree;
use crate::{baselines, CommMatrix, Placement};

/// How one level's groups are formed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Grouping {
    /// EagerMap: each group seeded with the free item of largest communication, then grown by the
    /// free item that communicates most with the group.
    Greedy,
    /// TreeMatch-style: heaviest pairs merged first (size-bounded agglomeration), clusters packed
    /// into groups best-fit by affinity, then pairwise exchanges between groups while they lower the
    /// communication leaving the groups. Falls back to `Greedy` on levels of mixed shapes.
    Agglomerate,
    /// Balance: items assigned, heaviest first, to the group with the least communication load.
    SpreadLoad,
}

const TASK: u32 = u32::MAX;

struct Level {
    /// Shape of each item (TASK for tasks).
    shape: Vec<u32>,
    /// Members (items of the level below) of each item; empty for tasks.
    members: Vec<Vec<usize>>,
    /// Whether the item holds a real task.
    real: Vec<bool>,
    /// Communication volume of the tasks in the item (row sums of the original matrix).
    load: Vec<f64>,
}

/// Slots per leaf for `n` tasks (see the module documentation).
pub(crate) fn slots(tree: &Tree, n: usize) -> Vec<usize> {
    let p = tree.pu_count();
    if n <= p {
        return vec![1; p];
    }
    (0..p).map(|l| n / p + usize::from(l < n % p)).collect()
}

/// Slots per leaf for `n > P` tasks with the `n mod P` extra ones spread over the tree: each
/// vertex's extras are shared among its children in proportion to their PUs (rounded down at the
/// running sums), so sibling subtrees differ by at most one task where they have as many PUs.
/// The sizes a top-down split then asks for are as even as possible (a stencil cut in halves
/// straight, not with a step of the extra tasks). With `n ≤ P`, [`slots`].
pub(crate) fn spread_slots(tree: &Tree, n: usize) -> Vec<usize> {
    let p = tree.pu_count();
    if n <= p || n.is_multiple_of(p) {
        return slots(tree, n);
    }
    let mut extra = vec![n % p];
    for l in 0..tree.depth() {
        let mut next = vec![0usize; tree.width(l + 1)];
        for (v, &e) in extra.iter().enumerate() {
            let total = tree.range(l, v).len().max(1);
            let mut cum = 0;
            for c in tree.children(l, v) {
                let len = tree.range(l + 1, c).len();
                next[c] = e * (cum + len) / total - e * cum / total;
                cum += len;
            }
        }
        extra = next;
    }
    extra.iter().map(|&e| n / p + e).collect()
}

/// Slots per leaf for `n > P` tasks with the `n mod P` extra ones spread over the children of the
/// root as in [`spread_slots`] (the first split asks for halves as even as possible) and packed on
/// the first PUs of each child below, as [`slots`] packs them on the machine's first PUs (the
/// splits below keep whole PUs' worth of tasks together). On 2x12x2 with 256 tasks (16 extra)
/// each package gets 128 instead of 136 and 120: the 16x16 stencil is halved straight, 16 edges
/// instead of 17, where [`spread_slots`] halves it straight too but cuts more below.
pub(crate) fn top_spread_slots(tree: &Tree, n: usize) -> Vec<usize> {
    let p = tree.pu_count();
    if n <= p || n.is_multiple_of(p) || tree.depth() == 0 {
        return slots(tree, n);
    }
    let e = n % p;
    let mut out = vec![n / p; p];
    let mut cum = 0;
    for c in tree.children(0, 0) {
        let r = tree.range(1, c);
        let len = r.len();
        let mine = e * (cum + len) / p - e * cum / p;
        cum += len;
        for leaf in r.take(mine) {
            out[leaf] += 1;
        }
    }
    out
}

/// Shapes of the tree's vertices with `slots` tasks per leaf; equal ids = interchangeable subtrees.
fn slot_shapes(tree: &Tree, slots: &[usize]) -> Vec<Vec<u32>> {
    let mut ids: HashMap<Vec<u32>, u32> = HashMap::new();
    let mut out: Vec<Vec<u32>> = vec![Vec::new(); tree.levels()];
    let d = tree.depth();
    for l in (0..tree.levels()).rev() {
        let row = (0..tree.width(l))
            .map(|v| {
                let mut key: Vec<u32> = if l == d {
                    vec![TASK - 1, slots[v] as u32]
                } else {
                    tree.children(l, v).map(|c| out[l + 1][c]).collect()
                };
                key.sort_unstable();
                key.insert(0, (d - l) as u32);
                let next = ids.len() as u32;
                *ids.entry(key).or_insert(next)
            })
            .collect();
        out[l] = row;
    }
    out
}

/// The hierarchical mapping: `grouping(l)` says how vertices of level `l` are formed from items of
/// level `l + 1` (level `depth()` groups the tasks into PUs).
pub(crate) fn hierarchical(
    tree: &Tree,
    comm: &CommMatrix,
    n: usize,
    grouping: impl Fn(usize) -> Grouping,
) -> Placement {
    let total: usize = slots(tree, n).iter().sum();
    let graph = Graph::from_comm(comm, n, total);
    hierarchical_graph(tree, &graph, n, grouping)
}

/// [`hierarchical`] on the sparse graph of the matrix (`total` vertices: tasks, then dummies).
fn hierarchical_graph(
    tree: &Tree,
    graph: &Graph,
    n: usize,
    grouping: impl Fn(usize) -> Grouping,
) -> Placement {
    let p = tree.pu_count();
    if p == 0 {
        return Vec::new();
    }
    let sl = slots(tree, n);
    let shapes = slot_shapes(tree, &sl);
    let total: usize = sl.iter().sum();
    // Task-level items.
    let mut levels: Vec<Level> = vec![Level {
        shape: vec![TASK; total],
        members: vec![Vec::new(); total],
        real: (0..total).map(|t| t < n).collect(),
        load: (0..total).map(|t| graph.degree(t)).collect(),
    }];
    let mut current: Option<Graph> = None;
    for l in (0..tree.levels()).rev() {
        let Some(items) = levels.last() else { break };
        let g = current.as_ref().unwrap_or(graph);
        let needs: Vec<Vec<u32>> = (0..tree.width(l))
            .map(|v| {
                if l == tree.depth() {
                    vec![TASK; sl[v]]
                } else {
                    tree.children(l, v).map(|c| shapes[l + 1][c]).collect()
                }
            })
            .collect();
        let i_n = items.shape.len();
        let trivial = needs.iter().all(|x| x.len() == 1);
        let groups: Vec<Vec<usize>> = match grouping(l) {
            _ if trivial => (0..i_n).map(|i| vec![i]).collect(),
            Grouping::Greedy => greedy(items, g, &needs),
            Grouping::Agglomerate => agglomerate(items, g, &needs),
            Grouping::SpreadLoad => spread(items, &needs),
        };
        let next = if trivial && groups.len() == i_n {
            None // same graph, one item per group
        } else {
            let mut owner = vec![0usize; i_n];
            for (gi, m) in groups.iter().enumerate() {
                for &x in m {
                    owner[x] = gi;
                }
            }
            Some(g.contract(&owner, &groups))
        };
        let lvl = Level {
            shape: shapes[l].clone(),
            real: groups
                .iter()
                .map(|m| m.iter().any(|&x| items.real[x]))
                .collect(),
            load: groups
                .iter()
                .map(|m| m.iter().map(|&x| items.load[x]).sum())
                .collect(),
            members: groups,
        };
        levels.push(lvl);
        if next.is_some() {
            current = next;
        }
    }
    // Top-down: lay item (of `levels[k]`) onto vertex v of tree level l.
    let mut out = vec![0u32; n];
    let mut stack = vec![(0usize, 0usize, 0usize)]; // (tree level, vertex, item)
    let top = levels.len() - 1;
    let mut used: Vec<bool> = Vec::new();
    while let Some((l, v, item)) = stack.pop() {
        let k = top - l;
        let members = &levels[k].members[item];
        if l == tree.depth() {
            let leaf = tree.range(l, v).start;
            for &t in members {
                if t < n {
                    out[t] = tree.pu(leaf);
                }
            }
            continue;
        }
        let kids = tree.children(l, v);
        used.clear();
        used.resize(kids.len(), false);
        let base = kids.start;
        for &m in members {
            let s = levels[k - 1].shape[m];
            if let Some(ci) = (0..used.len()).find(|&c| !used[c] && shapes[l + 1][base + c] == s) {
                used[ci] = true;
                stack.push((l + 1, base + ci, m));
            }
        }
    }
    out
}

/// Free items whose shape is still needed; `need` counts per shape.
fn wanted(shape: u32, need: &HashMap<u32, usize>) -> bool {
    need.get(&shape).is_some_and(|&c| c > 0)
}

fn take(need: &mut HashMap<u32, usize>, shape: u32) {
    if let Some(c) = need.get_mut(&shape) {
        *c -= 1;
    }
}

fn count(needs: &[u32]) -> HashMap<u32, usize> {
    let mut m = HashMap::new();
    for &s in needs {
        *m.entry(s).or_insert(0) += 1;
    }
    m
}

/// Index of each item's shape in the sorted list of distinct shapes.
fn shape_index(items: &Level) -> (Vec<u32>, Vec<usize>) {
    let mut kinds = items.shape.clone();
    kinds.sort_unstable();
    kinds.dedup();
    let idx = items
        .shape
        .iter()
        .map(|s| kinds.binary_search(s).unwrap_or(0))
        .collect();
    (kinds, idx)
}

/// EagerMap's greedy grouping (000 §4.4; Cruz et al.): for each vertex in turn, the free item of
/// largest total communication seeds the group, then the free item that communicates most with the
/// group joins it, until the vertex is full. Ties: real before dummy, then the lower index.
///
/// Sparse: gains live only on the neighbours of the group (a touched list, reset per group); an
/// item without a neighbour in the group has gain 0, and among those the seed order (communication,
/// real, index; dummies never communicate) decides, kept per shape in one sorted list with a cursor.
/// O(arcs · group size + items log items) per level.
fn greedy(items: &Level, g: &Graph, needs: &[Vec<u32>]) -> Vec<Vec<usize>> {
    let i_n = items.shape.len();
    let degree: Vec<f64> = (0..i_n).map(|x| g.degree(x)).collect();
    let (kinds, sidx) = shape_index(items);
    let mut order: Vec<Vec<usize>> = vec![Vec::new(); kinds.len()];
    for x in 0..i_n {
        order[sidx[x]].push(x);
    }
    for o in &mut order {
        o.sort_unstable_by(|&a, &b| {
            degree[b]
                .total_cmp(&degree[a])
                .then(items.real[b].cmp(&items.real[a]))
                .then(a.cmp(&b))
        });
    }
    let mut cursor = vec![0usize; kinds.len()];
    let mut free = vec![true; i_n];
    let mut gain = vec![0.0; i_n];
    let mut touched: Vec<usize> = Vec::new();
    let mut left = vec![0usize; kinds.len()];
    let mut out = Vec::with_capacity(needs.len());
    for need in needs {
        left.iter_mut().for_each(|c| *c = 0);
        for s in need {
            if let Ok(k) = kinds.binary_search(s) {
                left[k] += 1;
            }
        }
        let mut group = Vec::with_capacity(need.len());
        for _ in 0..need.len() {
            let mut best: Option<usize> = None;
            for &y in &touched {
                if !free[y] || left[sidx[y]] == 0 {
                    continue;
                }
                let better = match best {
                    None => true,
                    Some(b) => {
                        let ky = (gain[y], items.real[y], degree[y]);
                        let kb = (gain[b], items.real[b], degree[b]);
                        ky > kb || (ky == kb && y < b)
                    }
                };
                if better {
                    best = Some(y);
                }
            }
            let pick = best.or_else(|| {
                let mut seed: Option<usize> = None;
                for k in 0..kinds.len() {
                    if left[k] == 0 {
                        continue;
                    }
                    while cursor[k] < order[k].len() && !free[order[k][cursor[k]]] {
                        cursor[k] += 1;
                    }
                    let Some(&x) = order[k].get(cursor[k]) else {
                        continue;
                    };
                    let better = match seed {
                        None => true,
                        Some(b) => {
                            let kx = (degree[x], items.real[x]);
                            let kb = (degree[b], items.real[b]);
                            kx > kb || (kx == kb && x < b)
                        }
                    };
                    if better {
                        seed = Some(x);
                    }
                }
                seed
            });
            let Some(x) = pick else { break };
            free[x] = false;
            left[sidx[x]] -= 1;
            group.push(x);
            for (y, w) in g.row(x) {
                if free[y] {
                    if gain[y] == 0.0 {
                        touched.push(y);
                    }
                    gain[y] += w;
                }
            }
        }
        for &y in &touched {
            gain[y] = 0.0;
        }
        touched.clear();
        out.push(group);
    }
    out
}

/// TreeMatch-style grouping (see [`Grouping::Agglomerate`]); needs every vertex to want the same
/// number of items of one shape, else it is [`greedy`].
fn agglomerate(items: &Level, g: &Graph, needs: &[Vec<u32>]) -> Vec<Vec<usize>> {
    let i_n = items.shape.len();
    let k = needs.first().map_or(0, |x| x.len());
    let uniform = needs
        .iter()
        .all(|x| x.len() == k && x.iter().all(|&s| s == x[0]))
        && items
            .shape
            .iter()
            .all(|&s| Some(&s) == needs.first().and_then(|x| x.first()));
    if !uniform || k == 0 || k * needs.len() != i_n {
        return greedy(items, g, needs);
    }
    let g_n = needs.len();
    // 1. candidate edges: each item's heaviest partners.
    let per = 8;
    let mut edges: Vec<(f64, usize, usize)> = Vec::new();
    let mut row: Vec<(f64, usize)> = Vec::new();
    for x in 0..i_n {
        row.clear();
        row.extend(g.row(x).filter(|&(_, w)| w > 0.0).map(|(y, w)| (w, y)));
        if row.len() > per {
            row.select_nth_unstable_by(per, |a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            row.truncate(per);
        }
        edges.extend(row.iter().map(|&(w, y)| (w, x.min(y), x.max(y))));
    }
    edges.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then((a.1, a.2).cmp(&(b.1, b.2))));
    edges.dedup_by(|a, b| a.1 == b.1 && a.2 == b.2);
    // 2. size-bounded union-find.
    let mut parent: Vec<usize> = (0..i_n).collect();
    let mut size = vec![1usize; i_n];
    fn root(p: &mut [usize], mut x: usize) -> usize {
        while p[x] != x {
            p[x] = p[p[x]];
            x = p[x];
        }
        x
    }
    for &(_, a, b) in &edges {
        let (ra, rb) = (root(&mut parent, a), root(&mut parent, b));
        if ra != rb && size[ra] + size[rb] <= k {
            let (big, small) = if ra < rb { (ra, rb) } else { (rb, ra) };
            parent[small] = big;
            size[big] += size[small];
        }
    }
    let mut slot = vec![usize::MAX; i_n];
    let mut clusters: Vec<Vec<usize>> = Vec::new();
    for x in 0..i_n {
        let r = root(&mut parent, x);
        if slot[r] == usize::MAX {
            slot[r] = clusters.len();
            clusters.push(Vec::new());
        }
        clusters[slot[r]].push(x);
    }
    let weight = |c: &Vec<usize>| -> f64 { c.iter().map(|&x| items.load[x]).sum() };
    let real = |c: &Vec<usize>| c.iter().any(|&x| items.real[x]);
    clusters.sort_unstable_by(|a, b| {
        b.len()
            .cmp(&a.len())
            .then(real(b).cmp(&real(a)))
            .then(weight(b).total_cmp(&weight(a)))
            .then(a[0].cmp(&b[0]))
    });
    // 3. best fit by affinity, then fullness. Groups with affinity are the ones touched by the
    // cluster's edges; among the others the fullest that fits (lowest index) wins, found in
    // per-fill buckets.
    let mut groups: Vec<Vec<usize>> = vec![Vec::new(); g_n];
    let mut owner = vec![usize::MAX; i_n];
    let mut aff: Vec<f64> = vec![0.0; g_n];
    let mut hit: Vec<usize> = Vec::new();
    let mut by_fill: Vec<std::collections::BTreeSet<usize>> =
        vec![std::collections::BTreeSet::new(); k + 1];
    by_fill[0].extend(0..g_n);
    let pick = |need: usize,
                groups: &Vec<Vec<usize>>,
                aff: &Vec<f64>,
                hit: &Vec<usize>,
                by_fill: &Vec<std::collections::BTreeSet<usize>>| {
        let touched = hit
            .iter()
            .copied()
            .filter(|&g| groups[g].len() + need <= k)
            .max_by(|&a, &b| {
                aff[a]
                    .total_cmp(&aff[b])
                    .then(groups[a].len().cmp(&groups[b].len()))
                    .then(b.cmp(&a))
            });
        touched.or_else(|| {
            (0..=k.saturating_sub(need))
                .rev()
                .find_map(|f| by_fill[f].first().copied())
        })
    };
    let place = |x: usize,
                 gi: usize,
                 groups: &mut Vec<Vec<usize>>,
                 owner: &mut Vec<usize>,
                 by_fill: &mut Vec<std::collections::BTreeSet<usize>>| {
        let f = groups[gi].len();
        by_fill[f].remove(&gi);
        by_fill[f + 1].insert(gi);
        owner[x] = gi;
        groups[gi].push(x);
    };
    for c in clusters {
        for &x in &c {
            for (y, w) in g.row(x) {
                let o = owner[y];
                if o != usize::MAX {
                    if aff[o] == 0.0 {
                        hit.push(o);
                    }
                    aff[o] += w;
                }
            }
        }
        if let Some(gi) = pick(c.len(), &groups, &aff, &hit, &by_fill) {
            for &x in &c {
                place(x, gi, &mut groups, &mut owner, &mut by_fill);
            }
        } else {
            for &x in &c {
                if let Some(gi) = pick(1, &groups, &aff, &hit, &by_fill) {
                    place(x, gi, &mut groups, &mut owner, &mut by_fill);
                }
            }
        }
        for &o in &hit {
            aff[o] = 0.0;
        }
        hit.clear();
    }
    // 4. exchanges while they help (at most two passes).
    exchange(g, &mut owner, &mut groups, 2);
    for m in &mut groups {
        m.sort_unstable();
    }
    groups
}

/// [`exchange`] looks at the members of an item's most preferred groups only, this many (dense
/// matrices would otherwise make every group a candidate of every item).
const EXCHANGE_GROUPS: usize = 8;

/// Pairwise exchanges between groups (of equal-shape items) that lower the weight leaving the
/// groups, at most `passes` passes. `aff[x]` holds x's weight towards each group it touches
/// (sorted by group); an exchange of x (group a) and y (group b) gains
/// `aff(x,b) - aff(x,a) + aff(y,a) - aff(y,b) - 2 w(x,y)`, which is positive only if x prefers b or y
/// prefers a, so each item only looks at the members of the groups it prefers to its own (the
/// other case is found from the other item), the [`EXCHANGE_GROUPS`] it prefers most. Each item takes its best exchange (ties: lower index).
fn exchange(g: &Graph, owner: &mut [usize], groups: &mut [Vec<usize>], passes: usize) {
    let i_n = owner.len();
    let g_n = groups.len();
    let mut acc = vec![0.0; g_n];
    let mut hit: Vec<usize> = Vec::new();
    let mut aff: Vec<Vec<(u32, f64)>> = Vec::with_capacity(i_n);
    for x in 0..i_n {
        for (y, w) in g.row(x) {
            let o = owner[y];
            if acc[o] == 0.0 {
                hit.push(o);
            }
            acc[o] += w;
        }
        hit.sort_unstable();
        aff.push(hit.iter().map(|&o| (o as u32, acc[o])).collect());
        for &o in &hit {
            acc[o] = 0.0;
        }
        hit.clear();
    }
    fn get(a: &[(u32, f64)], gi: usize) -> f64 {
        a.binary_search_by_key(&(gi as u32), |e| e.0)
            .map_or(0.0, |i| a[i].1)
    }
    fn add(a: &mut Vec<(u32, f64)>, gi: usize, v: f64) {
        match a.binary_search_by_key(&(gi as u32), |e| e.0) {
            Ok(i) => a[i].1 += v,
            Err(i) => a.insert(i, (gi as u32, v)),
        }
    }
    // own[y]: y's affinity to its own group, kept equal to `get(&aff[y], owner[y])` (updated by
    // the same additions); wx: x's row scattered (the weight x–y without a search).
    let mut own: Vec<f64> = (0..i_n).map(|y| get(&aff[y], owner[y])).collect();
    let mut wx = vec![0.0; i_n];
    let mut prefer: Vec<(f64, usize)> = Vec::new();
    for _ in 0..passes {
        let mut improved = false;
        for x in 0..i_n {
            let a = owner[x];
            let ax = own[x];
            let mut best: Option<(f64, usize)> = None;
            prefer.clear();
            prefer.extend(
                aff[x]
                    .iter()
                    .filter(|&&(b, bx)| b as usize != a && bx > ax)
                    .map(|&(b, bx)| (bx, b as usize)),
            );
            if prefer.len() > EXCHANGE_GROUPS {
                prefer.select_nth_unstable_by(EXCHANGE_GROUPS, |p, q| {
                    q.0.total_cmp(&p.0).then(p.1.cmp(&q.1))
                });
                prefer.truncate(EXCHANGE_GROUPS);
            }
            if !prefer.is_empty() {
                for (y, w) in g.row(x) {
                    wx[y] = w;
                }
            }
            for &(bx, b) in &prefer {
                for &y in &groups[b] {
                    let gain = bx - ax + get(&aff[y], a) - own[y] - 2.0 * wx[y];
                    if gain > 1e-9 * (1.0 + ax.abs())
                        && best.is_none_or(|(bg, by)| gain > bg || (gain == bg && y < by))
                    {
                        best = Some((gain, y));
                    }
                }
            }
            if !prefer.is_empty() {
                for (y, _) in g.row(x) {
                    wx[y] = 0.0;
                }
            }
            let Some((_, y)) = best else { continue };
            let b = owner[y];
            for (z, w) in g.row(x) {
                add(&mut aff[z], a, -w);
                add(&mut aff[z], b, w);
                if owner[z] == a {
                    own[z] -= w;
                } else if owner[z] == b {
                    own[z] += w;
                }
            }
            for (z, w) in g.row(y) {
                add(&mut aff[z], b, -w);
                add(&mut aff[z], a, w);
                if owner[z] == b {
                    own[z] -= w;
                } else if owner[z] == a {
                    own[z] += w;
                }
            }
            owner[x] = b;
            owner[y] = a;
            own[x] = get(&aff[x], b);
            own[y] = get(&aff[y], a);
            if let Some(p) = groups[a].iter().position(|&m| m == x) {
                groups[a][p] = y;
            }
            if let Some(p) = groups[b].iter().position(|&m| m == y) {
                groups[b][p] = x;
            }
            improved = true;
        }
        if !improved {
            break;
        }
    }
}

/// Balance's level (002 §2.3.3): items, heaviest communication load first, each to the vertex with
/// the least load so far that still needs an item of its shape (ties: fewer real items, lower index).
fn spread(items: &Level, needs: &[Vec<u32>]) -> Vec<Vec<usize>> {
    let i_n = items.shape.len();
    let mut order: Vec<usize> = (0..i_n).collect();
    order.sort_by(|&a, &b| {
        items.load[b]
            .total_cmp(&items.load[a])
            .then(items.real[b].cmp(&items.real[a]))
            .then(a.cmp(&b))
    });
    let mut left: Vec<HashMap<u32, usize>> = needs.iter().map(|n| count(n)).collect();
    let mut load: Vec<f64> = vec![0.0; needs.len()];
    let mut reals = vec![0usize; needs.len()];
    let mut out: Vec<Vec<usize>> = vec![Vec::new(); needs.len()];
    for x in order {
        let s = items.shape[x];
        let g = (0..needs.len())
            .filter(|&g| wanted(s, &left[g]))
            .min_by(|&a, &b| {
                load[a]
                    .total_cmp(&load[b])
                    .then(reals[a].cmp(&reals[b]))
                    .then(a.cmp(&b))
            });
        if let Some(g) = g {
            take(&mut left[g], s);
            load[g] += items.load[x];
            reals[g] += usize::from(items.real[x]);
            out[g].push(x);
        }
    }
    out
}

/// The cheaper (in hop cost) of `candidate` and the identity (round-robin) and compact mappings:
/// the guarantee that a communication-aware mapping is never worse than the identity.
pub(crate) fn no_worse_than_identity(
    tree: &Tree,
    comm: &CommMatrix,
    candidate: Placement,
) -> Placement {
    let graph = Graph::from_comm(comm, candidate.len(), candidate.len());
    no_worse_than_identity_graph(tree, &graph, candidate)
}

/// [`no_worse_than_identity`] on the sparse graph of the matrix.
fn no_worse_than_identity_graph(tree: &Tree, graph: &Graph, candidate: Placement) -> Placement {
    let c = graph_cost(tree, graph, &candidate);
    no_worse_than_identity_cost(tree, graph, candidate, c)
}

/// [`no_worse_than_identity_graph`] for a candidate whose hop cost on `graph` is known.
fn no_worse_than_identity_cost(
    tree: &Tree,
    graph: &Graph,
    candidate: Placement,
    candidate_cost: f64,
) -> Placement {
    let n = candidate.len();
    let cost = |p: &Placement| graph_cost(tree, graph, p);
    let mut best_cost = candidate_cost;
    let mut best = candidate;
    let identity = baselines::round_robin(tree, n);
    let compact = baselines::compact(tree, n);
    // where the PUs are numbered in tree order the two are one mapping: its cost once (the second
    // could not replace the first, whose cost it equals bit for bit)
    let alts = if identity == compact {
        vec![identity]
    } else {
        vec![identity, compact]
    };
    for alt in alts {
        let c = cost(&alt);
        if c < best_cost - 1e-9 * best_cost.abs() {
            best_cost = c;
            best = alt;
        }
    }
    best
}

/// A uniform matrix (every off-diagonal cell equal, [`CommMatrix::uniform_value`]) with at least as
/// many tasks as PUs: the compact mapping, without building the graph. Proof that nothing is lost:
/// with the tree distance, the hop cost is `w · Σ_levels (C(n,2) − Σ_vertices C(n_v,2))` where
/// `n_v` counts the tasks under a vertex, so every placement with the same tasks per PU costs the
/// same; with `n ≥ P` every algorithm here gives each PU its [`slots`], and compact gives them to the
/// same PUs (the first `n mod P` in tree order get one more), which also keeps the extra tasks in as
/// few subtrees as possible. With `n < P` on a tree whose vertices of each level are all of one
/// size, compact fills whole subtrees in order, which maximises `Σ_v C(n_v,2)` at every level at
/// once, so it is optimal too; other trees with `n < P` take the normal path.
fn uniform_shortcut(tree: &Tree, comm: &CommMatrix, n: usize) -> Option<Placement> {
    let symmetric = || {
        (0..tree.levels()).all(|l| {
            let size = tree.range(l, 0).len();
            (0..tree.width(l)).all(|v| tree.range(l, v).len() == size)
        })
    };
    (comm.len() == n && (n >= tree.pu_count() || symmetric()) && comm.uniform_value().is_some())
        .then(|| baselines::compact(tree, n))
}

/// The communication-aware mappings' common path: the sparse graph once, the hierarchical
/// mapping, the identity safeguard.
fn checked(
    tree: &Tree,
    comm: &CommMatrix,
    n: usize,
    grouping: impl Fn(usize) -> Grouping,
) -> Placement {
    if let Some(p) = uniform_shortcut(tree, comm, n) {
        return p;
    }
    let total: usize = slots(tree, n).iter().sum();
    let graph = Graph::from_comm(comm, n, total.max(n));
    let p = hierarchical_graph(tree, &graph, n, grouping);
    no_worse_than_identity_graph(tree, &graph, p)
}

/// EagerMap-style mapping (000 §4.4: kMAF computes the mapping with EagerMap from the sharing
/// matrix and the hardware hierarchy): bottom-up greedy grouping over every level that shares
/// hardware, top-down assignment; then never worse than the identity (see
/// `no_worse_than_identity`). Counts: see the module documentation.
pub fn eagermap(tree: &Tree, comm: &CommMatrix, n: usize) -> Placement {
    checked(tree, comm, n, |_| Grouping::Greedy)
}

/// Locality (002 §2.3.3 Fig. 2.5, computed as with TreeMatch: tasks that communicate most share the
/// deepest possible subtree, minimising the tree hop cost), with the TreeMatch-style grouping at
/// every level; never worse than the identity. Counts: see the module documentation.
///
/// Two candidates are computed and the cheaper one (by the same hop cost) kept: the bottom-up
/// TreeMatch-style grouping, and the top-down dual recursive bipartitioning of `bisect`,
/// which keeps long chains and stencil blocks together where the greedy grouping fragments them.
/// Ties keep the grouping's result. Above `GROUPING_MAX` (256) tasks the grouping is computed only
/// when some task communicates with all others (`has_hub`).
/// Above `BOTH_SPLITS` (256) tasks, ids that do not follow the graph (shuffled) are renumbered in
/// breadth-first order before the bisection, unless that order does not follow it either
/// (`ids_follow_graph`, `Graph::bfs_order`).
pub fn locality(tree: &Tree, comm: &CommMatrix, n: usize) -> Placement {
    locality_from(tree, comm, n, None)
}

/// A mapping is kept when the new one would lower the hop cost by less than this share
/// (stability under matrix noise; a 5 % noise moves the heuristic optimum by about 1 %).
pub const KEEP_WITHIN: f64 = 0.01;

/// [`locality`] for a program that already runs with `current`: when `current` is a valid
/// placement of the `n` tasks (PUs of the tree, no PU above ⌈n/P⌉ tasks, none doubled while another
/// is free) whose hop cost is within [`KEEP_WITHIN`] of the new mapping's, `current` is returned, so
/// a noisy re-measurement of the same program does not move its threads for nothing.
pub fn locality_from(
    tree: &Tree,
    comm: &CommMatrix,
    n: usize,
    current: Option<&Placement>,
) -> Placement {
    let cur = current.filter(|c| valid_placement(tree, c, n));
    if let Some(p) = uniform_shortcut(tree, comm, n) {
        return match cur {
            Some(c)
                if keep(
                    crate::quality::hop_cost(tree, comm, c),
                    crate::quality::hop_cost(tree, comm, &p),
                ) =>
            {
                c.clone()
            }
            _ => p,
        };
    }
    let sl = slots(tree, n);
    let total: usize = sl.iter().sum();
    let graph = Graph::from_comm(comm, n, total.max(n));
    let fresh = locality_graph(tree, &graph, n, &sl);
    match cur {
        Some(c)
            if keep(
                graph_cost(tree, &graph, c),
                graph_cost(tree, &graph, &fresh),
            ) =>
        {
            c.clone()
        }
        _ => fresh,
    }
}

/// Whether a mapping of hop cost `cur` is kept against a new one of cost `new`.
fn keep(cur: f64, new: f64) -> bool {
    cur <= new * (1.0 + KEEP_WITHIN)
}

/// Hop cost of a placement on the sparse graph.
fn graph_cost(tree: &Tree, graph: &Graph, p: &Placement) -> f64 {
    let idx = tree.leaf_index();
    let lv: Vec<Option<usize>> = p
        .iter()
        .map(|&pu| idx.get(pu as usize).copied().flatten())
        .collect();
    graph.hop_cost(tree, &lv)
}

/// Whether `p` places `n` tasks on PUs of the tree with no PU above ⌈n/P⌉ tasks and no PU holding
/// two while another is free.
fn valid_placement(tree: &Tree, p: &Placement, n: usize) -> bool {
    let idx = tree.leaf_index();
    let pn = tree.pu_count();
    if p.len() != n || pn == 0 {
        return false;
    }
    let mut count = vec![0usize; pn];
    for &pu in p {
        match idx.get(pu as usize).copied().flatten() {
            Some(l) => count[l] += 1,
            None => return false,
        }
    }
    let max = count.iter().copied().max().unwrap_or(0);
    max <= n.div_ceil(pn) && (max <= 1 || count.iter().all(|&c| c > 0))
}

/// Up to this many tasks, the recursive bisection is computed twice, plain (the extra tasks of
/// `n mod P` on the first PUs, [`slots`], no V-cycle) and with the extra tasks spread
/// ([`spread_slots`]) and a V-cycle on small coarsened splits (`bisect::multilevel::vcycle`), and a
/// third time with the extras spread over the root's children only ([`top_spread_slots`], no
/// V-cycle) where that differs from both, and the cheapest kept; above, only the first. The second
/// closes the shuffled 2-D stencil rows of `vs_scotch` at 256 threads, but above 256 the V-cycles
/// cost 4 % of the time at 1024 threads for gains of 0.1-1.4 % in five rows, and the spread slots
/// (with them) make six 2x12x2 rows at 1024-4096 dearer (2-D 4096 shuffled by 3 %) while 17 get
/// cheaper.
const BOTH_SPLITS: usize = 256;

/// Up to this many tasks, and above it on graphs with a hub ([`has_hub`]), the TreeMatch-style
/// grouping is computed next to the recursive bisection; above it, without a hub, only the
/// bisection (the ≤ 5 ms goal at 1024 threads; the grouping takes 16-19 % of `locality`'s time
/// there). On the 162 rows of `vs_scotch` the grouping is never the cheaper candidate above 256
/// tasks but on one master-worker row (2x12x2, 4096 tasks, shuffled: 0.15 % cheaper); at 64 tasks
/// it still wins on clustered matrices.
const GROUPING_MAX: usize = 256;

/// Whether one of the first `n` tasks communicates with every other task (a master): there the
/// bisection's splits into unequal parts keep the hub's edges (`bisect::multilevel::strip_hubs`
/// needs equal halves) and the grouping can still win.
fn has_hub(graph: &Graph, n: usize) -> bool {
    n > 2 && (0..n.min(graph.len())).any(|x| graph.row_len(x) + 1 >= n)
}

/// Share of the weight from which the split of the first half of the ids from the rest counts as
/// random (a random balanced split cuts about half of it): such ids are renumbered.
const RANDOM_IDS: f64 = 0.4;

/// Whether the ids follow the graph: the first half of the ids against the rest cuts less than
/// [`RANDOM_IDS`] of the weight.
fn ids_follow_graph(graph: &Graph) -> bool {
    order_follows_graph(graph, None)
}

/// [`ids_follow_graph`] for the vertices at positions `pos` (`None`: their ids).
fn order_follows_graph(graph: &Graph, pos: Option<&[usize]>) -> bool {
    let n = graph.len();
    let first: Vec<bool> = match pos {
        Some(p) => p.iter().take(n).map(|&i| 2 * i < n).collect(),
        None => (0..n).map(|x| 2 * x < n).collect(),
    };
    let (cut, all) = graph.halves_cut(&first);
    cut < RANDOM_IDS * all
}

fn locality_graph(tree: &Tree, graph: &Graph, n: usize, sl: &[usize]) -> Placement {
    // ties keep the earlier candidate: the grouping, then the split as before
    let mut best: Option<(Placement, f64)> = (n <= GROUPING_MAX || has_hub(graph, n)).then(|| {
        let grouped = hierarchical_graph(tree, graph, n, |_| Grouping::Agglomerate);
        let c = graph_cost(tree, graph, &grouped);
        (grouped, c)
    });
    let spread = spread_slots(tree, n);
    let top = top_spread_slots(tree, n);
    let mut variants: Vec<(&[usize], bool)> = Vec::with_capacity(3);
    if n <= BOTH_SPLITS {
        variants.push((sl, false));
        variants.push((&spread, true));
        // a third shape only where it differs from both (2x12x2: 16 extra tasks on 48 PUs)
        if top != sl && top != spread {
            variants.push((&top, false));
        }
    } else {
        variants.push((sl, false));
    }
    // Above BOTH_SPLITS tasks, ids that carry no locality (the split of the first half of the
    // ids from the rest cuts about half the weight, as a random split does: shuffled ids) are
    // renumbered in breadth-first order first, so that the bisection's order start and matching
    // follow the graph (without it, shuffled stencils and clusters take 2.5x the time of plain ids).
    // Where the breadth-first order does not follow the graph either (an expander: any order's
    // halves cut a large share), the ids are kept.
    let renumber = (n > BOTH_SPLITS && !ids_follow_graph(graph))
        .then(|| {
            let order = graph.bfs_order();
            let mut pos = vec![0usize; order.len()];
            for (i, &x) in order.iter().enumerate() {
                pos[x] = i;
            }
            order_follows_graph(graph, Some(&pos)).then(|| {
                let g2 = graph.renumbered(&order);
                (order, g2)
            })
        })
        .flatten();
    for (slots, vcycle) in variants {
        let leaf_of = match &renumber {
            Some((order, g2)) => {
                let l2 = crate::bisect::recursive_bisection(tree, g2, slots, vcycle);
                let mut leaf_of = vec![0usize; l2.len()];
                for (i, &x) in order.iter().enumerate() {
                    leaf_of[x] = l2[i];
                }
                leaf_of
            }
            None => crate::bisect::recursive_bisection(tree, graph, slots, vcycle),
        };
        let split: Placement = leaf_of.iter().take(n).map(|&l| tree.pu(l)).collect();
        let cs = graph_cost(tree, graph, &split);
        if best.as_ref().is_none_or(|(_, bc)| cs < bc * (1.0 - 1e-12)) {
            best = Some((split, cs));
        }
    }
    let (best, best_cost) = best.unwrap_or_default();
    no_worse_than_identity_cost(tree, graph, best, best_cost)
}

/// Balance (002 §2.3.3 Fig. 2.5: "maps the tasks that have the largest amount of communication to
/// different NUMA nodes"): below the node level tasks are grouped as in [`locality`]; the groups
/// that fill a node are then dealt out heaviest first to the least loaded node; above the node level
/// groups are formed greedily. Where the tree has no node level, the level below the root plays it.
/// Not checked against the identity: spreading communication is its goal. Counts: see the module
/// documentation (dummies carry no load, so a partly used machine still gets its real tasks spread).
pub fn balance(tree: &Tree, comm: &CommMatrix, n: usize) -> Placement {
    let nl = tree.node_level();
    let spread_at = if nl == 0 && tree.depth() > 1 { 1 } else { nl };
    hierarchical(tree, comm, n, |l| {
        if l == spread_at {
            Grouping::SpreadLoad
        } else if l > spread_at {
            Grouping::Agglomerate
        } else {
            Grouping::Greedy
        }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Spread slots: n tasks in all, ⌊n/P⌋ or ⌈n/P⌉ per PU, and the vertices of each level (all of
    /// one size on these trees) hold task counts that differ by at most one.
    #[test]
    fn spread_slots_even_at_every_level() {
        for desc in [
            "pack:2 core:12 pu:2",
            "pack:4 core:8 pu:2",
            "pack:2 l3:3 core:5 pu:2",
        ] {
            let m = numaff_machine::spec::resolve(desc).unwrap();
            let tree = Tree::from_machine(&m);
            let p = tree.pu_count();
            for n in [p + 1, 2 * p - 1, 256, 1000, 1024, 4097] {
                let s = spread_slots(&tree, n);
                assert_eq!(s.iter().sum::<usize>(), n, "{desc} {n}");
                assert!(s.iter().all(|&k| k == n / p || k == n.div_ceil(p)));
                for l in 0..tree.levels() {
                    let sums: Vec<usize> = (0..tree.width(l))
                        .map(|v| s[tree.range(l, v)].iter().sum())
                        .collect();
                    let (lo, hi) = (sums.iter().min().unwrap(), sums.iter().max().unwrap());
                    assert!(hi - lo <= 1, "{desc} n={n} level {l}: {sums:?}");
                }
            }
        }
    }

    /// A master (adjacent to every other task) is a hub; a chain and a pair are not.
    #[test]
    fn has_hub_finds_masters_only() {
        let n = 300;
        let mut star = CommMatrix::new(n);
        let mut chain = CommMatrix::new(n);
        for i in 1..n {
            star.add_pair(0, i, 5.0);
            star.add_pair(i - 1, i, 1.0);
            chain.add_pair(i - 1, i, 1.0);
        }
        assert!(has_hub(&Graph::from_comm(&star, n, n), n));
        assert!(!has_hub(&Graph::from_comm(&chain, n, n), n));
        let mut pair = CommMatrix::new(2);
        pair.add_pair(0, 1, 1.0);
        assert!(!has_hub(&Graph::from_comm(&pair, 2, 2), 2));
    }

    /// Above [`GROUPING_MAX`] tasks without a hub, locality is the recursive bisection (or the
    /// identity when that is cheaper): on a 1024-task chain over 16x4x8x2 the grouping reaches the
    /// same cost with another placement, which a tie must not keep.
    #[test]
    fn locality_is_the_bisection_above_grouping_max() {
        let m = numaff_machine::spec::resolve("pack:16 l3:4 core:8 pu:2").unwrap();
        let tree = Tree::from_machine(&m);
        let n = 1024;
        assert!(n > GROUPING_MAX);
        let mut chain = CommMatrix::new(n);
        for i in 1..n {
            chain.add_pair(i - 1, i, 1.0 + (i % 3) as f64);
        }
        let sl = slots(&tree, n);
        let graph = Graph::from_comm(&chain, n, n);
        let leaf_of = crate::bisect::recursive_bisection(&tree, &graph, &sl, false);
        let split: Placement = leaf_of.iter().take(n).map(|&l| tree.pu(l)).collect();
        let cost = graph_cost(&tree, &graph, &split);
        let expect = no_worse_than_identity_cost(&tree, &graph, split, cost);
        assert_eq!(locality(&tree, &chain, n), expect);
    }

    /// Shuffled ids: a 16x8x8 stencil numbered row by row follows its graph and is
    /// bisected as it is, the same stencil under shuffled ids does not and is renumbered in
    /// breadth-first order (a permutation, the same graph: every renumbered edge is an edge of the
    /// original with its weight); locality's placement of the shuffled stencil over 16x4x8x2 is
    /// the bisection of the renumbered graph, mapped back, and costs no more than the plain one. A
    /// random sparse graph, which no order follows, keeps its ids.
    #[test]
    fn shuffled_ids_are_renumbered_breadth_first() {
        let m = numaff_machine::spec::resolve("pack:16 l3:4 core:8 pu:2").unwrap();
        let tree = Tree::from_machine(&m);
        let n = 1024;
        assert!(n > BOTH_SPLITS);
        let mut rng = numaff_machine::rng::SplitMix64::new(6);
        let mut perm: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            perm.swap(i, rng.below(i + 1));
        }
        let stencil = |p: &dyn Fn(usize) -> usize| {
            let mut c = CommMatrix::new(n);
            for x in 0..16 {
                for y in 0..8 {
                    for z in 0..8 {
                        for (dx, dy, dz) in [(1, 0, 0), (0, 1, 0), (0, 0, 1)] {
                            if x + dx < 16 && y + dy < 8 && z + dz < 8 {
                                let (a, b) =
                                    ((x * 8 + y) * 8 + z, ((x + dx) * 8 + y + dy) * 8 + z + dz);
                                c.add_pair(p(a), p(b), 10.0);
                            }
                        }
                    }
                }
            }
            c
        };
        let plain = stencil(&|i| i);
        let shuffled = stencil(&|i| perm[i]);
        let gp = Graph::from_comm(&plain, n, n);
        let gs = Graph::from_comm(&shuffled, n, n);
        assert!(ids_follow_graph(&gp));
        assert!(!ids_follow_graph(&gs));
        let order = gs.bfs_order();
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..n).collect::<Vec<_>>());
        let gr = gs.renumbered(&order);
        let mut edges = 0;
        for i in 0..n {
            assert_eq!(gr.row_len(i), gs.row_len(order[i]));
            for (j, w) in gr.row(i) {
                assert!(gs.row(order[i]).any(|(y, v)| y == order[j] && v == w));
                edges += 1;
            }
        }
        assert_eq!(edges, 2 * 3 * 1024 - 2 * (8 * 8 + 16 * 8 + 16 * 8));
        let sl = slots(&tree, n);
        let l2 = crate::bisect::recursive_bisection(&tree, &gr, &sl, false);
        let mut leaf_of = vec![0usize; n];
        for (i, &x) in order.iter().enumerate() {
            leaf_of[x] = l2[i];
        }
        let split: Placement = leaf_of.iter().map(|&l| tree.pu(l)).collect();
        let c = graph_cost(&tree, &gs, &split);
        let expect = no_worse_than_identity_cost(&tree, &gs, split, c);
        let placed = locality(&tree, &shuffled, n);
        assert_eq!(placed, expect);
        let (cp, cs) = (
            graph_cost(&tree, &gp, &locality(&tree, &plain, n)),
            graph_cost(&tree, &gs, &placed),
        );
        assert!(cs <= cp, "shuffled {cs}, plain {cp}");
        // a random sparse graph (an expander) is kept as numbered: neither its ids nor the
        // breadth-first order follow it
        let mut random = CommMatrix::new(n);
        for i in 0..n {
            for _ in 0..4 {
                let j = rng.below(n);
                if j != i {
                    random.add_pair(i, j, 1.0 + rng.below(100) as f64);
                }
            }
        }
        let g = Graph::from_comm(&random, n, n);
        assert!(!ids_follow_graph(&g));
        let order = g.bfs_order();
        assert!(!ids_follow_graph(&g.renumbered(&order)));
        let mut pos = vec![0usize; n];
        for (i, &x) in order.iter().enumerate() {
            pos[x] = i;
        }
        assert!(!order_follows_graph(&g, Some(&pos)));
        assert!(order_follows_graph(
            &gs,
            Some(&{
                let o = gs.bfs_order();
                let mut p = vec![0usize; n];
                for (i, &x) in o.iter().enumerate() {
                    p[x] = i;
                }
                p
            })
        ));
    }

    /// Top-spread slots: n tasks, ⌊n/P⌋ or ⌈n/P⌉ per PU, the root's children differ by at most
    /// one task and each child's extras are on its first PUs; on 2x12x2 with a 16x16 stencil (256
    /// tasks, 16 extra) the third candidate halves the grid straight and makes locality strictly
    /// cheaper than the grouping and both earlier bisections.
    #[test]
    fn top_spread_slots_close_the_2x12x2_stencil_row() {
        let m = numaff_machine::spec::resolve("pack:2 core:12 pu:2").unwrap();
        let tree = Tree::from_machine(&m);
        let p = tree.pu_count();
        for n in [p + 1, 64, 256, 1000, 1024] {
            let s = top_spread_slots(&tree, n);
            assert_eq!(s.iter().sum::<usize>(), n);
            assert!(s.iter().all(|&k| k == n / p || k == n.div_ceil(p)));
            let sums: Vec<usize> = tree
                .children(0, 0)
                .map(|c| s[tree.range(1, c)].iter().sum())
                .collect();
            assert!(
                sums.iter().max().unwrap() - sums.iter().min().unwrap() <= 1,
                "{n}"
            );
            for c in tree.children(0, 0) {
                let r = &s[tree.range(1, c)];
                assert!(r.windows(2).all(|w| w[0] >= w[1]), "{n}: {r:?}");
            }
        }
        let n = 256;
        let mut grid = CommMatrix::new(n);
        for i in 0..n {
            if i % 16 + 1 < 16 {
                grid.add_pair(i, i + 1, 100.0);
            }
            if i + 16 < n {
                grid.add_pair(i, i + 16, 100.0);
            }
        }
        let graph = Graph::from_comm(&grid, n, n);
        let bisected = |slots: &[usize], vcycle: bool| {
            let leaf_of = crate::bisect::recursive_bisection(&tree, &graph, slots, vcycle);
            let pl: Placement = leaf_of.iter().take(n).map(|&l| tree.pu(l)).collect();
            graph_cost(&tree, &graph, &pl)
        };
        let grouped = hierarchical_graph(&tree, &graph, n, |_| Grouping::Agglomerate);
        let before = bisected(&slots(&tree, n), false)
            .min(bisected(&spread_slots(&tree, n), true))
            .min(graph_cost(&tree, &graph, &grouped));
        let now = graph_cost(&tree, &graph, &locality(&tree, &grid, n));
        assert!(now < before, "{now} !< {before}");
    }
}
