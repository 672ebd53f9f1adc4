//! CSV trace reading (numaff_behave::tracefile) and MPI message traces (numaff_behave::messages, with
//! their analysis) on arbitrary bytes: errors, never a panic.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = numaff_behave::messages::read_messages_from(
        Path::new("fuzz.csv"),
        std::io::Cursor::new(data.to_vec()),
    ) {
        let _ = numaff_behave::analyze::analyze_messages(
            &m,
            &numaff_behave::analyze::AnalyzeConfig::default(),
        );
    }
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
