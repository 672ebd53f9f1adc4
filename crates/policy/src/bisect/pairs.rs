//! The pairing of sibling tree vertices with two task slots each (the cores of an L3 cache with
//! one task per PU): a maximum-weight perfect matching of their tasks, by branch and bound.

use crate::graph::Graph;

/// Ranges of at most this many sibling vertices with two task slots each are paired by
/// [`best_pairs`] instead of split in halves (8: the cores of an L3 cache on 16x4x8x2).
pub(super) const PAIRED: usize = 8;

/// Search nodes of [`best_pairs`] at most (then the best pairing found so far). On the
/// `vs_scotch` rows at 64-1024 tasks, chains, stencils and random sparse sets of 16 tasks are
/// solved in at most a few hundred nodes, master-worker ones in a few thousand; clustered ones
/// (cliques of 5-13 tasks, where the plain bound is loose by an odd clique's missing pair) need
/// the odd-set bound of [`PairSearch::search`], with which nearly all finish within 256. 256 keeps
/// the rest to about the cost of the bisections they replace.
const PAIR_NODES: usize = 256;

/// Branch and bound of [`best_pairs`].
struct PairSearch {
    w: [[f64; 2 * PAIRED]; 2 * PAIRED],
    /// Neighbours of each task among the tasks, heaviest first (ties: lower index).
    nb: [[u8; 2 * PAIRED]; 2 * PAIRED],
    deg: [usize; 2 * PAIRED],
    /// Neighbours of each task among the tasks, as a bit set.
    adj: [u32; 2 * PAIRED],
    /// The components of the strong edges (at least half as heavy as the heaviest edge of
    /// either end: the cliques of a clustered set) with more than one task, as bit sets.
    comps: [u32; 2 * PAIRED],
    ncomps: usize,
    /// Neighbours of each task of a component outside it, heaviest first.
    nbo: [[u8; 2 * PAIRED]; 2 * PAIRED],
    dego: [usize; 2 * PAIRED],
    mate: [u8; 2 * PAIRED],
    best: (f64, [u8; 2 * PAIRED]),
    nodes: usize,
    budget: usize,
}

/// No mate yet: left over, paired in order at the end.
const ALONE: u8 = u8::MAX;

impl PairSearch {
    /// The weight kept by `mate` with the left-over tasks of `all` paired in order.
    fn kept(&self, all: u32) -> f64 {
        let mut sum = 0.0;
        let mut lone: Option<usize> = None;
        let mut bits = all;
        while bits != 0 {
            let x = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let m = self.mate[x];
            if m == ALONE {
                match lone.take() {
                    None => lone = Some(x),
                    Some(l) => sum += self.w[l][x],
                }
            } else if (m as usize) > x {
                sum += self.w[x][m as usize];
            }
        }
        sum
    }

