//! Measures how long the communication-aware mappings take for 1024 threads on a 16x4x8x2 synthetic
//! tree (issue 6 goal: ≤ 5 ms on one core), as the thread's cpu time (best of 5). Run: `cargo run --release -p numaff-policy --example map_timing`.

use numaff_policy::baselines::SplitMix64;
use numaff_policy::quality::hop_cost;
use numaff_policy::{map, Algorithm, CommMatrix, MapInput, Tree};

/// The calling thread's cpu time in ms (CLOCK_THREAD_CPUTIME_ID): on this shared machine other
/// jobs preempt the benchmark, and time spent waiting for a cpu is not the mapper's time.
fn thread_cpu_ms() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec for clock_gettime to fill.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return f64::NAN;
    }
    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let m = numaff_machine::spec::resolve("pack:16 l3:4 core:8 pu:2")?;
    let tree = Tree::from_machine(&m);
    let n = 1024;
    // 3-D stencil (16x8x8) with shuffled thread ids, and a random sparse matrix (4-16 partners).
    let mut rng = SplitMix64::new(42);
    let mut perm: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        perm.swap(i, rng.below(i + 1));
    }
    let mut stencil = CommMatrix::new(n);
    let id = |x: usize, y: usize, z: usize| perm[(x * 8 + y) * 8 + z];
    for x in 0..16 {
        for y in 0..8 {
            for z in 0..8 {
                if x + 1 < 16 {
                    stencil.add_pair(id(x, y, z), id(x + 1, y, z), 10.0);
                }
                if y + 1 < 8 {
                    stencil.add_pair(id(x, y, z), id(x, y + 1, z), 10.0);
                }
                if z + 1 < 8 {
                    stencil.add_pair(id(x, y, z), id(x, y, z + 1), 10.0);
                }
            }
        }
    }
    let mut sparse = CommMatrix::new(n);
    for i in 0..n {
        for _ in 0..(4 + rng.below(13)) / 2 {
            let j = rng.below(n);
            if j != i {
                sparse.add_pair(i, j, 1.0 + rng.below(100) as f64);
            }
        }
    }
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
