//! Trace files: one row per [`Sample`], in Parquet (the native format, with a [`TraceMeta`] block in
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
//! or absent. Integer columns are written DELTA_BINARY_PACKED without dictionaries, the strings
//! PLAIN, pages Snappy-compressed (`writer_properties`).

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{UInt32Type, UInt64Type};
use arrow_array::{Array, ArrayRef, RecordBatch, StringArray, UInt32Array, UInt64Array};
use arrow_schema::{DataType, Field, Metadata, Schema, SchemaRef};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader,
    ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

use crate::sample::{shorten, DataSource, Kind, Sample, TraceMeta};

/// Rows per batch that readers return and the Parquet writer buffers.
pub const BATCH_ROWS: usize = 64 * 1024;

/// Rows per Parquet row group (the unit a reader holds in memory).
pub const ROW_GROUP_ROWS: usize = 1024 * 1024;

/// The longest CSV line accepted (a guard against reading a binary file line by line).
const MAX_CSV_LINE: usize = 4096;

/// Column names, in file order.
pub const COLUMNS: [&str; 9] = [
    "time_ns",
    "pid",
    "tid",
    "cpu",
    "node",
    "addr",
    "kind",
    "latency_ns",
    "data_source",
];

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

/// The Arrow schema of trace files as written.
pub fn schema() -> SchemaRef {
    let u64c = |n: &str| Field::new(n, DataType::UInt64, false);
    let u32c = |n: &str| Field::new(n, DataType::UInt32, false);
    Arc::new(Schema::new(vec![
        u64c("time_ns"),
        u32c("pid"),
        u32c("tid"),
        u32c("cpu"),
        u32c("node"),
        u64c("addr"),
        Field::new("kind", DataType::Utf8, false),
        Field::new("latency_ns", DataType::UInt64, true),
        Field::new("data_source", DataType::Utf8, true),
    ]))
}

/// Builds a record batch of samples (in [`schema`]).
pub fn to_record_batch(samples: &[Sample]) -> Result<RecordBatch, arrow_schema::ArrowError> {
    record_batch(schema(), samples)
}

fn record_batch(
    schema: SchemaRef,
    samples: &[Sample],
) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let col64 = |f: fn(&Sample) -> u64| -> ArrayRef {
        Arc::new(UInt64Array::from_iter_values(samples.iter().map(f)))
    };
    let col32 = |f: fn(&Sample) -> u32| -> ArrayRef {
        Arc::new(UInt32Array::from_iter_values(samples.iter().map(f)))
    };
    RecordBatch::try_new(
        schema,
        vec![
            col64(|s| s.time_ns),
            col32(|s| s.pid),
            col32(|s| s.tid),
            col32(|s| s.cpu),
            col32(|s| s.node),
            col64(|s| s.addr),
            Arc::new(StringArray::from_iter_values(
                samples.iter().map(|s| s.kind.as_str()),
            )),
            Arc::new(
                samples
                    .iter()
                    .map(|s| s.latency_ns)
                    .collect::<UInt64Array>(),
            ),
            Arc::new(
                samples
                    .iter()
                    .map(|s| s.data_source.map(|d| d.as_str()))
                    .collect::<StringArray>(),
            ),
        ],
    )
}

// ----------------------------------------------------------------------------------------------
// Writing

/// How traces are encoded: no dictionaries (times and addresses are nearly all distinct, so
/// building one is wasted hashing until the writer gives up on it), DELTA_BINARY_PACKED integers
/// (times rise, addresses and thread ids repeat or step), Snappy pages. Measured on a 131 134-sample
/// page-fault trace (issue 5, sampling overhead): 12 ms of cpu and 266 KiB, against 31 ms and
/// 1679 KiB with the writer's defaults (dictionaries, PLAIN).
fn writer_properties(kv: Vec<KeyValue>) -> WriterProperties {
    let mut b = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_dictionary_enabled(false)
        .set_key_value_metadata(Some(kv))
        .set_created_by(format!("numaff {}", env!("CARGO_PKG_VERSION")));
    for f in schema().fields() {
        if matches!(f.data_type(), DataType::UInt64 | DataType::UInt32) {
            b = b.set_column_encoding(f.name().as_str().into(), Encoding::DELTA_BINARY_PACKED);
        }
    }
    b.build()
}

