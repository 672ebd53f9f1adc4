//! The private-line fast path: a thread's run of accesses on a PU whose path has the common shape
//! with `P8W20Geom`, as one compact loop over the parts it borrows once.
//!
//! `run_pu_in` reaches the caches, the page table, the fabric and the statistics through `self`
//! after every call that takes it, so the compiler reloads their addresses and repeats their bounds
//! checks, and the path's code is spread over functions shared with every other case. This loop
//! borrows those parts once and runs the private-line steps over them, which takes markedly less
//! host time on streams of private data. It is entered only while the directory is empty (its
//! lookahead fetches no directory slots, which shared lines need) and towards a far horizon
//! (`MIN_RUN_NS`). It takes the same steps in the same order as `step` with `P8W20Geom` (`access`,
//! `access_beyond_l1_3`, `private_page`, `coherent_private`, `memory`, `fill3`, `private_victim2`,
//! `private_victim3`), so every figure is the general path's, and hands an access back to that code
//! where it needs something the loop does not borrow:
//! - a write to a line the directory holds, or to a page not private to the PU's domain
//!   (`Rest::Coherent`, `Rest::Tail`: before the loop changed anything the general code would not
//!   have);
//! - the steps of an access that involve other processes, other domains, the directory or the
//!   sample list (a victim's directory entry or write-back, a fault sample: `Deferred`), which come
//!   last in the access and are run afterwards in their order (`Rest::Deferred`).
//!
//! It stops, leaving the general loop to go on, at the PU's horizon or slice end, before a
//! non-access op, before an access that takes a hardware sample, and at the end of the ops.
//!
//! The loop is compiled twice: for the target's base instruction set and, on x86_64, with AVX2
//! and BMI2, which it runs where the host has them (checked once per simulator).

use numaff_engine::AccessKind;

use super::*;

/// An access the loop hands back: issued at `t`, its line `key`, its third-level set and page
/// slot as the lookahead left them (`Simulator::cur_llc`, `cur_page`), and what is left to do.
struct Bail {
    a: Access,
    key: u64,
    t: f64,
    base: usize,
    page: usize,
    rest: Rest,
}

/// What is left of a handed-back access.
enum Rest {
    /// A write hitting path level `pos` (0 or 1) whose line is `SHARED` or whose page is not
    /// private to the domain: `coherent` from there.
    Coherent { pos: usize, maybe_private: bool },
    /// The first two levels missed and the third gave `hit3`; the page is not (or not yet) the
    /// domain's, or the line is `SHARED`: `l3_tail` from there.
    Tail { hit3: Option<u8> },
    /// Done but for `steps`, which come last: run them, then the step's end.
    Deferred {
        lat: f64,
        stall: f64,
        steps: [Deferred; 3],
    },
}

/// A step of an access the loop leaves to the general code, in this order after it.
#[derive(Clone, Copy)]
enum Deferred {
    None,
    /// `record_sample` of a first-touch fault at the line's address.
    FaultSample(u64),
    /// `evicted_bit`: a `SHARED` victim of cache `k` (directory bit `b`).
    EvictedBit(usize, usize, u64),
    /// `writeback` of a dirty second-level victim of another process, from node `from`.
    Writeback(u64, usize),
    /// `private_victim3`: a dirty third-level victim of another process or domain.
    Victim3(u64),
}

/// The lookahead of `fast_accesses`: the thread's ring (`Hot::ahead`, ops with their sets and
/// page slots in three arrays) moved into one array of the loop's own while it runs: its
/// accesses, each with its set in the path's third level (`NO_BASE` if not computed) and its
/// page slot, and the op after them if that is not an access (pulling stops there). Given back
/// when the loop stops.
struct Ring {
    accesses: [(Access, usize, usize); LOOKAHEAD],
    head: usize,
    len: usize,
    other: Option<Op>,
}

/// The least time to its PU's horizon for which `run_pu_in` enters the fast path, ns: some 20
/// accesses (the PUs of a multi-threaded run are simulated `SimConfig::quantum_ns` apart, 20 ns,
/// so each runs a few accesses at a time, and those take the general path).
pub(super) const MIN_RUN_NS: f64 = 1_000.0;

/// Accesses the fast path must run before handing back a line or page that is not private for
/// `run_fast` to go on with it.
const FAST_RUN: u64 = 8;

/// No set computed ahead (`Ring`).
const NO_BASE: usize = usize::MAX;

