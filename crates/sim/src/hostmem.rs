//! Large host arrays for the simulator's tables (cache tags, directory, page tables), backed by
//! transparent huge pages where the host allows it, so that random lookups miss the TLB less often.

/// Host huge page size that `madvise(MADV_HUGEPAGE)` asks for on Linux.
#[cfg(target_os = "linux")]
const HUGE: usize = 2 << 20;

/// A vector of `n` copies of `fill`; when it spans at least one 2 MiB host page, the kernel is
/// asked (before the first write) to back it with transparent huge pages. Only a hint: where the
/// host refuses, nothing changes but speed.
pub(crate) fn filled<T: Clone>(n: usize, fill: T) -> Vec<T> {
    let mut v: Vec<T> = Vec::with_capacity(n);
    #[cfg(target_os = "linux")]
    {
        let start = v.as_ptr() as usize;
        let end = start + n * std::mem::size_of::<T>();
        let lo = start.next_multiple_of(HUGE);
        let hi = end / HUGE * HUGE;
        if hi > lo {
            // SAFETY: [lo, hi) lies inside the allocation just made for `v`, which this function
            // owns; MADV_HUGEPAGE only changes how the kernel backs those pages, not their contents.
            unsafe {
                libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE);
            }
        }
    }
    v.resize(n, fill);
    v
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
    fn filled_gives_n_copies_across_huge_page_boundaries() {
        // 5 MiB of u64: spans at least one whole 2 MiB page, so the madvise path runs.
        let n = (5 << 20) / 8 + 3;
        let v = filled(n, 0xabcd_u64);
        assert_eq!(v.len(), n);
        assert!(v.iter().all(|&x| x == 0xabcd));
        assert!(filled(0, 1u8).is_empty());
    }
}