    fn search(&mut self, all: u32, free: u32, sum: f64) {
        self.nodes += 1;
        if self.nodes > self.budget {
            return;
        }
        if free == 0 {
            let k = self.kept(all);
            if k > self.best.0 {
                self.best = (k, self.mate);
            }
            return;
        }
        // every free task keeps at most its heaviest edge to a free task, each edge counted by
        // both ends; the task to pair next is the one with the fewest free neighbours (ties: the
        // lowest), so chains and grids are paired from their ends
        let mut bound = 0.0;
        let mut top = [0.0; 2 * PAIRED];
        let mut x = usize::MAX;
        let mut fewest = usize::MAX;
        let mut bits = free;
        while bits != 0 {
            let v = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let cnt = (self.adj[v] & free).count_ones() as usize;
            if cnt > 0 {
                // the heaviest free neighbour: the first free one in weight order
                let mut i = 0;
                while free >> self.nb[v][i] & 1 == 0 {
                    i += 1;
                }
                top[v] = self.w[v][self.nb[v][i] as usize];
                bound += top[v];
            }
            if cnt < fewest {
                fewest = cnt;
                x = v;
            }
        }
        // (left-over pairs may add weight beyond `sum`: they are also reached as pairs, so a
        // bound on the pairs alone suffices for the optimum)
        if sum + bound / 2.0 <= self.best.0 {
            return;
        }
        // odd sets (the matching polytope's odd-set constraints): of a set S of free tasks with
        // an odd count, at least one is paired outside S or not at all, and keeps at most its
        // heaviest edge to a free task outside S; for S the free tasks of each component of the
        // strong edges (disjoint sets), the least such loss of each odd one is subtracted (valid
        // for the pairs alone, as the bound above)
        for &c in &self.comps[..self.ncomps] {
            let set = c & free;
            if set.count_ones().is_multiple_of(2) || set.count_ones() == 1 {
                continue;
            }
            let out = free & !set;
            let mut least = f64::INFINITY;
            let mut bits = set;
            while bits != 0 && least > 0.0 {
                let v = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let mut outside = 0.0;
                if self.adj[v] & out != 0 {
                    for &y in &self.nbo[v][..self.dego[v]] {
                        if out >> y & 1 == 1 {
                            outside = self.w[v][y as usize];
                            break;
                        }
                    }
                }
                least = f64::min(least, top[v] - outside);
            }
            bound -= least;
        }
        if sum + bound / 2.0 <= self.best.0 {
            return;
        }
        for i in 0..self.deg[x] {
            let y = self.nb[x][i] as usize;
            if free >> y & 1 == 1 {
                self.mate[x] = y as u8;
                self.mate[y] = x as u8;
                self.search(all, free & !(1 << x) & !(1 << y), sum + self.w[x][y]);
                self.mate[y] = ALONE;
            }
        }
        self.mate[x] = ALONE;
        self.search(all, free & !(1 << x), sum);
    }
}

/// The pairing of `tasks` (an even number, at most `2 * PAIRED`) that keeps the most weight
/// inside the pairs, i.e. cuts the least between them (a maximum-weight perfect matching, here
/// on at most 16 tasks): a depth-first branch and bound over the partners of the free task with
/// the fewest free neighbours, heaviest edge first, or no partner among its neighbours (left-over
/// tasks are paired in order at the end); the bound adds every free task's heaviest edge to a
/// free task, halved, less for each odd set of free tasks (within a component of the strong
/// edges) the least loss of one of them paired outside it (the odd-set constraints of the
/// matching polytope: Edmonds, "Maximum matching and a polyhedron with 0,1-vertices", 1965).
/// At most [`PAIR_NODES`] nodes, then the best found (the first is the greedy descent); with
/// whether the search was complete (then the pairing is optimal). Pairs in order of their lower
/// task; each pair keeps the order of `tasks`. `loc` is scratch (all `u32::MAX` on entry and on
/// return).
pub(super) fn best_pairs(graph: &Graph, tasks: &[u32], loc: &mut [u32]) -> (Vec<Vec<u32>>, bool) {
    best_pairs_within(graph, tasks, loc, PAIR_NODES)
}

