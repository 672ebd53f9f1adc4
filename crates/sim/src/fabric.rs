//! The memory side of the machine: one memory controller per node and the interconnect links, each
//! a FIFO queue with a service time per 64-byte line, plus the uncontended latency between nodes.
//!
//! Figures come from the Machine:
//! - latency: `latency_ns[i][j]` when given (the whole load-to-use latency of a cache-missing load
//!   from cpu node i to memory node j, caches included); else `distances` read as ACPI SLIT relative
//!   latencies, `LOCAL_LATENCY_NS * d / 10`; else `LOCAL_LATENCY_NS` plus a hop latency per link hop
//!   (`interconnect.hop_latency_ns`, else `HOP_LATENCY_NS`). See [`crate::config::defaults`].
//! - controller service: 64 B / the best bandwidth any cpu node gets from that memory node in
//!   `bandwidth_mbps` (the local figure on the papers' machines), else `CONTROLLER_MBPS`;
//! - link service, per direction: the data of cpu node b reading memory node a crosses link a→b, so
//!   a direct link a→b gets 64 B / `bandwidth_mbps[b][a]`; without a matrix,
//!   `interconnect.link_bandwidth_mbps`, else `LINK_MBPS`.
//!
//! Queues are fluid FIFOs: a request arriving at `t` is served from `max(t, latest arrival so far,
//! free)` and the queue is busy one service time longer. Hardware threads run a little out of time
//! order (up to the scheduler's quantum and one memory latency), so a request may be simulated
//! after a later one; measuring its wait from the latest arrival rather than from its own time
//! keeps the wait equal to the backlog in front of it instead of charging it the skew.
//!
//! The queue waits come on top of the uncontended latency: the service time of an idle controller or
//! link is part of the measured latency already, so an uncontended load costs exactly
//! `latency_ns[i][j]`, while a stream of loads is limited to the bottleneck's bandwidth. Data travels
//! along the shortest path of links (ties broken towards lower node ids); without an interconnect
//! every pair of nodes has its own direct link.

use numaff_machine::Machine;

use crate::config::defaults;

/// Bytes of a cache line.
pub const LINE: f64 = 64.0;

/// Service time in ns of one 64-byte line at `mbps` MB/s (10^6 bytes per second).
fn service_ns(mbps: f64) -> f64 {
    LINE * 1e3 / mbps.max(1.0)
}

/// The later of two of the model's times: `a.max(b)` for values that are never NaN, as a compare
/// and a select (one `maxsd`) instead of `f64::max`'s NaN handling, five more instructions per
/// call on the memory path (issue 4, change 24). Equal to `f64::max` for every pair without a
/// NaN, signed zeros aside: times are sums of non-negative terms and `start - now` with
/// `start >= now`, so never -0.0. Debug builds (every test) check that neither is NaN.
#[inline(always)]
pub(crate) fn later(a: f64, b: f64) -> f64 {
    debug_assert!(!a.is_nan() && !b.is_nan(), "a NaN time");
    if b > a {
        b
    } else {
        a
    }
}

/// One FIFO queue of the fabric (a memory controller or a directed link): the time to serve a
/// line, when it is free next, and the latest arrival so far. One struct per queue, so that a
/// crossing indexes one array with one bounds check instead of three (issue 4, change 27).
#[derive(Debug, Clone, Copy)]
struct Queue {
    service: f64,
    free: f64,
    last: f64,
}

impl Queue {
    fn new(service: f64) -> Self {
        Queue {
            service,
            free: 0.0,
            last: 0.0,
        }
    }

    /// A line arriving at `t`: arrivals out of time order are taken at the latest arrival so
    /// far (`now`), then served once the queue is free (`start`). Returns `(now, start)`.
    #[inline(always)]
    fn occupy(&mut self, t: f64) -> (f64, f64) {
        let now = later(t, self.last);
        self.last = now;
        let start = later(now, self.free);
        self.free = start + self.service;
        (now, start)
    }
}

