//! How many events a sampler lets pass between two samples: one page fault in N for the
//! page-fault sampler, one qualifying load or store in N for the hardware samplers.

use std::fmt;

/// One page fault in `N` is sampled, to bound the sampling overhead; 1 samples every fault.
///
/// Each sampled fault costs the faulting thread about 0.6 µs of kernel time, a fault that is only
/// counted about 0.05 µs (README, "numaff profile"), so a program that first-touches memory
/// at 100 000 pages/s per thread pays 6 % at period 1 and about 1.3 % at period 8. A fixed period
/// subsamples every stream of faults alike: first touches, bursts of induced faults and the
/// rare faults of a steady program. The kernel's frequency mode (`perf_event_attr.freq`, a cap on
/// samples per second) does not fit: the period it raises during a burst of first touches stays
/// high while the program faults rarely, so induced faults are almost never sampled afterwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SamplePeriod(pub u64);

/// The default of [`SamplePeriod`] as a command-line value (`--sample-period`).
pub const DEFAULT_SAMPLE_PERIOD_ARG: &str = "1";

impl SamplePeriod {
    /// Every fault.
    pub const EVERY: SamplePeriod = SamplePeriod(1);
}

impl Default for SamplePeriod {
    fn default() -> Self {
        SamplePeriod::EVERY
    }
}

impl fmt::Display for SamplePeriod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            1 => write!(f, "every fault (period 1)"),
            n => write!(f, "one fault in {n} (period {n})"),
        }
    }
}

impl std::str::FromStr for SamplePeriod {
    type Err = String;

    /// A period from 1 (every fault) to 1 000 000.
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().parse::<u64>() {
            Ok(n) if (1..=1_000_000).contains(&n) => Ok(SamplePeriod(n)),
            _ => Err(format!(
                "{s:?} is not a sample period: give N to sample one page fault in N (1 for every \
                 fault, at most 1000000)"
            )),
        }
    }
}

/// The default period of the hardware samplers: one qualifying load or store in 10 000.
pub const DEFAULT_HW_PERIOD: u64 = 10_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_period_parses_and_says_what_is_wrong() {
        assert_eq!("1".parse::<SamplePeriod>(), Ok(SamplePeriod::EVERY));
        assert_eq!(" 8 ".parse::<SamplePeriod>(), Ok(SamplePeriod(8)));
        for bad in ["0", "-5", "1.5", "all", "", "1000001"] {
            let e = bad.parse::<SamplePeriod>().expect_err(bad);
            assert!(e.contains("one page fault in N"), "{bad}: {e}");
        }
        assert_eq!(
            DEFAULT_SAMPLE_PERIOD_ARG.parse(),
            Ok(SamplePeriod::default())
        );
        assert_eq!(SamplePeriod(8).to_string(), "one fault in 8 (period 8)");
    }
}
