//! The building blocks of every generator: a thread's program is a short list of [`Step`]s
//! (sweeps over a range of lines, random accesses in a range, compute, barriers) that [`Ops`]
//! unrolls lazily into the simulator's [`Op`]s, one at a time.

use numaff_machine::rng::hash;
use numaff_sim::{Access, Op};

/// Bytes per cache line; addresses are generated line by line.
pub const LINE: u64 = 64;

/// One step of a thread's program.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Every `stride`-th line of `[base, base + lines * 64)` in order: a load of each (unless
    /// `write_only`), and a store to a fraction `write` of them (read-modify-write), each access
    /// after `compute` cycles.
    Sweep {
        /// First byte.
        base: u64,
        /// Lines in the range.
        lines: u64,
        /// Distance between visited lines, in lines (1 = every line).
        stride: u64,
        /// Fraction of visited lines also written.
        write: f64,
        /// Only stores (initialisation, output buffers).
        write_only: bool,
        /// Compute cycles before each access.
        compute: u32,
    },
    /// `count` accesses to uniformly random lines of `[base, base + lines * 64)` (irregular
    /// gathers, hash tables, pointer chasing when `dependent`), a fraction `write` of them stores.
    Random {
        /// First byte.
        base: u64,
        /// Lines in the range.
        lines: u64,
        /// Accesses.
        count: u64,
        /// Fraction of stores.
        write: f64,
        /// Compute cycles before each access.
        compute: u32,
        /// Each address depends on the previous load (pointer chase).
        dependent: bool,
        /// Seed of the address sequence.
        seed: u64,
    },
    /// Compute only, cycles.
    Compute(u64),
    /// Recorded accesses replayed in order ([`crate::replay`]).
    Replay(std::sync::Arc<[crate::replay::Replayed]>),
    /// Hand an item on: set the process's flag (`Op::Post`).
    Post(u64),
    /// Take an item: wait for the process's flag (`Op::Wait`).
    Wait(u64),
    /// Wait for every thread of the process.
    Barrier,
}

impl Step {
    /// A read(-modify-write) sweep over every line.
    pub fn sweep(base: u64, lines: u64, write: f64, compute: u32) -> Step {
        Step::Sweep {
            base,
            lines,
            stride: 1,
            write,
            write_only: false,
            compute,
        }
    }

    /// Stores to every line (an output buffer).
    pub fn fill(base: u64, lines: u64, compute: u32) -> Step {
        Step::Sweep {
            base,
            lines,
            stride: 1,
            write: 1.0,
            write_only: true,
            compute,
        }
    }

    /// Initialisation: a store to one line in 64 (one per 4 KiB page: the first touch is what
    /// places a page; a full pass would dominate the small default sizes).
    pub fn init(base: u64, lines: u64) -> Step {
        Step::Sweep {
            base,
            lines,
            stride: 64,
            write: 1.0,
            write_only: true,
            compute: 0,
        }
    }

    /// Memory accesses this step issues.
    pub fn accesses(&self) -> u64 {
        match *self {
            Step::Sweep {
                lines,
                stride,
                write,
                write_only,
                ..
            } => {
                let visited = lines.div_ceil(stride.max(1));
                if write_only {
                    visited
                } else {
                    visited + writes_among(visited, write)
                }
            }
            Step::Random { count, .. } => count,
            Step::Replay(ref r) => r.len() as u64,
            Step::Compute(_) | Step::Barrier | Step::Post(_) | Step::Wait(_) => 0,
        }
    }
}

/// How many of the first `n` visited lines a write fraction `w` writes: `floor(n * w)`.
///
/// Without a call of libm's `floor` (it is hot): the float-to-integer `as` cast truncates toward
/// zero, saturates at 0 and `u64::MAX` and maps NaN to 0. For `x >= 0` truncation is `floor`,
/// and `floor(x) as u64` saturates exactly when `x` does (`floor(x) >= 2^64` if and only if
/// `x >= 2^64`, 2^64 being an integer), so `x as u64 == x.floor() as u64` for every `x` the
/// clamp can give (`n * w` with `w` in `[0, 1]`, or NaN when `w` is NaN): the same count always.
fn writes_among(n: u64, w: f64) -> u64 {
    (n as f64 * w.clamp(0.0, 1.0)) as u64
}

