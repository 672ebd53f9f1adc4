//! Locality's cpu time per `map()` call over many calls on `map_timing`'s two matrices (16x4x8x2,
//! 1024 threads): min, first quartile and median, steadier than a best of 5, and a loop to profile.
//! Run: `taskset -c 1 target/release/examples/map_loop [calls, default 200] [stencil|random]`.
use numaff_policy::{map, Algorithm, MapInput};
mod common;
use common::{thread_cpu_ms, timing_matrices};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let m = numaff_machine::spec::resolve("pack:16 l3:4 core:8 pu:2")?;
    let (stencil, sparse) = timing_matrices();
    let reps: usize = match std::env::args().nth(1) {
        Some(a) => a.parse().map_err(|e| format!("calls {a:?}: {e}"))?,
        None => 200,
    };
    if reps == 0 {
        return Err("calls must be at least 1".into());
    }
    let which = std::env::args().nth(2).unwrap_or_default();
    for (name, c) in [("stencil", &stencil), ("random", &sparse)] {
        if !which.is_empty() && which != name {
            continue;
        }
        let input = MapInput::with_comm(&m, c);
        let mut ts = Vec::new();
        for _ in 0..reps {
            let t = thread_cpu_ms();
            let p = map(Algorithm::Locality, &input)?;
            ts.push(thread_cpu_ms() - t);
            std::hint::black_box(p);
        }
        ts.sort_by(f64::total_cmp);
        print!(
            "{name} min {:.3} q1 {:.3} med {:.3}  ",
            ts[0],
            ts[reps / 4],
            ts[reps / 2]
        );
    }
    println!();
    Ok(())
}