enum Sink {
    Parquet(Box<ArrowWriter<File>>, SchemaRef),
    Csv(BufWriter<File>),
}

/// Writes a trace, atomically: samples go to a temporary file beside `path`, which
/// [`TraceWriter::finish`] renames into place. Dropped unfinished, the writer removes it.
pub struct TraceWriter {
    path: PathBuf,
    tmp: PathBuf,
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
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
        let io = |action, source| TraceError::Io {
            action,
            path: path.to_path_buf(),
            source,
        };
        let file = File::create(&tmp).map_err(|e| io("create", e))?;
        let sink = match format {
            Format::Parquet => {
                let pairs = meta.to_key_values();
                let kv = pairs
                    .iter()
                    .map(|(k, v)| KeyValue::new(k.clone(), v.clone()))
                    .collect();
                // The metadata goes in the Arrow schema too: pyarrow shows the schema's metadata
                // (from ARROW:schema) rather than the file's key-value pairs.
                let schema = Arc::new(
                    schema()
                        .as_ref()
                        .clone()
                        .with_metadata(pairs.into_iter().collect::<Metadata>()),
                );
                let props = writer_properties(kv);
                match ArrowWriter::try_new(file, schema.clone(), Some(props)) {
                    Ok(w) => Sink::Parquet(Box::new(w), schema),
                    Err(e) => {
                        let _ = std::fs::remove_file(&tmp);
                        return Err(TraceError::Parquet {
                            path: path.to_path_buf(),
                            message: e.to_string(),
                        });
                    }
                }
            }
            Format::Csv => {
                let mut w = BufWriter::new(file);
                let header = COLUMNS.join(",");
                if let Err(e) = writeln!(w, "{header}") {
                    let _ = std::fs::remove_file(&tmp);
                    return Err(io("write", e));
                }
                Sink::Csv(w)
            }
        };
        Ok(TraceWriter {
            path: path.to_path_buf(),
            tmp,
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
            Some(Sink::Csv(w)) => {
                let opt = |v: Option<String>| v.unwrap_or_default();
                writeln!(
                    w,
                    "{},{},{},{},{},{},{},{},{}",
                    s.time_ns,
                    s.pid,
                    s.tid,
                    s.cpu,
                    s.node,
                    s.addr,
                    s.kind,
                    opt(s.latency_ns.map(|l| l.to_string())),
                    opt(s.data_source.map(|d| d.to_string()))
                )
                .map_err(|e| self.io("write", e))
            }
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

    fn parquet_err(&self, e: impl ToString) -> TraceError {
        TraceError::Parquet {
            path: self.path.clone(),
            message: e.to_string(),
        }
    }

    fn flush_batch(&mut self) -> Result<(), TraceError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        if let Some(Sink::Parquet(w, schema)) = &mut self.sink {
            let result = record_batch(schema.clone(), &self.buf).and_then(|b| {
                w.write(&b)
                    .map_err(|e| arrow_schema::ArrowError::ExternalError(Box::new(e)))
            });
            self.buf.clear();
            if let Err(e) = result {
                return Err(self.parquet_err(e));
            }
        }
        Ok(())
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
        file.sync_all().map_err(|e| self.io("sync", e))?;
        std::fs::rename(&self.tmp, &self.path).map_err(|e| self.io("rename into place", e))?;
        Ok(self.rows)
    }
}

impl Drop for TraceWriter {
    fn drop(&mut self) {
        if self.sink.is_some() {
            self.sink = None;
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Writes `samples` to `path` (format by extension) in one go.
pub fn write_trace(path: &Path, meta: &TraceMeta, samples: &[Sample]) -> Result<u64, TraceError> {
    let mut w = TraceWriter::create(path, meta)?;
    w.write_all(samples)?;
    w.finish()
}

// ----------------------------------------------------------------------------------------------
// Reading

struct CsvState {
    lines: Box<dyn BufRead>,
    line_no: u64,
    /// Column index of each of [`COLUMNS`] in the file, if present.
    index: [Option<usize>; 9],
    width: usize,
    done: bool,
}

enum Source {
    Parquet(ParquetRecordBatchReader),
    Csv(Box<CsvState>),
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

    fn from_parquet<T: parquet::file::reader::ChunkReader + 'static>(
        path: &Path,
        input: T,
    ) -> Result<Self, TraceError> {
        let perr = |e: parquet::errors::ParquetError| TraceError::Parquet {
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        let metadata = guard(path, || {
            ArrowReaderMetadata::load(&input, ArrowReaderOptions::default())
        })?
        .map_err(perr)?;
        // Under the guard too: the check reads the crate's metadata, whose accessors may assert.
        guard(path, || {
            crate::parquet_pages::check_pages(&input, metadata.metadata())
        })?
        .map_err(|message| TraceError::Parquet {
            path: path.to_path_buf(),
            message,
        })?;
        let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(input, metadata);
        let file_meta = builder.metadata().file_metadata();
        let meta = TraceMeta::from_key_values(
            file_meta
                .key_value_metadata()
                .into_iter()
                .flatten()
                .map(|kv| (kv.key.as_str(), kv.value.as_deref())),
        )
        .map_err(|message| TraceError::Format {
            path: path.to_path_buf(),
            message,
        })?;
        let rows = u64::try_from(file_meta.num_rows()).ok();
        let schema = builder.schema().clone();
        for (i, name) in COLUMNS.iter().enumerate() {
            match schema.column_with_name(name) {
                None if i < 7 => {
                    return Err(TraceError::Format {
                        path: path.to_path_buf(),
                        message: format!(
                            "no column {name} (a trace has columns {})",
                            COLUMNS.join(", ")
                        ),
                    })
                }
                Some((_, f)) if !column_type_ok(name, f.data_type()) => {
                    return Err(TraceError::Format {
                        path: path.to_path_buf(),
                        message: format!(
                            "column {name} has type {}, expected {}",
                            f.data_type(),
                            if matches!(*name, "kind" | "data_source") {
                                "a string"
                            } else {
                                "an integer"
                            }
                        ),
                    })
                }
                _ => {}
            }
        }
        let reader = guard(path, || builder.with_batch_size(BATCH_ROWS).build())?.map_err(perr)?;
        Ok(TraceReader {
            path: path.to_path_buf(),
            format: Format::Parquet,
            meta,
            rows,
            source: Source::Parquet(reader),
            row: 0,
            failed: false,
        })
    }

    fn from_csv(path: &Path, mut lines: Box<dyn BufRead>) -> Result<Self, TraceError> {
        let mut line_no = 0;
        let header = loop {
            match read_csv_line(&mut lines, path, &mut line_no)? {
                None => {
                    return Err(TraceError::Format {
                        path: path.to_path_buf(),
                        message: "empty file: no header line".into(),
                    })
                }
                Some(l) if skip_csv_line(&l) => continue,
                Some(l) => break l,
            }
        };
        let names: Vec<String> = split_csv(&header).map(str::to_string).collect();
        let mut index = [None; 9];
        for (i, col) in COLUMNS.iter().enumerate() {
            index[i] = names.iter().position(|n| n == col);
            if index[i].is_none() && i < 7 && crate::perf_script::looks_like(&header) {
                return Err(TraceError::Format {
                    path: path.to_path_buf(),
                    message: format!(
                        "this is `perf script` text, not a trace: convert it with `numaff profile \
                         --import {} -o trace.parquet` (which maps its cpus to this machine's nodes)",
                        path.display()
                    ),
                });
            }
            if index[i].is_none() && i < 7 {
                return Err(TraceError::Row {
                    path: path.to_path_buf(),
                    unit: "line",
                    at: line_no,
                    message: format!(
                        "the header has no column {col} (a trace has columns {}; is this a trace?)",
                        COLUMNS.join(",")
                    ),
                });
            }
        }
        Ok(TraceReader {
            path: path.to_path_buf(),
            format: Format::Csv,
            meta: TraceMeta::default(),
            rows: None,
            source: Source::Csv(Box::new(CsvState {
                lines,
                line_no,
                index,
                width: names.len(),
                done: false,
            })),
            row: 0,
            failed: false,
        })
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

    fn next_parquet(&mut self) -> Option<Result<Vec<Sample>, TraceError>> {
        let Source::Parquet(reader) = &mut self.source else {
            return None;
        };
        let path = self.path.clone();
        let batch = match guard(&path, || reader.next()) {
            Err(e) => return Some(Err(e)),
            Ok(None) => return None,
            Ok(Some(Err(e))) => {
                return Some(Err(TraceError::Parquet {
                    path,
                    message: e.to_string(),
                }))
            }
            Ok(Some(Ok(b))) => b,
        };
        let first = self.row;
        self.row += batch.num_rows() as u64;
        Some(samples_of_batch(&path, &batch, first))
    }

    fn next_csv(&mut self) -> Option<Result<Vec<Sample>, TraceError>> {
        let Source::Csv(st) = &mut self.source else {
            return None;
        };
        if st.done {
            return None;
        }
        let mut out = Vec::with_capacity(1024);
        while out.len() < BATCH_ROWS {
            let line = match read_csv_line(&mut st.lines, &self.path, &mut st.line_no) {
                Err(e) => return Some(Err(e)),
                Ok(None) => {
                    st.done = true;
                    break;
                }
                Ok(Some(l)) => l,
            };
            if skip_csv_line(&line) {
                continue;
            }
            match parse_csv_row(&line, &st.index, st.width) {
                Ok(s) => out.push(s),
                Err(message) => {
                    return Some(Err(TraceError::Row {
                        path: self.path.clone(),
                        unit: "line",
                        at: st.line_no,
                        message,
                    }))
                }
            }
        }
        self.row += out.len() as u64;
        if out.is_empty() {
            None
        } else {
            Some(Ok(out))
        }
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

/// Runs a call into the Parquet library, turning a panic into an error naming the file: a corrupt
/// file must never bring numaff down. (Fuzzing aims to find such panics so that they can be
/// reported upstream; this is the safety net.)
///
/// The panic hook is silenced for the call, so that no "panicked at" line reaches the user before
/// the error; hooks are process-wide, so a panic of another thread in that window loses its
/// message (not its effect).
fn guard<R>(path: &Path, f: impl FnOnce() -> R) -> Result<R, TraceError> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    std::panic::set_hook(hook);
    result.map_err(|p| TraceError::Parquet {
        path: path.to_path_buf(),
        message: format!(
            "the Parquet reader failed on it ({})",
            p.downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "corrupt data".into())
        ),
    })
}

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

fn column_type_ok(name: &str, t: &DataType) -> bool {
    if matches!(name, "kind" | "data_source") {
        matches!(
            t,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Dictionary(_, _)
        ) || (name == "data_source" && *t == DataType::Null)
    } else {
        t.is_integer() || *t == DataType::Null && name == "latency_ns"
    }
}

fn column<'a>(batch: &'a RecordBatch, name: &str) -> Option<&'a ArrayRef> {
    batch.schema().index_of(name).ok().map(|i| batch.column(i))
}

/// Converts one record batch (rows `first..`) to samples, checking every value.
fn samples_of_batch(
    path: &Path,
    batch: &RecordBatch,
    first: u64,
) -> Result<Vec<Sample>, TraceError> {
    let row_err = |i: usize, message: String| TraceError::Row {
        path: path.to_path_buf(),
        unit: "row",
        at: first + i as u64,
        message,
    };
    let format_err = |message: String| TraceError::Format {
        path: path.to_path_buf(),
        message,
    };
    // Integer columns cast to their target type; a value out of range is an error (not a wrap).
    let opts = arrow_cast::CastOptions {
        safe: false,
        ..Default::default()
    };
    let cast = |name: &str, to: &DataType| -> Result<Option<ArrayRef>, TraceError> {
        match column(batch, name) {
            None => Ok(None),
            Some(a) => arrow_cast::cast_with_options(a, to, &opts)
                .map(Some)
                .map_err(|e| format_err(format!("column {name}: {e}"))),
        }
    };
    let need = |name: &str, to: &DataType| -> Result<ArrayRef, TraceError> {
        cast(name, to)?.ok_or_else(|| format_err(format!("no column {name}")))
    };
    let time = need("time_ns", &DataType::UInt64)?;
    let addr = need("addr", &DataType::UInt64)?;
    let pid = need("pid", &DataType::UInt32)?;
    let tid = need("tid", &DataType::UInt32)?;
    let cpu = need("cpu", &DataType::UInt32)?;
    let node = need("node", &DataType::UInt32)?;
    let kind = need("kind", &DataType::Utf8)?;
    let latency = cast("latency_ns", &DataType::UInt64)?;
    let source = cast("data_source", &DataType::Utf8)?;
    let (time, addr) = (
        time.as_primitive::<UInt64Type>(),
        addr.as_primitive::<UInt64Type>(),
    );
    let (pid, tid) = (
        pid.as_primitive::<UInt32Type>(),
        tid.as_primitive::<UInt32Type>(),
    );
    let (cpu, node) = (
        cpu.as_primitive::<UInt32Type>(),
        node.as_primitive::<UInt32Type>(),
    );
    let kind = kind.as_string::<i32>();
    let latency = latency.as_ref().map(|a| a.as_primitive::<UInt64Type>());
    let source = source.as_ref().map(|a| a.as_string::<i32>());
    let mut out = Vec::with_capacity(batch.num_rows());
    for i in 0..batch.num_rows() {
        for (name, a) in [
            ("time_ns", time as &dyn Array),
            ("pid", pid),
            ("tid", tid),
            ("cpu", cpu),
            ("node", node),
            ("addr", addr),
            ("kind", kind),
        ] {
            if a.is_null(i) {
                return Err(row_err(i, format!("{name} is missing (null)")));
            }
        }
        let k: Kind = kind.value(i).parse().map_err(|m| row_err(i, m))?;
        let ds = match source {
            Some(s) if s.is_valid(i) => Some(
                s.value(i)
                    .parse::<DataSource>()
                    .map_err(|m| row_err(i, m))?,
            ),
            _ => None,
        };
        out.push(Sample {
            time_ns: time.value(i),
            pid: pid.value(i),
            tid: tid.value(i),
            cpu: cpu.value(i),
            node: node.value(i),
            addr: addr.value(i),
            kind: k,
            latency_ns: latency.filter(|l| l.is_valid(i)).map(|l| l.value(i)),
            data_source: ds,
        });
    }
    Ok(out)
}

/// Reads one line (without its end), at most [`MAX_CSV_LINE`] bytes; `None` at the end.
pub(crate) fn read_csv_line(
    r: &mut Box<dyn BufRead>,
    path: &Path,
    line_no: &mut u64,
) -> Result<Option<String>, TraceError> {
    let mut buf = Vec::new();
    let n = r
        .by_ref()
        .take(MAX_CSV_LINE as u64 + 1)
        .read_until(b'\n', &mut buf)
        .map_err(|source| TraceError::Io {
            action: "read",
            path: path.to_path_buf(),
            source,
        })?;
    if n == 0 {
        return Ok(None);
    }
    *line_no += 1;
    let err = |message: String| TraceError::Row {
        path: path.to_path_buf(),
        unit: "line",
        at: *line_no,
        message,
    };
    if buf.last() == Some(&b'\n') {
        buf.pop();
    } else if buf.len() > MAX_CSV_LINE {
        return Err(err(format!(
            "line longer than {MAX_CSV_LINE} bytes (is this a CSV trace?)"
        )));
    }
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    String::from_utf8(buf)
        .map(Some)
        .map_err(|_| err("not UTF-8 text (is this a CSV trace?)".into()))
}

pub(crate) fn skip_csv_line(l: &str) -> bool {
    let t = l.trim();
    t.is_empty() || t.starts_with('#')
}

/// Fields of a CSV line, trimmed, with surrounding double quotes removed.
pub(crate) fn split_csv(line: &str) -> impl Iterator<Item = &str> {
    line.split(',').map(|f| {
        let f = f.trim();
        f.strip_prefix('"')
            .and_then(|g| g.strip_suffix('"'))
            .unwrap_or(f)
    })
}

pub(crate) fn parse_int<T: TryFrom<u64>>(name: &str, v: &str) -> Result<T, String> {
    let parsed = if let Some(h) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        u64::from_str_radix(h, 16)
    } else {
        v.parse::<u64>()
    };
    let bad = || format!("{name} {:?} is not a non-negative integer", shorten(v));
    let n = parsed.map_err(|_| bad())?;
    T::try_from(n).map_err(|_| format!("{name} {n} is out of range"))
}

fn parse_csv_row(line: &str, index: &[Option<usize>; 9], width: usize) -> Result<Sample, String> {
    let fields: Vec<&str> = split_csv(line).collect();
    if fields.len() != width {
        return Err(format!("{} fields, the header has {width}", fields.len()));
    }
    let get = |i: usize| index[i].map(|j| fields[j]);
    let req = |i: usize| -> Result<&str, String> {
        match get(i) {
            Some(v) if !v.is_empty() => Ok(v),
            _ => Err(format!("{} is empty", COLUMNS[i])),
        }
    };
    Ok(Sample {
        time_ns: parse_int("time_ns", req(0)?)?,
        pid: parse_int("pid", req(1)?)?,
        tid: parse_int("tid", req(2)?)?,
        cpu: parse_int("cpu", req(3)?)?,
        node: parse_int("node", req(4)?)?,
        addr: parse_int("addr", req(5)?)?,
        kind: req(6)?.parse()?,
        latency_ns: match get(7) {
            Some(v) if !v.is_empty() => Some(parse_int("latency_ns", v)?),
            _ => None,
        },
        data_source: match get(8) {
            Some(v) if !v.is_empty() => Some(v.parse()?),
            _ => None,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn samples(n: usize) -> Vec<Sample> {
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

    fn meta() -> TraceMeta {
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
    fn parquet_round_trip_in_batches() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.parquet");
        let s = samples(BATCH_ROWS + 1000);
        assert_eq!(write_trace(&path, &meta(), &s).unwrap(), s.len() as u64);
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers.len(), 1, "no temporary file left: {leftovers:?}");
        let r = TraceReader::open(&path).unwrap();
        assert_eq!(r.format(), Format::Parquet);
        assert_eq!(r.meta(), &meta());
        assert_eq!(r.rows(), Some(s.len() as u64));
        let batches: Vec<Vec<Sample>> = r.map(|b| b.unwrap()).collect();
        assert!(batches.len() >= 2, "streams in batches");
        assert_eq!(batches.concat(), s);
    }

    #[test]
    fn issue5_integer_columns_are_delta_packed_without_dictionaries() {
        use parquet::file::reader::{FileReader, SerializedFileReader};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.parquet");
        // Extremes and steps both ways: the deltas wrap around in u64 and must come back exact.
        let mut s = samples(3000);
        for (i, x) in s.iter_mut().enumerate() {
            x.time_ns = if i % 2 == 0 {
                u64::MAX - i as u64
            } else {
                i as u64
            };
            x.addr = if i % 3 == 0 { 0 } else { u64::MAX >> (i % 64) };
            x.tid = if i % 2 == 0 { u32::MAX } else { 1 };
        }
        write_trace(&path, &meta(), &s).unwrap();
        assert_eq!(TraceReader::open(&path).unwrap().read_all().unwrap(), s);
        let r = SerializedFileReader::new(File::open(&path).unwrap()).unwrap();
        let rg = r.metadata().row_group(0);
        for c in rg.columns() {
            let name = c.column_descr().name().to_string();
            assert!(
                c.dictionary_page_offset().is_none(),
                "{name} has a dictionary"
            );
            let delta = c.encodings().any(|e| e == Encoding::DELTA_BINARY_PACKED);
            let integer = !matches!(name.as_str(), "kind" | "data_source");
            assert_eq!(
                delta,
                integer,
                "{name}: {:?}",
                c.encodings().collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn metadata_appended_while_writing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.parquet");
        let mut start = meta();
        start.rates.clear();
        start.thread_names.clear();
        let mut w = TraceWriter::create(&path, &start).unwrap();
        w.write_all(&samples(10)).unwrap();
        let end = meta();
        w.append_meta(&TraceMeta {
            rates: end.rates.clone(),
            thread_names: end.thread_names.clone(),
            ..TraceMeta::default()
        });
        w.finish().unwrap();
        assert_eq!(TraceReader::open(&path).unwrap().meta(), &end);
    }

    #[test]
    fn csv_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        let s = samples(500);
        write_trace(&path, &TraceMeta::default(), &s).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with(
            "time_ns,pid,tid,cpu,node,addr,kind,latency_ns,data_source\n1000,100,100,0,0,"
        ));
        let r = TraceReader::open(&path).unwrap();
        assert_eq!(r.format(), Format::Csv);
        assert_eq!(r.read_all().unwrap(), s);
    }

    #[test]
    fn csv_accepts_reordered_columns_hex_comments_and_missing_optionals() {
        let text = "# from perf\nkind,addr,tid,pid,cpu,node,time_ns\n\nload,0x1000,5,5,1,0,7\n\"store\",4096,6,5,2,1,8\n";
        let r =
            TraceReader::from_csv_reader(Path::new("x.csv"), std::io::Cursor::new(text)).unwrap();
        let s = r.read_all().unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(
            (s[0].addr, s[0].kind, s[0].latency_ns),
            (0x1000, Kind::Load, None)
        );
        assert_eq!((s[1].tid, s[1].kind, s[1].node), (6, Kind::Store, 1));
    }

    fn csv_err(text: &'static str) -> String {
        match TraceReader::from_csv_reader(Path::new("bad.csv"), std::io::Cursor::new(text)) {
            Err(e) => e.to_string(),
            Ok(r) => r.read_all().unwrap_err().to_string(),
        }
    }

    #[test]
    fn issue5_perf_script_text_is_told_apart_and_sent_to_import() {
        let e = csv_err("pf 19098/19102 [001] 10868.447952: page-faults:u:     7f26dc0b4000\n");
        assert!(
            e.starts_with("bad.csv is not a numaff trace: this is `perf script` text"),
            "{e}"
        );
        assert!(e.contains("numaff profile --import bad.csv"), "{e}");
    }

    #[test]
    fn csv_errors_name_the_file_and_line() {
        assert_eq!(
            csv_err(""),
            "bad.csv is not a numaff trace: empty file: no header line"
        );
        assert!(
            csv_err("a,b\n1,2\n").starts_with("bad.csv, line 1: the header has no column time_ns")
        );
        let h = "time_ns,pid,tid,cpu,node,addr,kind\n";
        let e = csv_err(Box::leak(
            format!("{h}1,2,3,4,5,6,load\n1,2,3,4,5,6,jump\n").into_boxed_str(),
        ));
        assert_eq!(
            e,
            "bad.csv, line 3: unknown kind \"jump\" (expected fault, load or store)"
        );
        let e = csv_err(Box::leak(
            format!("{h}1,2,3,4,5,-6,load\n").into_boxed_str(),
        ));
        assert_eq!(
            e,
            "bad.csv, line 2: addr \"-6\" is not a non-negative integer"
        );
        let e = csv_err(Box::leak(format!("{h}1,2,3,4,5,6\n").into_boxed_str()));
        assert_eq!(e, "bad.csv, line 2: 6 fields, the header has 7");
        let e = csv_err(Box::leak(
            format!("{h}1,2,3,4,99999999999,6,load\n").into_boxed_str(),
        ));
        assert_eq!(e, "bad.csv, line 2: node 99999999999 is out of range");
        let long = Box::leak(format!("{h}{}\n", "1".repeat(10_000)).into_boxed_str());
        assert!(csv_err(long).contains("line 2: line longer than"));
        let e = match TraceReader::from_csv_reader(
            Path::new("bin.csv"),
            std::io::Cursor::new(vec![0xff, 0xfe, b'\n']),
        ) {
            Err(e) => e.to_string(),
            Ok(_) => String::new(),
        };
        assert_eq!(e, "bin.csv, line 1: not UTF-8 text (is this a CSV trace?)");
    }

    #[test]
    fn truncated_and_corrupt_parquet_give_errors_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.parquet");
        write_trace(&path, &meta(), &samples(300)).unwrap();
        let data = std::fs::read(&path).unwrap();
        // Truncated at many lengths, and with bytes flipped in many places: never a panic.
        let mut cuts: Vec<usize> = (0..data.len()).step_by(53).collect();
        cuts.extend([4, 5, data.len() - 8, data.len() - 1]);
        for cut in cuts {
            let r = TraceReader::from_parquet_bytes(Path::new("cut.parquet"), data[..cut].to_vec())
                .and_then(|r| r.read_all());
            let e = r.expect_err("a truncated file fails").to_string();
            assert!(e.starts_with("cut.parquet"), "{e}");
        }
        for at in (0..data.len()).step_by(7) {
            let mut d = data.clone();
            d[at] ^= 0x5a;
            if let Err(e) = TraceReader::from_parquet_bytes(Path::new("flip.parquet"), d)
                .and_then(|r| r.read_all())
            {
                assert!(e.to_string().starts_with("flip.parquet"), "{e}");
            }
        }
        let p = dir.path().join("short.parquet");
        std::fs::write(&p, &data[..data.len() / 2]).unwrap();
        let e = TraceReader::open(&p).err().unwrap().to_string();
        assert!(
            e.contains("short.parquet is not a readable Parquet trace"),
            "{e}"
        );
    }

    #[test]
    fn parquet_with_other_integer_types_and_no_optional_columns_reads() {
        use arrow_array::{Int32Array, Int64Array};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pandas.parquet");
        let i64c = |v: Vec<i64>| Arc::new(Int64Array::from(v)) as ArrayRef;
        let batch = RecordBatch::try_from_iter(vec![
            (
                "kind",
                Arc::new(StringArray::from(vec!["store", "load"])) as ArrayRef,
            ),
            ("time_ns", i64c(vec![1, 2])),
            ("pid", i64c(vec![9, 9])),
            ("tid", Arc::new(Int32Array::from(vec![9, 10])) as ArrayRef),
            ("cpu", i64c(vec![0, 1])),
            ("node", i64c(vec![0, 0])),
            ("addr", i64c(vec![64, 64])),
        ])
        .unwrap();
        let mut w =
            ArrowWriter::try_new(File::create(&path).unwrap(), batch.schema(), None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let s = TraceReader::open(&path).unwrap().read_all().unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!((s[1].tid, s[1].kind, s[1].addr), (10, Kind::Load, 64));
        // A negative value is an error naming the column.
        let batch = RecordBatch::try_from_iter(vec![
            (
                "kind",
                Arc::new(StringArray::from(vec!["store"])) as ArrayRef,
            ),
            ("time_ns", i64c(vec![-1])),
            ("pid", i64c(vec![9])),
            ("tid", i64c(vec![9])),
            ("cpu", i64c(vec![0])),
            ("node", i64c(vec![0])),
            ("addr", i64c(vec![64])),
        ])
        .unwrap();
        let mut w =
            ArrowWriter::try_new(File::create(&path).unwrap(), batch.schema(), None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let e = TraceReader::open(&path)
            .unwrap()
            .read_all()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("pandas.parquet is not a numaff trace: column time_ns"),
            "{e}"
        );
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
