//! One set-associative cache instance with true LRU replacement over 64-byte lines, holding a
//! 2-bit coherence state per line (shared, exclusive, modified) for the simulator's directory.

/// Coherence state of a cached line as the simulator tracks it (MESI without I: absent is invalid).
pub const SHARED: u8 = 0;
/// Held by one private domain, clean.
pub const EXCLUSIVE: u8 = 1;
/// Held by one private domain, written.
pub const MODIFIED: u8 = 2;
/// The simulator's private lines (`Simulator::private_lines`) in a second level: written, and the
/// third level holds the line `MODIFIED` as well, so that the second level can drop it without
/// looking there.
pub const MODIFIED_OUTER: u8 = 3;
// The simulator's private lines compute these states by adding to `EXCLUSIVE`, and `written`
// turns `EXCLUSIVE` into `MODIFIED` by adding one.
const _: () = assert!(EXCLUSIVE + 1 == MODIFIED && EXCLUSIVE + 2 == MODIFIED_OUTER);

/// A line a fill evicted: its entry as the set held it (tag and state).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evicted(u64);

impl Evicted {
    /// The evicted line.
    #[inline(always)]
    pub fn line(self) -> u64 {
        (self.0 >> 2) - 1
    }
    /// Its state when it left.
    #[inline(always)]
    pub fn state(self) -> u8 {
        (self.0 & 3) as u8
    }
}

/// A set-associative LRU cache. Each set is a run of `ways` entries ordered most recently used first;
/// an entry is `(line + 1) << 2 | state`, 0 for an empty way.
#[derive(Debug, Clone)]
pub struct SetAssoc {
    /// The sets, `ways` entries each (`hostmem::Zeroed`: a large array starts on a 2 MiB
    /// boundary, on huge pages, and a new simulator's arrays are fresh zero pages).
    entries: crate::hostmem::Zeroed<u64>,
    ways: usize,
    sets: u64,
    mask: Option<u64>,
    /// `sets - 1`: the set mask whatever the set count (used only by the `*_p8` lookups, which
    /// run only on caches whose `is_p8` holds).
    low: u64,
    /// `u128::MAX / sets + 1`: the set of a line as Lemire's `fastmod_u64` (exact for every u64,
    /// Lemire, Kaser & Kurz 2019, "Faster remainder by direct computation"), without a division,
    /// when `sets` is not a power of two.
    magic: u128,
}

/// `a % d` from `magic = u128::MAX / d + 1` with three multiplications instead of a division.
#[inline]
fn fastmod(a: u64, magic: u128, d: u64) -> u64 {
    let low = magic.wrapping_mul(u128::from(a));
    let bottom = ((low & u128::from(u64::MAX)) * u128::from(d)) >> 64;
    let top = (low >> 64) * u128::from(d);
    ((bottom + top) >> 64) as u64
}

/// Puts `e` first in `run` and shifts the others down by one, dropping the last: the LRU update.
/// A loop carrying one value (not `copy_within`, whose variable length costs a call to `memmove`
/// per access; the runs are at most a set long).
#[inline]
fn to_front(run: &mut [u64], e: u64) {
    let mut carry = e;
    for w in run.iter_mut() {
        carry = std::mem::replace(w, carry);
    }
}

/// Bit `w` set for each way `w` of an 8-way set whose entry holds `tag`: `e >> 2 == tag` for the
/// eight ways at once, without a branch per way (an L1 or L2 hit's way is unpredictable, and a
/// mispredicted early exit costs more than the eight compares).
#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn match8(set: &[u64; 8], tag: u64) -> u32 {
    let mut m = 0;
    for (w, &e) in set.iter().enumerate() {
        m |= u32::from(e >> 2 == tag) << w;
    }
    m
}

/// `match8` with SSE2 (part of every x86_64 target): two ways per compare. SSE2 compares 32-bit
/// lanes, so a way matches where both halves of its masked entry equal those of `tag << 2`. The
/// ways are read as four 16-byte loads, and the two halves of each way combined for all eight
/// ways at once (even and odd lanes gathered by two shuffles per four ways, then one mask):
/// fewer host instructions than comparing the ways one by one.
#[cfg(target_arch = "x86_64")]
#[inline]
fn match8(set: &[u64; 8], tag: u64) -> u32 {
    use std::arch::x86_64::{
        __m128, _mm_and_ps, _mm_and_si128, _mm_castsi128_ps, _mm_cmpeq_epi32, _mm_loadu_si128,
        _mm_movemask_ps, _mm_set1_epi64x, _mm_shuffle_ps,
    };
    // An entry keeps 62 bits of `line + 1`: `e >> 2` never equals a larger tag.
    if tag >> 62 != 0 {
        return 0;
    }
    let p = set.as_ptr();
    // SAFETY: these intrinsics only need SSE2, which every x86_64 target has; the loads read
    // ways `2 * i` and `2 * i + 1` (i < 4) of `set`, inside the 64 bytes it borrows, and
    // `_mm_loadu_si128` needs no alignment.
    unsafe {
        let want = _mm_set1_epi64x((tag << 2) as i64);
        let keep = _mm_set1_epi64x(!3);
        let eq = |i: usize| -> __m128 {
            let pair = _mm_loadu_si128(p.add(2 * i).cast());
            _mm_castsi128_ps(_mm_cmpeq_epi32(_mm_and_si128(pair, keep), want))
        };
        let (e0, e1, e2, e3) = (eq(0), eq(1), eq(2), eq(3));
        // Lanes 0 and 2 of each pair of compares are the ways' low halves, 1 and 3 their high.
        let lo = _mm_and_ps(
            _mm_shuffle_ps::<0b10_00_10_00>(e0, e1),
            _mm_shuffle_ps::<0b11_01_11_01>(e0, e1),
        );
        let hi = _mm_and_ps(
            _mm_shuffle_ps::<0b10_00_10_00>(e2, e3),
            _mm_shuffle_ps::<0b11_01_11_01>(e2, e3),
        );
        (_mm_movemask_ps(lo) | _mm_movemask_ps(hi) << 4) as u32
    }
}

/// `match8` for lookups that mostly miss, with SSE2, low halves first: the ways' low 32 bits
/// (state bits masked) gathered by two shuffles and compared with `tag << 2`'s, four ways per
/// compare; only the ways whose low halves match are compared whole. A miss (every access of a
/// memory-sized stream, at each level past the first) is decided by the low halves alone, which
/// two lines share only a multiple of 2^30 lines (64 GiB) apart: 8 host instructions fewer than
/// `match8` for a miss, a few more for a hit.
#[cfg(target_arch = "x86_64")]
#[inline]
fn match8_cold(set: &[u64; 8], tag: u64) -> u32 {
    use std::arch::x86_64::{
        _mm_and_ps, _mm_castps_si128, _mm_castsi128_ps, _mm_cmpeq_epi32, _mm_loadu_ps,
        _mm_movemask_ps, _mm_set1_epi32, _mm_shuffle_ps,
    };
    // An entry keeps 62 bits of `line + 1`: `e >> 2` never equals a larger tag.
    if tag >> 62 != 0 {
        return 0;
    }
    let want = tag << 2;
    let p = set.as_ptr().cast::<f32>();
    // SAFETY: these intrinsics only need SSE2, which every x86_64 target has; the loads read
    // ways `2 * i` and `2 * i + 1` (i < 4) of `set`, inside the 64 bytes it borrows, and
    // `_mm_loadu_ps` needs no alignment.
    let low = unsafe {
        let (a0, a1, a2, a3) = (
            _mm_loadu_ps(p),
            _mm_loadu_ps(p.add(4)),
            _mm_loadu_ps(p.add(8)),
            _mm_loadu_ps(p.add(12)),
        );
        // Lanes 0 and 2 of each pair of ways are their low halves (little-endian).
        let keep = _mm_castsi128_ps(_mm_set1_epi32(!3));
        let w = _mm_set1_epi32(want as u32 as i32);
        let eq = |x, y| {
            let lows = _mm_and_ps(_mm_shuffle_ps::<0b10_00_10_00>(x, y), keep);
            _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(_mm_castps_si128(lows), w)))
        };
        (eq(a0, a1) | eq(a2, a3) << 4) as u32
    };
    let mut m = 0;
    let mut c = low;
    while c != 0 {
        let k = c.trailing_zeros() as usize;
        m |= u32::from(set[k] & !3 == want) << k;
        c &= c - 1;
    }
    m
}

