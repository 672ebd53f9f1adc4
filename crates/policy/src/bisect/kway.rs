//! k-way refinement of the parts of a tree vertex's children: Kernighan–Lin-style pairwise
//! exchanges that lower the weight cut between the children with their sizes fixed.

use crate::graph::Graph;

/// Scratch buffers of [`kway_refine`].
#[derive(Default)]
pub(super) struct KWork {
    part: Vec<u32>,
    pos: Vec<u32>,
    aff: Vec<f64>,
    wx: Vec<f64>,
    members: Vec<Vec<u32>>,
}

/// Pairwise exchanges between the `k = parts.len()` children of a tree vertex (sizes fixed) while
/// they lower the weight cut between the children, at most [`KWAY_PASSES`] passes; `all` lists the
/// vertex's tasks (the parts are subsequences of it, and keep its order). With `aff(x, p)` the
/// weight from x to part p, exchanging x (part a) and y (part b) gains
/// `aff(x,b) - aff(x,a) + aff(y,a) - aff(y,b) - 2 w(x,y)`, positive only if x prefers b or y
/// prefers a, so each task looks at the members of the parts it prefers to its own and takes its
/// best exchange (ties: the first found). `loc` is scratch (all `u32::MAX` on entry and on return).
pub(super) fn kway_refine(
    graph: &Graph,
    all: &[u32],
    parts: &mut [Vec<u32>],
    loc: &mut [u32],
    kw: &mut KWork,
) {
    let k = parts.len();
    let m = all.len();
    for (i, &t) in all.iter().enumerate() {
        loc[t as usize] = i as u32;
    }
    let KWork {
        part,
        pos,
        aff,
        wx,
        members,
    } = kw;
    part.clear();
    part.resize(m, 0);
    pos.clear();
    pos.resize(m, 0);
    members.resize_with(k, Vec::new);
    for (p, ts) in parts.iter().enumerate() {
        members[p].clear();
        for &t in ts {
            let x = loc[t as usize];
            part[x as usize] = p as u32;
            pos[x as usize] = members[p].len() as u32;
            members[p].push(x);
        }
    }
    aff.clear();
    aff.resize(m * k, 0.0);
    wx.clear();
    wx.resize(m, 0.0);
    // (the buffers as slices: their lengths stay in registers, not reloaded after each store)
    let (part, pos, aff, wx) = (&mut part[..], &mut pos[..], &mut aff[..], &mut wx[..]);
    let mut total = 0.0;
    for (x, &t) in all.iter().enumerate() {
        for (y, w) in graph.row(t as usize) {
            let ly = loc[y];
            if ly != u32::MAX {
                aff[x * k + part[ly as usize] as usize] += w;
                total += w;
            }
        }
    }
    let eps = 1e-9 * total.max(f64::MIN_POSITIVE);
    for _ in 0..KWAY_PASSES {
        let mut improved = false;
        for x in 0..m {
            let a = part[x] as usize;
            let ax = aff[x * k + a];
            // only a part that x prefers to its own can give an exchange (below): one pass
            // over its affinities first, without a branch per part (most tasks prefer none)
            // (`bx <= ax` fails exactly where bx is greater or either is NaN)
            let prefers = aff[x * k..(x + 1) * k].iter().fold(false, |p, bx| {
                p | matches!(
                    bx.partial_cmp(&ax),
                    Some(std::cmp::Ordering::Greater) | None
                )
            });
            if !prefers {
                continue;
            }
            let mut best: Option<(f64, usize)> = None;
            let mut scattered = false;
            for b in 0..k {
                let bx = aff[x * k + b];
                if b == a || bx <= ax {
                    continue;
                }
                if !scattered {
                    for (y, w) in graph.row(all[x] as usize) {
                        let ly = loc[y];
                        if ly != u32::MAX {
                            wx[ly as usize] = w;
                        }
                    }
                    scattered = true;
                }
                for &y in &members[b] {
                    let y = y as usize;
                    let gain = bx - ax + aff[y * k + a] - aff[y * k + b] - 2.0 * wx[y];
                    if gain > eps && best.is_none_or(|(bg, _)| gain > bg) {
                        best = Some((gain, y));
                    }
                }
            }
            if scattered {
                for (y, _) in graph.row(all[x] as usize) {
                    let ly = loc[y];
                    if ly != u32::MAX {
                        wx[ly as usize] = 0.0;
                    }
                }
            }
            let Some((_, y)) = best else { continue };
            let b = part[y] as usize;
            for (z, w) in graph.row(all[x] as usize) {
                let lz = loc[z];
                if lz != u32::MAX {
                    aff[lz as usize * k + a] -= w;
                    aff[lz as usize * k + b] += w;
                }
            }
            for (z, w) in graph.row(all[y] as usize) {
                let lz = loc[z];
                if lz != u32::MAX {
                    aff[lz as usize * k + b] -= w;
                    aff[lz as usize * k + a] += w;
                }
            }
            let (px, py) = (pos[x] as usize, pos[y] as usize);
            members[a][px] = y as u32;
            members[b][py] = x as u32;
            pos.swap(x, y);
            part[x] = b as u32;
            part[y] = a as u32;
            improved = true;
        }
        if !improved {
            break;
        }
    }
    for p in parts.iter_mut() {
        p.clear();
    }
    for (x, &t) in all.iter().enumerate() {
        parts[part[x] as usize].push(t);
    }
    for &t in all {
        loc[t as usize] = u32::MAX;
    }
}

