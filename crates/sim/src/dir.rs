//! The coherence directory's storage: one entry per line held somewhere, in a `LineMap` whose slots
//! are 16, 24 or 32 bytes depending on how many caches the machine tracks.
//!
//! Each simulated LLC miss looks up two or three random directory slots; at memory-sized working sets
//! the directory (1-2 M slots) is larger than the host's L3, so a smaller slot means fewer host cache
//! misses. The narrow form keeps the holders in one `u64`: with at most 64 tracked caches every
//! directory bit is below 64 (bits are assigned in order, `tracked.len() % DIR_BITS`), so the high
//! word of the wide form is always zero there and the two forms hold the same information exactly.
//! The packed form goes further where the holder bits (at most 48), the owner (PU index + 1, below
//! 2^15) and the dirty bit fit together in one `u64` (laso-hpl: 44 holder bits and 40 PUs): a
//! 16-byte slot with its key.

use crate::linemap::{At, LineMap, Prefetcher};

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
    ) -> (Option<WriteBack>, bool) {
        self.holders[b / 64] &= !(1 << (b % 64));
        let mut wb = None;
        if let Some(o) = (self.owner as usize).checked_sub(1) {
            let ob = owner_bits(o);
            let still = (0..2).any(|w| self.holders[w] & ob[w] != 0);
            if !still {
                if self.dirty {
                    wb = Some(WriteBack::Owner(o));
                }
                self.owner = 0;
                self.dirty = false;
            }
        } else if self.dirty && self.holders == [0, 0] {
            wb = Some(WriteBack::LastCopy);
            self.dirty = false;
        }
        (wb, self.holders == [0, 0])
    }
}

/// A dirty line's data left the caches (`Directory::drop_holder`): it goes back to memory from
/// its owner's node, or, for a line dirty in a node's caches without an owner (a read of it
/// from another cache of the node kept it dirty there: `Simulator::coherent`), from the node of
/// the cache that dropped its last copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteBack {
    /// The owner, a PU index.
    Owner(usize),
    /// The line had no owner; its last holder dropped it.
    LastCopy,
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

/// Which of its three forms a `Directory` uses (fixed by `Directory::new`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FormKind {
    Packed,
    Narrow,
    Wide,
}

/// One form of the directory, as a type: the simulator's access path is generic over it
/// (`Simulator::run_pu` picks the instance once per call), so the form is not matched on every
/// directory lookup. `map` is a plain field of `Directory`, not a match.
pub(crate) trait Form {
    /// The `Directory::kind` this form reads (checked in debug builds: another form's map is
    /// empty, so a mismatch would lose the directory silently).
    const KIND: FormKind;
    type V: Copy + Default;
    fn map(d: &Directory) -> &LineMap<Self::V>;
    fn map_mut(d: &mut Directory) -> &mut LineMap<Self::V>;
    fn unpack(v: Self::V) -> DirEntry;
    fn pack(e: DirEntry) -> Self::V;
    /// `Directory::drop_holder`'s steps on a stored value.
    #[inline]
    fn drop_holder(
        v: &mut Self::V,
        b: usize,
        owner_bits: impl Fn(usize) -> [u64; 2],
    ) -> (Option<WriteBack>, bool) {
        let mut e = Self::unpack(*v);
        let r = e.drop_holder(b, owner_bits);
        *v = Self::pack(e);
        r
    }
}

/// The packed form (`Packing`): a `u64` per line.
pub(crate) struct PackedForm;
/// The narrow form: holders in one `u64`.
pub(crate) struct NarrowForm;
/// The wide form: `DirEntry` itself.
pub(crate) struct WideForm;

