//! `numaff profile --import`: `perf script` text into a trace, or a numaff trace converted between
//! Parquet and CSV; nothing is sampled.

use std::path::Path;

use anyhow::{bail, Context, Result};

use numaff_behave::perf_script::PerfScriptReader;
use numaff_behave::{Sample, TraceMeta, TraceReader, TraceWriter};

use super::record::cpus_and_nodes;

/// Converts `input` into the trace `output`: a numaff trace is converted to the format of
/// `output`, anything else is read as `perf script` text.
pub(super) fn run(input: &Path, output: &Path) -> Result<()> {
    if is_trace(input) {
        return convert_trace(input, output);
    }
    import_perf_script(input, output)
}

/// Whether `path` holds a numaff trace: Parquet (its `PAR1` magic) or CSV whose header (the first
/// line that is not blank or a `#` comment) names `time_ns`.
fn is_trace(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    let parquet = std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && &magic == b"PAR1";
    parquet
        || numaff_behave::messages::csv_header(path)
            .ok()
            .flatten()
            .is_some_and(|h| h.iter().any(|c| c == "time_ns"))
}

/// Streams every batch of `reader` into `writer`; returns the samples written.
fn copy_batches<E>(
    reader: impl Iterator<Item = std::result::Result<Vec<Sample>, E>>,
    writer: &mut TraceWriter,
) -> Result<u64>
where
    anyhow::Error: From<E>,
{
    let mut samples = 0u64;
    for batch in reader {
        let batch = batch?;
        samples += batch.len() as u64;
        writer.write_all(&batch)?;
    }
    Ok(samples)
}

/// `numaff profile --import TRACE -o TRACE2`: a trace streamed into the format of `-o` (Parquet to
/// CSV is the CSV export; CSV to Parquet the import), the metadata kept where the format holds it.
fn convert_trace(input: &Path, output: &Path) -> Result<()> {
    let mut reader = TraceReader::open(input)?;
    let meta = reader.meta().clone();
    let mut writer = TraceWriter::create(output, &meta)?;
    let samples = copy_batches(reader.by_ref(), &mut writer)?;
    writer.finish()?;
    println!(
        "numaff: converted {samples} samples from {} to {}",
        input.display(),
        output.display()
    );
    Ok(())
}

/// `numaff profile --import PERF_TXT -o TRACE`: `perf script` text to a trace, the node of each
/// sample from its cpu on this machine. The trace is written whole or not at all.
fn import_perf_script(input: &Path, output: &Path) -> Result<()> {
    let machine = numaff_machine::discover_host().context("cannot discover this machine")?;
    let (_, node_of_cpu) = cpus_and_nodes(&machine);
    let mut reader = PerfScriptReader::open(input, node_of_cpu)?;
    let mut meta = TraceMeta {
        machine: numaff_machine::file::to_toml_string(&machine).ok(),
        command: Some(format!("imported from {}", input.display())),
        sampler: Some("perf-script".into()),
        ..TraceMeta::default()
    };
    let mut writer = TraceWriter::create(output, &meta)?;
    let samples = copy_batches(reader.by_ref(), &mut writer)?;
    if samples == 0 {
        bail!(
            "{} has no samples (is it the output of `{}`?)",
            input.display(),
            numaff_behave::perf_script::RECOMMENDED
        );
    }
    meta.thread_names = reader.thread_names().clone();
    meta.rates.insert("samples".into(), samples as f64);
    writer.append_meta(&TraceMeta {
        rates: meta.rates.clone(),
        thread_names: meta.thread_names.clone(),
        ..TraceMeta::default()
    });
    writer.finish()?;
    println!(
        "numaff: imported {samples} samples of {} threads from {}; wrote {}",
        meta.thread_names.len(),
        input.display(),
        output.display()
    );
    println!("next: numaff analyze {}", output.display());
    Ok(())
}