/// Whether the `i`-th visited line is written under write fraction `w`: spread evenly (the
/// `i`-th line is written when the running count of writes goes up), deterministic.
///
/// The definition is `floor((i + 1) w) > floor(i w)` in `f64`; this compares the truncations
/// instead, sparing libm's `floor` on the hot path. Exact: both products are computed as the
/// definition computes them (same roundings), both are `>= 0` or NaN (`w` clamped to `[0, 1]`; a NaN `w`
/// stays NaN, and then both forms say false: NaN `>` NaN and 0 `>` 0), and for `0 <= x < 2^64`
/// the cast `x as u64` is exactly `floor(x)` (truncation toward zero, and `floor(x) < 2^64` is
/// representable in `u64`). Both products are below 2^64 whenever `i < 2^64 - 2^11` (then
/// `(i + 1) as f64 <= 2^64 - 2^11` and `w <= 1`), i.e. for every index a run can reach (a
/// sweep or random step of 2^63 accesses would run for centuries). A unit test compares the two
/// forms over many `i` and `w`.
///
/// Below 2^62 the conversions go through `i64` (on x86-64, `u64` to `f64` and back is a dozen
/// instructions each way, `i64` one or two): the same integers convert to the same doubles, and
/// a product in `[0, 2^62]` or NaN truncates to the same count as `i64` as it does as `u64`.
#[inline]
fn writes(i: u64, w: f64) -> bool {
    let w = w.clamp(0.0, 1.0);
    if i < 1 << 62 {
        let (a, b) = (i as i64 + 1, i as i64);
        return (a as f64 * w) as i64 > (b as f64 * w) as i64;
    }
    ((i + 1) as f64 * w) as u64 > (i as f64 * w) as u64
}

/// The `i`-th access of a `Step::Random` whose address stream is at `state` (after `hash`).
#[inline(always)]
fn random_access(
    state: u64,
    base: u64,
    lines: u64,
    i: u64,
    write: f64,
    compute: u32,
    dependent: bool,
) -> Access {
    let line = ((u128::from(state) * u128::from(lines)) >> 64) as u64;
    let a = base + line * LINE;
    let acc = if writes(i, write) {
        Access::write(a)
    } else {
        Access::read(a)
    };
    Access {
        dependent,
        ..acc.after(compute)
    }
}

/// A thread's op stream: its steps, unrolled lazily.
#[derive(Debug, Clone)]
pub struct Ops {
    steps: Vec<Step>,
    at: usize,
    i: u64,
    state: u64,
    pending: Option<Op>,
}

impl Ops {
    /// The stream of these steps.
    pub fn new(steps: Vec<Step>) -> Self {
        Ops {
            steps,
            at: 0,
            i: 0,
            state: 0,
            pending: None,
        }
    }

    /// The steps.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }
}

impl Iterator for Ops {
    type Item = Op;

