//! CPU time of `analyze_samples` on 2 Mi in-memory samples (ingest speed, end to end):
//! `cargo run --release -p numaff-behave --example analyze_speed [faults|loads]`.

use numaff_behave::analyze::{analyze_samples, AnalyzeConfig};
use numaff_behave::{Kind, Sample, TraceMeta};

#[path = "../benches/common/stream.rs"]
mod stream;

/// The calling thread's CPU time, s.
fn cpu_time() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec, which `ts` is.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn main() {
    // The ingest bench's stream (16 threads on 4 nodes over 1 GiB): all page faults (the sharing
    // table makes the matrix), or loads and one in three stores (the load/store detector does).
    let loads = std::env::args().nth(1).as_deref() == Some("loads");
    let n = 1usize << 21;
    let samples: Vec<Sample> = stream::thread_addresses(n)
        .enumerate()
        .map(|(i, (t, addr, x))| {
            let kind = match (loads, x.is_multiple_of(3)) {
                (false, _) => Kind::Fault,
                (true, true) => Kind::Store,
                (true, false) => Kind::Load,
            };
            Sample {
                time_ns: i as u64 * 500,
                pid: 1,
                tid: 100 + t as u32,
                cpu: t as u32,
                node: (t % 4) as u32,
                addr,
                kind,
                latency_ns: None,
                data_source: None,
            }
        })
        .collect();
    let mut times = Vec::new();
    for _ in 0..5 {
        let start = cpu_time();
        let a = analyze_samples(&samples, &TraceMeta::default(), &AnalyzeConfig::default())
            .expect("2 Mi samples of few threads are within the caps");
        times.push(cpu_time() - start);
        std::hint::black_box(a.events);
    }
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    println!(
        "{} samples ({}): CPU time {:.3?} s, median {median:.3} s = {:.1} ns per sample",
        n,
        if loads { "loads and stores" } else { "faults" },
        times,
        median * 1e9 / n as f64
    );
}
