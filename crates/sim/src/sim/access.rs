//! The access path: the lookahead that feeds a thread's ops with their host fetches started, and
//! one access through the PU's cache levels up to the coherence actions.

use super::{
    CacheInst, Cx, Geom, Path3, Process, Simulator, ASID_SHIFT, LINE_MASK, LOOKAHEAD, NO_PAGE,
    NO_SET, VICTIM_AHEAD,
};
use crate::cache::{Evicted, EXCLUSIVE, MODIFIED, SHARED};
use crate::dir::Form;
use crate::linemap::Prefetcher;
use crate::stream::{Access, Op};

impl Simulator {
    /// The next op of thread `ti` (running on PU `p`), from its lookahead buffer, which is kept
    /// `LOOKAHEAD` ops full. An access entering the buffer gets its host fetches started (its sets
    /// on `p`'s path, its directory slot, its page slot); the access `VICTIM_AHEAD` from the front
    /// gets the directory slots of its sets' least recently used lines started. Hints only: what
    /// is simulated does not depend on them. While the directory is empty (`Cx::dir_used`: a run
    /// of private pages, such as one thread's) neither directory slots nor victims are fetched:
    /// no access needs them then, and fetching them costs host time.
    #[inline]
    pub(super) fn next_op<D: Form, G: Geom>(&mut self, cx: &Cx) -> Option<Op> {
        let th = &mut *self.run;
        let pi = cx.pi;
        let fetch = th.l1_misses > 0;
        th.l1_misses = th.l1_misses.saturating_sub(1);
        if !fetch {
            // Hitting the first level: no fetches to start; run what was pulled, then pull
            // straight from the generator.
            if th.ahead_len == 0 {
                self.cur_llc = NO_SET;
                self.cur_page = NO_PAGE;
                return th.pull();
            }
        }
        // The directory does not change before this returns: its form and layout read once,
        // if it holds a line (`Cx::dir_used`).
        let dp = if cx.dir_used {
            Some(self.dir.prefetcher::<D>())
        } else {
            None
        };
        while fetch && usize::from(th.ahead_len) < LOOKAHEAD {
            let Some(op) = th.pull() else {
                break;
            };
            let slot = (usize::from(th.ahead_head) + usize::from(th.ahead_len)) % LOOKAHEAD;
            th.ahead[slot] = op;
            th.ahead_len += 1;
            if let Op::Access(a) = op {
                let key = ((pi as u64) << ASID_SHIFT) | ((a.vaddr >> 6) & LINE_MASK);
                // The inner levels' tags are small enough to stay in the host's caches.
                let mut llc_set = NO_SET;
                if let Some(llc) = cx.llc {
                    let c = &self.caches[llc].cache;
                    let base = c.set_of(key);
                    // With `G::W20` the PU's last level is its `Path3`'s, 20-way.
                    if G::W20 {
                        c.prefetch_w20(base);
                    } else {
                        c.prefetch_in(base);
                    }
                    llc_set = (llc, base);
                }
                th.ahead_llc[slot] = llc_set;
                if let Some(dp) = dp {
                    dp.fetch(key);
                }
                let pr = &self.procs[pi];
                th.ahead_page[slot] = pr
                    .pages
                    .prefetch(a.vaddr >> pr.page_shift)
                    .unwrap_or(NO_PAGE);
            }
        }
        if let (true, Some(dp)) = (fetch && usize::from(th.ahead_len) > VICTIM_AHEAD, dp) {
            let slot = (usize::from(th.ahead_head) + VICTIM_AHEAD) % LOOKAHEAD;
            if let Op::Access(a) = th.ahead[slot] {
                let key = ((pi as u64) << ASID_SHIFT) | ((a.vaddr >> 6) & LINE_MASK);
                let (llc, base) = th.ahead_llc[slot];
                if let Some(f) = cx.p3 {
                    // The common shape: both levels after the first have a directory bit.
                    let c2 = &mut self.caches[f.l2].cache;
                    let lru2 = if G::P8 { c2.lru_p8(key) } else { c2.lru(key) };
                    if let Some(victim) = lru2 {
                        Self::prefetch_victim2(&self.caches, &dp, f, victim);
                    }
                    let c = &self.caches[f.l3].cache;
                    let lru = match (f.l3 == llc, G::W20) {
                        (true, true) => c.lru_w20(base),
                        (true, false) => c.lru_in(base),
                        (false, _) => c.lru(key),
                    };
                    if let Some(victim) = lru {
                        Self::prefetch_victim3(&self.procs, &dp, victim);
                    }
                } else {
                    for &k in self.pus[cx.p].path.iter().skip(1) {
                        let c = &self.caches[k];
                        if c.bit.is_some() {
                            let lru = if k == llc {
                                c.cache.lru_in(base)
                            } else {
                                c.cache.lru(key)
                            };
                            if let Some(victim) = lru {
                                dp.fetch(victim.line());
                            }
                        }
                    }
                }
            }
        }
        if th.ahead_len == 0 {
            return None;
        }
        let op = th.ahead[usize::from(th.ahead_head)];
        self.cur_llc = th.ahead_llc[usize::from(th.ahead_head)];
        self.cur_page = th.ahead_page[usize::from(th.ahead_head)];
        th.ahead_head = ((usize::from(th.ahead_head) + 1) % LOOKAHEAD) as u8;
        th.ahead_len -= 1;
        Some(op)
    }

