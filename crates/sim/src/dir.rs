//! The coherence directory's storage: one entry per line held somewhere, in a `LineMap` whose slots
//! are 24 bytes on machines with at most 64 tracked caches and 32 bytes beyond (issue 4).
//!
//! Each simulated LLC miss looks up two or three random directory slots; at memory-sized working sets
//! the directory (1-2 M slots) is larger than the host's L3, so a smaller slot means fewer host cache
//! misses. The narrow form keeps the holders in one `u64`: with at most 64 tracked caches every
//! directory bit is below 64 (bits are assigned in order, `tracked.len() % DIR_BITS`), so the high
//! word of the wide form is always zero there and the two forms hold the same information exactly.

use crate::linemap::LineMap;

/// A directory entry as the simulator works on it (the wide form, up to 128 holder bits).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct DirEntry {
    pub(crate) holders: [u64; 2],
    /// PU index + 1 of the private domain with exclusive rights, 0 for none.
    pub(crate) owner: u32,
    pub(crate) dirty: bool,
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

/// The directory: narrow when every tracked cache's bit is below 64, wide otherwise.
pub(crate) enum Directory {
    Narrow(LineMap<Narrow>),
    Wide(LineMap<DirEntry>),
}

impl Directory {
    /// A directory for a machine with `tracked` directory bits in use.
    pub(crate) fn new(tracked: usize) -> Self {
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
            Directory::Narrow(m) => m.prefetch(key),
            Directory::Wide(m) => m.prefetch(key),
        }
    }

    /// Number of lines present.
    pub(crate) fn len(&self) -> usize {
        match self {
            Directory::Narrow(m) => m.len(),
            Directory::Wide(m) => m.len(),
        }
    }

    /// The entry of `key`, if present.
    #[inline]
    pub(crate) fn get(&self, key: u64) -> Option<DirEntry> {
        match self {
            Directory::Narrow(m) => m.get(&key).map(|n| n.widen()),
            Directory::Wide(m) => m.get(&key).copied(),
        }
    }

    /// Sets the entry of `key`, adding it if absent.
    #[inline]
    pub(crate) fn insert(&mut self, key: u64, e: DirEntry) {
        match self {
            Directory::Narrow(m) => m.insert(key, Narrow::from_wide(e)),
            Directory::Wide(m) => m.insert(key, e),
        }
    }

    /// Applies `f` to the entry of `key` in place, if present, and returns its result.
    #[inline]
    pub(crate) fn update<R>(&mut self, key: u64, f: impl FnOnce(&mut DirEntry) -> R) -> Option<R> {
        match self {
            Directory::Narrow(m) => m.get_mut(&key).map(|n| {
                let mut e = n.widen();
                let r = f(&mut e);
                *n = Narrow::from_wide(e);
                r
            }),
            Directory::Wide(m) => m.get_mut(&key).map(f),
        }
    }

    /// Removes `key`.
    #[inline]
    pub(crate) fn remove(&mut self, key: u64) {
        match self {
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
        assert_eq!(std::mem::size_of::<Narrow>(), 16);
        assert_eq!(std::mem::size_of::<DirEntry>(), 24);
    }

    #[test]
    fn issue4_narrow_and_wide_directories_agree() {
        let mut n = Directory::new(64);
        let mut w = Directory::new(65);
        assert!(matches!(n, Directory::Narrow(_)));
        assert!(matches!(w, Directory::Wide(_)));
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for step in 0..50_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = (x >> 8) % 2000;
            let e = DirEntry {
                holders: [x >> 3, 0],
                owner: step % 9,
                dirty: x.is_multiple_of(2),
            };
            match x % 4 {
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
