//! kMAF's NUMA table (000 §4.3.1): per page one NUMA vector, a saturating 1-byte counter per node of
//! the samples (faults) that reached the page from that node. Memory is bounded by configuration.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A multiplicative (Fibonacci) hash for chunk ids: chunk ids are dense integers, for which SipHash's
/// DoS resistance buys nothing and costs most of a sample's time.
#[derive(Default)]
struct ChunkHasher(u64);

impl Hasher for ChunkHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// Pages per chunk: the table stores NUMA vectors in chunks of consecutive pages, so that the
/// spatial locality of real samples makes most lookups hit the last chunk used.
const CHUNK_PAGES: u64 = 512;

/// Bits of a chunk id resolved by each level of the direct-mapped index: chunk ids below 2^26
/// (pages below 2^35, i.e. every user address of a 47-bit address space with 4 KiB pages) are
/// found with two array loads and no hashing; others (57-bit address spaces) go through a hash map.
const LEVEL_BITS: u32 = 13;
/// No chunk in this slot of a second-level index.
const NO_CHUNK: u32 = u32::MAX;

/// Limits of a [`NumaTable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NumaTableConfig {
    /// NUMA nodes of the machine (the length of every NUMA vector).
    pub nodes: usize,
    /// Most pages the table may hold; samples to further pages are counted in
    /// [`NumaTable::dropped`]. Storage is `nodes` bytes per page (eq. 9) in chunks of 512 pages.
    pub max_pages: u64,
}

impl NumaTableConfig {
    /// A table for `nodes` nodes holding up to `max_pages` pages.
    pub fn new(nodes: usize, max_pages: u64) -> Self {
        NumaTableConfig { nodes, max_pages }
    }
}

/// The NUMA vectors of the pages sampled so far, keyed by page index (address >> log2(page size),
/// eq. 1). Counters saturate at 255, as kMAF's 1-byte elements do.
///
/// Layout (for speed: tens of millions of samples per second on one core): the vectors of
/// a chunk of 512 consecutive pages are contiguous in one flat array; a chunk id is found through a
/// two-level direct-mapped index (8192 × 8192 slots, second levels allocated on first use, 32 KiB
/// each, covering 16 GiB of address space each), with a hash map only for chunk ids beyond it.
#[derive(Debug, Clone)]
pub struct NumaTable {
    config: NumaTableConfig,
    /// First level: chunk id >> 13 → second level (chunk id & 8191 → chunk number or NO_CHUNK).
    top: Vec<Option<Box<[u32]>>>,
    /// Chunk ids beyond the direct-mapped index → chunk number.
    far: HashMap<u64, u32, BuildHasherDefault<ChunkHasher>>,
    /// Chunk number → chunk id.
    ids: Vec<u64>,
    /// NUMA vectors: chunk number × 512 pages × `nodes` bytes.
    data: Vec<u8>,
    /// The last chunk used (id, number): samples come in runs on nearby pages.
    last: (u64, u32),
    pages: u64,
    dropped: u64,
    samples: u64,
}

impl NumaTable {
    /// An empty table.
    pub fn new(config: NumaTableConfig) -> Self {
        NumaTable {
            config,
            top: Vec::new(),
            far: HashMap::default(),
            ids: Vec::new(),
            data: Vec::new(),
            last: (u64::MAX, NO_CHUNK),
            pages: 0,
            dropped: 0,
            samples: 0,
        }
    }

    /// The number of the chunk with id `chunk`, if stored.
    #[inline]
    fn find(&self, chunk: u64) -> Option<u32> {
        let hi = (chunk >> LEVEL_BITS) as usize;
        if hi < 1 << LEVEL_BITS {
            let second = self.top.get(hi)?.as_ref()?;
            let at = second[(chunk & ((1 << LEVEL_BITS) - 1)) as usize];
            (at != NO_CHUNK).then_some(at)
        } else {
            self.far.get(&chunk).copied()
        }
    }

    /// Stores a new chunk `chunk`; `None` when the table is full.
    #[cold]
    fn insert(&mut self, chunk: u64) -> Option<u32> {
        if self.pages + CHUNK_PAGES > self.config.max_pages.max(CHUNK_PAGES) {
            return None;
        }
        let at = u32::try_from(self.ids.len())
            .ok()
            .filter(|&a| a != NO_CHUNK)?;
        let hi = (chunk >> LEVEL_BITS) as usize;
        if hi < 1 << LEVEL_BITS {
            if self.top.len() <= hi {
                self.top.resize(hi + 1, None);
            }
            let second = self.top[hi]
                .get_or_insert_with(|| vec![NO_CHUNK; 1 << LEVEL_BITS].into_boxed_slice());
            second[(chunk & ((1 << LEVEL_BITS) - 1)) as usize] = at;
        } else {
            self.far.insert(chunk, at);
        }
        self.ids.push(chunk);
        self.data.resize(
            self.data.len() + CHUNK_PAGES as usize * self.config.nodes,
            0,
        );
        self.pages += CHUNK_PAGES;
        Some(at)
    }

