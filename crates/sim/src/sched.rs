//! The initial placement of the "os" thread policy: where a Linux-like scheduler puts the threads of
//! a program it is free to place. The periodic moves are [`crate::OsScheduler`].

use numaff_machine::Machine;

use crate::rng::Rng;

/// Where a Linux-like scheduler starts `n` unpinned threads: spread for load balance (one thread
/// per core before any core gets a second, one per PU before any PU gets a second, as CFS's
/// fork/wake balancing fills idle cores first), but in an order that has nothing to do with which
/// threads share data: the cores are taken in a seeded random order. Deterministic in `seed`.
pub fn os_placement(machine: &Machine, n: usize, seed: u64) -> Vec<u32> {
    let mut cores: Vec<Vec<u32>> = machine
        .cores()
        .map(|(_, c)| c.pus.iter().collect::<Vec<u32>>())
        .filter(|p| !p.is_empty())
        .collect();
    if cores.is_empty() {
        cores = machine.pus().iter().map(|p| vec![p]).collect();
    }
    let mut rng = Rng::new(seed ^ 0x05_5C4E_D000);
    rng.shuffle(&mut cores);
    let depth = cores.iter().map(Vec::len).max().unwrap_or(0);
    let order: Vec<u32> = (0..depth)
        .flat_map(|k| cores.iter().filter_map(move |c| c.get(k).copied()))
        .collect();
    if order.is_empty() {
        return Vec::new();
    }
    (0..n).map(|i| order[i % order.len()]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_over_cores_first_and_depends_on_the_seed() {
        let m = numaff_machine::catalog::load("laso-hpl").unwrap_or_else(|e| panic!("{e}"));
        let cores = m.core_count();
        let a = os_placement(&m, cores, 1);
        let mut seen: Vec<_> = a
            .iter()
            .map(|&p| m.cores().position(|(_, c)| c.pus.contains(p)))
            .collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), cores, "one thread per core");
        assert_eq!(a, os_placement(&m, cores, 1));
        assert_ne!(a, os_placement(&m, cores, 2));
    }
}
