//! Get and set the cpu affinity of one thread through the raw sched_getaffinity / sched_setaffinity
//! syscalls, with a mask sized at run time so machines beyond 1024 cpus work.

use numaff_machine::CpuSet;

use crate::error::{Op, Result, SysError, Target};

const WORD_BITS: usize = libc::c_ulong::BITS as usize;
/// The largest mask tried when asking the kernel (bytes): 2^22 cpus, far beyond any NR_CPUS.
const MAX_MASK_BYTES: usize = 1 << 19;

/// The cpus `tid` may run on (0 means the calling thread).
pub fn get(tid: i32) -> Result<CpuSet> {
    let target = Target::Tid { pid: None, tid };
    // Start at 1024 cpus; the kernel answers EINVAL while the mask is smaller than its nr_cpu_ids.
    let mut words = 1024 / WORD_BITS;
    loop {
        let mut mask: Vec<libc::c_ulong> = vec![0; words];
        let bytes = words * std::mem::size_of::<libc::c_ulong>();
        // SAFETY: the buffer is `bytes` long and lives for the whole call.
        let r = unsafe {
            libc::syscall(
                libc::SYS_sched_getaffinity,
                tid as libc::pid_t,
                bytes,
                mask.as_mut_ptr(),
            )
        };
        if r >= 0 {
            return Ok(from_mask(&mask));
        }
        let err = SysError::last(Op::GetAffinity, target.clone());
        if err.errno == libc::EINVAL && bytes < MAX_MASK_BYTES {
            words *= 2;
            continue;
        }
        return Err(err.into());
    }
}

/// Restricts `tid` (0 means the calling thread) to `cpus`. An empty set, or one with no online cpu
/// the thread may use, is refused by the kernel with EINVAL.
pub fn set(tid: i32, cpus: &CpuSet) -> Result<()> {
    let target = Target::Tid { pid: None, tid };
    let mask = to_mask(cpus);
    let bytes = mask.len() * std::mem::size_of::<libc::c_ulong>();
    // SAFETY: the buffer is `bytes` long and lives for the whole call; the kernel only reads it.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_setaffinity,
            tid as libc::pid_t,
            bytes,
            mask.as_ptr(),
        )
    };
    if r < 0 {
        return Err(SysError::last(Op::SetAffinity, target).into());
    }
    Ok(())
}

/// A kernel cpu mask (array of unsigned long, bit i of word i / BITS) from a set; at least one word.
pub fn to_mask(cpus: &CpuSet) -> Vec<libc::c_ulong> {
    let words = cpus.last().map_or(1, |c| c as usize / WORD_BITS + 1);
    let mut mask = vec![0; words];
    for c in cpus.iter() {
        let c = c as usize;
        mask[c / WORD_BITS] |= 1 << (c % WORD_BITS);
    }
    mask
}

/// The set of a kernel cpu mask.
pub fn from_mask(mask: &[libc::c_ulong]) -> CpuSet {
    let mut set = CpuSet::new();
    for (w, &word) in mask.iter().enumerate() {
        for b in 0..WORD_BITS {
            if word & (1 << b) != 0 {
                set.insert((w * WORD_BITS + b) as u32);
            }
        }
    }
    set
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn gettid() -> i32 {
        // SAFETY: gettid has no preconditions.
        unsafe { libc::syscall(libc::SYS_gettid) as i32 }
    }

    #[test]
    fn mask_round_trip_beyond_1024() {
        let set = CpuSet::parse("0,63,64,1023,1024,5000").unwrap();
        let mask = to_mask(&set);
        assert_eq!(mask.len(), 5000 / WORD_BITS + 1);
        assert_eq!(from_mask(&mask), set);
        assert_eq!(to_mask(&CpuSet::new()), vec![0]);
    }

    #[test]
    fn set_spawned_thread_to_cpu0_and_read_back() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let h = std::thread::spawn(move || {
            tx.send(gettid()).unwrap();
            let _ = done_rx.recv();
        });
        let tid = rx.recv().unwrap();
        let before = get(tid).unwrap();
        assert!(before.contains(0));
        let cpu0 = CpuSet::parse("0").unwrap();
        set(tid, &cpu0).unwrap();
        assert_eq!(get(tid).unwrap(), cpu0);
        set(tid, &before).unwrap();
        assert_eq!(get(tid).unwrap(), before);
        done_tx.send(()).unwrap();
        h.join().unwrap();
    }

    #[test]
    fn invalid_sets_give_einval_with_advice() {
        let tid = gettid();
        for bad in [CpuSet::new(), CpuSet::parse("100000").unwrap()] {
            let e = set(tid, &bad).unwrap_err();
            assert_eq!(e.errno(), Some(libc::EINVAL));
            let m = e.to_string();
            assert!(
                m.starts_with(&format!(
                    "cannot set the cpu affinity of thread {tid}: invalid argument; the cpu set has no cpu"
                )),
                "{m}"
            );
        }
    }

    #[test]
    fn missing_thread_has_exited() {
        let m = get(i32::MAX).unwrap_err().to_string();
        assert!(
            m.ends_with(&format!("thread {} has exited", i32::MAX)),
            "{m}"
        );
    }
}