    /// One access of thread `ti` on PU `cx.p`, whose clock is `clock` (`self.pus[p].clock` is not
    /// read: `run_pu_in` keeps the clock while accesses run); returns the PU's clock after it.
    #[inline(always)]
    pub(super) fn step<D: Form, G: Geom>(
        &mut self,
        ti: usize,
        cx: &Cx,
        a: Access,
        clock: f64,
    ) -> f64 {
        let p = cx.p;
        let t = self
            .run
            .issue(a, clock, self.cfg.issue_cycles, self.cycle_ns);
        // `armed` only falls while `run_pu` runs (`induce_faults` arms pages between its calls).
        let induced = if cx.armed && self.procs[cx.pi].armed > 0 {
            self.induced_fault(ti, p, t, a.vaddr)
        } else {
            0.0
        };
        let (lat, mut stall) = self.access::<D, G>(ti, cx, t, a);
        stall += induced;
        self.step_end(ti, p, t, lat, stall, a)
    }

    /// The end of `step` for an access issued at `t` that takes `lat` after a stall of `stall`:
    /// the clock after it, a hardware sample if it is due.
    #[inline(always)]
    pub(super) fn step_end(
        &mut self,
        ti: usize,
        p: usize,
        mut t: f64,
        lat: f64,
        stall: f64,
        a: Access,
    ) -> f64 {
        if stall > 0.0 {
            self.pus[p].clock = t;
            t = self.drain(p) + stall;
        }
        let th = &mut *self.run;
        th.complete(t, lat);
        if th.sample_countdown != u64::MAX {
            th.sample_countdown -= 1;
            if th.sample_countdown == 0 {
                // A sample may stall the PU (`hw_sample` adds its cost to the clock).
                self.pus[p].clock = t;
                self.hw_sample(ti, p, t, lat, a);
                return self.pus[p].clock;
            }
        }
        t
    }

    /// One access through the cache hierarchy: (latency, stall before it such as a page fault).
    /// A hit in the first level (most accesses of most runs) is handled here and returns before
    /// the code of the other levels, which `access_beyond_l1` holds (one call site, inlined): the
    /// same steps as one loop over the levels, in code the compiler lays out better for the hit.
    #[inline]
    fn access<D: Form, G: Geom>(&mut self, ti: usize, cx: &Cx, t: f64, a: Access) -> (f64, f64) {
        let key = ((cx.pi as u64) << ASID_SHIFT) | ((a.vaddr >> 6) & LINE_MASK);
        self.stats.accesses += 1;
        let first = cx.l1.and_then(|k| {
            self.stats.probes[0] += 1;
            // With `G::P8` the PU has a `Path3` whose first level is `k` and has no directory bit.
            let st = if G::P8 {
                self.caches[k].cache.touch_p8(key)
            } else {
                self.caches[k].cache.touch(key)
            };
            if !G::P8 && st.is_none() && self.caches[k].bit.is_some() {
                // The first level missed: as the loop in `access_beyond_l1` does after a miss.
                if let Some(victim) = self.caches[k].cache.lru(key) {
                    self.dir.prefetch::<D>(victim.line());
                }
            }
            Some((k, st?))
        });
        let Some((k, st)) = first else {
            return match cx.p3 {
                Some(f) => self.access_beyond_l1_3::<D, G>(ti, cx, t, a, key, f),
                None => self.access_beyond_l1::<D, G>(ti, cx, t, a, key),
            };
        };
        self.stats.hits[0] += 1;
        let lat = cx.lat3[0];
        // A read of a private level's line, or a write of a line written already, ends here. One
        // branch on both, without `&&`'s on `a.write` alone: whether an access writes is as random
        // as the workload's mix, whether the line ends here much less, so the combined branch is
        // predicted far better.
        let read_private = !a.write & (0 < cx.n_private);
        if read_private | (a.write & (st == MODIFIED)) {
            return (lat, 0.0);
        }
        if a.write && st == EXCLUSIVE {
            // A private line's dirty bit is its second level's state (`private_lines`); the
            // second level keeps the first inclusive, so it holds the line.
            let private = cx.private
                && cx.p3.is_some_and(|f| {
                    let st2 = self.caches[f.l2].cache.write_private(key);
                    debug_assert!(st2.is_some(), "a first-level line outside the second");
                    st2.is_some_and(|s| s != SHARED)
                });
            if !private {
                self.dir.update::<D, _>(key, |e| e.dirty = true);
            }
            self.caches[k].cache.set_state(key, MODIFIED);
            return (lat, 0.0);
        }
        self.coherent::<D, G>(ti, cx, key, t, a.write, Some(0), true)
    }

