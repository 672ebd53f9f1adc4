//! The columns of trace files and their Arrow schema, and the conversion of samples to Arrow
//! record batches.

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, StringArray, UInt32Array, UInt64Array};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use crate::sample::Sample;

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

/// Builds a record batch of samples in `schema` (the trace schema, possibly with metadata).
pub(super) fn record_batch(
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
