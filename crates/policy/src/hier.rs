//! Communication-aware hierarchical mappings over the hardware tree: EagerMap-style greedy grouping
//! (000 §4.4), a TreeMatch-style Locality mapping and the Balance mapping (002 §2.3.3 Fig. 2.5).
//!
//! All three share one frame, the one EagerMap and TreeMatch use: tasks are grouped bottom-up, one
//! group per tree vertex, level by level (PUs, cores, caches, packages/nodes, machine), the
//! communication between groups being the sum over their members; the finished group tree is then
//! laid onto the hardware tree top-down. They differ in how one level's groups are formed.
//!
//! Counts: with `n ≤ P` tasks the `P - n` missing ones are dummies without communication, which the
//! grouping places after every real task (so partly used machines are packed by communication, and no
//! PU holds two tasks); with `n > P` every PU gets `⌊n/P⌋` slots and the first `n mod P` PUs in tree
//! order one more, so no PU is free and none holds more than `⌈n/P⌉` tasks.

use std::collections::HashMap;

use crate::quality::{hop_cost, pair_weight};
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
    let p = tree.pu_count();
    if p == 0 {
        return Vec::new();
    }
    let sl = slots(tree, n);
    let shapes = slot_shapes(tree, &sl);
    let total: usize = sl.iter().sum();
    // Task-level items.
    let mut mat = vec![0.0; total * total];
    let cn = comm.len().min(n);
    for i in 0..cn {
        for j in 0..cn {
            if i != j {
                mat[i * total + j] = pair_weight(comm, i, j);
            }
        }
    }
    let mut levels: Vec<Level> = vec![Level {
        shape: vec![TASK; total],
        members: vec![Vec::new(); total],
        real: (0..total).map(|t| t < n).collect(),
        load: (0..total)
            .map(|t| if t < cn { comm.row_sum(t) } else { 0.0 })
            .collect(),
    }];
    for l in (0..tree.levels()).rev() {
        let Some(items) = levels.last() else { break };
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
        let groups = match grouping(l) {
            _ if needs.iter().all(|x| x.len() == 1) => (0..i_n).map(|i| vec![i]).collect(),
            Grouping::Greedy => greedy(items, &mat, &needs),
            Grouping::Agglomerate => agglomerate(items, &mat, &needs),
            Grouping::SpreadLoad => spread(items, &needs),
        };
        let g_n = groups.len();
        let mut owner = vec![0usize; i_n];
        for (g, m) in groups.iter().enumerate() {
            for &x in m {
                owner[x] = g;
            }
        }
        let mut next = vec![0.0; g_n * g_n];
        for x in 0..i_n {
            for y in 0..i_n {
                let (a, b) = (owner[x], owner[y]);
                if a != b {
                    next[a * g_n + b] += mat[x * i_n + y];
                }
            }
        }
        mat = next;
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
    }
    // Top-down: lay item (of `levels[k]`) onto vertex v of tree level l.
    let mut out = vec![0u32; n];
    let mut stack = vec![(0usize, 0usize, 0usize)]; // (tree level, vertex, item)
    let top = levels.len() - 1;
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
        let mut used = vec![false; tree.children(l, v).len()];
        let base = tree.children(l, v).start;
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

/// EagerMap's greedy grouping (000 §4.4; Cruz et al.): for each vertex in turn, the free item of
/// largest total communication seeds the group, then the free item that communicates most with the
/// group joins it, until the vertex is full. Ties: real before dummy, then the lower index.
fn greedy(items: &Level, mat: &[f64], needs: &[Vec<u32>]) -> Vec<Vec<usize>> {
    let i_n = items.shape.len();
    let degree: Vec<f64> = (0..i_n)
        .map(|x| mat[x * i_n..(x + 1) * i_n].iter().sum())
        .collect();
    let mut free: Vec<usize> = (0..i_n).collect();
    let mut gain = vec![0.0; i_n];
    let mut out = Vec::with_capacity(needs.len());
    for need in needs {
        let mut left = count(need);
        let mut group = Vec::with_capacity(need.len());
        for &x in &free {
            gain[x] = 0.0;
        }
        for step in 0..need.len() {
            let mut best: Option<(usize, (f64, bool, f64))> = None;
            for (pos, &x) in free.iter().enumerate() {
                if !wanted(items.shape[x], &left) {
                    continue;
                }
                let key = if step == 0 {
                    (degree[x], items.real[x], 0.0)
                } else {
                    (gain[x], items.real[x], degree[x])
                };
                let better = match &best {
                    None => true,
                    Some((bp, bk)) => key > *bk || (key == *bk && x < free[*bp]),
                };
                if better {
                    best = Some((pos, key));
                }
            }
            let Some((pos, _)) = best else { break };
            let x = free.swap_remove(pos);
            take(&mut left, items.shape[x]);
            group.push(x);
            for &y in &free {
                gain[y] += mat[y * i_n + x];
            }
        }
        out.push(group);
    }
    out
}

