//! A bound on the access path's speed: the stream of benches/accesses.rs run through the
//! simulator's own caches (`SetAssoc`) and fabric (`Fabric`) by a minimal loop for one thread of
//! private pages on laso-hpl, without the rest of `Simulator` (scheduling, directory, samplers,
//! statistics; a flat page table for the stream's span). Its time, against `simspeed`'s, bounds
//! what a leaner access path built from the same parts could reach; it is not a simulator
//! (crates/sim/README.md, "Measuring speed").
//!
//! `leanpath SPAN REPS` runs REPS x 1 M accesses over SPAN bytes, as `simspeed SPAN REPS` does.

use std::collections::VecDeque;

use numaff_sim::cache::{Evicted, SetAssoc, EXCLUSIVE, MODIFIED};
use numaff_sim::fabric::Fabric;
use numaff_sim::{Access, Op, SimConfig};

#[path = "../benches/common/stream.rs"]
mod stream;
use stream::{random_stream_of, N};

/// Accesses pulled ahead of the one simulated, for the host's fetch of their third-level set
/// (`Simulator`'s lookahead fetches more: directory slots, page entries, victims').
const AHEAD: usize = 8;

/// The parts of the private-line path of `Simulator` for one thread on PU 0 (node 0).
struct Lean {
    l1: SetAssoc,
    l2: SetAssoc,
    l3: SetAssoc,
    fabric: Fabric,
    /// Home node + 1 per page of the stream's span (0: not touched yet), pages interleaved.
    pages: Vec<u8>,
    first_page: u64,
    nodes: u64,
    /// Completion times of the last `mlp` accesses (the oldest at `next`).
    window: Vec<f64>,
    next: usize,
    lat: [f64; 3],
    cycle_ns: f64,
    cfg: SimConfig,
    /// What the product's report counts too, to check that both did the same work.
    llc_misses: u64,
    writebacks: u64,
    faults: u64,
}

impl Lean {
    fn home(&self, line: u64) -> Option<usize> {
        let i = ((line << 6) >> 12).checked_sub(self.first_page)? as usize;
        let h = *self.pages.get(i)?;
        (h > 0).then(|| usize::from(h - 1))
    }

    fn writeback(&mut self, line: u64, t: f64) {
        if let Some(home) = self.home(line) {
            self.writebacks += 1;
            self.fabric.writeback(t, 0, home);
        }
    }

    /// The memory read of `vaddr` at `t`: (latency, stall for a first touch).
    fn memory(&mut self, vaddr: u64, t: f64) -> (f64, f64) {
        let vp = vaddr >> 12;
        let i = (vp - self.first_page) as usize;
        let mut stall = 0.0;
        let home = match self.pages[i] {
            0 => {
                let home = (vp % self.nodes) as usize;
                self.pages[i] = home as u8 + 1;
                self.faults += 1;
                stall = self.cfg.fault_ns;
                home
            }
            h => usize::from(h - 1),
        };
        (self.fabric.read(t + stall, 0, home), stall)
    }

    /// One access at `clock`; the clock after it.
    fn access(&mut self, vaddr: u64, write: bool, clock: f64) -> f64 {
        let line = vaddr >> 6;
        let mut t = clock + self.cfg.issue_cycles * self.cycle_ns;
        t = t.max(self.window[self.next]);
        let (lat, stall) = if let Some(st) = self.l1.touch_p8(line) {
            if write && st == EXCLUSIVE {
                self.l2.write_private(line);
                self.l1.set_state(line, MODIFIED);
            }
            (self.lat[0], 0.0)
        } else if let Some(st2) = self.l2.touch_p8(line) {
            let dirty = u8::from(write || st2 >= MODIFIED);
            if write {
                self.l2.set_state(line, MODIFIED);
            }
            self.l1.fill_absent_p8(line, EXCLUSIVE + dirty);
            (self.lat[1], 0.0)
        } else {
            let base3 = self.l3.set_of(line);
            let (lat, stall, dirty) = match self.l3.touch_w20(base3, line) {
                Some(st3) => {
                    let dirty = u8::from(write || st3 == MODIFIED);
                    self.l3.set_mru_state(base3, EXCLUSIVE + dirty);
                    (self.lat[2], 0.0, dirty)
                }
                None => {
                    self.llc_misses += 1;
                    let (lat, stall) = self.memory(vaddr, t);
                    let dirty = u8::from(write);
                    if let Some(v) = self.l3.fill_absent_w20(base3, line, EXCLUSIVE + dirty) {
                        self.l3_victim(v, t);
                    }
                    (lat, stall, dirty)
                }
            };
            self.l1.fill_absent_p8(line, EXCLUSIVE + dirty);
            if let Some(v) = self.l2.fill_absent_p8(line, EXCLUSIVE + 2 * dirty) {
                self.l1.remove_p8(v.line());
                if v.state() == MODIFIED && !self.l3.set_state(v.line(), MODIFIED) {
                    self.writeback(v.line(), t);
                }
            }
            (lat, stall)
        };
        if stall > 0.0 {
            t = self.window.iter().copied().fold(t, f64::max) + stall;
            self.window.fill(f64::NEG_INFINITY);
            self.next = 0;
        }
        self.window[self.next] = t + lat;
        self.next = (self.next + 1) % self.window.len();
        t
    }

