//! Samples per second into the NUMA table and the sharing table on one core (goal ≥ 50 M/s;
//! kMAF's in-kernel update took about 385 ns per sample, 000 Table 5).

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use numaff_behave::{
    NumaTable, NumaTableConfig, SharingMatrix, SharingTable, SharingTableConfig, TableSample,
    Tables,
};
use std::time::Duration;

#[path = "common/stream.rs"]
mod stream;

/// The shared stream as (thread, node, address): 16 threads on 4 nodes.
fn samples(n: usize) -> Vec<(u16, usize, u64)> {
    stream::thread_addresses(n)
        .map(|(t, addr, _)| (t as u16, t % 4, addr))
        .collect()
}

/// The CPU time of the benchmarking thread (CLOCK_THREAD_CPUTIME_ID) instead of wall time: the
/// machines this runs on are shared, and time spent descheduled is not the tables' time.
struct CpuTime {
    wall: WallTime,
}

fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec, which `ts` is.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

impl Measurement for CpuTime {
    type Intermediate = Duration;
    type Value = Duration;
    fn start(&self) -> Duration {
        thread_cpu_time()
    }
    fn end(&self, start: Duration) -> Duration {
        thread_cpu_time().saturating_sub(start)
    }
    fn add(&self, a: &Duration, b: &Duration) -> Duration {
        *a + *b
    }
    fn zero(&self) -> Duration {
        Duration::ZERO
    }
    fn to_f64(&self, v: &Duration) -> f64 {
        v.as_nanos() as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        self.wall.formatter()
    }
}

fn ingest(c: &mut Criterion<CpuTime>) {
    let stream = samples(1 << 20);
    let mut group = c.benchmark_group("ingest");
    group.throughput(Throughput::Elements(stream.len() as u64));
    group.bench_function("numa_table+sharing_table", |b| {
        let mut numa = NumaTable::new(NumaTableConfig::new(4, 1 << 20));
        let mut sharing = SharingTable::new(SharingTableConfig::default());
        let mut matrix = SharingMatrix::new();
        b.iter(|| {
            for &(t, node, addr) in &stream {
                numa.record(addr >> 12, node);
                sharing.record(t, addr, &mut matrix);
            }
        })
    });
    // The fused batch path (`Tables::record_batch`) over batches of 1024 samples already in its
    // input form: the tables' own cost.
    let table_samples: Vec<TableSample> = stream
        .iter()
        .map(|&(t, node, addr)| TableSample {
            addr,
            node: node as u32,
            thread: t,
        })
        .collect();
    group.bench_function("numa_table+sharing_table/batch", |b| {
        let mut tables = Tables::new(
            NumaTableConfig::new(4, 1 << 20),
            SharingTableConfig::default(),
            4096,
        );
        b.iter(|| {
            for batch in table_samples.chunks(1024) {
                tables.record_batch(batch, |_, _| {});
            }
        })
    });
    // The same, fed as `numaff analyze` feeds it: each batch of 1024 is first copied from another
    // representation (here the bench's tuples) into the input form, inside the timed loop.
    group.bench_function("numa_table+sharing_table/batch+copy", |b| {
        let mut tables = Tables::new(
            NumaTableConfig::new(4, 1 << 20),
            SharingTableConfig::default(),
            4096,
        );
        let mut buf: Vec<TableSample> = Vec::with_capacity(1024);
        b.iter(|| {
            for batch in stream.chunks(1024) {
                buf.clear();
                buf.extend(batch.iter().map(|&(t, node, addr)| TableSample {
                    addr,
                    node: node as u32,
                    thread: t,
                }));
                tables.record_batch(&buf, |_, _| {});
            }
        })
    });
    // The two tables' own batch APIs one after the other, each batch of 1024 split into the
    // (page, node) and (thread, address) arrays inside the timed loop (the batch path before
    // `Tables::record_batch`).
    group.bench_function("numa_table+sharing_table/split", |b| {
        let mut numa = NumaTable::new(NumaTableConfig::new(4, 1 << 20));
        let mut sharing = SharingTable::new(SharingTableConfig::default());
        let mut matrix = SharingMatrix::new();
        let mut pages: Vec<(u64, u32)> = Vec::with_capacity(1024);
        let mut accesses: Vec<(u16, u64)> = Vec::with_capacity(1024);
        b.iter(|| {
            for batch in stream.chunks(1024) {
                pages.clear();
                accesses.clear();
                for &(t, node, addr) in batch {
                    pages.push((addr >> 12, node as u32));
                    accesses.push((t, addr));
                }
                numa.record_batch(&pages);
                sharing.record_batch(&accesses, &mut matrix);
            }
        })
    });
    // Each table alone, batched as above (where the time of the batch path goes).
    group.bench_function("numa_table/batch", |b| {
        let mut numa = NumaTable::new(NumaTableConfig::new(4, 1 << 20));
        let pages: Vec<(u64, u32)> = stream
            .iter()
            .map(|&(_, n, a)| (a >> 12, n as u32))
            .collect();
        b.iter(|| {
            for batch in pages.chunks(1024) {
                numa.record_batch(batch);
            }
        })
    });
    group.bench_function("sharing_table/batch", |b| {
        let mut sharing = SharingTable::new(SharingTableConfig::default());
        let mut matrix = SharingMatrix::new();
        let accesses: Vec<(u16, u64)> = stream.iter().map(|&(t, _, a)| (t, a)).collect();
        b.iter(|| {
            for batch in accesses.chunks(1024) {
                sharing.record_batch(batch, &mut matrix);
            }
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(CpuTime { wall: WallTime });
    targets = ingest
}
criterion_main!(benches);