/// `match8` for lookups that mostly miss.
#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn match8_cold(set: &[u64; 8], tag: u64) -> u32 {
    match8(set, tag)
}

/// The host's vector instructions for the set lookups: a token passed down to them, so that one
/// build of a loop can compare ways with wider instructions than the target's base set. Its
/// value proves the host has them (`Avx2::on_host`): a safe call never runs an instruction the
/// host lacks.
pub(crate) trait Lanes: Copy {
    /// `match8` (the ways of an 8-way set holding `tag`).
    fn match8(self, set: &[u64; 8], tag: u64) -> u32;
    /// `match8_cold` (the same, for lookups that mostly miss).
    fn match8_cold(self, set: &[u64; 8], tag: u64) -> u32;
}

/// The target's base instructions (SSE2 on x86_64).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Base;

impl Lanes for Base {
    #[inline(always)]
    fn match8(self, set: &[u64; 8], tag: u64) -> u32 {
        match8(set, tag)
    }
    #[inline(always)]
    fn match8_cold(self, set: &[u64; 8], tag: u64) -> u32 {
        match8_cold(set, tag)
    }
}

/// AVX2, which the host has: only `on_host` makes one.
#[cfg(target_arch = "x86_64")]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Avx2(());

#[cfg(target_arch = "x86_64")]
impl Avx2 {
    /// An `Avx2` if the host has AVX2.
    pub(crate) fn on_host() -> Option<Self> {
        is_x86_feature_detected!("avx2").then_some(Avx2(()))
    }
}

/// AVX2 off x86_64: none is ever made.
#[cfg(not(target_arch = "x86_64"))]
#[derive(Debug, Clone, Copy)]
pub(crate) enum Avx2 {}

#[cfg(not(target_arch = "x86_64"))]
impl Avx2 {
    /// None: no host of the target has AVX2.
    pub(crate) fn on_host() -> Option<Self> {
        None
    }
}

#[cfg(not(target_arch = "x86_64"))]
impl Lanes for Avx2 {
    fn match8(self, _: &[u64; 8], _: u64) -> u32 {
        match self {}
    }
    fn match8_cold(self, _: &[u64; 8], _: u64) -> u32 {
        match self {}
    }
}

#[cfg(target_arch = "x86_64")]
impl Lanes for Avx2 {
    #[inline(always)]
    fn match8(self, set: &[u64; 8], tag: u64) -> u32 {
        // SAFETY: an `Avx2` exists only where the host has AVX2 (`on_host`).
        unsafe { match8_avx2(set, tag) }
    }
    /// Four ways a compare: a miss costs no more than the low halves' compare of `match8_cold`.
    #[inline(always)]
    fn match8_cold(self, set: &[u64; 8], tag: u64) -> u32 {
        self.match8(set, tag)
    }
}

/// `match8` with AVX2: the masked entries of four ways compared with `tag << 2` by one 64-bit
/// compare, twice (SSE2 compares 32-bit lanes and combines the halves by shuffles).
///
/// # Safety
/// The host must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn match8_avx2(set: &[u64; 8], tag: u64) -> u32 {
    use std::arch::x86_64::{
        _mm256_and_si256, _mm256_castsi256_pd, _mm256_cmpeq_epi64, _mm256_loadu_si256,
        _mm256_movemask_pd, _mm256_set1_epi64x,
    };
    // An entry keeps 62 bits of `line + 1`: `e >> 2` never equals a larger tag.
    if tag >> 62 != 0 {
        return 0;
    }
    let p = set.as_ptr();
    let want = _mm256_set1_epi64x((tag << 2) as i64);
    let keep = _mm256_set1_epi64x(!3);
    let eq = |i: usize| {
        // SAFETY: ways `4 * i` to `4 * i + 3` (i < 2) of `set`, inside the 64 bytes it borrows;
        // `_mm256_loadu_si256` needs no alignment.
        let q = unsafe { _mm256_loadu_si256(p.add(4 * i).cast()) };
        let e = _mm256_cmpeq_epi64(_mm256_and_si256(q, keep), want);
        _mm256_movemask_pd(_mm256_castsi256_pd(e)) as u32
    };
    eq(0) | eq(1) << 4
}

/// The entry `e` after a write under the private lines' states: `EXCLUSIVE` (1) becomes
/// `MODIFIED` (2), the others stay; without a branch. Returns the old state.
#[inline(always)]
fn written(e: &mut u64) -> u8 {
    let st = *e & 3;
    *e += u64::from(st == u64::from(EXCLUSIVE));
    st as u8
}

/// `to_front` of the first `k + 1` ways of an 8-way set, without a branch on `k`: each way
/// takes its own or its predecessor's old entry (selects the compiler writes as conditional
/// moves; with `match8`'s 16-byte loads, a masks-and-or form is compiled into a longer vector
/// sequence).
#[inline]
fn to_front8(set: &mut [u64; 8], k: usize, e: u64) {
    let old = *set;
    for w in 1..8 {
        set[w] = if w <= k { old[w - 1] } else { old[w] };
    }
    set[0] = e;
}

/// `touch` within one 8-way set: on a hit the line becomes most recently used and its state is
/// returned. Shared by the general lookups and the `*_p8` ones.
#[inline(always)]
fn touch8(lanes: impl Lanes, set: &mut [u64; 8], tag: u64) -> Option<u8> {
    let m = lanes.match8(set, tag);
    touch8_at(set, m)
}

/// `touch8` of the way `m` gives (`match8` or `match8_cold` of the tag).
#[inline(always)]
fn touch8_at(set: &mut [u64; 8], m: u32) -> Option<u8> {
    if m == 0 {
        return None;
    }
    let k = m.trailing_zeros() as usize;
    let e = set[k];
    to_front8(set, k, e);
    Some((e & 3) as u8)
}

/// `fill` within one 8-way set: `new` (tag and state) becomes most recently used; the evicted
/// line, if the tag was absent and the set full.
#[inline(always)]
fn fill8(lanes: impl Lanes, set: &mut [u64; 8], tag: u64, new: u64) -> Option<Evicted> {
    let m = lanes.match8(set, tag);
    let last = set[7];
    let (k, evicted) = if m != 0 {
        (m.trailing_zeros() as usize, None)
    } else {
        (7, (last != 0).then_some(Evicted(last)))
    };
    to_front8(set, k, new);
    evicted
}

