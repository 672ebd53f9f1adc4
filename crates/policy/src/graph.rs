//! The communication matrix as a sparse, symmetric graph (compressed rows): what the mapping
//! algorithms walk instead of scanning `n²` cells at every step. Weights are the symmetric pair
//! weights `(c[i][j] + c[j][i]) / 2` of [`crate::quality::pair_weight`]; no self loops.

use crate::tree::Tree;
use crate::CommMatrix;

/// A symmetric weighted graph over `len()` vertices in compressed-row form; each row sorted by
/// neighbour.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Graph {
    off: Vec<usize>,
    adj: Vec<u32>,
    w: Vec<f64>,
}

impl Graph {
    /// The graph of the first `n` tasks of `comm`, with `total - n` isolated vertices appended
    /// (dummy tasks). One row-order pass over the cells the matrix marks as non-zero
    /// ([`CommMatrix::nonzero_columns`]), then a transpose to add `c[j][i]`.
    pub(crate) fn from_comm(comm: &CommMatrix, n: usize, total: usize) -> Graph {
        let cn = comm.len().min(n);
        // Rows of c (non-zero, off-diagonal), in column order: one scan of the n² cells, which
        // also counts the entries of each column for the transpose.
        let mut off = Vec::with_capacity(cn + 1);
        let mut adj: Vec<u32> = Vec::new();
        let mut w: Vec<f64> = Vec::new();
        let mut toff = vec![0usize; cn + 1];
        off.push(0);
        // Only the cells the matrix's bitmap marks (every other cell is +0.0); -0.0 fails the
        // test below, NaN passes it, as in a scan of every cell. The marked columns of every row
        // are listed first and their (scattered) cells then read in one loop of independent
        // loads, which overlap: read while deciding what to keep, each cache miss waited for
        // alone.
        let mut cols: Vec<u32> = Vec::new();
        let mut coff = Vec::with_capacity(cn + 1);
        coff.push(0);
        for i in 0..cn {
            cols.extend(
                comm.nonzero_columns(i)
                    .take_while(|&j| j < cn)
                    .map(|j| j as u32),
            );
            coff.push(cols.len());
        }
        let mut vals: Vec<f64> = Vec::with_capacity(cols.len());
        for i in 0..cn {
            let row = comm.row(i);
            vals.extend(cols[coff[i]..coff[i + 1]].iter().map(|&j| row[j as usize]));
        }
        for i in 0..cn {
            let r = coff[i]..coff[i + 1];
            for (&j, &v) in cols[r.clone()].iter().zip(&vals[r]) {
                if v != 0.0 && i != j as usize {
                    adj.push(j);
                    w.push(v);
                    toff[j as usize + 1] += 1;
                }
            }
            off.push(adj.len());
        }
        // Transpose (counting sort by column): rows of cᵀ, also in column order.
        for i in 0..cn {
            toff[i + 1] += toff[i];
        }
        let mut fill = toff.clone();
        let mut tadj = vec![0u32; adj.len()];
        let mut tw = vec![0.0; adj.len()];
        for i in 0..cn {
            for k in off[i]..off[i + 1] {
                let j = adj[k] as usize;
                tadj[fill[j]] = i as u32;
                tw[fill[j]] = w[k];
                fill[j] += 1;
            }
        }
        // Merge row i of c and of cᵀ: weight (c[i][j] + c[j][i]) / 2.
        let mut g = Graph {
            off: Vec::with_capacity(total + 1),
            adj: Vec::with_capacity(adj.len()),
            w: Vec::with_capacity(adj.len()),
        };
        g.off.push(0);
        for i in 0..cn {
            let (mut a, ae) = (off[i], off[i + 1]);
            let (mut b, be) = (toff[i], toff[i + 1]);
            while a < ae || b < be {
                let ja = if a < ae { adj[a] } else { u32::MAX };
                let jb = if b < be { tadj[b] } else { u32::MAX };
                let j = ja.min(jb);
                let mut v = 0.0;
                if ja == j {
                    v += w[a];
                    a += 1;
                }
                if jb == j {
                    v += tw[b];
                    b += 1;
                }
                g.adj.push(j);
                g.w.push(v / 2.0);
            }
            g.off.push(g.adj.len());
        }
        for _ in cn..total {
            g.off.push(g.adj.len());
        }
        g
    }

    /// Number of vertices.
    pub(crate) fn len(&self) -> usize {
        self.off.len().saturating_sub(1)
    }