/// Controllers, links and latencies of one machine, with their queue states.
#[derive(Debug, Clone)]
pub struct Fabric {
    n: usize,
    /// Uncontended latency, row-major `[cpu node][memory node]`, ns.
    lat: Vec<f64>,
    /// Memory controllers' queues, by node position.
    mcs: Vec<Queue>,
    link_ends: Vec<(usize, usize)>,
    /// Links' queues, as `link_ends`.
    links: Vec<Queue>,
    /// Directed links that data from memory node j to cpu node i crosses, `[i * n + j]`.
    routes: Vec<Vec<u16>>,
    /// Total wait in controller queues, ns.
    pub mc_wait_ns: f64,
    /// Total wait in link queues, ns.
    pub link_wait_ns: f64,
    /// Bytes carried by links (one count per link crossed).
    pub link_bytes: u64,
    /// Lines read or written by each controller.
    pub mc_lines: Vec<u64>,
}

impl Fabric {
    /// The fabric of `machine` (node positions as in `machine.nodes`).
    pub fn new(machine: &Machine) -> Self {
        let n = machine.nodes.len().max(1);
        let ids: Vec<u32> = machine.nodes.iter().map(|x| x.id).collect();
        let pos = |id: u32| ids.iter().position(|&x| x == id);
        // Directed links.
        let mut link_ends = Vec::new();
        match &machine.interconnect {
            Some(ic) if !ic.links.is_empty() => {
                for &(a, b) in &ic.links {
                    if let (Some(a), Some(b)) = (pos(a), pos(b)) {
                        if a != b {
                            link_ends.push((a, b));
                            link_ends.push((b, a));
                        }
                    }
                }
            }
            _ => {
                for a in 0..n {
                    for b in 0..n {
                        if a != b {
                            link_ends.push((a, b));
                        }
                    }
                }
            }
        }
        link_ends.sort_unstable();
        link_ends.dedup();
        // Shortest paths by BFS from each memory node, neighbours in node order.
        let mut routes = vec![Vec::new(); n * n];
        let mut hops = vec![vec![0usize; n]; n];
        for j in 0..n {
            let mut prev: Vec<Option<(usize, u16)>> = vec![None; n];
            let mut seen = vec![false; n];
            seen[j] = true;
            let mut queue = std::collections::VecDeque::from([j]);
            while let Some(a) = queue.pop_front() {
                for (l, &(x, b)) in link_ends.iter().enumerate() {
                    if x == a && !seen[b] {
                        seen[b] = true;
                        prev[b] = Some((a, l as u16));
                        queue.push_back(b);
                    }
                }
            }
            for i in 0..n {
                let mut path = Vec::new();
                let mut at = i;
                while let Some((a, l)) = prev[at] {
                    path.push(l);
                    at = a;
                }
                path.reverse();
                hops[i][j] = path.len();
                routes[i * n + j] = path;
            }
        }
        // Latencies.
        let mut lat = vec![defaults::LOCAL_LATENCY_NS; n * n];
        let hop_ns = machine
            .interconnect
            .as_ref()
            .and_then(|ic| ic.hop_latency_ns)
            .unwrap_or(defaults::HOP_LATENCY_NS);
        for i in 0..n {
            for j in 0..n {
                let from_matrix = machine
                    .latency_ns
                    .as_ref()
                    .and_then(|m| m.get(i)?.get(j).copied())
                    .filter(|&v| v > 0.0);
                let from_dist = machine
                    .distances
                    .as_ref()
                    .and_then(|m| m.get(i)?.get(j).copied())
                    .filter(|&d| d > 0)
                    .map(|d| defaults::LOCAL_LATENCY_NS * f64::from(d) / 10.0);
                lat[i * n + j] = from_matrix
                    .or(from_dist)
                    .unwrap_or(defaults::LOCAL_LATENCY_NS + hop_ns * hops[i][j] as f64);
            }
        }
        // Controllers.
        let bw = |i: usize, j: usize| {
            machine
                .bandwidth_mbps
                .as_ref()
                .and_then(|m| m.get(i)?.get(j).copied())
                .filter(|&v| v > 0.0)
        };
        let mcs = (0..n)
            .map(|j| {
                let best = (0..n).filter_map(|i| bw(i, j)).fold(0.0, f64::max);
                Queue::new(service_ns(if best > 0.0 {
                    best
                } else {
                    defaults::CONTROLLER_MBPS
                }))
            })
            .collect();
        let link_default = machine
            .interconnect
            .as_ref()
            .and_then(|ic| ic.link_bandwidth_mbps)
            .unwrap_or(defaults::LINK_MBPS);
        let links = link_ends
            .iter()
            .map(|&(a, b)| Queue::new(service_ns(bw(b, a).unwrap_or(link_default))))
            .collect();
        Fabric {
            n,
            lat,
            mcs,
            link_ends,
            links,
            routes,
            mc_wait_ns: 0.0,
            link_wait_ns: 0.0,
            link_bytes: 0,
            mc_lines: vec![0; n],
        }
    }

