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
//! Queues are FIFO servers kept in time order: requests reach them out of time order (hardware
//! threads are simulated up to the scheduler's quantum apart, a dependent load is issued when the
//! one before it completes, a request after a first-touch fault comes a microsecond after its
//! thread's clock), so each queue keeps its recent busy intervals and a request takes the first
//! idle time at or after its own arrival, moving later the intervals it runs into, as a FIFO fed
//! in time order would (`Queue`). The queue totals are then the time-ordered FIFO's.
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
/// call on the memory path. Equal to `f64::max` for every pair without a
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

/// Busy intervals a queue remembers before its latest one (`Queue::older`) at first. A full
/// history forgets its oldest interval only when that one ended more than `Queue::reach2`
/// (twice the furthest any line has yet arrived before the latest interval's start) before the
/// newest arrival; otherwise it grows, up to `MAX_HISTORY`. So a queue fed in time order
/// keeps 64 intervals (a small ring, written as it turns), and one fed far out of order keeps
/// what its late lines need. A request older than the oldest one kept is taken at the forgotten
/// history's end (`Queue::floor`) and counted (`Report::queue_past_history`). A fixed 64
/// intervals would be too few where PUs run far apart on busy links (crates/sim/README.md,
/// "Queues").
const HISTORY: usize = 64;

/// The most busy intervals a queue remembers (1 MiB of them per queue).
const MAX_HISTORY: usize = 1 << 16;

/// One queue of the fabric (a memory controller or a directed link): the time to serve a line and
/// the intervals it is busy. Requests reach a queue out of time order (hardware threads are
/// simulated up to a quantum apart, a dependent load is issued when the load before it completes,
/// and a request after a first-touch fault arrives a microsecond after its thread's clock), so the
/// queue keeps the busy intervals of a FIFO server with every arrival so far, whatever order they
/// were simulated in: a line arriving at `t` starts when the server is first idle at or after
/// `t`, and the intervals after it move later by the time it takes, as they would have in time
/// order. With equal service times the busy intervals, and the sum of the waits, depend only on
/// the arrival times (Σ starts − Σ arrivals), so the queue totals are the time-ordered FIFO's;
/// the requests simulated before it and now moved later cannot be given their delay (their
/// latencies were returned), so it is added to the totals only (`Occupied::pushed`). Serving a
/// request after every request simulated before it would bunch the arrivals behind requests
/// that ran ahead, and the queue totals would carry it (crates/sim/README.md, "Queues").
#[derive(Debug, Clone)]
struct Queue {
    service: f64,
    /// The latest busy interval `[start, end)`, where nearly every line goes: kept out of `older`
    /// so that a line in time order touches two fields only. Empty (`start == end`) at first.
    last: (f64, f64),
    /// Requests from before this time are taken at it: the history before it is forgotten.
    floor: f64,
    /// The busy intervals before `last`, oldest first: sorted and disjoint (touching ones merge),
    /// each a whole number of service times long.
    older: History,
    /// Lines that arrived before `floor` (taken at it: a wait the time-ordered FIFO may not
    /// have had); `Fabric::past_history` sums them for the report.
    past_history: u64,
    /// Twice the furthest a line has yet arrived before the latest busy interval's start, ns:
    /// the history keeps the intervals that end within this of the newest arrival.
    reach2: f64,
}

/// What one line's passage through a queue did.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Occupied {
    /// When it arrived (its time, or `Queue::floor` when older than the history kept).
    arrival: f64,
    /// When its service started: its wait is `start - arrival`.
    start: f64,
    /// The delay it added to lines simulated before it that arrived after it, summed, ns.
    pushed: f64,
}

impl Queue {
    fn new(service: f64) -> Self {
        Queue {
            service,
            last: (0.0, 0.0),
            floor: 0.0,
            older: History::default(),
            past_history: 0,
            reach2: 0.0,
        }
    }