    /// The chunk number of `chunk`, stored on first use; `None` when the table is full.
    #[inline]
    fn chunk(&mut self, chunk: u64) -> Option<u32> {
        if self.last.0 == chunk {
            return Some(self.last.1);
        }
        let at = match self.find(chunk) {
            Some(at) => at,
            None => self.insert(chunk)?,
        };
        self.last = (chunk, at);
        Some(at)
    }

    /// Records one sample of page `page` from node `node` (eq. 1: `page` is the address shifted by the
    /// page size). Returns the page's NUMA vector after the update, or `None` when the page did not fit
    /// (`max_pages` reached) or the node is out of range.
    #[inline]
    pub fn record(&mut self, page: u64, node: usize) -> Option<&[u8]> {
        let start = self.locate(page, node)?;
        Some(self.bump(start, node))
    }

    /// The first half of [`Self::record`]: the offset in the vectors of page `page`'s vector, its
    /// chunk stored on first use; `None`, counted in [`Self::dropped`], when the node is out of range
    /// or the page does not fit. Nothing is counted yet: [`Self::bump`] does that.
    #[inline]
    pub(crate) fn locate(&mut self, page: u64, node: usize) -> Option<usize> {
        if node >= self.config.nodes {
            self.dropped += 1;
            return None;
        }
        let Some(at) = self.chunk(page / CHUNK_PAGES) else {
            self.dropped += 1;
            return None;
        };
        Some(
            (at as usize * CHUNK_PAGES as usize + (page % CHUNK_PAGES) as usize)
                * self.config.nodes,
        )
    }

    /// The second half of [`Self::record`]: counts a sample from `node` in the vector at `start`
    /// (as [`Self::locate`] gave it for that node) and returns the vector.
    #[inline(always)]
    pub(crate) fn bump(&mut self, start: usize, node: usize) -> &[u8] {
        self.samples += 1;
        let nv = &mut self.data[start..start + self.config.nodes];
        if let Some(c) = nv.get_mut(node) {
            *c = c.saturating_add(1);
        }
        nv
    }

    /// Prefetches the vector at `start` (as [`Self::locate`] gave it).
    #[inline(always)]
    pub(crate) fn prefetch(&self, start: usize) {
        if let Some(b) = self.data.get(start) {
            crate::sharing::prefetch(b);
        }
    }

    /// Records samples `(page, node)` in order, exactly as [`Self::record`] one after another
    /// would, without returning the vectors. Faster: in groups of [`crate::sharing::PIPELINE`]
    /// samples, a first pass finds (or stores) every sample's vector and prefetches it, a second
    /// pass counts the samples, so that cache misses overlap. Chunks are stored in the first pass in
    /// sample order, as [`Self::record`] would store them.
    pub fn record_batch(&mut self, samples: &[(u64, u32)]) {
        const NONE: usize = usize::MAX;
        let mut starts = [NONE; crate::sharing::PIPELINE];
        for group in samples.chunks(crate::sharing::PIPELINE) {
            for (s, &(page, node)) in starts.iter_mut().zip(group) {
                *s = self.locate(page, node as usize).unwrap_or(NONE);
                self.prefetch(*s);
            }
            for (&s, &(_, node)) in starts.iter().zip(group) {
                if s != NONE {
                    self.bump(s, node as usize);
                }
            }
        }
    }

    /// The NUMA vector of a page, if it was ever sampled (all zeros for a page in a stored chunk that
    /// was never sampled itself).
    pub fn vector(&self, page: u64) -> Option<&[u8]> {
        let n = self.config.nodes;
        let at = self.find(page / CHUNK_PAGES)? as usize;
        let start = (at * CHUNK_PAGES as usize + (page % CHUNK_PAGES) as usize) * n;
        let nv = &self.data[start..start + n];
        nv.iter().any(|&c| c > 0).then_some(nv)
    }

