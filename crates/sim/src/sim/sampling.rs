//! The samplers: first-touch fault samples, hardware samples of one access in N with its latency,
//! and the induced faults that re-arm pages so that their next access faults again.

use super::Simulator;
use crate::stream::Access;
use numaff_engine::{AccessKind, Sample};

impl Simulator {
    pub(super) fn next_sample_gap(&mut self) -> u64 {
        match &self.cfg.hw_sampling {
            None => u64::MAX,
            Some(s) => {
                let p = s.period.max(1) as f64;
                let j = s.jitter.clamp(0.0, 1.0);
                let f = 1.0 + j * (2.0 * self.rng.unit() - 1.0);
                ((p * f).round() as u64).max(1)
            }
        }
    }

    pub(super) fn induce_faults(&mut self) {
        let Some(cfg) = self.cfg.induced_faults.clone() else {
            self.next_induced = f64::INFINITY;
            return;
        };
        for pi in 0..self.procs.len() {
            let n = self.procs[pi].page_list.len() as u64;
            let k = (n as f64 * cfg.fraction.clamp(0.0, 1.0)).round() as u64;
            for _ in 0..k {
                let i = if cfg.scan {
                    self.procs[pi].scan_cursor = self.procs[pi].scan_cursor.wrapping_add(1) % n;
                    self.procs[pi].scan_cursor as usize
                } else {
                    self.rng.below_u64(n) as usize
                };
                let vp = self.procs[pi].page_list[i];
                if let Some(mut pg) = self.procs[pi].pages.get(vp) {
                    if !pg.armed {
                        pg.armed = true;
                        self.procs[pi].pages.insert(vp, pg);
                        self.procs[pi].armed += 1;
                    }
                }
            }
        }
        self.next_induced += cfg.interval_ns.max(1) as f64;
    }

    /// Records a sample of thread `ti` on PU `p` at time `t` (what every sampler emits).
    pub(super) fn record_sample(
        &mut self,
        ti: usize,
        p: usize,
        t: f64,
        vaddr: u64,
        kind: AccessKind,
        latency_ns: Option<f64>,
    ) {
        let th = &self.threads[ti];
        self.samples.push(Sample {
            time_ns: t as u64,
            pid: th.pid,
            tid: th.tid,
            cpu: self.pus[p].cpu,
            node: self.pus[p].node_id,
            vaddr,
            kind,
            latency_ns,
        });
        self.stats.samples += 1;
    }

    /// An access to a page marked by the induced-fault sampler faults: one `Fault` sample, and the
    /// cost as a stall. Returns the stall.
    pub(super) fn induced_fault(&mut self, ti: usize, p: usize, t: f64, vaddr: u64) -> f64 {
        let pi = self.threads[ti].proc;
        let pr = &mut self.procs[pi];
        let vp = vaddr >> pr.page_shift;
        let Some(mut pg) = pr.pages.get(vp) else {
            return 0.0;
        };
        if !pg.armed {
            return 0.0;
        }
        pg.armed = false;
        pr.pages.insert(vp, pg);
        pr.armed -= 1;
        self.record_sample(ti, p, t, vaddr, AccessKind::Fault, None);
        self.cfg
            .induced_faults
            .as_ref()
            .map(|f| f.cost_ns)
            .unwrap_or(0.0)
    }

    pub(super) fn hw_sample(&mut self, ti: usize, p: usize, t: f64, lat: f64, a: Access) {
        let gap = self.next_sample_gap();
        self.run.sample_countdown = gap;
        let Some(s) = &self.cfg.hw_sampling else {
            return;
        };
        if lat < s.min_latency_ns {
            return;
        }
        let cost = s.cost_ns;
        let kind = if a.write {
            AccessKind::Store
        } else {
            AccessKind::Load
        };
        self.record_sample(ti, p, t, a.vaddr, kind, Some(lat));
        self.pus[p].clock += cost;
    }
}