    /// Intervals ending before this may be forgotten when the history is full (`History`).
    #[inline(always)]
    fn keep_after(&self, newest: f64) -> f64 {
        newest - self.reach2
    }

    /// A line arriving at `t`.
    #[inline(always)]
    fn occupy(&mut self, t: f64) -> Occupied {
        match self.occupy_in_order(t) {
            Some(start) => Occupied {
                arrival: t,
                start,
                pushed: 0.0,
            },
            None => self.occupy_earlier(t),
        }
    }

    /// `occupy` for a line at or after the latest busy interval's start (the common case, in
    /// time order), which pushes no line later and arrives at `t`: its start. None, having
    /// changed nothing, for a line before it (`occupy_earlier`).
    #[inline(always)]
    fn occupy_in_order(&mut self, t: f64) -> Option<f64> {
        let (a, b) = self.last;
        if t < a {
            return None;
        }
        // Behind the latest interval's lines, or alone after it. (`floor` is before `a`:
        // nothing to clamp.)
        let start = if t > b {
            let keep = self.keep_after(t);
            self.floor = later(self.floor, self.older.push(self.last, keep));
            self.last.0 = t;
            t
        } else {
            b
        };
        self.last.1 = start + self.service;
        Some(start)
    }

    /// `occupy` for a line arriving before the latest busy interval's start.
    #[inline(never)]
    fn occupy_earlier(&mut self, t: f64) -> Occupied {
        let s = self.service;
        let (a, b) = self.last;
        self.reach2 = later(self.reach2, 2.0 * (a - t));
        let keep = self.keep_after(a);
        let n = self.older.len;
        let before = if n > 0 {
            self.older.get(n - 1)
        } else {
            (self.floor, self.floor)
        };
        if t >= before.1 && t >= self.floor {
            // The commonest late line: in the idle time just before the latest interval.
            let joins_left = n > 0 && t == before.1;
            if t + s < a {
                if joins_left {
                    self.older.set(n - 1, (before.0, t + s));
                } else {
                    self.floor = later(self.floor, self.older.push((t, t + s), keep));
                }
                return Occupied {
                    arrival: t,
                    start: t,
                    pushed: 0.0,
                };
            }
            // It reaches the latest interval, whose lines all arrived after it: they move later.
            let overlap = t + s - a;
            let pushed = lines(b - a, s) * overlap;
            self.last = (t, b + overlap);
            if joins_left {
                self.last.0 = before.0;
                self.older.pop();
            }
            return Occupied {
                arrival: t,
                start: t,
                pushed,
            };
        }
        // All intervals in `older` while this runs; the latest goes back to `last` at the end.
        self.floor = later(self.floor, self.older.push(self.last, keep));
        self.past_history += u64::from(t < self.floor);
        let t = later(t, self.floor);
        let o = self.insert(t, keep);
        self.last = self.older.pop();
        o
    }

