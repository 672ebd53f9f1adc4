//! Helpers shared by the policy crate's integration tests.

use numaff_policy::imar::TaskMetrics;

/// Random per-task metrics (two processes, two nodes, some past performances) from `seed`.
pub fn random_metrics(n: usize, seed: u64) -> Vec<TaskMetrics> {
    let mut rng = numaff_machine::rng::SplitMix64::new(seed ^ 0x5eed);
    (0..n)
        .map(|t| TaskMetrics {
            process: (t % 2) as u32,
            operations: 1.0 + rng.below(1000) as f64,
            accesses: 1.0 + rng.below(100) as f64,
            latency_ns: 50.0 + rng.below(200) as f64,
            accesses_by_node: (0..2).map(|_| rng.below(10) as f64).collect(),
            history: (0..2)
                .map(|_| (rng.below(2) == 0).then(|| rng.below(100) as f64 / 10.0))
                .collect(),
        })
        .collect()
}
