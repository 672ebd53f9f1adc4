//! Memory congestion: bandwidth-bound threads queue at one node's controller and interleaving
//! relieves it; the queues see requests in time order whatever order they are simulated in.

#![allow(clippy::unwrap_used)]

mod common;

use common::streaming;
use numaff_machine::catalog;
use numaff_sim::{Access, DataPolicy, Op, ProcessSpec, Report, SimConfig, Simulator, ThreadSpec};

fn mean_thread_time(r: &Report) -> f64 {
    r.threads.iter().map(|t| t.time_ns as f64).sum::<f64>() / r.threads.len() as f64
}

#[test]
fn bandwidth_bound_stream_congests_one_node_and_interleave_relieves_it() {
    let m = catalog::load("kmaf-sim-4x2").unwrap();
    // Page faults are not the point here: free first touches leave the memory side alone.
    let cfg = SimConfig {
        fault_ns: 0.0,
        ..SimConfig::default()
    };
    let run = |n, policy| Simulator::new(&m, cfg.clone()).spawn_and_run(streaming(n, 4000, policy));
    let times: Vec<f64> = [1, 2, 4, 8]
        .iter()
        .map(|&n| mean_thread_time(&run(n, DataPolicy::Bind(0))))
        .collect();
    println!("per-thread time, data on node 0, 1/2/4/8 threads: {times:?}");
    for w in times.windows(2) {
        assert!(w[1] > w[0] * 1.2, "no congestion: {times:?}");
    }
    let bound = run(8, DataPolicy::Bind(0));
    let inter = run(8, DataPolicy::Interleave);
    println!(
        "8 threads: bind makespan {} ns (IMC queue {:.0} ns), interleave {} ns (IMC queue {:.0} ns)",
        bound.makespan_ns, bound.imc_queue_ns, inter.makespan_ns, inter.imc_queue_ns
    );
    assert!(inter.makespan_ns as f64 * 1.5 < bound.makespan_ns as f64);
    assert!(inter.imc_queue_ns < bound.imc_queue_ns);
}

/// Each thread chases pointers through its own `lines` lines (one load in flight at a time).
fn chasing(cpus: &[u32], lines: u64, policy: DataPolicy) -> ProcessSpec {
    let mut spec = ProcessSpec::new("chase", policy);
    for (k, &cpu) in cpus.iter().enumerate() {
        let base = 0x4000_0000 + k as u64 * lines * 64;
        // A stride of 67 lines: no two loads in one page in a row, every one a miss.
        let ops = (0..lines)
            .map(move |l| Op::Access(Access::read(base + (l * 67 % lines) * 64).dependent()));
        spec = spec.thread(ThreadSpec::new(format!("t{k}"), cpu, ops));
    }
    spec
}

#[test]
fn queues_see_requests_in_time_order() {
    // Ten threads of laso-hpl's node 0 chasing pointers through memory on that node: one load each
    // in flight, some 86 ns apart, 1.08 ns of controller time each, so the controller is about 12 %
    // busy (M/D/1 with random arrivals: 0.07 ns of wait per load; these arrivals fall into step and
    // wait less). A dependent load is issued when the one before completes, up to a memory latency
    // past the other PUs' clocks. Queued in simulation order, the others' loads, simulated after it
    // but from earlier times, would be taken at its arrival, and the wait per load would grow with
    // the quantum.
    let m = catalog::load("laso-hpl").unwrap();
    let cpus: Vec<u32> = m.nodes[0].cpus.iter().collect();
    assert_eq!(cpus.len(), 10);
    let run = |quantum_ns| {
        let cfg = SimConfig {
            fault_ns: 0.0,
            quantum_ns,
            ..SimConfig::default()
        };
        Simulator::new(&m, cfg).spawn_and_run(chasing(&cpus, 3000, DataPolicy::Bind(0)))
    };
    for quantum_ns in [20.0, 0.5] {
        let r = run(quantum_ns);
        let per_miss = r.imc_queue_ns / r.llc_misses as f64;
        println!(
            "quantum {quantum_ns} ns: {} LLC misses, IMC queue {:.0} ns, {per_miss:.3} ns per miss, makespan {} ns",
            r.llc_misses, r.imc_queue_ns, r.makespan_ns
        );
        assert!(r.llc_misses >= 30_000);
        assert!(
            per_miss < 0.05,
            "quantum {quantum_ns}: {per_miss} ns per miss"
        );
    }
}
