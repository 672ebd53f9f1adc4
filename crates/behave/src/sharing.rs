//! kMAF's sharing detection (000 §4.3.2, Fig. 2-3): a hash table of memory blocks, each with the ids
//! of the threads that last accessed it (MRU, LRU), feeding a sharing matrix between threads.

/// Limits of a [`SharingTable`]. Defaults are kMAF's Table 3: 1 M blocks of 256 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharingTableConfig {
    /// Entries of the hash table; rounded up to a power of two.
    pub blocks: usize,
    /// Bytes per memory block; a power of two.
    pub block_bytes: u64,
}

impl Default for SharingTableConfig {
    fn default() -> Self {
        SharingTableConfig {
            blocks: 1 << 20,
            block_bytes: 256,
        }
    }
}

/// No thread in this position of a block vector; as a thread id, no access (nothing recorded).
pub(crate) const EMPTY: u16 = u16::MAX;

/// One entry (8 bytes): a 32-bit fingerprint of the block it holds and its block vector (MRU, LRU
/// thread ids).
#[derive(Debug, Clone, Copy)]
struct Entry {
    tag: u32,
    mru: u16,
    lru: u16,
}

/// Accesses per group of the two passes of the batch paths ([`SharingTable::record_batch`],
/// [`crate::NumaTable::record_batch`], [`crate::Tables::record_batch`]: all of a group's entries are
/// prefetched before the first is updated); tuned with `cargo bench -p numaff-behave --bench ingest`.
pub const PIPELINE: usize = 64;

/// Asks the cpu to bring `value`'s cache line into the caches (a hint; nothing on other targets).
#[inline(always)]
pub(crate) fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and has no effect on the program's state; SSE (for the
    // instruction) is part of the x86-64 baseline.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((value as *const T).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

