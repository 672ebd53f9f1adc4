//! Synchronisation ops: a thread ending, `Op::Barrier`, and the flags of `Op::Post` and `Op::Wait`;
//! each blocks or wakes threads of its process.

use super::{Simulator, State};

impl Simulator {
    pub(super) fn finish(&mut self, ti: usize, p: usize) {
        let t = self.drain(p);
        let th = &mut self.threads[ti];
        th.end = t;
        th.state = State::Done;
        self.pus[p].runq.retain(|&x| x != ti);
        let pi = th.proc;
        self.procs[pi].live -= 1;
        self.check_barrier(pi);
    }

    pub(super) fn barrier(&mut self, ti: usize, p: usize) {
        let t = self.drain(p);
        self.threads[ti].state = State::Blocked;
        self.pus[p].runq.retain(|&x| x != ti);
        let pi = self.threads[ti].proc;
        let pr = &mut self.procs[pi];
        pr.barrier_time = pr.barrier_time.max(t);
        pr.waiting.push(ti);
        self.check_barrier(pi);
    }

    /// `Op::Post`: the flag is set when the thread's outstanding accesses are done (the item's
    /// stores reached the caches); threads waiting for it resume then.
    pub(super) fn post(&mut self, ti: usize, p: usize, id: u64) {
        let t = self.drain(p);
        let pi = self.threads[ti].proc;
        let pr = &mut self.procs[pi];
        let set = *pr.flags.entry(id).or_insert(t);
        let Some(waiters) = pr.flag_waiters.remove(&id) else {
            return;
        };
        for w in waiters {
            let th = &mut self.threads[w];
            th.state = State::Ready;
            th.ready_at = th.ready_at.max(set);
            let q = th.pu;
            self.enqueue(w, q);
        }
    }

    /// `Op::Wait`: true when the thread blocks (the flag is not set yet).
    pub(super) fn wait(&mut self, ti: usize, p: usize, id: u64) -> bool {
        let pi = self.threads[ti].proc;
        if let Some(&set) = self.procs[pi].flags.get(&id) {
            let c = &mut self.pus[p].clock;
            *c = c.max(set);
            return false;
        }
        let t = self.drain(p);
        let th = &mut self.threads[ti];
        th.state = State::Blocked;
        th.ready_at = t;
        self.pus[p].runq.retain(|&x| x != ti);
        self.procs[pi].flag_waiters.entry(id).or_default().push(ti);
        true
    }

    fn check_barrier(&mut self, pi: usize) {
        let pr = &mut self.procs[pi];
        if pr.waiting.is_empty() || pr.waiting.len() < pr.live {
            return;
        }
        let t = pr.barrier_time;
        let waiting = std::mem::take(&mut pr.waiting);
        pr.barrier_time = 0.0;
        for ti in waiting {
            let th = &mut self.threads[ti];
            th.state = State::Ready;
            th.ready_at = t;
            let p = th.pu;
            self.enqueue(ti, p);
        }
    }
}
