//! DeLocProf (Agung, 002 ch. 2): communication events of threads and MPI ranks, the communication
//! matrix, concurrent communications by weighted k-means with BIC, the metrics and the classification.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

/// One communication event (002 §2.3.1-2.3.2): a task pair, the bytes exchanged, and when.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CommEvent {
    /// Time in ns.
    pub time_ns: u64,
    /// The task that wrote (thread) or sent (MPI).
    pub from: usize,
    /// The task that read (thread) or received (MPI).
    pub to: usize,
    /// Bytes: the message size (MPI) or the line size (threads).
    pub bytes: u64,
}

/// Detects thread communication events (002 §2.3.2): a write by one thread then a read of the same
/// 64-byte line by another thread is one event of the pair. Later reads by other threads of the same
/// written value count too (each reader communicates with the writer); a new write starts over.
#[derive(Debug, Clone, Default)]
pub struct ThreadCommDetector {
    line_shift: u32,
    /// Per line: the last writer and the readers that already counted since that write.
    lines: HashMap<u64, (usize, Vec<usize>)>,
}

impl ThreadCommDetector {
    /// A detector for lines of `line_bytes` (64 in the thesis).
    pub fn new(line_bytes: u64) -> Self {
        ThreadCommDetector {
            line_shift: line_bytes.max(1).next_power_of_two().trailing_zeros(),
            lines: HashMap::new(),
        }
    }

    /// Feeds one access; returns the event it completes, if any.
    pub fn access(
        &mut self,
        time_ns: u64,
        task: usize,
        addr: u64,
        write: bool,
    ) -> Option<CommEvent> {
        let line = addr >> self.line_shift;
        if write {
            self.lines.insert(line, (task, Vec::new()));
            return None;
        }
        let (writer, readers) = self.lines.get_mut(&line)?;
        if *writer == task || readers.contains(&task) {
            return None;
        }
        readers.push(task);
        Some(CommEvent {
            time_ns,
            from: *writer,
            to: task,
            bytes: 1 << self.line_shift,
        })
    }
}

/// The symmetric communication matrix (002 §2.3.3): cell (x, y) is the bytes exchanged by x and y.
pub fn comm_matrix(events: &[CommEvent], tasks: usize) -> Vec<Vec<f64>> {
    let mut m = vec![vec![0.0; tasks]; tasks];
    for e in events {
        if e.from < tasks && e.to < tasks && e.from != e.to {
            m[e.from][e.to] += e.bytes as f64;
            m[e.to][e.from] += e.bytes as f64;
        }
    }
    m
}

/// A clustering of event times (002 eq. 2.1): cluster of every input point and the clusters' means.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Clustering {
    /// Number of clusters chosen.
    pub k: usize,
    /// Mean time of each cluster (ns), increasing.
    pub means: Vec<f64>,
    /// BIC of each k tried (index 0 is k = 1).
    pub bic: Vec<f64>,
    /// Cluster index of each input time, in input order.
    pub assignment: Vec<usize>,
}

/// Most distinct positions the exact clustering works on; more are binned (equal-width bins, each at
/// the weighted mean of its times).
const MAX_POINTS: usize = 2000;

