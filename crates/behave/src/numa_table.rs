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
#[derive(Debug, Clone)]
pub struct NumaTable {
    config: NumaTableConfig,
    /// Chunk id → index into `storage`.
    index: HashMap<u64, usize, BuildHasherDefault<ChunkHasher>>,
    /// NUMA vectors of 512 pages per chunk.
    storage: Vec<Box<[u8]>>,
    /// The last chunk used (id, index): samples come in runs on nearby pages.
    last: Option<(u64, usize)>,
    pages: u64,
    dropped: u64,
    samples: u64,
}

impl NumaTable {
    /// An empty table.
    pub fn new(config: NumaTableConfig) -> Self {
        NumaTable {
            config,
            index: HashMap::default(),
            storage: Vec::new(),
            last: None,
            pages: 0,
            dropped: 0,
            samples: 0,
        }
    }

    /// Records one sample of page `page` from node `node` (eq. 1: `page` is the address shifted by the
    /// page size). Returns the page's NUMA vector after the update, or `None` when the page did not fit
    /// (`max_pages` reached) or the node is out of range.
    pub fn record(&mut self, page: u64, node: usize) -> Option<&[u8]> {
        let n = self.config.nodes;
        if node >= n {
            self.dropped += 1;
            return None;
        }
        let (chunk, offset) = (page / CHUNK_PAGES, (page % CHUNK_PAGES) as usize);
        let at = match self.last {
            Some((id, at)) if id == chunk => at,
            _ => match self.index.get(&chunk) {
                Some(&at) => at,
                None => {
                    if self.pages + CHUNK_PAGES > self.config.max_pages.max(CHUNK_PAGES) {
                        self.dropped += 1;
                        return None;
                    }
                    self.storage
                        .push(vec![0u8; CHUNK_PAGES as usize * n].into_boxed_slice());
                    self.pages += CHUNK_PAGES;
                    self.index.insert(chunk, self.storage.len() - 1);
                    self.storage.len() - 1
                }
            },
        };
        self.last = Some((chunk, at));
        self.samples += 1;
        let nv = &mut self.storage[at][offset * n..(offset + 1) * n];
        nv[node] = nv[node].saturating_add(1);
        Some(nv)
    }

    /// The NUMA vector of a page, if it was ever sampled (all zeros for a page in a stored chunk that
    /// was never sampled itself).
    pub fn vector(&self, page: u64) -> Option<&[u8]> {
        let n = self.config.nodes;
        let chunk = &self.storage[*self.index.get(&(page / CHUNK_PAGES))?];
        let offset = (page % CHUNK_PAGES) as usize;
        let nv = &chunk[offset * n..(offset + 1) * n];
        nv.iter().any(|&c| c > 0).then_some(nv)
    }

    /// Every sampled page with its NUMA vector, in page order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &[u8])> {
        let n = self.config.nodes.max(1);
        let mut ids: Vec<(u64, usize)> = self.index.iter().map(|(&id, &at)| (id, at)).collect();
        ids.sort_unstable();
        ids.into_iter().flat_map(move |(id, at)| {
            let chunk = &self.storage[at];
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
    fn exclusivity_is_eq3() {
        assert_eq!(exclusivity(&[1, 4]), 0.8);
        assert_eq!(exclusivity(&[1, 1]), 0.5);
        assert_eq!(exclusivity(&[0, 0]), 0.0);
    }
}
