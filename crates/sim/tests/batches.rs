//! A thread's ops are taken from its source in batches (`OpSource::fill`): every op runs once
//! whatever the batch boundaries, and a source filling part of a batch has not ended.

#![allow(clippy::unwrap_used)]

use numaff_machine::catalog;
use numaff_sim::{Access, DataPolicy, Op, ProcessSpec, Report, SimConfig, Simulator, ThreadSpec};

/// Two threads' ops: random-ish loads and stores with compute, a barrier, a flag handed over.
fn batch_test_ops(t: u64) -> Vec<Op> {
    let mut rng = numaff_machine::rng::SplitMix64::new(t);
    let mut ops = Vec::new();
    for phase in 0..3u64 {
        for i in 0..(97 + 13 * t) {
            let x = rng.next_u64();
            let a = 0x2000_0000 + (x % (1 << 20)) / 64 * 64;
            let acc = if x.is_multiple_of(5) {
                Access::write(a)
            } else {
                Access::read(a)
            };
            ops.push(Op::Access(acc.after((i % 4) as u32)));
            if i.is_multiple_of(29) {
                ops.push(Op::Compute(7 + phase));
            }
        }
        ops.push(if t == 0 {
            Op::Post(phase)
        } else {
            Op::Wait(phase)
        });
        ops.push(Op::Barrier);
    }
    ops
}

/// An `OpSource` that hands over at most 1, 2 or 3 ops per call, in turn.
struct Ragged {
    ops: Vec<Op>,
    at: usize,
    calls: usize,
}

impl numaff_sim::OpSource for Ragged {
    fn fill(&mut self, buf: &mut [Op]) -> usize {
        self.calls += 1;
        let n = (1 + self.calls % 3)
            .min(buf.len())
            .min(self.ops.len() - self.at);
        buf[..n].copy_from_slice(&self.ops[self.at..self.at + n]);
        self.at += n;
        n
    }
}

fn batch_test_run(ragged: bool) -> Report {
    let m = catalog::load("laso-hpl").unwrap();
    let mut spec = ProcessSpec::new("batches", DataPolicy::FirstTouch);
    for t in 0..2u64 {
        let ops = batch_test_ops(t);
        let thread = if ragged {
            let source = Ragged {
                ops,
                at: 0,
                calls: 0,
            };
            ThreadSpec::from_source(format!("t{t}"), t as u32 * 12, source)
        } else {
            ThreadSpec::new(format!("t{t}"), t as u32 * 12, ops.into_iter())
        };
        spec = spec.thread(thread);
    }
    Simulator::new(&m, SimConfig::default()).spawn_and_run(spec)
}

/// The simulator takes ops in batches (`OpSource`): a source that fills only part of each batch
/// is not taken to have ended, and gives the figures of the same ops from an iterator.
#[test]
fn a_source_filling_a_few_ops_per_call_gives_the_iterators_figures() {
    let whole = batch_test_run(false);
    let ragged = batch_test_run(true);
    let expected: u64 = (0..2).map(|t| (97 + 13 * t) * 3).sum();
    assert_eq!(whole.accesses, expected);
    assert_eq!(ragged, whole);
}

/// Every op of a thread runs once, whatever its count against the batch size (empty, one,
/// around a batch of 32 and two), and a thread ends at its iterator's first `None` even when
/// the iterator would go on after it (it is fused).
#[test]
fn every_op_runs_once_across_batches_and_a_thread_ends_at_the_first_none() {
    let m = catalog::load("laso-hpl").unwrap();
    for n in [0u64, 1, 31, 32, 33, 63, 64, 65, 1000] {
        let ops = (0..n).map(|i| Op::Access(Access::read(0x3000_0000 + i * 64)));
        let spec =
            ProcessSpec::new("n", DataPolicy::FirstTouch).thread(ThreadSpec::new("t", 0, ops));
        let r = Simulator::new(&m, SimConfig::default()).spawn_and_run(spec);
        assert_eq!(r.accesses, n, "{n} ops");
        assert_eq!(r.threads[0].accesses, n, "{n} ops");
    }
    // Yields 40 accesses, then None, then 40 more, then None for good.
    let mut i = 0u64;
    let unfused = std::iter::from_fn(move || {
        i += 1;
        (i != 41 && i <= 81).then(|| Op::Access(Access::read(0x3000_0000 + i * 64)))
    });
    let spec = ProcessSpec::new("unfused", DataPolicy::FirstTouch)
        .thread(ThreadSpec::new("t", 0, unfused));
    let r = Simulator::new(&m, SimConfig::default()).spawn_and_run(spec);
    assert_eq!(r.accesses, 40);
}
