//! The simulator as an [`Environment`]: the engine observes and acts on a simulated machine exactly
//! as it does on Linux; `advance` simulates instead of sleeping.

use numaff_engine::{EnvError, Environment, PageMove, Sample, Task, TaskId, ThreadMove};
use numaff_machine::{CpuSet, Machine};

use super::{Simulator, State};
use crate::fabric::LINE;

impl Environment for Simulator {
    fn machine(&self) -> &Machine {
        &self.machine
    }

    fn now_ns(&self) -> u64 {
        self.now as u64
    }

    fn advance(&mut self, ns: u64) -> Result<u64, EnvError> {
        let limit = self.now + ns as f64;
        self.run_until(limit);
        Ok(self.now as u64)
    }

    fn finished(&self) -> bool {
        self.all_done()
    }

    fn tasks(&mut self) -> Result<Vec<Task>, EnvError> {
        Ok(self.task_list())
    }

    /// The samples of the samplers the `SimConfig` turned on: none by default (an online policy
    /// sets `first_touch_samples`, `hw_sampling` or `induced_faults`).
    fn drain_samples(&mut self, out: &mut Vec<Sample>) -> Result<usize, EnvError> {
        Ok(self.take_samples(out))
    }

    fn page_nodes(&mut self, pid: u32, vaddrs: &[u64]) -> Result<Vec<Option<u32>>, EnvError> {
        let pi = self.proc_index(pid).ok_or(EnvError::NoSuchProcess(pid))?;
        Ok(vaddrs.iter().map(|&v| self.page_node(pi, v)).collect())
    }

    fn move_thread(&mut self, task: TaskId, cpus: &CpuSet) -> Result<ThreadMove, EnvError> {
        match self.migrate_thread(task, cpus) {
            None => Err(EnvError::NoSuchTask {
                pid: task.pid,
                tid: task.tid,
            }),
            Some(Err(())) => Err(EnvError::BadCpus(cpus.to_string())),
            Some(Ok((from, to, cost))) => Ok(ThreadMove {
                task,
                from_cpu: Some(from),
                to_cpu: Some(to),
                cost_ns: cost,
            }),
        }
    }

    fn move_pages(&mut self, pid: u32, vaddrs: &[u64], node: u32) -> Result<PageMove, EnvError> {
        let pi = self.proc_index(pid).ok_or(EnvError::NoSuchProcess(pid))?;
        let ni = self
            .machine
            .node_index(node)
            .ok_or(EnvError::BadNode(node))?;
        if self.machine.nodes[ni].memory_bytes == 0 {
            return Err(EnvError::BadNode(node));
        }
        Ok(self.migrate_pages(pi, vaddrs, ni))
    }
}

impl Simulator {
    pub(crate) fn task_list(&self) -> Vec<numaff_engine::Task> {
        let mut v: Vec<numaff_engine::Task> = self
            .threads
            .iter()
            .filter(|t| t.state != State::Done && self.procs[t.proc].start <= self.now)
            .map(|t| numaff_engine::Task {
                id: TaskId {
                    pid: t.pid,
                    tid: t.tid,
                },
                cpu: Some(self.pus[t.pu].cpu),
                allowed: t.allowed.clone(),
                name: t.name.clone(),
            })
            .collect();
        v.sort_by_key(|t| t.id);
        v
    }

    pub(crate) fn take_samples(&mut self, out: &mut Vec<Sample>) -> usize {
        let n = self.samples.len();
        out.append(&mut self.samples);
        n
    }

    pub(crate) fn page_node(&self, pi: usize, vaddr: u64) -> Option<u32> {
        let pr = &self.procs[pi];
        pr.pages
            .get(vaddr >> pr.page_shift)
            .map(|pg| self.machine.nodes[usize::from(pg.node)].id)
    }

    /// Moves thread `task` onto the least loaded PU of `cpus` (staying put if it already runs in
    /// `cpus`). Returns (from cpu, to cpu, cost ns), or None when no such live thread.
    pub(crate) fn migrate_thread(
        &mut self,
        task: TaskId,
        cpus: &CpuSet,
    ) -> Option<Result<(u32, u32, f64), ()>> {
        let ti = self
            .threads
            .iter()
            .position(|t| t.pid == task.pid && t.tid == task.tid && t.state != State::Done)?;
        let from = self.threads[ti].pu;
        let from_cpu = self.pus[from].cpu;
        self.threads[ti].allowed = cpus.clone();
        if cpus.contains(from_cpu) {
            return Some(Ok((from_cpu, from_cpu, 0.0)));
        }
        let Some(to) = (0..self.pus.len())
            .filter(|&p| cpus.contains(self.pus[p].cpu))
            .min_by_key(|&p| (self.pus[p].runq.len(), p))
        else {
            return Some(Err(()));
        };
        let cost = self.cfg.thread_migration_ns;
        let now = self.now;
        let th = &mut self.threads[ti];
        let drained = th.hot.window.drain(now);
        th.pu = to;
        th.migrations += 1;
        th.ready_at = th.ready_at.max(drained) + cost;
        self.stats.migrations += 1;
        self.stats.migration_cost += cost;
        if self.threads[ti].state == State::Ready {
            self.pus[from].runq.retain(|&x| x != ti);
            self.enqueue(ti, to);
        }
        Some(Ok((from_cpu, self.pus[to].cpu, cost)))
    }

    /// Moves pages of process `pi` to node position `ni`; see [`numaff_engine::Environment::move_pages`].
    pub(crate) fn migrate_pages(
        &mut self,
        pi: usize,
        vaddrs: &[u64],
        ni: usize,
    ) -> numaff_engine::PageMove {
        let mut out = numaff_engine::PageMove {
            requested: vaddrs.len(),
            moved: 0,
            bytes: 0,
            failed: Vec::new(),
            cost_ns: self.cfg.migration_call_ns,
        };
        let mut t = self.now + self.cfg.migration_call_ns;
        let shift = self.procs[pi].page_shift;
        let lines = (1u64 << shift) / LINE as u64;
        for &va in vaddrs {
            let vp = va >> shift;
            let Some(mut pg) = self.procs[pi].pages.get(vp) else {
                out.failed
                    .push((va, numaff_engine::PageMoveFailure::NotPresent));
                continue;
            };
            if usize::from(pg.node) == ni {
                out.moved += 1;
                continue;
            }
            if pg.blocked_until > self.now {
                out.failed.push((va, numaff_engine::PageMoveFailure::Busy));
                continue;
            }
            let done =
                self.fabric.copy(t, usize::from(pg.node), ni, lines) + self.cfg.migration_page_ns;
            t = done;
            pg.node = ni as u16;
            pg.blocked_until = done;
            self.procs[pi].pages.insert(vp, pg);
            out.moved += 1;
            out.bytes += 1 << shift;
            self.stats.page_migrations += 1;
        }
        out.cost_ns = t - self.now;
        self.stats.page_migration_cost += out.cost_ns;
        out
    }
}