    /// Number of nodes.
    pub fn nodes(&self) -> usize {
        self.n
    }

    /// Uncontended latency from cpu node `i` to memory node `j`, ns.
    #[inline]
    pub fn latency(&self, i: usize, j: usize) -> f64 {
        self.lat[i * self.n + j]
    }

    /// Number of links data from memory node `j` to cpu node `i` crosses.
    pub fn hops(&self, i: usize, j: usize) -> usize {
        self.routes[i * self.n + j].len()
    }

    /// The directed links, as (from, to) node positions.
    pub fn links(&self) -> &[(usize, usize)] {
        &self.link_ends
    }

    /// A line read by cpu node `i` from memory node `j` issued at `t`: the latency including the
    /// waits in the controller and link queues, which it occupies.
    #[inline]
    pub fn read(&mut self, t: f64, i: usize, j: usize) -> f64 {
        let wait = self.occupy_mc(t, j);
        wait + self.occupy_route(t + wait, j, i) + self.lat[i * self.n + j]
    }

    /// Occupies controller `j` for one line from `t`; returns the wait.
    #[inline]
    pub fn occupy_mc(&mut self, t: f64, j: usize) -> f64 {
        let (now, start) = self.mcs[j].occupy(t);
        self.mc_lines[j] += 1;
        let w = start - now;
        self.mc_wait_ns += w;
        w
    }

    /// Occupies the links from node `from` to node `to` for one line from `t`; returns the waits.
    #[inline(always)]
    pub fn occupy_route(&mut self, t: f64, from: usize, to: usize) -> f64 {
        let mut arrive = t;
        let mut wait = 0.0;
        for &l in &self.routes[to * self.n + from] {
            let l = l as usize;
            let (now, start) = self.links[l].occupy(arrive);
            wait += start - now;
            self.link_bytes += LINE as u64;
            arrive = start;
        }
        self.link_wait_ns += wait;
        wait
    }

    /// Copies `lines` lines from memory node `from` to memory node `to` starting at `t` (page
    /// migration): reads at `from`, crosses the links, writes at `to`. Returns when it completes.
    pub fn copy(&mut self, t: f64, from: usize, to: usize, lines: u64) -> f64 {
        let mut done = t;
        for _ in 0..lines {
            let w1 = self.occupy_mc(t, from);
            let w2 = self.occupy_route(t + w1, from, to);
            let w3 = self.occupy_mc(t + w1 + w2, to);
            done = done.max(t + w1 + w2 + w3);
        }
        done + self.lat[to * self.n + from]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue4_later_equals_f64_max_on_times() {
        // Every pair of the model's kind of values (non-negative, zero, large, infinite, equal),
        // bit for bit, in both orders.
        let mut vals = vec![
            0.0,
            1.0,
            1.5,
            20.0,
            1e-9,
            1e300,
            f64::MAX,
            f64::INFINITY,
            7.25,
        ];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            vals.push((x >> 11) as f64 * 1e-6);
        }
        for &a in &vals {
            for &b in vals.iter().take(200) {
                assert_eq!(later(a, b).to_bits(), a.max(b).to_bits(), "{a} {b}");
                assert_eq!(later(b, a).to_bits(), b.max(a).to_bits(), "{b} {a}");
            }
        }
    }

    #[test]
    fn ring_routes_and_matrix_figures() {
        let m = numaff_machine::catalog::load("laso-hpl").unwrap();
        let f = Fabric::new(&m);
        assert_eq!(f.hops(0, 1), 1);
        assert_eq!(f.hops(0, 2), 2);
        assert_eq!(f.hops(0, 0), 0);
        assert_eq!(f.latency(0, 2), 271.4);
        assert!((f.mcs[0].service - 64e3 / 59497.0).abs() < 1e-9);
    }

    #[test]
    fn distances_give_latency_without_matrix() {
        let m = numaff_machine::catalog::load("kmaf-sim-4x2").unwrap();
        let f = Fabric::new(&m);
        assert_eq!(f.latency(0, 0), defaults::LOCAL_LATENCY_NS);
        assert_eq!(f.latency(0, 2), 3.0 * defaults::LOCAL_LATENCY_NS);
    }
}
