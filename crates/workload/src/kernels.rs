//! The generators: for a [`Program`] and one of its threads, the thread's [`Step`]s. Every kernel
//! is a function of the program's parameters only (no machine, no run seed), so a profiling pass
//! that replays the same steps sees exactly the accesses the simulated run will issue.
//!
//! Notation: `n` threads, `L` = `lines` per thread, `c` = `compute_cycles`, `w` = `write_fraction`.
//! Thread `t` works, in phase `p`, on share `b = (t + p * phase_shift) mod n` of each array
//! (dynamic behaviour: a shift moves the work away from where first touch put the data). "Halo"
//! is `L / 8` lines of a neighbouring share.

use numaff_machine::rng::hash;

use crate::ops::{Step, LINE};
use crate::spec::{Init, Kernel, Program};

/// Where a program's arrays live: array `k` starts at `base + k * gap`.
#[derive(Debug, Clone, Copy)]
struct Layout {
    base: u64,
    gap: u64,
}

impl Layout {
    fn array(&self, k: u64) -> u64 {
        self.base + k * self.gap
    }
}

/// Arrays per task and the address space per task (queued kernels get their own).
const ARRAYS: u64 = 8;

/// The largest array `layout` spaces by 4 x its size within a task's 2^40 bytes (8 arrays of
/// 2^37): 32 GiB. `Workload::check` refuses larger ones, which would overlap their neighbours.
pub(crate) const MAX_ARRAY_BYTES: u64 = (1 << 40) / ARRAYS / 4;

/// Task `task` (0 = the program's kernel, then its queued ones) gets 2^40 bytes of address space
/// from `task + 1` TiB; its arrays are spaced by a power of two at least 4 x the array size.
fn layout(p: &Program, n: u64, task: u64) -> Layout {
    let biggest = (4 * n * p.lines * LINE).max(1 << 22);
    let gap = biggest.next_power_of_two().min((1 << 40) / ARRAYS);
    Layout {
        base: (task + 1) << 40,
        gap,
    }
}

/// The steps of thread `t` of `n` for program `p` and its queued kernels.
pub fn thread_steps(p: &Program, n: u32, t: u32) -> Vec<Step> {
    if let Some(r) = &p.replay {
        return r
            .threads
            .get(t as usize)
            .map(|th| vec![Step::Replay(th.accesses.clone())])
            .unwrap_or_default();
    }
    let mut steps = Vec::new();
    for (task, q) in std::iter::once(p).chain(p.then.iter()).enumerate() {
        let lay = layout(q, u64::from(n), task as u64);
        if !steps.is_empty() {
            steps.push(Step::Barrier);
        }
        kernel_steps(q, u64::from(n), u64::from(t), lay, &mut steps);
    }
    steps
}

/// One array of a kernel: its index in the layout and its lines per share.
struct Array {
    index: u64,
    lines_per_share: u64,
}

/// The arrays each kernel allocates (index, lines per thread's share), for initialisation.
fn arrays(k: Kernel, l: u64) -> Vec<Array> {
    let a = |index, lines_per_share: u64| Array {
        index,
        lines_per_share: lines_per_share.max(1),
    };
    match k {
        Kernel::Bt | Kernel::Sp | Kernel::Lu | Kernel::Facesim | Kernel::Fluidanimate => {
            vec![a(0, l)]
        }
        Kernel::Ua => vec![a(0, l)],
        Kernel::Mg => vec![a(0, l), a(1, l / 8), a(2, l / 64)],
        Kernel::Cg => vec![a(0, l), a(1, l / 8), a(2, l / 8)],
        Kernel::Ft => vec![a(0, l), a(1, l)],
        Kernel::Is => vec![a(0, l), a(1, l)],
        Kernel::Dc => vec![a(0, l), a(1, l / 2)],
        Kernel::Ep => vec![a(0, l)],
        Kernel::Streamcluster => vec![a(0, l), a(1, 4), a(2, l / 16)],
        Kernel::Canneal => vec![a(0, l)],
        Kernel::Dedup | Kernel::Ferret => vec![a(0, l), a(5, l)],
        Kernel::X264 => vec![a(0, l), a(1, l)],
        Kernel::Trace => Vec::new(),
    }
}