/// Asks Linux to back the (not yet touched) buffer of `v` with transparent huge pages where it
/// covers whole 2 MiB pages: random accesses to a table of megabytes then miss the TLB far less
/// (for ingest speed). A hint only; nothing happens where THP is off or on other systems.
fn advise_huge_pages<T>(v: &Vec<T>) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let start = v.as_ptr() as usize;
        let end = start + v.capacity() * std::mem::size_of::<T>();
        let (lo, hi) = (start.next_multiple_of(HUGE), end / HUGE * HUGE);
        if hi > lo {
            // SAFETY: madvise(MADV_HUGEPAGE) on whole pages inside v's own allocation changes how
            // the kernel backs them, not their contents or validity.
            unsafe {
                libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = v;
}

/// The tag of an empty entry.
const NO_BLOCK: u32 = u32::MAX;

/// A 32-bit fingerprint of a block number, never `NO_BLOCK`.
#[inline(always)]
fn tag_of(block: u64) -> u32 {
    let t = (block ^ (block >> 32)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
    (t as u32).min(NO_BLOCK - 1)
}

/// The sharing table. Thread ids are dense indexes (0, 1, 2, ...) below 65,535 (kMAF stores 2-byte
/// ids); the caller maps kernel tids to them.
///
/// Reading of eq. 2 (garbled in the text as `hash(address) >> log2(block size)`): the block number
/// `address >> log2(block size)` is hashed with the kernel's `hash_64` (multiplication by the 64-bit
/// golden ratio, top bits kept) into the table. Eq. 10 counts 4 bytes per entry (two ids, no tag),
/// but the text says a conflicting block overwrites the old one, which needs to know the old block:
/// we keep a 32-bit fingerprint of the block number as a tag (8 bytes per entry in all, reported by
/// [`SharingTable::memory_bytes`]), so that two blocks share a block vector only when their
/// fingerprints collide as well as their slots (about one in 4 billion conflicts).
#[derive(Debug, Clone)]
pub struct SharingTable {
    entries: Vec<Entry>,
    bits: u32,
    block_shift: u32,
    conflicts: u64,
}

impl SharingTable {
    /// An empty table.
    pub fn new(config: SharingTableConfig) -> Self {
        let blocks = config.blocks.max(1).next_power_of_two();
        let mut entries = Vec::with_capacity(blocks);
        advise_huge_pages(&entries);
        entries.resize(
            blocks,
            Entry {
                tag: NO_BLOCK,
                mru: EMPTY,
                lru: EMPTY,
            },
        );
        SharingTable {
            entries,
            bits: blocks.trailing_zeros(),
            block_shift: config
                .block_bytes
                .max(1)
                .next_power_of_two()
                .trailing_zeros(),
            conflicts: 0,
        }
    }

    #[inline(always)]
    fn slot(&self, block: u64) -> usize {
        if self.bits == 0 {
            return 0;
        }
        // Linux' hash_64(val, bits): val * GOLDEN_RATIO_64 >> (64 - bits).
        (block.wrapping_mul(0x61C8_8646_80B5_83EB) >> (64 - self.bits)) as usize
    }

    /// Records an access of thread `thread` to `address` and adds to `matrix` one unit of sharing
    /// between `thread` and each other thread of the block vector (000 §4.3.2): `matrix[thread][u]`
    /// for the MRU and LRU threads `u`. The block vector then holds `thread` at MRU and the former
    /// MRU at LRU. A thread that is already MRU leaves the vector as it is; one that is LRU swaps
    /// with the MRU (the vector never holds a thread twice). Ids of `EMPTY` (65,535) are ignored.
    #[inline]
    pub fn record(&mut self, thread: u16, address: u64, matrix: &mut SharingMatrix) {
        let (slot, tag) = self.locate(address);
        self.update(slot, tag, thread, matrix);
    }

    /// The entry (slot) and fingerprint of the block holding `address` (eq. 2).
    #[inline(always)]
    pub(crate) fn locate(&self, address: u64) -> (usize, u32) {
        let block = address >> self.block_shift;
        (self.slot(block), tag_of(block))
    }

    /// Prefetches entry `slot`.
    #[inline(always)]
    pub(crate) fn prefetch(&self, slot: usize) {
        if let Some(e) = self.entries.get(slot) {
            prefetch(e);
        }
    }

    /// The update of [`Self::record`] for the block with fingerprint `tag` in entry `slot` (as
    /// [`Self::locate`] gives them). Returns the block vector (MRU, LRU) from before the update, as
    /// [`Self::block_vector`] would have given it (`EMPTY` for empty positions, both `EMPTY` for
    /// `thread` = `EMPTY`, which changes nothing).
    #[inline(always)]
    pub(crate) fn update(
        &mut self,
        slot: usize,
        tag: u32,
        thread: u16,
        matrix: &mut SharingMatrix,
    ) -> (u16, u16) {
        if thread == EMPTY {
            return (EMPTY, EMPTY);
        }
        let Some(e) = self.entries.get_mut(slot) else {
            return (EMPTY, EMPTY);
        };
        if e.tag != tag {
            if e.tag != NO_BLOCK {
                self.conflicts += 1;
            }
            *e = Entry {
                tag,
                mru: EMPTY,
                lru: EMPTY,
            };
        }
        let before = (e.mru, e.lru);
        for u in [e.mru, e.lru] {
            if u != EMPTY && u != thread {
                matrix.add(thread as usize, u as usize, 1);
            }
        }
        if e.mru != thread {
            e.lru = e.mru;
            e.mru = thread;
        }
        before
    }

    /// Records accesses `(thread, address)` in order, exactly as [`Self::record`] one after another
    /// would, but faster, by software pipelining in groups of [`PIPELINE`] accesses: a first pass
    /// computes every access's entry and fingerprint and prefetches the entries, a second pass
    /// updates them, so that the cache misses of a table larger than the caches (8 MiB by default)
    /// overlap instead of stalling one access at a time. A later update of the same entry inside a
    /// group sees the earlier one, as the second pass runs in order.
    pub fn record_batch(&mut self, accesses: &[(u16, u64)], matrix: &mut SharingMatrix) {
        let mut slots = [(0usize, 0u32); PIPELINE];
        for group in accesses.chunks(PIPELINE) {
            for (s, &(_, address)) in slots.iter_mut().zip(group) {
                *s = self.locate(address);
                self.prefetch(s.0);
            }
            for (&(slot, tag), &(thread, _)) in slots.iter().zip(group) {
                self.update(slot, tag, thread, matrix);
            }
        }
    }

    /// The block vector (MRU, LRU) of the block holding `address`, `None` for empty positions.
    pub fn block_vector(&self, address: u64) -> (Option<u16>, Option<u16>) {
        let block = address >> self.block_shift;
        let e = &self.entries[self.slot(block)];
        if e.tag != tag_of(block) {
            return (None, None);
        }
        let some = |t: u16| (t != EMPTY).then_some(t);
        (some(e.mru), some(e.lru))
    }

    /// Blocks that replaced another block in their entry.
    pub fn conflicts(&self) -> u64 {
        self.conflicts
    }

    /// Bytes of the table (8 per entry).
    pub fn memory_bytes(&self) -> u64 {
        (self.entries.len() * std::mem::size_of::<Entry>()) as u64
    }
}

/// The sharing matrix (000 §4.3.2, eq. 11): 4-byte counts between threads, growing as threads appear.
/// `get(t, u)` counts the accesses of `t` to blocks that `u` had accessed just before.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SharingMatrix {
    n: usize,
    cells: Vec<u32>,
}

impl SharingMatrix {
    /// An empty matrix.
    pub fn new() -> Self {
        Self::default()
    }

    /// Threads covered (the largest id seen plus one).
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether no thread was seen.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    #[inline]
    fn grow(&mut self, n: usize) {
        if n <= self.n {
            return;
        }
        self.grow_to(n);
    }

    #[cold]
    fn grow_to(&mut self, n: usize) {
        let mut cells = vec![0u32; n * n];
        for i in 0..self.n {
            cells[i * n..i * n + self.n].copy_from_slice(&self.cells[i * self.n..(i + 1) * self.n]);
        }
        self.cells = cells;
        self.n = n;
    }

    /// Adds `v` to cell (t, u), saturating.
    #[inline]
    pub fn add(&mut self, t: usize, u: usize, v: u32) {
        self.grow(t.max(u) + 1);
        let c = &mut self.cells[t * self.n + u];
        *c = c.saturating_add(v);
    }

    /// Cell (t, u); 0 outside the matrix.
    pub fn get(&self, t: usize, u: usize) -> u32 {
        if t < self.n && u < self.n {
            self.cells[t * self.n + u]
        } else {
            0
        }
    }

    /// The matrix as rows of numbers, made symmetric (t, u) + (u, t): sharing is mutual, as the
    /// mapping algorithms expect.
    pub fn symmetric_rows(&self) -> Vec<Vec<f64>> {
        (0..self.n)
            .map(|t| {
                (0..self.n)
                    .map(|u| f64::from(self.get(t, u)) + f64::from(self.get(u, t)))
                    .collect()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kMAF Fig. 3: thread 3 (on node 1) faults in a block last accessed by T0 (MRU) and T2 (LRU).
    #[test]
    fn kmaf_fig3_update_is_exact() {
        let mut table = SharingTable::new(SharingTableConfig::default());
        let mut matrix = SharingMatrix::new();
        let addr = 0x7f00_0000_1040;
        table.record(2, addr, &mut matrix);
        table.record(0, addr + 8, &mut matrix); // same 256-byte block
        assert_eq!(table.block_vector(addr), (Some(0), Some(2)));
        let before = matrix.clone();
        table.record(3, addr + 100, &mut matrix);
        assert_eq!(table.block_vector(addr), (Some(3), Some(0)));
        // Exactly (3,0) and (3,2) gained one; nothing else changed.
        for t in 0..4 {
            for u in 0..4 {
                let gained = matrix.get(t, u) - before.get(t, u);
                let expected = u32::from((t, u) == (3, 0) || (t, u) == (3, 2));
                assert_eq!(gained, expected, "cell ({t},{u})");
            }
        }
    }

    #[test]
    fn repeated_and_swapped_accesses_keep_distinct_ids() {
        let mut table = SharingTable::new(SharingTableConfig::default());
        let mut m = SharingMatrix::new();
        table.record(1, 0, &mut m);
        table.record(1, 0, &mut m);
        assert_eq!(table.block_vector(0), (Some(1), None));
        assert_eq!(m.get(1, 1), 0, "no sharing with oneself");
        table.record(2, 0, &mut m);
        table.record(1, 0, &mut m);
        assert_eq!(table.block_vector(0), (Some(1), Some(2)));
        assert_eq!(m.get(1, 2), 1);
        assert_eq!(m.get(2, 1), 1);
    }

    /// The batch path gives the same table and matrix as one `record` after another (the Fig. 3
    /// semantics hold for it too).
    #[test]
    fn record_batch_equals_records() {
        let mut rng = numaff_machine::rng::SplitMix64::new(0);
        let accesses: Vec<(u16, u64)> = (0..5000)
            .map(|_| {
                let x = rng.next_u64();
                ((x % 6) as u16, 0x7f00_0000_0000 + (x >> 20) % (1 << 16))
            })
            .collect();
        let config = SharingTableConfig {
            blocks: 64,
            block_bytes: 256,
        };
        let (mut one, mut m1) = (SharingTable::new(config), SharingMatrix::new());
        for &(t, a) in &accesses {
            one.record(t, a, &mut m1);
        }
        let (mut batch, mut m2) = (SharingTable::new(config), SharingMatrix::new());
        for chunk in accesses.chunks(100) {
            batch.record_batch(chunk, &mut m2);
        }
        // One call over the whole stream: 78 full pipeline groups and a partial one.
        let (mut whole, mut m3) = (SharingTable::new(config), SharingMatrix::new());
        whole.record_batch(&accesses, &mut m3);
        assert_eq!(m1, m2);
        assert_eq!(m1, m3);
        assert_eq!(one.conflicts(), whole.conflicts());
        assert!(m1.get(1, 2) > 0, "the stream shares blocks");
        assert_eq!(one.conflicts(), batch.conflicts());
        for &(_, a) in &accesses {
            assert_eq!(one.block_vector(a), batch.block_vector(a));
            assert_eq!(one.block_vector(a), whole.block_vector(a));
        }
    }

    #[test]
    fn other_blocks_do_not_share() {
        let mut table = SharingTable::new(SharingTableConfig::default());
        let mut m = SharingMatrix::new();
        table.record(0, 0, &mut m);
        table.record(1, 256, &mut m);
        assert_eq!(m.get(1, 0), 0);
        // A one-entry table: every block conflicts with the previous one, and the tag keeps them apart.
        let mut tiny = SharingTable::new(SharingTableConfig {
            blocks: 1,
            block_bytes: 256,
        });
        tiny.record(0, 0, &mut m);
        tiny.record(1, 4096, &mut m);
        assert_eq!(tiny.conflicts(), 1);
        assert_eq!(m.get(1, 0), 0);
        assert!(m.is_empty() && m.symmetric_rows().is_empty());
    }
}