impl Form for PackedForm {
    const KIND: FormKind = FormKind::Packed;
    type V = u64;
    #[inline(always)]
    fn map(d: &Directory) -> &LineMap<u64> {
        debug_assert_eq!(d.kind, Self::KIND, "directory read with another form");
        &d.packed
    }
    #[inline(always)]
    fn map_mut(d: &mut Directory) -> &mut LineMap<u64> {
        debug_assert_eq!(d.kind, Self::KIND, "directory written with another form");
        &mut d.packed
    }
    #[inline(always)]
    fn unpack(v: u64) -> DirEntry {
        Packing.unpack(v)
    }
    #[inline(always)]
    fn pack(e: DirEntry) -> u64 {
        Packing.pack(e)
    }
    /// On the `u64` in place: its holder bits are all below 48, so the entry's and the owner's
    /// second holder words are zero and the one-word test is the two-word one.
    #[inline]
    fn drop_holder(
        v: &mut u64,
        b: usize,
        owner_bits: impl Fn(usize) -> [u64; 2],
    ) -> (Option<WriteBack>, bool) {
        debug_assert!(
            b < HOLDER_BITS as usize,
            "packed directory given a bit above 47"
        );
        let mut x = *v & !(1 << (b % 64));
        let mut wb = None;
        if let Some(o) = (((x & !DIRTY) >> HOLDER_BITS) as usize).checked_sub(1) {
            if x & HOLDERS & owner_bits(o)[0] == 0 {
                if x & DIRTY != 0 {
                    wb = Some(WriteBack::Owner(o));
                }
                x &= HOLDERS;
            }
        } else if x == DIRTY {
            // No owner, dirty, and no holder left.
            wb = Some(WriteBack::LastCopy);
            x = 0;
        }
        *v = x;
        (wb, x & HOLDERS == 0)
    }
}

impl Form for NarrowForm {
    const KIND: FormKind = FormKind::Narrow;
    type V = Narrow;
    #[inline(always)]
    fn map(d: &Directory) -> &LineMap<Narrow> {
        debug_assert_eq!(d.kind, Self::KIND, "directory read with another form");
        &d.narrow
    }
    #[inline(always)]
    fn map_mut(d: &mut Directory) -> &mut LineMap<Narrow> {
        debug_assert_eq!(d.kind, Self::KIND, "directory written with another form");
        &mut d.narrow
    }
    #[inline(always)]
    fn unpack(v: Narrow) -> DirEntry {
        v.widen()
    }
    #[inline(always)]
    fn pack(e: DirEntry) -> Narrow {
        Narrow::from_wide(e)
    }
}

impl Form for WideForm {
    const KIND: FormKind = FormKind::Wide;
    type V = DirEntry;
    #[inline(always)]
    fn map(d: &Directory) -> &LineMap<DirEntry> {
        debug_assert_eq!(d.kind, Self::KIND, "directory read with another form");
        &d.wide
    }
    #[inline(always)]
    fn map_mut(d: &mut Directory) -> &mut LineMap<DirEntry> {
        debug_assert_eq!(d.kind, Self::KIND, "directory written with another form");
        &mut d.wide
    }
    #[inline(always)]
    fn unpack(v: DirEntry) -> DirEntry {
        v
    }
    #[inline(always)]
    fn pack(e: DirEntry) -> DirEntry {
        e
    }
}

/// The directory: packed when holders, owner and dirty bit fit in a `u64`, else narrow when every
/// tracked cache's bit is below 64, wide otherwise. One map per form, only `kind`'s used (the
/// other two stay empty at 8 slots each), so that a `Form` reaches its map without a match.
pub(crate) struct Directory {
    kind: FormKind,
    packed: LineMap<u64>,
    narrow: LineMap<Narrow>,
    wide: LineMap<DirEntry>,
}

impl Directory {
    fn of(kind: FormKind) -> Self {
        // The form in use starts at `LineMap::default()`'s size, as before the three maps.
        let size = |k: FormKind| if k == kind { 64 } else { 8 };
        Directory {
            kind,
            packed: LineMap::with_capacity(size(FormKind::Packed)),
            narrow: LineMap::with_capacity(size(FormKind::Narrow)),
            wide: LineMap::with_capacity(size(FormKind::Wide)),
        }
    }

    /// A directory for a machine with `tracked` directory bits in use and owners (PU index + 1)
    /// up to `max_owner`.
    pub(crate) fn new(tracked: usize, max_owner: u32) -> Self {
        Self::of(if Packing::new(tracked, max_owner).is_some() {
            FormKind::Packed
        } else if tracked <= 64 {
            FormKind::Narrow
        } else {
            FormKind::Wide
        })
    }

    /// The directory of form `kind` for `new`'s machine, if that form can hold it (for tests).
    #[cfg(test)]
    pub(crate) fn with_kind(tracked: usize, max_owner: u32, kind: FormKind) -> Option<Self> {
        let fits = match kind {
            FormKind::Packed => Packing::new(tracked, max_owner).is_some(),
            FormKind::Narrow => tracked <= 64,
            FormKind::Wide => true,
        };
        fits.then(|| Self::of(kind))
    }

