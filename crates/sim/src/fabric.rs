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
//! Queues are FIFOs in arrival-time order: a request arriving at `t` is served once the requests
//! that arrived before it are, and the queue is busy one service time longer. Hardware threads run
//! a little out of time order (up to the scheduler's quantum, and a request after a page fault
//! arrives 1 µs after its PU's clock), so a request may be simulated after later ones: it is put
//! among them by its arrival time (`Queue`), so that neither the skew nor the simulation order
//! is charged as queueing (issue 4).
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

/// How many of its latest reservations a queue keeps to place a late request among them (a power
/// of two: a ring). More than a quantum's worth of skew holds at the shortest service time of the
/// catalog's machines (laso-hpl's controllers, 1.08 ns a line: 20 ns of backlog is about 19
/// reservations). An arrival older than all kept ones queues behind the newest one dropped.
const KEPT: usize = 1024;

/// One FIFO queue of the fabric (a memory controller or a directed link), served in arrival-time
/// order whatever order the PUs' requests are simulated in.
///
/// PUs run up to the scheduler's quantum apart, and a request that follows a stall (a page fault)
/// arrives that much later than its PU's clock, so requests reach a queue out of time order. A
/// plain FIFO serves a late-simulated request after every request simulated before it, charging it
/// their service; before issue 4's fix the queue also took it as arriving at the latest arrival, so
/// one page fault (a request 1 µs ahead) made every request of the other PUs in that microsecond
/// queue behind each other. Here the queue keeps its latest reservations (arrival, end) in
/// arrival order and puts a late request where its arrival time puts it: it waits for the work
/// that arrived before it, and the reservations after it are pushed back by its service (each
/// starts at the later of its arrival and the previous end), so that requests simulated later
/// queue behind all of them. The requests it overtook were simulated already and keep their
/// latencies; the delay it adds to them is charged to it instead, so the queue's total wait and
/// its capacity stay those of the FIFO in time order. In time order this is exactly a FIFO.
#[derive(Debug, Clone)]
struct Queue {
    service: f64,
    /// When the queue is free next: the end of the latest reservation.
    free: f64,
    /// Arrival of the latest reservation (in arrival order).
    last: f64,
    /// Reservations made so far; the latest `min(made, KEPT)` are in `kept`, reservation `i`
    /// (counting in arrival order) at `i % KEPT`, as `(arrival, end)`.
    made: usize,
    kept: Box<[(f64, f64); KEPT]>,
    /// End of the newest reservation dropped from `kept` (what an older arrival queues behind;
    /// 0 while none was: the ring starts zeroed, so `push` reads it from the slot it reuses).
    dropped_end: f64,
}

impl Queue {
    fn new(service: f64) -> Self {
        Queue {
            service,
            free: 0.0,
            last: 0.0,
            made: 0,
            kept: Box::new([(0.0, 0.0); KEPT]),
            dropped_end: 0.0,
        }
    }

    /// A line arriving at `t`; returns when its service starts, delayed by what it adds to the
    /// requests it overtook (`insert_late`): its wait is the return value minus `t`.
    #[inline(always)]
    fn occupy(&mut self, t: f64) -> f64 {
        if t < self.last {
            return self.insert_late(t);
        }
        let start = later(t, self.free);
        self.free = start + self.service;
        self.last = t;
        self.push((t, self.free));
        start
    }

    /// Appends a reservation in the slot of the oldest kept one (the one `KEPT` places back).
    #[inline(always)]
    fn push(&mut self, r: (f64, f64)) {
        let slot = &mut self.kept[self.made % KEPT];
        self.dropped_end = slot.1;
        *slot = r;
        self.made += 1;
    }