/// The bytes of the arrays program `p` (and its queued kernels) allocates when `n` threads run
/// it: what its threads can touch, to hold against the machine's caches. A replayed trace's
/// footprint is not known from its parameters: 0.
pub fn footprint_bytes(p: &Program, n: u64) -> u64 {
    std::iter::once(p)
        .chain(p.then.iter())
        .filter(|q| q.replay.is_none())
        .flat_map(|q| arrays(q.kernel, q.lines))
        .map(|a| a.lines_per_share.saturating_mul(n).saturating_mul(LINE))
        .fold(0, u64::saturating_add)
}

/// Steps a run may hold in memory over all its threads (about 48 bytes each: 1.5 GiB): the
/// generators build each thread's steps before the run, so a file asking for billions of
/// iterations is refused by [`crate::Workload::check`] instead of exhausting the host's memory.
pub const MAX_STEPS: u64 = 1 << 25;

/// At least as many steps as [`thread_steps`] makes for any thread of `p` (and its queued
/// kernels) run by `n` threads, counted from the kernels' loops without building them; the test
/// `steps_bound_covers_every_kernel` checks it against the real counts.
pub fn steps_bound(p: &Program, n: u64) -> u64 {
    if p.replay.is_some() {
        return 1;
    }
    std::iter::once(p)
        .chain(p.then.iter())
        .map(|q| {
            let per_iteration = match q.kernel {
                // O(n) per iteration: per sweep direction 3n - 1 barriers and 4n chunk and
                // boundary sweeps (LU's wavefront); a transpose chunk per thread (FT).
                Kernel::Lu => n.saturating_mul(14).saturating_add(24),
                Kernel::Ft => n.saturating_mul(2).saturating_add(24),
                // Stage s of S handles size(0) / size(s) <= 2 items per iteration, <= 5 steps each.
                Kernel::Dedup | Kernel::Ferret => 11,
                // Five grid levels, five steps each.
                Kernel::Mg => 25,
                _ => 12,
            };
            // Initialisation (at most 3 arrays), its barrier, the barrier between queued kernels.
            u64::from(q.iterations)
                .saturating_mul(per_iteration)
                .saturating_add(8)
        })
        .fold(0, u64::saturating_add)
}

