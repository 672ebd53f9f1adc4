//! numaff's behaviour structures: what samples of memory accesses accumulate into — kMAF's per-page
//! NUMA vectors and its sharing table feeding a sharing matrix between threads (000 §4.3).

pub mod analyze;
pub mod delocprof;
pub mod ingest;
pub mod messages;
pub mod numa_table;
pub mod parquet_pages;
pub mod perf_script;
pub mod sample;
pub mod sharing;
pub mod tracefile;

pub use ingest::{Recorded, TableSample, Tables, NO_THREAD};
pub use numa_table::{NumaTable, NumaTableConfig};
pub use sample::{DataSource, Kind, Sample, TraceMeta};
pub use sharing::{SharingMatrix, SharingTable, SharingTableConfig};
pub use tracefile::{TraceError, TraceReader, TraceWriter};
