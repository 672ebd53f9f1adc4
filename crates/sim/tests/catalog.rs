//! Every machine of the catalog simulates: two threads, one on the first PU and one on the last,
//! run their accesses to the end.

#![allow(clippy::unwrap_used)]

use numaff_machine::catalog;
use numaff_sim::{Access, DataPolicy, Op, ProcessSpec, SimConfig, Simulator, ThreadSpec};

#[test]
fn every_catalog_machine_simulates() {
    for name in catalog::names() {
        let m = catalog::load(name).unwrap();
        let cpus: Vec<u32> = m.pus().iter().collect();
        let last = *cpus.last().unwrap();
        let mut spec = ProcessSpec::new("smoke", DataPolicy::Interleave);
        for (k, cpu) in [cpus[0], last].into_iter().enumerate() {
            let ops = (0..2_000u64).map(move |i| {
                let a = 0x1000_0000 + (i % 500) * 64;
                Op::Access(if matches!((i + k as u64) % 3, 0) {
                    Access::write(a)
                } else {
                    Access::read(a)
                })
            });
            spec = spec.thread(ThreadSpec::new(format!("t{k}"), cpu, ops));
        }
        let r = Simulator::new(&m, SimConfig::default()).spawn_and_run(spec);
        assert_eq!(r.accesses, 4_000, "{name}");
        assert!(r.makespan_ns > 0, "{name}");
    }
}
