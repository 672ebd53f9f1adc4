//! Sample trace files: one row per [`Sample`], in Parquet (the native format, with a [`TraceMeta`] block in
//! the file's key-value metadata) or CSV (import and export, a header line and no metadata).
//!
//! Columns, in this order, named plainly so pandas / polars / DuckDB read them as they are:
//!
//! | column | Parquet type | meaning |
//! |---|---|---|
//! | time_ns | UINT64 | time of the sample, ns |
//! | pid | UINT32 | process id |
//! | tid | UINT32 | thread id |
//! | cpu | UINT32 | cpu (PU) the thread ran on |
//! | node | UINT32 | NUMA node of that cpu |
//! | addr | UINT64 | virtual address accessed |
//! | kind | UTF8 | `fault`, `load` or `store` |
//! | latency_ns | UINT64, nullable | access latency when the sampler measures it |
//! | data_source | UTF8, nullable | `l1`, `lfb`, `l2`, `l3`, `remote_cache`, `local_dram`, `remote_dram`, `pmem`, `uncached`, `other` |
//!
//! Readers accept any integer column type that holds the values (pandas writes int64) and any
//! column order; `latency_ns` and `data_source` may be missing. CSV readers also accept addresses in
//! hex (`0x7f...`), and skip blank lines and lines starting with `#`.
//!
//! [`TraceReader`] streams: Parquet row group by row group in batches of [`BATCH_ROWS`], CSV line by
//! line, so a trace larger than memory can be analysed. [`TraceWriter`] writes to a temporary file
//! next to the target and renames it into place when finished, so a trace file is either complete
//! or absent. Submodules: `schema` (the columns and their Arrow schema), `parquet` and `csv` (each
//! format's reading and writing).

mod csv;
mod parquet;
mod schema;

use std::fs::File;
use std::io::{BufReader, BufWriter, Read};
use std::path::{Path, PathBuf};

use ::parquet::arrow::arrow_reader::ParquetRecordBatchReader;
use ::parquet::arrow::ArrowWriter;
use ::parquet::file::metadata::KeyValue;
use arrow_schema::SchemaRef;
use numaff_machine::outfile::{OutputPath, Pending};

use crate::sample::{Sample, TraceMeta};

pub(crate) use csv::{parse_int, read_csv_line, skip_csv_line, split_csv};
pub use parquet::ROW_GROUP_ROWS;
pub use schema::{schema, to_record_batch, COLUMNS};

/// Rows per batch that readers return and the Parquet writer buffers.
pub const BATCH_ROWS: usize = 64 * 1024;

/// What went wrong with a trace file; every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file could not be opened, read, written or renamed.
    #[error("cannot {action} trace {}: {source}", path.display())]
    Io {
        /// What was attempted.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The Parquet layer rejected the file (corrupt, truncated, not Parquet, unsupported codec).
    #[error("{} is not a readable Parquet trace: {message}", path.display())]
    Parquet {
        /// The file.
        path: PathBuf,
        /// The Parquet reader's message.
        message: String,
    },
    /// The trace could not be encoded or written (a full disk, a write error under Parquet).
    #[error("cannot write trace {}: {message}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// The file is readable but is not a trace (a missing column, bad metadata).
    #[error("{} is not a numaff trace: {message}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A value of one row is wrong (Parquet: 0-based row number; CSV: 1-based line number).
    #[error("{}, {unit} {at}: {message}", path.display())]
    Row {
        /// The file.
        path: PathBuf,
        /// "row" (Parquet) or "line" (CSV).
        unit: &'static str,
        /// The row or line.
        at: u64,
        /// What is wrong.
        message: String,
    },
    /// The trace is beyond one of the analysis's documented caps (more distinct threads, a node id
    /// larger than any machine's).
    #[error("{}: {message}", path.display())]
    TooLarge {
        /// The file (empty for samples analysed in memory).
        path: PathBuf,
        /// Which cap, the trace's value and what to do.
        message: String,
    },
}

/// Trace file formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Apache Parquet, snappy-compressed, with metadata.
    Parquet,
    /// Comma-separated values with a header line.
    Csv,
}

