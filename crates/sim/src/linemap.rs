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

/// Where a key of a `LineMap` is, or would go if added (`LineMap::entry`): valid until the table
/// next changes, so that a caller can look a key up and later write it without a second probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct At(usize);

impl At {
    /// Whether the key was present when `LineMap::entry` gave this `At`.
    #[cfg(test)]
    pub(crate) fn present(self) -> bool {
        self.0 & PRESENT != 0
    }
}

/// `At`'s flag for a key present (the index is in the other bits).
const PRESENT: usize = 1 << (usize::BITS - 1);
/// `At` of the key kept aside in `max_key` (`EMPTY` itself), which has no slot: no index of a
/// slot (a `Vec` has fewer than `isize::MAX` elements), and without the `PRESENT` flag.
const AT_RESERVED: At = At(usize::MAX >> 1);

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

    /// An empty table of `n` slots with room to double in place up to `max` slots: address space
    /// only until the table grows into it (`hostmem::filled_with_room`). For a table whose final
    /// size a caller can bound, such as the directory.
    pub(crate) fn with_room(n: usize, max: usize) -> Self {
        Self::with_slots_room(n, max)
    }

    fn with_slots(n: usize) -> Self {
        Self::with_slots_room(n, 0)
    }

    fn with_slots_room(n: usize, max: usize) -> Self {
        let n = n.next_power_of_two().max(8);
        // A power of two at least `n`, or no room beyond `n` (one that overflows is not taken).
        let room = max.checked_next_power_of_two().unwrap_or(n).max(n);
        LineMap {
            slots: crate::hostmem::filled_with_room(
                n,
                room,
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

    /// The slot holding `key` (not `EMPTY`), or the empty slot where `insert` would put it.
    #[inline]
    fn probe(&self, key: u64) -> usize {
        let mask = self.mask();
        let mut i = self.home(key);
        loop {
            let k = self.slots[i].key;
            if k == key || k == EMPTY {
                return i;
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
            self.insert_reserved(val);
            return;
        }
        let i = self.probe(key);
        if self.slots[i].key == key {
            self.slots[i].val = val;
        } else {
            self.add(i, key, val);
        }
    }

    /// Adds `key`, absent, at slot `i`, the empty one where a probe for it ends; grows the table
    /// first (and probes again) when one more key would make it more than half full.
    #[inline]
    fn add(&mut self, mut i: usize, key: u64, val: V) {
        // At most half full: short probe runs keep a lookup within one or two host cache lines.
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
            i = self.probe(key);
        }
        self.slots[i] = Slot { key, val };
        self.len += 1;
    }

    /// `insert` of the key kept aside (`EMPTY`).
    #[cold]
    fn insert_reserved(&mut self, val: V) {
        if self.max_key.replace(val).is_none() {
            self.len += 1;
        }
    }

    /// Where `key` is, with its value, or the empty slot where a probe for it ends, with
    /// `V::default()`; then `insert_at` with the same key writes it there, as `insert` would
    /// (growing the table when `insert` would), without a second probe when the key is present
    /// or the table does not grow. Whether the key was present is in the `At`
    /// (`At::present`).
    #[inline(always)]
    pub(crate) fn entry(&self, key: u64) -> (At, V) {
        if key == EMPTY {
            return self.entry_reserved();
        }
        let i = self.probe(key);
        let s = self.slots[i];
        if s.key == key {
            (At(i | PRESENT), s.val)
        } else {
            (At(i), V::default())
        }
    }

    /// `entry` of the key kept aside (`EMPTY`).
    #[cold]
    fn entry_reserved(&self) -> (At, V) {
        match self.max_key {
            Some(v) => (At(AT_RESERVED.0 | PRESENT), v),
            None => (AT_RESERVED, V::default()),
        }
    }

    /// Sets the value of `key` at `at`, which `entry(key)` gave with no change to the table
    /// since: what `insert(key, val)` does.
    #[inline(always)]
    pub(crate) fn insert_at(&mut self, at: At, key: u64, val: V) {
        // The reserved key's `At` is past every slot: the bounds test tells it apart.
        let i = at.0 & !PRESENT;
        match self.slots.get_mut(i) {
            Some(s) if at.0 & PRESENT != 0 => {
                debug_assert_eq!(s.key, key, "stale or foreign `At`");
                s.val = val;
            }
            Some(_) => {
                debug_assert_eq!(i, self.probe(key), "stale or foreign `At`");
                debug_assert_eq!(self.slots[i].key, EMPTY, "stale or foreign `At`");
                self.add(i, key, val);
            }
            None => {
                debug_assert_eq!(i, AT_RESERVED.0, "`At` past the table");
                debug_assert_eq!(key, EMPTY, "the reserved key's place given for another key");
                self.insert_reserved(val);
            }
        }
    }

    /// Applies `f` to the value of `key`, if present, and then removes `key` if `f` said so (its
    /// result's second part): `get_mut` and `remove` with one probe. Returns `f`'s result.
    #[inline(always)]
    pub(crate) fn update_or_remove<R>(
        &mut self,
        key: u64,
        f: impl FnOnce(&mut V) -> (R, bool),
    ) -> Option<(R, bool)> {
        if key == EMPTY {
            let r = f(self.max_key.as_mut()?);
            if r.1 {
                self.max_key = None;
                self.len -= 1;
            }
            return Some(r);
        }
        let i = self.find(key)?;
        let r = f(&mut self.slots[i].val);
        if r.1 {
            self.remove_at(i);
        }
        Some(r)
    }

    /// Removes `key`; returns whether it was present.
    #[inline(always)]
    pub(crate) fn remove(&mut self, key: &u64) -> bool {
        if *key == EMPTY {
            let was = self.max_key.take().is_some();
            self.len -= usize::from(was);
            return was;
        }
        let Some(hole) = self.find(*key) else {
            return false;
        };
        self.remove_at(hole);
        true
    }

    /// Removes the key in slot `hole` (not empty): backward-shift deletion, moving up every later
    /// slot of the run whose home is not in (hole, j], so that every key stays reachable from its
    /// home without tombstones. Out of line: so `update_or_remove` stays small enough for
    /// `Simulator::evicted_bit` to be inlined at its call sites.
    #[inline(never)]
    fn remove_at(&mut self, mut hole: usize) {
        debug_assert_ne!(self.slots[hole].key, EMPTY, "removal of an empty slot");
        self.len -= 1;
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
    }

    /// Doubles the slots and places every key again: in place where the table has the room
    /// (`with_room`), else into a new table.
    fn grow(&mut self) {
        let n = self.slots.len();
        let empty = Slot {
            key: EMPTY,
            val: V::default(),
        };
        if crate::hostmem::extend_filled(&mut self.slots, 2 * n, empty) {
            self.shift -= 1;
            self.replace_in_place(n);
            return;
        }
        // A new table at most a quarter full: each key goes to the first empty slot from its
        // home without `insert`'s tests for a growth or an equal key.
        let mut bigger = Self::with_slots(n * 2);
        for s in &self.slots {
            if s.key != EMPTY {
                bigger.place(*s);
            }
        }
        bigger.max_key = self.max_key;
        bigger.len = self.len;
        *self = bigger;
    }

    /// Moves the keys of the first `n` slots, placed for `n` slots, to their places in the
    /// doubled table (`slots` and `shift` already doubled, the new half empty), without a second
    /// table: the table keeps its host memory and only the added half is fresh, half the fresh
    /// memory of building a new table, which the kernel must zero (the directory grows many
    /// times in a suite workload).
    ///
    /// Why no key lands on a slot still holding a key not yet moved. A key of old home `h` has
    /// new home `2h` or `2h + 1` (one more bit of the same product). A run is a maximal block
    /// `[s, e]` of full old slots; if it does not wrap (slot `s - 1` is empty) its keys have homes
    /// in `[s, e]` (a probe from a home only crosses full slots), and placed alone into the new
    /// table they fill slots within `[2s, 2e + 1]`: at or above `s`, below `2n`, and below `2s'`
    /// for the next run `[s', e']` (`s' >= e + 2`), whose keys go at `2s'` or above. (Within
    /// `[2s, 2e + 1]`: the `k` keys of homes `>= x` occupy `k` old slots in `[x, e]`, so
    /// `x + k - 1 <= e`; in the new table their homes are `2x` or above and they fill slots up
    /// to at most `2x + 1 + k - 1 <= x + e + 1 <= 2e + 1`, whatever their order.) So the runs are
    /// moved from the highest down, each taken out whole before its keys are placed from their
    /// new homes: a placement crosses and takes only empty slots or slots of runs already
    /// placed, never an old slot below `s` (runs not yet moved), and needs no wrap. The keys
    /// before the first empty old slot (a run that may have wrapped from the top, homes
    /// anywhere) are set aside first and placed last, by ordinary probing in the finished table.
    /// Every key is then reachable from its home (every slot a probe crossed stays full), which
    /// is all lookups need: slot positions are never observable (the table is never iterated).
    fn replace_in_place(&mut self, n: usize) {
        // The first empty old slot; there is one (at most half the slots are full when `insert`
        // grows), else every key is set aside, which is slower but as correct.
        let first_empty = self.slots[..n]
            .iter()
            .position(|s| s.key == EMPTY)
            .unwrap_or(n);
        let wrapped: Vec<Slot<V>> = self.slots[..first_empty].to_vec();
        for s in &mut self.slots[..first_empty] {
            s.key = EMPTY;
        }
        let mut run: Vec<Slot<V>> = Vec::new();
        let mut e = n;
        while e > first_empty {
            e -= 1;
            if self.slots[e].key == EMPTY {
                continue;
            }
            // The run ending at `e` starts after an empty slot at or above `first_empty`.
            let mut s = e;
            while self.slots[s - 1].key != EMPTY {
                s -= 1;
            }
            run.clear();
            run.extend_from_slice(&self.slots[s..=e]);
            for x in &mut self.slots[s..=e] {
                x.key = EMPTY;
            }
            for x in &run {
                self.place(*x);
            }
            e = s;
        }
        for x in wrapped {
            self.place(x);
        }
    }

    /// Puts `slot` (a key absent from the table) at the first empty slot from its home.
    #[inline]
    fn place(&mut self, slot: Slot<V>) {
        let mask = self.mask();
        let mut i = self.home(slot.key);
        while self.slots[i].key != EMPTY {
            i = (i + 1) & mask;
        }
        self.slots[i] = slot;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn in_place_growth_keeps_every_key_including_wrapped_runs() {
        // Runs that wrap past the last slot when the table grows: many keys whose home is one of
        // the last slots (and a few at the first), so that the in-place growth must set them
        // aside; then random keys and removals across many growths.
        for (top, room) in [(1usize, 0usize), (3, 1 << 20), (20, 1 << 20), (20, 512)] {
            let mut m: LineMap<u64> = LineMap::with_room(64, room);
            let mut r: HashMap<u64, u64> = HashMap::new();
            let n = m.slots.len();
            let mut k = 0u64;
            let mut near_top = 0;
            while near_top < 31 {
                k += 1;
                if m.home(k) >= n - top || m.home(k) == 0 {
                    m.insert(k, k * 3);
                    r.insert(k, k * 3);
                    near_top += 1;
                }
            }
            assert_eq!(m.slots.len(), n, "no growth yet");
            // The 33rd key grows the table, with a wrapped run in it.
            let wrapped_before = m.slots[0].key != EMPTY && m.slots[n - 1].key != EMPTY;
            assert!(wrapped_before, "a run wraps before the growth (top {top})");
            let mut rng = numaff_machine::rng::SplitMix64::new(0x1234_5678_9abc_def1 ^ top as u64);
            let mut grown = 0;
            for step in 0..120_000u64 {
                let x = rng.next_u64();
                let key = x >> 20;
                let before = m.slots.len();
                if x.is_multiple_of(5) {
                    assert_eq!(m.remove(&key), r.remove(&key).is_some());
                    let old = *r.keys().next().unwrap_or(&0);
                    assert_eq!(m.remove(&old), r.remove(&old).is_some());
                } else {
                    m.insert(key, step);
                    r.insert(key, step);
                }
                if m.slots.len() != before {
                    grown += 1;
                    // Right after a growth: every key found with its value, nothing else.
                    for (k, v) in &r {
                        assert_eq!(
                            m.get(k),
                            Some(v),
                            "key {k} after growing to {}",
                            m.slots.len()
                        );
                    }
                    assert_eq!(m.get(&(u64::MAX - 1)), None);
                }
                assert_eq!(m.len(), r.len());
            }
            assert!(grown >= 10, "{grown} growths");
            // In place while the room lasted, in a new table after.
            assert_eq!(
                m.slots.capacity() >= 1 << 20,
                room == 1 << 20,
                "room {room}"
            );
            for (k, v) in &r {
                assert_eq!(m.get(k), Some(v));
            }
        }
    }

    #[test]
    fn linemap_agrees_with_hashmap_under_random_inserts_and_removes() {
        let mut m: LineMap<u32> = LineMap::default();
        let mut r: HashMap<u64, u32> = HashMap::new();
        let mut rng = numaff_machine::rng::SplitMix64::new(0x2545_f491_4f6c_dd1d);
        for step in 0..200_000u32 {
            let x = rng.next_u64();
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

    /// The keys of every slot and the reserved key's value: the table's whole layout.
    fn layout(m: &LineMap<u32>) -> (Vec<u64>, Option<u32>, usize) {
        (m.slots.iter().map(|s| s.key).collect(), m.max_key, m.len)
    }

    /// A random key among few (so that removals hit), the reserved key now and then.
    fn key_of(x: u64) -> u64 {
        if x.is_multiple_of(89) {
            u64::MAX
        } else {
            (x >> 8) % 2500
        }
    }

    #[test]
    fn slot_insert_matches_insert() {
        // `entry` then `insert_at` on one table, `get` then `insert` on another, a `HashMap` as
        // the reference: the same values, and the same slots, sizes and lengths throughout.
        let mut m: LineMap<u32> = LineMap::default();
        let mut p: LineMap<u32> = LineMap::default();
        let mut r: HashMap<u64, u32> = HashMap::new();
        let mut rng = numaff_machine::rng::SplitMix64::new(0x1234_5678_9abc_def1);
        for step in 0..200_000u32 {
            let x = rng.next_u64();
            let key = key_of(x);
            if x.is_multiple_of(4) {
                assert_eq!(m.remove(&key), r.remove(&key).is_some(), "remove {key}");
                p.remove(&key);
            } else {
                let (at, v) = m.entry(key);
                assert_eq!(
                    at.present(),
                    r.contains_key(&key),
                    "entry {key} at step {step}"
                );
                assert_eq!(v, r.get(&key).copied().unwrap_or_default(), "entry {key}");
                assert_eq!(p.get(&key), r.get(&key));
                // The value written depends on the one read, as in `Simulator::coherent`.
                let new = v.wrapping_mul(3) ^ step;
                m.insert_at(at, key, new);
                p.insert(key, new);
                r.insert(key, new);
            }
            assert_eq!(m.get(&key), r.get(&key), "key {key} at step {step}");
            assert_eq!(m.len(), r.len());
            assert!(layout(&m) == layout(&p), "layout differs at step {step}");
        }
        assert!(m.slots.len() >= 4096, "the table never grew");
        for k in (0..2500).chain([u64::MAX]) {
            assert_eq!(m.get(&k), r.get(&k), "final key {k}");
        }
    }

    #[test]
    fn update_or_remove_matches_get_mut_then_remove() {
        // `update_or_remove` on one table, `get_mut` then `remove` on another, a `HashMap` as the
        // reference; the update removes when the new value is a multiple of 3.
        let mut m: LineMap<u32> = LineMap::default();
        let mut p: LineMap<u32> = LineMap::default();
        let mut r: HashMap<u64, u32> = HashMap::new();
        let mut rng = numaff_machine::rng::SplitMix64::new(0x0bad_cafe_f00d_d00d);
        let mut removed = 0;
        for step in 0..200_000u32 {
            let x = rng.next_u64();
            let key = key_of(x);
            let f = |v: &mut u32| {
                *v = v.wrapping_add(step % 7 + 1);
                (*v, v.is_multiple_of(3))
            };
            if x.is_multiple_of(3) {
                m.insert(key, step);
                p.insert(key, step);
                r.insert(key, step);
            } else {
                let got = m.update_or_remove(key, f);
                let want = r.get_mut(&key).map(f);
                assert_eq!(got, want, "key {key} at step {step}");
                if let Some((_, true)) = want {
                    r.remove(&key);
                    removed += 1;
                }
                if let Some((_, rm)) = p.get_mut(&key).map(f) {
                    if rm {
                        p.remove(&key);
                    }
                }
            }
            assert_eq!(m.get(&key), r.get(&key), "key {key} at step {step}");
            assert_eq!(m.len(), r.len());
            assert!(layout(&m) == layout(&p), "layout differs at step {step}");
        }
        assert!(removed > 10_000, "too few removals: {removed}");
        for k in (0..2500).chain([u64::MAX]) {
            assert_eq!(m.get(&k), r.get(&k), "final key {k}");
        }
    }
}
