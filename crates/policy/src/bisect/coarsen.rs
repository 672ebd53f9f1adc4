//! Coarsening: heavy-edge matching of a split's graph and its contraction into the next coarser
//! graph, as in the coarsening phase of METIS.

use super::{Sub, Work};

/// Weights compared by the matching: classes 25 % wide (log scale), so that a few per cent of
/// measurement noise rarely changes which edge is heaviest (stability).
fn weight_class(w: f64) -> i32 {
    (w.max(f64::MIN_POSITIVE).ln() / 1.25f64.ln()).floor() as i32
}

/// Heavy-edge matching in index order: each unmatched vertex pairs with its unmatched neighbour of
/// heaviest edge class ([`weight_class`]; ties: lower index) if their weights together stay within `maxw`. Returns the
/// coarse vertex of every vertex (numbered in order of first member) and the coarse count.
pub(super) fn matching(g: &Sub, maxw: i64, wk: &mut Work) -> (Vec<u32>, usize) {
    match_in(g, maxw, None, wk)
}

/// [`matching`] for a V-cycle: vertices visited in reverse index order, pairs only within one
/// side of `side`.
pub(super) fn matching_within(g: &Sub, maxw: i64, side: &[u8], wk: &mut Work) -> (Vec<u32>, usize) {
    match_in(g, maxw, Some(side), wk)
}

/// Entries of the [`weight_class`] cache (a power of two).
const CLASSES: usize = 1024;

/// [`weight_class`] through a direct-mapped cache of the last weight seen in each slot (the
/// logarithm dominated the matching; weights repeat: a stencil's 10.0, integer weights, their
/// sums). A hit is the same weight bit for bit, so the class is exactly the computed one.
fn class_of(cache: &mut Vec<(u64, i32)>, w: f64) -> i32 {
    if cache.is_empty() {
        let nan = f64::from_bits(u64::MAX);
        cache.resize(CLASSES, (u64::MAX, weight_class(nan)));
    }
    let bits = w.to_bits();
    let slot = (bits.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 54) as usize & (CLASSES - 1);
    let e = &mut cache[slot];
    if e.0 != bits {
        *e = (bits, weight_class(w));
    }
    e.1
}

/// Heavy-edge matching; with `side`, in reverse index order and within the sides.
fn match_in(g: &Sub, maxw: i64, side: Option<&[u8]>, wk: &mut Work) -> (Vec<u32>, usize) {
    let n = g.len();
    let mut map = wk.spare_maps.pop().unwrap_or_default();
    map.clear();
    map.resize(n, u32::MAX);
    let cache = &mut wk.classes;
    let mut cn = 0u32;
    // (as a slice: its length stays in a register, not reloaded after each store)
    let m = &mut map[..];
    for i in 0..n {
        let x = if side.is_some() { n - 1 - i } else { i };
        if m[x] != u32::MAX {
            continue;
        }
        let mut best: Option<(i32, usize)> = None;
        for (y, w) in g.row(x) {
            if side.is_some_and(|s| s[x] != s[y]) {
                continue;
            }
            if y != x && m[y] == u32::MAX && g.vw[x] + g.vw[y] <= maxw {
                let b = class_of(cache, w);
                // rows are sorted: on equal classes the lower index (met first) stays
                if best.is_none_or(|(bb, _)| b > bb) {
                    best = Some((b, y));
                }
            }
        }
        m[x] = cn;
        if let Some((_, y)) = best {
            m[y] = cn;
        }
        cn += 1;
    }
    (map, cn as usize)
}

/// The coarse graph of a matching: weights summed, edges inside a coarse vertex dropped.
pub(super) fn contract(g: &Sub, map: &[u32], cn: usize, wk: &mut Work) -> Sub {
    let Work {
        spare,
        first,
        fill,
        members,
        acc,
        touched,
        ..
    } = wk;
    // members of each coarse vertex in compressed rows (counting sort by coarse vertex)
    first.clear();
    first.resize(cn + 1, 0);
    for &c in map {
        first[c as usize + 1] += 1;
    }
    for c in 0..cn {
        first[c + 1] += first[c];
    }
    fill.clear();
    fill.extend_from_slice(first);
    members.clear();
    members.resize(map.len(), 0);
    for (x, &c) in map.iter().enumerate() {
        members[fill[c as usize]] = x as u32;
        fill[c as usize] += 1;
    }
    // all 0.0 between coarse vertices (each one's sums are reset after use)
    acc.clear();
    acc.resize(cn, 0.0);
    // the coarse neighbours met for the current coarse vertex, written branch-free (every edge
    // is written at `len`, which advances only for a first meeting): room for the longest run
    let most = (0..cn)
        .map(|c| {
            members[first[c]..first[c + 1]]
                .iter()
                .map(|&x| g.off[x as usize + 1] - g.off[x as usize])
                .sum::<usize>()
        })
        .max()
        .unwrap_or(0);
    touched.clear();
    touched.resize(most, 0);
    // (as slices: their lengths stay in registers, not reloaded after each store)
    let (acc, touched, members, first) = (&mut acc[..], &mut touched[..], &members[..], &first[..]);
    let mut out = spare.pop().unwrap_or_default();
    out.clear();
    out.off.reserve(cn + 1);
    out.adj.reserve(g.adj.len());
    out.w.reserve(g.adj.len());
    out.vw.resize(cn, 0);
    out.off.push(0);
    for c in 0..cn {
        let mut len = 0;
        for &x in &members[first[c]..first[c + 1]] {
            let x = x as usize;
            out.vw[c] += g.vw[x];
            let r = g.off[x]..g.off[x + 1];
            for (&y, &w) in g.adj[r.clone()].iter().zip(&g.w[r]) {
                let h = map[y as usize];
                // an edge inside `c` adds +0.0 to `acc[c]`, which stays +0.0 (weights are
                // positive, so a met neighbour's sum is never 0.0)
                let other = h as usize != c;
                touched[len] = h;
                len += usize::from(other & (acc[h as usize] == 0.0));
                acc[h as usize] += f64::from_bits(w.to_bits() & u64::from(other).wrapping_neg());
            }
        }
        let met = &mut touched[..len];
        met.sort_unstable();
        for &h in met.iter() {
            out.adj.push(h);
            out.w.push(acc[h as usize]);
            acc[h as usize] = 0.0;
        }
        out.off.push(out.adj.len());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use numaff_machine::rng::SplitMix64;

    /// The weight-class cache gives the computed class for every weight, including weights that
    /// land in the same slot one after another (integers, sums, tiny and huge values, repeats).
    #[test]
    fn weight_class_cache_matches_direct() {
        let mut rng = SplitMix64::new(61);
        let mut cache = Vec::new();
        let mut ws: Vec<f64> = (1..=3000).map(f64::from).collect();
        ws.extend((0..3000).map(|_| rng.below(1 << 20) as f64 / 7.0 + 1e-9));
        ws.extend([f64::MIN_POSITIVE, 1e-300, 1e300, 0.1, 0.3, 1.25, 1.5625]);
        // the same weights again, in another order (hits and overwritten slots)
        let again: Vec<f64> = ws.iter().rev().copied().collect();
        ws.extend(again);
        for &w in &ws {
            assert_eq!(class_of(&mut cache, w), weight_class(w), "weight {w}");
        }
        assert_eq!(cache.len(), CLASSES);
    }
}