fn kernel_steps(p: &Program, n: u64, t: u64, lay: Layout, out: &mut Vec<Step>) {
    let l = p.lines;
    let (c, w) = (p.compute_cycles, p.write_fraction);
    // Initialisation.
    let arrays = arrays(p.kernel, l);
    match p.init {
        Init::Master => {
            if t == 0 {
                for a in &arrays {
                    out.push(Step::init(lay.array(a.index), n * a.lines_per_share));
                }
            }
        }
        Init::Parallel => {
            for a in &arrays {
                let s = a.lines_per_share;
                out.push(Step::init(lay.array(a.index) + t * s * LINE, s));
            }
        }
    }
    out.push(Step::Barrier);
    let share = |array: u64, lines: u64, b: u64| lay.array(array) + (b % n) * lines * LINE;
    let halo = (l / 8).max(1);
    let phases = u64::from(p.phases.max(1));
    let iters = u64::from(p.iterations);
    let seed = hash(p.seed ^ hash(t ^ 0xA5A5));
    for it in 0..iters {
        let phase = it * phases / iters.max(1);
        let b = (t + phase * u64::from(p.phase_shift)) % n;
        let (prev, next) = ((b + n - 1) % n, (b + 1) % n);
        let rseed = hash(seed ^ it);
        match p.kernel {
            // Domain decomposition with neighbour exchange (000 §3.1 SP; 001 §5 BT/SP): update
            // the own share, then read the facing halos of both neighbours.
            Kernel::Sp | Kernel::Bt => {
                out.push(Step::sweep(share(0, l, b), l, w, c));
                out.push(Step::Barrier);
                out.push(Step::sweep(
                    share(0, l, prev) + (l - halo) * LINE,
                    halo,
                    0.0,
                    c,
                ));
                out.push(Step::sweep(share(0, l, next), halo, 0.0, c));
                out.push(Step::Barrier);
            }
            // SSOR wavefronts: the share in `k` chunks; at each step of the lower (upper) sweep
            // a thread updates one chunk after reading the boundary its predecessor (successor)
            // just wrote. NPB LU pipelines its nz planes through the threads (class B 102, C
            // 162: about 2.5 planes per thread at 64 threads), so the pipeline fills and most
            // threads work at once: `k` = 2 chunks per thread (at least 4).
            Kernel::Lu => {
                let k = (2 * n).max(4);
                let chunk = (l / k).max(1);
                for dir in 0..2u64 {
                    for s in 0..(k + n - 1) {
                        let pos = if dir == 0 { b } else { n - 1 - b };
                        if s >= pos && s - pos < k {
                            let j = s - pos;
                            let (nb, j) = if dir == 0 {
                                (prev, j)
                            } else {
                                (next, k - 1 - j)
                            };
                            let upstream_edge = if dir == 0 { l - halo / k } else { 0 };
                            if (dir == 0 && b > 0) || (dir == 1 && b + 1 < n) {
                                out.push(Step::sweep(
                                    share(0, l, nb) + upstream_edge * LINE,
                                    (halo / k).max(1),
                                    0.0,
                                    c,
                                ));
                            }
                            out.push(Step::sweep(share(0, l, b) + j * chunk * LINE, chunk, w, c));
                        }
                        out.push(Step::Barrier);
                    }
                }
            }
            // Multigrid V-cycle: fine, coarser (L/8), coarsest (L/64) grid and back up, each
            // level an update and a halo exchange (the coarse levels share proportionally more).
            Kernel::Mg => {
                for &(arr, lines) in &[(0, l), (1, l / 8), (2, l / 64), (1, l / 8), (0, l)] {
                    let lines = lines.max(1);
                    let h = (lines / 8).max(1);
                    out.push(Step::sweep(share(arr, lines, b), lines, w, c));
                    out.push(Step::Barrier);
                    out.push(Step::sweep(
                        share(arr, lines, prev) + (lines - h) * LINE,
                        h,
                        0.0,
                        c,
                    ));
                    out.push(Step::sweep(share(arr, lines, next), h, 0.0, c));
                    out.push(Step::Barrier);
                }
            }
            // Unstructured adaptive mesh: update the own share, then gather from 3 other
            // shares chosen per phase (the mesh's neighbours change as it adapts).
            Kernel::Ua => {
                out.push(Step::sweep(share(0, l, b), l, w, c));
                out.push(Step::Barrier);
                let pseed = hash(p.seed ^ hash(b ^ (phase << 32)));
                for k in 0..3u64 {
                    let other = (b + 1 + hash(pseed ^ k) % (n.max(2) - 1)) % n;
                    out.push(Step::Random {
                        base: share(0, l, other),
                        lines: l,
                        count: (l / 12).max(1),
                        write: 0.0,
                        compute: c,
                        dependent: false,
                        seed: rseed ^ k,
                    });
                }
                out.push(Step::Barrier);
            }
            // Sparse matrix-vector product: stream the own rows of the matrix, gather x at
            // random column indices over the whole vector, write the own part of y; then update
            // the own part of x (vector operations, dot products).
            Kernel::Cg => {
                let v = (l / 8).max(1);
                out.push(Step::sweep(share(0, l, b), l, 0.0, c));
                out.push(Step::Random {
                    base: lay.array(1),
                    lines: n * v,
                    count: l / 2,
                    write: 0.0,
                    compute: c,
                    dependent: false,
                    seed: rseed,
                });
                out.push(Step::fill(share(2, v, b), v, c));
                out.push(Step::Barrier);
                out.push(Step::sweep(share(1, v, b), v, 1.0, c));
                out.push(Step::sweep(share(2, v, b), v, 0.0, c));
                out.push(Step::Barrier);
            }
            // 3-D FFT: FFTs along the local dimensions of the own slab, then the all-to-all
            // transpose (read chunk b of every share, write the own share of the other array),
            // then FFTs along the last dimension.
            Kernel::Ft => {
                let chunk = (l / n).max(1);
                out.push(Step::sweep(share(0, l, b), l, w, c));
                out.push(Step::Barrier);
                for j in 0..n {
                    let src = (b + j) % n;
                    out.push(Step::sweep(
                        share(0, l, src) + b * chunk * LINE,
                        chunk,
                        0.0,
                        c,
                    ));
                    out.push(Step::fill(share(1, l, b) + src * chunk * LINE, chunk, 0));
                }
                out.push(Step::Barrier);
                out.push(Step::sweep(share(1, l, b), l, w, c));
                out.push(Step::Barrier);
            }
            // Integer sort: read the own keys and scatter them into the shared buckets at random
            // (key ranks), then read the own bucket range.
            Kernel::Is => {
                out.push(Step::sweep(share(0, l, b), l, 0.0, c));
                out.push(Step::Random {
                    base: lay.array(1),
                    lines: n * l,
                    count: l / 2,
                    write: 1.0,
                    compute: c,
                    dependent: false,
                    seed: rseed,
                });
                out.push(Step::Barrier);
                out.push(Step::sweep(share(1, l, b), l, 0.0, c));
                out.push(Step::Barrier);
            }
            // Data cube: stream the own part of the input and update the own views (hash
            // tables) at random; at the end, merge by reading other threads' views.
            Kernel::Dc => {
                let v = (l / 2).max(1);
                out.push(Step::sweep(share(0, l, b), l, 0.0, c));
                out.push(Step::Random {
                    base: share(1, v, b),
                    lines: v,
                    count: l / 2,
                    write: w,
                    compute: c,
                    dependent: false,
                    seed: rseed,
                });
                if it + 1 == iters {
                    out.push(Step::Barrier);
                    out.push(Step::sweep(share(1, v, next), v / 4, 0.0, c));
                }
                out.push(Step::Barrier);
            }
            // Embarrassingly parallel: long compute on a small private buffer, one reduction.
            Kernel::Ep => {
                out.push(Step::Compute(u64::from(c) * l));
                out.push(Step::sweep(share(0, l, b), l, w, 0));
                if it + 1 == iters {
                    out.push(Step::Barrier);
                }
            }
            // Streamcluster: read the own points (distance computations, compute-heavy), read the
            // shared centres, write the own assignments; a barrier per pass.
            Kernel::Streamcluster => {
                out.push(Step::sweep(share(0, l, b), l, 0.0, c));
                out.push(Step::Random {
                    base: lay.array(1),
                    lines: 4 * n,
                    count: l / 4,
                    write: 0.0,
                    compute: c,
                    dependent: false,
                    seed: rseed,
                });
                out.push(Step::fill(share(2, (l / 16).max(1), b), (l / 16).max(1), 0));
                out.push(Step::Barrier);
                if t == 0 {
                    out.push(Step::fill(lay.array(1), 4 * n, 0));
                }
                out.push(Step::Barrier);
            }
            // Canneal: random pointer chasing over the whole netlist, a fraction of swaps.
            Kernel::Canneal => {
                out.push(Step::Random {
                    base: lay.array(0),
                    lines: n * l,
                    count: l / 2,
                    write: w,
                    compute: c,
                    dependent: true,
                    seed: rseed,
                });
                out.push(Step::Barrier);
            }
            // Pipelines: stages of about n / S threads; items (L lines each) move from stage to
            // stage through buffers and queues (see `pipeline`), all in the first round.
            Kernel::Dedup | Kernel::Ferret => {
                if it == 0 {
                    pipeline(p, n, t, lay, seed, out);
                }
            }
            // Facesim: compute-heavy update of the own part of the mesh, then forces on the
            // shared boundary nodes of both neighbours, read and written.
            Kernel::Facesim => {
                out.push(Step::sweep(share(0, l, b), l, w, c));
                out.push(Step::Barrier);
                out.push(Step::sweep(
                    share(0, l, prev) + (l - halo) * LINE,
                    halo,
                    0.5,
                    c,
                ));
                out.push(Step::sweep(share(0, l, next), halo, 0.5, c));
                out.push(Step::Barrier);
            }
            // Fluidanimate: per frame, two sub-steps (densities, forces) that update the own
            // cells and the border cells of the neighbours (under locks: read and written).
            Kernel::Fluidanimate => {
                let h = (l / 16).max(1);
                for _ in 0..2 {
                    out.push(Step::sweep(share(0, l, b), l, w, c));
                    out.push(Step::sweep(share(0, l, prev) + (l - h) * LINE, h, 1.0, c));
                    out.push(Step::sweep(share(0, l, next), h, 1.0, c));
                    out.push(Step::Barrier);
                }
            }
            // x264: frame-parallel; thread t encodes one frame per round, motion-searching the
            // frame thread t - 1 encoded in the previous round, and writes its own frame.
            Kernel::X264 => {
                let (cur, refa) = (it % 2, (it + 1) % 2);
                if it > 0 {
                    out.push(Step::Random {
                        base: share(refa, l, prev),
                        lines: l,
                        count: l / 2,
                        write: 0.0,
                        compute: c,
                        dependent: false,
                        seed: rseed,
                    });
                }
                out.push(Step::sweep(share(cur, l, b), l, w, c));
                out.push(Step::Barrier);
            }
            // Replayed by `thread_steps` before any generator runs.
            Kernel::Trace => {}
        }
    }
}