/// `fill_absent` within one 8-way set: a shift of fixed length (a few vector moves instead of a
/// loop over the ways); the evicted line, if the set was full.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn fill_absent8(set: &mut [u64; 8], new: u64) -> Option<Evicted> {
    let last = set[7];
    set.copy_within(0..7, 1);
    set[0] = new;
    (last != 0).then_some(Evicted(last))
}

/// `fill_absent8` with SSE2: the shifted set written as the four 16-byte pairs of ways that
/// `match8` reads. A first level's set is read again at once when the second level's victim
/// leaves it (`remove_p8`, same set), and the shift's stores at an 8-byte offset (`copy_within`)
/// could not be forwarded to those 16-byte loads: the load waited for the stores to reach the
/// host's cache.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn fill_absent8(set: &mut [u64; 8], new: u64) -> Option<Evicted> {
    use std::arch::x86_64::{
        __m128d, _mm_castpd_si128, _mm_castsi128_pd, _mm_loadu_si128, _mm_set_epi64x,
        _mm_shuffle_pd, _mm_storeu_si128, _mm_unpacklo_epi64,
    };
    let last = set[7];
    let p = set.as_mut_ptr();
    // SAFETY: these intrinsics only need SSE2, which every x86_64 target has; the loads and
    // stores are of ways `2 * i` and `2 * i + 1` (i < 4) of `set`, inside the 64 bytes it
    // borrows mutably, and need no alignment.
    unsafe {
        let pair = |i: usize| -> __m128d { _mm_castsi128_pd(_mm_loadu_si128(p.add(2 * i).cast())) };
        let (a0, a1, a2, a3) = (pair(0), pair(1), pair(2), pair(3));
        // (new, w0), (w1, w2), (w3, w4), (w5, w6): each pair's high way, then the next's low.
        let n = _mm_set_epi64x(0, new as i64);
        let p0 = _mm_unpacklo_epi64(n, _mm_castpd_si128(a0));
        let p1 = _mm_castpd_si128(_mm_shuffle_pd::<0b01>(a0, a1));
        let p2 = _mm_castpd_si128(_mm_shuffle_pd::<0b01>(a1, a2));
        let p3 = _mm_castpd_si128(_mm_shuffle_pd::<0b01>(a2, a3));
        _mm_storeu_si128(p.cast(), p0);
        _mm_storeu_si128(p.add(2).cast(), p1);
        _mm_storeu_si128(p.add(4).cast(), p2);
        _mm_storeu_si128(p.add(6).cast(), p3);
    }
    (last != 0).then_some(Evicted(last))
}

/// `remove` within one 8-way set: the less recently used ways move up, an empty way last.
#[inline(always)]
fn remove8(lanes: impl Lanes, set: &mut [u64; 8], tag: u64) -> bool {
    let m = lanes.match8(set, tag);
    if m == 0 {
        return false;
    }
    let k = m.trailing_zeros() as usize;
    for w in 0..7 {
        let take = u64::from(w >= k).wrapping_neg();
        set[w] = (set[w + 1] & take) | (set[w] & !take);
    }
    set[7] = 0;
    true
}

/// `fill_absent8` of `new`, then `remove8` of `gone` (a tag), in one pass over the set: a first
/// level's fill, then the removal of its second level's victim, which lies in the same set
/// (`SetAssoc::fill_absent_removing_p8`). `gone` in ways 0-6 leaves, the ways after it move up
/// and the last is left empty; in way 7, or absent, the fill drops way 7 as `fill_absent8`
/// does, and there is nothing left to remove.
#[inline(always)]
fn fill_absent_removing8(lanes: impl Lanes, set: &mut [u64; 8], new: u64, gone: Option<u64>) {
    let m = gone.map_or(0, |tag| lanes.match8_cold(set, tag) & 0x7f);
    if m == 0 {
        fill_absent8(set, new);
        return;
    }
    to_front8(set, m.trailing_zeros() as usize, new);
    set[7] = 0;
}

/// Ways of the sets the `*_w20` lookups take for granted: the 20-way last levels of laso-hpl,
/// agung-xeon2 and agung-xeon56.
const W20: usize = 20;

/// `touch` within one 20-way set: its 8 most recently used ways without branches (where a hit
/// mostly is), then the other 12 as two `match8` of ways 8-15 and 12-19 (a miss, every access
/// of a memory-sized stream, compared them one by one in 58 host instructions).
#[inline(always)]
fn touch20(lanes: impl Lanes, set: &mut [u64; W20], tag: u64) -> Option<u8> {
    let (head, _) = set.split_at_mut(8);
    if let Some(head) = head.first_chunk_mut::<8>() {
        if let Some(st) = touch8(lanes, head, tag) {
            return Some(st);
        }
    }
    let run = |from: usize| {
        set.get(from..from + 8)
            .and_then(|r| r.first_chunk::<8>())
            .map_or(0, |r| lanes.match8_cold(r, tag))
    };
    let m = run(8) | run(12) << 4;
    if m == 0 {
        return None;
    }
    let k = 8 + m.trailing_zeros() as usize;
    let e = set[k];
    to_front(&mut set[..=k], e);
    Some((e & 3) as u8)
}

/// The way of a 20-way set holding `tag`: `match8` over ways 0-7, 8-15 and 12-19, no branch
/// per way.
#[inline(always)]
fn way20(lanes: impl Lanes, set: &[u64; W20], tag: u64) -> Option<usize> {
    let run = |from: usize| {
        set.get(from..from + 8)
            .and_then(|r| r.first_chunk::<8>())
            .map_or(0, |r| lanes.match8(r, tag))
    };
    let m = run(0) | run(8) << 8 | run(12) << 12;
    (m != 0).then(|| m.trailing_zeros() as usize)
}

/// `fill_absent` within one 20-way set: a shift of fixed length, which the compiler writes as a
/// few vector moves (the loop of `to_front` over a run of unknown length costs three
/// instructions per way).
#[inline(always)]
fn fill_absent20(set: &mut [u64; W20], new: u64) -> Option<Evicted> {
    let last = set[W20 - 1];
    for w in (1..W20).rev() {
        set[w] = set[w - 1];
    }
    set[0] = new;
    (last != 0).then_some(Evicted(last))
}

impl SetAssoc {
    /// The 8 ways of the set at `base` when the cache is 8-way.
    #[inline]
    fn set8(&mut self, base: usize) -> Option<&mut [u64; 8]> {
        if self.ways != 8 {
            return None;
        }
        self.entries.get_mut(base..base + 8)?.first_chunk_mut::<8>()
    }

    /// A cache of `size_bytes` with `line_bytes` lines and `ways` ways (0 or more than the lines
    /// means fully associative, capped at 32 ways to keep lookups cheap: an approximation).
    pub fn new(size_bytes: u64, line_bytes: u64, ways: u32) -> Self {
        let lines = (size_bytes / line_bytes.max(1)).max(1);
        let mut ways = u64::from(ways);
        if ways == 0 || ways > lines {
            ways = lines.min(32);
        }
        let sets = (lines / ways).max(1);
        let n = (sets * ways) as usize;
        SetAssoc {
            entries: crate::hostmem::Zeroed::new(n),
            ways: ways as usize,
            sets,
            mask: sets.is_power_of_two().then(|| sets - 1),
            low: sets - 1,
            magic: (u128::MAX / u128::from(sets)).wrapping_add(1),
        }
    }