impl Format {
    /// The format a path's extension names: `.csv` is CSV, anything else Parquet.
    pub fn from_path(path: &Path) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("csv") => Format::Csv,
            _ => Format::Parquet,
        }
    }
}

enum Sink {
    Parquet(Box<ArrowWriter<File>>, SchemaRef),
    Csv(BufWriter<File>),
}

/// Writes a trace, atomically: samples go to a temporary file beside `path` (or beside the target
/// of a symlink), which [`TraceWriter::finish`] renames into place; a device or FIFO is written in
/// place ([`numaff_machine::outfile`]). Dropped unfinished, the writer removes its temporary.
pub struct TraceWriter {
    path: PathBuf,
    pending: Option<Pending>,
    sink: Option<Sink>,
    buf: Vec<Sample>,
    rows: u64,
}

impl TraceWriter {
    /// Creates a trace in the format of `path`'s extension ([`Format::from_path`]).
    pub fn create(path: &Path, meta: &TraceMeta) -> Result<Self, TraceError> {
        Self::create_as(path, Format::from_path(path), meta)
    }

    /// Creates a trace in `format`. CSV carries no metadata.
    pub fn create_as(path: &Path, format: Format, meta: &TraceMeta) -> Result<Self, TraceError> {
        let io = |action, source| TraceError::Io {
            action,
            path: path.to_path_buf(),
            source,
        };
        let out = OutputPath::check(path).map_err(|e| io("write", e))?;
        let (file, pending) = out.create().map_err(|e| io("create", e))?;
        let sink = match format {
            Format::Parquet => parquet::sink(file, path, meta)?,
            Format::Csv => csv::sink(file, path)?,
        };
        Ok(TraceWriter {
            path: path.to_path_buf(),
            pending: Some(pending),
            sink: Some(sink),
            buf: Vec::new(),
            rows: 0,
        })
    }

    /// Adds metadata learnt while writing (rates, thread names) to a Parquet trace: when read, a
    /// key given again here overrides the value given at creation. CSV carries no metadata.
    pub fn append_meta(&mut self, meta: &TraceMeta) {
        if let Some(Sink::Parquet(w, _)) = &mut self.sink {
            for (k, v) in meta.to_key_values() {
                if k != "numaff.format" {
                    w.append_key_value_metadata(KeyValue::new(k, v));
                }
            }
        }
    }

