//! Scheduling and OS emulation: the run loop that runs the PU furthest behind, run queues and time
//! slices, the Linux-like balancer's moves, and where the "os" thread policy starts threads.

use numaff_machine::Machine;

use super::{AnyGeom, Cx, Geom, P8Geom, P8W20Geom, Simulator, State};
use crate::config::OsMoves;
use crate::dir::{Form, FormKind, NarrowForm, PackedForm, WideForm};
use crate::rng;
use crate::stream::Op;
use numaff_machine::CpuSet;
use std::cmp::{Ordering, Reverse};
use std::collections::binary_heap::PeekMut;

impl Simulator {
    pub(super) fn enqueue(&mut self, ti: usize, p: usize) {
        self.pus[p].runq.push_back(ti);
        if !self.pus[p].in_heap {
            self.pus[p].in_heap = true;
            self.woke = true;
            // An idle PU's clock catches up with `now`, the end of the last `run_until` round (it
            // lags the running PUs within a round); a woken thread's `ready_at` holds it further.
            let c = self.pus[p].clock.max(self.now);
            self.pus[p].clock = c;
            self.pus[p].slice_end = c + self.cfg.slice_ns;
            self.heap.push(Reverse((c.to_bits(), p)));
        }
    }

    /// Simulates until every PU's clock has reached `limit` ns (or nothing is left to run).
    ///
    /// The heap orders the runnable PUs by clock (ties by index; clocks are `>= 0`, so their bits
    /// order as the values do): the PU furthest behind runs next, up to `quantum_ns` past the next
    /// one's clock, so that PUs interleave in simulated time. Each PU is in the heap at most once
    /// (`in_heap`), so the keys are distinct and any correct heap pops them in the same order. The
    /// PU that runs stays at the top while it runs instead of a pop and a push: the next clock is
    /// the smaller of the top's children (what `peek` would give after a `pop`), and its new key is
    /// written in place (`PeekMut`, one sift down). A PU that `run_pu` enqueues (a thread woken by
    /// a barrier or a post) may get above it meanwhile: then it is found and taken out (`retain`),
    /// as rarely as wake-ups happen.
    pub(crate) fn run_until(&mut self, limit: f64) {
        while let Some(&Reverse((bits, p))) = self.heap.peek() {
            let clock = f64::from_bits(bits);
            if clock >= limit {
                break;
            }
            if clock >= self.next_induced {
                self.induce_faults();
                continue;
            }
            if clock >= self.next_balance {
                self.os_balance();
                continue;
            }
            let below = self.heap.as_slice();
            let next = match (below.get(1), below.get(2)) {
                (Some(Reverse((a, _))), Some(Reverse((b, _)))) => f64::from_bits(*a.min(b)),
                (Some(Reverse((a, _))), None) => f64::from_bits(*a),
                _ => f64::INFINITY,
            };
            let horizon = (next + self.cfg.quantum_ns)
                .min(limit)
                .min(self.next_induced)
                .min(self.next_balance);
            self.run_pu(p, horizon);
            let keep = !self.pus[p].runq.is_empty();
            let key = Reverse((self.pus[p].clock.to_bits(), p));
            let on_top = self.heap.peek().is_some_and(|Reverse((_, q))| *q == p);
            if on_top {
                if let Some(mut top) = self.heap.peek_mut() {
                    if keep {
                        *top = key;
                    } else {
                        PeekMut::pop(top);
                    }
                }
            } else {
                self.heap.retain(|Reverse((_, q))| *q != p);
                if keep {
                    self.heap.push(key);
                }
            }
            if !keep {
                self.pus[p].in_heap = false;
            }
        }
        if limit.is_finite() {
            self.now = self.now.max(limit);
        } else {
            let end = self.threads.iter().map(|t| t.end).fold(self.now, f64::max);
            self.now = end;
        }
    }

