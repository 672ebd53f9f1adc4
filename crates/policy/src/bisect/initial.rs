//! Initial partitions: the coarsest graph's, by greedy graph growing from several starts, and
//! the split of small graphs, exactly.

use super::fm::{refine, refine_pass, Pass};
use super::{Sub, Work, EXACT, LIGHT_PASSES, LIGHT_STARTS, PASSES, STARTS};

/// Graphs of at most twice this many vertices get only two evenly spaced starts.
const SMALL: usize = 8;

/// The split of a graph without edges, with one task alone, or of at most [`EXACT`] tasks.
pub(super) fn small_split(sub: &Sub, ca: usize) -> Vec<u8> {
    let nv = sub.len();
    if sub.adj.is_empty() {
        (0..nv).map(|i| u8::from(i >= ca)).collect()
    } else if ca == 1 || ca + 1 == nv {
        // One task alone: the one of least weight (ties: the lowest index) is the optimum.
        let deg = |x: usize| sub.row(x).map(|(_, w)| w).sum::<f64>();
        let mut lone = 0;
        let mut lw = deg(0);
        for x in 1..nv {
            let d = deg(x);
            if d < lw {
                lone = x;
                lw = d;
            }
        }
        let others = u8::from(ca == 1);
        (0..nv)
            .map(|i| if i == lone { 1 - others } else { others })
            .collect()
    } else {
        exact(sub, ca)
    }
}

/// The optimal split of a small graph (unit weights): every subset of `ca` vertices, in Gosper
/// order (ties: the first found).
fn exact(g: &Sub, ca: usize) -> Vec<u8> {
    let n = g.len();
    let mut w = [[0.0f64; EXACT]; EXACT];
    for (x, row) in w.iter_mut().enumerate().take(n) {
        for (y, v) in g.row(x) {
            row[y] += v;
        }
    }
    let full: u32 = (1u32 << n) - 1;
    let mut mask: u32 = (1u32 << ca) - 1;
    let mut best = (f64::INFINITY, mask);
    while mask <= full {
        // the cells (x in the mask, y not), rows then columns in increasing order
        let mut cut = 0.0;
        let mut xs = mask;
        while xs != 0 {
            let row = &w[xs.trailing_zeros() as usize];
            xs &= xs - 1;
            let mut ys = full & !mask;
            while ys != 0 {
                cut += row[ys.trailing_zeros() as usize];
                ys &= ys - 1;
            }
        }
        if cut < best.0 {
            best = (cut, mask);
        }
        // Gosper's hack: the next larger mask with as many bits
        let c = mask & mask.wrapping_neg();
        let r = mask + c;
        mask = (((r ^ mask) >> 2) / c) | r;
    }
    (0..n).map(|x| u8::from(best.1 >> x & 1 == 0)).collect()
}

