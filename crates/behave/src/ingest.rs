//! kMAF's two tables fed together (000 §4.3): each sample counts in its page's NUMA vector (§4.3.1)
//! and, for a sharing-table access, updates its block's vector and the sharing matrix (§4.3.2).

use crate::numa_table::{NumaTable, NumaTableConfig};
use crate::sharing::{SharingMatrix, SharingTable, SharingTableConfig, EMPTY, PIPELINE};

/// The thread id of a [`TableSample`] that feeds only the NUMA table.
pub const NO_THREAD: u16 = EMPTY;

/// One sample as the tables take it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableSample {
    /// The virtual address accessed.
    pub addr: u64,
    /// The NUMA node the access came from (an index of the NUMA vector).
    pub node: u32,
    /// The dense id of the thread for the sharing table (below 65,535), or [`NO_THREAD`] for a
    /// sample that the sharing table does not see (a load or store when the communication comes
    /// from load/store pairs, a thread beyond 16-bit ids).
    pub thread: u16,
}

/// What one sample did to the tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recorded<'a> {
    /// The page's NUMA vector after the sample, as [`NumaTable::record`] returns it (`None` when
    /// the table is full or the node is out of range).
    pub vector: Option<&'a [u8]>,
    /// The block vector (MRU, LRU) before the sample, as [`SharingTable::block_vector`] gave it
    /// (`(None, None)` for a [`NO_THREAD`] sample): the threads that the sample shares with.
    pub previous: (Option<u16>, Option<u16>),
}

/// The NUMA table, the sharing table and its sharing matrix, fed by the same samples.
#[derive(Debug, Clone)]
pub struct Tables {
    /// Per-page NUMA vectors.
    pub numa: NumaTable,
    /// Per-block vectors of the last threads.
    pub sharing: SharingTable,
    /// The sharing matrix that [`Self::sharing`] feeds.
    pub matrix: SharingMatrix,
    page_shift: u32,
}

#[inline(always)]
fn some(t: u16) -> Option<u16> {
    (t != EMPTY).then_some(t)
}

impl Tables {
    /// Empty tables; `page_bytes` (rounded up to a power of two) turns addresses into pages
    /// (eq. 1).
    pub fn new(numa: NumaTableConfig, sharing: SharingTableConfig, page_bytes: u64) -> Self {
        Tables {
            numa: NumaTable::new(numa),
            sharing: SharingTable::new(sharing),
            matrix: SharingMatrix::new(),
            page_shift: page_bytes.max(1).next_power_of_two().trailing_zeros(),
        }
    }

