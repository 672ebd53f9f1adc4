//! What a simulated run reports: the figures the papers measure (makespan, per-thread time, local and
//! remote accesses, LLC misses, IMC queueing, interconnect volume, c2c transfers, migrations, energy).

use serde::{Deserialize, Serialize};

/// One software thread's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadReport {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Name.
    pub name: String,
    /// The PU it ended on.
    pub cpu: u32,
    /// When its process started, ns.
    pub start_ns: u64,
    /// When it finished (or now, if it has not), ns.
    pub end_ns: u64,
    /// `end_ns - start_ns`.
    pub time_ns: u64,
    /// Memory accesses it issued.
    pub accesses: u64,
    /// Of which served by the memory of its own node.
    pub local_accesses: u64,
    /// Of which served by the memory of another node.
    pub remote_accesses: u64,
    /// Times it was moved to another PU.
    pub migrations: u64,
}

/// Figures of a whole run (or of the run so far).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The machine's name.
    pub machine: String,
    /// The seed.
    pub seed: u64,
    /// Time at which the last thread finished, ns from 0.
    pub makespan_ns: u64,
    /// Memory accesses issued.
    pub accesses: u64,
    /// Hits per cache level (index 0 = L1).
    pub cache_hits: Vec<u64>,
    /// Accesses that missed every cache level of their PU (served by memory or another cache).
    pub llc_misses: u64,
    /// Accesses served by the memory of the accessing cpu's node.
    pub local_accesses: u64,
    /// Accesses served by the memory of another node.
    pub remote_accesses: u64,
    /// Total time demand reads waited in memory-controller queues, ns ("IMC queue"); writebacks
    /// occupy the queues but their own waits are not counted.
    pub imc_queue_ns: f64,
    /// Total time lines waited in interconnect link queues, ns.
    pub link_queue_ns: f64,
    /// Bytes carried over interconnect links, counted per link crossed ("QPI volume").
    pub interconnect_bytes: u64,
    /// Lines that reached a controller or link queue earlier than the busy intervals it
    /// remembers and were taken at the end of the forgotten ones: a wait the time-ordered FIFO
    /// may not have had (crates/sim/README.md, "Queues"). 0 in a faithful run.
    #[serde(default)]
    pub queue_past_history: u64,
    /// Reads of lines dirty in another core's caches (cache-to-cache transfers).
    pub c2c_transfers: u64,
    /// Of which between caches of different nodes.
    pub c2c_remote: u64,
    /// Lines invalidated in other caches by writes.
    pub invalidations: u64,
    /// Dirty lines written back to memory.
    pub writebacks: u64,
    /// First-touch page faults.
    pub page_faults: u64,
    /// Thread migrations done.
    pub migrations: u64,
    /// Their cost, ns.
    pub migration_cost_ns: f64,
    /// Pages migrated.
    pub page_migrations: u64,
    /// Their cost (copy plus kernel), ns.
    pub page_migration_cost_ns: f64,
    /// Samples produced (faults, hardware samples, induced faults).
    pub samples: u64,
    /// Energy estimate, J (see [`crate::EnergyModel`]).
    pub energy_j: f64,
    /// Per software thread.
    pub threads: Vec<ThreadReport>,
}
