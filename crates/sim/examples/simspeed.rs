//! A driver for CPU-time A/B runs of the simulator's speed: the stream of benches/accesses.rs,
//! `reps` x 1 M accesses on a fresh `Simulator` each, under `perf stat`. `simspeed SPAN REPS N`
//! runs N accesses per simulator instead (the same stream, longer): the difference between two
//! lengths is the steady rate, without the cold start.

use numaff_sim::{DataPolicy, ProcessSpec, SimConfig, Simulator, ThreadSpec};

#[path = "../benches/common/stream.rs"]
mod stream;
use stream::{random_stream_of, N};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let span: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(4 << 20);
    let reps: u32 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(3);
    let n: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(N);
    let m = numaff_machine::catalog::load("laso-hpl").expect("catalog machine");
    let mut sum = 0u64;
    let t0 = std::time::Instant::now();
    for _ in 0..reps {
        let sim = Simulator::new(&m, SimConfig::default());
        let spec = ProcessSpec::new("bench", DataPolicy::Interleave).thread(ThreadSpec::new(
            "t",
            0,
            random_stream_of(span, n),
        ));
        sum += sim.spawn_and_run(spec).makespan_ns;
    }
    let s = t0.elapsed().as_secs_f64();
    println!(
        "span {span} reps {reps}: makespan sum {sum} ns, wall {:.3} s, {:.2} M/s wall",
        s,
        f64::from(reps) * n as f64 / s / 1e6
    );
}
