//! The coherence actions of an access that reached the directory: transfers, invalidations, the
//! fills and their victims, write-backs, and the memory read of a miss.

use super::{
    and_not, any, first_touch_home, slot_ahead, Cx, Geom, Path3, Simulator, ASID_SHIFT, DIR_BITS,
    LINE_MASK,
};
use crate::cache::{EXCLUSIVE, MODIFIED, SHARED};
use crate::dir::{Form, WriteBack};
use crate::fabric::later;
use crate::pages::{Page, SOLE_SHARED};
use numaff_engine::AccessKind;
use numaff_machine::Coherence;

impl Simulator {
    /// The coherence actions of an access that reached the directory: a hit at path level `hit`
    /// (None: every level missed). A line that may be private (`maybe_private`: false when its
    /// state in a tracked level said `SHARED`, or the caller looked already) goes to
    /// `coherent_private` if its page is private to this domain; only writes hitting the first
    /// or second level come here so (`access_beyond_l1_3` dispatches the others itself).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn coherent<D: Form, G: Geom>(
        &mut self,
        ti: usize,
        cx: &Cx,
        key: u64,
        t: f64,
        write: bool,
        hit: Option<usize>,
        maybe_private: bool,
    ) -> (f64, f64) {
        if maybe_private && cx.private {
            if let Some(f) = cx.p3 {
                if self.private_page::<D>(cx, key) {
                    return self.coherent_private::<D, G>(ti, cx, f, key, t, write, hit, false);
                }
            }
        }
        let p = cx.p;
        // One probe of the directory for the read here and the write below (`insert_at`): in
        // between only caches, the fabric and page tables change, never the directory.
        let (at, e) = self.dir.entry::<D>(key);
        let node = cx.node;
        let path_bits = cx.path_bits;
        let others = and_not(e.holders, path_bits);
        let owner = (e.owner as usize).checked_sub(1);
        // Another PU's caches hold the line beyond this path's (not only a cache both share).
        let owner_other = owner.filter(|&o| {
            let held = [
                e.holders[0] & self.pus[o].path_bits[0],
                e.holders[1] & self.pus[o].path_bits[1],
            ];
            o != p && any(and_not(held, path_bits))
        });
        // An access that hits a level outside the owner's path finds a current copy there: the
        // owner has not written since that level got it (a write invalidates every copy outside
        // its path). Only MOESI's Owned lines (dirty, shared) get there: a read is a hit, a
        // write an upgrade that waits for its invalidations only, as for a clean shared line.
        let owned_hit = e.dirty
            && owner_other.is_some_and(|o| {
                hit.is_some_and(|pos| !self.pus[o].path.contains(&self.pus[p].path[pos]))
            });
        // The node of the cache that sends a dirty line this path does not hold: its owner's,
        // or for a dirty line without an owner (kept dirty in its node's caches by a read from
        // that node, below) one of its holders'.
        let supplier = match owner_other {
            Some(o) if e.dirty && !owned_hit => Some(self.pus[o].node),
            None if e.dirty && e.owner == 0 && hit.is_none() => self.holder_node(e.holders),
            _ => None,
        };
        // A read of a line dirty elsewhere writes it back to memory and leaves every copy
        // clean (MESI; MESIF across nodes), or leaves it dirty (MESIF within a node; MOESI).
        let cleaned = !write && supplier.is_some_and(|on| self.writes_back(on, node));
        let mut stall = 0.0;
        let mut lat;
        match supplier {
            Some(on) => {
                lat = if on == node {
                    self.cfg.c2c_local_ns
                } else {
                    self.stats.c2c_remote += 1;
                    self.fabric.latency(node, on) + self.fabric.occupy_route(t, on, node)
                };
                self.stats.c2c += 1;
                if hit.is_none() {
                    self.stats.llc_misses += 1;
                }
                // The protocol decides (`writes_back`).
                if cleaned {
                    self.writeback(key, on, t);
                }
            }
            None => match hit {
                Some(pos) => lat = cx.lat(pos, &self.pus),
                None => {
                    self.stats.llc_misses += 1;
                    // A new page here is shared: `private_page` did not take it.
                    let sole = if cx.private { SOLE_SHARED } else { 0 };
                    let (l, s) = self.memory(ti, cx, key, t, sole);
                    lat = l;
                    stall = s;
                }
            },
        }
        let mut ne = e;
        let upto;
        let l1_state;
        if write {
            let mut far: f64 = 0.0;
            for (w, &word) in others.iter().enumerate() {
                let mut bits = word;
                while bits != 0 {
                    let b = w * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let mut k = b;
                    while k < self.tracked.len() {
                        let inst = self.tracked[k];
                        if self.caches[inst].cache.remove(key) {
                            self.stats.invalidations += 1;
                            let n = self.caches[inst].node;
                            if n != node {
                                far = later(far, self.fabric.latency(node, n));
                            } else {
                                far = later(far, self.cfg.c2c_local_ns);
                            }
                        }
                        for q in 0..self.caches[inst].inner.len() {
                            let inner = self.caches[inst].inner[q];
                            self.caches[inner].cache.remove(key);
                        }
                        k += DIR_BITS;
                    }
                }
            }
            if hit.is_some() && (owner_other.is_none() || owned_hit) {
                lat = later(lat, far);
            }
            upto = hit.unwrap_or(cx.path_len).max(1);
            // This path's caches that held the line keep it; the levels before `upto` get it.
            let filled = self.filled_bits(cx, upto);
            for ((h, b), f) in ne.holders.iter_mut().zip(path_bits).zip(filled) {
                *h = (*h & b) | f;
            }
            ne.owner = p as u32 + 1;
            ne.dirty = true;
            l1_state = MODIFIED;
        } else {
            if let Some(o) = owner_other {
                if let Some(&k) = self.pus[o].path.first() {
                    self.caches[k].cache.set_state(key, SHARED);
                }
                // MOESI's owner keeps the dirty line (Owned) and its write-back; otherwise a
                // line still dirty has no owner (unless this path alone holds it, below) and
                // goes back to memory with its last copy (`WriteBack::LastCopy`).
                if !(self.coherence == Coherence::Moesi && e.dirty) {
                    ne.owner = 0;
                }
            }
            ne.dirty = e.dirty && !cleaned;
            let alone = !any(others);
            upto = hit.unwrap_or(cx.path_len);
            for (h, f) in ne.holders.iter_mut().zip(self.filled_bits(cx, upto)) {
                *h |= f;
            }
            l1_state = if alone {
                // A dirty line here (not `owner_other`'s) is dirty in a cache of this path: its
                // owner's, whoever that was, now this PU's, still dirty.
                ne.owner = p as u32 + 1;
                if ne.dirty {
                    MODIFIED
                } else {
                    EXCLUSIVE
                }
            } else {
                SHARED
            };
        }
        self.dir.insert_at::<D>(at, key, ne);
        // The levels before the one that hit (all, on a miss) were probed by `access` and do not
        // hold the line; nothing since has put it there (invalidations and evictions only remove).
        let missed = hit.unwrap_or(usize::MAX);
        if let Some(f) = cx.p3 {
            self.fill3::<D, G>(f, key, upto, missed, [l1_state, SHARED, SHARED], t);
            return (lat, stall);
        }
        for pos in 0..upto.min(cx.path_len) {
            let k = self.pus[p].path[pos];
            let st = if pos == 0 { l1_state } else { SHARED };
            let base = self.set_in(k, key);
            let c = &mut self.caches[k].cache;
            let ev = if pos < missed {
                c.fill_absent_in(base, key, st)
            } else {
                c.fill(key, st)
            };
            if let Some(ev) = ev {
                self.evicted::<D, G>(k, ev.line(), t);
            }
        }
        (lat, stall)
    }

    /// Whether a read from `node` of a line dirty in a cache of node `on` writes the line back
    /// to memory, leaving every copy clean: the one rule by which the protocols differ here.
    /// - MESI (Itanium 2 on SGI's NUMAlink): always; on the bus the memory takes the data
    ///   with the reader (an implicit write-back), and the directory's sharing write-back
    ///   does the same between nodes.
    /// - MESIF (Intel): between nodes (copies shared across them are clean); within a node
    ///   the inclusive L3 takes the line from the owning core and keeps it dirty until its
    ///   last copy leaves.
    /// - MOESI (AMD): never; the owner's copy becomes Owned, serves later readers wherever
    ///   they are, and is written back when it leaves.
    #[inline]
    fn writes_back(&self, on: usize, node: usize) -> bool {
        match self.coherence {
            Coherence::Mesi => true,
            Coherence::Mesif => on != node,
            Coherence::Moesi => false,
        }
    }

    /// The node of a cache whose directory bit is among `holders` (the first such), if any.
    fn holder_node(&self, holders: [u64; 2]) -> Option<usize> {
        let (w, &word) = holders.iter().enumerate().find(|(_, &h)| h != 0)?;
        let b = w * 64 + word.trailing_zeros() as usize;
        let k = *self.tracked.get(b)?;
        Some(self.caches[k].node)
    }

    /// The directory bits of the levels `0..upto` of `cx`'s path: the caches `coherent` fills.
    /// Only those and the path's caches that already held the line hold it afterwards: the
    /// directory's holders are exactly the caches that hold the line (bits aliasing aside), so a
    /// dirty line is written back when it leaves its owner's last cache. Setting the whole path's
    /// bits, a non-inclusive level's too, would keep stale holders
    /// (`directory_holders_are_the_caches_that_hold_the_line`).
    #[inline(always)]
    fn filled_bits(&self, cx: &Cx, upto: usize) -> [u64; 2] {
        match cx.fill_bits.get(upto) {
            Some(&bits) => bits,
            None => self.pus[cx.p].fill_bits[upto.min(cx.path_len)],
        }
    }

    /// The fill loop at the end of `coherent` for a path of the common shape `f`: the levels
    /// `0..upto` (at most 3), those before `missed` known not to hold the line. The first level has
    /// no directory bit and nothing inside it, so its victim needs nothing (`evicted` would return
    /// at once); the second's victim leaves the first level and its directory bit.
    #[inline(always)]
    ///
    /// `states` are the three levels' states for the line (a private line's carry its dirty bit,
    /// `private_lines`); a victim's state says where its coherence state is: `SHARED`, in the
    /// directory; else in the levels' states (`private_victim2`, `private_victim3` for a
    /// `MODIFIED` one; the others need nothing).
    pub(super) fn fill3<D: Form, G: Geom>(
        &mut self,
        f: Path3,
        key: u64,
        upto: usize,
        missed: usize,
        states: [u8; 3],
        t: f64,
    ) {
        if upto == 0 {
            return;
        }
        let [l1_state, l2_state, l3_state] = states;
        let c = &mut self.caches[f.l1].cache;
        match (G::P8, 0 < missed) {
            (true, true) => c.fill_absent_p8(key, l1_state),
            (true, false) => c.fill_p8(key, l1_state),
            (false, true) => c.fill_absent(key, l1_state),
            (false, false) => c.fill(key, l1_state),
        };
        if upto == 1 {
            return;
        }
        let c = &mut self.caches[f.l2].cache;
        let ev = match (G::P8, 1 < missed) {
            (true, true) => c.fill_absent_p8(key, l2_state),
            (true, false) => c.fill_p8(key, l2_state),
            (false, true) => c.fill_absent(key, l2_state),
            (false, false) => c.fill(key, l2_state),
        };
        if let Some(ev) = ev {
            let c1 = &mut self.caches[f.l1].cache;
            if G::P8 {
                c1.remove_p8(ev.line());
            } else {
                c1.remove(ev.line());
            }
            match ev.state() {
                SHARED => self.evicted_bit::<D, G>(f.l2, f.b2, ev.line(), t),
                MODIFIED => self.private_victim2(f, ev.line(), t),
                // Clean, or dirty in the third level as well: nothing to do.
                _ => {}
            }
        }
        if upto == 2 {
            return;
        }
        let base = self.set_in(f.l3, key);
        let c = &mut self.caches[f.l3].cache;
        let ev = match (G::W20, 2 < missed) {
            (true, true) => c.fill_absent_w20(base, key, l3_state),
            (false, true) => c.fill_absent_in(base, key, l3_state),
            (_, false) => c.fill(key, l3_state),
        };
        if let Some(ev) = ev {
            match ev.state() {
                SHARED => self.evicted_bit::<D, G>(f.l3, f.b3, ev.line(), t),
                MODIFIED => self.private_victim3(f, ev.line(), t),
                _ => {}
            }
        }
    }

    fn evicted<D: Form, G: Geom>(&mut self, k: usize, line: u64, t: f64) {
        for q in 0..self.caches[k].inner.len() {
            let inner = self.caches[k].inner[q];
            self.caches[inner].cache.remove(line);
        }
        let Some(b) = self.caches[k].bit else { return };
        self.evicted_bit::<D, G>(k, b, line, t);
    }

    /// The directory's part of `evicted`: `line` left cache `k`, whose directory bit is `b`.
    #[inline(always)]
    pub(super) fn evicted_bit<D: Form, G: Geom>(&mut self, k: usize, b: usize, line: u64, t: f64) {
        let pus = &self.pus;
        // The entry is removed in the same probe when no holder is left.
        let Some((wb, _)) = self.dir.drop_holder::<D>(line, b, |o| pus[o].path_bits) else {
            return;
        };
        match wb {
            Some(WriteBack::Owner(o)) => self.writeback(line, self.pus[o].node, t),
            Some(WriteBack::LastCopy) => self.writeback(line, self.caches[k].node, t),
            None => {}
        }
    }

    /// A dirty line goes back to its home memory from node `from` (occupies queues; nobody waits).
    pub(super) fn writeback(&mut self, key: u64, from: usize, t: f64) {
        let pi = (key >> ASID_SHIFT) as usize;
        let Some(pr) = self.procs.get(pi) else { return };
        let vp = ((key & LINE_MASK) << 6) >> pr.page_shift;
        let Some(home) = pr.pages.slot(vp).and_then(|s| pr.pages.node_at(s)) else {
            return;
        };
        self.write_back_to(usize::from(home), from, t);
    }

    /// `writeback` to the memory of node `home`.
    #[inline]
    pub(super) fn write_back_to(&mut self, home: usize, from: usize, t: f64) {
        self.stats.writebacks += 1;
        // Writebacks occupy the queues (so reads behind them wait) but nobody waits for them: their
        // own waits are not counted as IMC or link queueing.
        self.fabric.writeback(t, from, home);
    }

    /// A line from memory: page lookup (first touch, induced fault, migration in progress), then the
    /// fabric. Returns (latency, stall before the access).
    pub(super) fn memory(&mut self, ti: usize, cx: &Cx, key: u64, t: f64, sole: u16) -> (f64, f64) {
        let (p, pi, node) = (cx.p, cx.pi, cx.node);
        let pr = &mut self.procs[pi];
        let vaddr = (key & LINE_MASK) << 6;
        let vp = vaddr >> pr.page_shift;
        let mut stall = 0.0;
        let mut fault = false;
        let slot = slot_ahead(self.cur_page, &pr.pages, vp);
        let found = match slot {
            Some(s) => pr.pages.get_at(s, vp),
            None => None,
        };
        let home = match found {
            Some(pg) => {
                if pg.blocked_until > t {
                    stall += pg.blocked_until - t;
                }
                usize::from(pg.node)
            }
            None => {
                let home = first_touch_home(&pr.policy, &self.mem_nodes, &self.machine, node, vp);
                pr.pages.insert_in(
                    slot,
                    vp,
                    Page {
                        node: home as u16,
                        blocked_until: 0.0,
                        armed: false,
                        // The first toucher's domain's, or shared (`private_page`).
                        sole,
                    },
                );
                pr.page_list.push(vp);
                self.stats.faults += 1;
                stall += if pr.page_shift >= 21 {
                    self.cfg.huge_fault_ns
                } else {
                    self.cfg.fault_ns
                };
                fault = self.cfg.first_touch_samples;
                home
            }
        };
        if fault {
            self.record_sample(ti, p, t, vaddr, AccessKind::Fault, None);
        }
        let lat = self.fabric.read(t + stall, node, home);
        let th = &mut *self.run;
        if home == node {
            self.stats.local += 1;
            th.local += 1;
        } else {
            self.stats.remote += 1;
            th.remote += 1;
        }
        (lat, stall)
    }
}