    /// Serves a line arriving at `t`, before the start of `older`'s last interval.
    fn insert(&mut self, t: f64, keep: f64) -> Occupied {
        let s = self.service;
        let busy = &mut self.older;
        let mut pushed = 0.0;
        // `older` holds the latest interval (`occupy_earlier` put it there), and `t` was before
        // its start unless `floor` moved `t` up to it.
        let n = busy.len;
        debug_assert!(n > 0, "insert without the latest interval");
        if busy.get(n - 1).0 <= t {
            // The history was forgotten up to the latest interval's start: behind its lines.
            let (a, b) = busy.get(n - 1);
            busy.set(n - 1, (a, b + s));
            return Occupied {
                arrival: t,
                start: b,
                pushed,
            };
        }
        // The first interval ending after `t` (the last one does: it starts after `t`).
        let mut i = busy.len - 1;
        while i > 0 && busy.get(i - 1).1 > t {
            i -= 1;
        }
        let (a, b) = busy.get(i);
        let start;
        if t < a {
            // The server is idle at `t`: served at once, ahead of the interval's lines.
            start = t;
            if t + s <= a {
                let joins_left = i > 0 && busy.get(i - 1).1 == t;
                let joins_right = t + s == a;
                match (joins_left, joins_right) {
                    (true, true) => {
                        busy.set(i - 1, (busy.get(i - 1).0, b));
                        busy.remove(i);
                    }
                    (true, false) => busy.set(i - 1, (busy.get(i - 1).0, t + s)),
                    (false, true) => busy.set(i, (t, b)),
                    (false, false) => {
                        self.floor = later(self.floor, busy.insert(i, (t, t + s), keep));
                    }
                }
                return Occupied {
                    arrival: t,
                    start,
                    pushed,
                };
            }
            // Its service runs into the interval, whose lines all arrived after it (the server
            // was idle before `a`): they move later by the overlap.
            let overlap = t + s - a;
            pushed += lines(b - a, s) * overlap;
            busy.set(i, (t, b + overlap));
            if i > 0 && busy.get(i - 1).1 == t {
                busy.set(i - 1, (busy.get(i - 1).0, b + overlap));
                busy.remove(i);
                i -= 1;
            }
        } else {
            // Inside a busy interval: after its lines (the lines of it that arrived after `t`
            // would wait for it in time order instead; the sum of the waits is the same).
            start = b;
            busy.set(i, (a, b + s));
        }
        // The intervals the longer one now reaches move later too, and merge into it.
        while i + 1 < busy.len {
            let (a1, end) = busy.get(i);
            let (a2, b2) = busy.get(i + 1);
            if a2 > end {
                break;
            }
            let overlap = end - a2;
            pushed += lines(b2 - a2, s) * overlap;
            busy.set(i, (a1, b2 + overlap));
            busy.remove(i + 1);
        }
        Occupied {
            arrival: t,
            start,
            pushed,
        }
    }
}

/// A queue's busy intervals before its latest one, oldest first, in a ring of `HISTORY` at first
/// (a power of two, doubled when it must grow). It starts full of empty intervals at time 0
/// (which no line can be before, and whose lines number 0), so that adding the newest is one
/// write that forgets the oldest; merges leave it shorter until new intervals fill it again.
#[derive(Debug, Clone)]
struct History {
    ring: Vec<(f64, f64)>,
    /// Where the oldest is.
    head: usize,
    /// Intervals held, at most `ring.len()`.
    len: usize,
}

impl Default for History {
    fn default() -> Self {
        History {
            ring: vec![(0.0, 0.0); HISTORY],
            head: 0,
            len: HISTORY,
        }
    }
}

impl History {
    fn slot(&self, i: usize) -> usize {
        (self.head + i) & (self.ring.len() - 1)
    }

    /// The `i`-th interval, oldest first (`i < len`).
    fn get(&self, i: usize) -> (f64, f64) {
        self.ring[self.slot(i)]
    }

    fn set(&mut self, i: usize, v: (f64, f64)) {
        let k = self.slot(i);
        self.ring[k] = v;
    }

    /// Whether a full history makes room by forgetting its oldest interval (it ended before
    /// `keep`, or the history is as long as it gets) rather than by growing.
    #[inline(always)]
    fn forgets(&self, keep: f64) -> bool {
        self.ring[self.head].1 < keep || self.ring.len() == MAX_HISTORY
    }

    /// Twice the room, the intervals in order from slot 0.
    #[inline(never)]
    fn grow(&mut self) {
        let mut ring = Vec::with_capacity(2 * self.ring.len());
        ring.extend((0..self.len).map(|i| self.get(i)));
        ring.resize(2 * self.ring.len(), (0.0, 0.0));
        self.ring = ring;
        self.head = 0;
    }

