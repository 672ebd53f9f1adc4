//! DeLoc's mappings (002 ch. 3-4): DeLocMap over groups of concurrently communicating task pairs
//! (§3.3, Algorithm 1) and the online OnDeLocMap+ that keeps pairs on their current nodes (§4.3.2.3).
//!
//! "NUMA node" is the tree's [`Tree::node_level`] (the level below the root when the machine has one
//! node). Node capacity is its number of PU slots: one per PU, or with `n > P` tasks `⌊n/P⌋`/`⌈n/P⌉`
//! as in [`crate::hier`], so no PU stays free while another holds two tasks. Within a node, tasks
//! take free PUs in tree order, so the two tasks of a pair mapped together land on neighbouring PUs.

use crate::hier::{no_worse_than_identity, slots};
use crate::quality::pair_weight;
use crate::tree::Tree;
use crate::{CommMatrix, Placement};

/// A communicating pair of tasks and its amount of communication (S_comm, 002 eq. 3.1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pair {
    /// First task.
    pub a: usize,
    /// Second task.
    pub b: usize,
    /// Amount of communication (bytes or events).
    pub comm: f64,
}

/// Free PU slots per node.
struct Nodes {
    /// Leaves of each node in tree order.
    leaves: Vec<Vec<usize>>,
    /// Remaining slots per leaf.
    cap: Vec<usize>,
    node_of_leaf: Vec<usize>,
    cursor: usize,
}

impl Nodes {
    fn new(tree: &Tree, n: usize) -> Nodes {
        let nl = tree.node_level();
        let nl = if nl == 0 && tree.depth() > 1 { 1 } else { nl };
        let leaves: Vec<Vec<usize>> = (0..tree.width(nl))
            .map(|v| tree.range(nl, v).collect())
            .collect();
        let mut node_of_leaf = vec![0; tree.pu_count()];
        for (v, ls) in leaves.iter().enumerate() {
            for &l in ls {
                node_of_leaf[l] = v;
            }
        }
        Nodes {
            leaves,
            cap: slots(tree, n),
            node_of_leaf,
            cursor: 0,
        }
    }

    fn room(&self, node: usize) -> usize {
        self.leaves[node].iter().map(|&l| self.cap[l]).sum()
    }

    fn any_room(&self) -> bool {
        self.cap.iter().any(|&c| c > 0)
    }

    /// Takes a slot in `node`, on `prefer` if that leaf is in the node and free.
    fn take(&mut self, node: usize, prefer: Option<usize>) -> Option<usize> {
        if let Some(l) = prefer {
            if self.node_of_leaf.get(l) == Some(&node) && self.cap[l] > 0 {
                self.cap[l] -= 1;
                return Some(l);
            }
        }
        let l = *self.leaves[node].iter().find(|&&l| self.cap[l] > 0)?;
        self.cap[l] -= 1;
        Some(l)
    }

    /// The round-robin node cursor: the next node (from the cursor) with at least `want` free
    /// slots, else with any; advances the cursor past it.
    fn next_node(&mut self, want: usize) -> Option<usize> {
        let k = self.leaves.len();
        let pick = (0..k)
            .map(|i| (self.cursor + i) % k)
            .find(|&v| self.room(v) >= want)
            .or_else(|| {
                (0..k)
                    .map(|i| (self.cursor + i) % k)
                    .find(|&v| self.room(v) > 0)
            })?;
        self.cursor = (pick + 1) % k;
        Some(pick)
    }
}

