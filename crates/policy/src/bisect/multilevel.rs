//! One split of a vertex's tasks: their subgraph, its multilevel bisection (coarsen, partition
//! the coarsest graph, refine on the way back) and the optional V-cycle.

use super::coarsen::{contract, matching, matching_within};
use super::fm::{force_balance, refine};
use super::initial::{initial, small_split};
use super::{Effort, Sub, Work, EXACT, EXPANDER, LIGHT_PASSES, PASSES};
use crate::graph::Graph;

/// Coarsening stops at this many vertices.
const COARSE: usize = 48;

/// Splits `tasks` into a part of exactly `ca` tasks and the rest, cutting little weight; both parts
/// keep the order of `tasks`. `loc` is scratch (all `u32::MAX` on entry and on return).
pub(super) fn bisect(
    graph: &Graph,
    tasks: Vec<u32>,
    ca: usize,
    loc: &mut [u32],
    wk: &mut Work,
) -> (Vec<u32>, Vec<u32>) {
    let nv = tasks.len();
    if ca == 0 || ca >= nv {
        return if ca == 0 {
            (Vec::new(), tasks)
        } else {
            (tasks, Vec::new())
        };
    }
    for (i, &t) in tasks.iter().enumerate() {
        loc[t as usize] = i as u32;
    }
    // room for every edge of the tasks (no regrowth while filling)
    let room: usize = tasks.iter().map(|&t| graph.row_len(t as usize)).sum();
    // buffers of an earlier split's graphs (no allocation per split)
    let mut sub = wk.spare.pop().unwrap_or_default();
    sub.clear();
    sub.off.reserve(nv + 1);
    sub.adj.resize(room, 0);
    sub.w.resize(room, 0.0);
    sub.vw.resize(nv, 1);
    sub.off.push(0);
    // branch-free filling (whether a neighbour is among `tasks` is unpredictable): every edge
    // is written at `k`, which advances only for the kept ones
    let mut k = 0;
    {
        // (the buffers as slices: their lengths stay in registers, not reloaded per edge)
        let (adj, ws, off) = (&mut sub.adj[..], &mut sub.w[..], &mut sub.off);
        for &t in &tasks {
            for (y, w) in graph.row(t as usize) {
                let ly = loc[y];
                adj[k] = ly;
                ws[k] = w;
                k += usize::from((ly != u32::MAX) & (w > 0.0));
            }
            off.push(k);
        }
    }
    sub.adj.truncate(k);
    sub.w.truncate(k);
    for &t in &tasks {
        loc[t as usize] = u32::MAX;
    }
    if 2 * ca == nv {
        strip_hubs(&mut sub);
    }
    let side: Vec<u8> = if !sub.adj.is_empty() && ca != 1 && ca + 1 != nv && nv > EXACT {
        multilevel(sub, ca as i64, wk)
    } else {
        let side = small_split(&sub, ca);
        wk.spare.push(sub);
        side
    };
    let mut a = Vec::with_capacity(ca);
    let mut b = Vec::with_capacity(nv - ca);
    for (i, t) in tasks.into_iter().enumerate() {
        if side[i] == 0 {
            a.push(t);
        } else {
            b.push(t);
        }
    }
    (a, b)
}

