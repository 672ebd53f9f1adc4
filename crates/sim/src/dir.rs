//! The coherence directory's storage: one entry per line held somewhere, in a `LineMap` whose slots
//! are 16, 24 or 32 bytes depending on how many caches the machine tracks (issue 4).
//!
//! Each simulated LLC miss looks up two or three random directory slots; at memory-sized working sets
//! the directory (1-2 M slots) is larger than the host's L3, so a smaller slot means fewer host cache
//! misses. The narrow form keeps the holders in one `u64`: with at most 64 tracked caches every
//! directory bit is below 64 (bits are assigned in order, `tracked.len() % DIR_BITS`), so the high
//! word of the wide form is always zero there and the two forms hold the same information exactly.
//! The packed form goes further where the holder bits (at most 48), the owner (PU index + 1, below
//! 2^15) and the dirty bit fit together in one `u64` (laso-hpl: 44 holder bits and 40 PUs): a
//! 16-byte slot with its key.

use crate::linemap::{LineMap, Prefetcher};

/// A directory entry as the simulator works on it (the wide form, up to 128 holder bits).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct DirEntry {
    pub(crate) holders: [u64; 2],
    /// PU index + 1 of the private domain with exclusive rights, 0 for none.
    pub(crate) owner: u32,
    pub(crate) dirty: bool,
}

impl DirEntry {
    /// `Directory::drop_holder`'s steps on a wide entry.
    #[inline]
    fn drop_holder(
        &mut self,
        b: usize,
        owner_bits: impl Fn(usize) -> [u64; 2],
    ) -> (Option<usize>, bool) {
        self.holders[b / 64] &= !(1 << (b % 64));
        let mut wb = None;
        if let Some(o) = (self.owner as usize).checked_sub(1) {
            let ob = owner_bits(o);
            let still = (0..2).any(|w| self.holders[w] & ob[w] != 0);
            if !still {
                if self.dirty {
                    wb = Some(o);
                }
                self.owner = 0;
                self.dirty = false;
            }
        }
        (wb, self.holders == [0, 0])
    }
}

/// The narrow form: 16 bytes, a 24-byte slot with its key.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Narrow {
    holders: u64,
    owner: u32,
    dirty: bool,
}

impl Narrow {
    #[inline]
    fn widen(self) -> DirEntry {
        DirEntry {
            holders: [self.holders, 0],
            owner: self.owner,
            dirty: self.dirty,
        }
    }
    #[inline]
    fn from_wide(e: DirEntry) -> Self {
        debug_assert_eq!(e.holders[1], 0, "narrow directory given a bit above 63");
        Narrow {
            holders: e.holders[0],
            owner: e.owner,
            dirty: e.dirty,
        }
    }
}

/// The layout of the packed form: holders in bits `0..HOLDER_BITS`, the owner in the 15 bits above,
/// the dirty bit in bit 63 (fixed positions: constant shifts and masks).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Packing;

const HOLDER_BITS: u32 = 48;
const HOLDERS: u64 = (1 << HOLDER_BITS) - 1;
const OWNER_BITS: u32 = 15;
const DIRTY: u64 = 1 << 63;

impl Packing {
    /// The packing, if `tracked` holder bits and owners up to `max_owner` fit it.
    fn new(tracked: usize, max_owner: u32) -> Option<Self> {
        (tracked <= HOLDER_BITS as usize && max_owner < 1 << OWNER_BITS).then_some(Packing)
    }
    #[inline]
    fn unpack(self, v: u64) -> DirEntry {
        DirEntry {
            holders: [v & HOLDERS, 0],
            owner: ((v & !DIRTY) >> HOLDER_BITS) as u32,
            dirty: v & DIRTY != 0,
        }
    }
    #[inline]
    fn pack(self, e: DirEntry) -> u64 {
        debug_assert_eq!(e.holders[1], 0, "packed directory given a bit above 63");
        debug_assert_eq!(
            e.holders[0] & !HOLDERS,
            0,
            "packed directory given a bit above 47"
        );
        debug_assert!(
            e.owner < 1 << OWNER_BITS,
            "packed directory given a large owner"
        );
        e.holders[0] | u64::from(e.owner) << HOLDER_BITS | if e.dirty { DIRTY } else { 0 }
    }
}

/// The directory: packed when holders, owner and dirty bit fit in a `u64`, else narrow when every
/// tracked cache's bit is below 64, wide otherwise.
pub(crate) enum Directory {
    Packed(LineMap<u64>, Packing),
    Narrow(LineMap<Narrow>),
    Wide(LineMap<DirEntry>),
}

impl Directory {
    /// A directory for a machine with `tracked` directory bits in use and owners (PU index + 1)
    /// up to `max_owner`.
    pub(crate) fn new(tracked: usize, max_owner: u32) -> Self {
        if let Some(p) = Packing::new(tracked, max_owner) {
            Directory::Packed(LineMap::default(), p)
        } else if tracked <= 64 {
            Directory::Narrow(LineMap::default())
        } else {
            Directory::Wide(LineMap::default())
        }
    }

