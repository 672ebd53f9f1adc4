//! What several fuzz targets share: the input read as a CSV sample trace, at most a given number
//! of samples of it.

use std::path::Path;

use numaff_behave::{Sample, TraceMeta};

/// The first `max` samples of `data` read as a CSV trace, with its metadata; None when the input
/// is not a readable trace.
pub fn csv_samples(data: &[u8], max: usize) -> Option<(Vec<Sample>, TraceMeta)> {
    let reader = numaff_behave::TraceReader::from_csv_reader(
        Path::new("fuzz.csv"),
        std::io::Cursor::new(data.to_vec()),
    )
    .ok()?;
    let meta = reader.meta().clone();
    let mut samples = Vec::new();
    for batch in reader {
        samples.extend(batch.ok()?);
        if samples.len() >= max {
            samples.truncate(max);
            break;
        }
    }
    Some((samples, meta))
}