/// Passes of [`kway_refine`] at most.
const KWAY_PASSES: usize = 2;

#[cfg(test)]
mod tests {
    use super::*;
    use numaff_machine::rng::SplitMix64;

    /// Weight cut between the parts (each edge once).
    fn parts_cut(g: &Graph, parts: &[Vec<u32>]) -> f64 {
        let mut part = vec![usize::MAX; g.len()];
        for (p, ts) in parts.iter().enumerate() {
            for &t in ts {
                part[t as usize] = p;
            }
        }
        let mut c = 0.0;
        for x in 0..g.len() {
            for (y, w) in g.row(x) {
                if y > x && part[x] != usize::MAX && part[y] != usize::MAX && part[x] != part[y] {
                    c += w;
                }
            }
        }
        c
    }

    /// The k-way refinement keeps every part's size, never raises the cut, keeps each part in the
    /// vertex's task order, and untangles four cliques whose parts each hold one vertex of the
    /// next clique (cut 0 afterwards).
    #[test]
    fn kway_refine_keeps_sizes_and_lowers_cut() {
        let n = 16;
        let mut c = crate::CommMatrix::new(n);
        for q in 0..4 {
            for i in 0..4 {
                for j in i + 1..4 {
                    c.add_pair(4 * q + i, 4 * q + j, 10.0);
                }
            }
        }
        let g = Graph::from_comm(&c, n, n);
        // part q: clique q without its first vertex, plus the first vertex of clique q+1
        let mut parts: Vec<Vec<u32>> = (0..4u32)
            .map(|q| {
                let mut p: Vec<u32> = (1..4).map(|i| 4 * q + i).collect();
                p.push(4 * ((q + 1) % 4));
                p.sort_unstable();
                p
            })
            .collect();
        let all: Vec<u32> = (0..n as u32).collect();
        let mut loc = vec![u32::MAX; n];
        let mut kw = KWork::default();
        assert!(parts_cut(&g, &parts) > 0.0);
        kway_refine(&g, &all, &mut parts, &mut loc, &mut kw);
        assert_eq!(parts_cut(&g, &parts), 0.0, "{parts:?}");
        assert!(parts.iter().all(|p| p.len() == 4));
        assert!(loc.iter().all(|&l| l == u32::MAX));

        // random graphs and random parts: sizes kept, cut not raised, order kept
        let mut rng = SplitMix64::new(61);
        for round in 0..20 {
            let n = 30 + rng.below(60);
            let mut c = crate::CommMatrix::new(n);
            for _ in 0..4 * n {
                let (i, j) = (rng.below(n), rng.below(n));
                if i != j {
                    c.add_pair(i, j, 1.0 + rng.below(9) as f64);
                }
            }
            let g = Graph::from_comm(&c, n, n);
            // a vertex's tasks: a shuffled subset of the graph's vertices
            let mut all: Vec<u32> = (0..n as u32).filter(|_| rng.below(5) > 0).collect();
            for i in (1..all.len()).rev() {
                all.swap(i, rng.below(i + 1));
            }
            let k = 3 + rng.below(6);
            let mut parts: Vec<Vec<u32>> = vec![Vec::new(); k];
            for &t in &all {
                parts[rng.below(k)].push(t);
            }
            let sizes: Vec<usize> = parts.iter().map(Vec::len).collect();
            let before = parts_cut(&g, &parts);
            let mut loc = vec![u32::MAX; n];
            kway_refine(&g, &all, &mut parts, &mut loc, &mut kw);
            let after = parts_cut(&g, &parts);
            assert!(after <= before, "round {round}: cut {before} -> {after}");
            assert_eq!(parts.iter().map(Vec::len).collect::<Vec<_>>(), sizes);
            let rank: std::collections::HashMap<u32, usize> =
                all.iter().enumerate().map(|(i, &t)| (t, i)).collect();
            for p in &parts {
                assert!(
                    p.windows(2).all(|w| rank[&w[0]] < rank[&w[1]]),
                    "round {round}"
                );
            }
            let mut seen: Vec<u32> = parts.concat();
            seen.sort_unstable();
            let mut want = all.clone();
            want.sort_unstable();
            assert_eq!(seen, want);
            assert!(loc.iter().all(|&l| l == u32::MAX));
        }
    }
}
