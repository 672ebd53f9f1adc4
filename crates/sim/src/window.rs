//! A simulated thread's outstanding accesses: the completion times of its last `mlp` accesses in
//! a ring, so that an access waits for the oldest when `mlp` are out (in-order retirement).
//!
//! A ring of `mlp` slots, never-written ones at minus infinity, gives the oldest of a full window
//! and "no wait" for a window not yet full with one load, where a `VecDeque` would check
//! its length and capacity on every access.

use crate::fabric::later;

/// The completion times of a thread's last accesses, at most `mlp` of them.
pub(crate) struct Window {
    times: Box<[f64]>,
    /// The slot of the oldest time, which the next access replaces.
    next: usize,
    /// Times recorded since the window was last empty; the first `min(filled, mlp)` slots hold
    /// them (a drain starts the ring at slot 0), so a drain reads only those.
    filled: usize,
}

impl Window {
    /// An empty window of `mlp` accesses (at least one).
    pub(crate) fn new(mlp: usize) -> Self {
        Window {
            times: vec![f64::NEG_INFINITY; mlp.max(1)].into_boxed_slice(),
            next: 0,
            filled: 0,
        }
    }

    /// When the oldest of `mlp` outstanding accesses completes; minus infinity while fewer than
    /// `mlp` are out.
    #[inline(always)]
    pub(crate) fn oldest(&self) -> f64 {
        self.times[self.next]
    }

    /// Records an access completing at `done` in place of the oldest.
    #[inline(always)]
    pub(crate) fn push(&mut self, done: f64) {
        self.times[self.next] = done;
        self.filled += 1;
        self.next += 1;
        if self.next == self.times.len() {
            self.next = 0;
        }
    }

    /// Waits for every outstanding access: the latest of `at` and their completion times. The
    /// window is empty after.
    pub(crate) fn drain(&mut self, at: f64) -> f64 {
        let held = self.filled.min(self.times.len());
        let held = &mut self.times[..held];
        let t = held.iter().copied().fold(at, later);
        held.fill(f64::NEG_INFINITY);
        self.next = 0;
        self.filled = 0;
        t
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;

    /// The ring against a plain deque: pop the oldest when `mlp` are out, push each
    /// completion, drain now and then; the same waits and drains.
    #[test]
    fn the_ring_waits_and_drains_as_a_deque_does() {
        for mlp in [1, 2, 3, 10] {
            let mut ring = Window::new(mlp);
            let mut deque: VecDeque<f64> = VecDeque::new();
            let mut rng = numaff_machine::rng::SplitMix64::new(0);
            let mut t = 0.0f64;
            for i in 0..5_000 {
                let x = rng.next_u64();
                let mut wait = t;
                if deque.len() >= mlp {
                    wait = wait.max(deque.pop_front().expect("full"));
                }
                assert_eq!(t.max(ring.oldest()), wait, "mlp {mlp}, access {i}");
                t = wait + (x % 7) as f64;
                let done = t + (x % 300) as f64;
                if x.is_multiple_of(97) {
                    let drained = deque.iter().copied().fold(t, f64::max);
                    deque.clear();
                    assert_eq!(ring.drain(t), drained, "mlp {mlp}, drain at {i}");
                }
                deque.push_back(done);
                ring.push(done);
            }
        }
    }
}