    // Inlined into the simulator's batch loop (`numaff_sim::OpSource::fill`).
    #[inline]
    fn next(&mut self) -> Option<Op> {
        if let Some(op) = self.pending.take() {
            return Some(op);
        }
        loop {
            let step = self.steps.get(self.at)?;
            let i = self.i;
            match *step {
                Step::Replay(ref r) => {
                    let Some(x) = r.get(i as usize) else {
                        self.at += 1;
                        self.i = 0;
                        continue;
                    };
                    self.i += 1;
                    let acc = if x.write {
                        Access::write(x.vaddr)
                    } else {
                        Access::read(x.vaddr)
                    };
                    if x.gap_cycles == 0 {
                        return Some(Op::Access(acc));
                    }
                    self.pending = Some(Op::Access(acc));
                    return Some(Op::Compute(x.gap_cycles));
                }
                Step::Barrier => {
                    self.at += 1;
                    self.i = 0;
                    return Some(Op::Barrier);
                }
                Step::Compute(c) => {
                    self.at += 1;
                    self.i = 0;
                    return Some(Op::Compute(c));
                }
                Step::Post(id) => {
                    self.at += 1;
                    self.i = 0;
                    return Some(Op::Post(id));
                }
                Step::Wait(id) => {
                    self.at += 1;
                    self.i = 0;
                    return Some(Op::Wait(id));
                }
                Step::Sweep {
                    base,
                    lines,
                    stride,
                    write,
                    write_only,
                    compute,
                } => {
                    let stride = stride.max(1);
                    if i * stride >= lines {
                        self.at += 1;
                        self.i = 0;
                        continue;
                    }
                    self.i += 1;
                    let a = base + i * stride * LINE;
                    if write_only {
                        return Some(Op::Access(Access::write(a).after(compute)));
                    }
                    if writes(i, write) {
                        self.pending = Some(Op::Access(Access::write(a)));
                    }
                    return Some(Op::Access(Access::read(a).after(compute)));
                }
                Step::Random {
                    base,
                    lines,
                    count,
                    write,
                    compute,
                    dependent,
                    seed,
                } => {
                    if i >= count || lines == 0 {
                        self.at += 1;
                        self.i = 0;
                        continue;
                    }
                    if i == 0 {
                        self.state = hash(seed);
                    }
                    self.i += 1;
                    self.state = hash(self.state);
                    let acc = random_access(self.state, base, lines, i, write, compute, dependent);
                    return Some(Op::Access(acc));
                }
            }
        }
    }
}

// Once its steps are done it stays done (`steps.get` keeps returning None).
impl std::iter::FusedIterator for Ops {}

impl Ops {
    /// `OpSource::fill` for these steps ([`Batched`]): the ops `next` would give, in order, a
    /// run of a sweep's or a random step's accesses at a time in a loop of its own (cheaper than
    /// one `next` per op, which matches the step and carries a pending write each time). Every
    /// other op, and whatever does not fit in `buf`, goes through `next`.
    pub fn fill_ops(&mut self, buf: &mut [Op]) -> usize {
        let mut n = 0;
        while n < buf.len() {
            if self.pending.is_none() {
                n += self.fill_run(&mut buf[n..]);
                if n == buf.len() {
                    break;
                }
            }
            match self.next() {
                Some(op) => buf[n] = op,
                None => break,
            }
            n += 1;
        }
        n
    }

    /// The ops of the current step's next accesses that fit whole in `buf` (a sweep's line
    /// read and, when `writes` says so, its store take two slots): those `next` would give.
    /// Returns how many; 0 when the step is not a sweep or a random step, or the step starts or
    /// ends here (`next` does that).
    #[inline]
    fn fill_run(&mut self, buf: &mut [Op]) -> usize {
        let Some(step) = self.steps.get(self.at) else {
            return 0;
        };
        let mut i = self.i;
        let mut n = 0;
        match *step {
            Step::Sweep {
                base,
                lines,
                stride,
                write,
                write_only,
                compute,
            } => {
                let stride = stride.max(1);
                // Lines left to visit: those with `i * stride < lines`.
                let left = lines.div_ceil(stride).saturating_sub(i);
                if write_only {
                    let k = (buf.len() as u64).min(left) as usize;
                    for slot in &mut buf[..k] {
                        *slot = Op::Access(Access::write(base + i * stride * LINE).after(compute));
                        i += 1;
                    }
                    n = k;
                } else if i < 1 << 61 {
                    // `writes(i, w)` carried over the run: the truncated product of one line is
                    // the next line's `b` (the same products, so the same answers).
                    let w = write.clamp(0.0, 1.0);
                    let end = i.saturating_add(left);
                    let mut below = (i as i64 as f64 * w) as i64;
                    while n + 2 <= buf.len() && i < end && i < 1 << 61 {
                        let a = base + i * stride * LINE;
                        buf[n] = Op::Access(Access::read(a).after(compute));
                        let upto = ((i as i64 + 1) as f64 * w) as i64;
                        let written = upto > below;
                        below = upto;
                        if written {
                            buf[n + 1] = Op::Access(Access::write(a));
                        }
                        n += 1 + usize::from(written);
                        i += 1;
                    }
                }
            }
            Step::Random {
                base,
                lines,
                count,
                write,
                compute,
                dependent,
                seed: _,
            } => {
                // The first access seeds the state (`next`); a step with no lines ends there.
                if i == 0 || lines == 0 {
                    return 0;
                }
                let k = (buf.len() as u64).min(count.saturating_sub(i)) as usize;
                let mut state = self.state;
                for slot in &mut buf[..k] {
                    state = hash(state);
                    let acc = random_access(state, base, lines, i, write, compute, dependent);
                    *slot = Op::Access(acc);
                    i += 1;
                }
                self.state = state;
                n = k;
            }
            _ => {}
        }
        self.i = i;
        n
    }
}