    /// Every sampled page with its NUMA vector, in page order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &[u8])> {
        let n = self.config.nodes.max(1);
        let mut ids: Vec<(u64, usize)> = self
            .ids
            .iter()
            .enumerate()
            .map(|(at, &id)| (id, at))
            .collect();
        ids.sort_unstable();
        let chunk_bytes = CHUNK_PAGES as usize * self.config.nodes;
        ids.into_iter().flat_map(move |(id, at)| {
            let chunk = &self.data[at * chunk_bytes..(at + 1) * chunk_bytes];
            chunk
                .chunks(n)
                .enumerate()
                .filter(|(_, nv)| nv.iter().any(|&c| c > 0))
                .map(move |(i, nv)| (id * CHUNK_PAGES + i as u64, nv))
        })
    }

    /// Samples recorded.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Samples not recorded because the table was full or the node was out of range.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Bytes of NUMA vectors allocated (eq. 9, rounded up to whole chunks).
    pub fn memory_bytes(&self) -> u64 {
        self.pages * self.config.nodes as u64
    }

    /// Bytes of the index that finds the chunks (32 KiB per 16 GiB of address space used, plus the
    /// first level and the ids), besides [`Self::memory_bytes`].
    pub fn index_bytes(&self) -> u64 {
        let second = self.top.iter().flatten().count() as u64 * (4 << LEVEL_BITS);
        let first = self.top.len() as u64 * 8;
        second + first + self.ids.len() as u64 * 8 + self.far.len() as u64 * 16
    }

    /// The configuration.
    pub fn config(&self) -> NumaTableConfig {
        self.config
    }
}

/// kMAF's sampled exclusivity of a NUMA vector (000 eq. 3): max(NV) / sum(NV); 0 for an empty vector.
pub fn exclusivity(nv: &[u8]) -> f64 {
    let sum: u32 = nv.iter().map(|&c| u32::from(c)).sum();
    if sum == 0 {
        return 0.0;
    }
    f64::from(nv.iter().copied().max().unwrap_or(0)) / f64::from(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_node_and_saturates() {
        let mut t = NumaTable::new(NumaTableConfig::new(4, 1 << 20));
        assert_eq!(t.record(7, 1).unwrap(), &[0, 1, 0, 0]);
        for _ in 0..300 {
            t.record(7, 2);
        }
        assert_eq!(t.vector(7).unwrap(), &[0, 1, 255, 0]);
        assert_eq!(t.vector(8), None);
        assert_eq!(t.samples(), 301);
        assert!(t.record(7, 4).is_none(), "node out of range");
        assert_eq!(t.dropped(), 1);
    }

    #[test]
    fn memory_is_bounded() {
        let mut t = NumaTable::new(NumaTableConfig::new(2, 1024));
        assert!(t.record(0, 0).is_some());
        assert!(t.record(600, 0).is_some());
        assert!(
            t.record(5000, 0).is_none(),
            "a third chunk exceeds 1024 pages"
        );
        assert_eq!(t.memory_bytes(), 2 * 1024);
        let pages: Vec<u64> = t.iter().map(|(p, _)| p).collect();
        assert_eq!(pages, vec![0, 600]);
    }

    #[test]
    fn direct_index_and_far_chunks_agree() {
        let mut t = NumaTable::new(NumaTableConfig::new(2, 1 << 20));
        // A page in the direct-mapped range, one far beyond it (57-bit address space), page 0.
        let near = 0x7f00_1234_5678u64 >> 12;
        let far = 0x00ff_ff00_0000_0000u64 >> 12;
        for (page, node) in [(near, 1), (far, 0), (0, 1), (near, 1), (far, 1)] {
            t.record(page, node);
        }
        assert_eq!(t.vector(near).unwrap(), &[0, 2]);
        assert_eq!(t.vector(far).unwrap(), &[1, 1]);
        assert_eq!(t.vector(0).unwrap(), &[0, 1]);
        assert_eq!(t.vector(near + 1), None, "same chunk, never sampled");
        assert_eq!(t.vector(far + CHUNK_PAGES), None, "chunk never stored");
        let pages: Vec<u64> = t.iter().map(|(p, _)| p).collect();
        assert_eq!(pages, vec![0, near, far]);
        assert_eq!(t.memory_bytes(), 3 * 512 * 2);
        assert!(t.index_bytes() >= 2 * 4 * 8192, "two second-level indexes");
        let mut b = NumaTable::new(NumaTableConfig::new(2, 1 << 20));
        b.record_batch(&[(near, 1), (far, 0), (0, 1), (near, 1), (far, 1)]);
        assert_eq!(b.iter().collect::<Vec<_>>(), t.iter().collect::<Vec<_>>());
        assert_eq!(b.samples(), 5);
    }

    #[test]
    fn exclusivity_is_eq3() {
        assert_eq!(exclusivity(&[1, 4]), 0.8);
        assert_eq!(exclusivity(&[1, 1]), 0.5);
        assert_eq!(exclusivity(&[0, 0]), 0.0);
    }
}