    /// The index of the first entry of the line's set: what the `*_in` methods take, so that a
    /// caller that looks the same line up several times computes it once (for a set count that
    /// is not a power of two, such as laso-hpl's L3, it costs three wide multiplications).
    #[inline]
    pub fn set_of(&self, line: u64) -> usize {
        let s = match self.mask {
            Some(m) => line & m,
            None => fastmod(line, self.magic, self.sets),
        };
        s as usize * self.ways
    }

    /// Starts the host's fetch of the line's set (every host cache line of it), without waiting:
    /// its ways 0, 8, 16, 24, ... and its last way, as straight-line code for sets of up to 24
    /// ways (a loop over `step_by(8)` cost some 24 host instructions per call).
    #[inline]
    pub fn prefetch(&self, line: u64) {
        self.prefetch_in(self.set_of(line));
    }

    /// `prefetch` of the set at `base` (from `set_of`).
    #[inline]
    pub fn prefetch_in(&self, base: usize) {
        let p = self.entries.as_ptr();
        let last = base + self.ways - 1;
        crate::hostmem::prefetch(p.wrapping_add(base));
        crate::hostmem::prefetch(p.wrapping_add((base + 8).min(last)));
        crate::hostmem::prefetch(p.wrapping_add((base + 16).min(last)));
        crate::hostmem::prefetch(p.wrapping_add(last));
        let mut w = base + 24;
        while w < last {
            crate::hostmem::prefetch(p.wrapping_add(w));
            w += 8;
        }
    }

    /// The least recently used line of the line's set if the set is full (what a fill of a new
    /// line there would evict), with its state.
    #[inline]
    pub fn lru(&self, line: u64) -> Option<Evicted> {
        self.lru_in(self.set_of(line))
    }

    /// `lru` of the set at `base` (from `set_of`).
    #[inline]
    pub fn lru_in(&self, base: usize) -> Option<Evicted> {
        let last = self.entries[base + self.ways - 1];
        (last != 0).then_some(Evicted(last))
    }

    /// Looks a line up; on a hit it becomes most recently used and its state is returned.
    #[inline(always)]
    pub fn touch(&mut self, line: u64) -> Option<u8> {
        self.touch_in(self.set_of(line), line)
    }

    /// `touch` of a line whose set is at `base` (`set_of(line)`).
    #[inline(always)]
    pub fn touch_in(&mut self, base: usize, line: u64) -> Option<u8> {
        debug_assert_eq!(base, self.set_of(line), "touch_in given another set");
        let tag = line + 1;
        if let Some(set) = self.set8(base) {
            return touch8(Base, set, tag);
        }
        let set = &mut self.entries[base..base + self.ways];
        // Larger sets: the 8 most recently used ways (where a hit mostly is, and the first host
        // cache line of the set) without branches, then the rest one by one.
        if let Some(head) = set.first_chunk_mut::<8>() {
            if let Some(st) = touch8(Base, head, tag) {
                return Some(st);
            }
        }
        let from = if set.len() >= 8 { 8 } else { 0 };
        let k = from + set[from..].iter().position(|&e| e >> 2 == tag)?;
        let e = set[k];
        to_front(&mut set[..=k], e);
        Some((e & 3) as u8)
    }

    /// Inserts a line as most recently used with `state` (or updates it if present); returns the
    /// line evicted to make room, if any.
    #[inline]
    pub fn fill(&mut self, line: u64, state: u8) -> Option<Evicted> {
        let base = self.set_of(line);
        let tag = line + 1;
        let new = tag << 2 | u64::from(state);
        if let Some(set) = self.set8(base) {
            return fill8(Base, set, tag, new);
        }
        let set = &mut self.entries[base..base + self.ways];
        let (k, evicted) = match set.iter().position(|&e| e >> 2 == tag) {
            Some(k) => (k, None),
            None => {
                let last = set[set.len() - 1];
                (set.len() - 1, (last != 0).then_some(Evicted(last)))
            }
        };
        to_front(&mut set[..=k], new);
        evicted
    }

    /// `fill` of a line known to be absent (its `touch` just missed): no scan for it. The least
    /// recently used line is evicted if the set is full.
    #[inline]
    pub fn fill_absent(&mut self, line: u64, state: u8) -> Option<Evicted> {
        self.fill_absent_in(self.set_of(line), line, state)
    }

    /// `fill_absent` of a line whose set is at `base` (`set_of(line)`).
    #[inline]
    pub fn fill_absent_in(&mut self, base: usize, line: u64, state: u8) -> Option<Evicted> {
        debug_assert!(!self.contains(line), "fill_absent of a present line");
        debug_assert_eq!(base, self.set_of(line), "fill_absent_in given another set");
        let new = (line + 1) << 2 | u64::from(state);
        if let Some(set) = self.set8(base) {
            return fill_absent8(set, new);
        }
        let set = &mut self.entries[base..base + self.ways];
        let last = set[set.len() - 1];
        to_front(set, new);
        (last != 0).then_some(Evicted(last))
    }

    /// Sets the state of a present line (no LRU change); false if absent.
    #[inline]
    pub fn set_state(&mut self, line: u64, state: u8) -> bool {
        self.set_state_on(Base, line, state)
    }

    /// `set_state` with `lanes`.
    #[inline]
    pub(crate) fn set_state_on(&mut self, lanes: impl Lanes, line: u64, state: u8) -> bool {
        self.take_state_on(lanes, line, state).is_some()
    }

    /// The state of a present line (no LRU change); None if absent. Without a branch per way
    /// on 8- and 20-way sets (a page turning shared in the simulator looks up each of its lines
    /// in two levels, `Simulator::share_page`).
    #[inline]
    pub fn state_of(&self, line: u64) -> Option<u8> {
        let base = self.set_of(line);
        let k = self.way_of(Base, base, line)?;
        self.entries.get(k).map(|&e| (e & 3) as u8)
    }

    /// `state_of`, and the line's state becomes `state` (no LRU change).
    #[inline]
    pub fn take_state(&mut self, line: u64, state: u8) -> Option<u8> {
        self.take_state_on(Base, line, state)
    }

    /// `take_state` with `lanes`.
    #[inline]
    fn take_state_on(&mut self, lanes: impl Lanes, line: u64, state: u8) -> Option<u8> {
        let base = self.set_of(line);
        let k = self.way_of(lanes, base, line)?;
        let e = self.entries.get_mut(k)?;
        let old = (*e & 3) as u8;
        *e = (*e & !3) | u64::from(state);
        Some(old)
    }

    /// The index in `entries` of `line` in the set at `base`, if there: without a branch per
    /// way on 8- and 20-way sets.
    #[inline]
    fn way_of(&self, lanes: impl Lanes, base: usize, line: u64) -> Option<usize> {
        let tag = line + 1;
        let set = self.entries.get(base..base + self.ways)?;
        let k = match (set.first_chunk::<8>(), set.first_chunk::<W20>()) {
            (Some(s8), _) if self.ways == 8 => Some(lanes.match8(s8, tag))
                .filter(|&m| m != 0)
                .map(|m| m.trailing_zeros() as usize),
            (_, Some(s20)) if self.ways == W20 => way20(lanes, s20, tag),
            _ => set.iter().position(|&e| e >> 2 == tag),
        }?;
        Some(base + k)
    }

    /// Sets the state of the most recently used line of the set at `base` (the line a lookup
    /// just hit there; the way must hold a line).
    #[inline]
    pub fn set_mru_state(&mut self, base: usize, state: u8) {
        if let Some(e) = self.entries.get_mut(base) {
            *e = (*e & !3) | u64::from(state);
        }
    }

