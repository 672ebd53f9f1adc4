//! Fuzzes the analysis of sample traces (numaff_behave::analyze::analyze_samples) on samples read
//! from the input as a CSV trace: an analysis or an error, never a panic, abort or unbounded
//! allocation (the analysis caps what the samples' ids choose).
#![no_main]

#[path = "common.rs"]
mod common;

use libfuzzer_sys::fuzz_target;
use numaff_behave::analyze::{analyze_samples, AnalyzeConfig};

/// At most this many samples are analysed, so one run stays short.
const MAX_SAMPLES: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let Some((samples, meta)) = common::csv_samples(data, MAX_SAMPLES) else {
        return;
    };
    let _ = analyze_samples(&samples, &meta, &AnalyzeConfig::default());
});
