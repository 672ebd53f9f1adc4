//! The hardware hierarchy as the mapping algorithms see it (003 §2.2.5: "the hardware hierarchy can be
//! represented as a tree"): machine → node/package → shared caches → core → PU, with tree distances.

use numaff_machine::{CacheKind, CpuSet, Machine};

/// What a level of the tree stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LevelKind {
    /// The whole machine (the root, always level 0).
    Machine,
    /// NUMA nodes.
    Node,
    /// Packages (sockets).
    Package,
    /// Instances of a data or unified cache of this level (L1 = 1, ...).
    Cache(u8),
    /// Cores (the PUs of a core are SMT siblings).
    Core,
    /// Processing units (hardware threads); always the last level.
    Pu,
}

impl LevelKind {
    /// A short name: "machine", "node", "package", "L3", "core", "pu".
    pub fn name(self) -> String {
        match self {
            LevelKind::Machine => "machine".into(),
            LevelKind::Node => "node".into(),
            LevelKind::Package => "package".into(),
            LevelKind::Cache(l) => format!("L{l}"),
            LevelKind::Core => "core".into(),
            LevelKind::Pu => "pu".into(),
        }
    }
}

/// The hardware tree of a machine.
///
/// PUs are numbered by their *leaf index* `0..pu_count()` in depth-first order; every vertex of the
/// tree covers a contiguous range of leaf indices. Level 0 is the root (the machine), the last level
/// the PUs; levels that do not split their parent (one child per vertex) are left out, so with
/// `L = depth()` the distance between two PUs is `L - k` where `k` is the deepest level at which they
/// share a vertex: 0 for the same PU, 1 for SMT siblings, 2 for PUs sharing the next level up (a
/// core group or cache), and so on, one per level up to the root.
#[derive(Debug, Clone, PartialEq)]
pub struct Tree {
    kinds: Vec<LevelKind>,
    pus: Vec<u32>,
    /// Per level: start leaf of each vertex, plus the end sentinel.
    starts: Vec<Vec<usize>>,
    /// Per level: vertex of each leaf.
    group_of: Vec<Vec<u32>>,
    node_level: usize,
    /// Machine node position (index into `Machine::nodes`) of each leaf, when known.
    node_pos: Vec<Option<usize>>,
}

impl Tree {
    /// Derives the tree from a machine: candidate levels are its NUMA nodes, packages, data/unified
    /// cache levels (largest first), cores and PUs; a candidate is kept if it covers every PU, is
    /// nested in the previous kept level, and splits it further (more vertices). A machine without
    /// PUs gives a tree with only the root and no leaves.
    pub fn from_machine(m: &Machine) -> Tree {
        // PU sets as sorted lists, and dense tables indexed by cpu id 0..=largest id (the
        // machine's `CpuSet`s are B-trees: building and comparing a thousand of them took most
        // of the 0.3 ms this took for 1024 PUs)
        let all: Vec<u32> = m.pus().iter().collect();
        let span = all.iter().max().map_or(0, |&p| p as usize + 1);
        let mut in_all = vec![false; span];
        for &p in &all {
            in_all[p as usize] = true;
        }
        let within = |s: &CpuSet| -> Vec<u32> {
            s.iter()
                .filter(|&p| in_all.get(p as usize).copied().unwrap_or(false))
                .collect()
        };
        let mut cands: Vec<(LevelKind, Vec<Vec<u32>>)> = Vec::new();
        let nodes: Vec<Vec<u32>> = m.cpu_nodes().map(|n| within(&n.cpus)).collect();
        cands.push((LevelKind::Node, nodes));
        let packs: Vec<Vec<u32>> = m
            .packages
            .iter()
            .map(|p| {
                let mut v: Vec<u32> = p.cores.iter().flat_map(|c| c.pus.iter()).collect();
                v.sort_unstable();
                v.dedup();
                v
            })
            .collect();
        cands.push((LevelKind::Package, packs));
        let mut levels: Vec<u8> = m
            .caches
            .iter()
            .filter(|c| c.kind != CacheKind::Instruction)
            .map(|c| c.level)
            .collect();
        levels.sort_unstable_by(|a, b| b.cmp(a));
        levels.dedup();
        for l in levels {
            let sets: Vec<Vec<u32>> = m
                .caches
                .iter()
                .filter(|c| c.level == l && c.kind != CacheKind::Instruction)
                .map(|c| within(&c.cpus))
                .collect();
            cands.push((LevelKind::Cache(l), sets));
        }
        cands.push((
            LevelKind::Core,
            m.cores().map(|(_, c)| c.pus.iter().collect()).collect(),
        ));
        cands.push((LevelKind::Pu, all.iter().map(|&p| vec![p]).collect()));

        // Keep the nested chain, coarse to fine.
        let mut kept: Vec<(LevelKind, Vec<Vec<u32>>)> =
            vec![(LevelKind::Machine, vec![all.clone()])];
        let mut hit = vec![false; span];
        let mut in_prev = vec![usize::MAX; span];
        for (kind, mut sets) in cands {
            sets.retain(|s| !s.is_empty());
            sets.sort_by_key(|s| s.first().copied());
            sets.dedup();
            // a partition of the PUs: as many members as PUs, all of them PUs, every PU among them
            let covered: usize = sets.iter().map(Vec::len).sum();
            hit.fill(false);
            let mut distinct = 0;
            let mut outside = false;
            for &p in sets.iter().flatten() {
                match hit.get_mut(p as usize) {
                    Some(h) if in_all[p as usize] => {
                        distinct += usize::from(!*h);
                        *h = true;
                    }
                    _ => outside = true,
                }
            }
            if covered != all.len() || outside || distinct != all.len() {
                continue; // overlapping or partial: not a partition of the PUs
            }
            let Some((_, prev)) = kept.last() else {
                continue;
            };
            // Nested: all PUs of each set lie in one set of the previous level (O(P) with a
            // dense PU -> previous set index, instead of subset tests of every pair of sets).
            in_prev.fill(usize::MAX);
            for (i, p) in prev.iter().enumerate() {
                for &pu in p {
                    in_prev[pu as usize] = i;
                }
            }
            let nested = sets.iter().all(|s| {
                let mut it = s
                    .iter()
                    .map(|&pu| in_prev.get(pu as usize).copied().unwrap_or(usize::MAX));
                let first = it.next().unwrap_or(usize::MAX);
                first != usize::MAX && it.all(|x| x == first)
            });
            if !nested || (sets.len() <= prev.len() && kind != LevelKind::Pu) {
                continue;
            }
            if sets.len() == prev.len() {
                // PU level equal to the previous (no SMT, no sharing): the previous becomes the PUs.
                kept.pop();
            }
            kept.push((kind, sets));
        }
        Self::from_partitions(m, kept)
    }

