//! Sizing of the per-cpu perf ring buffers: a budget of memory spread over the cpus and events of
//! one profiled program, within bounds.

use super::page_size;

/// Data pages of each per-cpu ring buffer (as `perf record`'s default of 512 KiB with 4 KiB pages).
pub const RING_DATA_PAGES: usize = 128;

/// Memory [`ring_pages_for`] spreads over the per-cpu ring buffers of one profiled program.
pub const RING_BUDGET_BYTES: usize = 16 << 20;

/// The most data pages [`ring_pages_for`] gives a ring: larger rings cost more to set up and tear
/// down (the kernel allocates and zeroes them, about 1 ms per MiB) than they save.
pub const RING_DATA_PAGES_MAX: usize = 512;

/// Data pages per ring buffer for `cpus` cpus within [`RING_BUDGET_BYTES`]: a power of two between
/// [`RING_DATA_PAGES`] and [`RING_DATA_PAGES_MAX`] (2 MiB). Larger rings let the reader wake up
/// less often and fall behind for longer without losing samples, so that it can leave the cpus to
/// the program.
pub fn ring_pages_for(cpus: usize) -> usize {
    let per_cpu = RING_BUDGET_BYTES / page_size() / cpus.max(1);
    let pages = if per_cpu.is_power_of_two() {
        per_cpu
    } else {
        per_cpu.next_power_of_two() / 2
    };
    pages.clamp(RING_DATA_PAGES, RING_DATA_PAGES_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_pages_stay_within_budget_and_bounds() {
        let page = page_size();
        for cpus in [1, 2, 3, 8, 64, 1024] {
            let p = ring_pages_for(cpus);
            assert!(p.is_power_of_two(), "{cpus} cpus: {p}");
            assert!(
                (RING_DATA_PAGES..=RING_DATA_PAGES_MAX).contains(&p),
                "{cpus} cpus: {p}"
            );
            assert!(
                p == RING_DATA_PAGES || p * page * cpus <= RING_BUDGET_BYTES,
                "{cpus} cpus: {p} pages"
            );
        }
        assert_eq!(ring_pages_for(1024), RING_DATA_PAGES);
        if page == 4096 {
            assert_eq!(ring_pages_for(2), 512);
            assert_eq!(ring_pages_for(16), 256);
            assert_eq!(ring_pages_for(32), 128);
        }
    }
}
