//! kMAF's data mapping at sample time (000 §4.5): from a page's NUMA vector, keep it, migrate it to
//! the node that uses it most (Locality, eq. 5-6), or interleave it by address (Balance, eq. 7-8).

/// The thresholds of kMAF's policy selection (000 eq. 4, defaults of Table 3).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KmafDataParams {
    /// Locality when the sampled exclusivity is above this (Table 3: 80 %).
    pub min_loc: f64,
    /// Balance when the exclusivity is below `max_bal_factor / N` (Table 3: 1/N x 1.5).
    pub max_bal_factor: f64,
}

impl Default for KmafDataParams {
    fn default() -> Self {
        KmafDataParams {
            min_loc: 0.80,
            max_bal_factor: 1.5,
        }
    }
}

/// What to do with a page after a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageAction {
    /// Leave it where it is.
    Keep,
    /// Locality policy: move it to this node, the one that sampled it most (eq. 6).
    MigrateForLocality(u32),
    /// Balance policy: move it to this node, chosen by its address (eq. 8).
    Interleave(u32),
}

/// Which policy eq. 4 selects for a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyChoice {
    /// Exclusivity above `min_loc`.
    Locality,
    /// Exclusivity below `max_bal_factor / N`.
    Balance,
    /// In between: no mapping.
    None,
}

/// Sampled exclusivity (eq. 3): max(NV) / sum(NV); 0 for an empty vector.
pub fn exclusivity(nv: &[u8]) -> f64 {
    let sum: u32 = nv.iter().map(|&c| u32::from(c)).sum();
    if sum == 0 {
        return 0.0;
    }
    f64::from(nv.iter().copied().max().unwrap_or(0)) / f64::from(sum)
}

/// Policy selection (eq. 4) with N = `nv.len()` nodes.
pub fn choose_policy(nv: &[u8], params: &KmafDataParams) -> PolicyChoice {
    let excl = exclusivity(nv);
    let n = nv.len().max(1) as f64;
    if excl > params.min_loc {
        PolicyChoice::Locality
    } else if excl < params.max_bal_factor / n {
        PolicyChoice::Balance
    } else {
        PolicyChoice::None
    }
}

/// The locality migration filter (eq. 5): migrate only when max(NV) > 2 x max2(NV) + 1, so that a
/// page whose users change often is moved less and less often (Table 2). Returns the target node
/// (eq. 6: argmax, the lowest node on a tie) when the filter passes.
pub fn locality_target(nv: &[u8]) -> Option<u32> {
    let (mut best, mut max, mut max2) = (0usize, 0u32, 0u32);
    for (i, &c) in nv.iter().enumerate() {
        let c = u32::from(c);
        if c > max {
            max2 = max;
            max = c;
            best = i;
        } else if c > max2 {
            max2 = c;
        }
    }
    (max > 2 * max2 + 1).then_some(best as u32)
}

/// The balance condition (eq. 7, sum(NV) > N: the pattern has settled) and its interleave target
/// (eq. 8: page index mod N, the page index being address >> log2(page size)).
pub fn balance_target(nv: &[u8], page_index: u64) -> Option<u32> {
    let n = nv.len() as u64;
    let sum: u64 = nv.iter().map(|&c| u64::from(c)).sum();
    (n > 0 && sum > n).then(|| (page_index % n) as u32)
}

/// kMAF's decision for a page on node `current` after a sample updated its NUMA vector `nv` (one
/// counter per node, in node order). A page's first access is first touch and is not decided here.
/// Moving to the node the page is already on is `Keep` (000 §4.5.4 checks this before migrating).
pub fn decide(nv: &[u8], current: u32, page_index: u64, params: &KmafDataParams) -> PageAction {
    let target = match choose_policy(nv, params) {
        PolicyChoice::Locality => locality_target(nv).map(PageAction::MigrateForLocality),
        PolicyChoice::Balance => balance_target(nv, page_index).map(PageAction::Interleave),
        PolicyChoice::None => None,
    };
    match target {
        Some(PageAction::MigrateForLocality(n) | PageAction::Interleave(n)) if n == current => {
            PageAction::Keep
        }
        Some(action) => action,
        None => PageAction::Keep,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 000 Table 2: one page on a 2-node machine under the locality filter (eq. 5) alone, as the
    /// table illustrates it. a) first access from N0: allocated on N0; b) one access from N1: no
    /// migration; c) three more from N1 (NV = 1,4): migrate to N1; d) nine more from N0 (NV = 10,4):
    /// migrate back to N0 — and not one access earlier.
    #[test]
    fn kmaf_table2_sequence_allocates_then_migrates_twice() {
        let mut nv = [1u8, 0];
        let mut node = 0u32; // a) first touch
        assert_eq!(exclusivity(&nv), 1.0);
        let mut migrations = Vec::new();
        let step = |nv: &[u8], node: &mut u32, migrations: &mut Vec<(u8, u8, u32)>| {
            if let Some(t) = locality_target(nv) {
                if t != *node {
                    *node = t;
                    migrations.push((nv[0], nv[1], t));
                }
            }
        };
        nv[1] += 1; // b)
        step(&nv, &mut node, &mut migrations);
        assert_eq!((exclusivity(&nv), node), (0.5, 0));
        for _ in 0..3 {
            nv[1] += 1; // c)
            step(&nv, &mut node, &mut migrations);
        }
        assert_eq!((nv, node), ([1, 4], 1));
        assert!((exclusivity(&nv) - 0.8).abs() < 1e-12);
        for _ in 0..9 {
            nv[0] += 1; // d)
            step(&nv, &mut node, &mut migrations);
        }
        assert_eq!((nv, node), ([10, 4], 0));
        assert!((exclusivity(&nv) - 10.0 / 14.0).abs() < 1e-12, "71 %");
        // Exactly two migrations, at the steps of the table.
        assert_eq!(migrations, vec![(1, 4, 1), (10, 4, 0)]);
    }

    #[test]
    fn kmaf_policy_selection_and_balance() {
        let p = KmafDataParams::default();
        // 4 nodes: max_Bal = 1.5 / 4 = 37.5 %.
        assert_eq!(choose_policy(&[9, 1, 0, 0], &p), PolicyChoice::Locality);
        assert_eq!(choose_policy(&[2, 2, 2, 2], &p), PolicyChoice::Balance);
        assert_eq!(choose_policy(&[4, 4, 0, 0], &p), PolicyChoice::None);
        // Balance waits for sum(NV) > N (eq. 7), then interleaves by address (eq. 8).
        assert_eq!(decide(&[1, 1, 1, 1], 0, 6, &p), PageAction::Keep);
        assert_eq!(decide(&[2, 2, 2, 1], 0, 6, &p), PageAction::Interleave(2));
        assert_eq!(
            decide(&[2, 1, 1, 1], 2, 6, &p),
            PageAction::Keep,
            "already there"
        );
        // Locality needs the filter too.
        assert_eq!(
            decide(&[0, 9, 0, 1], 0, 6, &p),
            PageAction::MigrateForLocality(1)
        );
        assert_eq!(decide(&[0, 9, 0, 1], 1, 6, &p), PageAction::Keep);
    }
}