/// Removes the uniform part of every hub's edges, for a split into two equal halves: a vertex x
/// adjacent to all the others with weights at least `m` contributes `m` times the size of the side
/// without x to any cut, `m · nv / 2` whichever side x is on, so subtracting `m` from each of its
/// edges changes no comparison between balanced splits. It matters for master-worker graphs: the
/// master's edges make every imbalance worth more than all the workers' own edges, which misleads
/// the coarse levels (where the balance has a tolerance) and makes every vertex a neighbour of every
/// other (no pseudo-peripheral vertex, no growing along the workers' chain). Hubs are taken one at
/// a time in index order (a later hub sees the weights left by earlier ones); edges that reach 0
/// are dropped.
fn strip_hubs(sub: &mut Sub) {
    let nv = sub.len();
    let mut changed = false;
    for x in 0..nv {
        let r = sub.off[x]..sub.off[x + 1];
        if r.len() + 1 != nv {
            continue;
        }
        let m = sub.w[r.clone()]
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min);
        if m.is_nan() || m <= 0.0 {
            continue;
        }
        for k in r {
            sub.w[k] -= m;
            let y = sub.adj[k] as usize;
            let ry = sub.off[y]..sub.off[y + 1];
            if let Some(j) = sub.adj[ry.clone()].iter().position(|&z| z as usize == x) {
                sub.w[ry.start + j] -= m;
            }
        }
        changed = true;
    }
    if !changed {
        return;
    }
    // drop the edges that became 0 (or a rounding residue of their former weight)
    let mut off = Vec::with_capacity(nv + 1);
    off.push(0);
    let mut k = 0;
    for x in 0..nv {
        for i in sub.off[x]..sub.off[x + 1] {
            if sub.w[i] > 1e-12 * sub.w[i].abs().max(1.0) {
                sub.adj[k] = sub.adj[i];
                sub.w[k] = sub.w[i];
                k += 1;
            }
        }
        off.push(k);
    }
    sub.adj.truncate(k);
    sub.w.truncate(k);
    sub.off = off;
}

/// Multilevel bisection of `sub` (unit vertex weights) into side 0 of weight exactly `ca` and
/// side 1.
fn multilevel(sub: Sub, ca: i64, wk: &mut Work) -> Vec<u8> {
    let nv = sub.len() as i64;
    let small = ca.min(nv - ca);
    let maxw = (small / 3).min((3 * nv) / (2 * COARSE as i64)).max(1);
    let mut graphs = vec![sub];
    let mut maps: Vec<Vec<u32>> = Vec::new();
    while let Some(g) = graphs.last() {
        if g.len() <= COARSE || maxw <= 1 {
            break;
        }
        let (map, cn) = matching(g, maxw, wk);
        if cn * 10 > g.len() * 9 {
            wk.spare_maps.push(map);
            break;
        }
        let c = contract(g, &map, cn, wk);
        maps.push(map);
        graphs.push(c);
    }
    let coarsest = graphs.len() - 1;
    let g = &graphs[coarsest];
    let tol = if coarsest == 0 { 0 } else { g.max_vw() - 1 };
    let mut side = initial(g, ca, tol, wk);
    if wk.effort == Effort::Undecided {
        // every edge is in two rows: the total weight is half the sum
        let expander = 2.0 * g.cut(&side) >= EXPANDER * g.w.iter().sum::<f64>();
        wk.effort = if expander {
            Effort::Light
        } else {
            Effort::Full
        };
    }
    let passes = if wk.effort.light() {
        LIGHT_PASSES
    } else {
        PASSES
    };
    for k in (0..coarsest).rev() {
        let map = &maps[k];
        side = map.iter().map(|&c| side[c as usize]).collect();
        let g = &graphs[k];
        let tol = if k == 0 { 0 } else { g.max_vw() - 1 };
        refine(g, &mut side, ca, tol, passes, wk);
    }
    force_balance(&graphs[0], &mut side, ca);
    if wk.vcycle && graphs.len() > 1 && graphs[0].len() <= VCYCLE {
        let mut again = side.clone();
        vcycle(&graphs[0], &mut again, ca, maxw, wk);
        if graphs[0].cut(&again) < graphs[0].cut(&side) {
            side = again;
        }
    }
    wk.spare.append(&mut graphs);
    wk.spare_maps.append(&mut maps);
    side
}

/// Multilevel splits of at most this many tasks get a V-cycle when asked (those that were coarsened:
/// on at most [`COARSE`] tasks it would only repeat the FM passes).
const VCYCLE: usize = 64;