    /// One round of the Linux-like balancer ([`crate::OsScheduler`]) at time `next_balance`.
    fn os_balance(&mut self) {
        let Some(cfg) = self.cfg.os_scheduler.clone() else {
            self.next_balance = f64::INFINITY;
            return;
        };
        let at = self.next_balance;
        self.next_balance += cfg.interval_ns.max(1) as f64;
        let live: Vec<usize> = (0..self.threads.len())
            .filter(|&t| {
                self.threads[t].state != State::Done && self.procs[self.threads[t].proc].start <= at
            })
            .collect();
        if live.is_empty() {
            if self.all_done() {
                self.next_balance = f64::INFINITY;
            }
            return;
        }
        let mut load = vec![0usize; self.pus.len()];
        for &t in &live {
            load[self.threads[t].pu] += 1;
        }
        let mut moved = vec![false; self.threads.len()];
        // Load balance: threads sharing a PU go to idle PUs, the nearest first (same last-level
        // cache, same node, then any), as CFS balances its sched domains from the smallest up.
        for &t in &live {
            let from = self.threads[t].pu;
            if load[from] > 1 {
                let idle: Vec<usize> = (0..self.pus.len()).filter(|&p| load[p] == 0).collect();
                let Some(nearest) = idle.iter().map(|&p| self.pu_distance(from, p)).min() else {
                    break;
                };
                let idle: Vec<usize> = idle
                    .into_iter()
                    .filter(|&p| self.pu_distance(from, p) == nearest)
                    .collect();
                let to = idle[self.rng.below(idle.len())];
                load[from] -= 1;
                load[to] += 1;
                self.relocate(t, to, at);
                moved[t] = true;
            }
        }
        // Occasional moves of balanced threads: a wake-up on an idle PU within reach.
        for &t in &live {
            if moved[t] || self.rng.unit() >= cfg.move_probability {
                continue;
            }
            let from = self.threads[t].pu;
            let idle: Vec<usize> = (0..self.pus.len())
                .filter(|&p| load[p] == 0)
                .filter(|&p| cfg.moves == OsMoves::Anywhere || self.pu_distance(from, p) == 0)
                .collect();
            if !idle.is_empty() {
                let to = idle[self.rng.below(idle.len())];
                load[from] -= 1;
                load[to] += 1;
                self.relocate(t, to, at);
            } else if cfg.moves == OsMoves::Anywhere {
                let others: Vec<usize> = live
                    .iter()
                    .copied()
                    .filter(|&o| !moved[o] && self.threads[o].pu != from)
                    .collect();
                if others.is_empty() {
                    continue;
                }
                let o = others[self.rng.below(others.len())];
                let to = self.threads[o].pu;
                self.relocate(t, to, at);
                self.relocate(o, from, at);
                moved[o] = true;
            } else {
                continue;
            }
            moved[t] = true;
        }
    }

    /// How far PU `b` is from PU `a` for the balancer: 0 when they share the last-level cache
    /// (the node, where the machine gives no caches), 1 on the same node, 2 elsewhere.
    fn pu_distance(&self, a: usize, b: usize) -> u8 {
        let (pa, pb) = (&self.pus[a], &self.pus[b]);
        match (pa.path.last(), pb.path.last()) {
            (Some(x), Some(y)) if x == y => 0,
            (None, None) if pa.node == pb.node => 0,
            _ if pa.node == pb.node => 1,
            _ => 2,
        }
    }

    /// Moves thread `ti` to PU `to` at time `at` (the balancer's moves): its outstanding accesses
    /// complete, it pays the migration cost, and its caches stay behind.
    fn relocate(&mut self, ti: usize, to: usize, at: f64) {
        let from = self.threads[ti].pu;
        if from == to {
            return;
        }
        let cost = self.cfg.thread_migration_ns;
        let th = &mut self.threads[ti];
        let drained = th.hot.window.drain(at);
        th.pu = to;
        th.migrations += 1;
        th.ready_at = th.ready_at.max(drained) + cost;
        th.allowed = CpuSet::new();
        th.allowed.insert(self.pus[to].cpu);
        self.stats.migrations += 1;
        self.stats.migration_cost += cost;
        if self.threads[ti].state == State::Ready {
            self.pus[from].runq.retain(|&x| x != ti);
            self.enqueue(ti, to);
        }
    }