    /// `written` of the most recently used line of the set at `base`.
    #[inline]
    pub fn written_mru(&mut self, base: usize) -> u8 {
        self.entries.get_mut(base).map_or(SHARED, written)
    }

    /// A write to a present line of the simulator's private lines (`Simulator::private_lines`):
    /// `EXCLUSIVE` becomes `MODIFIED`; `SHARED` (a line in the directory) and the written
    /// states stay (no LRU change). Returns the state it had, None if absent.
    #[inline]
    pub fn write_private(&mut self, line: u64) -> Option<u8> {
        self.write_private_on(Base, line)
    }

    /// `write_private` with `lanes`.
    #[inline]
    pub(crate) fn write_private_on(&mut self, lanes: impl Lanes, line: u64) -> Option<u8> {
        let base = self.set_of(line);
        let tag = line + 1;
        if let Some(set) = self.set8(base) {
            let m = lanes.match8(set, tag);
            return set.get_mut(m.trailing_zeros() as usize).map(written);
        }
        self.entries[base..base + self.ways]
            .iter_mut()
            .find(|e| **e >> 2 == tag)
            .map(written)
    }

    /// Removes a line (invalidation); true if it was present.
    #[inline]
    pub fn remove(&mut self, line: u64) -> bool {
        let base = self.set_of(line);
        let tag = line + 1;
        if let Some(set) = self.set8(base) {
            return remove8(Base, set, tag);
        }
        let set = &mut self.entries[base..base + self.ways];
        match set.iter().position(|&e| e >> 2 == tag) {
            Some(k) => {
                // Shift the less recently used ways up by one, an empty way last.
                let mut carry = 0;
                for w in set[k..].iter_mut().rev() {
                    carry = std::mem::replace(w, carry);
                }
                true
            }
            None => false,
        }
    }

    /// Whether the cache is 8-way with a power-of-two set count: the geometry the `*_p8` lookups
    /// take for granted (resolved once per `run_pu` for the common-shape path's first two levels,
    /// `Geom`), so that they need neither `set_of`'s match nor `set8`'s way count.
    pub fn is_p8(&self) -> bool {
        self.ways == 8 && self.mask.is_some()
    }

    /// The 8 ways of the line's set in a cache whose `is_p8` holds (`None` never happens then;
    /// the callers fall back to the general method if it did).
    #[inline(always)]
    fn set_p8(&mut self, line: u64) -> Option<&mut [u64; 8]> {
        debug_assert!(self.is_p8(), "a *_p8 lookup on another geometry");
        let base = ((line & self.low) as usize) << 3;
        self.entries.get_mut(base..base + 8)?.first_chunk_mut::<8>()
    }

    /// `touch` in a cache whose `is_p8` holds.
    #[inline(always)]
    pub fn touch_p8(&mut self, line: u64) -> Option<u8> {
        self.touch_p8_on(Base, line)
    }

    /// `touch_p8` with `lanes`.
    #[inline(always)]
    pub(crate) fn touch_p8_on(&mut self, lanes: impl Lanes, line: u64) -> Option<u8> {
        let tag = line + 1;
        let Some(set) = self.set_p8(line) else {
            return self.touch(line);
        };
        touch8(lanes, set, tag)
    }

    /// `touch_p8` for a level that mostly misses (`match8_cold`): the fast path's second level.
    #[inline(always)]
    pub fn touch_p8_cold(&mut self, line: u64) -> Option<u8> {
        self.touch_p8_cold_on(Base, line)
    }

    /// `touch_p8_cold` with `lanes`.
    #[inline(always)]
    pub(crate) fn touch_p8_cold_on(&mut self, lanes: impl Lanes, line: u64) -> Option<u8> {
        let tag = line + 1;
        let Some(set) = self.set_p8(line) else {
            return self.touch(line);
        };
        let m = lanes.match8_cold(set, tag);
        touch8_at(set, m)
    }

    /// `lru` in a cache whose `is_p8` holds.
    #[inline(always)]
    pub fn lru_p8(&mut self, line: u64) -> Option<Evicted> {
        let Some(set) = self.set_p8(line) else {
            return self.lru(line);
        };
        let last = set[7];
        (last != 0).then_some(Evicted(last))
    }

    /// `fill` in a cache whose `is_p8` holds.
    #[inline(always)]
    pub fn fill_p8(&mut self, line: u64, state: u8) -> Option<Evicted> {
        self.fill_p8_on(Base, line, state)
    }

    /// `fill_p8` with `lanes`.
    #[inline(always)]
    pub(crate) fn fill_p8_on(
        &mut self,
        lanes: impl Lanes,
        line: u64,
        state: u8,
    ) -> Option<Evicted> {
        let tag = line + 1;
        let new = tag << 2 | u64::from(state);
        let Some(set) = self.set_p8(line) else {
            return self.fill(line, state);
        };
        fill8(lanes, set, tag, new)
    }

    /// `fill_absent` in a cache whose `is_p8` holds.
    #[inline(always)]
    pub fn fill_absent_p8(&mut self, line: u64, state: u8) -> Option<Evicted> {
        debug_assert!(!self.contains(line), "fill_absent of a present line");
        let new = (line + 1) << 2 | u64::from(state);
        let Some(set) = self.set_p8(line) else {
            return self.fill_absent(line, state);
        };
        fill_absent8(set, new)
    }

    /// `fill_absent_p8` of `line`, then `remove_p8` of `victim`: for a first level, the fill of a
    /// line and the removal of its second level's victim (it keeps the first inclusive), in one
    /// pass over the set where `victim` shares `line`'s set, as it does where this cache has no
    /// more sets than the second level (`is_p8` set counts are powers of two, picked by a line's
    /// low bits); two passes otherwise. A pass of its own would cost the removal as many host
    /// instructions again on a memory-sized stream.
    #[inline(always)]
    pub fn fill_absent_removing_p8(&mut self, line: u64, state: u8, victim: Option<u64>) {
        self.fill_absent_removing_p8_on(Base, line, state, victim);
    }

    /// `fill_absent_removing_p8` with `lanes`.
    #[inline(always)]
    pub(crate) fn fill_absent_removing_p8_on(
        &mut self,
        lanes: impl Lanes,
        line: u64,
        state: u8,
        victim: Option<u64>,
    ) {
        debug_assert!(!self.contains(line), "fill_absent of a present line");
        let low = self.low;
        let new = (line + 1) << 2 | u64::from(state);
        let Some(set) = self.set_p8(line) else {
            self.fill_absent(line, state);
            if let Some(v) = victim {
                self.remove(v);
            }
            return;
        };
        match victim {
            Some(v) if (v ^ line) & low != 0 => {
                fill_absent8(set, new);
                self.remove_p8_on(lanes, v);
            }
            v => fill_absent_removing8(lanes, set, new, v.map(|v| v + 1)),
        }
    }

    /// `remove` in a cache whose `is_p8` holds.
    #[inline(always)]
    pub fn remove_p8(&mut self, line: u64) -> bool {
        self.remove_p8_on(Base, line)
    }

    /// `remove_p8` with `lanes`.
    #[inline(always)]
    fn remove_p8_on(&mut self, lanes: impl Lanes, line: u64) -> bool {
        let tag = line + 1;
        let Some(set) = self.set_p8(line) else {
            return self.remove(line);
        };
        remove8(lanes, set, tag)
    }