/// One more V-cycle over a balanced split `side` of `g0` (Walshaw's iterated multilevel
/// refinement; "V-cycles" in Sanders & Schulz's KaFFPa): the graph is coarsened again, matching
/// only vertices on the same side, in reverse index order so that other pairs form than in the
/// first coarsening; the coarsest graph starts from the split as it stands (every coarse vertex
/// lies on one side, so it is representable there) and is refined level by level on the way back.
/// Coarse FM passes then move whole pairs, which lets a cut leave the local minimum the single
/// moves of the finest level are stuck in (a staircase cut through a shuffled 8x8 stencil block,
/// 10 edges where a straight cut has 8). The result is exactly balanced.
fn vcycle(g0: &Sub, side: &mut Vec<u8>, ca: i64, maxw: i64, wk: &mut Work) {
    let mut graphs: Vec<Sub> = Vec::new();
    let mut maps: Vec<Vec<u32>> = Vec::new();
    let mut cur = side.clone();
    loop {
        let g = graphs.last().unwrap_or(g0);
        if g.len() <= COARSE || maxw <= 1 {
            break;
        }
        let (map, cn) = matching_within(g, maxw, &cur, wk);
        if cn * 10 > g.len() * 9 {
            wk.spare_maps.push(map);
            break;
        }
        let c = contract(g, &map, cn, wk);
        let mut cs = vec![0u8; cn];
        for (x, &m) in map.iter().enumerate() {
            cs[m as usize] = cur[x];
        }
        maps.push(map);
        graphs.push(c);
        cur = cs;
    }
    for k in (0..=graphs.len()).rev() {
        if k < graphs.len() {
            cur = maps[k].iter().map(|&c| cur[c as usize]).collect();
        }
        let g = if k == 0 { g0 } else { &graphs[k - 1] };
        let tol = if k == 0 { 0 } else { g.max_vw() - 1 };
        refine(g, &mut cur, ca, tol, PASSES, wk);
    }
    force_balance(g0, &mut cur, ca);
    *side = cur;
    wk.spare.append(&mut graphs);
    wk.spare_maps.append(&mut maps);
}

#[cfg(test)]
mod tests {
    use super::*;
    use numaff_machine::rng::SplitMix64;

    /// Stripping hubs changes the cut of every split into equal halves by the same constant (so
    /// the best split stays the best): random graphs of 8 vertices with one or two vertices
    /// adjacent to all others, every balanced split enumerated.
    #[test]
    fn strip_hubs_keeps_the_order_of_balanced_splits() {
        let mut rng = SplitMix64::new(6);
        let nv = 8;
        for round in 0..200 {
            let mut c = crate::CommMatrix::new(nv);
            for x in 0..nv {
                for y in x + 1..nv {
                    let hub = x == 0 || (round % 2 == 1 && x == 3);
                    if hub || rng.below(3) == 0 {
                        c.add_pair(x, y, 1.0 + rng.below(20) as f64);
                    }
                }
            }
            let g = Graph::from_comm(&c, nv, nv);
            let mut sub = Sub {
                off: vec![0],
                adj: Vec::new(),
                w: Vec::new(),
                vw: vec![1; nv],
            };
            for x in 0..nv {
                for (y, w) in g.row(x) {
                    sub.adj.push(y as u32);
                    sub.w.push(w);
                }
                sub.off.push(sub.adj.len());
            }
            let before = Sub {
                off: sub.off.clone(),
                adj: sub.adj.clone(),
                w: sub.w.clone(),
                vw: sub.vw.clone(),
            };
            strip_hubs(&mut sub);
            assert!(
                sub.adj.len() < before.adj.len(),
                "round {round}: hub edges left"
            );
            assert!(sub.w.iter().all(|&w| w > 0.0));
            let mut delta: Option<f64> = None;
            for mask in 0u32..1 << nv {
                if mask.count_ones() as usize != nv / 2 {
                    continue;
                }
                let side: Vec<u8> = (0..nv).map(|x| (mask >> x & 1) as u8).collect();
                let d = before.cut(&side) - sub.cut(&side);
                match delta {
                    None => delta = Some(d),
                    Some(d0) => assert!((d - d0).abs() < 1e-9, "round {round}: {d} vs {d0}"),
                }
            }
        }
    }

