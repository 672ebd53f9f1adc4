//! A process's page table: for each present virtual page its home node, whether an induced fault is
//! armed on it and until when a migration blocks it, in 4 bytes per page instead of a 24-byte slot.
//!
//! Every simulated LLC miss and every dirty writeback looks its page up. With a hash slot per page
//! (`LineMap<Page>`), a memory-sized working set of 4 KiB pages (1 GiB: 262,144 pages, 12-25 MB of
//! slots) no longer fits the host's caches beside the directory. Here pages are grouped in aligned
//! chunks of `CHUNK` consecutive pages: a small hash table maps a chunk to its run of 4-byte entries
//! (1 MB for that 1 GiB). The rare `blocked_until` of a page being migrated lives in a side table,
//! flagged in its entry. The table is never iterated, so its layout cannot leak into the figures.

use std::cell::Cell;

use crate::linemap::LineMap;

/// Pages per chunk (2 MiB of 4 KiB pages).
const CHUNK_SHIFT: u32 = 9;
const CHUNK: usize = 1 << CHUNK_SHIFT;

const PRESENT: u32 = 1 << 31;
const ARMED: u32 = 1 << 30;
const BLOCKED: u32 = 1 << 29;
const NODE: u32 = 0xffff;
/// `Page::sole` in bits 16..29.
const SOLE_SHIFT: u32 = 16;
const SOLE: u32 = 0x1fff << SOLE_SHIFT;
/// `Page::sole` of a page whose lines more than one private domain has touched.
pub(crate) const SOLE_SHARED: u16 = 0x1fff;

/// A present page as the simulator works on it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Page {
    /// Node position of its memory.
    pub(crate) node: u16,
    /// Accesses wait until then (a migration copying it); 0 when never migrated.
    pub(crate) blocked_until: f64,
    /// An induced fault is armed on it.
    pub(crate) armed: bool,
    /// Which private domain's caches may hold its lines (`Simulator`'s private lines): 0 none yet,
    /// `d + 1` domain `d` only, `SOLE_SHARED` any (its lines are in the directory).
    pub(crate) sole: u16,
}

/// Slots of the chunk memo (`PageTable::memo`): a power of two; 1,024 chunks are 2 GiB of
/// consecutive 4 KiB pages, so a working set of up to that size keeps all of its chunks there.
const MEMO: usize = 1 << 10;

/// Entries `PageTable::entries` has room for before it moves (16 GiB of 4 KiB pages): address
/// space only until written, on huge host pages where the host gives them (`hostmem::Zeroed`).
/// Grown from empty, it would be faulted in 4 KiB at a time and copied at each doubling (with
/// the process's page list, a third of a memory-sized stream's host faults); as a `Vec` with
/// that room, its first MiB would lie before the first 2 MiB boundary of the buffer, on 4 KiB
/// pages.
const ENTRIES_ROOM: usize = 1 << 22;

/// Present pages by virtual page number (the subset of a map the simulator uses).
pub(crate) struct PageTable {
    /// Chunk number (`vp >> CHUNK_SHIFT`) to the start of its entries in `entries`.
    chunks: LineMap<u64>,
    /// A direct-mapped memo in front of `chunks`: slot `c % MEMO` holds `(c + 1, start)` for the
    /// last chunk `c` found there, `(0, 0)` for none. A chunk is never removed and its start never
    /// changes, so a slot is true until another chunk takes it; a lookup whose chunk is not there
    /// probes `chunks` as before. `Cell`s, because lookups and prefetches take the table by shared
    /// reference; a fixed-size array, so that the slot's index needs no bounds check.
    memo: Box<[Cell<(u64, u64)>; MEMO]>,
    /// `CHUNK` entries per chunk; 0 for an absent page. Zeros from `used` on: a new chunk's
    /// entries need no writing.
    entries: crate::hostmem::Zeroed<u32>,
    /// Entries the chunks hold, `CHUNK` each.
    used: usize,
    /// `blocked_until` of the pages whose entry has `BLOCKED`.
    blocked: LineMap<f64>,
}

impl Default for PageTable {
    fn default() -> Self {
        PageTable::with_room(ENTRIES_ROOM)
    }
}

impl PageTable {
    /// An empty table with room for `room` entries before it moves.
    fn with_room(room: usize) -> Self {
        PageTable {
            chunks: LineMap::default(),
            memo: Box::new(std::array::from_fn(|_| Cell::new((0, 0)))),
            entries: crate::hostmem::Zeroed::new(room.max(CHUNK)),
            used: 0,
            blocked: LineMap::default(),
        }
    }
}

impl PageTable {
    /// The index of `vp`'s entry, if its chunk exists: from the memo, else from `chunks` (and
    /// then memoised).
    #[inline]
    fn index(&self, vp: u64) -> Option<usize> {
        let c = vp >> CHUNK_SHIFT;
        let within = vp as usize & (CHUNK - 1);
        // In bounds by construction: the memo has `MEMO` slots, a power of two.
        let slot = &self.memo[c as usize & (MEMO - 1)];
        let (tag, start) = slot.get();
        if tag == c + 1 {
            return Some(start as usize + within);
        }
        let start = *self.chunks.get(&c)?;
        slot.set((c + 1, start));
        Some(start as usize + within)
    }