    /// The thread to run next on PU `p`, handling time slices; None when its run queue is empty.
    fn pick(&mut self, p: usize) -> Option<usize> {
        let slice = self.cfg.slice_ns;
        let cs = self.cfg.context_switch_ns;
        let pu = &mut self.pus[p];
        let front = *pu.runq.front()?;
        if pu.runq.len() == 1 {
            // One thread (the common case, every ~4 accesses of a suite workload): what
            // the general steps below do for it, without the scans and the rotation by 0. Not
            // ready yet: the clock jumps to its `ready_at` (the fold's minimum, infinite for an
            // infinite or NaN `ready_at`, which no `<` picks).
            let r = self.threads[front].ready_at;
            if !matches!(
                r.partial_cmp(&pu.clock),
                Some(Ordering::Less | Ordering::Equal)
            ) {
                pu.clock = if r < f64::INFINITY { r } else { f64::INFINITY };
            }
            pu.slice_end = pu.clock + slice;
            return Some(front);
        }
        if pu.runq.len() > 1 && pu.clock >= pu.slice_end {
            let th = &mut self.threads[front];
            let drained = th.hot.window.drain(pu.clock);
            pu.clock = drained + cs;
            pu.runq.rotate_left(1);
            pu.slice_end = pu.clock + slice;
        } else if pu.runq.len() == 1 {
            pu.slice_end = pu.clock + slice;
        }
        let threads = &self.threads;
        let k = pu
            .runq
            .iter()
            .position(|&t| threads[t].ready_at <= pu.clock);
        match k {
            Some(k) => {
                pu.runq.rotate_left(k);
            }
            None => {
                let (k, at) = pu
                    .runq
                    .iter()
                    .enumerate()
                    .map(|(k, &t)| (k, threads[t].ready_at))
                    .fold((0, f64::INFINITY), |a, b| if b.1 < a.1 { b } else { a });
                pu.runq.rotate_left(k);
                pu.clock = at;
                pu.slice_end = at + slice;
            }
        }
        pu.runq.front().copied()
    }

    fn run_pu(&mut self, p: usize, horizon: f64) {
        // The directory's form, matched once here instead of on every lookup (`dir::Form`).
        // And the first two levels' geometry on a common-shape path (`Geom`, `Pu::geom`).
        match (self.dir.kind(), self.pus[p].geom) {
            (FormKind::Packed, 0) => self.run_pu_in::<PackedForm, AnyGeom>(p, horizon),
            (FormKind::Narrow, 0) => self.run_pu_in::<NarrowForm, AnyGeom>(p, horizon),
            (FormKind::Wide, 0) => self.run_pu_in::<WideForm, AnyGeom>(p, horizon),
            (FormKind::Packed, 1) => self.run_pu_in::<PackedForm, P8Geom>(p, horizon),
            (FormKind::Narrow, 1) => self.run_pu_in::<NarrowForm, P8Geom>(p, horizon),
            (FormKind::Wide, 1) => self.run_pu_in::<WideForm, P8Geom>(p, horizon),
            (FormKind::Packed, _) => self.run_pu_in::<PackedForm, P8W20Geom>(p, horizon),
            (FormKind::Narrow, _) => self.run_pu_in::<NarrowForm, P8W20Geom>(p, horizon),
            (FormKind::Wide, _) => self.run_pu_in::<WideForm, P8W20Geom>(p, horizon),
        }
    }