    /// A third-level victim: a dirty one is written back unless the second level keeps it.
    fn l3_victim(&mut self, v: Evicted, t: f64) {
        if v.state() == MODIFIED && !self.l2.set_state(v.line(), MODIFIED) {
            self.writeback(v.line(), t);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let span: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(4 << 20);
    let reps: u32 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(3);
    let m = numaff_machine::catalog::load("laso-hpl").expect("catalog machine");
    let cfg = SimConfig::default();
    let t0 = std::time::Instant::now();
    let mut sum = 0.0;
    let mut counts = (0, 0, 0, 0);
    for _ in 0..reps {
        let first_page = 0x1000_0000u64 >> 12;
        let mut lean = Lean {
            l1: SetAssoc::new(32 << 10, 64, 8),
            l2: SetAssoc::new(256 << 10, 64, 8),
            l3: SetAssoc::new(25 << 20, 64, 20),
            fabric: Fabric::new(&m),
            pages: vec![0; (span >> 12) as usize + 2],
            first_page,
            nodes: m.nodes.len() as u64,
            window: vec![f64::NEG_INFINITY; cfg.mlp],
            next: 0,
            lat: [4.0 / 2.1, 12.0 / 2.1, 40.0 / 2.1],
            cycle_ns: 1.0 / 2.1,
            cfg: cfg.clone(),
            llc_misses: 0,
            writebacks: 0,
            faults: 0,
        };
        let mut ops = random_stream_of(span, N).filter_map(|op| match op {
            Op::Access(a) => Some(a),
            _ => None,
        });
        let mut ahead: VecDeque<Access> = ops.by_ref().take(AHEAD).collect();
        let mut clock = 0.0;
        while let Some(a) = ahead.pop_front() {
            if let Some(next) = ops.next() {
                lean.l3.prefetch_w20(lean.l3.set_of(next.vaddr >> 6));
                ahead.push_back(next);
            }
            clock = lean.access(a.vaddr, a.write, clock);
        }
        sum += clock;
        counts = (
            lean.llc_misses,
            lean.writebacks,
            lean.faults,
            lean.fabric.link_bytes,
        );
    }
    let s = t0.elapsed().as_secs_f64();
    if args.get(3).is_some_and(|a| a == "check") {
        // The same stream through the simulator: the same misses, write-backs, faults and link
        // bytes say the lean loop did the simulator's work (its times differ: other latencies).
        let sim = numaff_sim::Simulator::new(&m, SimConfig::default());
        let spec =
            numaff_sim::ProcessSpec::new("bench", numaff_sim::DataPolicy::Interleave).thread(
                numaff_sim::ThreadSpec::new("t", 0, random_stream_of(span, N)),
            );
        let r = sim.spawn_and_run(spec);
        println!(
            "llc misses, write-backs, faults, link bytes: lean {counts:?}, simulator {:?}",
            (
                r.llc_misses,
                r.writebacks,
                r.page_faults,
                r.interconnect_bytes
            )
        );
    }
    println!(
        "span {span} reps {reps}: clock sum {sum:.0} ns, wall {s:.3} s, {:.2} M/s wall",
        f64::from(reps) * N as f64 / s / 1e6
    );
}