    /// Only the narrow or wide form, as `new` chose before the packed form existed (for tests).
    #[cfg(test)]
    fn unpacked(tracked: usize) -> Self {
        Self::of(if tracked <= 64 {
            FormKind::Narrow
        } else {
            FormKind::Wide
        })
    }

    /// Gives the map of the form in use (still empty) room to grow in place up to the slots of
    /// `lines` entries, `lines` being the tracked caches' lines: an entry lives while it has a
    /// holder bit, i.e. nearly always while a tracked cache holds its line, so the entries rarely
    /// outnumber those lines, and a map at most half full then needs no more than the power of two
    /// at or above twice that. Not a strict bound: a holder bit that aliases another cache's
    /// (machines with more tracked caches than bits: crates/sim/README.md, "Caches and the
    /// directory") can keep an entry whose line no cache holds; past the room the map grows into a
    /// new table, as without it, with the same entries. Address space only until the directory
    /// grows into it (`LineMap::with_room`); the shipped workloads stay within it (laso-hpl: 4 Mi
    /// slots).
    pub(crate) fn reserve(&mut self, lines: usize) {
        let max = lines.saturating_mul(2);
        match self.kind {
            FormKind::Packed => self.packed = LineMap::with_room(64, max),
            FormKind::Narrow => self.narrow = LineMap::with_room(64, max),
            FormKind::Wide => self.wide = LineMap::with_room(64, max),
        }
    }

    /// The form in use: the `Form` to run the access path with.
    pub(crate) fn kind(&self) -> FormKind {
        self.kind
    }

    /// Starts the host's fetch of the slots a lookup of `key` reads.
    #[inline]
    pub(crate) fn prefetch<F: Form>(&self, key: u64) {
        F::map(self).prefetch(key);
    }

    /// `prefetch` with the layout read once (`LineMap::prefetcher`), for several keys before the
    /// directory next changes.
    #[inline]
    pub(crate) fn prefetcher<F: Form>(&self) -> Prefetcher {
        F::map(self).prefetcher()
    }

    /// Number of lines present.
    pub(crate) fn len(&self) -> usize {
        self.packed.len() + self.narrow.len() + self.wide.len()
    }

    /// The entry of `key`, if present (tests: the access path reads with `entry`).
    #[cfg(test)]
    pub(crate) fn get<F: Form>(&self, key: u64) -> Option<DirEntry> {
        F::map(self).get(&key).map(|&v| F::unpack(v))
    }

    /// Sets the entry of `key`, adding it if absent (the access path writes with `insert_at`;
    /// this is for the lines of a page that stops being private, `Simulator::share_page`).
    #[inline]
    pub(crate) fn insert<F: Form>(&mut self, key: u64, e: DirEntry) {
        F::map_mut(self).insert(key, F::pack(e));
    }

    /// The entry of `key` (the default, empty one if absent) and where it is or would go
    /// (`LineMap::entry`), for `insert_at` before the directory next changes. Every form unpacks
    /// its default value to `DirEntry::default()` (`every_form_unpacks_its_default_empty`).
    #[inline(always)]
    pub(crate) fn entry<F: Form>(&self, key: u64) -> (At, DirEntry) {
        let (at, v) = F::map(self).entry(key);
        (at, F::unpack(v))
    }

    /// Sets the entry of `key` at `at`, which `entry(key)` gave with no change to the directory
    /// since: `insert` without its probe.
    #[inline(always)]
    pub(crate) fn insert_at<F: Form>(&mut self, at: At, key: u64, e: DirEntry) {
        F::map_mut(self).insert_at(at, key, F::pack(e));
    }

    /// Applies `f` to the entry of `key` in place, if present, and returns its result.
    #[inline]
    pub(crate) fn update<F: Form, R>(
        &mut self,
        key: u64,
        f: impl FnOnce(&mut DirEntry) -> R,
    ) -> Option<R> {
        F::map_mut(self).get_mut(&key).map(|v| {
            let mut e = F::unpack(*v);
            let r = f(&mut e);
            *v = F::pack(e);
            r
        })
    }

