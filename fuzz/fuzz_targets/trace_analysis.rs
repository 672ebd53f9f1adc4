//! Fuzzes the analysis of sample traces (numaff_behave::analyze::analyze_samples) on samples read
//! from the input as a CSV trace: an analysis or an error, never a panic, abort or unbounded
//! allocation (the analysis caps what the samples' ids choose).
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use numaff_behave::analyze::{analyze_samples, AnalyzeConfig};

/// At most this many samples are analysed, so one run stays short.
const MAX_SAMPLES: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let Ok(reader) = numaff_behave::TraceReader::from_csv_reader(
        Path::new("fuzz.csv"),
        std::io::Cursor::new(data.to_vec()),
    ) else {
        return;
    };
    let meta = reader.meta().clone();
    let mut samples = Vec::new();
    for batch in reader {
        let Ok(batch) = batch else {
            return;
        };
        samples.extend(batch);
        if samples.len() >= MAX_SAMPLES {
            samples.truncate(MAX_SAMPLES);
            break;
        }
    }
    let _ = analyze_samples(&samples, &meta, &AnalyzeConfig::default());
});
