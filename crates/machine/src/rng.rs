//! numaff's one pseudo-random generator, SplitMix64, and its mixing function: every seeded choice
//! (random mappings, the simulator's jitter, test patterns) gives the same result on every platform.
//!
//! SplitMix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014):
//! a 64-bit counter advanced by the golden gamma and passed through a mixing function. Small,
//! fast and statistically good enough for sampling and random choices; not for cryptography.

/// The increment of SplitMix64's counter: 2^64 divided by the golden ratio, made odd.
pub const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's mixing function (a variant of MurmurHash3's 64-bit finaliser): a bijection of u64
/// whose output bits each depend on every input bit.
#[inline]
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A well-mixed 64-bit value of `x`: the first output of a generator whose state is `x`
/// (`SplitMix64::new(x).next_u64()`), usable as a stateless hash of an index.
#[inline]
pub fn hash(x: u64) -> u64 {
    mix(x.wrapping_add(GOLDEN_GAMMA))
}

/// The generator; equal seeds give equal sequences.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator whose state is `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN_GAMMA);
        mix(self.0)
    }

    /// Uniform in `0..n` by multiply-shift (Lemire; bias below 2^-32 for n < 2^32); 0 when `n` is 0.
    #[inline]
    pub fn below_u64(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// An index uniform in `0..n`, as [`Self::below_u64`]; 0 when `n` is 0.
    #[inline]
    pub fn below(&mut self, n: usize) -> usize {
        self.below_u64(n as u64) as usize
    }

    /// A number in `[0, 1)` with 53 random bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Shuffles a slice in place (Fisher-Yates).
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_matches_the_reference_sequence() {
        // The first outputs for seed 1234567 of the reference C implementation (Vigna's
        // splitmix64.c), as listed in the SplitMix64 test vectors of many ports.
        let mut r = SplitMix64::new(1_234_567);
        assert_eq!(r.next_u64(), 6_457_827_717_110_365_317);
        assert_eq!(r.next_u64(), 3_203_168_211_198_807_973);
        assert_eq!(r.next_u64(), 9_817_491_932_198_370_423);
    }

    #[test]
    fn same_seed_same_sequence_and_below_stays_in_range() {
        let (mut a, mut b, mut c) = (SplitMix64::new(7), SplitMix64::new(7), SplitMix64::new(8));
        let va: Vec<u64> = (0..10).map(|_| a.next_u64()).collect();
        let vb: Vec<u64> = (0..10).map(|_| b.next_u64()).collect();
        let vc: Vec<u64> = (0..10).map(|_| c.next_u64()).collect();
        assert_eq!(va, vb);
        assert_ne!(va, vc);
        assert!((0..1000).all(|_| a.below(13) < 13 && a.below_u64(5) < 5));
        assert_eq!(a.below(0), 0);
        assert!((0..1000).map(|_| a.unit()).all(|u| (0.0..1.0).contains(&u)));
    }

    #[test]
    fn hash_is_the_first_output_of_a_generator_at_that_state() {
        for x in [0, 1, 42, u64::MAX] {
            assert_eq!(hash(x), SplitMix64::new(x).next_u64());
        }
    }

    #[test]
    fn shuffle_is_a_permutation() {
        let mut v: Vec<u32> = (0..100).collect();
        SplitMix64::new(3).shuffle(&mut v);
        assert_ne!(v, (0..100).collect::<Vec<_>>());
        v.sort_unstable();
        assert_eq!(v, (0..100).collect::<Vec<_>>());
    }
}