    /// Records one sample: [`NumaTable::record`] of its page and node, and, unless its thread is
    /// [`NO_THREAD`], [`SharingTable::record`] of its thread and address.
    #[inline]
    pub fn record(&mut self, s: TableSample) -> Recorded<'_> {
        let (slot, tag) = self.sharing.locate(s.addr);
        let (mru, lru) = self.sharing.update(slot, tag, s.thread, &mut self.matrix);
        let vector = self.numa.record(s.addr >> self.page_shift, s.node as usize);
        Recorded {
            vector,
            previous: (some(mru), some(lru)),
        }
    }

    /// Records `samples` in order, exactly as [`Self::record`] one after another would, calling
    /// `each(i, recorded)` for sample `i` right after recording it. Faster, by software pipelining
    /// in groups of [`PIPELINE`] samples: a first pass finds every sample's NUMA vector (storing
    /// new chunks in sample order) and sharing-table entry and prefetches both, a second pass
    /// updates them in order, so that the cache misses of the two tables overlap.
    #[inline]
    pub fn record_batch<F>(&mut self, samples: &[TableSample], mut each: F)
    where
        F: FnMut(usize, Recorded<'_>),
    {
        const NONE: usize = usize::MAX;
        let mut at = [(NONE, 0usize, 0u32); PIPELINE];
        let mut first = 0;
        for group in samples.chunks(PIPELINE) {
            for (a, s) in at.iter_mut().zip(group) {
                let start = self.numa.locate(s.addr >> self.page_shift, s.node as usize);
                let start = start.unwrap_or(NONE);
                self.numa.prefetch(start);
                let (slot, tag) = self.sharing.locate(s.addr);
                if s.thread != NO_THREAD {
                    self.sharing.prefetch(slot);
                }
                *a = (start, slot, tag);
            }
            for (i, (&(start, slot, tag), s)) in at.iter().zip(group).enumerate() {
                let (mru, lru) = self.sharing.update(slot, tag, s.thread, &mut self.matrix);
                let vector = (start != NONE).then(|| self.numa.bump(start, s.node as usize));
                each(
                    first + i,
                    Recorded {
                        vector,
                        previous: (some(mru), some(lru)),
                    },
                );
            }
            first += group.len();
        }
    }

    /// The page size's shift (log2 of the page size in bytes).
    pub fn page_shift(&self) -> u32 {
        self.page_shift
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reproducible stream of samples on a few nodes and threads, some without a thread.
    fn stream(n: usize, threads: u64) -> Vec<TableSample> {
        let mut rng = numaff_machine::rng::SplitMix64::new(0x2545_f491_4f6c_dd1d);
        (0..n)
            .map(|_| {
                let x = rng.next_u64();
                let thread = (x % (threads + 1)) as u16;
                TableSample {
                    // Mostly a hot 64 KiB (shared blocks), else anywhere in 64 MiB (new chunks).
                    addr: 0x7f00_0000_0000
                        + (x >> 24)
                            % if x.is_multiple_of(4) {
                                1 << 26
                            } else {
                                1 << 16
                            },
                    node: ((x >> 8) % 4) as u32,
                    thread: if u64::from(thread) == threads {
                        NO_THREAD
                    } else {
                        thread
                    },
                }
            })
            .collect()
    }

    /// The fused batch path gives the same tables, matrix and per-sample results as one
    /// `NumaTable::record` and `SharingTable::record` after another (Fig. 3 semantics), also when
    /// the NUMA table fills up and with nodes out of range.
    #[test]
    fn tables_record_batch_equals_records() {
        let mut samples = stream(20_000, 6);
        samples[7].node = 9; // out of range: dropped
        let numa = NumaTableConfig::new(4, 4096); // 8 chunks: fills up
        let sharing = SharingTableConfig {
            blocks: 256,
            block_bytes: 256,
        };
        let (mut n1, mut s1, mut m1) = (
            NumaTable::new(numa),
            SharingTable::new(sharing),
            SharingMatrix::new(),
        );
        let mut expected = Vec::new();
        for s in &samples {
            let previous = if s.thread == NO_THREAD {
                (None, None)
            } else {
                let p = s1.block_vector(s.addr);
                s1.record(s.thread, s.addr, &mut m1);
                p
            };
            let vector = n1.record(s.addr >> 12, s.node as usize).map(<[u8]>::to_vec);
            expected.push((vector, previous));
        }
        assert!(n1.dropped() > 1, "the stream fills the NUMA table");
        assert!(s1.conflicts() > 0 && m1.get(1, 2) > 0);
        for batch in [1, 63, 64, 1000, samples.len()] {
            let mut t = Tables::new(numa, sharing, 4096);
            let mut got = Vec::new();
            for chunk in samples.chunks(batch) {
                t.record_batch(chunk, |i, r| {
                    assert_eq!(i, got.len() % batch.min(samples.len()));
                    got.push((r.vector.map(<[u8]>::to_vec), r.previous));
                });
            }
            assert_eq!(got, expected, "batches of {batch}");
            assert_eq!(t.matrix, m1);
            assert_eq!(t.sharing.conflicts(), s1.conflicts());
            assert_eq!(
                t.numa.iter().collect::<Vec<_>>(),
                n1.iter().collect::<Vec<_>>()
            );
            assert_eq!(
                (t.numa.samples(), t.numa.dropped()),
                (n1.samples(), n1.dropped())
            );
            for s in &samples {
                assert_eq!(t.sharing.block_vector(s.addr), s1.block_vector(s.addr));
            }
            let mut one = Tables::new(numa, sharing, 4096);
            let singles: Vec<_> = samples
                .iter()
                .map(|&s| {
                    let r = one.record(s);
                    (r.vector.map(<[u8]>::to_vec), r.previous)
                })
                .collect();
            assert_eq!(singles, expected);
        }
    }

    /// kMAF Fig. 3 through the fused path: T3 accesses a block last accessed by T0 (MRU) and T2
    /// (LRU), shares with both, and becomes MRU with T0 as LRU.
    #[test]
    fn tables_reproduce_kmaf_fig3() {
        let mut t = Tables::new(
            NumaTableConfig::new(2, 1 << 20),
            SharingTableConfig::default(),
            4096,
        );
        let addr = 0x7f00_0000_1040;
        let s = |thread, addr| TableSample {
            addr,
            node: 1,
            thread,
        };
        let mut seen = Vec::new();
        t.record_batch(&[s(2, addr), s(0, addr + 8), s(3, addr + 100)], |_, r| {
            seen.push((r.previous, r.vector.map(<[u8]>::to_vec)))
        });
        assert_eq!(seen[2], ((Some(0), Some(2)), Some(vec![0, 3])));
        assert_eq!(t.sharing.block_vector(addr), (Some(3), Some(0)));
        assert_eq!(
            (t.matrix.get(3, 0), t.matrix.get(3, 2), t.matrix.get(0, 2)),
            (1, 1, 1)
        );
        assert_eq!(t.matrix.get(2, 3) + t.matrix.get(0, 3), 0);
    }
}