/// Weighted k-means over event times (002 eq. 2.1: minimise Σ Ncomm_t ‖t − μ_i‖²) with the number of
/// clusters chosen by the Bayesian information criterion (002 §2.3.3, \[51\]).
///
/// `times` are event timestamps (ns) and `weights` the number of events at each (Ncomm_t). For each
/// k in 1..=`max_k` the clustering is solved exactly (in one dimension, optimal k-means is a dynamic
/// program over the sorted times), then scored with the X-means BIC of Pelleg and Moore: spherical
/// Gaussian clusters sharing one variance, mixing proportions R_c/R, 2k free parameters, the total
/// weight R as the sample size. The k with the largest BIC is chosen. Our reading of the thesis'
/// accelerated search: we try every k up to `max_k`, since the exact solver is cheap. The variance has
/// a floor of resolution²/12 (`resolution_ns`, the trace's time resolution), so a burst at a single
/// timestamp has a finite likelihood.
#[allow(clippy::needless_range_loop)] // the DP reads dp[k - 1] while filling dp[k]: indexes are clearer
pub fn cluster_times(
    times: &[u64],
    weights: &[f64],
    max_k: usize,
    resolution_ns: f64,
) -> Clustering {
    let n_in = times.len().min(weights.len());
    if n_in == 0 {
        return Clustering {
            k: 0,
            means: Vec::new(),
            bic: Vec::new(),
            assignment: Vec::new(),
        };
    }
    // Aggregate equal times, then bin when there are too many positions.
    let mut agg: BTreeMap<u64, f64> = BTreeMap::new();
    for i in 0..n_in {
        if weights[i] > 0.0 {
            *agg.entry(times[i]).or_insert(0.0) += weights[i];
        }
    }
    let mut pts: Vec<(f64, f64)> = agg.iter().map(|(&t, &w)| (t as f64, w)).collect();
    if pts.is_empty() {
        pts.push((times[0] as f64, 1.0));
    }
    if pts.len() > MAX_POINTS {
        pts = bin(&pts, MAX_POINTS);
    }
    let n = pts.len();
    let max_k = max_k.clamp(1, n);
    // Prefix sums of w, w·x, w·x² for O(1) segment costs.
    let (mut sw, mut swx, mut swx2) = (vec![0.0; n + 1], vec![0.0; n + 1], vec![0.0; n + 1]);
    for (i, &(x, w)) in pts.iter().enumerate() {
        sw[i + 1] = sw[i] + w;
        swx[i + 1] = swx[i] + w * x;
        swx2[i + 1] = swx2[i] + w * x * x;
    }
    let cost = |a: usize, b: usize| -> f64 {
        // Weighted SSE of points a..b (exclusive b).
        let w = sw[b] - sw[a];
        if w <= 0.0 {
            return 0.0;
        }
        let s = swx[b] - swx[a];
        ((swx2[b] - swx2[a]) - s * s / w).max(0.0)
    };
    // dp[k][i]: best cost of the first i points in k clusters; cut[k][i]: start of the last cluster.
    let mut dp = vec![vec![f64::INFINITY; n + 1]; max_k + 1];
    let mut cut = vec![vec![0usize; n + 1]; max_k + 1];
    dp[0][0] = 0.0;
    for k in 1..=max_k {
        for i in k..=n {
            for j in (k - 1)..i {
                let c = dp[k - 1][j] + cost(j, i);
                if c < dp[k][i] {
                    dp[k][i] = c;
                    cut[k][i] = j;
                }
            }
        }
    }
    let total = sw[n];
    let floor = (resolution_ns.max(1.0)).powi(2) / 12.0;
    let mut bic = Vec::with_capacity(max_k);
    let mut segments_of = Vec::with_capacity(max_k);
    for k in 1..=max_k {
        let mut bounds = Vec::with_capacity(k);
        let mut i = n;
        for kk in (1..=k).rev() {
            let j = cut[kk][i];
            bounds.push((j, i));
            i = j;
        }
        bounds.reverse();
        let sse = dp[k][n];
        let dof = (total - k as f64).max(1.0);
        let var = (sse / dof).max(floor);
        let mut l = 0.0;
        for &(a, b) in &bounds {
            let rc = sw[b] - sw[a];
            if rc > 0.0 {
                l += rc * (rc / total).ln() - rc / 2.0 * (2.0 * std::f64::consts::PI * var).ln();
            }
        }
        l -= (total - k as f64) / 2.0;
        let params = 2.0 * k as f64;
        bic.push(l - params / 2.0 * total.ln());
        segments_of.push(bounds);
    }
    let best = (0..bic.len())
        .max_by(|&a, &b| {
            bic[a]
                .partial_cmp(&bic[b])
                .unwrap_or(std::cmp::Ordering::Equal)
                .then(b.cmp(&a))
        })
        .unwrap_or(0);
    let bounds = &segments_of[best];
    let means: Vec<f64> = bounds
        .iter()
        .map(|&(a, b)| {
            let w = sw[b] - sw[a];
            if w > 0.0 {
                (swx[b] - swx[a]) / w
            } else {
                pts[a].0
            }
        })
        .collect();
    // Each input time goes to the cluster whose segment holds it (segments are contiguous in time).
    let uppers: Vec<f64> = bounds.iter().map(|&(_, b)| pts[b - 1].0).collect();
    let assignment = times[..n_in]
        .iter()
        .map(|&t| {
            let t = t as f64;
            uppers
                .iter()
                .position(|&u| t <= u)
                .unwrap_or(uppers.len() - 1)
        })
        .collect();
    Clustering {
        k: best + 1,
        means,
        bic,
        assignment,
    }
}

