//! Parquet trace files: the writer's encoding, reading with every value checked, and a guard
//! that turns panics of the Parquet library on corrupt files into errors.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{UInt32Type, UInt64Type};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType, Metadata};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

use super::schema::{record_batch, schema, COLUMNS};
use super::{Format, Sink, Source, TraceError, TraceReader, TraceWriter, BATCH_ROWS};
use crate::sample::{DataSource, Kind, Sample, TraceMeta};

/// Rows per Parquet row group (the unit a reader holds in memory).
pub const ROW_GROUP_ROWS: usize = 1024 * 1024;

/// How traces are encoded: no dictionaries (times and addresses are nearly all distinct, so
/// building one is wasted hashing until the writer gives up on it), DELTA_BINARY_PACKED integers
/// (times rise, addresses and thread ids repeat or step), Snappy pages. On a 131 134-sample page-fault
/// trace: 12 ms of cpu and 266 KiB, against 31 ms and 1679 KiB with the writer's defaults
/// (dictionaries, PLAIN).
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

/// The Parquet sink of a new trace at `tmp` (renamed to `path` when finished), with `meta` in the
/// file's key-value metadata and in the Arrow schema. On error the temporary file is removed.
pub(super) fn sink(file: File, path: &Path, meta: &TraceMeta) -> Result<Sink, TraceError> {
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
        Ok(w) => Ok(Sink::Parquet(Box::new(w), schema)),
        Err(e) => Err(TraceError::Write {
            path: path.to_path_buf(),
            message: e.to_string(),
        }),
    }
}

impl TraceWriter {
    pub(super) fn parquet_err(&self, e: impl ToString) -> TraceError {
        TraceError::Write {
            path: self.path.clone(),
            message: e.to_string(),
        }
    }

    pub(super) fn flush_batch(&mut self) -> Result<(), TraceError> {
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
}

impl TraceReader {
    pub(super) fn from_parquet<T: parquet::file::reader::ChunkReader + 'static>(
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

    pub(super) fn next_parquet(&mut self) -> Option<Result<Vec<Sample>, TraceError>> {
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

#[cfg(test)]
mod tests {
    use super::super::tests::{meta, samples};
    use super::super::write_trace;
    use super::*;
    use arrow_array::StringArray;

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
    fn integer_columns_are_delta_packed_without_dictionaries() {
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
}
