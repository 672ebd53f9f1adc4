//! Page -> node functions of the MAi memory policies (004 §3.1), pure: each gives, for page (or row,
//! or block) `i` of an array, the *index* of the node among the `m` nodes the policy spreads over (the
//! caller turns an index into a kernel node id through the Machine's node list).
//!
//! - cyclic: page i on node i mod M (round-robin, one page per round; Linux's interleave).
//! - cyclic_block: blocks of k pages round-robin: page i on node floor(i / k) mod M.
//! - skew_mapp: page i on node (i + floor(i / M) + 1) mod M, the formula of 004 §3.1 (Iyer et al.'s
//!   linear page skew). Note 004 §2's prose example ("the first four pages on nodes 0,1,2,3, the next
//!   four on 1,2,3,0") is the same skew without the "+ 1"; we follow the formula, which starts at
//!   node 1: for M = 4 the pages go 1,2,3,0, 2,3,0,1, 3,0,1,2, 0,1,2,3, 1,2,3,0, ...
//! - prime_mapp: two phases (004 §3.1). First, pages go cyclically onto P virtual nodes, P the
//!   smallest prime >= M; virtual nodes 0..M-1 are the real ones. Second, the pages that landed on
//!   the P - M extra virtual nodes are taken in page order and placed cyclically on the M real nodes.
//!   So page i with v = i mod P goes to v when v < M, else to k mod M where k = (i / P) * (P - M) +
//!   (v - M) counts the extra-node pages before it. For M = 4 (P = 5): 0,1,2,3,0, 0,1,2,3,1,
//!   0,1,2,3,2, 0,1,2,3,3, ... Each real node gets the same share over P * M pages, but without the
//!   power-of-two period of cyclic. (Taking the virtual node v to real node v mod M instead would put
//!   2/5 of the pages on node 0 for M = 4, which defeats the policy's purpose.) When M is prime,
//!   P = M and prime_mapp is cyclic.
//! - bind_block: one contiguous block of rows per thread: page i goes to the thread owning the row
//!   its first byte belongs to; the caller maps the thread to the node it runs on.
//! - bind_all: pages in order fill the first node's capacity, then the next, ...
//! - random / random_block: uniform node per page / per block, from a seeded generator
//!   (SplitMix64 of seed and page index, so the result does not depend on call order).

use numaff_machine::rng::hash;

/// Node index of page `i` under cyclic over `m` nodes.
pub fn cyclic(i: u64, m: u32) -> u32 {
    debug_assert!(m > 0);
    (i % u64::from(m)) as u32
}

/// Node index of page `i` under cyclic_block with blocks of `k` pages over `m` nodes.
pub fn cyclic_block(i: u64, k: u64, m: u32) -> u32 {
    debug_assert!(m > 0 && k > 0);
    ((i / k.max(1)) % u64::from(m)) as u32
}

/// Node index of page `i` under skew_mapp over `m` nodes: (i + floor(i / m) + 1) mod m.
pub fn skew_mapp(i: u64, m: u32) -> u32 {
    debug_assert!(m > 0);
    let m = u64::from(m);
    ((i + i / m + 1) % m) as u32
}

/// Whether `n` is prime.
pub fn is_prime(n: u32) -> bool {
    if n < 2 {
        return false;
    }
    let mut d = 2u32;
    while u64::from(d) * u64::from(d) <= u64::from(n) {
        if n.is_multiple_of(d) {
            return false;
        }
        d += 1;
    }
    true
}

/// The smallest prime >= `m` (2 for m <= 2).
pub fn prime_at_least(m: u32) -> u32 {
    let mut p = m.max(2);
    while !is_prime(p) {
        p += 1;
    }
    p
}

/// Node index of page `i` under prime_mapp over `m` nodes (see the module documentation).
pub fn prime_mapp(i: u64, m: u32) -> u32 {
    debug_assert!(m > 0);
    let p = u64::from(prime_at_least(m));
    let mm = u64::from(m);
    let v = i % p;
    if v < mm {
        v as u32
    } else {
        let k = (i / p) * (p - mm) + (v - mm);
        (k % mm) as u32
    }
}

