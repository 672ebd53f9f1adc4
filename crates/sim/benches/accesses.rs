//! Simulated accesses per second on one core, for the cache + memory model. One thread on laso-hpl;
//! three streams: cache-friendly, mixed, and memory-bound (all LLC misses).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use numaff_sim::{DataPolicy, ProcessSpec, SimConfig, Simulator, ThreadSpec};

#[path = "common/stream.rs"]
mod stream;
use stream::{random_stream_of, N};

fn bench(c: &mut Criterion) {
    let m = numaff_machine::catalog::load("laso-hpl").expect("catalog machine");
    let mut g = c.benchmark_group("simulated accesses");
    g.throughput(Throughput::Elements(N));
    g.sample_size(10);
    g.warm_up_time(std::time::Duration::from_secs(1));
    g.measurement_time(std::time::Duration::from_secs(4));
    for (name, span) in [
        ("16 KiB (L1)", 16u64 << 10),
        ("4 MiB (L3)", 4 << 20),
        ("1 GiB (memory)", 1 << 30),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| {
                let sim = Simulator::new(&m, SimConfig::default());
                let spec = ProcessSpec::new("bench", DataPolicy::Interleave)
                    .thread(ThreadSpec::new("t", 0, random_stream_of(span, N)));
                sim.spawn_and_run(spec).makespan_ns
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