    /// Clears holder bit `b` of `key`'s entry, if present (a cache whose bit is `b` dropped the
    /// line); if its owner (PU index `o`) then holds it in none of the caches of `owner_bits(o)`,
    /// the entry loses its owner and its dirty bit; if no holder is left, the entry is removed.
    /// Returns the write-back due, if any (the owner dropped while dirty, or the last copy of a
    /// dirty line without an owner), and whether no holder was left (the entry removed): what `update` with these steps on a `DirEntry`, then
    /// `remove` when empty, would give, with one probe of the table (`LineMap::update_or_remove`;
    /// on the packed form's `u64` in place, `PackedForm::drop_holder`).
    #[inline(always)]
    pub(crate) fn drop_holder<F: Form>(
        &mut self,
        key: u64,
        b: usize,
        owner_bits: impl Fn(usize) -> [u64; 2],
    ) -> Option<(Option<WriteBack>, bool)> {
        F::map_mut(self).update_or_remove(key, |v| F::drop_holder(v, b, owner_bits))
    }

    /// Removes `key` (tests: the access path removes through `drop_holder`).
    #[cfg(test)]
    pub(crate) fn remove<F: Form>(&mut self, key: u64) {
        F::map_mut(self).remove(&key);
    }
}

/// The directory's methods with the form matched per call (tests only: they mix forms).
#[cfg(test)]
macro_rules! any_form {
    ($d:expr, $m:ident ( $($a:expr),* )) => {
        match $d.kind() {
            FormKind::Packed => $d.$m::<PackedForm>($($a),*),
            FormKind::Narrow => $d.$m::<NarrowForm>($($a),*),
            FormKind::Wide => $d.$m::<WideForm>($($a),*),
        }
    };
}