    fn from_partitions(m: &Machine, kept: Vec<(LevelKind, Vec<Vec<u32>>)>) -> Tree {
        let depth = kept.len();
        // Leaf order: sort PUs by the index (in first-PU order) of their vertex at every level.
        let Some((_, leaves)) = kept.last() else {
            return Tree::empty();
        };
        let mut pus: Vec<u32> = leaves.iter().filter_map(|s| s.first().copied()).collect();
        let span = pus.iter().max().map_or(0, |&m| m as usize + 1);
        // keys[pu * depth + level]: the index of the PU's set at every level (dense by cpu id)
        let mut keys: Vec<usize> = vec![0; span * depth];
        for (lvl, (_, sets)) in kept.iter().enumerate() {
            for (i, s) in sets.iter().enumerate() {
                for &p in s {
                    if let Some(k) = keys.get_mut(p as usize * depth + lvl) {
                        *k = i;
                    }
                }
            }
        }
        let key = |p: u32| &keys[p as usize * depth..(p as usize + 1) * depth];
        pus.sort_by(|&a, &b| key(a).cmp(key(b)));
        let mut starts = Vec::with_capacity(depth);
        let mut group_of = Vec::with_capacity(depth);
        for lvl in 0..depth {
            let mut st = Vec::new();
            let mut go = Vec::with_capacity(pus.len());
            let mut last: Option<usize> = None;
            for (leaf, p) in pus.iter().enumerate() {
                let k = key(*p)[lvl];
                if last != Some(k) {
                    st.push(leaf);
                    last = Some(k);
                }
                go.push((st.len() - 1) as u32);
            }
            st.push(pus.len());
            starts.push(st);
            group_of.push(go);
        }
        let kinds: Vec<LevelKind> = kept.iter().map(|(k, _)| *k).collect();
        let node_level = kinds
            .iter()
            .position(|k| *k == LevelKind::Node)
            .unwrap_or(if depth > 2 { 1 } else { 0 });
        // the node position of each PU: the first node (in the machine's order) holding it, as
        // `Machine::node_of_pu` finds it, for all PUs in one pass over the nodes
        let mut node_of: Vec<Option<usize>> = vec![None; span];
        let mut done = vec![false; span];
        for n in &m.nodes {
            let pos = m.node_index(n.id);
            for p in n.cpus.iter() {
                if let Some(d) = done.get_mut(p as usize) {
                    if !*d {
                        *d = true;
                        node_of[p as usize] = pos;
                    }
                }
            }
        }
        let node_pos = pus.iter().map(|&p| node_of[p as usize]).collect();
        Tree {
            kinds,
            pus,
            starts,
            group_of,
            node_level,
            node_pos,
        }
    }

    fn empty() -> Tree {
        Tree {
            kinds: vec![LevelKind::Machine],
            pus: Vec::new(),
            starts: vec![vec![0, 0]],
            group_of: vec![Vec::new()],
            node_level: 0,
            node_pos: Vec::new(),
        }
    }

    /// Number of levels (root and PU level included).
    pub fn levels(&self) -> usize {
        self.kinds.len()
    }

    /// Index of the PU level (`levels() - 1`); the largest possible distance.
    pub fn depth(&self) -> usize {
        self.kinds.len() - 1
    }