    /// The V-cycle never makes a split dearer, and on shuffled 8x8 five-point stencils split
    /// 32|32 it finds the straight cut (8 edges) more often than the first multilevel pass alone,
    /// which often ends on a staircase of 10.
    #[test]
    fn vcycle_straightens_stencil_bisections() {
        let (side, n) = (8usize, 64usize);
        let mut straight = [0usize; 2];
        for seed in 1..=20u64 {
            let mut rng = SplitMix64::new(seed);
            let mut perm: Vec<usize> = (0..n).collect();
            for i in (1..n).rev() {
                perm.swap(i, rng.below(i + 1));
            }
            let mut c = crate::CommMatrix::new(n);
            for r in 0..side {
                for col in 0..side {
                    let k = r * side + col;
                    if col + 1 < side {
                        c.add_pair(perm[k], perm[k + 1], 1.0);
                    }
                    if r + 1 < side {
                        c.add_pair(perm[k], perm[k + side], 1.0);
                    }
                }
            }
            let g = Graph::from_comm(&c, n, n);
            let mut loc = vec![u32::MAX; n];
            let mut cuts = [0usize; 2];
            for (i, vcycle) in [false, true].into_iter().enumerate() {
                let mut wk = Work {
                    vcycle,
                    ..Work::default()
                };
                let (a, b) = bisect(&g, (0..n as u32).collect(), 32, &mut loc, &mut wk);
                assert_eq!((a.len(), b.len()), (32, 32));
                let ina: std::collections::HashSet<u32> = a.iter().copied().collect();
                cuts[i] = (0..n)
                    .flat_map(|x| g.row(x).map(move |(y, _)| (x, y)))
                    .filter(|&(x, y)| {
                        x < y && ina.contains(&(x as u32)) != ina.contains(&(y as u32))
                    })
                    .count();
                straight[i] += usize::from(cuts[i] == 8);
            }
            assert!(cuts[1] <= cuts[0], "seed {seed}: {cuts:?}");
        }
        assert!(straight[1] > straight[0], "straight cuts {straight:?}");
    }

    /// A bisection of a chain splits into exactly the asked sizes and cuts one edge (the
    /// optimum), leaving the scratch index clean.
    #[test]
    fn bisection_keeps_sizes_and_finds_chain_cut() {
        let n = 200;
        let mut c = crate::CommMatrix::new(n);
        for i in 0..n - 1 {
            c.add_pair(i, i + 1, 10.0);
        }
        let g = Graph::from_comm(&c, n, n);
        let mut loc = vec![u32::MAX; n];
        let mut wk = Work::default();
        for ca in [1, 37, 100, 163] {
            let (a, b) = bisect(&g, (0..n as u32).collect(), ca, &mut loc, &mut wk);
            assert_eq!((a.len(), b.len()), (ca, n - ca));
            let cut: usize = (0..n - 1)
                .filter(|&i| a.contains(&(i as u32)) != a.contains(&(i as u32 + 1)))
                .count();
            assert_eq!(cut, 1, "ca {ca}");
            assert!(loc.iter().all(|&l| l == u32::MAX));
        }
    }

    /// Splits computed with buffers left over from earlier splits of other graphs (the reuse
    /// across the recursion) are the same as with fresh buffers.
    #[test]
    fn reused_buffers_give_the_same_splits() {
        let n = 300;
        let mut rng = SplitMix64::new(62);
        let mut graphs = Vec::new();
        for deg in [2, 5, 9] {
            let mut c = crate::CommMatrix::new(n);
            for i in 0..n {
                for _ in 0..deg {
                    let j = rng.below(n);
                    if j != i {
                        c.add_pair(i, j, 1.0 + rng.below(50) as f64);
                    }
                }
            }
            graphs.push(Graph::from_comm(&c, n, n));
        }
        let mut loc = vec![u32::MAX; n];
        let mut shared = Work::default();
        for round in 0..2 {
            for (gi, g) in graphs.iter().enumerate() {
                for (ca, len) in [(150, 300), (40, 300), (70, 129), (30, 61)] {
                    let tasks: Vec<u32> = (0..len as u32)
                        .map(|t| (t * 7 + gi as u32) % n as u32)
                        .collect();
                    let fresh = bisect(g, tasks.clone(), ca, &mut loc, &mut Work::default());
                    // the effort is decided per mapping, not a buffer: each split decides anew
                    shared.effort = Effort::Undecided;
                    let reused = bisect(g, tasks, ca, &mut loc, &mut shared);
                    assert_eq!(fresh, reused, "round {round}, graph {gi}, {ca} of {len}");
                    assert_eq!(fresh.0.len(), ca);
                }
            }
        }
        assert!(!shared.spare.is_empty() && !shared.spare_maps.is_empty());
    }
}
