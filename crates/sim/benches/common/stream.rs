//! The access stream of the simulator's speed measurements, shared by benches/accesses.rs and
//! examples/simspeed.rs (included with `#[path]`), so both time the same thing.

use numaff_sim::{Access, Op};

/// Accesses per stream.
pub const N: u64 = 1_000_000;

/// `span` bytes walked at random (xorshift), 1 store in 4: `n` accesses (the benchmark's `N`;
/// a longer stream begins with the same `N`).
pub fn random_stream_of(span: u64, n: u64) -> impl Iterator<Item = Op> + Send {
    let mut x = 88_172_645_463_325_252u64;
    (0..n).map(move |_| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let a = 0x1000_0000 + (x % span);
        Op::Access(if x & 3 == 0 {
            Access::write(a)
        } else {
            Access::read(a)
        })
    })
}
