//! The simulator as an [`Environment`]: the engine observes and acts on a simulated machine exactly
//! as it does on Linux; `advance` simulates instead of sleeping.

use numaff_engine::{EnvError, Environment, PageMove, Sample, Task, TaskId, ThreadMove};
use numaff_machine::{CpuSet, Machine};

use crate::sim::Simulator;

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
