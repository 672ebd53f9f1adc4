//! The simulator's own Memory Latency Checker: a pointer chase and a streaming read from every cpu
//! node to every memory node of a simulated machine, giving latency and bandwidth matrices.

use numaff_machine::{Machine, Matrix};
use serde::{Deserialize, Serialize};

use crate::config::SimConfig;
use crate::rng;
use crate::sim::Simulator;
use crate::stream::{Access, DataPolicy, Op, ProcessSpec, ThreadSpec};

/// Loads in one pointer chase (each to a distinct line, so each misses every cache).
pub const CHASE_LOADS: u64 = 2_000;
/// Lines each PU reads in the streaming test.
pub const STREAM_LINES: u64 = 12_000;
/// Base address of the measured buffers.
const BASE: u64 = 0x1000_0000;
/// Lines of the pointer-chase buffer (64 MiB), a power of two.
const CHASE_SPAN: u64 = 1 << 20;

/// What [`measure`] found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// Node ids of the rows (nodes with cpus).
    pub cpu_nodes: Vec<u32>,
    /// Node ids of the columns (every node).
    pub memory_nodes: Vec<u32>,
    /// Pointer-chase latency per load, ns, `[cpu node][memory node]`.
    pub latency_ns: Matrix<f64>,
    /// Streaming-read bandwidth of all PUs of the cpu node, MB/s (10^6 bytes per second).
    pub bandwidth_mbs: Matrix<f64>,
}

/// Measures a simulated machine. Each cell is its own run on an idle machine with cold caches and
/// the buffer already placed on the memory node (as MLC allocates and initialises it first).
/// Latency: one thread on the node's first PU chases [`CHASE_LOADS`] dependent loads through
/// distinct lines scattered over 64 MiB. Bandwidth: every PU of the node reads [`STREAM_LINES`]
/// consecutive lines of its own buffer with independent loads; bytes over the makespan.
pub fn measure(machine: &Machine, cfg: &SimConfig) -> Measurement {
    let cpu_nodes: Vec<u32> = machine.cpu_nodes().map(|n| n.id).collect();
    let memory_nodes: Vec<u32> = machine.nodes.iter().map(|n| n.id).collect();
    let mut cfg = cfg.clone();
    cfg.first_touch_samples = false;
    cfg.hw_sampling = None;
    cfg.induced_faults = None;
    let mut rng = rng::seeded(cfg.seed);
    let mut latency_ns = Vec::new();
    let mut bandwidth_mbs = Vec::new();
    for &i in &cpu_nodes {
        let cpus: Vec<u32> = machine
            .nodes
            .iter()
            .find(|n| n.id == i)
            .map(|n| n.cpus.iter().collect())
            .unwrap_or_default();
        let mut lat_row = Vec::new();
        let mut bw_row = Vec::new();
        for &j in &memory_nodes {
            lat_row.push(chase(machine, &cfg, cpus[0], j, rng.next_u64()));
            bw_row.push(stream(machine, &cfg, &cpus, j));
        }
        latency_ns.push(lat_row);
        bandwidth_mbs.push(bw_row);
    }
    Measurement {
        cpu_nodes,
        memory_nodes,
        latency_ns,
        bandwidth_mbs,
    }
}

fn chase(machine: &Machine, cfg: &SimConfig, cpu: u32, node: u32, salt: u64) -> f64 {
    let mut sim = Simulator::new(machine, cfg.clone());
    // (i * odd) mod 2^k is a permutation: distinct, scattered lines.
    let offset = salt % CHASE_SPAN;
    let ops = (0..CHASE_LOADS).map(move |k| {
        let line = (k.wrapping_mul(0x9E37_79B1) + offset) % CHASE_SPAN;
        Op::Access(Access::read(BASE + line * 64).dependent())
    });
    let spec = ProcessSpec::new("chase", DataPolicy::Bind(node))
        .thread(ThreadSpec::new("chase", cpu, ops));
    let Ok(pid) = sim.spawn(spec) else {
        return f64::NAN;
    };
    if sim.place(pid, BASE, CHASE_SPAN * 64, node).is_err() {
        return f64::NAN;
    }
    let r = sim.run();
    r.makespan_ns as f64 / CHASE_LOADS as f64
}

fn stream(machine: &Machine, cfg: &SimConfig, cpus: &[u32], node: u32) -> f64 {
    let mut sim = Simulator::new(machine, cfg.clone());
    let span = STREAM_LINES * 64;
    let mut spec = ProcessSpec::new("stream", DataPolicy::Bind(node));
    for (k, &cpu) in cpus.iter().enumerate() {
        let base = BASE + k as u64 * span;
        let ops = (0..STREAM_LINES).map(move |l| Op::Access(Access::read(base + l * 64)));
        spec = spec.thread(ThreadSpec::new(format!("stream{k}"), cpu, ops));
    }
    let Ok(pid) = sim.spawn(spec) else {
        return f64::NAN;
    };
    if sim
        .place(pid, BASE, span * cpus.len() as u64, node)
        .is_err()
    {
        return f64::NAN;
    }
    let r = sim.run();
    let bytes = (STREAM_LINES * 64 * cpus.len() as u64) as f64;
    bytes / r.makespan_ns.max(1) as f64 * 1e3
}
