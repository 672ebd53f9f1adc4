//! The program `numaff demo` profiles: threads in a ring, thread i writes a shared buffer that
//! thread i + 1 reads, round after round (the known pattern of the profile tests' ring8.c, in Rust).
//!
//! It runs as `numaff demo-ring MS` (a hidden command) under `numaff profile`, so that the demo
//! needs no compiler. The buffers are shared anonymous memory, where induced faults catch reads as
//! well as writes (the uffd agent unmaps shared pages; private pages can be re-armed for writes
//! only).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;

/// Threads in the ring.
pub const RING_THREADS: usize = 4;

/// Pages of each thread's buffer: enough that the neighbours' sharing (a few events per page per
/// tick of the agent) stands well above that of the barrier's futex words, which every thread
/// writes (kMAF's sharing matrix counts it too: 0-2 KiB between any two threads in 1.5 s).
const RING_PAGES: usize = 64;

#[derive(Args)]
pub struct DemoRingArgs {
    /// How long the ring runs, in milliseconds.
    #[arg(default_value_t = 1500)]
    ms: u64,
}

/// A shared anonymous mapping, unmapped when dropped: /dev/zero mapped shared, which the kernel
/// makes the same shmem object as `MAP_SHARED | MAP_ANONYMOUS` (memmap2 maps anonymous memory
/// private only).
struct SharedBuffer {
    /// Owns the mapping; `ptr` is its start.
    _map: memmap2::MmapMut,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; the threads access it through volatile reads and
// writes separated by barriers, as the C version does.
unsafe impl Sync for SharedBuffer {}

impl SharedBuffer {
    fn new(len: usize) -> Result<Self> {
        let map = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/zero")
            // SAFETY: /dev/zero mapped shared is fresh anonymous memory; nothing else maps it.
            .and_then(|zero| unsafe { memmap2::MmapOptions::new().len(len).map_mut(&zero) });
        let mut map = match map {
            Ok(m) => m,
            Err(e) => bail!("cannot map {len} bytes of shared memory: {e}"),
        };
        Ok(SharedBuffer {
            ptr: map.as_mut_ptr(),
            _map: map,
            len,
        })
    }

    fn fill(&self, value: u8) {
        for k in (0..self.len).step_by(64) {
            // SAFETY: k < len, inside the mapping.
            unsafe { std::ptr::write_volatile(self.ptr.add(k), value) };
        }
    }

    fn sum(&self) -> u64 {
        (0..self.len)
            .step_by(64)
            // SAFETY: k < len, inside the mapping.
            .map(|k| u64::from(unsafe { std::ptr::read_volatile(self.ptr.add(k)) }))
            .sum()
    }
}

/// Runs the ring for `args.ms` milliseconds; prints `THREAD i tid` for each thread as it starts.
pub fn run(args: &DemoRingArgs) -> Result<()> {
    // SAFETY: sysconf has no memory-safety preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
        .ok()
        .filter(|&p| p > 0)
        .unwrap_or(4096);
    let bufs = (0..RING_THREADS)
        .map(|_| SharedBuffer::new(RING_PAGES * page))
        .collect::<Result<Vec<_>>>()?;
    let round = Barrier::new(RING_THREADS);
    let started = Barrier::new(RING_THREADS + 1);
    let stop = AtomicBool::new(false);
    // Set by one thread between the two barriers of a round, read by all after the second.
    let quit = AtomicBool::new(false);
    let out = std::sync::Mutex::new(std::io::stdout());
    std::thread::scope(|s| {
        for i in 0..RING_THREADS {
            let (bufs, round, started, stop, quit, out) =
                (&bufs, &round, &started, &stop, &quit, &out);
            s.spawn(move || {
                // SAFETY: gettid has no preconditions.
                let tid = unsafe { libc::syscall(libc::SYS_gettid) };
                if let Ok(mut o) = out.lock() {
                    let _ = writeln!(o, "THREAD {i} {tid}");
                    let _ = o.flush();
                }
                started.wait();
                let from = (i + RING_THREADS - 1) % RING_THREADS;
                let mut total = 0u64;
                for r in 1u64.. {
                    bufs[i].fill(r as u8);
                    if round.wait().is_leader() {
                        quit.store(stop.load(Ordering::SeqCst), Ordering::SeqCst);
                    }
                    total = total.wrapping_add(bufs[from].sum());
                    round.wait();
                    if quit.load(Ordering::SeqCst) {
                        break;
                    }
                }
                std::hint::black_box(total);
            });
        }
        started.wait();
        std::thread::sleep(Duration::from_millis(args.ms));
        stop.store(true, Ordering::SeqCst);
    });
    Ok(())
}