    /// The rest of `access` after the first level missed (or when the path has no level): the
    /// levels after the first, then the coherence actions. A hit here is never in the first level.
    #[inline(always)]
    fn access_beyond_l1<D: Form, G: Geom>(
        &mut self,
        ti: usize,
        cx: &Cx,
        t: f64,
        a: Access,
        key: u64,
    ) -> (f64, f64) {
        let p = cx.p;
        let pu = &self.pus[p];
        let mut hit = None;
        for (pos, &k) in pu.path.iter().enumerate().skip(1) {
            if pos == 1 && self.run.l1_misses == 0 {
                // The first level missed after a run of hits, so `next_op` started no fetches
                // for this access: start the host's fetches of the last level's set, the line's
                // directory slot and its page's slot now, so that their host misses overlap.
                if let Some(&llc) = pu.path.last() {
                    let c = &self.caches[llc].cache;
                    let base = c.set_of(key);
                    c.prefetch_in(base);
                    self.cur_llc = (llc, base);
                }
                self.dir.prefetch::<D>(key);
                let pr = &self.procs[cx.pi];
                self.cur_page = pr
                    .pages
                    .prefetch(a.vaddr >> pr.page_shift)
                    .unwrap_or(NO_PAGE);
            }
            self.stats.probes[pos.min(7)] += 1;
            let base = self.set_in(k, key);
            if self.caches[k].cache.touch_in(base, key).is_some() {
                hit = Some(pos);
                break;
            }
            // A tracked level missed: the fill that follows will most likely evict its least
            // recently used line, whose directory entry will then be updated; start that fetch.
            if self.caches[k].bit.is_some() {
                if let Some(victim) = self.caches[k].cache.lru_in(base) {
                    self.dir.prefetch::<D>(victim.line());
                }
            }
        }
        self.run.l1_misses = 2 * LOOKAHEAD as u8;
        if let Some(pos) = hit {
            self.stats.hits[pos.min(7)] += 1;
            if !a.write && pos < pu.n_private {
                for q in 0..pos {
                    let k = self.pus[p].path[q];
                    self.caches[k].cache.fill_absent(key, SHARED);
                }
                return (pu.lat[pos], 0.0);
            }
        }
        self.coherent::<D, G>(ti, cx, key, t, a.write, hit, false)
    }

