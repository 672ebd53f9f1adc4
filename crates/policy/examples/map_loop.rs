//! Locality's cpu time per `map()` call over many calls on `map_timing`'s two matrices (16x4x8x2,
//! 1024 threads): min, first quartile and median, steadier than a best of 5, and a loop to profile.
//! Run: `taskset -c 1 target/release/examples/map_loop [calls, default 200] [stencil|random]`.
use numaff_policy::baselines::SplitMix64;
use numaff_policy::{map, Algorithm, CommMatrix, MapInput};
/// The calling thread's cpu time in ms (CLOCK_THREAD_CPUTIME_ID).
fn cpu() -> f64 {
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
    let n = 1024;
    let mut rng = SplitMix64::new(42);
    let mut perm: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        perm.swap(i, rng.below(i + 1));
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
            let t = cpu();
            let p = map(Algorithm::Locality, &input)?;
            ts.push(cpu() - t);
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