    /// Only the narrow or wide form, as `new` chose before the packed form existed (for tests).
    #[cfg(test)]
    fn unpacked(tracked: usize) -> Self {
        if tracked <= 64 {
            Directory::Narrow(LineMap::default())
        } else {
            Directory::Wide(LineMap::default())
        }
    }

    /// Starts the host's fetch of the slots a lookup of `key` reads.
    #[inline]
    pub(crate) fn prefetch(&self, key: u64) {
        match self {
            Directory::Packed(m, _) => m.prefetch(key),
            Directory::Narrow(m) => m.prefetch(key),
            Directory::Wide(m) => m.prefetch(key),
        }
    }

    /// `prefetch` with the form resolved once (`LineMap::prefetcher`), for several keys before
    /// the directory next changes.
    #[inline]
    pub(crate) fn prefetcher(&self) -> Prefetcher {
        match self {
            Directory::Packed(m, _) => m.prefetcher(),
            Directory::Narrow(m) => m.prefetcher(),
            Directory::Wide(m) => m.prefetcher(),
        }
    }

    /// Number of lines present.
    pub(crate) fn len(&self) -> usize {
        match self {
            Directory::Packed(m, _) => m.len(),
            Directory::Narrow(m) => m.len(),
            Directory::Wide(m) => m.len(),
        }
    }

    /// The entry of `key`, if present.
    #[inline]
    pub(crate) fn get(&self, key: u64) -> Option<DirEntry> {
        match self {
            Directory::Packed(m, p) => m.get(&key).map(|&v| p.unpack(v)),
            Directory::Narrow(m) => m.get(&key).map(|n| n.widen()),
            Directory::Wide(m) => m.get(&key).copied(),
        }
    }

    /// Sets the entry of `key`, adding it if absent.
    #[inline]
    pub(crate) fn insert(&mut self, key: u64, e: DirEntry) {
        match self {
            Directory::Packed(m, p) => m.insert(key, p.pack(e)),
            Directory::Narrow(m) => m.insert(key, Narrow::from_wide(e)),
            Directory::Wide(m) => m.insert(key, e),
        }
    }

    /// Applies `f` to the entry of `key` in place, if present, and returns its result.
    #[inline]
    pub(crate) fn update<R>(&mut self, key: u64, f: impl FnOnce(&mut DirEntry) -> R) -> Option<R> {
        match self {
            Directory::Packed(m, p) => m.get_mut(&key).map(|v| {
                let mut e = p.unpack(*v);
                let r = f(&mut e);
                *v = p.pack(e);
                r
            }),
            Directory::Narrow(m) => m.get_mut(&key).map(|n| {
                let mut e = n.widen();
                let r = f(&mut e);
                *n = Narrow::from_wide(e);
                r
            }),
            Directory::Wide(m) => m.get_mut(&key).map(f),
        }
    }

    /// Clears holder bit `b` of `key`'s entry, if present (a cache whose bit is `b` dropped the
    /// line); if its owner (PU index `o`) then holds it in none of the caches of `owner_bits(o)`,
    /// the entry loses its owner and its dirty bit. Returns whether the owner was dropped while
    /// dirty (its index then) and whether no holder is left: what `update` with these steps on a
    /// `DirEntry` would give, done on the packed form's `u64` in place (its holder bits are all
    /// below 48, so the entry's and the owner's second holder words are zero).
    #[inline]
    pub(crate) fn drop_holder(
        &mut self,
        key: u64,
        b: usize,
        owner_bits: impl Fn(usize) -> [u64; 2],
    ) -> Option<(Option<usize>, bool)> {
        match self {
            Directory::Packed(m, _) => m.get_mut(&key).map(|v| {
                debug_assert!(
                    b < HOLDER_BITS as usize,
                    "packed directory given a bit above 47"
                );
                let mut x = *v & !(1 << (b % 64));
                let mut wb = None;
                if let Some(o) = (((x & !DIRTY) >> HOLDER_BITS) as usize).checked_sub(1) {
                    if x & HOLDERS & owner_bits(o)[0] == 0 {
                        if x & DIRTY != 0 {
                            wb = Some(o);
                        }
                        x &= HOLDERS;
                    }
                }
                *v = x;
                (wb, x & HOLDERS == 0)
            }),
            _ => self.update(key, |e| e.drop_holder(b, owner_bits)),
        }
    }

