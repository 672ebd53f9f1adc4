//! Shared by the mapping-time examples (map_timing, map_loop, vs_scotch): the thread's cpu clock
//! and map_timing's two 1024-task matrices (16x4x8x2 tree).
#![allow(dead_code)] // each example uses part of it

use numaff_machine::rng::SplitMix64;
use numaff_policy::CommMatrix;

/// The calling thread's cpu time in ms (CLOCK_THREAD_CPUTIME_ID): on this shared machine other
/// jobs preempt the benchmark, and time spent waiting for a cpu is not the mapper's time.
pub fn thread_cpu_ms() -> f64 {
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

/// 1024 tasks: a 3-D stencil (16x8x8) with shuffled task ids, and a random sparse matrix (4-16
/// partners per task), both from seed 42.
pub fn timing_matrices() -> (CommMatrix, CommMatrix) {
    let n = 1024;
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
    (stencil, sparse)
}