/// [`best_pairs`] with at most `budget` search nodes.
fn best_pairs_within(
    graph: &Graph,
    tasks: &[u32],
    loc: &mut [u32],
    budget: usize,
) -> (Vec<Vec<u32>>, bool) {
    let n = tasks.len();
    let mut ps = PairSearch {
        w: [[0.0; 2 * PAIRED]; 2 * PAIRED],
        nb: [[0; 2 * PAIRED]; 2 * PAIRED],
        deg: [0; 2 * PAIRED],
        adj: [0; 2 * PAIRED],
        comps: [0; 2 * PAIRED],
        ncomps: 0,
        nbo: [[0; 2 * PAIRED]; 2 * PAIRED],
        dego: [0; 2 * PAIRED],
        mate: [ALONE; 2 * PAIRED],
        best: (f64::NEG_INFINITY, [ALONE; 2 * PAIRED]),
        nodes: 0,
        budget,
    };
    for (i, &t) in tasks.iter().enumerate() {
        loc[t as usize] = i as u32;
    }
    for (x, &t) in tasks.iter().enumerate() {
        for (y, v) in graph.row(t as usize) {
            let ly = loc[y];
            if ly != u32::MAX && ly as usize != x {
                ps.w[x][ly as usize] += v;
            }
        }
    }
    for &t in tasks {
        loc[t as usize] = u32::MAX;
    }
    for x in 0..n {
        // heaviest first, ties by index: insertion after every heavier or equal one
        let mut d = 0;
        for y in (0..n).filter(|&y| y != x && ps.w[x][y] > 0.0) {
            let mut i = d;
            while i > 0 && ps.w[x][ps.nb[x][i - 1] as usize] < ps.w[x][y] {
                ps.nb[x][i] = ps.nb[x][i - 1];
                i -= 1;
            }
            ps.nb[x][i] = y as u8;
            ps.adj[x] |= 1 << y;
            d += 1;
        }
        ps.deg[x] = d;
    }
    // each task's heaviest edge among the tasks (0 without one)
    let mut heavy = [0.0; 2 * PAIRED];
    for (v, h) in heavy.iter_mut().enumerate().take(n) {
        if ps.deg[v] > 0 {
            *h = ps.w[v][ps.nb[v][0] as usize];
        }
    }
    let mut strong = [0u32; 2 * PAIRED];
    for (x, sx) in strong.iter_mut().enumerate().take(n) {
        // the neighbours `y` among the tasks (`w[x][y] > 0`), in increasing order
        let mut bits = ps.adj[x];
        while bits != 0 {
            let y = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if 2.0 * ps.w[x][y] >= f64::max(heavy[x], heavy[y]) {
                *sx |= 1 << y;
            }
        }
    }
    let mut seen = 0u32;
    for x in 0..n {
        if seen >> x & 1 == 1 {
            continue;
        }
        let (mut comp, mut front) = (1u32 << x, 1u32 << x);
        while front != 0 {
            let v = front.trailing_zeros() as usize;
            front &= front - 1;
            let new = strong[v] & !comp;
            comp |= new;
            front |= new;
        }
        seen |= comp;
        if comp.count_ones() > 1 {
            ps.comps[ps.ncomps] = comp;
            ps.ncomps += 1;
            let mut bits = comp;
            while bits != 0 {
                let v = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let mut d = 0;
                for i in 0..ps.deg[v] {
                    if comp >> ps.nb[v][i] & 1 == 0 {
                        ps.nbo[v][d] = ps.nb[v][i];
                        d += 1;
                    }
                }
                ps.dego[v] = d;
            }
        }
    }
    let all = if n == 0 { 0 } else { u32::MAX >> (32 - n) };
    ps.search(all, all, 0.0);
    let mate = ps.best.1;
    let mut pairs = Vec::with_capacity(n / 2);
    let mut lone: Option<usize> = None;
    for x in 0..n {
        let m = mate[x];
        if m == ALONE {
            match lone.take() {
                None => lone = Some(x),
                Some(l) => pairs.push((l, vec![tasks[l], tasks[x]])),
            }
        } else if (m as usize) > x {
            pairs.push((x, vec![tasks[x], tasks[m as usize]]));
        }
    }
    pairs.sort_by_key(|p| p.0);
    let complete = ps.nodes <= budget;
    (pairs.into_iter().map(|p| p.1).collect(), complete)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bisect::kway::{kway_refine, KWork};
    use numaff_machine::rng::SplitMix64;

    #[test]
    fn best_pairs_complete_odd_cliques_within_budget() {
        // sets like the clustered rows' (cliques of odd sizes exchanging 100, light edges of 1-5
        // between them): the odd-set bound completes the search within `PAIR_NODES`, optimally
        let mut rng = SplitMix64::new(69);
        for (round, sizes) in [[5, 5, 3, 1], [7, 3, 3, 1], [5, 3, 3, 3], [7, 5, 1, 1]]
            .iter()
            .enumerate()
        {
            let total = 14;
            let mut c = crate::CommMatrix::new(total);
            let mut start = 0;
            for &k in sizes {
                for i in start..start + k {
                    for j in i + 1..start + k {
                        c.add_pair(i, j, 100.0);
                    }
                }
                start += k;
            }
            for i in 0..total {
                let j = rng.below(total);
                if j != i {
                    c.add_pair(i, j, 1.0 + rng.below(5) as f64);
                }
            }
            let g = Graph::from_comm(&c, total, total);
            let mut tasks: Vec<u32> = (0..total as u32).collect();
            for i in (1..total).rev() {
                tasks.swap(i, rng.below(i + 1));
            }
            let mut loc = vec![u32::MAX; total];
            let (pairs, complete) = best_pairs(&g, &tasks, &mut loc);
            assert!(complete, "round {round}");
            let w = |a: u32, b: u32| edge_weight(&g, a, b);
            let kept: f64 = pairs.iter().map(|p| w(p[0], p[1])).sum();
            // the unbounded search, exact (`best_pairs_match_brute_force`)
            let (brute, _) = best_pairs_within(&g, &tasks, &mut loc, usize::MAX);
            let want: f64 = brute.iter().map(|p| w(p[0], p[1])).sum();
            assert_eq!(kept, want, "round {round}: {pairs:?}");
        }
    }

    /// The weight of edge (a, b) of `g` (0 where there is none).
    fn edge_weight(g: &Graph, a: u32, b: u32) -> f64 {
        g.row(a as usize)
            .filter(|&(y, _)| y == b as usize)
            .map(|(_, v)| v)
            .sum()
    }

    /// `best_pairs` searched to the end keeps as much weight inside its pairs as the best of all
    /// pairings (brute force), on random graphs of 4 to 12 tasks among more; every task in one
    /// pair, `loc` restored, and the k-way step changes nothing on it (so skipping it is exact);
    /// with the default budget on a dense 16-task graph, a valid pairing.
    #[test]
    fn best_pairs_match_brute_force() {
        let mut rng = SplitMix64::new(66);
        let total = 20;
        for round in 0..30 {
            let mut c = crate::CommMatrix::new(total);
            for _ in 0..40 {
                let (i, j) = (rng.below(total), rng.below(total));
                if i != j {
                    c.add_pair(i, j, 1.0 + rng.below(9) as f64);
                }
            }
            let g = Graph::from_comm(&c, total, total);
            let k = [4, 6, 8, 10, 12][round % 5];
            let mut tasks: Vec<u32> = (0..total as u32).collect();
            for i in (1..total).rev() {
                tasks.swap(i, rng.below(i + 1));
            }
            tasks.truncate(k);
            let mut loc = vec![u32::MAX; total];
            let (pairs, complete) = best_pairs_within(&g, &tasks, &mut loc, usize::MAX);
            assert!(complete);
            assert!(loc.iter().all(|&l| l == u32::MAX));
            assert_eq!(pairs.len(), k / 2);
            let mut seen: Vec<u32> = pairs.concat();
            seen.sort_unstable();
            let mut want = tasks.clone();
            want.sort_unstable();
            assert_eq!(seen, want);
            let w = |a: u32, b: u32| edge_weight(&g, a, b);
            let kept: f64 = pairs.iter().map(|p| w(p[0], p[1])).sum();
            // brute force: every pairing (the first task with each other one, recursively)
            fn all_pairings(rest: &[u32], w: &dyn Fn(u32, u32) -> f64) -> f64 {
                if rest.is_empty() {
                    return 0.0;
                }
                let mut best = f64::NEG_INFINITY;
                for j in 1..rest.len() {
                    let mut r: Vec<u32> = rest[1..].to_vec();
                    r.remove(j - 1);
                    best = best.max(w(rest[0], rest[j]) + all_pairings(&r, w));
                }
                best
            }
            assert_eq!(kept, all_pairings(&tasks, &w), "round {round}: {pairs:?}");
            // an optimal pairing leaves the k-way step nothing to do (it is skipped then)
            let mut again = pairs.clone();
            kway_refine(&g, &tasks, &mut again, &mut loc, &mut KWork::default());
            assert_eq!(again, pairs, "round {round}");
        }
        // 16 tasks (dense) within the default budget: a valid pairing
        let mut c = crate::CommMatrix::new(16);
        for i in 0..16 {
            for j in i + 1..16 {
                c.add_pair(i, j, 1.0 + ((i * 7 + j * 3) % 5) as f64);
            }
        }
        let g = Graph::from_comm(&c, 16, 16);
        let tasks: Vec<u32> = (0..16).collect();
        let mut loc = vec![u32::MAX; 16];
        let (pairs, _) = best_pairs(&g, &tasks, &mut loc);
        let mut seen: Vec<u32> = pairs.concat();
        seen.sort_unstable();
        assert_eq!(seen, tasks);
        assert!(pairs.iter().all(|p| p.len() == 2));
    }
}