impl Ring {
    /// Takes the ops of `th`'s ring, keeping the sets computed for cache `l3`; None, leaving
    /// them, if an op other than an access comes before the last (the general loop runs it).
    #[inline(always)]
    fn adopt(th: &mut Hot, l3: usize) -> Option<Self> {
        let mut ring = Ring {
            accesses: [(Access::read(0), NO_BASE, NO_PAGE); LOOKAHEAD],
            head: 0,
            len: 0,
            other: None,
        };
        for k in 0..usize::from(th.ahead_len) {
            let i = (usize::from(th.ahead_head) + k) % LOOKAHEAD;
            let Op::Access(a) = th.ahead[i] else {
                if k + 1 < usize::from(th.ahead_len) {
                    return None;
                }
                ring.other = Some(th.ahead[i]);
                break;
            };
            let base = match th.ahead_llc[i] {
                (k, base) if k == l3 => base,
                _ => NO_BASE,
            };
            ring.accesses[k] = (a, base, th.ahead_page[i]);
            ring.len += 1;
        }
        th.ahead_head = 0;
        th.ahead_len = 0;
        Some(ring)
    }

    /// Gives the ops left back to `th`'s ring (empty since `adopt`), in order.
    #[inline(always)]
    fn give_back(&self, th: &mut Hot, l3: usize) {
        for k in 0..self.len {
            let (a, base, page) = self.accesses[(self.head + k) % LOOKAHEAD];
            let llc = if base == NO_BASE { NO_SET } else { (l3, base) };
            th.push_ahead(Op::Access(a), llc, page);
        }
        if let Some(op) = self.other {
            th.push_ahead(op, NO_SET, NO_PAGE);
        }
    }

    /// The next op if it is an access, with its set in `c3` (`NO_BASE` if not computed) and its
    /// page slot (`NO_PAGE`), fetching ahead if `fetch` (the thread missed lately); None for any
    /// other op (kept as `other`) or at the end of the ops.
    /// `next_op`'s lookahead for a run of private lines: the sets and page slots of the coming
    /// accesses fetched while the thread misses (no directory slots or victims: a private line
    /// has no entry).
    #[inline(always)]
    fn next_access(
        &mut self,
        th: &mut Hot,
        fetch: bool,
        c3: &SetAssoc,
        pages: &PageTable,
        asid: u64,
    ) -> Option<(Access, usize, usize)> {
        if self.other.is_none() {
            if !fetch && self.len == 0 {
                // Hitting the first level: straight from the generator, no fetches.
                return match th.pull()? {
                    Op::Access(a) => Some((a, NO_BASE, NO_PAGE)),
                    op => {
                        self.other = Some(op);
                        None
                    }
                };
            }
            while fetch && self.len < LOOKAHEAD {
                let Some(op) = th.pull() else { break };
                let Op::Access(a) = op else {
                    self.other = Some(op);
                    break;
                };
                let base = c3.set_of(asid | ((a.vaddr >> 6) & LINE_MASK));
                c3.prefetch_w20(base);
                let page = pages.prefetch(a.vaddr >> 12).unwrap_or(NO_PAGE);
                self.accesses[(self.head + self.len) % LOOKAHEAD] = (a, base, page);
                self.len += 1;
            }
        }
        if self.len == 0 {
            return None;
        }
        // `head` is below `LOOKAHEAD` (a power of two): the mask spares a bounds check.
        let next = self.accesses[self.head % LOOKAHEAD];
        self.head = (self.head + 1) % LOOKAHEAD;
        self.len -= 1;
        Some(next)
    }
}

/// `write_back_to` (out of line: a dirty victim, one access in seven over 1 GiB).
#[inline(never)]
fn write_back(fabric: &mut Fabric, stats: &mut Stats, t: f64, from: usize, home: u16) {
    stats.writebacks += 1;
    fabric.writeback(t, from, usize::from(home));
}

/// The directory's dirty bit of a line written in a first level whose second level holds it
/// `SHARED` (only while the directory holds lines).
#[cold]
#[inline(never)]
fn mark_dirty<D: Form>(dir: &mut Directory, key: u64) {
    dir.update::<D, _>(key, |e| e.dirty = true);
}