#[cfg(test)]
impl Directory {
    pub(crate) fn get_any(&self, key: u64) -> Option<DirEntry> {
        any_form!(self, get(key))
    }
    fn insert_any(&mut self, key: u64, e: DirEntry) {
        any_form!(self, insert(key, e))
    }
    fn update_any<R>(&mut self, key: u64, f: impl FnOnce(&mut DirEntry) -> R) -> Option<R> {
        match self.kind() {
            FormKind::Packed => self.update::<PackedForm, R>(key, f),
            FormKind::Narrow => self.update::<NarrowForm, R>(key, f),
            FormKind::Wide => self.update::<WideForm, R>(key, f),
        }
    }
    fn drop_holder_any(
        &mut self,
        key: u64,
        b: usize,
        owner_bits: impl Fn(usize) -> [u64; 2],
    ) -> Option<(Option<WriteBack>, bool)> {
        any_form!(self, drop_holder(key, b, owner_bits))
    }
    fn remove_any(&mut self, key: u64) {
        any_form!(self, remove(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrow_directory_slot_is_24_bytes() {
        assert_eq!(LineMap::<Narrow>::slot_bytes(), 24);
        assert_eq!(LineMap::<DirEntry>::slot_bytes(), 32);
    }

    #[test]
    fn every_form_unpacks_its_default_empty() {
        let d = |e: DirEntry| (e.holders, e.owner, e.dirty);
        let empty = d(DirEntry::default());
        assert_eq!(d(PackedForm::unpack(u64::default())), empty);
        assert_eq!(d(NarrowForm::unpack(Narrow::default())), empty);
        assert_eq!(d(WideForm::unpack(DirEntry::default())), empty);
        for mut dir in [
            Directory::new(44, 40),
            Directory::unpacked(64),
            Directory::unpacked(65),
        ] {
            let e = DirEntry {
                holders: [1 << 3, 0],
                owner: 2,
                dirty: true,
            };
            for key in [5, u64::MAX] {
                let (at, got) = any_form!(dir, entry(key));
                assert!(!at.present());
                assert_eq!(d(got), empty, "absent key {key}");
                any_form!(dir, insert_at(at, key, e));
                let (at, got) = any_form!(dir, entry(key));
                assert!(at.present());
                assert_eq!(d(got), d(e), "key {key}");
            }
            assert_eq!(dir.len(), 2);
        }
    }

    #[test]
    fn narrow_and_wide_directories_agree() {
        let n = Directory::unpacked(64);
        let w = Directory::unpacked(65);
        assert!(n.kind() == FormKind::Narrow);
        assert!(w.kind() == FormKind::Wide);
        same_under_random_use(n, w, 64, 9);
    }

    #[test]
    fn packed_directory_slot_is_16_bytes_where_it_fits() {
        assert_eq!(LineMap::<u64>::slot_bytes(), 16);
        // laso-hpl: 40 private L2s + 4 L3s, owners 1..=40.
        assert!(Directory::new(44, 40).kind() == FormKind::Packed);
        assert!(Directory::new(48, 32767).kind() == FormKind::Packed);
        assert!(Directory::new(49, 40).kind() == FormKind::Narrow);
        assert!(Directory::new(20, 32768).kind() == FormKind::Narrow);
        assert!(Directory::new(64, 1).kind() == FormKind::Narrow);
        assert!(Directory::new(65, 1).kind() == FormKind::Wide);
    }

    #[test]
    fn packed_and_wide_directories_agree() {
        for (tracked, max_owner) in [(44, 40), (1, 1), (0, 5), (48, 32767), (20, 2000)] {
            let p = Directory::new(tracked, max_owner);
            assert!(p.kind() == FormKind::Packed, "{tracked} {max_owner}");
            let w = Directory::unpacked(65);
            same_under_random_use(p, w, tracked, max_owner);
        }
    }

    #[test]
    fn drop_holder_drops_the_owner_with_its_last_cache() {
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
            d.insert_any(7, e);
            assert_eq!(d.drop_holder_any(8, 3, bits), None, "absent line");
            assert_eq!(d.drop_holder_any(7, 10, bits), Some((None, false)));
            let g = d.get_any(7).map(|e| (e.holders, e.owner, e.dirty));
            assert_eq!(
                g,
                Some(([1 << 3, 0], 5, true)),
                "owner kept while it holds the line"
            );
            d.insert_any(7, e);
            assert_eq!(
                d.drop_holder_any(7, 3, bits),
                Some((Some(WriteBack::Owner(4)), false))
            );
            let g = d.get_any(7).map(|e| (e.holders, e.owner, e.dirty));
            assert_eq!(
                g,
                Some(([1 << 10, 0], 0, false)),
                "owner and dirty bit dropped"
            );
            d.insert_any(9, e);
            assert_eq!(
                d.drop_holder_any(7, 10, bits),
                Some((None, true)),
                "no holder left"
            );
            assert!(d.get_any(7).is_none(), "entry removed with its last holder");
            assert_eq!(d.len(), 1);
            assert_eq!(d.drop_holder_any(7, 10, bits), None, "removed line");
            assert!(d.get_any(9).is_some(), "other entry kept");
            // Dirty without an owner (kept dirty within a node by a transfer): written back
            // when its last holder drops it, not before.
            let shared = DirEntry { owner: 0, ..e };
            d.insert_any(11, shared);
            assert_eq!(d.drop_holder_any(11, 3, bits), Some((None, false)));
            let g = d.get_any(11).map(|e| (e.holders, e.owner, e.dirty));
            assert_eq!(g, Some(([1 << 10, 0], 0, true)), "still dirty");
            assert_eq!(
                d.drop_holder_any(11, 10, bits),
                Some((Some(WriteBack::LastCopy), true)),
                "the last copy of a dirty line"
            );
            assert!(d.get_any(11).is_none());
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
        let mut rng = numaff_machine::rng::SplitMix64::new(0);
        for step in 0..50_000u32 {
            let x = rng.next_u64();
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
                    assert_eq!(
                        n.drop_holder_any(key, b, bits),
                        w.drop_holder_any(key, b, bits)
                    );
                }
                0 => {
                    n.remove_any(key);
                    w.remove_any(key);
                }
                1 => {
                    n.insert_any(key, e);
                    w.insert_any(key, e);
                }
                _ => {
                    let f = |d: &mut DirEntry| {
                        d.holders[0] &= !(1 << (step % 64));
                        d.owner = d.owner.saturating_sub(1);
                        d.dirty = !d.dirty;
                        d.holders[0]
                    };
                    assert_eq!(n.update_any(key, f), w.update_any(key, f));
                }
            }
            let (a, b) = (n.get_any(key), w.get_any(key));
            assert_eq!(
                a.map(|d| (d.holders, d.owner, d.dirty)),
                b.map(|d| (d.holders, d.owner, d.dirty))
            );
            assert_eq!(n.len(), w.len());
        }
    }
}
