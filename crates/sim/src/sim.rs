//! The simulator core: hardware threads with their own clocks running software threads, private and
//! shared caches kept coherent by a directory, pages placed by policy, and the memory fabric.
//!
//! Timing model. Each PU has a clock; the PU with the earliest clock runs next, for at most
//! `quantum_ns` past the next PU's clock, so shared queues see requests nearly in time order. A
//! software thread issues its accesses in order after their compute cycles; independent accesses
//! overlap up to `mlp` outstanding (in-order retirement: a full window waits for its oldest access),
//! dependent ones wait for the previous access. An access costs the hit latency of the first cache
//! level holding the line; a miss of every level costs a cache-to-cache transfer when another core
//! holds the line modified, else the memory latency from the fabric (with queue waits).
//!
//! This module holds the simulator's state and its construction; its child modules hold the
//! `impl Simulator` blocks by topic: `sched` (the run loop, the os balancer), `sync` (barriers,
//! flags), `sampling`, `access` (the lookahead and the cache levels), `coherence`,
//! `private_lines`, `fast` (the private-line fast path), `report` and `env`.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use numaff_engine::Sample;
use numaff_machine::{CacheKind, Coherence, CpuSet, Machine};

use crate::cache::{Avx2, Base, Lanes, SetAssoc, EXCLUSIVE, MODIFIED, SHARED};
use crate::config::{defaults, SimConfig};
use crate::dir::{Directory, Form};
use crate::error::SimError;
use crate::fabric::{later, Fabric};
use crate::pages::{Page, PageTable, SOLE_SHARED};
use crate::report::Report;
use crate::rng::{self, SplitMix64};
use crate::stream::{Access, DataPolicy, Op, OpSource, ProcessSpec};
use crate::window::Window;

mod access;
mod coherence;
mod env;
mod fast;
mod private_lines;
mod report;
mod sampling;
mod sched;
mod sync;
#[cfg(test)]
mod tests;

pub use sched::os_placement;

/// Multiplicative hasher for line and page numbers (FxHash); maps are never iterated, so their order
/// cannot leak into the figures.
#[derive(Default, Clone, Copy)]
pub(crate) struct Fx(u64);