/// Rows per block when `rows` rows are shared by `threads` threads (at least 1).
pub fn auto_block_rows(rows: u64, threads: u32) -> u64 {
    rows.div_ceil(u64::from(threads.max(1))).max(1)
}

/// The row holding the first byte of page `i` (pages of `page` bytes, rows of `row_bytes`).
pub fn row_of_page(i: u64, page: u64, row_bytes: u64) -> u64 {
    i * page / row_bytes.max(1)
}

/// Thread index owning page `i` under bind_block: `rows` rows of `row_bytes` bytes split in
/// contiguous blocks of `block_rows` rows, block b to thread b (the last thread takes any excess).
pub fn bind_block(i: u64, page: u64, row_bytes: u64, block_rows: u64, threads: u32) -> u32 {
    let b = row_of_page(i, page, row_bytes) / block_rows.max(1);
    b.min(u64::from(threads.max(1)) - 1) as u32
}

/// Node index (into `capacity`) of page `i` under bind_all: node 0 takes its `capacity[0]` pages,
/// then node 1, ...; pages beyond the total stay on the last node (the kernel then decides).
pub fn bind_all(i: u64, capacity: &[u64]) -> u32 {
    let mut left = i;
    for (n, c) in capacity.iter().enumerate() {
        if left < *c {
            return n as u32;
        }
        left -= c;
    }
    capacity.len().saturating_sub(1) as u32
}

/// The pages a column migration moves, with the part (index into the nodes given) each goes to:
/// columns [first_col, first_col + ncols) of each of `rows` rows (`row_bytes` bytes, columns of
/// `col_bytes`) are split into `parts` contiguous equal parts of columns (the last may be
/// shorter); every page holding an element of part p goes to part p, a page holding elements of
/// several parts to the first of them. Sorted by page.
pub fn column_pages(
    rows: u64,
    row_bytes: u64,
    col_bytes: u64,
    first_col: u64,
    ncols: u64,
    parts: u32,
    page: u64,
) -> Vec<(u64, u32)> {
    let per = ncols.div_ceil(u64::from(parts.max(1))).max(1);
    let mut out: std::collections::BTreeMap<u64, u32> = std::collections::BTreeMap::new();
    for r in 0..rows {
        for p in 0..u64::from(parts.max(1)) {
            let c0 = first_col + p * per;
            let c1 = (c0 + per).min(first_col + ncols);
            if c0 >= c1 {
                break;
            }
            let start = r * row_bytes + c0 * col_bytes;
            let end = r * row_bytes + c1 * col_bytes;
            for pg in start / page..=(end - 1) / page {
                out.entry(pg).or_insert(p as u32);
            }
        }
    }
    out.into_iter().collect()
}

/// Node index of unit `i` (a page, or a block for random_block) under random with `seed` over `m`
/// nodes: uniform (Lemire's multiply-shift reduction of a SplitMix64 draw).
pub fn random(i: u64, seed: u64, m: u32) -> u32 {
    debug_assert!(m > 0);
    let r = hash(seed ^ hash(i));
    ((u128::from(r) * u128::from(m)) >> 64) as u32
}