    /// `run_pu` with the directory's form `D` and the first two levels' geometry `G`.
    fn run_pu_in<D: Form, G: Geom>(&mut self, p: usize, horizon: f64) {
        // The horizon counts the PUs runnable now: when an op of this PU wakes others (a barrier
        // that completes, a post, a thread that ends), it stops after that op, and `run_until`
        // lets them catch up. Running on to the old horizon (infinite when it was the only PU left
        // running) would let the last thread to reach a barrier run its whole next phase ahead of
        // the threads it has just released (`a_barrier_releases_its_threads_in_time_order`).
        self.woke = false;
        loop {
            let Some(ti) = self.pick(p) else { return };
            let pi = self.threads[ti].proc;
            let pr = &self.procs[pi];
            let private = self.private_lines && pr.page_shift == 12;
            let cx = Cx {
                pi,
                armed: pr.armed > 0,
                private,
                dir_used: self.dir.len() > 0,
                ..self.pu_cx[p]
            };
            // The thread's hot state is `self.run` until this loop is left (`stop`).
            std::mem::swap(&mut self.run, &mut self.threads[ti].hot);
            // Run this thread until the horizon, its slice's end (when others wait), or it stops.
            // Only `pick` changes the slice's end. The PU's clock is `clock` while accesses run
            // (`step` takes and returns it), and written back before any other op and every exit.
            let shared = self.pus[p].runq.len() > 1;
            let slice_end = self.pus[p].slice_end;
            let mut clock = self.pus[p].clock;
            // Private lines on a `P8W20Geom` path: the fast path (`fast.rs`) while it applies.
            let mut fast = G::P8
                && G::W20
                && self.fast_path
                && cx.private
                && (!cx.dir_used || self.fast_on_directory)
                && !cx.armed
                && cx.p3.is_some();
            let limit = if shared { slice_end } else { f64::INFINITY };
            loop {
                // Only towards a far horizon: a run of a few accesses (PUs a quantum apart) costs
                // the loop's entry and exit more than it saves.
                if fast && horizon - clock > self.fast_min_run_ns {
                    (clock, fast) = self.run_fast::<D, G>(ti, &cx, clock, horizon, limit);
                }
                if clock > horizon {
                    self.pus[p].clock = clock;
                    self.stop(ti);
                    return;
                }
                if shared && clock >= slice_end {
                    self.pus[p].clock = clock;
                    break;
                }
                let op = self.next_op::<D, G>(&cx);
                if let Some(Op::Access(a)) = op {
                    clock = self.step::<D, G>(ti, &cx, a, clock);
                    continue;
                }
                self.pus[p].clock = clock;
                match op {
                    None => {
                        self.finish(ti, p);
                        break;
                    }
                    Some(Op::Compute(c)) => self.pus[p].clock += c as f64 * self.cycle_ns,
                    Some(Op::Barrier) => {
                        self.barrier(ti, p);
                        break;
                    }
                    Some(Op::Post(id)) => self.post(ti, p, id),
                    Some(Op::Wait(id)) => {
                        if self.wait(ti, p, id) {
                            break;
                        }
                    }
                    Some(Op::Access(_)) => {}
                }
                clock = self.pus[p].clock;
                if self.woke {
                    self.stop(ti);
                    return;
                }
            }
            self.stop(ti);
            if self.woke {
                return;
            }
        }
    }

    /// Gives the thread `ti` that `run_pu_in` ran its hot state back (`Simulator::run`).
    fn stop(&mut self, ti: usize) {
        std::mem::swap(&mut self.run, &mut self.threads[ti].hot);
    }

    pub(super) fn drain(&mut self, p: usize) -> f64 {
        let th = &mut *self.run;
        let t = th.window.drain(self.pus[p].clock);
        self.pus[p].clock = t;
        t
    }
}

/// Where a Linux-like scheduler starts `n` unpinned threads: spread for load balance (one thread
/// per core before any core gets a second, one per PU before any PU gets a second, as CFS's
/// fork/wake balancing fills idle cores first), but in an order that has nothing to do with which
/// threads share data: the cores are taken in a seeded random order. Deterministic in `seed`.
pub fn os_placement(machine: &Machine, n: usize, seed: u64) -> Vec<u32> {
    let mut cores: Vec<Vec<u32>> = machine
        .cores()
        .map(|(_, c)| c.pus.iter().collect::<Vec<u32>>())
        .filter(|p| !p.is_empty())
        .collect();
    if cores.is_empty() {
        cores = machine.pus().iter().map(|p| vec![p]).collect();
    }
    let mut rng = rng::seeded(seed ^ 0x05_5C4E_D000);
    rng.shuffle(&mut cores);
    let depth = cores.iter().map(Vec::len).max().unwrap_or(0);
    let order: Vec<u32> = (0..depth)
        .flat_map(|k| cores.iter().filter_map(move |c| c.get(k).copied()))
        .collect();
    if order.is_empty() {
        return Vec::new();
    }
    (0..n).map(|i| order[i % order.len()]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_over_cores_first_and_depends_on_the_seed() {
        let m = numaff_machine::catalog::load("laso-hpl").unwrap_or_else(|e| panic!("{e}"));
        let cores = m.core_count();
        let a = os_placement(&m, cores, 1);
        let mut seen: Vec<_> = a
            .iter()
            .map(|&p| m.cores().position(|(_, c)| c.pus.contains(p)))
            .collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), cores, "one thread per core");
        assert_eq!(a, os_placement(&m, cores, 1));
        assert_ne!(a, os_placement(&m, cores, 2));
    }
}