    /// Adds the newest interval; when full, the oldest is forgotten if it ended before `keep`
    /// (`forgets`), else the history grows. Returns the end of the interval forgotten (0 when
    /// none), which the queue's `floor` moves to.
    #[inline(always)]
    fn push(&mut self, v: (f64, f64), keep: f64) -> f64 {
        let cap = self.ring.len();
        if self.len == cap {
            // The common case once full: the oldest is read once and overwritten in place.
            let k = self.head;
            if let Some(slot) = self.ring.get_mut(k) {
                let gone = slot.1;
                if gone < keep || cap == MAX_HISTORY {
                    *slot = v;
                    self.head = (k + 1) & (cap - 1);
                    return gone;
                }
            }
            self.grow();
        }
        let k = self.slot(self.len);
        self.ring[k] = v;
        self.len += 1;
        0.0
    }

    /// Takes the newest interval off (`len > 0`).
    fn pop(&mut self) -> (f64, f64) {
        self.len -= 1;
        self.get(self.len)
    }

    /// Puts `v` at position `i`, moving the later ones up; when full, the oldest is forgotten
    /// first (or `v` itself, when it would be the oldest), or the history grows (as `push`).
    /// Returns the end of the interval forgotten (0 when none).
    fn insert(&mut self, i: usize, v: (f64, f64), keep: f64) -> f64 {
        let mut i = i;
        let mut gone = 0.0;
        if self.len == self.ring.len() && !self.forgets(keep) {
            self.grow();
        }
        if self.len == self.ring.len() {
            if i == 0 {
                return v.1;
            }
            gone = self.ring[self.head].1;
            self.head = (self.head + 1) & (self.ring.len() - 1);
            self.len -= 1;
            i -= 1;
        }
        let mut k = self.len;
        while k > i {
            let prev = self.get(k - 1);
            self.set(k, prev);
            k -= 1;
        }
        self.set(i, v);
        self.len += 1;
        gone
    }

    /// Removes the `i`-th interval, moving the later ones down.
    fn remove(&mut self, i: usize) {
        for k in i..self.len - 1 {
            let next = self.get(k + 1);
            self.set(k, next);
        }
        self.len -= 1;
    }
}

