//! An open-addressing hash table keyed by line or page number, with the key stored beside its value
//! so that a lookup of a key that is not in the host's caches costs one host cache miss, not two.
//!
//! The simulator's directory and page tables are looked up on every simulated LLC miss, for keys at
//! random over working sets far larger than the host's caches. A SwissTable (`std::HashMap`) keeps
//! its control bytes and its buckets in two arrays, so each such lookup misses twice; here a slot is
//! `(key, value)` in one array, probed linearly, and removal shifts later slots back (no
//! tombstones). The table is never iterated, so its layout cannot leak into the simulated figures.

/// The key that marks an empty slot; a real key equal to it is kept aside in `max_key`.
const EMPTY: u64 = u64::MAX;
/// Multiplier of the Fibonacci / Fx hash; the slot is taken from the product's high bits.
const MUL: u64 = 0x9e37_79b9_7f4a_7c15;

#[derive(Clone, Copy)]
struct Slot<V> {
    key: u64,
    val: V,
}

/// `LineMap::prefetch` with the table's layout read once (`LineMap::prefetcher`): the same two
/// host lines per key. A hint only; valid to use until the table is next changed (a stale one
/// only fetches the wrong lines: the addresses are never read).
#[derive(Clone, Copy)]
pub(crate) struct Prefetcher {
    ptr: *const u8,
    slot: usize,
    shift: u32,
    mask: usize,
}

impl Prefetcher {
    /// Starts the fetches `LineMap::prefetch(key)` starts.
    #[inline(always)]
    pub(crate) fn fetch(self, key: u64) {
        let home = (key.wrapping_mul(MUL) >> self.shift) as usize;
        crate::hostmem::prefetch(self.ptr.wrapping_add(home * self.slot));
        crate::hostmem::prefetch(self.ptr.wrapping_add(((home + 1) & self.mask) * self.slot));
    }
}

/// A map from `u64` to a small `Copy` value: the subset of `HashMap` the simulator uses.
#[derive(Clone)]
pub(crate) struct LineMap<V: Copy + Default> {
    slots: Vec<Slot<V>>,
    /// 64 minus log2 of the number of slots.
    shift: u32,
    len: usize,
    max_key: Option<V>,
}

impl<V: Copy + Default> Default for LineMap<V> {
    fn default() -> Self {
        Self::with_slots(64)
    }
}

impl<V: Copy + Default> LineMap<V> {
    /// An empty table of `n` slots (a power of two, at least 8; `default` has 64).
    pub(crate) fn with_capacity(n: usize) -> Self {
        Self::with_slots(n)
    }

    fn with_slots(n: usize) -> Self {
        let n = n.next_power_of_two().max(8);
        LineMap {
            slots: crate::hostmem::filled(
                n,
                Slot {
                    key: EMPTY,
                    val: V::default(),
                },
            ),
            shift: 64 - n.trailing_zeros(),
            len: 0,
            max_key: None,
        }
    }