impl Hasher for Fx {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<Fx>>;

/// Bits of a line key holding the line number; the bits above hold the address space.
const ASID_SHIFT: u32 = 58;
const LINE_MASK: u64 = (1 << ASID_SHIFT) - 1;
/// Most processes a simulation holds: a cache entry keeps 62 bits of `key + 1` (its two low bits
/// are the line state), so the address space above bit 58 (`ASID_SHIFT`) has 4 bits. A 17th process's
/// lines would be stored truncated and never hit.
pub const MAX_PROCESSES: usize = 1 << (62 - ASID_SHIFT);
/// Whether the host has the instructions of `fast_accesses_avx2` (AVX2, BMI1, BMI2, POPCNT).
fn host_has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("bmi1")
            && is_x86_feature_detected!("bmi2")
            && is_x86_feature_detected!("popcnt")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Tracked cache instances that get their own directory bit; more alias (costing only precision).
const DIR_BITS: usize = 128;
/// How many ops a thread pulls ahead of the one it runs. Pulling ahead changes nothing simulated
/// (generators are pure functions of their own parameters); it only lets the host start fetching
/// the cache sets, directory slots and page slots of the coming accesses early, so that the host
/// cache misses of several simulated accesses overlap instead of coming one after another.
const LOOKAHEAD: usize = 8;
/// Ops a thread takes from its generator per call (`OpSource::fill`, `Hot::pull`).
const BATCH: usize = 32;
/// Distance (in ops) at which the directory slots of the lines those accesses will evict are
/// fetched; their sets were fetched `LOOKAHEAD - VICTIM_AHEAD` ops earlier.
const VICTIM_AHEAD: usize = 3;
/// Pages a process's `page_list` has room for before it moves (as `pages::ENTRIES_ROOM`).
const PAGE_LIST_ROOM: usize = 1 << 22;
/// No page slot looked up ahead (`Simulator::cur_page`, `Hot::ahead_page`).
const NO_PAGE: usize = usize::MAX;

/// The slot of page `vp`: `ahead`, the one `next_op` or `access_beyond_l1*` looked up for the
/// current access (a slot is its page's for good), or a lookup when that is `NO_PAGE` (none
/// was, or the page's chunk did not exist then).
#[inline(always)]
fn slot_ahead(ahead: usize, pages: &PageTable, vp: u64) -> Option<usize> {
    match ahead {
        NO_PAGE => pages.slot(vp),
        s => Some(s),
    }
}
/// No set computed ahead (`Simulator::cur_llc`, `Thread::ahead_llc`).
const NO_SET: (usize, usize) = (usize::MAX, 0);

#[inline]
fn and_not(a: [u64; 2], b: [u64; 2]) -> [u64; 2] {
    [a[0] & !b[0], a[1] & !b[1]]
}
#[inline]
fn any(a: [u64; 2]) -> bool {
    (a[0] | a[1]) != 0
}

/// The node position that page `vp`, first touched from node position `node`, goes to under
/// `policy` (`mem_nodes`: the positions of the nodes with memory, never empty).
#[inline]
fn first_touch_home(
    policy: &DataPolicy,
    mem_nodes: &[usize],
    machine: &Machine,
    node: usize,
    vp: u64,
) -> usize {
    match policy {
        DataPolicy::FirstTouch => node,
        DataPolicy::Interleave => mem_nodes
            .get((vp % (mem_nodes.len() as u64).max(1)) as usize)
            .copied()
            .unwrap_or(node),
        DataPolicy::Bind(id) => machine.node_index(*id).unwrap_or(node),
        DataPolicy::Explicit(m) => m
            .get(&vp)
            .and_then(|id| machine.node_index(*id))
            .unwrap_or(node),
    }
}

struct CacheInst {
    cache: SetAssoc,
    node: usize,
    /// Directory bit, for the outermost private level and shared levels.
    bit: Option<usize>,
    /// Inner private instances kept inclusive in this one (outermost private level only).
    inner: Vec<usize>,
}

/// A PU's path in the common shape: a first level with no directory bit and nothing inside it, a
/// second private level with its directory bit that keeps exactly the first inclusive, and one
/// shared level with its directory bit and nothing inclusive in it (6 of the 12 catalog machines,
/// laso-hpl among them). Resolved once per PU in `new`, so that an L1 miss runs straight-line code
/// (`access_beyond_l1_3`, `fill3`) instead of the loops over `path`, the per-level `bit` and
/// `inner` tests and the `set_in` compare of the general path; the steps and their order are the
/// general path's, so the model is the same bit for bit
/// (`common_shape_path_gives_the_general_paths_figures`).
#[derive(Debug, Clone, Copy)]
struct Path3 {
    /// Cache indices of the three levels (`path[0..3]`).
    l1: usize,
    l2: usize,
    l3: usize,
    /// Directory bits of the second and third levels.
    b2: usize,
    b3: usize,
}

impl Path3 {
    /// The shape of `path` with `n_private` private levels, if it is the common one.
    fn of(path: &[usize], n_private: usize, caches: &[CacheInst]) -> Option<Self> {
        let &[l1, l2, l3] = path else { return None };
        let (c1, c2, c3) = (caches.get(l1)?, caches.get(l2)?, caches.get(l3)?);
        let shaped = n_private == 2
            && c1.bit.is_none()
            && c1.inner.is_empty()
            && c2.inner == [l1]
            && c3.inner.is_empty();
        match (shaped, c2.bit, c3.bit) {
            (true, Some(b2), Some(b3)) => Some(Path3 { l1, l2, l3, b2, b3 }),
            _ => None,
        }
    }
}

/// The first two levels' geometry on a common-shape path as a type, resolved once per `run_pu`:
/// with `P8` both are 8-way with a power-of-two set count, and `access_beyond_l1_3` / `fill3` /
/// `access` use `SetAssoc`'s `*_p8` lookups, which take their set as a mask and a shift and skip
/// `set_of`'s match and `set8`'s way-count test; else the general lookups. Either gives the same
/// answers; only the host instructions differ.
///
/// With `W20` (only with `P8`) the last level is 20-way as well (laso-hpl's, agung-xeon2's and
/// agung-xeon56's L3; `SetAssoc::is_w20`), and its lookups, the victim's `lru`, the fill of an
/// absent line and the set's prefetch work on a set of fixed length (`*_w20`).
trait Geom {
    /// Whether the first two levels of the PU's `Path3` are 8-way with power-of-two set counts.
    const P8: bool;
    /// Whether, besides, the PU's `Path3` last level is 20-way.
    const W20: bool;
}

/// Any geometry: the general lookups.
struct AnyGeom;
impl Geom for AnyGeom {
    const P8: bool = false;
    const W20: bool = false;
}

/// First two levels 8-way with power-of-two set counts (`SetAssoc::is_p8`).
struct P8Geom;
impl Geom for P8Geom {
    const P8: bool = true;
    const W20: bool = false;
}

/// `P8Geom` with a 20-way last level (`SetAssoc::is_w20`).
struct P8W20Geom;
impl Geom for P8W20Geom {
    const P8: bool = true;
    const W20: bool = true;
}

struct Pu {
    cpu: u32,
    node: usize,
    node_id: u32,
    path: Vec<usize>,
    lat: Vec<f64>,
    n_private: usize,
    /// `path` in the common shape, if it is (`Path3::of`).
    p3: Option<Path3>,
    /// The first two levels' geometry on `p3`'s path, as `run_pu` dispatches on it (`Geom`): 0
    /// any, 1 `P8`, 2 `P8` and `W20`. Set once in `new`: `run_pu` runs every ~4
    /// accesses of a suite workload.
    geom: u8,
    path_bits: [u64; 2],
    /// `fill_bits[n]`: the directory bits of `path[..n]`, for `n` in `0..=path.len()`.
    fill_bits: Vec<[u64; 2]>,
    /// Its private domain (the PUs sharing its `p3` second level), for `Simulator::private_lines`.
    domain: u16,
    clock: f64,
    runq: VecDeque<usize>,
    in_heap: bool,
    slice_end: f64,
}

/// The fixed fields of a PU and of the thread it runs, copied once per thread picked in `run_pu`:
/// the access path reads them from this copy instead of through `self.pus[p]` and
/// `self.threads[ti]`, whose bounds checks and pointer loads are repeated after every call that
/// takes `&mut self` (the compiler cannot keep them across it). Nothing here changes while the
/// thread runs on the PU: `path`, `lat`, `node`, `path_bits`, `n_private` and `p3` are set in `new`,
/// and a thread's process never changes.
#[derive(Clone, Copy)]
struct Cx {
    /// The PU's index.
    p: usize,
    /// The running thread's process (`Thread::proc`).
    pi: usize,
    /// Whether that process had pages armed for an induced fault when the thread was picked (if
    /// not, none is armed until `run_pu` returns: `induce_faults` runs between its calls).
    armed: bool,
    node: usize,
    path_bits: [u64; 2],
    p3: Option<Path3>,
    n_private: usize,
    /// `path.len()`, `path.first()` and `path.last()`.
    path_len: usize,
    l1: Option<usize>,
    llc: Option<usize>,
    /// `lat[..3]`, zero past the path's end (`lat(pos)` reads `lat` itself beyond).
    lat3: [f64; 3],
    /// `fill_bits[..4]`, the whole path's bits past its end (`filled_bits` reads `fill_bits`
    /// itself beyond).
    fill_bits: [[u64; 2]; 4],
    /// Whether the thread's pages can be private (`Simulator::private_lines` and 4 KiB pages).
    private: bool,
    /// The PU's private domain (`Pu::domain`).
    domain: u16,
    /// Whether the directory held a line when the thread was picked. Only then can a line be
    /// `SHARED` (private lines, `Simulator::private_lines`, are never in it), so only then does
    /// `next_op` fetch directory slots and victims ahead; a line added meanwhile turns them on
    /// at the next pick (they are hints: the figures do not depend on them).
    dir_used: bool,
}

impl Cx {
    /// The hit latency of path level `pos` (`pus[p].lat[pos]`).
    #[inline(always)]
    fn lat(&self, pos: usize, pus: &[Pu]) -> f64 {
        match self.lat3.get(pos) {
            Some(&l) => l,
            None => pus[self.p].lat[pos],
        }
    }