    /// `access_beyond_l1` for a PU whose path has the common shape `f` (`Path3`): the same steps
    /// in the same order, as straight-line code. The second level's set is computed here: `set_of`
    /// depends only on the cache and the key, so it is the one `set_in` would give.
    #[inline(always)]
    fn access_beyond_l1_3<D: Form, G: Geom>(
        &mut self,
        ti: usize,
        cx: &Cx,
        t: f64,
        a: Access,
        key: u64,
        f: Path3,
    ) -> (f64, f64) {
        // Whether `next_op` ran its lookahead for this access: it then started the fetches of
        // the sets and directory slots below, its victims' included (`VICTIM_AHEAD`).
        let ahead = self.run.l1_misses > 0;
        if !ahead {
            // As in `access_beyond_l1`: start the fetches `next_op` did not start.
            let c = &self.caches[f.l3].cache;
            let base = c.set_of(key);
            if G::W20 {
                c.prefetch_w20(base);
            } else {
                c.prefetch_in(base);
            }
            self.cur_llc = (f.l3, base);
            self.dir.prefetch::<D>(key);
            let pr = &self.procs[cx.pi];
            self.cur_page = pr
                .pages
                .prefetch(a.vaddr >> pr.page_shift)
                .unwrap_or(NO_PAGE);
        }
        self.stats.probes[1] += 1;
        let c2 = &mut self.caches[f.l2].cache;
        let hit2 = if G::P8 {
            c2.touch_p8(key)
        } else {
            c2.touch_in(c2.set_of(key), key)
        };
        if hit2.is_some() {
            self.run.l1_misses = 2 * LOOKAHEAD as u8;
            self.stats.hits[1] += 1;
            if !a.write {
                // A read hit in the private second level: the line into the first level only.
                let c1 = &mut self.caches[f.l1].cache;
                if G::P8 {
                    c1.fill_absent_p8(key, SHARED);
                } else {
                    c1.fill_absent(key, SHARED);
                }
                return (cx.lat3[1], 0.0);
            }
            // A `SHARED` line is in the directory; another is private to this domain.
            let maybe_private = hit2 != Some(SHARED);
            return self.coherent::<D, G>(ti, cx, key, t, true, Some(1), maybe_private);
        }
        if !ahead {
            let c2 = &mut self.caches[f.l2].cache;
            let lru2 = if G::P8 { c2.lru_p8(key) } else { c2.lru(key) };
            if let Some(v) = lru2 {
                Self::prefetch_victim2(&self.caches, &self.dir.prefetcher::<D>(), f, v);
            }
        }
        self.stats.probes[2] += 1;
        let base3 = self.set_in(f.l3, key);
        let c3 = &mut self.caches[f.l3].cache;
        let hit3 = if G::W20 {
            c3.touch_w20(base3, key)
        } else {
            c3.touch_in(base3, key)
        };
        let hit = if hit3.is_some() {
            Some(2)
        } else {
            if !ahead {
                let lru3 = if G::W20 {
                    c3.lru_w20(base3)
                } else {
                    c3.lru_in(base3)
                };
                if let Some(v) = lru3 {
                    Self::prefetch_victim3(&self.procs, &self.dir.prefetcher::<D>(), v);
                }
            }
            None
        };
        self.run.l1_misses = 2 * LOOKAHEAD as u8;
        if hit.is_some() {
            self.stats.hits[2] += 1;
        }
        self.l3_tail::<D, G>(ti, cx, f, key, t, a.write, hit3)
    }

    /// The end of `access_beyond_l1_3` once the third level's lookup gave `hit3` (the first two
    /// levels missed): the coherence actions. A private line's are inlined; a line the third
    /// level holds `SHARED` is in the directory, so its page is shared: no need to look the page
    /// up.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn l3_tail<D: Form, G: Geom>(
        &mut self,
        ti: usize,
        cx: &Cx,
        f: Path3,
        key: u64,
        t: f64,
        write: bool,
        hit3: Option<u8>,
    ) -> (f64, f64) {
        let hit = hit3.map(|_| 2);
        if cx.private && hit3 != Some(SHARED) && self.private_page::<D>(cx, key) {
            let l3_dirty = hit3 == Some(MODIFIED);
            return self.coherent_private::<D, G>(ti, cx, f, key, t, write, hit, l3_dirty);
        }
        self.coherent::<D, G>(ti, cx, key, t, write, hit, false)
    }

    /// Starts the host's fetch of what the eviction of `v` from the second level of `f` will
    /// look up: its directory slot, or for a private line left dirty there (`private_lines`)
    /// its set in the third level (`private_victim2`).
    #[inline(always)]
    fn prefetch_victim2(caches: &[CacheInst], dp: &Prefetcher, f: Path3, v: Evicted) {
        match v.state() {
            SHARED => dp.fetch(v.line()),
            MODIFIED => caches[f.l3].cache.prefetch(v.line()),
            _ => {}
        }
    }

    /// `prefetch_victim2` for a third-level victim: a dirty private line's page entry, for its
    /// domain (`private_victim3`) and its writeback.
    #[inline(always)]
    fn prefetch_victim3(procs: &[Process], dp: &Prefetcher, v: Evicted) {
        match v.state() {
            SHARED => dp.fetch(v.line()),
            MODIFIED => {
                if let Some(pr) = procs.get((v.line() >> ASID_SHIFT) as usize) {
                    pr.pages
                        .prefetch(((v.line() & LINE_MASK) << 6) >> pr.page_shift);
                }
            }
            _ => {}
        }
    }

    /// The first entry of `key`'s set in cache `k`: the one `next_op` computed for the current
    /// access when `k` is its last-level cache, else computed here.
    #[inline(always)]
    pub(super) fn set_in(&self, k: usize, key: u64) -> usize {
        let c = &self.caches[k].cache;
        if self.cur_llc.0 == k {
            debug_assert_eq!(self.cur_llc.1, c.set_of(key), "stale last-level set");
            self.cur_llc.1
        } else {
            c.set_of(key)
        }
    }
}
