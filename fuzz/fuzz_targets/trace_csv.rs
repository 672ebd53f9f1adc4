//! CSV trace reading (numaff_behave::trace) on arbitrary bytes: errors, never a panic.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(reader) = numaff_behave::TraceReader::from_csv_reader(
        Path::new("fuzz.csv"),
        std::io::Cursor::new(data.to_vec()),
    ) else {
        return;
    };
    for batch in reader {
        if batch.is_err() {
            break;
        }
    }
});
