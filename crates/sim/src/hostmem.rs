//! Large host arrays for the simulator's tables (cache tags, directory, page tables), backed by
//! transparent huge pages where the host allows it, so that random lookups miss the TLB less often.

/// Host huge page size that `madvise(MADV_HUGEPAGE)` asks for on Linux.
#[cfg(target_os = "linux")]
const HUGE: usize = 2 << 20;

/// Asks the kernel to back the whole 2 MiB host pages inside `v`'s buffer (capacity, not length)
/// with transparent huge pages. Only a hint: where the host refuses, nothing changes but speed.
/// Pages already written keep their small pages, so call it before the first write.
fn advise_huge<T>(v: &Vec<T>) {
    #[cfg(target_os = "linux")]
    {
        let start = v.as_ptr() as usize;
        let end = start + v.capacity() * std::mem::size_of::<T>();
        let lo = start.next_multiple_of(HUGE);
        let hi = end / HUGE * HUGE;
        if hi > lo {
            // SAFETY: [lo, hi) lies inside the buffer `v` owns; MADV_HUGEPAGE only changes how the
            // kernel backs those pages, never their contents.
            unsafe {
                libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = v;
}

/// A vector of `n` copies of `fill`, on huge pages where it spans one (see `advise_huge`).
pub(crate) fn filled<T: Clone>(n: usize, fill: T) -> Vec<T> {
    let mut v: Vec<T> = Vec::with_capacity(n);
    advise_huge(&v);
    v.resize(n, fill);
    v
}

/// `filled(n, fill)` in a buffer with room for `room` values (or `n` if more), so that it can
/// later be lengthened in place (`extend_filled`). The room beyond `n` is address space only
/// until written: the allocator maps it untouched and the kernel gives it memory page by page on
/// first write. If the room cannot be had (a host that refuses to overcommit), the buffer has
/// `n` values' room, as `filled` gives (as it does when `room <= n`).
pub(crate) fn filled_with_room<T: Clone>(n: usize, room: usize, fill: T) -> Vec<T> {
    if room <= n {
        return filled(n, fill);
    }
    let mut v: Vec<T> = Vec::new();
    if v.try_reserve_exact(room.max(n)).is_err() {
        v = Vec::with_capacity(n);
    }
    advise_huge(&v);
    v.resize(n, fill);
    v
}

/// Lengthens `v` to `n` values with copies of `fill` without moving it, if its buffer has room for
/// `n` (`filled_with_room`); returns whether it did. Only the added part is written, so the kernel
/// zeroes fresh memory only for it. Without the room it returns false and leaves `v` alone: a
/// reallocation would copy the values into fresh memory, and the copy, made before any huge page
/// advice could reach the new buffer, would sit on small host pages.
pub(crate) fn extend_filled<T: Clone>(v: &mut Vec<T>, n: usize, fill: T) -> bool {
    if n > v.capacity() {
        return false;
    }
    if n > v.len() {
        v.resize(n, fill);
    }
    true
}

/// `n` zeros for a large table: from `MAP_MIN` bytes in an anonymous mapping of its own, so that
/// only the pages a run touches cost anything, each a fresh zero page from the kernel (the
/// allocator would hand a new simulator the memory a freed one held, and clear all of it,
/// `memset`), starting on a 2 MiB boundary with its whole 2 MiB pages advised huge where it spans
/// one (a `Vec` starts anywhere: the page table's room as a `Vec` would have its first MiB on 4 KiB
/// pages, and a large share of a memory-sized stream's host faults there). Smaller tables, or a
/// host that refuses the mapping, get a zeroed `Vec`.
pub(crate) struct Zeroed<T: bytemuck::Pod> {
    /// The first value, `len` of them, inside `store`.
    ptr: *mut T,
    len: usize,
    /// Owns the memory (never read through: `ptr` is its view).
    _store: Store<T>,
}

/// The least `Zeroed` that gets a mapping, bytes: a mapping and its removal are two system
/// calls, more than clearing a laso-hpl first or second level's tags (4 and 32 KiB) costs.
const MAP_MIN: usize = 1 << 20;

/// What holds a `Zeroed`'s memory.
enum Store<T> {
    Map(#[allow(dead_code)] memmap2::MmapMut),
    Heap(#[allow(dead_code)] Vec<T>),
}

// SAFETY: a `Zeroed` owns its memory alone, as a `Vec<T>` does; `ptr` is never shared.
unsafe impl<T: bytemuck::Pod + Send> Send for Zeroed<T> {}
// SAFETY: shared access only reads, through `&[T]`.
unsafe impl<T: bytemuck::Pod + Sync> Sync for Zeroed<T> {}

impl<T: bytemuck::Pod> Zeroed<T> {
    /// `n` zeros.
    pub(crate) fn new(n: usize) -> Self {
        let size = std::mem::size_of::<T>().max(1);
        let bytes = n.saturating_mul(size);
        let align = if bytes >= (2 << 20) { 2 << 20 } else { 64 };
        if bytes >= MAP_MIN {
            // Whole `align`-sized pages, and room to start on one.
            let span = bytes.next_multiple_of(align);
            if let Ok(mut map) = memmap2::MmapMut::map_anon(span + align) {
                let start = map.as_mut_ptr() as usize;
                let off = start.next_multiple_of(align) - start;
                #[cfg(target_os = "linux")]
                if align > 64 {
                    // Only a hint: where the host refuses, nothing changes but speed.
                    let _ = map.advise_range(memmap2::Advice::HugePage, off, span);
                }
                // SAFETY: `off + bytes <= span + align`, inside the mapping, and `start + off`
                // is a multiple of `align` (64 or 2 MiB), so aligned for `T`.
                let ptr = unsafe { map.as_mut_ptr().add(off) }.cast::<T>();
                return Zeroed {
                    ptr,
                    len: n,
                    _store: Store::Map(map),
                };
            }
        }
        let mut v = vec![T::zeroed(); n];
        Zeroed {
            ptr: v.as_mut_ptr(),
            len: n,
            _store: Store::Heap(v),
        }
    }
}

impl<T: bytemuck::Pod> std::ops::Deref for Zeroed<T> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` points to `len` initialised values (zero pages, or the `Vec`'s) that
        // `_store` owns for as long as `self` lives, aligned for `T` (`new`).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl<T: bytemuck::Pod> std::ops::DerefMut for Zeroed<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as `deref`, and `&mut self` borrows the memory alone.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl<T: bytemuck::Pod> Clone for Zeroed<T> {
    fn clone(&self) -> Self {
        let mut copy = Zeroed::new(self.len);
        copy.copy_from_slice(self);
        copy
    }
}

impl<T: bytemuck::Pod> std::fmt::Debug for Zeroed<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Zeroed({} values)", self.len)
    }
}

/// Asks the host to start fetching the cache line at `p` into its caches, without waiting for it:
/// lookups that will miss the host's caches can then overlap instead of coming one after another.
/// A hint only (a no-op off x86_64); `p` may point anywhere.
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 never faults and changes no memory or register the program can see,
    // whatever the address; SSE, which it belongs to, is part of every x86_64 target.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filled_gives_n_values_across_huge_page_boundaries() {
        // 5 MiB of u64: spans at least one whole 2 MiB page, so the madvise path runs.
        let n = (5 << 20) / 8 + 3;
        let v = filled(n, 0xabcd_u64);
        assert_eq!(v.len(), n);
        assert!(v.iter().all(|&x| x == 0xabcd));
        assert!(filled(0, 1u8).is_empty());
    }

    #[test]
    fn extend_filled_lengthens_in_place_within_the_room_only() {
        // Room for several huge pages; lengthened from below one to all of it.
        let room = (5 << 20) / 8;
        let mut v = filled_with_room(1000, room, 7u64);
        assert!(v.capacity() >= room);
        assert_eq!(v.len(), 1000);
        for (i, x) in v.iter_mut().enumerate() {
            *x = i as u64;
        }
        let at = v.as_ptr();
        assert!(extend_filled(&mut v, room, 9));
        assert_eq!((v.len(), v.as_ptr()), (room, at), "lengthened where it was");
        assert!(v[..1000].iter().enumerate().all(|(i, &x)| x == i as u64));
        assert!(v[1000..].iter().all(|&x| x == 9));
        // No room left: refused, nothing changed; shorter than it is: nothing to do.
        let cap = v.capacity();
        assert!(!extend_filled(&mut v, cap + 1, 1));
        assert_eq!(v.len(), room);
        assert!(extend_filled(&mut v, 10, 1));
        assert_eq!(v.len(), room);
        // A room smaller than `n` gives `n` values.
        let w = filled_with_room(5, 2, 1u8);
        assert_eq!(w, [1; 5]);
    }

    /// `Zeroed` gives `n` zeros, writable, aligned as it says (mapped from `MAP_MIN` bytes: on
    /// 2 MiB from 2 MiB, else 64 bytes), and a clone with the same values in memory of its own.
    #[test]
    fn zeroed_gives_aligned_zeros_of_its_own() {
        let map_min = MAP_MIN / 8;
        for n in [
            0,
            1,
            1000,
            map_min - 1,
            map_min,
            (2 << 20) / 8 - 1,
            (2 << 20) / 8,
            409_600,
        ] {
            let mut z = Zeroed::<u64>::new(n);
            assert_eq!(z.len(), n);
            assert!(z.iter().all(|&x| x == 0), "{n}: not zeros");
            let start = z.as_ptr() as usize;
            let align = match n * 8 {
                b if b >= 2 << 20 => 2 << 20,
                b if b >= MAP_MIN => 64,
                _ => std::mem::align_of::<u64>(),
            };
            if n > 0 {
                assert_eq!(start % align, 0, "{n}: starts at {start:#x}");
                z[n - 1] = 9;
                z[0] = 7;
                let before = z.to_vec();
                let c = z.clone();
                z[0] = 1;
                assert_eq!(&c[..], &before[..], "{n}: the clone's values");
            }
        }
        let z = Zeroed::<u32>::new(5);
        assert_eq!(&z[..], &[0u32; 5]);
    }
}