fn bin(pts: &[(f64, f64)], bins: usize) -> Vec<(f64, f64)> {
    let (lo, hi) = (pts[0].0, pts[pts.len() - 1].0);
    let width = ((hi - lo) / bins as f64).max(f64::MIN_POSITIVE);
    let mut acc = vec![(0.0, 0.0); bins];
    for &(x, w) in pts {
        let b = (((x - lo) / width) as usize).min(bins - 1);
        acc[b].0 += x * w;
        acc[b].1 += w;
    }
    acc.into_iter()
        .filter(|&(_, w)| w > 0.0)
        .map(|(xw, w)| (xw / w, w))
        .collect()
}

/// DeLocProf's metrics (002 §2.3.4-2.3.5, eq. 2.2-2.8).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[allow(non_snake_case)]
pub struct Metrics {
    /// Communication load, eq. 2.2: `Σ_i Σ_j Scomm[i][j]` (bytes; the symmetric matrix counts each
    /// pair in both cells, as the equation is written).
    pub Lcomm: f64,
    /// Communication-to-memory ratio, eq. 2.3: Lcomm / Σ MemV; `None` without memory volumes.
    pub CommR: Option<f64>,
    /// Communication concurrency, eq. 2.4: `Σ_c TaskN[C_c] / (T · N_c)`.
    pub CommC: f64,
    /// DRAM-to-memory ratio, eq. 2.5: Σ DramV / Σ MemV; `None` when the sampler cannot tell.
    pub DramR: Option<f64>,
    /// Communication locality, eq. 2.6-2.7: mean over tasks of the variance of their row of the
    /// matrix normalised to its maximum.
    pub CommLoc: f64,
    /// Communication dynamics, eq. 2.8: changes of the task order between consecutive intervals.
    pub CommDyn: usize,
}

/// Eq. 2.2.
pub fn lcomm(m: &[Vec<f64>]) -> f64 {
    // From 0.0: `Sum` of no values is -0.0, which printed as "-0 B" for an empty trace.
    m.iter().flatten().fold(0.0, |a, b| a + b)
}

/// Eq. 2.4: the clusters' distinct task counts over (tasks × clusters). `events` and `assignment`
/// (cluster of each event) run in parallel.
pub fn commc(events: &[CommEvent], assignment: &[usize], clusters: usize, tasks: usize) -> f64 {
    if clusters == 0 || tasks == 0 {
        return 0.0;
    }
    let mut seen: Vec<std::collections::BTreeSet<usize>> = vec![Default::default(); clusters];
    for (e, &c) in events.iter().zip(assignment) {
        if c < clusters {
            seen[c].insert(e.from);
            seen[c].insert(e.to);
        }
    }
    let total: usize = seen.iter().map(|s| s.len()).sum();
    total as f64 / (tasks * clusters) as f64
}

/// Eq. 2.6-2.7: rows normalised by the matrix maximum, population variance of each row (all T
/// entries, the zero diagonal included), averaged over the T tasks.
pub fn commloc(m: &[Vec<f64>]) -> f64 {
    let t = m.len();
    let max = m.iter().flatten().copied().fold(0.0f64, f64::max);
    if t == 0 || max <= 0.0 {
        return 0.0;
    }
    let mut sum = 0.0;
    for row in m {
        let norm: Vec<f64> = row.iter().map(|v| v / max).collect();
        let mean = norm.iter().sum::<f64>() / norm.len().max(1) as f64;
        sum += norm.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / norm.len().max(1) as f64;
    }
    sum / t as f64
}

/// The task sequence of a matrix for eq. 2.8: tasks by decreasing total communication, ties by id.
pub fn task_sequence(m: &[Vec<f64>]) -> Vec<usize> {
    let totals: Vec<f64> = m.iter().map(|r| r.iter().sum()).collect();
    let mut order: Vec<usize> = (0..m.len()).collect();
    order.sort_by(|&a, &b| {
        totals[b]
            .partial_cmp(&totals[a])
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(a.cmp(&b))
    });
    order
}