/// A thread's [`Ops`] as the simulator's [`numaff_sim::OpSource`]: batches from
/// [`Ops::fill_ops`] instead of one `next` per op.
#[derive(Debug, Clone)]
pub struct Batched(pub Ops);

impl numaff_sim::OpSource for Batched {
    fn fill(&mut self, buf: &mut [Op]) -> usize {
        self.0.fill_ops(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definitions of `writes` and `writes_among`, with libm's `floor`.
    fn writes_floor(i: u64, w: f64) -> bool {
        let w = w.clamp(0.0, 1.0);
        ((i + 1) as f64 * w).floor() > (i as f64 * w).floor()
    }

    fn writes_among_floor(n: u64, w: f64) -> u64 {
        (n as f64 * w.clamp(0.0, 1.0)).floor() as u64
    }

    #[test]
    fn writes_without_floor_match_the_f64_floor_formula() {
        // Awkward fractions (thirds, sevenths, 0.1, values next to 0, 1/2 and 1), the ends,
        // values outside [0, 1] (clamped), infinities and NaN.
        let mut ws = vec![
            0.0,
            -0.0,
            1.0,
            0.5,
            0.25,
            0.1,
            0.2,
            0.3,
            1.0 / 3.0,
            2.0 / 3.0,
            1.0 / 7.0,
            0.999_999_999_999,
            1e-300,
            f64::MIN_POSITIVE,
            5e-324,
            -0.5,
            1.5,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::from_bits(0.5f64.to_bits() - 1),
            f64::from_bits(0.5f64.to_bits() + 1),
            f64::from_bits(1.0f64.to_bits() - 1),
        ];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..200 {
            x = hash(x);
            ws.push((x >> 11) as f64 / (1u64 << 53) as f64);
        }
        // Small indices densely, then indices around powers of two (where `as f64` starts to
        // round) and large random ones.
        let mut is: Vec<u64> = (0..5000).collect();
        for b in 1..63 {
            let p = 1u64 << b;
            is.extend([p - 2, p - 1, p, p + 1]);
        }
        for _ in 0..2000 {
            x = hash(x);
            is.push(x >> (x % 40 + 1));
        }
        is.extend([
            u64::MAX / 2,
            (1 << 53) + 1,
            (1 << 53) + 3,
            (1 << 62) + 12345,
        ]);
        let mut checked = 0u64;
        let mut written = 0u64;
        for &w in &ws {
            for &i in &is {
                let f = writes_floor(i, w);
                assert_eq!(writes(i, w), f, "writes({i}, {w:e})");
                assert_eq!(
                    writes_among(i, w),
                    writes_among_floor(i, w),
                    "writes_among({i}, {w:e})"
                );
                checked += 1;
                written += u64::from(f);
            }
        }
        // The comparison covered both answers.
        assert!(written > 0 && written < checked, "{written} of {checked}");
        // w = 0 never writes, w = 1 always does.
        assert!((0..1000).all(|i| !writes(i, 0.0) && writes(i, 1.0)));
        assert_eq!(writes_among(1000, 1.0 / 3.0), 333);
    }

    /// What `Ops::fill_ops` gives with batches of the sizes `sizes` in turn, to the end.
    fn batched(steps: Vec<Step>, sizes: &[usize]) -> Vec<Op> {
        let mut ops = Ops::new(steps);
        let mut out = Vec::new();
        let mut buf = [Op::Compute(u64::MAX); 64];
        for &k in sizes.iter().cycle() {
            let n = ops.fill_ops(&mut buf[..k]);
            assert!(n <= k, "{n} ops in a batch of {k}");
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        // Ended for good, as the simulator expects.
        assert_eq!(ops.fill_ops(&mut buf), 0);
        out
    }

    #[test]
    fn batched_ops_are_the_iterators_ops() {
        let steps = vec![
            Step::sweep(0x1000, 100, 0.25, 3),
            Step::sweep(0x9000, 37, 1.0 / 3.0, 0),
            Step::Barrier,
            Step::init(0x10_0000, 1000),
            Step::fill(0x30_0000, 45, 2),
            Step::Sweep {
                base: 0x40_0000,
                lines: 50,
                stride: 3,
                write: 0.7,
                write_only: false,
                compute: 1,
            },
            Step::Random {
                base: 0x20_0000,
                lines: 50,
                count: 77,
                write: 0.5,
                compute: 4,
                dependent: true,
                seed: 9,
            },
            Step::Random {
                base: 0x20_0000,
                lines: 0,
                count: 5,
                write: 0.5,
                compute: 0,
                dependent: false,
                seed: 1,
            },
            Step::Post(3),
            Step::Random {
                base: 0x50_0000,
                lines: 1 << 20,
                count: 300,
                write: 0.1,
                compute: 0,
                dependent: false,
                seed: 2,
            },
            Step::Wait(3),
            Step::sweep(0x1000, 0, 0.5, 0),
            Step::Compute(10),
            Step::sweep(0x1000, 64, 1.0, 0),
        ];
        let expected: Vec<Op> = Ops::new(steps.clone()).collect();
        assert!(expected.len() > 700, "{}", expected.len());
        for sizes in [
            &[1][..],
            &[2],
            &[3],
            &[32],
            &[64],
            &[1, 2, 3],
            &[5, 1, 31, 2],
        ] {
            assert_eq!(batched(steps.clone(), sizes), expected, "batches {sizes:?}");
        }
    }

    /// `Ops` promises `FusedIterator` (the simulator relies on no op after the first None).
    #[test]
    fn ops_stay_ended_after_their_last_op() {
        let mut ops = Ops::new(vec![Step::sweep(0x1000, 3, 0.5, 0), Step::Barrier]);
        assert_eq!(ops.by_ref().count(), 3 + 1 + 1);
        assert!((0..5).all(|_| ops.next().is_none()));
    }

    #[test]
    fn sweeps_and_randoms_issue_what_they_announce() {
        let steps = vec![
            Step::sweep(0x1000, 100, 0.25, 3),
            Step::Barrier,
            Step::init(0x10_0000, 1000),
            Step::Random {
                base: 0x20_0000,
                lines: 50,
                count: 77,
                write: 0.5,
                compute: 0,
                dependent: true,
                seed: 9,
            },
            Step::Compute(10),
        ];
        let announced: u64 = steps.iter().map(Step::accesses).sum();
        let ops: Vec<Op> = Ops::new(steps).collect();
        let accesses: Vec<Access> = ops
            .iter()
            .filter_map(|o| match o {
                Op::Access(a) => Some(*a),
                _ => None,
            })
            .collect();
        assert_eq!(accesses.len() as u64, announced);
        assert_eq!(accesses.len(), 125 + 16 + 77);
        assert_eq!(accesses.iter().take(125).filter(|a| a.write).count(), 25);
        assert!(accesses[125..141].iter().all(|a| a.write));
        assert!(accesses[141..]
            .iter()
            .all(|a| a.dependent && (0x20_0000..0x20_0000 + 50 * 64).contains(&a.vaddr)));
        assert_eq!(ops.iter().filter(|o| **o == Op::Barrier).count(), 1);
        assert_eq!(ops.last(), Some(&Op::Compute(10)));
    }
}