    #[inline]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    #[inline]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(MUL) >> self.shift) as usize
    }

    /// The slot holding `key` (not `EMPTY`), if any.
    #[inline]
    fn find(&self, key: u64) -> Option<usize> {
        let mask = self.mask();
        let mut i = self.home(key);
        loop {
            let k = self.slots[i].key;
            if k == key {
                return Some(i);
            }
            if k == EMPTY {
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    /// Starts the host's fetch of the slot where a lookup of `key` begins and of the slot after
    /// it, where the probe often ends (see `hostmem::prefetch`).
    #[inline]
    pub(crate) fn prefetch(&self, key: u64) {
        let home = self.home(key);
        let p = self.slots.as_ptr();
        crate::hostmem::prefetch(p.wrapping_add(home));
        crate::hostmem::prefetch(p.wrapping_add((home + 1) & self.mask()));
    }

    /// `prefetch`'s inputs read once (the table's address, slot size, shift and mask), for a caller
    /// that starts several fetches before the table can change.
    #[inline]
    pub(crate) fn prefetcher(&self) -> Prefetcher {
        Prefetcher {
            ptr: self.slots.as_ptr().cast(),
            slot: std::mem::size_of::<Slot<V>>(),
            shift: self.shift,
            mask: self.mask(),
        }
    }

    /// Bytes per slot (key and value), as the table stores them.
    #[cfg(test)]
    pub(crate) fn slot_bytes() -> usize {
        std::mem::size_of::<Slot<V>>()
    }

    /// Number of keys present.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The value of `key`, if present.
    #[inline]
    pub(crate) fn get(&self, key: &u64) -> Option<&V> {
        if *key == EMPTY {
            return self.max_key.as_ref();
        }
        self.find(*key).map(|i| &self.slots[i].val)
    }

    /// The value of `key` for update, if present.
    #[inline]
    pub(crate) fn get_mut(&mut self, key: &u64) -> Option<&mut V> {
        if *key == EMPTY {
            return self.max_key.as_mut();
        }
        self.find(*key).map(|i| &mut self.slots[i].val)
    }

    /// Sets the value of `key`, adding it if absent.
    #[inline]
    pub(crate) fn insert(&mut self, key: u64, val: V) {
        if key == EMPTY {
            if self.max_key.replace(val).is_none() {
                self.len += 1;
            }
            return;
        }
        // At most half full: short probe runs keep a lookup within one or two host cache lines.
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let mask = self.mask();
        let mut i = self.home(key);
        loop {
            let k = self.slots[i].key;
            if k == key {
                self.slots[i].val = val;
                return;
            }
            if k == EMPTY {
                self.slots[i] = Slot { key, val };
                self.len += 1;
                return;
            }
            i = (i + 1) & mask;
        }
    }

    /// Removes `key`; returns whether it was present.
    #[inline(always)]
    pub(crate) fn remove(&mut self, key: &u64) -> bool {
        if *key == EMPTY {
            let was = self.max_key.take().is_some();
            self.len -= usize::from(was);
            return was;
        }
        let Some(mut hole) = self.find(*key) else {
            return false;
        };
        self.len -= 1;
        // Backward-shift deletion: move up every later slot of the run whose home is not in
        // (hole, j], so that every key stays reachable from its home without tombstones.
        let mask = self.mask();
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let k = self.slots[j].key;
            if k == EMPTY {
                break;
            }
            let h = self.home(k);
            let stays = if hole <= j {
                hole < h && h <= j
            } else {
                hole < h || h <= j
            };
            if !stays {
                self.slots[hole] = self.slots[j];
                hole = j;
            }
        }
        self.slots[hole].key = EMPTY;
        true
    }

    /// Doubles the slots and places every key again. The keys are distinct and the new table is
    /// at most a quarter full, so each goes to the first empty slot from its home without
    /// `insert`'s tests for a growth or an equal key (the same slots `insert` would give).
    fn grow(&mut self) {
        let mut bigger = Self::with_slots(self.slots.len() * 2);
        let mask = bigger.mask();
        for s in &self.slots {
            if s.key != EMPTY {
                let mut i = bigger.home(s.key);
                while bigger.slots[i].key != EMPTY {
                    i = (i + 1) & mask;
                }
                bigger.slots[i] = *s;
            }
        }
        bigger.max_key = self.max_key;
        bigger.len = self.len;
        *self = bigger;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn linemap_agrees_with_hashmap_under_random_inserts_and_removes() {
        let mut m: LineMap<u32> = LineMap::default();
        let mut r: HashMap<u64, u32> = HashMap::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for step in 0..200_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Few distinct keys so that removals hit, plus the reserved key now and then.
            let key = if x.is_multiple_of(97) {
                u64::MAX
            } else {
                (x >> 8) % 3000
            };
            match x % 3 {
                0 => assert_eq!(m.remove(&key), r.remove(&key).is_some(), "remove {key}"),
                1 => {
                    m.insert(key, step);
                    r.insert(key, step);
                }
                _ => {
                    if let Some(v) = m.get_mut(&key) {
                        *v += 1;
                    }
                    if let Some(v) = r.get_mut(&key) {
                        *v += 1;
                    }
                }
            }
            assert_eq!(m.get(&key), r.get(&key), "key {key} at step {step}");
            assert_eq!(m.len(), r.len());
        }
        for k in 0..3000 {
            assert_eq!(m.get(&k), r.get(&k), "final key {k}");
        }
    }
}