/// DeLocMap (002 §3.3.3, Algorithm 1, eq. 3.1-3.2).
///
/// `L_pair = S_comm / Σ S_comm` over the pairs of all groups (eq. 3.1; the prose says "normalized to
/// its highest value", the formula divides by the sum — both give the same order, we follow the
/// formula), `L_group = Σ L_pair` over the group (eq. 3.2). Groups are taken by decreasing L_group,
/// their pairs by decreasing L_pair (ties: input order); each pair not yet mapped goes to free PUs of
/// the current node, and the current node advances round-robin (Lines 11-13), so that the pairs of
/// one group (concurrent communication) land on different nodes. Readings where the pseudocode is
/// silent: a pair with one task already mapped maps the other to its partner's node when that has
/// room (locality), else to the current node; a node without room for both tasks takes one and the
/// next node the other; tasks in no pair are dealt round-robin over the nodes with room at the end.
/// With no groups (no DeLocProf analysis), every communicating pair of `comm` forms one group.
///
/// This is Algorithm 1 alone; [`delocmap`] adds the identity safeguard.
pub fn delocmap_unchecked(
    tree: &Tree,
    comm: &CommMatrix,
    groups: Option<&[Vec<Pair>]>,
    n: usize,
) -> Placement {
    let derived;
    let groups: &[Vec<Pair>] = match groups {
        Some(g) => g,
        None => {
            derived = vec![pairs_of(comm, n)];
            &derived
        }
    };
    let total: f64 = groups.iter().flatten().map(|p| p.comm).sum();
    let l_pair = |p: &Pair| if total > 0.0 { p.comm / total } else { 0.0 };
    let mut order: Vec<(f64, usize)> = groups
        .iter()
        .enumerate()
        .map(|(i, g)| (g.iter().map(l_pair).sum(), i))
        .collect();
    order.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut nodes = Nodes::new(tree, n);
    let mut leaf: Vec<Option<usize>> = vec![None; n];
    for (_, gi) in order {
        if !nodes.any_room() {
            break;
        }
        let mut pairs: Vec<&Pair> = groups[gi]
            .iter()
            .filter(|p| p.a < n && p.b < n && p.a != p.b)
            .collect();
        pairs.sort_by(|x, y| l_pair(y).total_cmp(&l_pair(x)));
        for p in pairs {
            match (leaf[p.a], leaf[p.b]) {
                (Some(_), Some(_)) => {}
                (None, None) => {
                    let Some(v) = nodes.next_node(2) else { break };
                    leaf[p.a] = nodes.take(v, None);
                    let v2 = if nodes.room(v) > 0 {
                        Some(v)
                    } else {
                        nodes.next_node(1)
                    };
                    leaf[p.b] = v2.and_then(|v2| nodes.take(v2, None));
                }
                (Some(x), None) | (None, Some(x)) => {
                    let t = if leaf[p.a].is_none() { p.a } else { p.b };
                    let home = nodes.node_of_leaf[x];
                    leaf[t] = if nodes.room(home) > 0 {
                        nodes.take(home, Some(x + 1))
                    } else {
                        nodes.next_node(1).and_then(|v| nodes.take(v, None))
                    };
                }
            }
        }
    }
    finish(tree, &mut nodes, leaf)
}

/// DeLocMap ([`delocmap_unchecked`], 002 §3.3 Algorithm 1), whose result is then compared in hop
/// cost with the identity and compact mappings, the cheapest being returned, so that DeLoc is never
/// worse than the identity. This can trade DeLoc's congestion goal for locality on matrices
/// where the identity is already local; call [`delocmap_unchecked`] for the algorithm alone.
pub fn delocmap(
    tree: &Tree,
    comm: &CommMatrix,
    groups: Option<&[Vec<Pair>]>,
    n: usize,
) -> Placement {
    let p = delocmap_unchecked(tree, comm, groups, n);
    no_worse_than_identity(tree, comm, p)
}

/// Every communicating pair (i < j) of the matrix with its symmetric weight, in index order.
fn pairs_of(comm: &CommMatrix, n: usize) -> Vec<Pair> {
    let n = n.min(comm.len());
    let mut v = Vec::new();
    for a in 0..n {
        for b in a + 1..n {
            let w = pair_weight(comm, a, b);
            if w > 0.0 {
                v.push(Pair { a, b, comm: w });
            }
        }
    }
    v
}