    /// Whether the cache is 20-way: the geometry the `*_w20` lookups take for granted (resolved
    /// once per `run_pu` for the common-shape path's last level, `Geom`), so that they work on a
    /// set of fixed length, without `set8`'s way-count test or loops of unknown length.
    pub fn is_w20(&self) -> bool {
        self.ways == W20
    }

    /// The 20 ways of the set at `base` in a cache whose `is_w20` holds (`None` never happens
    /// then; the callers fall back to the general method if it did).
    #[inline(always)]
    fn set_w20(&mut self, base: usize) -> Option<&mut [u64; W20]> {
        debug_assert!(self.is_w20(), "a *_w20 lookup on another geometry");
        self.entries.get_mut(base..)?.first_chunk_mut::<W20>()
    }

    /// `touch_in` in a cache whose `is_w20` holds.
    #[inline(always)]
    pub fn touch_w20(&mut self, base: usize, line: u64) -> Option<u8> {
        self.touch_w20_on(Base, base, line)
    }

    /// `touch_w20` with `lanes`.
    #[inline(always)]
    pub(crate) fn touch_w20_on(&mut self, lanes: impl Lanes, base: usize, line: u64) -> Option<u8> {
        debug_assert_eq!(base, self.set_of(line), "touch_w20 given another set");
        let Some(set) = self.set_w20(base) else {
            return self.touch_in(base, line);
        };
        touch20(lanes, set, line + 1)
    }

    /// `lru_in` in a cache whose `is_w20` holds.
    #[inline(always)]
    pub fn lru_w20(&self, base: usize) -> Option<Evicted> {
        debug_assert!(self.is_w20(), "a *_w20 lookup on another geometry");
        let last = *self.entries.get(base + (W20 - 1))?;
        (last != 0).then_some(Evicted(last))
    }

    /// `fill_absent_in` in a cache whose `is_w20` holds.
    #[inline(always)]
    pub fn fill_absent_w20(&mut self, base: usize, line: u64, state: u8) -> Option<Evicted> {
        debug_assert!(!self.contains(line), "fill_absent of a present line");
        debug_assert_eq!(base, self.set_of(line), "fill_absent_w20 given another set");
        let new = (line + 1) << 2 | u64::from(state);
        let Some(set) = self.set_w20(base) else {
            return self.fill_absent_in(base, line, state);
        };
        fill_absent20(set, new)
    }

    /// `prefetch_in` in a cache whose `is_w20` holds: the set's ways 0, 8, 16 and 19, the host
    /// lines `prefetch_in` fetches for it, without its clamps and loop.
    #[inline(always)]
    pub fn prefetch_w20(&self, base: usize) {
        debug_assert!(self.is_w20(), "a *_w20 lookup on another geometry");
        let p = self.entries.as_ptr();
        crate::hostmem::prefetch(p.wrapping_add(base));
        crate::hostmem::prefetch(p.wrapping_add(base + 8));
        crate::hostmem::prefetch(p.wrapping_add(base + 16));
        crate::hostmem::prefetch(p.wrapping_add(base + (W20 - 1)));
    }

    /// Whether a line is present (no LRU change).
    pub fn contains(&self, line: u64) -> bool {
        let base = self.set_of(line);
        self.entries[base..base + self.ways]
            .iter()
            .any(|&e| e >> 2 == line + 1)
    }

