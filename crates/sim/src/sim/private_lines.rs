//! Private lines: a line of a page that one private domain alone has touched keeps its coherence
//! state in that domain's cache tags instead of the directory, with the directory's figures.

use super::{slot_ahead, Cx, Geom, Path3, Simulator, ASID_SHIFT, LINE_MASK, NO_PAGE};
use crate::cache::{EXCLUSIVE, MODIFIED, MODIFIED_OUTER, SHARED};
use crate::dir::{DirEntry, Form};
use crate::pages::SOLE_SHARED;

impl Simulator {
    /// Whether the page of `key` is private to `cx`'s domain (`private_lines`), taking it if no
    /// domain has touched it yet and the process still takes pages (`Process::takes_pages`;
    /// else it is shared from the start). A page private to another domain is shared from now
    /// on (`share_page`) and is not.
    #[inline(always)]
    pub(super) fn private_page<D: Form>(&mut self, cx: &Cx, key: u64) -> bool {
        let mine = cx.domain + 1;
        let pr = &mut self.procs[cx.pi];
        let vp = ((key & LINE_MASK) << 6) >> pr.page_shift;
        let slot = slot_ahead(self.cur_page, &pr.pages, vp);
        debug_assert!(
            self.cur_page == NO_PAGE || pr.pages.slot(vp) == slot,
            "stale page slot"
        );
        let sole = slot.and_then(|i| pr.pages.sole_at(i));
        match sole {
            Some(s) if s == mine => true,
            // Not present (a first touch: `memory` gives the page to this domain, or makes it
            // shared), or present but untouched: no cache holds a line of either.
            None | Some(0) => {
                let take = pr.takes_pages();
                if let Some(i) = slot.filter(|_| sole.is_some()) {
                    pr.pages
                        .set_sole_at(i, if take { mine } else { SOLE_SHARED });
                }
                pr.private_pages += u64::from(take);
                take
            }
            Some(SOLE_SHARED) => false,
            Some(other) => {
                self.share_page::<D>(cx.pi, vp, usize::from(other - 1));
                false
            }
        }
    }

    /// A page private to domain `d` becomes shared: each of its lines that `d`'s caches hold
    /// gets the directory entry the directory would have (`private_entry`), and its state in
    /// those caches becomes `SHARED`, as every directory line's.
    fn share_page<D: Form>(&mut self, pi: usize, vp: u64, d: usize) {
        let pr = &mut self.procs[pi];
        pr.pages.set_sole(vp, SOLE_SHARED);
        pr.turned_shared += 1;
        let shift = pr.page_shift;
        let Some(&rep) = self.domain_pu.get(d) else {
            return;
        };
        let Some(f) = self.pus[rep].p3 else { return };
        let first = ((pi as u64) << ASID_SHIFT) | ((vp << (shift - 6)) & LINE_MASK);
        for line in first..first + (1 << (shift - 6)) {
            // Each level's state, now `SHARED` (a `MODIFIED_OUTER` copy in the second level
            // means the third holds the line `MODIFIED`).
            let s2 = self.caches[f.l2].cache.take_state(line, SHARED);
            let c3 = &mut self.caches[f.l3].cache;
            let s3 = if s2 == Some(MODIFIED_OUTER) {
                c3.set_state(line, SHARED).then_some(MODIFIED)
            } else {
                c3.take_state(line, SHARED)
            };
            debug_assert!(
                s2 != Some(MODIFIED_OUTER) || s3.is_some(),
                "L3 lost {line:#x}"
            );
            if let Some(e) = Self::private_entry_of(f, rep, s2, s3) {
                self.dir.insert::<D>(line, e);
            }
        }
    }

    /// The directory entry of a line of a page private to PU `rep`'s domain, as the directory
    /// would hold it: its holders are the domain's second and third levels that hold it, its
    /// owner the domain (any of its PUs: they share every cache, so the directory cannot tell
    /// them apart), dirty if either level has a written state. None if neither holds it.
    #[cfg(test)]
    fn private_entry(&self, rep: usize, line: u64) -> Option<DirEntry> {
        let f = self.pus.get(rep)?.p3?;
        let s2 = self.caches[f.l2].cache.state_of(line);
        let s3 = self.caches[f.l3].cache.state_of(line);
        Self::private_entry_of(f, rep, s2, s3)
    }

    /// `private_entry` from the line's states `s2` and `s3` in the second and third levels of
    /// `f` (None: not held there).
    fn private_entry_of(f: Path3, rep: usize, s2: Option<u8>, s3: Option<u8>) -> Option<DirEntry> {
        if s2.is_none() && s3.is_none() {
            return None;
        }
        let mut holders = [0u64; 2];
        for (st, b) in [(s2, f.b2), (s3, f.b3)] {
            if st.is_some() {
                holders[b / 64] |= 1 << (b % 64);
            }
        }
        Some(DirEntry {
            holders,
            owner: rep as u32 + 1,
            dirty: matches!(s2, Some(MODIFIED | MODIFIED_OUTER)) || s3 == Some(MODIFIED),
        })
    }