/// Eq. 2.8: Σ compare(M_i, M_{i+1}) over consecutive intervals, compare = 1 when the task sequences
/// differ. (The sum's upper bound is garbled as Nit; with M_{i+1} in the sum we read it as Nit − 1
/// comparisons.)
pub fn commdyn(intervals: &[Vec<Vec<f64>>]) -> usize {
    intervals
        .windows(2)
        .filter(|w| task_sequence(&w[0]) != task_sequence(&w[1]))
        .count()
}

/// The classes of 002 Fig. 2.10.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Class {
    /// Task mapping is not expected to help.
    NonMapping,
    /// Offline (static) mapping suits it.
    Static,
    /// Online (dynamic) mapping suits it.
    Dynamic,
}

/// Thresholds of the decision tree. Fig. 2.10 is missing from the text, which only says that the tree
/// first tests CommR and DramR (low CommR and low DramR: Non-mapping) and then CommDyn (few changes:
/// Static). The values are our documented choices.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ClassThresholds {
    /// CommR below this is low (5 %).
    pub commr_low: f64,
    /// DramR above this is high (20 %).
    pub dramr_high: f64,
    /// At most this many changes (CommDyn) is static (2).
    pub commdyn_static_max: usize,
}

impl Default for ClassThresholds {
    fn default() -> Self {
        ClassThresholds {
            commr_low: 0.05,
            dramr_high: 0.20,
            commdyn_static_max: 2,
        }
    }
}