    /// The page `vp`, if present.
    #[inline(always)]
    pub(crate) fn get(&self, vp: u64) -> Option<Page> {
        self.get_at(self.index(vp)?, vp)
    }

    /// `get(vp)` for the page at `slot` (from `slot` or `prefetch` for `vp`): no lookup of its
    /// chunk.
    #[inline(always)]
    pub(crate) fn get_at(&self, slot: usize, vp: u64) -> Option<Page> {
        debug_assert_eq!(self.index(vp), Some(slot), "slot of another page");
        let e = *self.entries.get(slot)?;
        if e & PRESENT == 0 {
            return None;
        }
        let blocked_until = if e & BLOCKED != 0 {
            self.blocked.get(&vp).copied().unwrap_or(0.0)
        } else {
            0.0
        };
        Some(Page {
            node: (e & NODE) as u16,
            blocked_until,
            armed: e & ARMED != 0,
            sole: ((e & SOLE) >> SOLE_SHIFT) as u16,
        })
    }

    /// The home node of the page at `slot` (`slot`, `prefetch`), None if absent.
    #[inline(always)]
    pub(crate) fn node_at(&self, slot: usize) -> Option<u16> {
        let e = *self.entries.get(slot)?;
        (e & PRESENT != 0).then_some((e & NODE) as u16)
    }

    /// `get(vp)`'s `sole`, without the rest (tests).
    #[cfg(test)]
    pub(crate) fn sole(&self, vp: u64) -> Option<u16> {
        self.sole_at(self.index(vp)?)
    }

    /// The slot of page `vp`'s entry if its chunk exists (the page may be absent): what
    /// `sole_at` and `set_sole_at` take. A slot stays the page's for the table's life.
    #[inline(always)]
    pub(crate) fn slot(&self, vp: u64) -> Option<usize> {
        self.index(vp)
    }

    /// The `sole` of the page at `slot` (from `slot` or `prefetch`), None if absent.
    #[inline(always)]
    pub(crate) fn sole_at(&self, slot: usize) -> Option<u16> {
        let e = *self.entries.get(slot)?;
        (e & PRESENT != 0).then_some(((e & SOLE) >> SOLE_SHIFT) as u16)
    }

    /// Sets the `sole` of the present page `vp` (nothing if absent).
    #[inline]
    pub(crate) fn set_sole(&mut self, vp: u64, sole: u16) {
        if let Some(i) = self.index(vp) {
            self.set_sole_at(i, sole);
        }
    }

    /// `set_sole` of the page at `slot`.
    #[inline]
    pub(crate) fn set_sole_at(&mut self, slot: usize, sole: u16) {
        debug_assert!(sole <= SOLE_SHARED, "sole {sole} does not fit");
        if let Some(e) = self.entries.get_mut(slot) {
            if *e & PRESENT != 0 {
                *e = (*e & !SOLE) | (u32::from(sole) << SOLE_SHIFT) & SOLE;
            }
        }
    }

    /// Sets page `vp`, adding it if absent.
    #[inline(always)]
    pub(crate) fn insert(&mut self, vp: u64, pg: Page) {
        self.insert_in(self.index(vp), vp, pg);
    }

    /// `insert` with the page's slot if its chunk exists (`slot`, `prefetch`; None if not).
    #[inline(always)]
    pub(crate) fn insert_in(&mut self, slot: Option<usize>, vp: u64, pg: Page) {
        debug_assert_eq!(self.index(vp), slot, "slot of another page");
        let i = match slot {
            Some(i) => i,
            None => {
                let start = self.used;
                if start + CHUNK > self.entries.len() {
                    // Out of room (more than `ENTRIES_ROOM` pages): twice the room, a copy.
                    let mut more = crate::hostmem::Zeroed::new(2 * self.entries.len());
                    more[..start].copy_from_slice(&self.entries[..start]);
                    self.entries = more;
                }
                self.used = start + CHUNK;
                self.chunks.insert(vp >> CHUNK_SHIFT, start as u64);
                start + (vp as usize & (CHUNK - 1))
            }
        };
        debug_assert!(pg.sole <= SOLE_SHARED, "sole {} does not fit", pg.sole);
        let mut e = PRESENT | u32::from(pg.node) | (u32::from(pg.sole) << SOLE_SHIFT) & SOLE;
        if pg.armed {
            e |= ARMED;
        }
        if pg.blocked_until != 0.0 {
            e |= BLOCKED;
            self.blocked.insert(vp, pg.blocked_until);
        } else if self.entries[i] & BLOCKED != 0 {
            self.blocked.remove(&vp);
        }
        self.entries[i] = e;
    }

