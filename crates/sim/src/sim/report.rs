//! The figures of a run so far as a [`Report`]: the counters, the makespan, the per-thread
//! figures and the energy estimate.

use super::{Simulator, State};
use crate::fabric::LINE;
use crate::report::{Report, ThreadReport};

impl Simulator {
    /// The figures so far.
    pub fn report(&self) -> Report {
        let s = &self.stats;
        let makespan = self.threads.iter().map(|t| t.end).fold(0.0, f64::max);
        let threads: Vec<ThreadReport> = self
            .threads
            .iter()
            .map(|t| {
                let start = self.procs[t.proc].start;
                let end = if t.state == State::Done {
                    t.end
                } else {
                    self.now.max(start)
                };
                ThreadReport {
                    pid: t.pid,
                    tid: t.tid,
                    name: t.name.clone(),
                    cpu: self.pus[t.pu].cpu,
                    start_ns: start as u64,
                    end_ns: end as u64,
                    time_ns: (end - start).max(0.0) as u64,
                    accesses: t.hot.accesses,
                    local_accesses: t.hot.local,
                    remote_accesses: t.hot.remote,
                    migrations: t.migrations,
                }
            })
            .collect();
        let levels = self.pus.iter().map(|p| p.path.len()).max().unwrap_or(0);
        let em = &self.cfg.energy;
        let secs = makespan * 1e-9;
        let mut dynamic_nj = 0.0;
        for (pos, &n) in s.probes.iter().enumerate().take(levels) {
            let e = match pos {
                0 => em.l1_nj,
                1 if levels > 2 => em.l2_nj,
                _ => em.llc_nj,
            };
            dynamic_nj += n as f64 * e;
        }
        let dram_lines: u64 = self.fabric.mc_lines.iter().sum();
        dynamic_nj += dram_lines as f64 * em.dram_line_nj;
        dynamic_nj += (self.fabric.link_bytes as f64 / LINE) * em.link_line_nj;
        let energy_j = secs
            * (em.static_w_per_package * self.machine.packages.len().max(1) as f64
                + em.static_w_per_node * self.machine.nodes.len().max(1) as f64)
            + dynamic_nj * 1e-9;
        Report {
            machine: self.machine.name.clone(),
            seed: self.cfg.seed,
            makespan_ns: makespan as u64,
            accesses: s.accesses,
            cache_hits: s.hits[..levels.min(8)].to_vec(),
            llc_misses: s.llc_misses,
            local_accesses: s.local,
            remote_accesses: s.remote,
            imc_queue_ns: self.fabric.mc_wait_ns,
            link_queue_ns: self.fabric.link_wait_ns,
            queue_past_history: self.fabric.past_history(),
            interconnect_bytes: self.fabric.link_bytes,
            c2c_transfers: s.c2c,
            c2c_remote: s.c2c_remote,
            invalidations: s.invalidations,
            writebacks: s.writebacks,
            page_faults: s.faults,
            migrations: s.migrations,
            migration_cost_ns: s.migration_cost,
            page_migrations: s.page_migrations,
            page_migration_cost_ns: s.page_migration_cost,
            samples: s.samples,
            energy_j,
            threads,
        }
    }
}
