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
    /// (dummy tasks). One row-order scan of the matrix, then a transpose to add `c[j][i]`.
    pub(crate) fn from_comm(comm: &CommMatrix, n: usize, total: usize) -> Graph {
        let cn = comm.len().min(n);
        // Rows of c (non-zero, off-diagonal), in column order: one scan of the n² cells, which
        // also counts the entries of each column for the transpose.
        let mut off = Vec::with_capacity(cn + 1);
        let mut adj: Vec<u32> = Vec::new();
        let mut w: Vec<f64> = Vec::new();
        let mut toff = vec![0usize; cn + 1];
        off.push(0);
        const CHUNK: usize = 16;
        for i in 0..cn {
            let row = &comm.row(i)[..cn];
            for (k, chunk) in row.chunks(CHUNK).enumerate() {
                // Sparse rows: skip all-zero chunks with one vectorisable test (an OR of the
                // bits: only +0.0 cells give 0; -0.0 and NaN fall through to the exact test).
                if chunk.iter().fold(0u64, |a, &v| a | v.to_bits()) == 0 {
                    continue;
                }
                for (jj, &v) in chunk.iter().enumerate() {
                    let j = k * CHUNK + jj;
                    if v != 0.0 && i != j {
                        adj.push(j as u32);
                        w.push(v);
                        toff[j + 1] += 1;
                    }
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