    /// Appends one sample.
    pub fn write(&mut self, s: &Sample) -> Result<(), TraceError> {
        self.rows += 1;
        match &mut self.sink {
            Some(Sink::Csv(w)) => csv::write_row(w, s).map_err(|e| self.io("write", e)),
            Some(Sink::Parquet(..)) => {
                self.buf.push(*s);
                if self.buf.len() >= BATCH_ROWS {
                    self.flush_batch()?;
                }
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Appends samples.
    pub fn write_all<'a>(
        &mut self,
        samples: impl IntoIterator<Item = &'a Sample>,
    ) -> Result<(), TraceError> {
        for s in samples {
            self.write(s)?;
        }
        Ok(())
    }

    fn io(&self, action: &'static str, source: std::io::Error) -> TraceError {
        TraceError::Io {
            action,
            path: self.path.clone(),
            source,
        }
    }

    /// Writes what is buffered, syncs, and renames the file into place. Returns the rows written.
    pub fn finish(mut self) -> Result<u64, TraceError> {
        self.flush_batch()?;
        let file = match self.sink.take() {
            Some(Sink::Parquet(w, _)) => w.into_inner().map_err(|e| self.parquet_err(e))?,
            Some(Sink::Csv(w)) => w
                .into_inner()
                .map_err(|e| self.io("write", e.into_error()))?,
            None => return Ok(self.rows),
        };
        if let Some(p) = self.pending.take() {
            p.commit(file).map_err(|e| self.io("write", e))?;
        }
        Ok(self.rows)
    }
}

/// Writes `samples` to `path` (format by extension) in one go.
pub fn write_trace(path: &Path, meta: &TraceMeta, samples: &[Sample]) -> Result<u64, TraceError> {
    let mut w = TraceWriter::create(path, meta)?;
    w.write_all(samples)?;
    w.finish()
}

enum Source {
    Parquet(ParquetRecordBatchReader),
    Csv(Box<csv::CsvState>),
}

/// Reads a trace in batches of samples: an iterator of `Result<Vec<Sample>, TraceError>` that ends
/// after the first error.
pub struct TraceReader {
    path: PathBuf,
    format: Format,
    meta: TraceMeta,
    rows: Option<u64>,
    source: Source,
    row: u64,
    failed: bool,
}

impl TraceReader {
    /// Opens a trace: Parquet when the file starts with Parquet's magic `PAR1`, else CSV.
    pub fn open(path: &Path) -> Result<Self, TraceError> {
        let io = |action, source| TraceError::Io {
            action,
            path: path.to_path_buf(),
            source,
        };
        let mut file = File::open(path).map_err(|e| io("open", e))?;
        let mut magic = [0u8; 4];
        let n = read_up_to(&mut file, &mut magic).map_err(|e| io("read", e))?;
        if n == 4 && &magic == b"PAR1" {
            let file = File::open(path).map_err(|e| io("open", e))?;
            Self::from_parquet(path, file)
        } else {
            let file = File::open(path).map_err(|e| io("open", e))?;
            Self::from_csv(path, Box::new(BufReader::new(file)))
        }
    }

    /// Reads a Parquet trace from bytes in memory (`name` is used in errors).
    pub fn from_parquet_bytes(name: &Path, data: Vec<u8>) -> Result<Self, TraceError> {
        Self::from_parquet(name, bytes::Bytes::from(data))
    }

    /// Reads a CSV trace from any reader (`name` is used in errors).
    pub fn from_csv_reader(name: &Path, reader: impl Read + 'static) -> Result<Self, TraceError> {
        Self::from_csv(name, Box::new(BufReader::new(reader)))
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's format.
    pub fn format(&self) -> Format {
        self.format
    }

    /// The trace's metadata (empty for CSV).
    pub fn meta(&self) -> &TraceMeta {
        &self.meta
    }

    /// Rows in the file, when the format says (Parquet).
    pub fn rows(&self) -> Option<u64> {
        self.rows
    }

    /// Reads every remaining sample into memory.
    pub fn read_all(self) -> Result<Vec<Sample>, TraceError> {
        let mut all = Vec::new();
        for batch in self {
            all.extend(batch?);
        }
        Ok(all)
    }
}

impl Iterator for TraceReader {
    type Item = Result<Vec<Sample>, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let item = match self.format {
            Format::Parquet => self.next_parquet(),
            Format::Csv => self.next_csv(),
        };
        if matches!(item, Some(Err(_))) {
            self.failed = true;
        }
        item
    }
}

/// Reads until `buf` is full or the input ends; the bytes read.
fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::{DataSource, Kind};

    pub(super) fn samples(n: usize) -> Vec<Sample> {
        (0..n)
            .map(|i| Sample {
                time_ns: 1_000 + i as u64 * 10,
                pid: 100,
                tid: 100 + (i % 4) as u32,
                cpu: (i % 8) as u32,
                node: (i % 2) as u32,
                addr: 0x7f00_0000_0000 + i as u64 * 64,
                kind: [Kind::Fault, Kind::Load, Kind::Store][i % 3],
                latency_ns: (i % 5 != 0).then_some(i as u64),
                data_source: (i % 7 != 0).then_some(DataSource::ALL[i % 10]),
            })
            .collect()
    }

    pub(super) fn meta() -> TraceMeta {
        let mut m = TraceMeta {
            machine: Some("laso-hpl".into()),
            command: Some("./comm 8".into()),
            sampler: Some("synthetic".into()),
            page_size: Some(4096),
            ..Default::default()
        };
        m.rates.insert("samples_per_s".into(), 1234.5);
        m.thread_names.insert(101, "worker".into());
        m
    }

    #[test]
    fn an_unfinished_writer_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.parquet");
        {
            let mut w = TraceWriter::create(&path, &meta()).unwrap();
            w.write_all(&samples(10)).unwrap();
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
