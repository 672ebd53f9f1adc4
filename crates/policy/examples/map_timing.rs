//! Measures how long the communication-aware mappings take for 1024 threads on a 16x4x8x2 synthetic
//! tree (goal: ≤ 5 ms on one core), as the thread's cpu time (best of 5).
//! Run: `cargo run --release -p numaff-policy --example map_timing`.

use numaff_policy::quality::hop_cost;
use numaff_policy::{map, Algorithm, MapInput, Tree};

mod common;
use common::{thread_cpu_ms, timing_matrices};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let m = numaff_machine::spec::resolve("pack:16 l3:4 core:8 pu:2")?;
    let tree = Tree::from_machine(&m);
    let (stencil, sparse) = timing_matrices();
    for (name, c) in [
        ("3-D stencil, shuffled", &stencil),
        ("random sparse", &sparse),
    ] {
        let input = MapInput::with_comm(&m, c);
        let id_cost = hop_cost(&tree, c, &map(Algorithm::RoundRobin, &input)?);
        for algo in [Algorithm::Eagermap, Algorithm::Locality, Algorithm::Balance] {
            let runs = 5;
            let mut best = f64::MAX;
            let mut cost = 0.0;
            for _ in 0..runs {
                let t = thread_cpu_ms();
                let p = map(algo, &input)?;
                best = best.min(thread_cpu_ms() - t);
                cost = hop_cost(&tree, c, &p);
            }
            println!(
                "{name:24} {algo:9} best of {runs}: {best:7.2} ms  hop cost {:.3} x identity",
                cost / id_cost
            );
        }
    }
    Ok(())
}
