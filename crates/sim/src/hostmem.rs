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

/// Lengthens `v` to `n` values with copies of `fill` without moving it, if its buffer has room
/// for `n` (`filled_with_room`); returns whether it did. Only the added part is written, so the
/// kernel zeroes fresh memory only for it (issue 4). Without the room it returns false and
/// leaves `v` alone: a reallocation would copy the values into fresh memory, and the copy, made
/// before any huge page advice could reach the new buffer, would sit on small host pages.
pub(crate) fn extend_filled<T: Clone>(v: &mut Vec<T>, n: usize, fill: T) -> bool {
    if n > v.capacity() {
        return false;
    }
    if n > v.len() {
        v.resize(n, fill);
    }
    true
}

/// `n` zeros, on huge pages where they span one. The zeros come from the allocator untouched
/// (lazily zeroed pages), so a big array of which a run uses little costs little.
pub(crate) fn zeros(n: usize) -> Vec<u64> {
    let v = vec![0u64; n];
    advise_huge(&v);
    v
}

/// `n` zeros at an offset into a larger buffer, returned with it: where they span a 2 MiB host
/// page, they start on a 2 MiB boundary and the whole 2 MiB pages they span are advised huge
/// (`advise_huge` covers only the whole pages inside a buffer, and an allocation of a few MiB
/// starts anywhere: a 3.2 MiB cache tag array then lay on 4 KiB pages, each faulted twice, read
/// by a lookup then written by a fill, 1,500 host faults and a tenth of a memory-bound run's
/// time, issue 4). The zeros past `n` and before the offset are address space only.
pub(crate) fn zeros_aligned(n: usize) -> (Vec<u64>, usize) {
    #[cfg(target_os = "linux")]
    {
        let per_page = HUGE / std::mem::size_of::<u64>();
        if n >= per_page {
            let pages = n.div_ceil(per_page);
            let v = vec![0u64; (pages + 1) * per_page];
            let start = v.as_ptr() as usize;
            let offset = (start.next_multiple_of(HUGE) - start) / std::mem::size_of::<u64>();
            // SAFETY: [start + offset * 8, + pages * HUGE) lies inside the buffer `v` owns (its
            // length is one page more than `pages`); MADV_HUGEPAGE only changes how the kernel
            // backs those pages, never their contents.
            unsafe {
                libc::madvise(
                    (start + offset * std::mem::size_of::<u64>()) as *mut libc::c_void,
                    pages * HUGE,
                    libc::MADV_HUGEPAGE,
                );
            }
            return (v, offset);
        }
    }
    (zeros(n), 0)
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

    /// `zeros_aligned` gives `n` zeros from its offset, starting on a 2 MiB boundary where they
    /// span a 2 MiB page (else at offset 0), whatever `n`.
    #[test]
    fn issue4_aligned_zeros_start_on_a_huge_page() {
        for n in [
            0,
            1,
            1000,
            (2 << 20) / 8 - 1,
            (2 << 20) / 8,
            409_600,
            3 << 20,
        ] {
            let (v, off) = zeros_aligned(n);
            assert!(v.len() >= off + n, "{n}: {} values from {off}", v.len());
            assert!(v[off..off + n].iter().all(|&x| x == 0), "{n}: not zeros");
            let start = v[off..].as_ptr() as usize;
            if cfg!(target_os = "linux") && n >= (2 << 20) / 8 {
                assert_eq!(start % (2 << 20), 0, "{n}: starts at {start:#x}");
            } else {
                assert_eq!(off, 0, "{n}");
            }
        }
    }

    #[test]
    fn filled_and_zeros_give_n_values_across_huge_page_boundaries() {
        // 5 MiB of u64: spans at least one whole 2 MiB page, so the madvise path runs.
        let n = (5 << 20) / 8 + 3;
        let v = filled(n, 0xabcd_u64);
        assert_eq!(v.len(), n);
        assert!(v.iter().all(|&x| x == 0xabcd));
        assert!(filled(0, 1u8).is_empty());
        let z = zeros(n);
        assert_eq!(z.len(), n);
        assert!(z.iter().all(|&x| x == 0));
    }

    #[test]
    fn issue4_extend_filled_lengthens_in_place_within_the_room_only() {
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
}
