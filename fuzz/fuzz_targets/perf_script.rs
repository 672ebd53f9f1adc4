//! `perf script` text import (numaff_behave::perf_script) on arbitrary bytes: errors, never a panic.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let reader = numaff_behave::perf_script::PerfScriptReader::new(
        Path::new("fuzz.txt"),
        std::io::Cursor::new(data.to_vec()),
        vec![0, 0, 1, 1],
    );
    for batch in reader {
        if batch.is_err() {
            break;
        }
    }
});