/// Whether the page `vp` (its slot `page` from the lookahead, or `NO_PAGE`) is private to
/// domain `mine` (`Page::sole`), as `private_page` finds a page whose line a cache holds.
#[inline(always)]
fn page_is(pages: &PageTable, page: usize, vp: u64, mine: u16) -> bool {
    slot_ahead(page, pages, vp).and_then(|i| pages.sole_at(i)) == Some(mine)
}

impl Simulator {
    /// Runs thread `ti`'s accesses on PU `cx.p` from `clock` through the fast path while it
    /// applies (see the module's comment); returns the PU's clock, and whether to try the fast
    /// path again on this pick (not once it handed back a write hit or a tail, `Rest`, after
    /// fewer than `FAST_RUN` accesses). Only for `G = P8W20Geom`, a
    /// `cx` of private lines (`Cx::private`) with no armed pages and a common-shape path.
    #[inline(never)]
    pub(super) fn run_fast<D: Form, G: Geom>(
        &mut self,
        ti: usize,
        cx: &Cx,
        mut clock: f64,
        horizon: f64,
        limit: f64,
    ) -> (f64, bool) {
        debug_assert!(G::P8 && G::W20 && cx.private && !cx.armed && cx.p3.is_some());
        loop {
            let (bail, ran) = self.fast_accesses_on_host::<D>(cx, &mut clock, horizon, limit);
            let Some(b) = bail else {
                return (clock, true);
            };
            let shared = !matches!(b.rest, Rest::Deferred { .. });
            clock = self.finish_bail::<D, G>(ti, cx, b);
            if shared && ran < FAST_RUN {
                // Lines or pages not private, soon after each other: the general path for the
                // rest of the pick, without the loop's entries and exits.
                return (clock, false);
            }
        }
    }

    /// `fast_accesses`, compiled for AVX2 where the host has it (`Simulator::fast_avx2`): the
    /// compiler's own use of the wider instructions in the loop, the fabric's read inlined into it,
    /// and the lookups' four-way compares (`cache::Lanes`): a few percent less CPU time than the
    /// base build, most on streams that hit the first level.
    #[inline(always)]
    fn fast_accesses_on_host<D: Form>(
        &mut self,
        cx: &Cx,
        clock: &mut f64,
        horizon: f64,
        limit: f64,
    ) -> (Option<Bail>, u64) {
        #[cfg(target_arch = "x86_64")]
        if let Some(avx2) = self.fast_avx2 {
            // SAFETY: `fast_avx2` is Some only where the host has AVX2, BMI1, BMI2 and POPCNT
            // (`host_has_avx2`).
            return unsafe { self.fast_accesses_avx2::<D>(avx2, cx, clock, horizon, limit) };
        }
        self.fast_accesses_base::<D>(cx, clock, horizon, limit)
    }

    /// `fast_accesses` for any host of the target.
    #[inline(never)]
    fn fast_accesses_base<D: Form>(
        &mut self,
        cx: &Cx,
        clock: &mut f64,
        horizon: f64,
        limit: f64,
    ) -> (Option<Bail>, u64) {
        self.fast_accesses::<D, _>(Base, cx, clock, horizon, limit)
    }

    /// `fast_accesses` compiled with AVX2 (the same code: the figures are the same).
    ///
    /// # Safety
    /// The host must have AVX2, BMI1, BMI2 and POPCNT (`host_has_avx2`).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
    #[inline(never)]
    unsafe fn fast_accesses_avx2<D: Form>(
        &mut self,
        avx2: Avx2,
        cx: &Cx,
        clock: &mut f64,
        horizon: f64,
        limit: f64,
    ) -> (Option<Bail>, u64) {
        self.fast_accesses::<D, _>(avx2, cx, clock, horizon, limit)
    }