/// The coarsest graph's partition: the best (after refinement) of the order start (the first
/// vertices up to `ca`), greedy graph growing from a pseudo-peripheral vertex (an end of a chain, a
/// corner of a stencil), and [`STARTS`] more starts from evenly spaced seeds (two on small graphs).
pub(super) fn initial(g: &Sub, ca: i64, tol: i64, wk: &mut Work) -> Vec<u8> {
    let n = g.len();
    // The starts' buffers live in `Work` (no allocation per start): `seen` holds the distinct
    // grown starts one after the other, `cand` the start being refined, `best` the best so far.
    let mut seen = std::mem::take(&mut wk.seen);
    let mut grown = std::mem::take(&mut wk.grown);
    let mut cand = std::mem::take(&mut wk.cand);
    seen.clear();
    // (cut, whether its refinement pass changed it) of the split in `best`
    let mut best: Option<(f64, bool)> = None;
    let mut best_side: Vec<u8> = Vec::with_capacity(n);
    let mut deg = std::mem::take(&mut wk.deg);
    deg.clear();
    deg.extend((0..n).map(|x| g.row(x).map(|(_, w)| w).sum::<f64>()));
    // twice the total weight (each edge in two rows)
    let total: f64 = deg.iter().sum();
    let slack = if total.is_finite() {
        1e-6 * total
    } else {
        f64::INFINITY
    };
    // Starts that grow the same partition as an earlier one are refined once (refinement is
    // deterministic, and only a strictly better cut replaces the best).
    let mut consider = |side: &[u8], wk: &mut Work| {
        // a cut of 0 cannot be beaten (weights are positive: every cut is at least 0)
        if best.is_some_and(|(bc, _)| bc == 0.0) || seen.chunks_exact(n.max(1)).any(|s| s == side) {
            return;
        }
        seen.extend_from_slice(side);
        cand.clear();
        cand.extend_from_slice(side);
        let mut report = [0.0; 2];
        // the cut to beat, by more than any rounding of the sums compared with it (see below)
        let beat = best.map_or(f64::INFINITY, |(bc, _)| bc + slack);
        // the bound of the pass's early stops costs its upkeep at every move: it is kept while
        // at least one in 8 of this mapping's bounded passes stopped early, or for its first 32
        let [bounded, stopped] = wk.stops;
        let margin = if bounded < 32 || 8 * stopped >= bounded {
            slack
        } else {
            f64::INFINITY
        };
        let changed = match refine_pass(
            g,
            &mut cand,
            ca,
            tol,
            1,
            Some((&mut report, beat, margin)),
            wk,
        ) {
            Pass::Beaten => return,
            pass => pass == Pass::Changed,
        };
        let [start_cut, kept] = report;
        // A refined split whose cut, as the start's cut less the kept moves' gains, exceeds the
        // best one's by more than any rounding of those sums (every term is at most the total
        // weight, in fewer than 10⁹ operations of relative error 2⁻⁵³ each: far below 10⁻⁶ of
        // `total`; not finite: no such test) cannot replace it, whichever way its cut is summed:
        // its exact sum is skipped. The pass itself stops early (`Pass::Beaten`) once neither
        // the splits it passed nor any it can still reach can cut less than `beat`, and ends early
        // once none it can reach can become its best, by the same margin (`refine_pass`).
        if changed && best.is_some_and(|(bc, _)| start_cut - kept > bc + slack) {
            return;
        }
        // a pass that changed nothing leaves the start's cut, summed by the pass in
        // `Sub::cut`'s order (the same value bit for bit)
        let c = if changed { g.cut(&cand) } else { start_cut };
        if best.is_none_or(|(bc, _)| c < bc) {
            best = Some((c, changed));
            std::mem::swap(&mut best_side, &mut cand);
        }
    };
    grown.clear();
    grown.resize(n, 1);
    let mut wa = 0;
    for (o, &vw) in grown.iter_mut().zip(&g.vw) {
        if wa + vw > ca + tol && wa >= ca - tol {
            break;
        }
        *o = 0;
        wa += vw;
    }
    consider(&grown, wk);
    if !wk.effort.light() {
        let seed = peripheral(g, wk);
        grow(g, &deg, seed, ca, tol, wk, &mut grown);
        consider(&grown, wk);
    }
    let spaced = if wk.effort.light() {
        LIGHT_STARTS
    } else {
        STARTS
    };
    let starts = if n > 2 * SMALL { spaced } else { 2 }.min(n);
    for s in 0..starts {
        grow(g, &deg, s * n / starts, ca, tol, wk, &mut grown);
        consider(&grown, wk);
    }
    wk.deg = deg;
    wk.seen = seen;
    wk.grown = grown;
    wk.cand = cand;
    let Some((_, changed)) = best else {
        return Vec::new();
    };
    let mut side = best_side;
    // A first pass that changed nothing would be repeated identically (refinement is
    // deterministic) and stop the refinement: only a changed split is refined further.
    let passes = if wk.effort.light() {
        LIGHT_PASSES
    } else {
        PASSES
    };
    // (with one pass, that pass was the start's own)
    if changed && passes > 1 {
        refine(g, &mut side, ca, tol, passes, wk);
    }
    side
}

/// A pseudo-peripheral vertex: the last one reached by a breadth-first search from the last one
/// reached by a breadth-first search from vertex 0 (ties: lower index).
fn peripheral(g: &Sub, wk: &mut Work) -> usize {
    let n = g.len();
    let seen = &mut wk.bfs_seen;
    seen.clear();
    seen.resize(n, u32::MAX);
    let queue = &mut wk.bfs_queue;
    let mut far = 0;
    for round in 0..2u32 {
        // room for one more write than there are vertices: every neighbour is written at the
        // end of the queue, which advances only for one not reached yet (branch-free)
        queue.clear();
        queue.resize(n + 1, 0);
        queue[0] = far;
        seen[far] = round;
        let (mut head, mut len) = (0, 1);
        while head < len {
            let x = queue[head];
            head += 1;
            for &y in &g.adj[g.off[x]..g.off[x + 1]] {
                let y = y as usize;
                queue[len] = y;
                len += usize::from(seen[y] != round);
                seen[y] = round;
            }
        }
        far = queue[len - 1];
    }
    far
}

/// Greedy graph growing: side 0 starts as `seed` and takes the vertex that gains most (weight to
/// side 0 minus weight to side 1) until it weighs about `ca`.
fn grow(g: &Sub, deg: &[f64], seed: usize, ca: i64, tol: i64, wk: &mut Work, side: &mut Vec<u8>) {
    let n = g.len();
    side.clear();
    side.resize(n, 1);
    let gain = &mut wk.gain;
    gain.clear();
    gain.extend(deg.iter().map(|d| -d));
    // (as slices: their lengths stay in registers, not reloaded after each store)
    let (gain, side) = (&mut gain[..], &mut side[..]);
    let heap = &mut wk.heaps[0];
    heap.reset(n);
    heap.set(seed, f64::INFINITY);
    let mut wa = 0;
    let mut next_free = 0usize;
    while wa < ca {
        let x = match heap.top() {
            Some((_, v)) => {
                heap.remove(v);
                Some(v)
            }
            None => {
                // disconnected: the next free vertex in order
                while next_free < n && side[next_free] == 0 {
                    next_free += 1;
                }
                (next_free < n).then_some(next_free)
            }
        };
        let Some(x) = x else { break };
        if wa + g.vw[x] > ca + tol {
            continue;
        }
        side[x] = 0;
        wa += g.vw[x];
        for (y, w) in g.row(x) {
            if side[y] == 1 {
                gain[y] += 2.0 * w;
                heap.set(y, gain[y]);
            }
        }
    }
}