    fn of(pu: &Pu, p: usize, pi: usize, armed: bool, private: bool) -> Self {
        let mut lat3 = [0.0; 3];
        for (l, &v) in lat3.iter_mut().zip(&pu.lat) {
            *l = v;
        }
        let mut fill_bits = [pu.path_bits; 4];
        for (b, &v) in fill_bits.iter_mut().zip(&pu.fill_bits) {
            *b = v;
        }
        Cx {
            p,
            pi,
            armed,
            node: pu.node,
            path_bits: pu.path_bits,
            p3: pu.p3,
            n_private: pu.n_private,
            path_len: pu.path.len(),
            l1: pu.path.first().copied(),
            llc: pu.path.last().copied(),
            lat3,
            fill_bits,
            private,
            domain: pu.domain,
            dir_used: true,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Ready,
    Blocked,
    Done,
}

struct Thread {
    pid: u32,
    tid: u32,
    name: String,
    proc: usize,
    pu: usize,
    allowed: CpuSet,
    ready_at: f64,
    state: State,
    end: f64,
    migrations: u64,
    /// What every access reads or writes; `Simulator::run` holds it while the thread runs.
    hot: Box<Hot>,
}

/// The part of a thread's state that every access reads or writes. While
/// `run_pu_in` runs the thread, its `Hot` is `Simulator::run` (swapped with the thread's, one
/// pointer each way), so that the access path reaches it through one load instead of indexing
/// `threads` (a bounds check and a multiplication) after every call that takes `&mut self`.
struct Hot {
    ops: Box<dyn OpSource>,
    /// Ops taken from `ops` and not yet pulled: `batch[batch_at..batch_len]`.
    batch: [Op; BATCH],
    batch_at: u8,
    batch_len: u8,
    window: Window,
    last_done: f64,
    accesses: u64,
    /// Accesses served by memory on the accessing PU's node and on another node.
    local: u64,
    remote: u64,
    sample_countdown: u64,
    /// Ops already pulled from `ops` but not yet run: a ring of `ahead_len` ops from `ahead_head`.
    ahead: [Op; LOOKAHEAD],
    /// Per op of `ahead` that is an access: its last-level cache (index into `caches`, `NO_SET`
    /// for none) and the first entry of its set there, computed once when it was pulled.
    ahead_llc: [(usize, usize); LOOKAHEAD],
    /// Per op of `ahead` that is an access: its page's slot (`NO_PAGE` if none yet).
    ahead_page: [usize; LOOKAHEAD],
    ahead_head: u8,
    ahead_len: u8,
    /// Calls of `next_op` left that pull ahead with host fetches, set at each first-level miss
    /// (`next_op` starts fetches only while the thread misses: hits need none, and checking each
    /// access's first level ahead of time would cost the hits more than it saves).
    l1_misses: u8,
    /// `ops` has ended (its `fill` returned 0).
    ops_done: bool,
}

struct Process {
    pid: u32,
    start: f64,
    policy: DataPolicy,
    page_shift: u32,
    pages: PageTable,
    /// Pages made private (`Simulator::private_lines`) and private pages turned shared.
    private_pages: u64,
    turned_shared: u64,
    /// Present pages in first-touch order (for deterministic iteration).
    page_list: Vec<u64>,
    scan_cursor: u64,
    /// Pages marked for an induced fault; while non-zero every access checks its page.
    armed: u64,
    live: usize,
    waiting: Vec<usize>,
    barrier_time: f64,
    /// Flags set by `Op::Post`, with the time they were set (never iterated).
    flags: FxMap<u64, f64>,
    /// Threads blocked in `Op::Wait`, per flag, in the order they blocked (never iterated).
    flag_waiters: FxMap<u64, Vec<usize>>,
}

impl Process {
    /// Whether a page this process touches first becomes private (`Simulator::private_lines`):
    /// not once more than a quarter of its private pages have turned shared (after its first
    /// 256). A page turning shared looks up each of its lines in two caches and enters those
    /// held into the directory, which costs more host time than the directory would have for
    /// them: pipelines hand most of their pages on (parsec-dedup, -ferret). Which pages are
    /// private changes no figure, only the host time.
    fn takes_pages(&self) -> bool {
        self.private_pages < 256 || self.turned_shared * 4 <= self.private_pages
    }
}

#[derive(Debug, Clone, Default)]
struct Stats {
    accesses: u64,
    probes: [u64; 8],
    hits: [u64; 8],
    llc_misses: u64,
    local: u64,
    remote: u64,
    c2c: u64,
    c2c_remote: u64,
    invalidations: u64,
    writebacks: u64,
    faults: u64,
    migrations: u64,
    migration_cost: f64,
    page_migrations: u64,
    page_migration_cost: f64,
    samples: u64,
    /// Accesses the fast path ran (`fast.rs`), and the ones it handed back, by `fast::Rest`
    /// (write hits, third-level tails, deferred steps).
    fast_accesses: u64,
    fast_bails: [u64; 3],
}

/// The coherence protocol the simulator applies on `machine`: its own, or MESIF's rule where
/// the machine names none (`Simulator::writes_back` says what each does).
pub fn simulated_coherence(machine: &Machine) -> Coherence {
    machine.coherence.unwrap_or(Coherence::Mesif)
}

/// A simulated NUMA machine running simulated programs. Build it with [`Simulator::new`], add
/// programs with [`Simulator::spawn`], then [`Simulator::run`] to the end (or drive it step by step
/// through [`numaff_engine::Environment`]).
pub struct Simulator {
    pub(crate) machine: Machine,
    cfg: SimConfig,
    cycle_ns: f64,
    pub(crate) fabric: Fabric,
    caches: Vec<CacheInst>,
    tracked: Vec<usize>,
    pus: Vec<Pu>,
    /// Each PU's `Cx` but for its thread's fields (`pi`, `armed`, `private`), built once in
    /// `new`: `run_pu_in` copies it and sets those three rather than building it again from the
    /// PU's vectors: `run_pu_in` starts about every other access of a workload of dependent
    /// loads (parsec-canneal).
    pu_cx: Vec<Cx>,
    threads: Vec<Thread>,
    procs: Vec<Process>,
    dir: Directory,
    heap: BinaryHeap<Reverse<(u64, usize)>>,
    pub(crate) now: f64,
    rng: SplitMix64,
    samples: Vec<Sample>,
    stats: Stats,
    mem_nodes: Vec<usize>,
    next_induced: f64,
    next_balance: f64,
    /// The access `next_op` has just handed out: its last-level cache and the first entry of its
    /// set there (`NO_SET` if not computed), so that its lookup, its victim's `lru` and its fill
    /// there do not compute the set again (`set_in`).
    cur_llc: (usize, usize),
    /// The slot of the page of the access `next_op` has just handed out (`PageTable::slot`),
    /// `NO_PAGE` if not looked up, so that `private_page` needs no lookup of its own.
    cur_page: usize,
    /// The `Hot` of the thread `run_pu_in` is running; an idle one (no ops) between its runs.
    run: Box<Hot>,
    /// Private lines: a line of a page whose lines only one private domain (`Pu::domain`: the PUs
    /// sharing a second level) has touched (`Page::sole`) has no directory entry. Its holders are
    /// that domain's second and third levels that hold it, and its dirty bit is in their states:
    /// `EXCLUSIVE` clean; in the second level `MODIFIED` dirty with the third's copy (if any)
    /// clean, `MODIFIED_OUTER` dirty with the third holding it `MODIFIED` too; in the third
    /// `MODIFIED` dirty. So a level dropping the line needs to look at the other only when its copy
    /// is `MODIFIED` (to write back the line's last copy, or hand the dirty bit over), and a clean
    /// or `MODIFIED_OUTER` second-level victim costs nothing. When a second domain touches the
    /// page, its lines enter the directory with the entries the directory would have given them
    /// (`share_page`, `private_entry`), and their states become `SHARED`, as every directory line's
    /// in those levels. So the figures are the directory's, bit for bit
    /// (`private_lines_give_the_directorys_figures`), and a thread's private data costs no
    /// directory probe. On when every PU's path has the common shape (`Path3`), every tracked cache
    /// has its own directory bit (no aliasing, whose imprecision the states would not repeat), and
    /// every PU is on its second and third levels' node; and only for processes with 4 KiB pages (a
    /// page turning shared looks up each of its lines).
    private_lines: bool,
    /// A PU of each private domain (`Pu::domain`).
    domain_pu: Vec<usize>,
    /// Whether `run_pu_in` runs private lines on `P8W20Geom` paths through `fast.rs`, and
    /// whether also when it picks a thread while the directory holds lines (`Cx::dir_used`:
    /// only for tests of the path's hand-backs; its lookahead fetches no directory slots).
    fast_path: bool,
    fast_on_directory: bool,
    /// The least time to the horizon for which it does (`fast::MIN_RUN_NS`; tests lower it).
    fast_min_run_ns: f64,
    /// The fast path runs its AVX2 build (`fast_accesses_on_host`), with this token: the host
    /// has the instructions (`host_has_avx2`; tests turn it off to check the other build).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    fast_avx2: Option<Avx2>,
    /// A PU joined the runnable ones (`enqueue`) since `run_until` last computed a horizon: the
    /// PU running must stop, so that the next horizon counts the PUs woken.
    woke: bool,
    /// The machine's protocol (`Machine::coherence`; MESIF where it says none): what a read of
    /// a line dirty in another cache does to memory and to the owner (`coherent`).
    coherence: Coherence,
}

impl Hot {
    /// A thread's hot state before its first op: `ops` to run, `countdown` accesses to its first
    /// hardware sample, `mlp` outstanding accesses at most, none before `start`.
    fn new(ops: Box<dyn OpSource>, countdown: u64, mlp: usize, start: f64) -> Self {
        Hot {
            ops,
            batch: [Op::Compute(0); BATCH],
            batch_at: 0,
            batch_len: 0,
            window: Window::new(mlp),
            last_done: start,
            accesses: 0,
            local: 0,
            remote: 0,
            sample_countdown: countdown,
            ahead: [Op::Compute(0); LOOKAHEAD],
            ahead_llc: [NO_SET; LOOKAHEAD],
            ahead_page: [NO_PAGE; LOOKAHEAD],
            ahead_head: 0,
            ahead_len: 0,
            l1_misses: 0,
            ops_done: false,
        }
    }

    /// The time an access `a` issues at on a PU whose clock is `clock`: after its compute and
    /// issue cycles, after the access before it if it depends on it, and once fewer than `mlp`
    /// accesses are outstanding (no wait while fewer are out). Counts it.
    #[inline(always)]
    fn issue(&mut self, a: Access, clock: f64, issue_cycles: f64, cycle_ns: f64) -> f64 {
        let mut t = clock + (f64::from(a.compute_cycles) + issue_cycles) * cycle_ns;
        if a.dependent {
            t = later(t, self.last_done);
        }
        t = later(t, self.window.oldest());
        self.accesses += 1;
        t
    }

    /// An access issued at `t` completes `lat` later.
    #[inline(always)]
    fn complete(&mut self, t: f64, lat: f64) {
        let done = t + lat;
        self.window.push(done);
        self.last_done = done;
    }

    /// Appends an op to the lookahead ring (`ahead`), with its last-level set and page slot.
    #[inline(always)]
    fn push_ahead(&mut self, op: Op, llc: (usize, usize), page: usize) {
        let slot = (usize::from(self.ahead_head) + usize::from(self.ahead_len)) % LOOKAHEAD;
        self.ahead[slot] = op;
        self.ahead_llc[slot] = llc;
        self.ahead_page[slot] = page;
        self.ahead_len += 1;
    }

    /// The thread's next op from its generator (None once it has ended), refilling the batch
    /// when it is empty.
    #[inline(always)]
    fn pull(&mut self) -> Option<Op> {
        if self.batch_at == self.batch_len {
            if self.ops_done {
                return None;
            }
            let n = self.ops.fill(&mut self.batch).min(BATCH);
            self.batch_at = 0;
            self.batch_len = n as u8;
            if n == 0 {
                self.ops_done = true;
                return None;
            }
        }
        let op = self.batch[usize::from(self.batch_at)];
        self.batch_at += 1;
        Some(op)
    }
}

impl Simulator {
    /// A machine at time 0 with empty caches and no programs.
    pub fn new(machine: &Machine, cfg: SimConfig) -> Self {
        let fabric = Fabric::new(machine);
        let freq = machine
            .frequency_mhz
            .filter(|&f| f > 0.0)
            .unwrap_or(defaults::FREQUENCY_MHZ);
        let cycle_ns = 1e3 / freq;
        let node_pos = |cpu: u32| {
            machine
                .nodes
                .iter()
                .position(|n| n.cpus.contains(cpu))
                .unwrap_or(0)
        };
        // Data and unified caches, inner levels first.
        let mut specs: Vec<&numaff_machine::Cache> = machine
            .caches
            .iter()
            .filter(|c| c.kind != CacheKind::Instruction)
            .collect();
        specs.sort_by_key(|c| (c.level, c.cpus.first()));
        let core_of = |cpu: u32| {
            machine
                .cores()
                .find(|(_, c)| c.pus.contains(cpu))
                .map(|(_, c)| c.pus.clone())
        };
        let mut caches = Vec::new();
        let mut private = Vec::new();
        for c in &specs {
            let ways = c.associativity.unwrap_or(defaults::ASSOCIATIVITY);
            let first = c.cpus.first().unwrap_or(0);
            let is_private = core_of(first).is_some_and(|core| c.cpus.is_subset(&core));
            private.push(is_private);
            caches.push(CacheInst {
                cache: SetAssoc::new(c.size_bytes, u64::from(c.line_bytes.max(1)), ways),
                node: node_pos(first),
                bit: None,
                inner: Vec::new(),
            });
        }
        let mut pus = Vec::new();
        for cpu in machine.pus().iter() {
            let node = node_pos(cpu);
            let path: Vec<usize> = (0..specs.len())
                .filter(|&k| specs[k].cpus.contains(cpu))
                .collect();
            let lat = path
                .iter()
                .map(|&k| {
                    let level = usize::from(specs[k].level).min(4);
                    specs[k]
                        .latency_cycles
                        .unwrap_or(defaults::CACHE_LATENCY_CYCLES[level])
                        * cycle_ns
                })
                .collect();
            let n_private = path.iter().take_while(|&&k| private[k]).count();
            pus.push(Pu {
                cpu,
                node,
                node_id: machine.nodes.get(node).map(|n| n.id).unwrap_or(0),
                path,
                lat,
                n_private,
                p3: None,
                geom: 0,
                path_bits: [0; 2],
                fill_bits: Vec::new(),
                domain: 0,
                clock: 0.0,
                runq: VecDeque::new(),
                in_heap: false,
                slice_end: 0.0,
            });
        }
        // Directory bits: the outermost private instance of each path and every shared instance.
        let mut tracked = Vec::new();
        for pu in &pus {
            for (pos, &k) in pu.path.iter().enumerate() {
                let track = pos + 1 == pu.n_private || pos >= pu.n_private;
                if track && caches[k].bit.is_none() {
                    caches[k].bit = Some(tracked.len() % DIR_BITS);
                    tracked.push(k);
                }
                if pos + 1 == pu.n_private {
                    for &inner in &pu.path[..pos] {
                        if !caches[k].inner.contains(&inner) {
                            caches[k].inner.push(inner);
                        }
                    }
                }
            }
        }
        for pu in &mut pus {
            pu.fill_bits.push(pu.path_bits);
            for &k in &pu.path {
                if let Some(b) = caches[k].bit {
                    pu.path_bits[b / 64] |= 1 << (b % 64);
                }
                pu.fill_bits.push(pu.path_bits);
            }
            pu.p3 = Path3::of(&pu.path, pu.n_private, &caches);
            pu.geom = pu.p3.map_or(0, |f| {
                let c = |k: usize| &caches[k].cache;
                match (c(f.l1).is_p8() && c(f.l2).is_p8(), c(f.l3).is_w20()) {
                    (false, _) => 0,
                    (true, false) => 1,
                    (true, true) => 2,
                }
            });
        }
        // Private domains: the PUs sharing a common-shape second level (`private_lines`).
        let mut domain_pu: Vec<usize> = Vec::new();
        let mut domain_of: HashMap<usize, usize> = HashMap::new();
        for (p, pu) in pus.iter_mut().enumerate() {
            if let Some(f) = pu.p3 {
                let d = *domain_of.entry(f.l2).or_insert_with(|| {
                    domain_pu.push(p);
                    domain_pu.len() - 1
                });
                pu.domain = u16::try_from(d).unwrap_or(u16::MAX);
            }
        }
        let private_lines = tracked.len() <= DIR_BITS
            && domain_pu.len() < usize::from(SOLE_SHARED)
            && pus.iter().all(|pu| {
                pu.p3
                    .is_some_and(|f| caches[f.l2].node == pu.node && caches[f.l3].node == pu.node)
            });
        let mut mem_nodes: Vec<usize> = (0..machine.nodes.len())
            .filter(|&i| machine.nodes[i].memory_bytes > 0)
            .collect();
        if mem_nodes.is_empty() {
            mem_nodes = (0..fabric.nodes()).collect();
        }
        let next_induced = cfg
            .induced_faults
            .as_ref()
            .map(|f| f.interval_ns as f64)
            .unwrap_or(f64::INFINITY);
        let next_balance = cfg
            .os_scheduler
            .as_ref()
            .map(|o| o.interval_ns.max(1) as f64)
            .unwrap_or(f64::INFINITY);
        let mut dir = Directory::new(tracked.len(), pus.len() as u32);
        // Room for the directory to grow in place up to the tracked caches' lines (`reserve`).
        dir.reserve(
            tracked
                .iter()
                .map(|&k| (specs[k].size_bytes / u64::from(specs[k].line_bytes.max(1))) as usize)
                .fold(0usize, usize::saturating_add),
        );
        let pu_cx = pus
            .iter()
            .enumerate()
            .map(|(p, pu)| Cx::of(pu, p, 0, false, false))
            .collect();
        Simulator {
            coherence: simulated_coherence(machine),
            machine: machine.clone(),
            rng: rng::seeded(cfg.seed),
            cfg,
            cycle_ns,
            fabric,
            caches,
            tracked,
            pus,
            pu_cx,
            threads: Vec::new(),
            procs: Vec::new(),
            dir,
            heap: BinaryHeap::new(),
            now: 0.0,
            samples: Vec::new(),
            stats: Stats::default(),
            mem_nodes,
            next_induced,
            next_balance,
            cur_llc: NO_SET,
            cur_page: NO_PAGE,
            woke: false,
            private_lines,
            fast_path: true,
            fast_on_directory: false,
            fast_min_run_ns: fast::MIN_RUN_NS,
            fast_avx2: Avx2::on_host().filter(|_| host_has_avx2()),
            domain_pu,
            run: Box::new(Hot::new(Box::new(std::iter::empty()), u64::MAX, 0, 0.0)),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &SimConfig {
        &self.cfg
    }

    /// Adds a program; its threads start on the PUs their specs name. Returns its pid. Fails when
    /// a thread names a cpu the machine does not have, or a policy names a node it does not have.
    pub fn spawn(&mut self, spec: ProcessSpec) -> Result<u32, SimError> {
        let pid = 1000 + 100 * self.procs.len() as u32;
        let pi = self.procs.len();
        if pi >= MAX_PROCESSES {
            return Err(SimError::TooManyProcesses { max: MAX_PROCESSES });
        }
        let node_ok = |id: u32| self.machine.node_index(id).is_some();
        match &spec.data_policy {
            DataPolicy::Bind(n) if !node_ok(*n) => return Err(SimError::NoNode(*n)),
            DataPolicy::Explicit(m) => {
                if let Some((_, n)) = m.iter().find(|(_, n)| !node_ok(**n)) {
                    return Err(SimError::NoNode(*n));
                }
            }
            _ => {}
        }
        let page_shift = if spec.huge_pages {
            21
        } else {
            self.machine.page_size.max(4096).trailing_zeros()
        };
        let start = spec.start_ns as f64;
        let n = spec.threads.len();
        for (k, t) in spec.threads.into_iter().enumerate() {
            let p = self
                .pus
                .iter()
                .position(|pu| pu.cpu == t.cpu)
                .ok_or_else(|| SimError::NoCpu {
                    thread: t.name.clone(),
                    cpu: t.cpu,
                })?;
            let ti = self.threads.len();
            let mut allowed = CpuSet::new();
            allowed.insert(t.cpu);
            let countdown = self.next_sample_gap();
            self.threads.push(Thread {
                pid,
                tid: pid + k as u32,
                name: t.name,
                proc: pi,
                pu: p,
                allowed,
                ready_at: start,
                state: State::Ready,
                end: start,
                migrations: 0,
                hot: Box::new(Hot::new(t.ops, countdown, self.cfg.mlp.max(1), start)),
            });
            self.enqueue(ti, p);
        }
        self.procs.push(Process {
            pid,
            start,
            policy: spec.data_policy,
            page_shift,
            pages: PageTable::default(),
            private_pages: 0,
            turned_shared: 0,
            page_list: crate::hostmem::filled_with_room(0, PAGE_LIST_ROOM, 0u64),
            scan_cursor: u64::MAX,
            armed: 0,
            live: n,
            waiting: Vec::new(),
            barrier_time: 0.0,
            flags: FxMap::default(),
            flag_waiters: FxMap::default(),
        });
        Ok(pid)
    }

    /// Places the pages covering `[vaddr, vaddr + len)` of process `pid` on node `node` without
    /// simulating their first touch (data initialised before the region of interest, as a
    /// benchmark's setup phase). Pages already present move there at no cost.
    pub fn place(&mut self, pid: u32, vaddr: u64, len: u64, node: u32) -> Result<(), SimError> {
        let pi = self.proc_index(pid).ok_or(SimError::NoProcess(pid))?;
        let ni = self
            .machine
            .node_index(node)
            .ok_or(SimError::NoNode(node))?;
        let proc = &mut self.procs[pi];
        let first = vaddr >> proc.page_shift;
        let last = (vaddr + len.max(1) - 1) >> proc.page_shift;
        for vp in first..=last {
            match proc.pages.get(vp) {
                Some(mut pg) => {
                    pg.node = ni as u16;
                    proc.pages.insert(vp, pg);
                }
                None => {
                    proc.pages.insert(
                        vp,
                        Page {
                            node: ni as u16,
                            blocked_until: 0.0,
                            armed: false,
                            sole: 0,
                        },
                    );
                    proc.page_list.push(vp);
                }
            }
        }
        Ok(())
    }

    pub(crate) fn proc_index(&self, pid: u32) -> Option<usize> {
        self.procs.iter().position(|p| p.pid == pid)
    }

    /// Spawns one program and runs to the end (the common case of a single-program experiment).
    /// A program that cannot be spawned (a cpu or node the machine lacks) gives an empty run; use
    /// [`Simulator::spawn`] to see the error.
    pub fn spawn_and_run(mut self, spec: ProcessSpec) -> Report {
        let _ = self.spawn(spec);
        self.run()
    }

    /// Runs until every thread has finished; returns the report.
    pub fn run(&mut self) -> Report {
        self.run_until(f64::INFINITY);
        self.report()
    }

    /// Memory accesses issued so far.
    pub fn accesses(&self) -> u64 {
        self.stats.accesses
    }

    /// Whether threads are left that nothing will ever run again (all waiting at a barrier that
    /// cannot complete): nothing is runnable yet not every thread has finished.
    pub fn stuck(&self) -> bool {
        self.heap.is_empty() && !self.all_done()
    }

    /// Whether every thread has finished.
    pub fn all_done(&self) -> bool {
        self.threads.iter().all(|t| t.state == State::Done)
    }

    /// Lines in the directory (for tests of its bookkeeping). Lines of private pages have none
    /// (`private_lines`).
    pub fn directory_len(&self) -> usize {
        self.dir.len()
    }

    /// Whether lines of pages only one private domain has touched stay out of the directory,
    /// their coherence state in the cache tags (the same figures either way).
    pub fn private_lines(&self) -> bool {
        self.private_lines
    }

    /// This simulator with every line in the directory (`private_lines` off): the same figures,
    /// more host time. For checking that claim; call it before `spawn`.
    #[doc(hidden)]
    pub fn without_private_lines(mut self) -> Self {
        debug_assert_eq!(self.stats.accesses, 0, "private lines turned off mid-run");
        self.private_lines = false;
        self
    }

    /// This simulator without the private-line fast path (`fast.rs`): the same figures, more
    /// host time. For checking that claim and for measuring the path.
    #[doc(hidden)]
    pub fn without_fast_path(mut self) -> Self {
        self.fast_path = false;
        self
    }

    /// This simulator running the fast path's build for any host of the target, not its AVX2
    /// one (tests: the same figures).
    #[cfg(test)]
    fn without_avx2_fast_path(mut self) -> Self {
        self.fast_avx2 = None;
        self
    }

    /// This simulator running the fast path also where a thread is picked while the directory
    /// holds lines (tests: it then meets directory lines, which it hands back; the figures are
    /// the same, the host time longer where lines are shared).
    #[cfg(test)]
    fn with_fast_path_on_directory_lines(mut self) -> Self {
        self.fast_on_directory = true;
        self
    }

    /// The processes' pids in spawn order.
    pub fn pids(&self) -> Vec<u32> {
        self.procs.iter().map(|p| p.pid).collect()
    }
}