    /// `coherent` for a line of a page private to `cx`'s domain (`private_lines`): no other
    /// cache holds it, so no invalidation and no transfer; the latency is the hit's or memory's.
    /// The states carry the dirty bit (`private_lines`): a write that misses or hits the third
    /// level leaves the line `MODIFIED` there and `MODIFIED_OUTER` in the second; one that hits
    /// the first or second level marks the second's copy written (`written`: the third's copy,
    /// if any, is clean then). A read hitting the third level takes its state inward. The first
    /// level gets the directory's state for a line held alone: `MODIFIED` if dirty, else
    /// `EXCLUSIVE`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn coherent_private<D: Form, G: Geom>(
        &mut self,
        ti: usize,
        cx: &Cx,
        f: Path3,
        key: u64,
        t: f64,
        write: bool,
        hit: Option<usize>,
        l3_dirty: bool,
    ) -> (f64, f64) {
        let (lat, stall) = match hit {
            Some(pos) => (cx.lat(pos, &self.pus), 0.0),
            None => {
                self.stats.llc_misses += 1;
                self.memory(ti, cx, key, t, cx.domain + 1)
            }
        };
        let missed = hit.unwrap_or(usize::MAX);
        debug_assert!(
            write || hit.is_none_or(|pos| pos >= 2),
            "a private read hit in L1/L2"
        );
        match hit {
            // A write hitting the first or second level, which holds the line (it keeps the
            // first inclusive): the first level's copy becomes `MODIFIED`.
            Some(pos @ (0 | 1)) => {
                let c2 = &mut self.caches[f.l2].cache;
                if pos == 1 {
                    // Just made most recently used there by `access_beyond_l1_3`.
                    c2.written_mru(c2.set_of(key));
                } else {
                    c2.write_private(key);
                }
                self.fill3::<D, G>(f, key, 1, missed, [MODIFIED; 3], t);
            }
            _ => {
                // The states without a branch on them (whether a line is dirty is as random as
                // the writes): clean `EXCLUSIVE` (1) everywhere, or `MODIFIED` (2) in the first
                // and third levels and `MODIFIED_OUTER` (3) in the second.
                let dirty = u8::from(write || l3_dirty);
                if hit.is_some() {
                    // Hit in the third level, just made most recently used there.
                    let base = self.set_in(f.l3, key);
                    self.caches[f.l3]
                        .cache
                        .set_mru_state(base, EXCLUSIVE + dirty);
                }
                let states = [EXCLUSIVE + dirty, EXCLUSIVE + 2 * dirty, EXCLUSIVE + dirty];
                let upto = if hit.is_some() { 2 } else { 3 };
                self.fill3::<D, G>(f, key, upto, missed, states, t);
            }
        }
        (lat, stall)
    }

    /// A private line left the second level of `f` `MODIFIED` (`private_lines`): the third
    /// level's copy, if any, is clean; it takes the dirty bit (as the directory keeps the entry
    /// dirty while a cache of its owner holds it), else the line is written back.
    #[inline]
    pub(super) fn private_victim2(&mut self, f: Path3, line: u64, t: f64) {
        if !self.caches[f.l3].cache.set_state(line, MODIFIED) {
            self.writeback(line, self.caches[f.l2].node, t);
        }
    }

    /// A private line left the third level `f.l3` `MODIFIED` (`private_lines`): if its domain's
    /// second level holds it (`MODIFIED_OUTER`), that copy keeps the dirty bit, else the line is
    /// written back. The domain is the page's (`Page::sole`); it may be another than `f`'s, on
    /// a shared third level.
    pub(super) fn private_victim3(&mut self, f: Path3, line: u64, t: f64) {
        let Some(pr) = self.procs.get((line >> ASID_SHIFT) as usize) else {
            return;
        };
        // The page's entry, looked up once for its domain and its home.
        let slot = pr.pages.slot(((line & LINE_MASK) << 6) >> pr.page_shift);
        let home = slot.and_then(|s| pr.pages.node_at(s));
        let held = slot
            .and_then(|s| pr.pages.sole_at(s))
            .and_then(|sole| self.domain_pu.get(usize::from(sole).checked_sub(1)?))
            .and_then(|&rep| self.pus[rep].p3)
            .is_some_and(|g| self.caches[g.l2].cache.set_state(line, MODIFIED));
        if !held {
            if let Some(home) = home {
                self.write_back_to(usize::from(home), self.caches[f.l3].node, t);
            }
        }
    }

    /// The private domain whose tags hold `line`'s coherence state, if its page is private
    /// (`private_lines`; tests).
    #[cfg(test)]
    pub(super) fn private_domain(&self, line: u64) -> Option<usize> {
        let pr = self.procs.get((line >> ASID_SHIFT) as usize)?;
        let vp = ((line & LINE_MASK) << 6) >> pr.page_shift;
        let s = pr.pages.sole(vp)?;
        let private = self.private_lines && pr.page_shift == 12 && s != 0 && s != SOLE_SHARED;
        private.then(|| usize::from(s - 1))
    }

    /// The coherence entry of `line` wherever it is kept: the directory's, or for a private line
    /// the one its tags give (`private_entry`), which must then have none in the directory.
    #[cfg(test)]
    pub(super) fn coherence_entry(&self, line: u64) -> Option<DirEntry> {
        match self.private_domain(line) {
            Some(d) => {
                let e = self.dir.get_any(line);
                assert!(
                    e.is_none(),
                    "{line:#x} is private and in the directory: {e:?}"
                );
                self.private_entry(self.domain_pu[d], line)
            }
            None => self.dir.get_any(line),
        }
    }
}