/// TreeMatch-style grouping (see [`Grouping::Agglomerate`]); needs every vertex to want the same
/// number of items of one shape, else it is [`greedy`].
fn agglomerate(items: &Level, mat: &[f64], needs: &[Vec<u32>]) -> Vec<Vec<usize>> {
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
        return greedy(items, mat, needs);
    }
    let g_n = needs.len();
    // 1. candidate edges: each item's heaviest partners.
    let per = 8.min(i_n.saturating_sub(1));
    let mut edges: Vec<(f64, usize, usize)> = Vec::new();
    let mut row: Vec<(f64, usize)> = Vec::with_capacity(i_n);
    for x in 0..i_n {
        row.clear();
        row.extend(
            (0..i_n)
                .filter(|&y| y != x && mat[x * i_n + y] > 0.0)
                .map(|y| (mat[x * i_n + y], y)),
        );
        if row.len() > per {
            row.select_nth_unstable_by(per, |a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            row.truncate(per);
        }
        edges.extend(row.iter().map(|&(w, y)| (w, x.min(y), x.max(y))));
    }
    edges.sort_by(|a, b| b.0.total_cmp(&a.0).then((a.1, a.2).cmp(&(b.1, b.2))));
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
    let mut clusters: HashMap<usize, Vec<usize>> = HashMap::new();
    for x in 0..i_n {
        let r = root(&mut parent, x);
        clusters.entry(r).or_default().push(x);
    }
    let mut clusters: Vec<Vec<usize>> = clusters.into_values().collect();
    let weight = |c: &Vec<usize>| -> f64 { c.iter().map(|&x| items.load[x]).sum() };
    let real = |c: &Vec<usize>| c.iter().any(|&x| items.real[x]);
    clusters.sort_by(|a, b| {
        b.len()
            .cmp(&a.len())
            .then(real(b).cmp(&real(a)))
            .then(weight(b).total_cmp(&weight(a)))
            .then(a[0].cmp(&b[0]))
    });
    // 3. best fit by affinity, then fullness.
    let mut groups: Vec<Vec<usize>> = vec![Vec::new(); g_n];
    let mut owner = vec![usize::MAX; i_n];
    let mut aff: Vec<f64> = vec![0.0; g_n];
    for c in clusters {
        aff.iter_mut().for_each(|a| *a = 0.0);
        for &x in &c {
            for y in 0..i_n {
                if owner[y] != usize::MAX {
                    aff[owner[y]] += mat[x * i_n + y];
                }
            }
        }
        let pick = |need: usize, groups: &Vec<Vec<usize>>| {
            (0..g_n)
                .filter(|&g| groups[g].len() + need <= k)
                .max_by(|&a, &b| {
                    aff[a]
                        .total_cmp(&aff[b])
                        .then(groups[a].len().cmp(&groups[b].len()))
                        .then(b.cmp(&a))
                })
        };
        if let Some(g) = pick(c.len(), &groups) {
            for &x in &c {
                owner[x] = g;
            }
            groups[g].extend(c);
        } else {
            for x in c {
                if let Some(g) = pick(1, &groups) {
                    owner[x] = g;
                    groups[g].push(x);
                }
            }
        }
    }
    // 4. exchanges while they help (at most two passes).
    let mut cg = vec![0.0; i_n * g_n];
    for x in 0..i_n {
        for y in 0..i_n {
            cg[x * g_n + owner[y]] += mat[x * i_n + y];
        }
    }
    for _ in 0..2 {
        let mut improved = false;
        for x in 0..i_n {
            for y in x + 1..i_n {
                let (a, b) = (owner[x], owner[y]);
                if a == b {
                    continue;
                }
                let gain = cg[x * g_n + b] - cg[x * g_n + a] + cg[y * g_n + a]
                    - cg[y * g_n + b]
                    - 2.0 * mat[x * i_n + y];
                if gain > 1e-9 * (1.0 + cg[x * g_n + a].abs()) {
                    for z in 0..i_n {
                        let (mx, my) = (mat[z * i_n + x], mat[z * i_n + y]);
                        cg[z * g_n + a] += my - mx;
                        cg[z * g_n + b] += mx - my;
                    }
                    owner[x] = b;
                    owner[y] = a;
                    improved = true;
                }
            }
        }
        if !improved {
            break;
        }
    }
    let mut out: Vec<Vec<usize>> = vec![Vec::new(); g_n];
    for x in 0..i_n {
        out[owner[x]].push(x);
    }
    out
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
    let n = candidate.len();
    let mut best_cost = hop_cost(tree, comm, &candidate);
    let mut best = candidate;
    for alt in [baselines::round_robin(tree, n), baselines::compact(tree, n)] {
        let c = hop_cost(tree, comm, &alt);
        if c < best_cost - 1e-9 * best_cost.abs() {
            best_cost = c;
            best = alt;
        }
    }
    best
}

/// EagerMap-style mapping (000 §4.4: kMAF computes the mapping with EagerMap from the sharing
/// matrix and the hardware hierarchy): bottom-up greedy grouping over every level that shares
/// hardware, top-down assignment; then never worse than the identity (see
/// [`no_worse_than_identity`]). Counts: see the module documentation.
pub fn eagermap(tree: &Tree, comm: &CommMatrix, n: usize) -> Placement {
    let p = hierarchical(tree, comm, n, |_| Grouping::Greedy);
    no_worse_than_identity(tree, comm, p)
}

/// Locality (002 §2.3.3 Fig. 2.5, computed as with TreeMatch: tasks that communicate most share the
/// deepest possible subtree, minimising the tree hop cost), with the TreeMatch-style grouping at
/// every level; never worse than the identity. Counts: see the module documentation.
pub fn locality(tree: &Tree, comm: &CommMatrix, n: usize) -> Placement {
    let p = hierarchical(tree, comm, n, |_| Grouping::Agglomerate);
    no_worse_than_identity(tree, comm, p)
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