    /// The loop of `run_fast` until it stops (None) or hands an access back, with the number of
    /// accesses it ran.
    #[inline(always)]
    fn fast_accesses<D: Form, L: Lanes>(
        &mut self,
        lanes: L,
        cx: &Cx,
        clock: &mut f64,
        horizon: f64,
        limit: f64,
    ) -> (Option<Bail>, u64) {
        let Some(f) = cx.p3 else { return (None, 0) };
        let Simulator {
            caches,
            procs,
            fabric,
            stats,
            run,
            dir,
            mem_nodes,
            machine,
            cfg,
            cycle_ns,
            ..
        } = self;
        let Ok([k1, k2, k3]) = caches.get_disjoint_mut([f.l1, f.l2, f.l3]) else {
            return (None, 0);
        };
        let (node2, node3) = (k2.node, k3.node);
        let (c1, c2, c3) = (&mut k1.cache, &mut k2.cache, &mut k3.cache);
        let Some(pr) = procs.get_mut(cx.pi) else {
            return (None, 0);
        };
        let th: &mut Hot = run;
        let (issue_cycles, cycle_ns, fault_ns) = (cfg.issue_cycles, *cycle_ns, cfg.fault_ns);
        let fault_samples = cfg.first_touch_samples;
        let asid = (cx.pi as u64) << ASID_SHIFT;
        let mine = cx.domain + 1;
        let Some(mut ring) = Ring::adopt(th, f.l3) else {
            return (None, 0);
        };
        // Kept here while the loop runs and written back after it: the clock, the accesses
        // run (an access that takes a hardware sample is the general loop's, `step_end`), and
        // the lookahead's count of accesses left to fetch for (`Hot::l1_misses`).
        let mut now = *clock;
        let sampled = th.sample_countdown != u64::MAX;
        let budget = if sampled {
            th.sample_countdown.saturating_sub(1)
        } else {
            u64::MAX
        };
        let mut ran = 0u64;
        let mut l1_misses = th.l1_misses;
        let bailed = loop {
            if now > horizon || now >= limit || ran == budget {
                break None;
            }
            let fetch = l1_misses > 0;
            l1_misses = l1_misses.saturating_sub(1);
            let Some((a, base, mut page)) = ring.next_access(th, fetch, c3, &pr.pages, asid) else {
                break None;
            };
            let mut base = base;
            let key = asid | ((a.vaddr >> 6) & LINE_MASK);
            let vaddr = (key & LINE_MASK) << 6;
            let vp = vaddr >> 12;
            let t = th.issue(a, now, issue_cycles, cycle_ns);
            stats.accesses += 1;
            stats.probes[0] += 1;
            // `access`, then `access_beyond_l1_3` and the private line's coherence, as labelled
            // blocks: each ends with (latency, stall) or hands the access back.
            let done = 'access: {
                if let Some(st) = c1.touch_p8_on(lanes, key) {
                    stats.hits[0] += 1;
                    let lat = cx.lat3[0];
                    if !a.write | (st == MODIFIED) {
                        break 'access Ok((lat, 0.0));
                    }
                    if st == EXCLUSIVE {
                        // The second level holds the line (it keeps the first inclusive).
                        if c2.write_private_on(lanes, key).is_none_or(|s| s == SHARED) {
                            mark_dirty::<D>(dir, key);
                        }
                        c1.set_state_on(lanes, key, MODIFIED);
                        break 'access Ok((lat, 0.0));
                    }
                    // A read copy (`SHARED` in the first level) written.
                    if !page_is(&pr.pages, page, vp, mine) {
                        break 'access Err(Rest::Coherent {
                            pos: 0,
                            maybe_private: true,
                        });
                    }
                    c2.write_private_on(lanes, key);
                    c1.fill_p8_on(lanes, key, MODIFIED);
                    break 'access Ok((lat, 0.0));
                }
                if base == NO_BASE {
                    // Missed after a run of hits: the fetches the lookahead did not start.
                    base = c3.set_of(key);
                    c3.prefetch_w20(base);
                    page = pr.pages.prefetch(vp).unwrap_or(NO_PAGE);
                }
                l1_misses = 2 * LOOKAHEAD as u8;
                stats.probes[1] += 1;
                if let Some(st2) = c2.touch_p8_cold_on(lanes, key) {
                    stats.hits[1] += 1;
                    if !a.write {
                        c1.fill_absent_p8(key, SHARED);
                        break 'access Ok((cx.lat3[1], 0.0));
                    }
                    if st2 == SHARED || !page_is(&pr.pages, page, vp, mine) {
                        break 'access Err(Rest::Coherent {
                            pos: 1,
                            maybe_private: st2 != SHARED,
                        });
                    }
                    let base2 = c2.set_of(key);
                    c2.written_mru(base2);
                    c1.fill_absent_p8(key, MODIFIED);
                    break 'access Ok((cx.lat3[1], 0.0));
                }
                stats.probes[2] += 1;
                let base3 = base;
                let hit3 = c3.touch_w20_on(lanes, base3, key);
                if hit3.is_some() {
                    stats.hits[2] += 1;
                }
                // `private_page` for this domain's pages; the others are `l3_tail`'s.
                let slot = slot_ahead(page, &pr.pages, vp);
                let sole = slot.and_then(|i| pr.pages.sole_at(i));
                match sole {
                    _ if hit3 == Some(SHARED) => break 'access Err(Rest::Tail { hit3 }),
                    Some(s) if s == mine => {}
                    None | Some(0) if pr.takes_pages() => {
                        if let Some(i) = slot.filter(|_| sole.is_some()) {
                            pr.pages.set_sole_at(i, mine);
                        }
                        pr.private_pages += 1;
                    }
                    _ => break 'access Err(Rest::Tail { hit3 }),
                }
                let mut steps = [Deferred::None; 3];
                let mut deferred = false;
                // `coherent_private`: the latency is the third level's or memory's (`memory`).
                let (lat, stall) = match hit3 {
                    Some(_) => (cx.lat3[2], 0.0),
                    None => {
                        stats.llc_misses += 1;
                        let mut stall = 0.0;
                        let home = match slot.and_then(|s| pr.pages.get_at(s, vp)) {
                            Some(pg) => {
                                if pg.blocked_until > t {
                                    stall += pg.blocked_until - t;
                                }
                                usize::from(pg.node)
                            }
                            None => {
                                let home =
                                    first_touch_home(&pr.policy, mem_nodes, machine, cx.node, vp);
                                let pg = Page {
                                    node: home as u16,
                                    blocked_until: 0.0,
                                    armed: false,
                                    sole: mine,
                                };
                                pr.pages.insert_in(slot, vp, pg);
                                pr.page_list.push(vp);
                                stats.faults += 1;
                                stall += fault_ns;
                                if fault_samples {
                                    steps[0] = Deferred::FaultSample(vaddr);
                                    deferred = true;
                                }
                                home
                            }
                        };
                        let lat = fabric.read_inlined(t + stall, cx.node, home);
                        if home == cx.node {
                            stats.local += 1;
                            th.local += 1;
                        } else {
                            stats.remote += 1;
                            th.remote += 1;
                        }
                        (lat, stall)
                    }
                };
                // `fill3` of the levels that missed, with the private line's states.
                let dirty = u8::from(a.write || hit3 == Some(MODIFIED));
                if hit3.is_some() {
                    c3.set_mru_state(base3, EXCLUSIVE + dirty);
                }
                // The first level's fill and the removal of the second level's victim from it
                // in one pass (`fill_absent_removing_p8`; the second level's fill comes first).
                let ev2 = c2.fill_absent_p8(key, EXCLUSIVE + 2 * dirty);
                c1.fill_absent_removing_p8_on(
                    lanes,
                    key,
                    EXCLUSIVE + dirty,
                    ev2.map(|ev| ev.line()),
                );
                if let Some(ev) = ev2 {
                    let line = ev.line();
                    steps[1] = match ev.state() {
                        SHARED => Deferred::EvictedBit(f.l2, f.b2, line),
                        // `private_victim2`: the third level takes the dirty bit, or the line
                        // goes back to its home (this process's pages are borrowed here).
                        MODIFIED if !c3.set_state_on(lanes, line, MODIFIED) => {
                            if (line >> ASID_SHIFT) as usize == cx.pi {
                                let vp = ((line & LINE_MASK) << 6) >> pr.page_shift;
                                let home = pr.pages.slot(vp).and_then(|s| pr.pages.node_at(s));
                                if let Some(home) = home {
                                    write_back(fabric, stats, t, node2, home);
                                }
                                Deferred::None
                            } else {
                                Deferred::Writeback(line, node2)
                            }
                        }
                        _ => Deferred::None,
                    };
                    deferred |= !matches!(steps[1], Deferred::None);
                }
                if hit3.is_none() {
                    if let Some(ev) = c3.fill_absent_w20(base3, key, EXCLUSIVE + dirty) {
                        let line = ev.line();
                        steps[2] = match ev.state() {
                            SHARED => Deferred::EvictedBit(f.l3, f.b3, line),
                            // `private_victim3` for a line of this process's pages: this
                            // domain's second level takes the dirty bit, or it goes home; after
                            // a deferred step of the second level's victim, deferred as well.
                            MODIFIED if (line >> ASID_SHIFT) as usize == cx.pi && !deferred => {
                                let vp = ((line & LINE_MASK) << 6) >> pr.page_shift;
                                let slot = pr.pages.slot(vp);
                                match slot.and_then(|s| pr.pages.sole_at(s)) {
                                    Some(s) if s == mine => {
                                        if !c2.set_state_on(lanes, line, MODIFIED) {
                                            if let Some(home) =
                                                slot.and_then(|s| pr.pages.node_at(s))
                                            {
                                                write_back(fabric, stats, t, node3, home);
                                            }
                                        }
                                        Deferred::None
                                    }
                                    _ => Deferred::Victim3(line),
                                }
                            }
                            MODIFIED => Deferred::Victim3(line),
                            _ => Deferred::None,
                        };
                        deferred |= !matches!(steps[2], Deferred::None);
                    }
                }
                if deferred {
                    break 'access Err(Rest::Deferred { lat, stall, steps });
                }
                Ok((lat, stall))
            };
            let (lat, stall) = match done {
                Ok(done) => done,
                Err(rest) => {
                    break Some(Bail {
                        a,
                        key,
                        t,
                        base,
                        page,
                        rest,
                    })
                }
            };
            // `step_end` without a sample (`sample_countdown` is over 1 here).
            let mut t = t;
            if stall > 0.0 {
                t = th.window.drain(t) + stall;
            }
            th.complete(t, lat);
            ran += 1;
            now = t;
        };
        *clock = now;
        stats.fast_accesses += ran;
        if sampled {
            th.sample_countdown -= ran;
        }
        th.l1_misses = l1_misses;
        ring.give_back(th, f.l3);
        (bailed, ran)
    }

    /// Finishes an access `fast_accesses` handed back with the general code, from where the loop
    /// left it; returns the PU's clock after it.
    fn finish_bail<D: Form, G: Geom>(&mut self, ti: usize, cx: &Cx, b: Bail) -> f64 {
        self.cur_llc = match (b.base, cx.p3) {
            (NO_BASE, _) | (_, None) => NO_SET,
            (base, Some(f)) => (f.l3, base),
        };
        self.cur_page = b.page;
        let kind = match b.rest {
            Rest::Coherent { .. } => 0,
            Rest::Tail { .. } => 1,
            Rest::Deferred { .. } => 2,
        };
        self.stats.fast_bails[kind] += 1;
        let (lat, stall) = match (b.rest, cx.p3) {
            (Rest::Coherent { pos, maybe_private }, _) => {
                self.coherent::<D, G>(ti, cx, b.key, b.t, b.a.write, Some(pos), maybe_private)
            }
            (Rest::Tail { hit3 }, Some(f)) => {
                self.l3_tail::<D, G>(ti, cx, f, b.key, b.t, b.a.write, hit3)
            }
            (Rest::Deferred { lat, stall, steps }, Some(f)) => {
                for step in steps {
                    match step {
                        Deferred::None => {}
                        Deferred::FaultSample(vaddr) => {
                            self.record_sample(ti, cx.p, b.t, vaddr, AccessKind::Fault, None)
                        }
                        Deferred::EvictedBit(k, bit, line) => {
                            self.evicted_bit::<D, G>(k, bit, line, b.t)
                        }
                        Deferred::Writeback(line, from) => self.writeback(line, from, b.t),
                        Deferred::Victim3(line) => self.private_victim3(f, line, b.t),
                    }
                }
                (lat, stall)
            }
            // `run_fast` runs only on a common-shape path.
            (_, None) => (0.0, 0.0),
        };
        self.step_end(ti, cx.p, b.t, lat, stall, b.a)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use numaff_machine::Machine;

    use super::*;
    use crate::config::HwSampling;
    use crate::stream::ThreadSpec;

    /// `n` ops of a thread from `base`: accesses over a 64 KiB region (first and second level
    /// hits), a 6 MiB one (third level hits) and, `tenths` in ten, over `wide` bytes (misses,
    /// first touches); a write in three; a compute op every 500 and a barrier every 10,000.
    fn ops(
        seed: u64,
        base: u64,
        wide: u64,
        tenths: u64,
        n: u64,
    ) -> impl Iterator<Item = Op> + Send {
        let mut rng = numaff_machine::rng::SplitMix64::new(seed);
        (0..n).map(move |i| {
            if i % 10_000 == 9_999 {
                return Op::Barrier;
            }
            if i % 500 == 499 {
                return Op::Compute(40);
            }
            let x = rng.next_u64();
            let r = x % 10;
            let vaddr = base
                + if r + tenths >= 10 {
                    (x >> 20) % wide
                } else if r < 5 {
                    (x >> 20) % (64 << 10)
                } else {
                    (x >> 20) % (6 << 20)
                };
            Op::Access(if (x >> 40).is_multiple_of(3) {
                Access::write(vaddr)
            } else {
                Access::read(vaddr)
            })
        })
    }

    /// laso-hpl with a third level of 1,021 sets (1.25 MiB): lines of one of its sets fall in
    /// many second-level sets (laso-hpl's 20,480 sets are a multiple of the second level's 512,
    /// so its third level evicts a line only after the second level did), so it evicts lines
    /// the second level holds, and often.
    fn small_l3() -> Machine {
        let mut m = numaff_machine::catalog::load("laso-hpl").unwrap();
        for c in &mut m.caches {
            if c.level == 3 {
                c.size_bytes = 1_021 * 20 * 64;
            }
        }
        m
    }

    /// The report, the samples and the fast path's counts (accesses, hand-backs by `Rest`) of
    /// `specs` on `m`, with the fast path or without, in its AVX2 build (where the host has it)
    /// or the other (`base`).
    fn run(
        m: &Machine,
        cfg: &SimConfig,
        specs: &dyn Fn(&Simulator) -> Vec<ProcessSpec>,
        fast: Option<bool>,
        base: bool,
    ) -> (String, String, u64, [u64; 3]) {
        let mut sim = Simulator::new(m, cfg.clone());
        match fast {
            None => sim = sim.without_fast_path(),
            Some(true) => sim = sim.with_fast_path_on_directory_lines(),
            Some(false) => {}
        }
        if base {
            sim = sim.without_avx2_fast_path();
        }
        // Also for the few accesses at a time of PUs a quantum apart (multi-threaded runs).
        sim.fast_min_run_ns = 0.0;
        for spec in specs(&sim) {
            let pid = sim.spawn(spec).unwrap();
            // The first 8 MiB of the first process placed on node 1: present pages that no
            // domain has touched (`Page::sole` 0).
            if pid == 1000 {
                sim.place(pid, 0x1000_0000, 8 << 20, 1).unwrap();
            }
        }
        let r = sim.run();
        let mut s = Vec::new();
        sim.take_samples(&mut s);
        let st = &sim.stats;
        (
            format!("{r:?}"),
            format!("{s:?}"),
            st.fast_accesses,
            st.fast_bails,
        )
    }

    /// `run` with the fast path (also on directory lines if `anywhere`) in both its builds, and
    /// without: the same report and samples; the fast path's counts.
    fn same(
        what: &str,
        m: &Machine,
        cfg: &SimConfig,
        specs: &dyn Fn(&Simulator) -> Vec<ProcessSpec>,
        anywhere: bool,
    ) -> (u64, [u64; 3]) {
        let (ra, sa, fast, bails) = run(m, cfg, specs, Some(anywhere), false);
        let (rb, sb, none, _) = run(m, cfg, specs, None, false);
        let (rc, sc, base, base_bails) = run(m, cfg, specs, Some(anywhere), true);
        assert_eq!(ra, rb, "{what}: report");
        assert_eq!(sa, sb, "{what}: samples");
        assert_eq!(none, 0, "{what}: the fast path ran while off");
        assert_eq!((rc, sc), (ra, sa), "{what}: the fast path's builds differ");
        assert_eq!(
            (base, base_bails),
            (fast, bails),
            "{what}: counts of the builds"
        );
        (fast, bails)
    }

    /// Two PUs of different private domains under one third level, the first being PU 0's.
    fn two_domains(sim: &Simulator) -> (u32, u32) {
        let f0 = sim.pus[0].p3.unwrap();
        let other = sim
            .pus
            .iter()
            .find(|pu| pu.p3.is_some_and(|f| f.l3 == f0.l3 && f.l2 != f0.l2))
            .unwrap();
        (sim.pus[0].cpu, other.cpu)
    }

    /// The fast path takes the general path's steps: the same report and samples with it and
    /// without it, bit for bit, in runs made to reach each of its branches: one thread over its
    /// own pages under every data policy, with first-touch and hardware samples (fault samples
    /// deferred, sampled accesses left to `step_end`), pages placed before their first touch;
    /// two processes time-sharing a PU (the other process's dirty victims); two threads of two
    /// domains under one third level with a few pages both touch now and then (pages turning
    /// shared, `Rest::Tail`; directory lines evicted while the loop runs; the other domain's
    /// dirty victims). The third level is small in the last two, so that it evicts lines the
    /// second level holds. Each run asserts that the fast path ran and handed back what it was
    /// made for.
    #[test]
    fn fast_path_gives_the_general_paths_figures() {
        let laso = numaff_machine::catalog::load("laso-hpl").unwrap();
        let small = small_l3();
        let sampled = SimConfig {
            first_touch_samples: true,
            hw_sampling: Some(HwSampling {
                period: 97,
                jitter: 0.5,
                min_latency_ns: 0.0,
                cost_ns: 3.0,
            }),
            ..SimConfig::default()
        };
        let explicit: BTreeMap<u64, u32> = (0..4096u64)
            .map(|k| ((0x1000_0000 >> 12) + k * 7, (k % 4) as u32))
            .collect();
        let policies = [
            DataPolicy::FirstTouch,
            DataPolicy::Interleave,
            DataPolicy::Bind(2),
            DataPolicy::Explicit(explicit),
        ];
        for (k, policy) in policies.into_iter().enumerate() {
            let cfg = if k % 2 == 0 {
                sampled.clone()
            } else {
                SimConfig::default()
            };
            let one = move |_: &Simulator| {
                vec![
                    ProcessSpec::new("one", policy.clone()).thread(ThreadSpec::new(
                        "t",
                        0,
                        ops(k as u64, 0x1000_0000, 256 << 20, 2, 120_000),
                    )),
                ]
            };
            let (fast, bails) = same(&format!("one thread, policy {k}"), &laso, &cfg, &one, false);
            assert!(
                fast > 90_000,
                "one thread, policy {k}: {fast} fast accesses"
            );
            if cfg.first_touch_samples {
                assert!(bails[2] > 1_000, "one thread, policy {k}: {bails:?}");
            }
        }
        // Two processes on PU 0: each evicts the other's dirty lines.
        let two = |_: &Simulator| {
            (0..2u64)
                .map(|p| {
                    let ops = ops(10 + p, 0x1000_0000, 64 << 20, 5, 100_000);
                    ProcessSpec::new(format!("p{p}"), DataPolicy::Interleave)
                        .thread(ThreadSpec::new("t", 0, ops))
                })
                .collect()
        };
        let (fast, bails) = same("two processes", &small, &SimConfig::default(), &two, false);
        assert!(
            fast > 150_000 && bails[2] > 100,
            "two processes: {fast} {bails:?}"
        );
        // Two domains: their own pages, and one access in ten to a page both touch in windows
        // far enough apart for its lines to have left every cache in between (so that a pick
        // may find the directory empty, and the loop meet directory lines).
        let domains = |sim: &Simulator| {
            let (a, b) = two_domains(sim);
            let mut spec = ProcessSpec::new("two", DataPolicy::FirstTouch);
            for (i, cpu) in [a, b].into_iter().enumerate() {
                let own = ops(20 + i as u64, 0x4000_0000 << i, 64 << 20, 9, 200_000);
                let mut x = 7 + i as u64;
                let ops = own.enumerate().map(move |(j, op)| match op {
                    Op::Access(a) if j % 20_000 < 2_000 && j % 10 == 0 => {
                        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                        Op::Access(Access {
                            vaddr: 0x2000_0000 + (x >> 40) % (4 << 10),
                            ..a
                        })
                    }
                    op => op,
                });
                spec = spec.thread(ThreadSpec::new(format!("t{i}"), cpu, ops));
            }
            vec![spec]
        };
        for cfg in [&sampled, &SimConfig::default()] {
            let (fast, bails) = same("two domains", &small, cfg, &domains, false);
            assert!(fast > 10_000, "two domains: {fast} {bails:?}");
            assert!(bails[1] > 0 && bails[2] > 100, "two domains: {bails:?}");
        }
        // The same with the fast path run whatever the directory holds: it meets directory
        // lines (`SHARED`): write hits on them (`Rest::Coherent`), their eviction (deferred).
        let (fast, bails) = same("directory lines", &small, &sampled, &domains, true);
        assert!(fast > 100_000, "directory lines: {fast} {bails:?}");
        assert!(bails.iter().all(|&b| b > 100), "directory lines: {bails:?}");
    }
}
