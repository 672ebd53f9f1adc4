//! Simulated accesses per second on one core for the papers' workloads (the goal: 20 M/s), beside
//! crates/sim's one-thread streams: whole `numaff sim` runs of suite workloads on laso-hpl.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use numaff_workload::{catalog, run, total_accesses, RunOptions};

fn bench(c: &mut Criterion) {
    let m = numaff_machine::catalog::load("laso-hpl").expect("catalog machine");
    let mut g = c.benchmark_group("suite accesses");
    g.sample_size(10);
    g.warm_up_time(std::time::Duration::from_secs(1));
    g.measurement_time(std::time::Duration::from_secs(5));
    // Most accesses hitting (nas-lu), a stencil (nas-sp), sharing-heavy misses (nas-is,
    // parsec-canneal), a pipeline (parsec-dedup).
    for name in [
        "nas-lu",
        "nas-sp",
        "nas-is",
        "parsec-canneal",
        "parsec-dedup",
    ] {
        let w = catalog::load(name).expect("catalog workload");
        let opts = RunOptions {
            threads: "compact".parse().expect("placement"),
            ..RunOptions::default()
        };
        g.throughput(Throughput::Elements(total_accesses(&w)));
        g.bench_function(name, |b| {
            b.iter(|| run(&m, &w, &opts).expect("run").makespan_ns)
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