    /// The lines present, in no particular order (tests).
    #[cfg(test)]
    pub(crate) fn lines(&self) -> impl Iterator<Item = u64> + '_ {
        self.entries
            .iter()
            .filter(|&&e| e != 0)
            .map(|&e| (e >> 2) - 1)
    }

    /// Ways per set.
    pub fn ways(&self) -> usize {
        self.ways
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain model's removal of `tag` from one set (most recent first, 0 for an empty way):
    /// the later ways move up one, the last becomes empty. Whether it was there.
    fn model_remove(set: &mut [u64], tag: u64) -> bool {
        match set.iter().position(|&e| e >> 2 == tag) {
            Some(k) => {
                set[k..].rotate_left(1);
                if let Some(last) = set.last_mut() {
                    *last = 0;
                }
                true
            }
            None => false,
        }
    }

    #[test]
    fn p8_lookups_equal_the_general_ones() {
        // An 8-way cache with 64 sets: `*_p8` on one copy, the general methods on another, the
        // same random operations (few lines, so hits, evictions and removals all happen).
        let mut a = SetAssoc::new(64 * 8 * 64, 64, 8);
        let mut b = a.clone();
        assert!(a.is_p8());
        assert!(
            !SetAssoc::new(48 * 8 * 64, 64, 8).is_p8(),
            "48 sets is no power of two"
        );
        assert!(!SetAssoc::new(64 * 16 * 64, 64, 16).is_p8(), "16 ways");
        let mut rng = numaff_machine::rng::SplitMix64::new(0x2545_f491_4f6c_dd1d);
        for i in 0..200_000u32 {
            let x = rng.next_u64();
            let line = ((x >> 20) % 1_500) | ((x & 1) << 57);
            let state = (x >> 8) as u8 % 3;
            // Another line, for the victim `fill_absent_removing_p8` removes: in the same set
            // one time in two (the case it takes in one pass).
            let other = if x >> 40 & 1 == 0 {
                line + 64 * ((x >> 41) % 20 + 1)
            } else {
                ((x >> 30) % 1_500) | ((x >> 1 & 1) << 57)
            };
            match (x >> 4) % 7 {
                0 => assert_eq!(a.touch_p8(line), b.touch(line), "touch {line} at {i}"),
                1 => assert_eq!(a.lru_p8(line), b.lru(line), "lru {line} at {i}"),
                2 => assert_eq!(a.fill_p8(line, state), b.fill(line, state), "fill {i}"),
                3 => assert_eq!(a.remove_p8(line), b.remove(line), "remove {line} at {i}"),
                4 => assert_eq!(a.touch_p8_cold(line), b.touch(line), "cold {line} at {i}"),
                5 => {
                    if !b.contains(line) && other != line {
                        let victim = (x >> 50 & 3 != 0).then_some(other);
                        a.fill_absent_removing_p8(line, state, victim);
                        b.fill_absent(line, state);
                        if let Some(v) = victim {
                            b.remove(v);
                        }
                    }
                }
                _ => {
                    if !b.contains(line) {
                        let (ea, eb) = (a.fill_absent_p8(line, state), b.fill_absent(line, state));
                        assert_eq!(ea, eb, "fill_absent {line} at {i}");
                    }
                }
            }
            assert_eq!(a.entries[..], b.entries[..], "entries after op {i}");
        }
    }

    #[test]
    fn w20_lookups_agree_with_a_plain_model() {
        // 20-way caches with a set count that is not a power of two (as laso-hpl's L3) and one
        // that is (agung-xeon2's), through the `*_w20` lookups, and an 8-way one through the
        // general ones (with `match8` and `to_front8`), against a plain model of
        // each set; and laso-hpl's L3 itself, whose 3.2 MB of tags have a mapping of their own
        // (`hostmem::Zeroed`). Lines `sets << 32` apart share their entries' low 32 bits, which
        // `match8_cold` compares first: it must compare those ways whole.
        for (ways, sets) in [(20usize, 48u64), (20, 64), (8, 64), (20, 20_480)] {
            let mut c = SetAssoc::new(64 * ways as u64 * sets, 64, ways as u32);
            assert_eq!(c.is_w20(), ways == 20);
            let mut model: Vec<Vec<u64>> = vec![vec![0; ways]; sets as usize];
            let mut rng = numaff_machine::rng::SplitMix64::new(0x2545_f491_4f6c_dd1d ^ sets);
            for step in 0..100_000u32 {
                let x = rng.next_u64();
                // Some lines far apart in the same set (equal in their entries' low 32 bits).
                let line = (x >> 8) % (3 * ways as u64 * sets) + (x >> 62) * (sets << 32);
                let s = (line % sets) as usize;
                let base = c.set_of(line);
                assert_eq!(base, s * ways);
                let set = &mut model[s];
                let tag = line + 1;
                let st = (step % 3) as u8;
                let touch = |set: &mut Vec<u64>| {
                    set.iter().position(|&e| e >> 2 == tag).map(|k| {
                        let e = set[k];
                        set[..=k].rotate_right(1);
                        (e & 3) as u8
                    })
                };
                let w20 = c.is_w20();
                match x % 7 {
                    0 | 1 => {
                        let want = touch(set);
                        let got = if w20 {
                            c.touch_w20(base, line)
                        } else {
                            c.touch(line)
                        };
                        assert_eq!(got, want, "touch {step}");
                    }
                    2 => {
                        // A fill after a touch (of a line just made most recently used, or
                        // absent).
                        let hit = touch(set);
                        let ev = match hit {
                            Some(_) => None,
                            None => {
                                let last = set[ways - 1];
                                set.rotate_right(1);
                                (last != 0).then(|| ((last >> 2) - 1, (last & 3) as u8))
                            }
                        };
                        set[0] = tag << 2 | u64::from(st);
                        let got_hit = if w20 {
                            c.touch_w20(base, line)
                        } else {
                            c.touch(line)
                        };
                        assert_eq!(got_hit, hit, "touch before fill {step}");
                        let got = c.fill(line, st).map(|e| (e.line(), e.state()));
                        assert_eq!(got, ev, "fill {step}");
                    }
                    3 => {
                        let last = set[ways - 1];
                        let want = (last != 0).then(|| ((last >> 2) - 1, (last & 3) as u8));
                        let got = if w20 { c.lru_w20(base) } else { c.lru(line) };
                        let got = got.map(|e| (e.line(), e.state()));
                        assert_eq!(got, want, "lru {step}");
                    }
                    4 => {
                        if !set.iter().any(|&e| e >> 2 == tag) {
                            let last = set[ways - 1];
                            set.rotate_right(1);
                            set[0] = tag << 2 | u64::from(st);
                            let want = (last != 0).then(|| ((last >> 2) - 1, (last & 3) as u8));
                            let got = if w20 {
                                c.fill_absent_w20(base, line, st)
                            } else {
                                c.fill_absent(line, st)
                            };
                            let got = got.map(|e| (e.line(), e.state()));
                            assert_eq!(got, want, "fill_absent {step}");
                        }
                    }
                    5 => {
                        let present = model_remove(set, tag);
                        assert_eq!(c.remove(line), present, "remove {step}");
                    }
                    _ => {
                        // The lookups that find a way without moving it (`way_of`).
                        let way = set.iter().position(|&e| e >> 2 == tag);
                        let old = way.map(|k| (set[k] & 3) as u8);
                        assert_eq!(c.state_of(line), old, "state_of {step}");
                        assert_eq!(c.take_state(line, st), old, "take_state {step}");
                        if let Some(k) = way {
                            set[k] = set[k] & !3 | u64::from(st);
                        }
                    }
                }
                assert_eq!(
                    &c.entries[base..base + ways],
                    &model[s][..],
                    "{ways} ways, {sets} sets: set {s} at step {step}"
                );
            }
        }
    }

    #[test]
    fn fastmod_equals_remainder() {
        let mut rng = numaff_machine::rng::SplitMix64::new(0);
        for d in [
            1u64,
            3,
            5,
            7,
            20_480,
            40_960,
            81_920,
            12_345_679,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let magic = (u128::MAX / u128::from(d)).wrapping_add(1);
            for a in [0, 1, d - 1, d, d.wrapping_add(1), u64::MAX, u64::MAX - 1] {
                assert_eq!(fastmod(a, magic, d), a % d, "{a} % {d}");
            }
            for _ in 0..20_000 {
                let x = rng.next_u64();
                assert_eq!(fastmod(x, magic, d), x % d, "{x} % {d}");
                let small = x >> 40;
                assert_eq!(fastmod(small, magic, d), small % d, "{small} % {d}");
            }
        }
    }

    #[test]
    fn lru_evicts_least_recently_used_of_a_set() {
        // 4 lines, 2 ways, 2 sets: lines 0, 2, 4 map to set 0.
        let mut c = SetAssoc::new(256, 64, 2);
        assert_eq!(c.fill(0, SHARED), None);
        assert_eq!(c.fill(2, SHARED), None);
        assert_eq!(c.touch(0), Some(SHARED)); // 0 is now MRU
        assert_eq!(c.lru(4).map(Evicted::line), Some(2));
        let ev = c.fill(4, EXCLUSIVE).map(|e| (e.line(), e.state()));
        assert_eq!(ev, Some((2, SHARED)));
        assert!(c.contains(0) && c.contains(4) && !c.contains(2));
        assert!(c.set_state(4, MODIFIED));
        assert_eq!(c.touch(4), Some(MODIFIED));
        assert!(c.remove(0));
        assert!(!c.contains(0));
        assert_eq!(c.fill(6, SHARED), None); // the freed way is reused
        assert_eq!(c.touch(1), None);
    }

    #[test]
    fn branchless_way_scans_agree_with_a_plain_model() {
        // 8 ways (branchless throughout), 20 and 16 (branchless over the 8 most recently used
        // ways of a lookup), 4 and 12: 16 sets each, against a plain model of each set.
        for ways in [8usize, 20, 16, 4, 12] {
            let mut c = SetAssoc::new(64 * ways as u64 * 16, 64, ways as u32);
            assert_eq!(c.set8(0).is_some(), ways == 8);
            let mut model: Vec<Vec<u64>> = vec![vec![0; ways]; 16];
            let mut rng = numaff_machine::rng::SplitMix64::new(0);
            for step in 0..100_000u32 {
                let x = rng.next_u64();
                // 3 x ways lines per set, and now and then a line whose tag does not fit 62
                // bits (as the lines of processes 16 and up, `pi << 58`, do).
                let line = if x.is_multiple_of(101) {
                    u64::MAX - 1 - (x >> 8) % 3
                } else if x.is_multiple_of(103) {
                    (17 << 58) + (x >> 8) % 40
                } else {
                    (x >> 8) % (16 * 3 * ways as u64)
                };
                let set = &mut model[(line % 16) as usize];
                let tag = line.wrapping_add(1);
                let st = (step % 3) as u8;
                match x % 5 {
                    0 | 1 => {
                        let want = set.iter().position(|&e| e >> 2 == tag).map(|k| {
                            let e = set[k];
                            set[..=k].rotate_right(1);
                            (e & 3) as u8
                        });
                        assert_eq!(c.touch(line), want, "touch {step}");
                    }
                    2 => {
                        let ev = match set.iter().position(|&e| e >> 2 == tag) {
                            Some(k) => {
                                set[..=k].rotate_right(1);
                                None
                            }
                            None => {
                                let last = set[ways - 1];
                                set.rotate_right(1);
                                (last != 0).then(|| ((last >> 2) - 1, (last & 3) as u8))
                            }
                        };
                        set[0] = tag << 2 | u64::from(st);
                        let got = c.fill(line, st).map(|e| (e.line(), e.state()));
                        assert_eq!(got, ev, "fill {step}");
                    }
                    3 => {
                        let present = model_remove(set, tag);
                        assert_eq!(c.remove(line), present, "remove {step}");
                    }
                    _ => {
                        let present = set.iter().any(|&e| e >> 2 == tag);
                        assert_eq!(c.contains(line), present, "contains {step}");
                    }
                }
                let s = (line % 16) as usize;
                assert_eq!(
                    &c.entries[s * ways..(s + 1) * ways],
                    &model[s][..],
                    "{ways} ways: set {s} at step {step}"
                );
            }
        }
    }

    #[test]
    fn fill_absent_equals_fill_of_an_absent_line() {
        // laso-hpl's L3 shape (20 ways, sets not a power of two) and an 8-way L1.
        for (size, ways) in [(25 << 20, 20), (32 << 10, 8)] {
            let mut a = SetAssoc::new(size, 64, ways);
            let mut b = a.clone();
            let mut rng = numaff_machine::rng::SplitMix64::new(0x2545_f491_4f6c_dd1d);
            for step in 0..100_000u32 {
                let x = rng.next_u64();
                let line = (x >> 8) % (4 * size / 64);
                let st = (step % 3) as u8;
                let (ta, tb) = (a.touch(line), b.touch(line));
                assert_eq!(ta, tb);
                if ta.is_none() {
                    assert_eq!(a.fill(line, st), b.fill_absent(line, st), "step {step}");
                } else if x.is_multiple_of(5) {
                    assert_eq!(a.remove(line), b.remove(line));
                }
                assert_eq!(a.lru(line), b.lru(line));
            }
            assert_eq!(a.entries[..], b.entries[..]);
        }
    }

    /// The state updates of the simulator's private lines against plain scans: `set_state` (the
    /// 20-way path with its three runs of 8, and other widths), `state_of`, `take_state`,
    /// `write_private` (`EXCLUSIVE` to `MODIFIED`, other states kept), `written_mru` and
    /// `set_mru_state` (the way a lookup just hit), none of them changing the LRU order.
    #[test]
    fn private_line_states_agree_with_a_plain_model() {
        for (ways, sets) in [(20usize, 6u64), (8, 4), (12, 3)] {
            let mut c = SetAssoc::new(64 * sets * ways as u64, 64, ways as u32);
            let mut rng = numaff_machine::rng::SplitMix64::new(0x1234_5678_9abc_def1);
            for step in 0..20_000u32 {
                let x = rng.next_u64();
                let line = (x >> 8) % (sets * ways as u64 * 3);
                let st = ((x >> 40) % 4) as u8;
                let base = c.set_of(line);
                let before: Vec<u64> = c.entries[base..base + ways].to_vec();
                let at = before.iter().position(|&e| e != 0 && e >> 2 == line + 1);
                let old = at.map(|k| (before[k] & 3) as u8);
                assert_eq!(c.state_of(line), old, "state_of {step}");
                let mut want = before.clone();
                match (x >> 20) % 5 {
                    0 => {
                        c.touch(line).is_none().then(|| c.fill(line, st));
                        continue;
                    }
                    1 => {
                        let held = c.set_state(line, st);
                        assert_eq!(held, at.is_some(), "set_state {step}");
                        if let Some(k) = at {
                            want[k] = (line + 1) << 2 | u64::from(st);
                        }
                    }
                    2 => {
                        assert_eq!(c.write_private(line), old, "write_private {step}");
                        if let (Some(k), Some(EXCLUSIVE)) = (at, old) {
                            want[k] = (line + 1) << 2 | u64::from(MODIFIED);
                        }
                    }
                    3 => {
                        let mru = (before[0] & 3) as u8;
                        assert_eq!(c.written_mru(base), mru, "written_mru {step}");
                        if mru == EXCLUSIVE {
                            want[0] += 1;
                        }
                    }
                    4 if (x >> 30).is_multiple_of(2) => {
                        assert_eq!(c.take_state(line, st), old, "take_state {step}");
                        if let Some(k) = at {
                            want[k] = (line + 1) << 2 | u64::from(st);
                        }
                    }
                    // Only after a hit, which leaves a line there.
                    _ if before[0] != 0 => {
                        c.set_mru_state(base, st);
                        want[0] = (want[0] & !3) | u64::from(st);
                    }
                    _ => {}
                }
                assert_eq!(
                    c.entries[base..base + ways],
                    want[..],
                    "set after step {step}"
                );
            }
        }
    }

    /// The lookups with AVX2 (`Avx2` lanes) against the same with the base instructions: the
    /// same results and sets, on an 8-way cache (`*_p8`) and a 20-way one (`*_w20`, the victims'
    /// `set_state`), with lines that share their entries' low 32 bits and tags too wide for an
    /// entry. (A host without AVX2 has nothing to compare: the fast path runs the base build.)
    #[test]
    fn avx2_lookups_equal_the_base_ones() {
        let Some(avx2) = Avx2::on_host() else {
            return;
        };
        let mut a8 = SetAssoc::new(64 * 8 * 64, 64, 8);
        let mut b8 = a8.clone();
        let mut a20 = SetAssoc::new(64 * 20 * 48, 64, 20);
        let mut b20 = a20.clone();
        let mut rng = numaff_machine::rng::SplitMix64::new(0);
        for i in 0..200_000u32 {
            let x = rng.next_u64();
            let wide = if x >> 60 == 0 { (1 << 62) - 1 } else { 0 };
            let far = (x >> 3 & 1) * (48 << 32);
            let line = ((x >> 20) % 3_000) | ((x & 1) << 57) | far | wide;
            let state = (x >> 8) as u8 % 3;
            let other = ((x >> 30) % 3_000) | ((x >> 1 & 1) << 57);
            let base = a20.set_of(line);
            match (x >> 4) % 8 {
                0 => assert_eq!(a8.touch_p8_on(avx2, line), b8.touch_p8(line), "touch {i}"),
                1 => assert_eq!(a8.touch_p8_cold_on(avx2, line), b8.touch_p8(line), "{i}"),
                2 => assert_eq!(a8.fill_p8_on(avx2, line, state), b8.fill_p8(line, state)),
                3 => assert_eq!(
                    a8.write_private_on(avx2, line),
                    b8.write_private(line),
                    "write {i}"
                ),
                4 => {
                    if !b8.contains(line) && other != line {
                        a8.fill_absent_removing_p8_on(avx2, line, state, Some(other));
                        b8.fill_absent_removing_p8(line, state, Some(other));
                    }
                }
                5 => assert_eq!(
                    a20.touch_w20_on(avx2, base, line),
                    b20.touch_w20(base, line),
                    "touch20 {i}"
                ),
                6 => assert_eq!(
                    a20.set_state_on(avx2, line, state),
                    b20.set_state(line, state),
                    "set_state {i}"
                ),
                _ => {
                    if !b20.contains(line) {
                        let (ea, eb) = (
                            a20.fill_absent_w20(base, line, state),
                            b20.fill_absent_w20(base, line, state),
                        );
                        assert_eq!(ea, eb, "fill_absent20 {i}");
                    }
                }
            }
            assert_eq!(a8.entries[..], b8.entries[..], "8-way sets after op {i}");
            assert_eq!(a20.entries[..], b20.entries[..], "20-way sets after op {i}");
        }
    }
}