    /// `occupy` for an arrival earlier than the latest one: placed after the kept reservations
    /// that arrived before it or with it (FIFO among equal times), the later ones pushed back.
    /// Returns its start plus the delay it added to them.
    #[cold]
    fn insert_late(&mut self, t: f64) -> f64 {
        let first = self.made.saturating_sub(KEPT);
        // The first kept reservation that arrived after `t` (there is one: the latest did).
        let mut k = self.made;
        while k > first && self.kept[(k - 1) % KEPT].0 > t {
            k -= 1;
        }
        let before = if k > first {
            self.kept[(k - 1) % KEPT].1
        } else {
            self.dropped_end
        };
        let start = later(t, before);
        let mut end = start + self.service;
        let mut pushed = 0.0;
        let mut moving = (t, end);
        for j in k..self.made {
            let mut r = self.kept[j % KEPT];
            let new_end = later(r.0, end) + self.service;
            pushed += new_end - r.1;
            r.1 = new_end;
            end = new_end;
            self.kept[j % KEPT] = moving;
            moving = r;
        }
        // `moving` is now the latest reservation, one place up.
        self.push(moving);
        self.free = end;
        start + pushed
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
    #[inline(always)]
    pub fn occupy_mc(&mut self, t: f64, j: usize) -> f64 {
        let start = self.mcs[j].occupy(t);
        self.mc_lines[j] += 1;
        let w = start - t;
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
            let start = self.links[l].occupy(arrive);
            wait += start - arrive;
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

    /// Start of each request of a FIFO served in arrival order (ties in the given order).
    fn fifo(arrivals: &[f64], service: f64) -> Vec<f64> {
        let mut order: Vec<usize> = (0..arrivals.len()).collect();
        order.sort_by(|&a, &b| arrivals[a].total_cmp(&arrivals[b]));
        let mut starts = vec![0.0; arrivals.len()];
        let mut free: f64 = 0.0;
        for i in order {
            starts[i] = arrivals[i].max(free);
            free = starts[i] + service;
        }
        starts
    }

    fn xorshift(x: &mut u64) -> u64 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }

    #[test]
    fn issue4_queue_in_time_order_is_a_fifo() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut t = 0.0;
        let arrivals: Vec<f64> = (0..5_000)
            .map(|_| {
                // Bursts and gaps: equal times, sub-service gaps and idle periods.
                t += [0.0, 0.3, 2.0, 40.0][(xorshift(&mut x) % 4) as usize];
                t
            })
            .collect();
        let mut q = Queue::new(5.0);
        let starts: Vec<f64> = arrivals.iter().map(|&a| q.occupy(a)).collect();
        assert_eq!(starts, fifo(&arrivals, 5.0));
        assert_eq!(q.free, starts[starts.len() - 1] + 5.0);
    }

    #[test]
    fn issue4_queue_out_of_order_keeps_the_fifo_total_wait_and_capacity() {
        // Requests simulated up to 30 ns out of time order (a 20 ns quantum and some), at
        // several loads: the total wait and the time the queue is free again are those of the
        // FIFO in time order, whatever order the requests came in.
        for gap in [0.5, 2.0, 6.0] {
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            let arrivals: Vec<f64> = (0..20_000)
                .map(|i| i as f64 * gap + (xorshift(&mut x) % 3000) as f64 / 100.0)
                .collect();
            let mut q = Queue::new(5.0);
            let waits: f64 = arrivals.iter().map(|&a| q.occupy(a) - a).sum();
            let starts = fifo(&arrivals, 5.0);
            let want: f64 = starts.iter().zip(&arrivals).map(|(s, a)| s - a).sum();
            let end = starts.iter().fold(0.0f64, |m, &s| m.max(s)) + 5.0;
            assert!(
                (waits - want).abs() <= 1e-6 * want.max(1.0),
                "gap {gap}: total wait {waits} against the FIFO's {want}"
            );
            assert!(
                (q.free - end).abs() < 1e-6,
                "gap {gap}: free {} against {end}",
                q.free
            );
        }
    }

    #[test]
    fn issue4_queue_arrivals_older_than_its_window_queue_conservatively() {
        // Arrivals up to 5 µs out of order at one per ns with a 1.08 ns service (laso-hpl's
        // controller, saturated): many land before every kept reservation and queue behind the
        // newest one dropped. Nothing is lost: the queue is never free earlier, nor is the total
        // wait smaller, than the time-ordered FIFO's.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let arrivals: Vec<f64> = (0..30_000)
            .map(|i| f64::from(i) + (xorshift(&mut x) % 5000) as f64)
            .collect();
        let mut q = Queue::new(1.08);
        let waits: f64 = arrivals.iter().map(|&a| q.occupy(a) - a).sum();
        let starts = fifo(&arrivals, 1.08);
        let want: f64 = starts.iter().zip(&arrivals).map(|(s, a)| s - a).sum();
        let end = starts.iter().fold(0.0f64, |m, &s| m.max(s)) + 1.08;
        assert!(
            waits >= want * (1.0 - 1e-9),
            "total wait {waits} below the FIFO's {want}"
        );
        assert!(
            q.free >= end - 1e-6,
            "free at {} before the FIFO's {end}",
            q.free
        );
        // The kept reservations are in arrival order.
        let first = q.made.saturating_sub(KEPT);
        for k in first + 1..q.made {
            assert!(
                q.kept[(k - 1) % KEPT].0 <= q.kept[k % KEPT].0,
                "out of order at {k}"
            );
        }
    }

    #[test]
    fn issue4_a_request_ahead_of_the_others_does_not_make_them_queue() {
        // One request arrives 1 µs ahead (it follows a page fault); requests of other PUs then
        // arrive every 10 ns before it, each served in 5 ns: none waits. The former queue took
        // each as arriving with the latest one and queued them behind each other (0, 5, 10, ...).
        let mut q = Queue::new(5.0);
        assert_eq!(q.occupy(1000.0), 1000.0);
        for i in 0..50 {
            let t = f64::from(i) * 10.0;
            assert_eq!(q.occupy(t), t, "request at {t}");
        }
        // Those that overlap it push it back, and are charged that: here only its service at
        // 990 ns ends at 995, before 1000, so nothing moves; one at 998 delays it by 3 ns.
        assert_eq!(q.occupy(998.0), 998.0 + 3.0);
        assert_eq!(q.free, 1008.0);
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
