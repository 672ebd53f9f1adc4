//! Steps the simulator's integration tests share (included by `mod common;` in each file).

use numaff_engine::{Environment, Sample};
use numaff_sim::{ProcessSpec, Report, Simulator};

/// Spawns `spec` on `sim`, runs it to the end and returns the report with every sample taken.
pub fn run_sampled(sim: &mut Simulator, spec: ProcessSpec) -> (Report, Vec<Sample>) {
    sim.spawn(spec).expect("spawn");
    let r = sim.run();
    let mut s = Vec::new();
    sim.drain_samples(&mut s).expect("drain samples");
    (r, s)
}