/// Unplaced tasks round-robin over the nodes with room.
fn finish(tree: &Tree, nodes: &mut Nodes, mut leaf: Vec<Option<usize>>) -> Placement {
    for l in leaf.iter_mut().filter(|l| l.is_none()) {
        *l = nodes.next_node(1).and_then(|v| nodes.take(v, None));
    }
    leaf.into_iter().map(|l| tree.pu(l.unwrap_or(0))).collect()
}

/// OnDeLocMap+ (002 §4.3.2.3, Algorithm 2).
///
/// Pairs are every cell (x, y), x < y, of the matrix with communication, by decreasing amount (ties:
/// index order). For a pair with both tasks unmapped, `getNodesOfCurrentM` gives the nodes of their
/// current PUs; if those nodes have room (two slots when both are on one node) each task stays on
/// its node — on its current PU when that is still free — (Lines 7-9); else the pair goes to the
/// next node with room in round-robin order (Line 11). A pair with one task mapped keeps the other on
/// its current node when it has room, else round-robin; tasks in no pair likewise, at the end.
/// Without a current placement (or for tasks beyond it) every node counts as unavailable, which
/// makes this the round-robin pair mapping of §3.3.3. Not checked against the identity: keeping the
/// current nodes is its goal. Counts: see the module documentation.
pub fn ondelocmap(
    tree: &Tree,
    comm: &CommMatrix,
    current: Option<&Placement>,
    n: usize,
) -> Placement {
    let mut pairs = pairs_of(comm, n);
    pairs.sort_by(|x, y| y.comm.total_cmp(&x.comm).then((x.a, x.b).cmp(&(y.a, y.b))));
    let mut nodes = Nodes::new(tree, n);
    let idx = tree.leaf_index();
    let cur_leaf = |t: usize| -> Option<usize> {
        let pu = *current?.get(t)?;
        idx.get(pu as usize).copied().flatten()
    };
    let mut leaf: Vec<Option<usize>> = vec![None; n];
    let keep = |nodes: &mut Nodes, t: usize| -> Option<usize> {
        let l = cur_leaf(t)?;
        let v = nodes.node_of_leaf[l];
        if nodes.room(v) > 0 {
            nodes.take(v, Some(l))
        } else {
            None
        }
    };
    for p in &pairs {
        if !nodes.any_room() {
            break;
        }
        match (leaf[p.a], leaf[p.b]) {
            (Some(_), Some(_)) => {}
            (None, None) => {
                let (ca, cb) = (cur_leaf(p.a), cur_leaf(p.b));
                let available = match (ca, cb) {
                    (Some(x), Some(y)) => {
                        let (va, vb) = (nodes.node_of_leaf[x], nodes.node_of_leaf[y]);
                        if va == vb {
                            nodes.room(va) >= 2
                        } else {
                            nodes.room(va) > 0 && nodes.room(vb) > 0
                        }
                    }
                    _ => false,
                };
                if available {
                    leaf[p.a] = keep(&mut nodes, p.a);
                    leaf[p.b] = keep(&mut nodes, p.b);
                } else if let Some(v) = nodes.next_node(2) {
                    leaf[p.a] = nodes.take(v, None);
                    let v2 = if nodes.room(v) > 0 {
                        Some(v)
                    } else {
                        nodes.next_node(1)
                    };
                    leaf[p.b] = v2.and_then(|v2| nodes.take(v2, None));
                }
            }
            (Some(_), None) | (None, Some(_)) => {
                let t = if leaf[p.a].is_none() { p.a } else { p.b };
                leaf[t] = keep(&mut nodes, t)
                    .or_else(|| nodes.next_node(1).and_then(|v| nodes.take(v, None)));
            }
        }
    }
    for (t, l) in leaf.iter_mut().enumerate() {
        if l.is_none() {
            *l = keep(&mut nodes, t);
        }
    }
    finish(tree, &mut nodes, leaf)
}