    /// Starts the host's fetch of the entry of `vp` (see `hostmem::prefetch`); a lookup of its
    /// chunk, whose small table stays in the host's caches. Returns the entry's slot (`slot`).
    #[inline]
    pub(crate) fn prefetch(&self, vp: u64) -> Option<usize> {
        let i = self.index(vp)?;
        crate::hostmem::prefetch(self.entries.as_ptr().wrapping_add(i));
        Some(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn page_table_agrees_with_hashmap() {
        agrees_with_hashmap(PageTable::default());
    }

    /// A table with room for one chunk moves to twice the room at each chunk past it: the
    /// entries keep their pages (fails if the move copies less than the used entries, or lets
    /// a new chunk overlap an old one).
    #[test]
    fn page_table_moves_past_its_room() {
        let t = PageTable::with_room(CHUNK);
        assert_eq!(t.entries.len(), CHUNK);
        let t = agrees_with_hashmap(t);
        assert!(
            t.entries.len() >= t.used && t.used > 8 * CHUNK,
            "{}",
            t.used
        );
    }

    /// Random inserts, lookups and `set_sole`s against a `HashMap`; returns the table.
    fn agrees_with_hashmap(mut t: PageTable) -> PageTable {
        let mut r: HashMap<u64, Page> = HashMap::new();
        let mut rng = numaff_machine::rng::SplitMix64::new(0x2545_f491_4f6c_dd1d);
        for step in 0..200_000u32 {
            let x = rng.next_u64();
            // Dense runs and far-apart pages (workloads place arrays terabytes apart), and the
            // last pages of the address space.
            let vp = match x % 5 {
                0 => (x >> 8) % 3000,
                1 => (1 << 28) + (x >> 8) % 700,
                2 => u64::MAX - (x >> 8) % 600,
                _ => (((x >> 8) % 40) << 20) | ((x >> 40) % 64),
            };
            let pg = Page {
                node: (x >> 16) as u16,
                blocked_until: if x.is_multiple_of(7) {
                    f64::from(step) + 0.5
                } else {
                    0.0
                },
                armed: (x >> 3).is_multiple_of(2),
                sole: ((x >> 24) % u64::from(SOLE_SHARED + 1)) as u16,
            };
            if (x >> 5).is_multiple_of(3) {
                t.insert(vp, pg);
                r.insert(vp, pg);
            }
            assert_eq!(t.get(vp), r.get(&vp).copied(), "page {vp} at step {step}");
            assert_eq!(t.sole(vp), r.get(&vp).map(|p| p.sole), "sole of {vp}");
            if (x >> 9).is_multiple_of(5) {
                let sole = ((x >> 30) % u64::from(SOLE_SHARED + 1)) as u16;
                t.set_sole(vp, sole);
                if let Some(p) = r.get_mut(&vp) {
                    p.sole = sole;
                }
                assert_eq!(t.get(vp), r.get(&vp).copied(), "page {vp} after set_sole");
            }
            // The slot `prefetch` gives is the page's.
            let at = t.prefetch(vp).and_then(|i| t.sole_at(i));
            assert_eq!(at, r.get(&vp).map(|p| p.sole), "slot of {vp}");
        }
        for (&vp, &pg) in &r {
            assert_eq!(t.get(vp), Some(pg), "final page {vp}");
        }
        assert_eq!(t.get(1 << 40), None);
        t
    }

    /// The chunk memo under chunks that share its slots: two chunks `MEMO` apart alternate in one
    /// slot, an absent chunk is looked up in a slot that holds a present one, and every page keeps
    /// its own entry (fails if the memo's tag is not compared, or is the chunk number itself, which
    /// would take chunk 0 for the empty slot's).
    #[test]
    fn page_chunk_memo_keeps_colliding_chunks_apart() {
        let mut t = PageTable::default();
        let chunk = |c: u64, k: u64| (c << CHUNK_SHIFT) | k;
        let far = MEMO as u64;
        let pg = |node: u16| Page {
            node,
            blocked_until: 0.0,
            armed: false,
            sole: 0,
        };
        // An absent chunk 0 while its memo slot is still empty.
        assert_eq!(t.get(chunk(0, 3)), None);
        t.insert(chunk(0, 3), pg(1));
        t.insert(chunk(far, 3), pg(2));
        t.insert(chunk(3 * far, 5), pg(4));
        for round in 0..3 {
            assert_eq!(t.get(chunk(0, 3)), Some(pg(1)), "round {round}");
            assert_eq!(t.get(chunk(far, 3)), Some(pg(2)), "round {round}");
            assert_eq!(t.get(chunk(2 * far, 3)), None, "round {round}");
            assert_eq!(t.get(chunk(far, 4)), None, "round {round}");
            assert_eq!(t.get(chunk(3 * far, 5)), Some(pg(4)), "round {round}");
            t.prefetch(chunk(2 * far, 3));
        }
        t.insert(chunk(far, 3), pg(7));
        assert_eq!(t.get(chunk(far, 3)), Some(pg(7)));
        assert_eq!(t.get(chunk(0, 3)), Some(pg(1)));
    }
}
