//! The sample stream of the ingest measurements, shared by benches/ingest.rs and
//! examples/analyze_speed.rs (included with `#[path]`), so both feed the tables the same samples.

/// A reproducible stream of `n` samples as (thread, address, xorshift state): 16 threads touching
/// a 1 GiB region, mostly near their previous address (as page-fault samples are), sometimes far.
/// The state is handed out so that callers can derive more per-sample choices from it.
pub fn thread_addresses(n: usize) -> impl Iterator<Item = (usize, u64, u64)> {
    let mut x = 0x1234_5678_9abc_def0u64;
    let mut last = [0u64; 16];
    (0..n).map(move |_| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let t = (x % 16) as usize;
        let jump = if x.is_multiple_of(8) {
            x % (1 << 30)
        } else {
            last[t] + (x >> 40) % 8192
        };
        last[t] = jump % (1 << 30);
        (t, 0x7f00_0000_0000 + last[t], x)
    })
}