/// The decision tree of 002 Fig. 2.10 (as read in [`ClassThresholds`]). An unknown CommR counts as
/// high (communication-aware mapping is not ruled out) and an unknown DramR as low.
pub fn classify(m: &Metrics, th: &ClassThresholds) -> Class {
    let low_comm = m.CommR.is_some_and(|r| r < th.commr_low);
    let high_dram = m.DramR.is_some_and(|d| d > th.dramr_high);
    if low_comm && !high_dram {
        Class::NonMapping
    } else if m.CommDyn <= th.commdyn_static_max {
        Class::Static
    } else {
        Class::Dynamic
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(seed: &mut u64) -> f64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (*seed >> 11) as f64 / (1u64 << 53) as f64
    }

    #[test]
    fn kmeans_bic_finds_three_bursts() {
        let mut seed = 7;
        let mut times = Vec::new();
        for centre in [1_000_000u64, 5_000_000, 9_000_000] {
            for _ in 0..400 {
                // ±50 µs around each centre.
                times.push(centre + (lcg(&mut seed) * 100_000.0) as u64 - 50_000);
            }
        }
        let weights = vec![1.0; times.len()];
        let c = cluster_times(&times, &weights, 8, 1000.0);
        assert_eq!(c.k, 3, "BIC: {:?}", c.bic);
        for (m, centre) in c.means.iter().zip([1e6, 5e6, 9e6]) {
            assert!((m - centre).abs() < 10_000.0, "{m} vs {centre}");
        }
        assert_eq!(c.assignment[0], 0);
        assert_eq!(c.assignment[times.len() - 1], 2);
    }

    #[test]
    fn kmeans_bic_finds_one_cluster_in_uniform_noise() {
        let mut seed = 11;
        let times: Vec<u64> = (0..1200).map(|_| (lcg(&mut seed) * 1e7) as u64).collect();
        let weights = vec![1.0; times.len()];
        let c = cluster_times(&times, &weights, 8, 1000.0);
        assert_eq!(c.k, 1, "BIC: {:?}", c.bic);
    }

    #[test]
    fn weights_count_as_events() {
        // Four timestamps with 500 events each; two of them 100 ns apart, under the 1 µs resolution:
        // three bursts.
        let times = [100, 5_000_000, 5_000_100, 9_000_000];
        let c = cluster_times(&times, &[500.0; 4], 4, 1000.0);
        assert_eq!(c.k, 3, "BIC: {:?}", c.bic);
        // At 10 ns resolution the two are distinct: four.
        let c = cluster_times(&times, &[500.0; 4], 4, 10.0);
        assert_eq!(c.k, 4, "BIC: {:?}", c.bic);
    }

    #[test]
    fn thread_events_are_write_then_read_by_another_thread() {
        let mut d = ThreadCommDetector::new(64);
        assert_eq!(d.access(1, 0, 0x1000, false), None, "read before any write");
        assert_eq!(d.access(2, 0, 0x1000, true), None);
        assert_eq!(d.access(3, 0, 0x1008, false), None, "the writer itself");
        let e = d.access(4, 1, 0x103f, false).unwrap();
        assert_eq!((e.from, e.to, e.bytes, e.time_ns), (0, 1, 64, 4));
        assert_eq!(
            d.access(5, 1, 0x1000, false),
            None,
            "same reader, same write"
        );
        assert!(d.access(6, 2, 0x1000, false).is_some(), "another reader");
        assert_eq!(d.access(7, 1, 0x1040, false), None, "another line");
        d.access(8, 1, 0x1000, true);
        assert_eq!(
            d.access(9, 0, 0x1000, false).map(|e| (e.from, e.to)),
            Some((1, 0))
        );
    }

    /// No communication is Lcomm +0.0, not -0.0 (an empty trace printed "-0 B" and `-0.0` in JSON).
    #[test]
    fn lcomm_of_nothing_is_positive_zero() {
        for m in [vec![], vec![vec![]], vec![vec![0.0, 0.0], vec![0.0, 0.0]]] {
            let l = lcomm(&m);
            assert!(l == 0.0 && l.is_sign_positive(), "{m:?}: {l:?}");
        }
    }

    /// Hand example: 3 tasks; events (0,1,100 B) twice and (1,2,50 B) once.
    /// Matrix: [[0,200,0],[200,0,50],[0,50,0]] → Lcomm = 500.
    /// Normalised by 200: rows [0,1,0], [1,0,.25], [0,.25,0];
    /// variances: row 0 mean 1/3 → ((1/3)²·2 + (2/3)²)/3 = 2/9; row 1 mean 5/12 →
    /// ((7/12)² + (5/12)² + (1/6)²)/3 = (49+25+4)/144/3 = 78/432; row 2 mean 1/12 →
    /// ((1/12)²·2 + (1/6)²)/3 = (2/144 + 4/144)/3 = 6/432. CommLoc = (96 + 78 + 6)/432/3 = 180/1296.
    #[test]
    fn metrics_match_a_hand_computation() {
        let ev = |t, from, to, bytes| CommEvent {
            time_ns: t,
            from,
            to,
            bytes,
        };
        let events = [ev(10, 0, 1, 100), ev(20, 0, 1, 100), ev(1000, 1, 2, 50)];
        let m = comm_matrix(&events, 3);
        assert_eq!(
            m,
            vec![
                vec![0.0, 200.0, 0.0],
                vec![200.0, 0.0, 50.0],
                vec![0.0, 50.0, 0.0]
            ]
        );
        assert_eq!(lcomm(&m), 500.0);
        assert!(
            (commloc(&m) - 180.0 / 1296.0).abs() < 1e-12,
            "{}",
            commloc(&m)
        );
        // Two clusters: {events 0,1} with tasks {0,1}, {event 2} with tasks {1,2}: (2+2)/(3·2).
        assert!((commc(&events, &[0, 0, 1], 2, 3) - 4.0 / 6.0).abs() < 1e-12);
        // CommDyn: orders [1,0,2], [1,0,2], [2,1,0] → one change.
        let a = m.clone();
        let b = vec![
            vec![0.0, 0.0, 1.0],
            vec![0.0, 0.0, 2.0],
            vec![1.0, 2.0, 0.0],
        ];
        assert_eq!(task_sequence(&a), vec![1, 0, 2]);
        assert_eq!(commdyn(&[a.clone(), a, b]), 1);
    }

    #[test]
    fn decision_tree_picks_the_policy() {
        let th = ClassThresholds::default();
        let base = Metrics {
            Lcomm: 1.0,
            CommR: Some(0.01),
            CommC: 0.5,
            DramR: Some(0.05),
            CommLoc: 0.1,
            CommDyn: 0,
        };
        assert_eq!(classify(&base, &th), Class::NonMapping);
        assert_eq!(
            classify(
                &Metrics {
                    DramR: Some(0.5),
                    ..base.clone()
                },
                &th
            ),
            Class::Static
        );
        assert_eq!(
            classify(
                &Metrics {
                    CommR: Some(0.3),
                    CommDyn: 5,
                    ..base.clone()
                },
                &th
            ),
            Class::Dynamic
        );
        assert_eq!(
            classify(
                &Metrics {
                    CommR: None,
                    ..base
                },
                &th
            ),
            Class::Static
        );
    }
}
