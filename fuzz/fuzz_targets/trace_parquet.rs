//! Parquet trace reading (numaff_behave::tracefile) on arbitrary bytes: errors, never a panic.
//!
//! Runs under libFuzzer's default limits (2 GB resident, and per allocation): a file that makes
//! the reader reserve or touch gigabytes is a finding (crates/behave/tests/fixtures/parquet-*).
//! The parquet crate has panicked on corrupt metadata (57.3.2: an `unwrap` in its thrift decoder,
//! kept as crates/behave/tests/fixtures/parquet-thrift-panic.parquet); numaff's reader
//! catches panics of the Parquet layer (with the panic hook silenced for the call, so
//! libfuzzer-sys' aborting hook does not fire) and turns them into errors naming the file; a panic
//! anywhere else still aborts the run.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(reader) =
        numaff_behave::TraceReader::from_parquet_bytes(Path::new("fuzz.parquet"), data.to_vec())
    else {
        return;
    };
    for batch in reader {
        if batch.is_err() {
            break;
        }
    }
});
