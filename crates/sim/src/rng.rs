//! How the simulator seeds numaff's one generator ([`SplitMix64`]): the run's seed offset by the
//! golden gamma, so that the same inputs and seed give the same figures bit for bit everywhere.

pub use numaff_machine::rng::SplitMix64;
use numaff_machine::rng::GOLDEN_GAMMA;

/// The generator of a run (or of one of its choices) with seed `seed`.
pub fn seeded(seed: u64) -> SplitMix64 {
    SplitMix64::new(seed ^ GOLDEN_GAMMA)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_generators_repeat_per_seed_and_differ_between_seeds() {
        let (mut a, mut b, mut c) = (seeded(7), seeded(7), seeded(8));
        let va: Vec<u64> = (0..10).map(|_| a.next_u64()).collect();
        let vb: Vec<u64> = (0..10).map(|_| b.next_u64()).collect();
        let vc: Vec<u64> = (0..10).map(|_| c.next_u64()).collect();
        assert_eq!(va, vb);
        assert_ne!(va, vc);
        assert_ne!(va[0], SplitMix64::new(7).next_u64());
    }
}