/// Lines in a busy interval `len` ns long at `service` ns each (a whole number).
fn lines(len: f64, service: f64) -> f64 {
    (len / service).round()
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
        self.read_inlined(t, i, j)
    }

    /// `read`, inlined where it is called: the private-line fast path's (compiled there for
    /// the host's vector width, `Simulator::fast_accesses_on_host`).
    #[inline(always)]
    pub(crate) fn read_inlined(&mut self, t: f64, i: usize, j: usize) -> f64 {
        let wait = self.occupy_mc(t, j);
        wait + self.occupy_route(t + wait, j, i) + self.lat[i * self.n + j]
    }

    /// Lines that reached a controller or link earlier than the busy intervals it remembers
    /// (`HISTORY`) and were taken at the end of the forgotten ones: 0 when every queue was
    /// the time-ordered FIFO.
    pub fn past_history(&self) -> u64 {
        self.mcs
            .iter()
            .chain(&self.links)
            .map(|q| q.past_history)
            .sum()
    }

    /// Occupies controller `j` for one line from `t`; returns the wait.
    ///
    /// In time order (`Queue::occupy_in_order`) a line pushes none later, and the total takes
    /// its wait alone, as `wait + 0.0` is: the general case (`mc`) is out of line, so that the
    /// common one returns its start in a register rather than an `Occupied` through memory
    /// Likewise `occupy_route`.
    #[inline]
    pub fn occupy_mc(&mut self, t: f64, j: usize) -> f64 {
        match self.mcs[j].occupy_in_order(t) {
            Some(start) => {
                self.mc_lines[j] += 1;
                let wait = start - t;
                self.mc_wait_ns += wait;
                wait
            }
            None => self.occupy_mc_earlier(t, j),
        }
    }

    /// `occupy_mc` for a line before the controller's latest busy interval.
    #[inline(never)]
    fn occupy_mc_earlier(&mut self, t: f64, j: usize) -> f64 {
        let (wait, pushed) = self.mc(t, j);
        self.mc_wait_ns += wait + pushed;
        wait
    }

    /// Occupies the links from node `from` to node `to` for one line from `t`; returns the waits.
    #[inline(always)]
    pub fn occupy_route(&mut self, t: f64, from: usize, to: usize) -> f64 {
        let route = &self.routes[to * self.n + from];
        let mut arrive = t;
        let mut wait = 0.0;
        for (k, &l) in route.iter().enumerate() {
            let Some(start) = self.links[usize::from(l)].occupy_in_order(arrive) else {
                return self.occupy_route_earlier(from, to, k, arrive, wait);
            };
            wait += start - arrive;
            arrive = start;
        }
        self.link_bytes += LINE as u64 * route.len() as u64;
        self.link_wait_ns += wait;
        wait
    }

    /// `occupy_route` from its `k`-th link on, which a line reaches at `arrive` before its latest
    /// busy interval, after `wait` on the links before.
    #[inline(never)]
    fn occupy_route_earlier(
        &mut self,
        from: usize,
        to: usize,
        k: usize,
        arrive: f64,
        wait: f64,
    ) -> f64 {
        self.link_bytes += LINE as u64 * k as u64;
        let (wait, pushed) = self.route_on(to * self.n + from, k, arrive, wait, 0.0);
        self.link_wait_ns += wait + pushed;
        wait
    }

    /// A dirty line written back from cpu node `from` to memory node `home` at `t`: it occupies
    /// the links and the controller (lines behind it wait), but nobody waits for it, so its own
    /// waits are not counted as queueing; the delay it adds to lines simulated before it is.
    pub fn writeback(&mut self, t: f64, from: usize, home: usize) {
        let (_, pushed_links) = self.route(t, from, home);
        let (_, pushed_mc) = self.mc(t, home);
        self.link_wait_ns += pushed_links;
        self.mc_wait_ns += pushed_mc;
    }

    /// One line through controller `j` from `t`: its wait and the delay it added to others.
    #[inline(always)]
    fn mc(&mut self, t: f64, j: usize) -> (f64, f64) {
        let o = self.mcs[j].occupy(t);
        self.mc_lines[j] += 1;
        (o.start - o.arrival, o.pushed)
    }

    /// One line over the links from `from` to `to` from `t`: its waits and the delay it added to
    /// others.
    #[inline(always)]
    fn route(&mut self, t: f64, from: usize, to: usize) -> (f64, f64) {
        self.route_on(to * self.n + from, 0, t, 0.0, 0.0)
    }

    /// `route` over the links of route `r` from its `k`-th on, reached at `arrive` with `wait`
    /// and `pushed` so far.
    #[inline(always)]
    fn route_on(&mut self, r: usize, k: usize, arrive: f64, wait: f64, pushed: f64) -> (f64, f64) {
        let (mut arrive, mut wait, mut pushed) = (arrive, wait, pushed);
        for &l in self.routes[r].iter().skip(k) {
            let o = self.links[usize::from(l)].occupy(arrive);
            wait += o.start - o.arrival;
            pushed += o.pushed;
            self.link_bytes += LINE as u64;
            arrive = o.start;
        }
        (wait, pushed)
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

    /// A xorshift stream for the queue tests.
    fn xorshift(x: &mut u64) -> u64 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }

    /// Shuffles `v` within windows of 13 (Fisher-Yates in each): every element ends up at most
    /// 12 places from where it was, as requests simulated out of time order by a bounded skew.
    fn shuffle_in_windows(v: &mut [f64], x: &mut u64) {
        for w in v.chunks_mut(13) {
            for i in (1..w.len()).rev() {
                let j = (xorshift(x) % (i as u64 + 1)) as usize;
                w.swap(i, j);
            }
        }
    }

    /// The busy intervals and the total wait of a FIFO server fed `arrivals` in time order.
    fn fifo_in_time_order(arrivals: &[f64], service: f64) -> (Vec<(f64, f64)>, f64) {
        let mut sorted = arrivals.to_vec();
        sorted.sort_by(f64::total_cmp);
        let mut busy: Vec<(f64, f64)> = Vec::new();
        let mut wait = 0.0;
        for t in sorted {
            match busy.last_mut() {
                Some(last) if t <= last.1 => {
                    wait += last.1 - t;
                    last.1 += service;
                }
                _ => busy.push((t, t + service)),
            }
        }
        (busy, wait)
    }

    /// The queue's intervals, oldest first, its latest included (empty ones left out).
    fn intervals(q: &Queue) -> Vec<(f64, f64)> {
        let mut v: Vec<(f64, f64)> = (0..q.older.len).map(|i| q.older.get(i)).collect();
        v.push(q.last);
        v.retain(|&(a, b)| b > a);
        v
    }

    #[test]
    fn queue_in_time_order_is_a_fifo() {
        // Sorted arrivals: each line starts at max(its time, the previous one's end), as the
        // queue did before lines could arrive out of order.
        let mut x = 7u64;
        let mut q = Queue::new(1.0);
        let (mut free, mut t) = (0.0f64, 0.0f64);
        for _ in 0..10_000 {
            t += (xorshift(&mut x) % 24) as f64 * 0.125;
            let o = q.occupy(t);
            assert_eq!(o.arrival, t);
            assert_eq!(o.start, t.max(free));
            assert_eq!(o.pushed, 0.0);
            free = o.start + 1.0;
        }
    }

    #[test]
    fn queue_out_of_order_gives_the_time_ordered_fifo() {
        // Arrivals simulated out of time order (each up to 12 places late; the times are
        // multiples of 1/8 ns, so every sum is exact): the busy intervals are the time-ordered
        // FIFO's, and the waits plus the delays pushed onto lines simulated earlier sum to its
        // total wait, at light, full and overloaded rates.
        for (seed, gap) in [(1u64, 40u64), (2, 16), (3, 8), (4, 3)] {
            let mut x = seed;
            let mut times = Vec::new();
            let mut t = 0.0;
            for _ in 0..5_000 {
                t += (xorshift(&mut x) % gap) as f64 * 0.125;
                times.push(t);
            }
            shuffle_in_windows(&mut times, &mut x);
            let mut q = Queue::new(1.0);
            let mut total = 0.0;
            let mut late = 0;
            for &t in &times {
                let o = q.occupy(t);
                assert_eq!(o.arrival, t, "no arrival is older than the history kept");
                assert!(o.start >= t);
                total += o.start - o.arrival + o.pushed;
                late += usize::from(o.pushed > 0.0);
            }
            let (busy, wait) = fifo_in_time_order(&times, 1.0);
            let mine = intervals(&q);
            assert_eq!(mine[..], busy[busy.len() - mine.len()..], "gap {gap}");
            assert_eq!(total, wait, "gap {gap}");
            if gap >= 16 {
                assert!(
                    late > 0,
                    "gap {gap}: some late line ran into lines simulated before it"
                );
            }
        }
    }

    #[test]
    fn queue_gives_the_md1_wait_whatever_the_order() {
        // Poisson arrivals at one service time per line (M/D/1): the mean wait is ρ / (2 (1 - ρ))
        // service times (Pollaczek-Khinchine). Fed in time order and scrambled within 12 places,
        // the queue's total (waits plus the delays pushed onto lines simulated earlier) gives it.
        for (rho, seed) in [(0.5f64, 11u64), (0.8, 12)] {
            let mut x = seed;
            let mut t = 0.0;
            let mut times = Vec::new();
            for _ in 0..200_000 {
                let u = ((xorshift(&mut x) >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
                t += -u.ln() / rho;
                times.push(t);
            }
            let expected = rho / (2.0 * (1.0 - rho));
            let mean_wait = |times: &[f64]| {
                let mut q = Queue::new(1.0);
                let total: f64 = times
                    .iter()
                    .map(|&t| {
                        let o = q.occupy(t);
                        o.start - o.arrival + o.pushed
                    })
                    .sum();
                total / times.len() as f64
            };
            let in_order = mean_wait(&times);
            shuffle_in_windows(&mut times, &mut x);
            let scrambled = mean_wait(&times);
            println!(
                "ρ {rho}: M/D/1 {expected:.3}, in order {in_order:.3}, scrambled {scrambled:.3}"
            );
            assert!(
                (in_order / expected - 1.0).abs() < 0.05,
                "ρ {rho}: {in_order}"
            );
            // The same total up to rounding (these times are not on a binary grid).
            assert!(
                (scrambled / in_order - 1.0).abs() < 1e-6,
                "ρ {rho}: {scrambled} vs {in_order}"
            );
        }
    }

    #[test]
    fn a_late_line_takes_the_idle_time_at_its_arrival() {
        // One line simulated 100 ns ahead, then one at 0: the one at 0 finds the queue idle
        // (the old queue took it at the latest arrival, 100 ns, as if it had come then).
        let mut q = Queue::new(5.0);
        assert_eq!(q.occupy(100.0).start, 100.0);
        let o = q.occupy(0.0);
        assert_eq!((o.arrival, o.start, o.pushed), (0.0, 0.0, 0.0));
        // One at 97 overlaps the line at 100 by 2 ns: it goes first, and that line is 2 ns late.
        let o = q.occupy(97.0);
        assert_eq!((o.start, o.pushed), (97.0, 2.0));
        assert_eq!(intervals(&q), vec![(0.0, 5.0), (97.0, 107.0)]);
        // One inside the busy interval starts after it.
        let o = q.occupy(99.0);
        assert_eq!((o.start, o.pushed), (107.0, 0.0));
    }

    #[test]
    fn a_line_older_than_the_history_arrives_at_its_end() {
        // HISTORY + 2 separate lines, 10 ns apart, in time order: the history keeps HISTORY
        // intervals before the latest (nothing came late: it does not grow), so the first, [0, 1),
        // is forgotten. A line from 0.5 is taken at 1, the forgotten history's end, counted, and
        // waits for nothing known there; the history now keeps the intervals it would otherwise
        // forget to make room for the latest one (it grows).
        let mut q = Queue::new(1.0);
        for i in 0..=HISTORY + 1 {
            q.occupy(10.0 * i as f64);
        }
        assert_eq!(q.floor, 1.0);
        assert_eq!(q.past_history, 0);
        let o = q.occupy(0.5);
        assert_eq!((o.arrival, o.start, o.pushed), (1.0, 1.0, 0.0));
        assert_eq!(q.past_history, 1, "counted for the report");
        assert_eq!((q.floor, q.older.ring.len()), (1.0, 2 * HISTORY));
        // Lines in time order after it are served as before.
        let latest = 10.0 * (HISTORY + 1) as f64;
        assert_eq!(q.occupy(latest + 0.5).start, latest + 1.0);
    }

    /// A queue that has seen a line come late keeps the busy intervals within twice that of its
    /// newest arrival (growing past `HISTORY`): a later line as late finds its place, where a
    /// fixed 64 intervals would have forgotten it and taken it at their end. Fed in time
    /// order, a queue stays at `HISTORY`.
    #[test]
    fn a_queue_remembers_as_far_back_as_its_lines_come() {
        let mut q = Queue::new(1.0);
        for i in 0..10 * HISTORY {
            q.occupy(10.0 * i as f64);
        }
        assert_eq!(q.older.ring.len(), HISTORY, "in time order");
        // One line 2,000 ns (200 intervals) before the latest start: its reach.
        let latest = 10.0 * (10 * HISTORY - 1) as f64;
        let o = q.occupy(latest - 1_995.0);
        assert_eq!(q.past_history, 1, "beyond the 64 intervals kept so far");
        assert!(
            o.arrival > latest - 1_995.0,
            "taken at the forgotten history's end"
        );
        // 1,000 more in time order, then lines up to 4,000 ns late: each is served at its
        // arrival, in the idle time it finds, and none is counted.
        let base = latest + 10.0;
        for i in 0..1_000 {
            q.occupy(base + 10.0 * i as f64);
        }
        let newest = base + 10.0 * 999.0;
        for back in [3_995.0, 2_505.0, 1_005.0] {
            let o = q.occupy(newest - back);
            assert_eq!((o.start, o.pushed), (newest - back, 0.0), "{back}");
        }
        assert_eq!(q.past_history, 1);
        assert!(q.older.ring.len() > HISTORY && q.older.ring.len() <= 1024);
    }

    #[test]
    fn later_equals_f64_max_on_times() {
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
        let mut rng = numaff_machine::rng::SplitMix64::new(0);
        for _ in 0..2_000 {
            let x = rng.next_u64();
            vals.push((x >> 11) as f64 * 1e-6);
        }
        for &a in &vals {
            for &b in vals.iter().take(200) {
                assert_eq!(later(a, b).to_bits(), a.max(b).to_bits(), "{a} {b}");
                assert_eq!(later(b, a).to_bits(), b.max(a).to_bits(), "{b} {a}");
            }
        }
    }

    /// `read` through the queues' in-order step (`occupy_in_order`, the general case out of
    /// line) against the same read through `mc` and `route`, every queue's general step: the
    /// same latency, totals and queue states bit for bit, for reads from and to every node of
    /// laso-hpl's ring (0, 1 and 2 links), mostly in time order, some late by up to 2 us (each
    /// of the out-of-line cases: a late controller, a late first or second link).
    #[test]
    fn in_order_reads_equal_the_general_queue_step() {
        let m = numaff_machine::catalog::load("laso-hpl").unwrap();
        let mut a = Fabric::new(&m);
        let mut b = a.clone();
        let general = |f: &mut Fabric, t: f64, i: usize, j: usize| {
            let (wait, pushed) = f.mc(t, j);
            f.mc_wait_ns += wait + pushed;
            let (waits, pushed) = f.route(t + wait, j, i);
            f.link_wait_ns += waits + pushed;
            wait + waits + f.lat[i * f.n + j]
        };
        let mut rng = numaff_machine::rng::SplitMix64::new(0);
        let mut t = 0.0;
        for step in 0..50_000 {
            let x = rng.next_u64();
            t += (x % 8) as f64;
            let at = if x >> 20 & 15 == 0 {
                t - ((x >> 24) % 2_000) as f64
            } else {
                t
            };
            let (i, j) = ((x >> 40) as usize % 4, (x >> 44) as usize % 4);
            let got = a.read(at, i, j);
            assert_eq!(
                got.to_bits(),
                general(&mut b, at, i, j).to_bits(),
                "read {step}"
            );
            if x >> 50 & 7 == 0 {
                a.writeback(at, i, j);
                b.writeback(at, i, j);
            }
        }
        assert_eq!(a.mc_wait_ns.to_bits(), b.mc_wait_ns.to_bits());
        assert_eq!(a.link_wait_ns.to_bits(), b.link_wait_ns.to_bits());
        assert_eq!((a.link_bytes, &a.mc_lines), (b.link_bytes, &b.mc_lines));
        for (qa, qb) in a
            .mcs
            .iter()
            .chain(&a.links)
            .zip(b.mcs.iter().chain(&b.links))
        {
            assert_eq!(intervals(qa), intervals(qb));
        }
        assert!(a.link_wait_ns > 0.0 && a.past_history() == b.past_history());
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