/// Dedup (3 stages: chunking, deduplication with a global hash table, compression) and ferret (4
/// stages: segmentation, feature extraction, index search in a shared database, ranking), as
/// PARSEC runs them: each stage's threads take items from a queue, process them, and push the
/// result into the next stage's queue (000 §5.2; 002 §2.4.2: producer-consumer sharing, dynamic).
///
/// Stage s has threads `ceil(s n / S) ..` (S = min(stages, n)); stage 0 makes `size(0) x
/// iterations` items, and item i is handled in stage s by its thread `i mod size(s)`. Handing
/// item i from stage s to s + 1: the producer writes the item's buffer (array 1 + s, slot
/// `i mod 4n`) and posts flag `s * items + i`; the consumer waits for that flag, then reads the
/// buffer, so the sharing goes from whichever producer to whichever consumer, when the item is
/// ready, with no barrier. Queues are unbounded (a fast producer runs ahead; slots are reused
/// after 4n items).
fn pipeline(p: &Program, n: u64, t: u64, lay: Layout, seed: u64, out: &mut Vec<Step>) {
    let l = p.lines;
    let (c, w) = (p.compute_cycles, p.write_fraction);
    let stages: u64 = if p.kernel == Kernel::Dedup { 3 } else { 4 };
    let stages = stages.min(n).max(1);
    let first = |s: u64| (s * n).div_ceil(stages);
    let size = |s: u64| first(s + 1) - first(s);
    let stage = (t * stages / n).min(stages - 1);
    let k = t - first(stage);
    let items = size(0) * u64::from(p.iterations);
    let slot = |s: u64, i: u64| lay.array(1 + s) + (i % (4 * n)) * l * LINE;
    // The last stage of the kernel, whatever S is, searches or updates the shared table.
    let table = match (p.kernel, stage) {
        (Kernel::Dedup, 1) => Some(0.5),
        (Kernel::Ferret, 2) => Some(0.0),
        _ => None,
    };
    let mut i = k;
    while i < items {
        if stage == 0 {
            out.push(Step::sweep(lay.array(0) + (i % n) * l * LINE, l, 0.0, c));
        } else {
            out.push(Step::Wait((stage - 1) * items + i));
            out.push(Step::sweep(slot(stage - 1, i), l, 0.0, c));
        }
        if let Some(tw) = table {
            out.push(Step::Random {
                base: lay.array(5),
                lines: n * l,
                count: l / 2,
                write: tw * w.max(0.1),
                compute: c,
                dependent: p.kernel == Kernel::Ferret,
                seed: hash(seed ^ i),
            });
        }
        if stage + 1 < stages {
            out.push(Step::fill(slot(stage, i), l, 0));
            out.push(Step::Post(stage * items + i));
        }
        i += size(stage);
    }
    out.push(Step::Barrier);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn steps_bound_covers_every_kernel() {
        for name in crate::catalog::names() {
            let w = crate::catalog::load(name).unwrap();
            for base in &w.programs {
                for n in [1u32, 2, 3, 5, 8, 17] {
                    for iterations in [1u32, 2, 7] {
                        for init in [Init::Master, Init::Parallel] {
                            let mut p = base.clone();
                            p.threads = n;
                            p.iterations = iterations;
                            p.init = init;
                            for q in &mut p.then {
                                q.iterations = iterations;
                            }
                            let bound = steps_bound(&p, u64::from(n));
                            let most = (0..n)
                                .map(|t| thread_steps(&p, n, t).len() as u64)
                                .max()
                                .unwrap();
                            assert!(
                                most <= bound,
                                "{name} n={n} it={iterations}: {most} > {bound}"
                            );
                            // Tight enough not to refuse sane runs: within 12 x the real count.
                            assert!(
                                bound <= 12 * most.max(1) + 8,
                                "{name} n={n}: {bound} vs {most}"
                            );
                        }
                    }
                }
            }
        }
    }
}