    /// Neighbours of `x` with their weights.
    pub(crate) fn row(&self, x: usize) -> impl Iterator<Item = (usize, f64)> + '_ {
        let r = self.off[x]..self.off[x + 1];
        self.adj[r.clone()]
            .iter()
            .zip(&self.w[r])
            .map(|(&y, &w)| (y as usize, w))
    }

    /// Number of neighbours of `x`.
    pub(crate) fn row_len(&self, x: usize) -> usize {
        self.off[x + 1] - self.off[x]
    }

    /// Total weight of the edges of `x`.
    pub(crate) fn degree(&self, x: usize) -> f64 {
        self.w[self.off[x]..self.off[x + 1]].iter().sum()
    }

    /// A breadth-first order of the vertices (Cuthill–McKee without the degree sort): from a
    /// pseudo-peripheral vertex (the last one reached by a breadth-first search from vertex 0),
    /// neighbours in row order; a component left over starts at its lowest vertex. Neighbours in
    /// the graph come close in the order, so that the order itself follows the graph's locality.
    pub(crate) fn bfs_order(&self) -> Vec<usize> {
        let n = self.len();
        let mut seen = vec![false; n];
        let mut order: Vec<usize> = Vec::with_capacity(n);
        // the start: the last vertex reached from vertex 0 within its component
        let mut start = 0;
        if n > 0 {
            self.reach(0, &mut seen, &mut order);
            start = order.last().copied().unwrap_or(0);
            seen.iter_mut().for_each(|s| *s = false);
            order.clear();
        }
        let mut next = 0;
        let mut root = Some(start);
        while let Some(r) = root {
            self.reach(r, &mut seen, &mut order);
            while next < n && seen[next] {
                next += 1;
            }
            root = (next < n).then_some(next);
        }
        order
    }

    /// Appends to `order` the vertices not `seen` yet that a breadth-first search from `root`
    /// (not seen) reaches, neighbours in row order, and marks them seen.
    fn reach(&self, root: usize, seen: &mut [bool], order: &mut Vec<usize>) {
        seen[root] = true;
        order.push(root);
        let mut head = order.len() - 1;
        // room for one more write than there are vertices: every neighbour is written at the
        // end of `order`, which advances only for one not seen yet (branch-free: which is
        // unpredictable)
        let mut len = order.len();
        order.resize(seen.len() + 1, 0);
        while head < len {
            let x = order[head];
            head += 1;
            for &y in self.neighbours(x) {
                let y = y as usize;
                order[len] = y;
                len += usize::from(!seen[y]);
                seen[y] = true;
            }
        }
        order.truncate(len);
    }

    /// The weight of the edges between the vertices `x` with `first[x]` and the others, and the
    /// total weight: each edge once (from its lower end), in row order. Branch-free (whether an
    /// edge is cut is unpredictable where the halves do not follow the graph): an uncut edge adds
    /// +0.0, which changes no sum.
    pub(crate) fn halves_cut(&self, first: &[bool]) -> (f64, f64) {
        let (mut cut, mut all) = (0.0, 0.0);
        for (x, &fx) in first.iter().enumerate().take(self.len()) {
            let r = self.off[x]..self.off[x + 1];
            for (&y, &w) in self.adj[r.clone()].iter().zip(&self.w[r]) {
                let y = y as usize;
                if y > x {
                    all += w;
                    let cross = u64::from(fx != first[y]);
                    cut += f64::from_bits(w.to_bits() & cross.wrapping_neg());
                }
            }
        }
        (cut, all)
    }

    /// The neighbours of `x` (row order), without their weights.
    pub(crate) fn neighbours(&self, x: usize) -> &[u32] {
        &self.adj[self.off[x]..self.off[x + 1]]
    }

    /// The graph with vertex `order[i]` renumbered `i` (`order` a permutation of the vertices):
    /// row `i` is row `order[i]` with its neighbours renumbered and sorted, each edge weighing
    /// what it weighs in that row. Built without sorting, by two counting-sort passes: every
    /// entry (x, y) is first appended to a scratch row of y's new number, taking the new numbers
    /// of x in increasing order, then to row x's new number, taking y's in increasing order, so
    /// that every row comes out sorted.
    pub(crate) fn renumbered(&self, order: &[usize]) -> Graph {
        let n = order.len();
        let mut owner = vec![0u32; n];
        for (i, &x) in order.iter().enumerate() {
            owner[x] = i as u32;
        }
        let m = self.adj.len();
        // scratch rows: entry (new x, position of the entry in row x), by new y
        let mut toff = vec![0usize; n + 1];
        for &y in &self.adj {
            toff[owner[y as usize] as usize + 1] += 1;
        }
        for j in 0..n {
            toff[j + 1] += toff[j];
        }
        let mut fill = toff.clone();
        let mut src = vec![(0u32, 0usize); m];
        for (i, &x) in order.iter().enumerate() {
            for k in self.off[x]..self.off[x + 1] {
                let j = owner[self.adj[k] as usize] as usize;
                src[fill[j]] = (i as u32, k);
                fill[j] += 1;
            }
        }
        let mut off = Vec::with_capacity(n + 1);
        off.push(0);
        for &x in order {
            off.push(off[off.len() - 1] + self.row_len(x));
        }
        fill.clear();
        fill.extend_from_slice(&off[..n]);
        let mut adj = vec![0u32; m];
        let mut w = vec![0.0; m];
        for j in 0..n {
            for &(i, k) in &src[toff[j]..toff[j + 1]] {
                let f = &mut fill[i as usize];
                adj[*f] = j as u32;
                w[*f] = self.w[k];
                *f += 1;
            }
        }
        Graph { off, adj, w }
    }

    /// The quotient graph: vertex `owner[x]` for each `x`, weights summed, edges inside a group
    /// dropped; `members[g]` lists the vertices of group `g`.
    pub(crate) fn contract(&self, owner: &[usize], members: &[Vec<usize>]) -> Graph {
        let g_n = members.len();
        let mut acc = vec![0.0; g_n];
        let mut touched: Vec<usize> = Vec::new();
        let mut out = Graph {
            off: Vec::with_capacity(g_n + 1),
            adj: Vec::new(),
            w: Vec::new(),
        };
        out.off.push(0);
        for (g, m) in members.iter().enumerate() {
            for &x in m {
                for (y, w) in self.row(x) {
                    let h = owner[y];
                    if h != g {
                        if acc[h] == 0.0 {
                            touched.push(h);
                        }
                        acc[h] += w;
                    }
                }
            }
            touched.sort_unstable();
            for &h in &touched {
                out.adj.push(h as u32);
                out.w.push(acc[h]);
                acc[h] = 0.0;
            }
            touched.clear();
            out.off.push(out.adj.len());
        }
        out
    }

    /// Hop cost (see [`crate::quality::hop_cost`]) of tasks at leaves `leaf` (`None`: unknown PU,
    /// counted at the root distance).
    pub(crate) fn hop_cost(&self, tree: &Tree, leaf: &[Option<usize>]) -> f64 {
        let far = tree.depth() as u32;
        let mut c = 0.0;
        for (x, lx) in leaf.iter().enumerate().take(self.len()) {
            for (y, w) in self.row(x) {
                if y > x {
                    let d = match (lx, leaf.get(y).copied().flatten()) {
                        (Some(a), Some(b)) => tree.distance(*a, b),
                        _ => far,
                    };
                    c += w * f64::from(d);
                }
            }
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use numaff_machine::rng::SplitMix64;

    /// The graph a scan of every cell gives: for each pair, `(c[i][j] + c[j][i]) / 2` of the cells
    /// that compare unequal to 0.0 (so -0.0 is left out and NaN kept), summed in that order.
    fn scanned(comm: &CommMatrix, n: usize, total: usize) -> Graph {
        let cn = comm.len().min(n);
        let mut g = Graph {
            off: vec![0],
            adj: Vec::new(),
            w: Vec::new(),
        };
        for i in 0..cn {
            for j in 0..cn {
                let (a, b) = (comm.get(i, j), comm.get(j, i));
                if i == j || (a == 0.0 && b == 0.0) {
                    continue;
                }
                let mut v = 0.0;
                if a != 0.0 {
                    v += a;
                }
                if b != 0.0 {
                    v += b;
                }
                g.adj.push(j as u32);
                g.w.push(v / 2.0);
            }
            g.off.push(g.adj.len());
        }
        for _ in cn..total {
            g.off.push(g.adj.len());
        }
        g
    }

    /// Building the graph from the matrix's non-zero bitmap gives the graph of a full scan, bit
    /// for bit: random sparse matrices (sizes around multiples of 64) filled by `set` and
    /// `add_pair`, with cells set back to 0.0, set to -0.0 or NaN, read back through
    /// `from_rows`, `from_csv` and `symmetrized`, and for fewer tasks than the matrix has.
    #[test]
    fn graph_from_nonzero_bitmap_matches_full_scan() {
        let mut rng = SplitMix64::new(66);
        for round in 0..40 {
            let n = [1, 2, 63, 64, 65, 130][round % 6] + rng.below(3);
            let mut c = CommMatrix::new(n);
            for _ in 0..3 * n {
                let (i, j) = (rng.below(n), rng.below(n));
                match rng.below(6) {
                    0 => c.set(i, j, 0.0),
                    1 => c.set(i, j, -0.0),
                    2 if round % 4 == 0 => c.set(i, j, f64::NAN),
                    3 => c.set(i, j, 1.0 + rng.below(50) as f64),
                    _ => c.add_pair(i, j, 0.5 + rng.below(9) as f64),
                }
            }
            let mut variants = vec![c.clone(), c.symmetrized()];
            let rows: Vec<Vec<f64>> = (0..n).map(|i| c.row(i).to_vec()).collect();
            variants.push(CommMatrix::from_rows(&rows).unwrap_or_else(|| CommMatrix::new(0)));
            if round % 4 != 0 {
                // no NaN: the CSV reader refuses it
                variants.push(
                    CommMatrix::from_csv(&c.to_csv(), "m").unwrap_or_else(|_| CommMatrix::new(0)),
                );
            }
            for (k, m) in variants.iter().enumerate() {
                assert_eq!(m.len(), n, "round {round} variant {k}");
                for tasks in [n, n / 2] {
                    let want = scanned(m, tasks, n + 3);
                    let got = Graph::from_comm(m, tasks, n + 3);
                    // bit for bit (NaN weights compare by their bits)
                    let bits = |g: &Graph| g.w.iter().map(|w| w.to_bits()).collect::<Vec<_>>();
                    assert_eq!(
                        (&got.off, &got.adj, bits(&got)),
                        (&want.off, &want.adj, bits(&want)),
                        "round {round} variant {k} tasks {tasks}"
                    );
                }
            }
        }
    }

    /// The renumbered graph (filled by two counting sorts) is the one of sorting every renumbered
    /// row, bit for bit, with each edge weighing what it weighs in its own row; and the
    /// breadth-first order (appended branch-free) is the one of searches that push each neighbour
    /// not seen yet. Random sparse matrices with asymmetric cells, several components, isolated
    /// dummy vertices; random permutations and the breadth-first order.
    #[test]
    fn renumbered_rows_and_bfs_order_match_plain_sorts_and_searches() {
        let mut rng = SplitMix64::new(610);
        for round in 0..30 {
            let n = 1 + rng.below(90);
            let mut c = CommMatrix::new(n);
            for _ in 0..2 * n {
                let (i, j) = (rng.below(n), rng.below(n));
                c.set(i, j, 1.0 + rng.below(7) as f64 / 3.0);
            }
            let g = Graph::from_comm(&c, n, n + round % 3);
            let mut perm: Vec<usize> = (0..g.len()).collect();
            for i in (1..perm.len()).rev() {
                perm.swap(i, rng.below(i + 1));
            }
            // the breadth-first order as the searches pushed it before (a branch per neighbour)
            let reach = |root: usize, seen: &mut Vec<bool>, order: &mut Vec<usize>| {
                seen[root] = true;
                order.push(root);
                let mut head = order.len() - 1;
                while head < order.len() {
                    let x = order[head];
                    head += 1;
                    for (y, _) in g.row(x) {
                        if !seen[y] {
                            seen[y] = true;
                            order.push(y);
                        }
                    }
                }
            };
            let (mut seen, mut want) = (vec![false; g.len()], Vec::new());
            reach(0, &mut seen, &mut want);
            let start = want.last().copied().unwrap_or(0);
            seen.fill(false);
            want.clear();
            reach(start, &mut seen, &mut want);
            while let Some(r) = (0..g.len()).find(|&x| !seen[x]) {
                reach(r, &mut seen, &mut want);
            }
            let bfs = g.bfs_order();
            assert_eq!(bfs, want, "round {round}");
            for order in [perm, bfs] {
                let mut owner = vec![0u32; order.len()];
                for (i, &x) in order.iter().enumerate() {
                    owner[x] = i as u32;
                }
                let r = g.renumbered(&order);
                assert_eq!(r.len(), g.len());
                for (i, &x) in order.iter().enumerate() {
                    let mut want: Vec<(u32, u64)> =
                        g.row(x).map(|(y, w)| (owner[y], w.to_bits())).collect();
                    want.sort_unstable_by_key(|e| e.0);
                    let got: Vec<(u32, u64)> =
                        r.row(i).map(|(y, w)| (y as u32, w.to_bits())).collect();
                    assert_eq!(got, want, "round {round} row {i}");
                }
            }
        }
    }
}