/// Node index of page `i` under random_block: blocks of `k` pages, each on a uniform random node.
pub fn random_block(i: u64, k: u64, seed: u64, m: u32) -> u32 {
    random(i / k.max(1), seed, m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn seq(f: impl Fn(u64) -> u32, n: u64) -> Vec<u32> {
        (0..n).map(f).collect()
    }

    /// 004 §3.1's skew formula, M = 4, 6 and 8 over 32 pages, written out by hand.
    #[test]
    fn skew_mapp_matches_the_formula_for_4_6_8_nodes() {
        let m4 = [
            1, 2, 3, 0, 2, 3, 0, 1, 3, 0, 1, 2, 0, 1, 2, 3, 1, 2, 3, 0, 2, 3, 0, 1, 3, 0, 1, 2, 0,
            1, 2, 3,
        ];
        assert_eq!(seq(|i| skew_mapp(i, 4), 32), m4);
        let m6 = [
            1, 2, 3, 4, 5, 0, 2, 3, 4, 5, 0, 1, 3, 4, 5, 0, 1, 2, 4, 5, 0, 1, 2, 3, 5, 0, 1, 2, 3,
            4, 0, 1,
        ];
        assert_eq!(seq(|i| skew_mapp(i, 6), 32), m6);
        let m8 = [
            1, 2, 3, 4, 5, 6, 7, 0, 2, 3, 4, 5, 6, 7, 0, 1, 3, 4, 5, 6, 7, 0, 1, 2, 4, 5, 6, 7, 0,
            1, 2, 3,
        ];
        assert_eq!(seq(|i| skew_mapp(i, 8), 32), m8);
    }

    /// 004 §2's prose example: 16 pages on 4 nodes, each round of four skipping one node further
    /// (the rounds are rotations of 0,1,2,3; with the formula's "+ 1" each starts one node later).
    #[test]
    fn skew_mapp_rounds_are_rotations_skipping_one_node() {
        for round in 0..4u64 {
            let r: Vec<u32> = (0..4).map(|j| skew_mapp(round * 4 + j, 4)).collect();
            let start = ((round + 1) % 4) as u32;
            assert_eq!(r, (0..4).map(|j| (start + j) % 4).collect::<Vec<_>>());
        }
    }

    #[test]
    fn primes() {
        assert_eq!(
            (1..=12).map(prime_at_least).collect::<Vec<_>>(),
            [2, 2, 3, 5, 5, 7, 7, 11, 11, 11, 11, 13]
        );
    }

    /// prime_mapp for M = 4 (P = 5), 6 (P = 7) and 8 (P = 11) over 32 pages, by hand.
    #[test]
    fn prime_mapp_for_4_6_8_nodes() {
        let m4 = [
            0, 1, 2, 3, 0, 0, 1, 2, 3, 1, 0, 1, 2, 3, 2, 0, 1, 2, 3, 3, 0, 1, 2, 3, 0, 0, 1, 2, 3,
            1, 0, 1,
        ];
        assert_eq!(seq(|i| prime_mapp(i, 4), 32), m4);
        let m6 = [
            0, 1, 2, 3, 4, 5, 0, 0, 1, 2, 3, 4, 5, 1, 0, 1, 2, 3, 4, 5, 2, 0, 1, 2, 3, 4, 5, 3, 0,
            1, 2, 3,
        ];
        assert_eq!(seq(|i| prime_mapp(i, 6), 32), m6);
        // P = 11: pages 8, 9, 10 of each round of 11 are the extra ones, numbered 0, 1, 2, 3, ...
        let m8 = [
            0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 0, 1, 2, 3, 4, 5, 6, 7, 3, 4, 5, 0, 1, 2, 3, 4, 5, 6,
            7, 6, 7,
        ];
        assert_eq!(seq(|i| prime_mapp(i, 8), 32), m8);
    }

    #[test]
    fn prime_mapp_on_a_prime_node_count_is_cyclic() {
        for m in [2, 3, 5, 7] {
            for i in 0..100 {
                assert_eq!(prime_mapp(i, m), cyclic(i, m));
            }
        }
    }

    #[test]
    fn cyclic_block_of_3_on_4_nodes() {
        assert_eq!(
            seq(|i| cyclic_block(i, 3, 4), 15),
            [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 0, 0, 0]
        );
        assert_eq!(seq(|i| cyclic(i, 4), 6), [0, 1, 2, 3, 0, 1]);
    }

    #[test]
    fn bind_block_gives_contiguous_blocks() {
        // 1000 rows of 100 bytes, 4096-byte pages, 4 threads: blocks of 250 rows = 25000 bytes.
        let t: Vec<u32> = (0..25).map(|i| bind_block(i, 4096, 100, 250, 4)).collect();
        assert_eq!(t[0], 0);
        assert_eq!(t[6], 0); // bytes 24576.. start in row 245
        assert_eq!(t[7], 1); // 28672 -> row 286
        assert_eq!(t[24], 3);
        assert!(t.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(auto_block_rows(1000, 4), 250);
        assert_eq!(auto_block_rows(1001, 4), 251);
        assert_eq!(auto_block_rows(3, 8), 1);
    }

    /// 8 rows of 4 pages (2048 doubles): columns 512.. split over 2 nodes: pages 1 and 2 of each
    /// row to the first part (page 2 holds both parts), page 3 to the second; page 0 stays.
    #[test]
    fn column_pages_of_a_2d_array() {
        let got = column_pages(8, 16384, 8, 512, 1536, 2, 4096);
        let want: Vec<(u64, u32)> = (0..8u64)
            .flat_map(|r| [(r * 4 + 1, 0), (r * 4 + 2, 0), (r * 4 + 3, 1)])
            .collect();
        assert_eq!(got, want);
        // Rows smaller than a page: a page holds columns of several rows and moves once.
        let got = column_pages(1024, 64, 8, 0, 1, 1, 4096);
        assert_eq!(got, (0..16).map(|p| (p, 0)).collect::<Vec<_>>());
        // One column of a 3-D array's plane (nz elements per column).
        let got = column_pages(2, 4 * 4096, 4096, 3, 1, 1, 4096);
        assert_eq!(got, [(3, 0), (7, 0)]);
    }

    #[test]
    fn bind_all_fills_in_order() {
        assert_eq!(
            seq(|i| bind_all(i, &[3, 2, 1]), 8),
            [0, 0, 0, 1, 1, 2, 2, 2]
        );
    }

    proptest! {
        #[test]
        fn every_policy_stays_in_range(i in 0u64..1_000_000, m in 1u32..64, k in 1u64..50, seed: u64) {
            prop_assert!(cyclic(i, m) < m);
            prop_assert!(cyclic_block(i, k, m) < m);
            prop_assert!(skew_mapp(i, m) < m);
            prop_assert!(prime_mapp(i, m) < m);
            prop_assert!(random(i, seed, m) < m);
            prop_assert!(random_block(i, k, seed, m) < m);
        }

        /// Over any M consecutive pages of one round, skew_mapp is a permutation of the nodes.
        #[test]
        fn skew_rounds_are_permutations(round in 0u64..10_000, m in 1u32..40) {
            let mut seen = vec![false; m as usize];
            for j in 0..u64::from(m) {
                seen[skew_mapp(round * u64::from(m) + j, m) as usize] = true;
            }
            prop_assert!(seen.iter().all(|s| *s));
        }

        /// prime_mapp balances: over P * M pages every node holds exactly P pages.
        #[test]
        fn prime_mapp_is_balanced_over_p_times_m(m in 1u32..24, offset in 0u64..5) {
            let p = u64::from(prime_at_least(m));
            let start = offset * p * u64::from(m);
            let mut count = vec![0u64; m as usize];
            for i in start..start + p * u64::from(m) {
                count[prime_mapp(i, m) as usize] += 1;
            }
            prop_assert!(count.iter().all(|c| *c == p), "{:?}", count);
        }

        /// cyclic_block is cyclic over blocks, and blocks are constant.
        #[test]
        fn cyclic_block_is_cyclic_over_blocks(i in 0u64..100_000, m in 1u32..16, k in 1u64..20) {
            prop_assert_eq!(cyclic_block(i, k, m), cyclic(i / k, m));
            prop_assert_eq!(cyclic_block(i, k, m), cyclic_block(i / k * k, k, m));
            prop_assert_eq!(cyclic_block(i, 1, m), cyclic(i, m));
        }

        /// bind_block is monotone in the page and uses every thread when there are enough rows.
        #[test]
        fn bind_block_is_monotone(rows in 1u64..5000, row_bytes in 1u64..9000, threads in 1u32..16) {
            let page = 4096u64;
            let block = auto_block_rows(rows, threads);
            let pages = (rows * row_bytes).div_ceil(page);
            let mut last = 0;
            for i in 0..pages {
                let t = bind_block(i, page, row_bytes, block, threads);
                prop_assert!(t >= last && t < threads);
                last = t;
            }
        }

        /// random is the same for the same seed and spreads roughly uniformly.
        #[test]
        fn random_is_reproducible_and_spread(seed: u64, m in 2u32..9) {
            let n = 4000u64;
            let mut count = vec![0u64; m as usize];
            for i in 0..n {
                let a = random(i, seed, m);
                prop_assert_eq!(a, random(i, seed, m));
                count[a as usize] += 1;
            }
            let expect = n / u64::from(m);
            prop_assert!(count.iter().all(|c| *c > expect / 2 && *c < expect * 3 / 2), "{:?}", count);
        }
    }
}