    /// What level `l` stands for.
    pub fn kind(&self, l: usize) -> LevelKind {
        self.kinds[l]
    }

    /// Number of PUs (leaves).
    pub fn pu_count(&self) -> usize {
        self.pus.len()
    }

    /// Kernel cpu id of a leaf.
    pub fn pu(&self, leaf: usize) -> u32 {
        self.pus[leaf]
    }

    /// All kernel cpu ids in leaf order.
    pub fn pus(&self) -> &[u32] {
        &self.pus
    }

    /// Leaf index of a kernel cpu id.
    pub fn leaf_of(&self, pu: u32) -> Option<usize> {
        self.pus.iter().position(|&p| p == pu)
    }

    /// A map kernel cpu id → leaf index (dense over 0..=max cpu id).
    pub fn leaf_index(&self) -> Vec<Option<usize>> {
        let max = self.pus.iter().copied().max().map_or(0, |m| m as usize + 1);
        let mut v = vec![None; max];
        for (leaf, &p) in self.pus.iter().enumerate() {
            v[p as usize] = Some(leaf);
        }
        v
    }

    /// Number of vertices at level `l`.
    pub fn width(&self, l: usize) -> usize {
        self.starts[l].len() - 1
    }

    /// Leaf range of vertex `v` at level `l`.
    pub fn range(&self, l: usize, v: usize) -> std::ops::Range<usize> {
        self.starts[l][v]..self.starts[l][v + 1]
    }

    /// Vertex at level `l` holding a leaf.
    pub fn vertex_of(&self, l: usize, leaf: usize) -> usize {
        self.group_of[l][leaf] as usize
    }

    /// Children (vertex indices at level `l + 1`) of vertex `v` at level `l`.
    pub fn children(&self, l: usize, v: usize) -> std::ops::Range<usize> {
        let r = self.range(l, v);
        if r.is_empty() {
            return 0..0;
        }
        self.vertex_of(l + 1, r.start)..self.vertex_of(l + 1, r.end - 1) + 1
    }

    /// The level that plays the role of NUMA nodes: the node level where nodes split the machine,
    /// else the first level below the root (packages, or the top shared cache), else the root.
    pub fn node_level(&self) -> usize {
        self.node_level
    }

    /// Position in `Machine::nodes` of the NUMA node of a leaf, when the machine says.
    pub fn machine_node(&self, leaf: usize) -> Option<usize> {
        self.node_pos.get(leaf).copied().flatten()
    }

    /// Tree distance between two leaves: 0 same PU, 1 SMT siblings, ... `depth()` only the root.
    pub fn distance(&self, a: usize, b: usize) -> u32 {
        if a == b {
            return 0;
        }
        let d = self.depth();
        for l in (0..d).rev() {
            if self.group_of[l][a] == self.group_of[l][b] {
                return (d - l) as u32;
            }
        }
        d as u32
    }

    /// The deepest level at which two leaves share a vertex (`depth()` when they are the same).
    pub fn common_level(&self, a: usize, b: usize) -> usize {
        self.depth() - self.distance(a, b) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_levels_and_distances() {
        let m = numaff_machine::spec::resolve("pack:2 core:2 pu:2").unwrap();
        let t = Tree::from_machine(&m);
        let kinds: Vec<_> = (0..t.levels()).map(|l| t.kind(l)).collect();
        assert_eq!(
            kinds,
            vec![
                LevelKind::Machine,
                LevelKind::Package,
                LevelKind::Core,
                LevelKind::Pu
            ]
        );
        assert_eq!(t.pu_count(), 8);
        let l = |p| t.leaf_of(p).unwrap();
        assert_eq!(t.distance(l(0), l(0)), 0);
        assert_eq!(t.distance(l(0), l(1)), 1);
        assert_eq!(t.distance(l(0), l(2)), 2);
        assert_eq!(t.distance(l(0), l(4)), 3);
        assert_eq!(t.node_level(), 1);
        assert_eq!(t.children(0, 0), 0..2);
        assert_eq!(t.children(1, 1), 2..4);
    }

    #[test]
    fn caches_and_nodes_become_levels() {
        let m = numaff_machine::spec::resolve("pack:2 numa:1 l3:1 core:2 pu:1").unwrap();
        let t = Tree::from_machine(&m);
        // node, package and L3 coincide: one level; cores are the PUs (no SMT).
        assert_eq!(
            t.levels(),
            3,
            "{:?}",
            (0..t.levels()).map(|l| t.kind(l)).collect::<Vec<_>>()
        );
        assert_eq!(t.kind(1), LevelKind::Node);
        assert_eq!(t.distance(0, 1), 1);
        assert_eq!(t.distance(0, 2), 2);
        for name in numaff_machine::catalog::names() {
            let m = numaff_machine::spec::resolve(name).unwrap();
            let t = Tree::from_machine(&m);
            assert_eq!(t.pu_count(), m.pu_count(), "{name}");
        }
    }
}