    /// Removes `key`.
    #[inline]
    pub(crate) fn remove(&mut self, key: u64) {
        match self {
            Directory::Packed(m, _) => {
                m.remove(&key);
            }
            Directory::Narrow(m) => {
                m.remove(&key);
            }
            Directory::Wide(m) => {
                m.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue4_narrow_directory_slot_is_24_bytes() {
        assert_eq!(LineMap::<Narrow>::slot_bytes(), 24);
        assert_eq!(LineMap::<DirEntry>::slot_bytes(), 32);
    }

    #[test]
    fn issue4_narrow_and_wide_directories_agree() {
        let n = Directory::unpacked(64);
        let w = Directory::unpacked(65);
        assert!(matches!(n, Directory::Narrow(_)));
        assert!(matches!(w, Directory::Wide(_)));
        same_under_random_use(n, w, 64, 9);
    }

    #[test]
    fn issue4_packed_directory_slot_is_16_bytes_where_it_fits() {
        assert_eq!(LineMap::<u64>::slot_bytes(), 16);
        // laso-hpl: 40 private L2s + 4 L3s, owners 1..=40.
        assert!(matches!(Directory::new(44, 40), Directory::Packed(..)));
        assert!(matches!(Directory::new(48, 32767), Directory::Packed(..)));
        assert!(matches!(Directory::new(49, 40), Directory::Narrow(_)));
        assert!(matches!(Directory::new(20, 32768), Directory::Narrow(_)));
        assert!(matches!(Directory::new(64, 1), Directory::Narrow(_)));
        assert!(matches!(Directory::new(65, 1), Directory::Wide(_)));
    }

    #[test]
    fn issue4_packed_and_wide_directories_agree() {
        for (tracked, max_owner) in [(44, 40), (1, 1), (0, 5), (48, 32767), (20, 2000)] {
            let p = Directory::new(tracked, max_owner);
            assert!(matches!(p, Directory::Packed(..)), "{tracked} {max_owner}");
            let w = Directory::unpacked(65);
            same_under_random_use(p, w, tracked, max_owner);
        }
    }

    #[test]
    fn issue4_drop_holder_drops_the_owner_with_its_last_cache() {
        // PU 4 owns the line dirty through its cache with bit 3; an L3 (bit 10) holds it too.
        let bits = |o: usize| if o == 4 { [1 << 3, 0] } else { [0, 0] };
        for mut d in [
            Directory::new(44, 40),
            Directory::unpacked(64),
            Directory::unpacked(65),
        ] {
            let e = DirEntry {
                holders: [1 << 3 | 1 << 10, 0],
                owner: 5,
                dirty: true,
            };
            d.insert(7, e);
            assert_eq!(d.drop_holder(8, 3, bits), None, "absent line");
            assert_eq!(d.drop_holder(7, 10, bits), Some((None, false)));
            let g = d.get(7).map(|e| (e.holders, e.owner, e.dirty));
            assert_eq!(
                g,
                Some(([1 << 3, 0], 5, true)),
                "owner kept while it holds the line"
            );
            d.insert(7, e);
            assert_eq!(d.drop_holder(7, 3, bits), Some((Some(4), false)));
            let g = d.get(7).map(|e| (e.holders, e.owner, e.dirty));
            assert_eq!(
                g,
                Some(([1 << 10, 0], 0, false)),
                "owner and dirty bit dropped"
            );
            assert_eq!(
                d.drop_holder(7, 10, bits),
                Some((None, true)),
                "no holder left"
            );
        }
    }

    /// Runs the same random inserts, updates, holder drops and removals on two directories, with holders below
    /// bit `tracked` and owners up to `max_owner`, and checks that they give the same entries.
    fn same_under_random_use(mut n: Directory, mut w: Directory, tracked: usize, max_owner: u32) {
        let mask = if tracked == 0 {
            0
        } else {
            u64::MAX >> (64 - tracked)
        };
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for step in 0..50_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = (x >> 8) % 2000;
            let owner = match step % 4 {
                0 => 0,
                1 => max_owner,
                _ => (x >> 20) as u32 % (max_owner + 1),
            };
            let e = DirEntry {
                holders: [(x >> 3) & mask, 0],
                owner,
                dirty: x.is_multiple_of(2),
            };
            match x % 5 {
                4 => {
                    // A cache's bit dropped, with owners' path bits from a fixed pattern.
                    let b = (x >> 40) as usize % tracked.max(1);
                    let bits =
                        |o: usize| [(o as u64).wrapping_mul(0x2545_f491_4f6c_dd1d) & mask, 0];
                    assert_eq!(n.drop_holder(key, b, bits), w.drop_holder(key, b, bits));
                }
                0 => {
                    n.remove(key);
                    w.remove(key);
                }
                1 => {
                    n.insert(key, e);
                    w.insert(key, e);
                }
                _ => {
                    let f = |d: &mut DirEntry| {
                        d.holders[0] &= !(1 << (step % 64));
                        d.owner = d.owner.saturating_sub(1);
                        d.dirty = !d.dirty;
                        d.holders[0]
                    };
                    assert_eq!(n.update(key, f), w.update(key, f));
                }
            }
            let (a, b) = (n.get(key), w.get(key));
            assert_eq!(
                a.map(|d| (d.holders, d.owner, d.dirty)),
                b.map(|d| (d.holders, d.owner, d.dirty))
            );
            assert_eq!(n.len(), w.len());
        }
    }
}
