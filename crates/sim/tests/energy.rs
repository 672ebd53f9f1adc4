//! The energy estimate: static power times the makespan, plus a cost per cache, memory and link
//! event.

#![allow(clippy::unwrap_used)]

mod common;

use common::pages_reader;
use numaff_machine::catalog;
use numaff_sim::{DataPolicy, Op, ProcessSpec, SimConfig, Simulator, ThreadSpec};

#[test]
fn energy_is_static_power_times_time_plus_events() {
    let m = catalog::load("kmaf-sim-4x2").unwrap();
    let cfg = SimConfig::default();
    let e = &cfg.energy;
    // Compute only: static power x makespan, nothing else.
    let r = Simulator::new(&m, cfg.clone()).spawn_and_run(
        ProcessSpec::new("c", DataPolicy::FirstTouch).thread(ThreadSpec::new(
            "t",
            0,
            std::iter::repeat_n(Op::Compute(1000), 1000),
        )),
    );
    let watts = e.static_w_per_package * m.packages.len() as f64
        + e.static_w_per_node * m.nodes.len() as f64;
    let want = watts * r.makespan_ns as f64 * 1e-9;
    // (the reported makespan is whole ns; energy uses the exact one: at most 1 ns apart)
    assert!(
        (r.energy_j - want).abs() <= watts * 1e-9,
        "{} vs {want}",
        r.energy_j
    );
    // Memory traffic adds per-event energy beyond static power: at least one DRAM line per miss.
    let spec = ProcessSpec::new("s", DataPolicy::Bind(2)).thread(pages_reader(0, 1 << 20, 1));
    let r = Simulator::new(&m, cfg.clone()).spawn_and_run(spec);
    let stat = watts * r.makespan_ns as f64 * 1e-9;
    let dram = r.llc_misses as f64 * e.dram_line_nj * 1e-9;
    assert!(
        r.energy_j >= stat + dram,
        "{} vs {stat} + {dram}",
        r.energy_j
    );
}
