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

use std::cmp::{Ordering, Reverse};
use std::collections::binary_heap::PeekMut;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use numaff_engine::{AccessKind, Sample, TaskId};
use numaff_machine::{CacheKind, Coherence, CpuSet, Machine};

use crate::cache::{
    Avx2, Base, Evicted, Lanes, SetAssoc, EXCLUSIVE, MODIFIED, MODIFIED_OUTER, SHARED,
};
use crate::config::{defaults, SimConfig};
use crate::dir::{
    DirEntry, Directory, Form, FormKind, NarrowForm, PackedForm, WideForm, WriteBack,
};
use crate::fabric::{later, Fabric, LINE};
use crate::linemap::Prefetcher;
use crate::pages::{Page, PageTable, SOLE_SHARED};
use crate::report::{Report, ThreadReport};
use crate::rng::Rng;
use crate::stream::{Access, DataPolicy, Op, OpSource, ProcessSpec};
use crate::window::Window;

mod fast;

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
/// lines would be stored truncated and never hit (found in issue 4's speed round).
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

/// A PU's path in the common shape (issue 4's "path specialised for the common shape"): a first
/// level with no directory bit and nothing inside it, a second private level with its directory
/// bit that keeps exactly the first inclusive, and one shared level with its directory bit and
/// nothing inclusive in it (6 of the 12 catalog machines, laso-hpl among them). Resolved once per
/// PU in `new`, so that an L1 miss runs straight-line code (`access_beyond_l1_3`, `fill3`) instead
/// of the loops over `path`, the per-level `bit` and `inner` tests and the `set_in` compare of the
/// general path; the steps and their order are the general path's, so the model is the same bit
/// for bit (`issue4_common_shape_path_gives_the_general_paths_figures`).
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

/// The first two levels' geometry on a common-shape path as a type, resolved once per `run_pu`
/// (issue 4, change 22): with `P8` both are 8-way with a power-of-two set count, and
/// `access_beyond_l1_3` / `fill3` / `access` use `SetAssoc`'s `*_p8` lookups, which take their set
/// as a mask and a shift and skip `set_of`'s match and `set8`'s way-count test; else the general
/// lookups. Either gives the same answers; only the host instructions differ.
///
/// With `W20` (issue 4, change 23; only with `P8`) the last level is 20-way as well (laso-hpl's,
/// agung-xeon2's and agung-xeon56's L3; `SetAssoc::is_w20`), and its lookups, the victim's `lru`,
/// the fill of an absent line and the set's prefetch work on a set of fixed length (`*_w20`).
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
    /// any, 1 `P8`, 2 `P8` and `W20`. Set once in `new` (issue 4: `run_pu` runs every ~4
    /// accesses of a suite workload, and looked it up every time).
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

/// The fixed fields of a PU and of the thread it runs, copied once per thread picked in `run_pu`
/// (issue 4): the access path reads them from this copy instead of through `self.pus[p]` and
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

/// The part of a thread's state that every access reads or writes (issue 4, change 30). While
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
    /// PU's vectors (issue 4: `run_pu_in` starts about every other access of a workload of
    /// dependent loads, parsec-canneal, and `Cx::of` was 3 % of its host instructions).
    pu_cx: Vec<Cx>,
    threads: Vec<Thread>,
    procs: Vec<Process>,
    dir: Directory,
    heap: BinaryHeap<Reverse<(u64, usize)>>,
    pub(crate) now: f64,
    rng: Rng,
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
    /// Private lines (issue 4, 2026-11-27): a line of a page whose lines only one private
    /// domain (`Pu::domain`: the PUs sharing a second level) has touched (`Page::sole`) has no
    /// directory entry. Its holders are that domain's second and third levels that hold it, and
    /// its dirty bit is in their states: `EXCLUSIVE` clean; in the second level `MODIFIED` dirty
    /// with the third's copy (if any) clean, `MODIFIED_OUTER` dirty with the third holding it
    /// `MODIFIED` too; in the third `MODIFIED` dirty. So a level dropping the line needs to look
    /// at the other only when its copy is `MODIFIED` (to write back the line's last copy, or
    /// hand the dirty bit over), and a clean or `MODIFIED_OUTER` second-level victim costs
    /// nothing. When a second domain touches the page, its lines enter the directory with the
    /// entries the directory would have given them (`share_page`, `private_entry`), and their
    /// states become `SHARED`, as every directory line's in those levels. So the figures are
    /// the directory's, bit for bit (`issue4_private_lines_give_the_directorys_figures`), and a
    /// thread's private data costs no directory probe. On when every PU's path has the common
    /// shape (`Path3`), every tracked cache has its own directory bit (no aliasing, whose
    /// imprecision the states would not repeat), and every PU is on its second and third
    /// levels' node; and only for processes with 4 KiB pages (a page turning shared looks up
    /// each of its lines).
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
    /// PU running must stop, so that the next horizon counts the PUs woken (issue 4).
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
            rng: Rng::new(cfg.seed),
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
    pub fn spawn(&mut self, spec: ProcessSpec) -> Result<u32, String> {
        let pid = 1000 + 100 * self.procs.len() as u32;
        let pi = self.procs.len();
        if pi >= MAX_PROCESSES {
            return Err(format!(
                "too many processes for the simulator ({MAX_PROCESSES} at most)"
            ));
        }
        let node_ok = |id: u32| self.machine.node_index(id).is_some();
        match &spec.data_policy {
            DataPolicy::Bind(n) if !node_ok(*n) => return Err(format!("no node {n}")),
            DataPolicy::Explicit(m) => {
                if let Some((_, n)) = m.iter().find(|(_, n)| !node_ok(**n)) {
                    return Err(format!("no node {n}"));
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
                .ok_or_else(|| format!("thread {}: no cpu {} on this machine", t.name, t.cpu))?;
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
    pub fn place(&mut self, pid: u32, vaddr: u64, len: u64, node: u32) -> Result<(), String> {
        let pi = self
            .proc_index(pid)
            .ok_or_else(|| format!("no process {pid}"))?;
        let ni = self
            .machine
            .node_index(node)
            .ok_or_else(|| format!("no node {node}"))?;
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

    fn next_sample_gap(&mut self) -> u64 {
        match &self.cfg.hw_sampling {
            None => u64::MAX,
            Some(s) => {
                let p = s.period.max(1) as f64;
                let j = s.jitter.clamp(0.0, 1.0);
                let f = 1.0 + j * (2.0 * self.rng.unit() - 1.0);
                ((p * f).round() as u64).max(1)
            }
        }
    }

    fn enqueue(&mut self, ti: usize, p: usize) {
        self.pus[p].runq.push_back(ti);
        if !self.pus[p].in_heap {
            self.pus[p].in_heap = true;
            self.woke = true;
            // An idle PU's clock catches up with `now`, the end of the last `run_until` round (it
            // lags the running PUs within a round); a woken thread's `ready_at` holds it further.
            let c = self.pus[p].clock.max(self.now);
            self.pus[p].clock = c;
            self.pus[p].slice_end = c + self.cfg.slice_ns;
            self.heap.push(Reverse((c.to_bits(), p)));
        }
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

    /// Simulates until every PU's clock has reached `limit` ns (or nothing is left to run).
    ///
    /// The heap orders the runnable PUs by clock (ties by index; clocks are `>= 0`, so their bits
    /// order as the values do): the PU furthest behind runs next, up to `quantum_ns` past the
    /// next one's clock, so that PUs interleave in simulated time. Each PU is in the heap at most
    /// once (`in_heap`), so the keys are distinct and any correct heap pops them in the same
    /// order. The PU that runs stays at the top while it runs instead of a pop and a push (issue
    /// 4): the next clock is the smaller of the top's children (what `peek` would give after a
    /// `pop`), and its new key is written in place (`PeekMut`, one sift down). A PU that
    /// `run_pu` enqueues (a thread woken by a barrier or a post) may get above it meanwhile: then
    /// it is found and taken out (`retain`), as rarely as wake-ups happen.
    pub(crate) fn run_until(&mut self, limit: f64) {
        while let Some(&Reverse((bits, p))) = self.heap.peek() {
            let clock = f64::from_bits(bits);
            if clock >= limit {
                break;
            }
            if clock >= self.next_induced {
                self.induce_faults();
                continue;
            }
            if clock >= self.next_balance {
                self.os_balance();
                continue;
            }
            let below = self.heap.as_slice();
            let next = match (below.get(1), below.get(2)) {
                (Some(Reverse((a, _))), Some(Reverse((b, _)))) => f64::from_bits(*a.min(b)),
                (Some(Reverse((a, _))), None) => f64::from_bits(*a),
                _ => f64::INFINITY,
            };
            let horizon = (next + self.cfg.quantum_ns)
                .min(limit)
                .min(self.next_induced)
                .min(self.next_balance);
            self.run_pu(p, horizon);
            let keep = !self.pus[p].runq.is_empty();
            let key = Reverse((self.pus[p].clock.to_bits(), p));
            let on_top = self.heap.peek().is_some_and(|Reverse((_, q))| *q == p);
            if on_top {
                if let Some(mut top) = self.heap.peek_mut() {
                    if keep {
                        *top = key;
                    } else {
                        PeekMut::pop(top);
                    }
                }
            } else {
                self.heap.retain(|Reverse((_, q))| *q != p);
                if keep {
                    self.heap.push(key);
                }
            }
            if !keep {
                self.pus[p].in_heap = false;
            }
        }
        if limit.is_finite() {
            self.now = self.now.max(limit);
        } else {
            let end = self.threads.iter().map(|t| t.end).fold(self.now, f64::max);
            self.now = end;
        }
    }

    fn induce_faults(&mut self) {
        let Some(cfg) = self.cfg.induced_faults.clone() else {
            self.next_induced = f64::INFINITY;
            return;
        };
        for pi in 0..self.procs.len() {
            let n = self.procs[pi].page_list.len() as u64;
            let k = (n as f64 * cfg.fraction.clamp(0.0, 1.0)).round() as u64;
            for _ in 0..k {
                let i = if cfg.scan {
                    self.procs[pi].scan_cursor = self.procs[pi].scan_cursor.wrapping_add(1) % n;
                    self.procs[pi].scan_cursor as usize
                } else {
                    self.rng.below(n) as usize
                };
                let vp = self.procs[pi].page_list[i];
                if let Some(mut pg) = self.procs[pi].pages.get(vp) {
                    if !pg.armed {
                        pg.armed = true;
                        self.procs[pi].pages.insert(vp, pg);
                        self.procs[pi].armed += 1;
                    }
                }
            }
        }
        self.next_induced += cfg.interval_ns.max(1) as f64;
    }

    /// One round of the Linux-like balancer ([`crate::OsScheduler`]) at time `next_balance`.
    fn os_balance(&mut self) {
        let Some(cfg) = self.cfg.os_scheduler.clone() else {
            self.next_balance = f64::INFINITY;
            return;
        };
        let at = self.next_balance;
        self.next_balance += cfg.interval_ns.max(1) as f64;
        let live: Vec<usize> = (0..self.threads.len())
            .filter(|&t| {
                self.threads[t].state != State::Done && self.procs[self.threads[t].proc].start <= at
            })
            .collect();
        if live.is_empty() {
            if self.all_done() {
                self.next_balance = f64::INFINITY;
            }
            return;
        }
        let mut load = vec![0usize; self.pus.len()];
        for &t in &live {
            load[self.threads[t].pu] += 1;
        }
        let mut moved = vec![false; self.threads.len()];
        // Load balance: threads sharing a PU go to idle PUs.
        for &t in &live {
            let from = self.threads[t].pu;
            if load[from] > 1 {
                let idle: Vec<usize> = (0..self.pus.len()).filter(|&p| load[p] == 0).collect();
                if idle.is_empty() {
                    break;
                }
                let to = idle[self.rng.below(idle.len() as u64) as usize];
                load[from] -= 1;
                load[to] += 1;
                self.relocate(t, to, at);
                moved[t] = true;
            }
        }
        // Occasional moves of balanced threads: to an idle PU, or a swap.
        for &t in &live {
            if moved[t] || self.rng.unit() >= cfg.move_probability {
                continue;
            }
            let from = self.threads[t].pu;
            let idle: Vec<usize> = (0..self.pus.len()).filter(|&p| load[p] == 0).collect();
            if !idle.is_empty() {
                let to = idle[self.rng.below(idle.len() as u64) as usize];
                load[from] -= 1;
                load[to] += 1;
                self.relocate(t, to, at);
            } else {
                let others: Vec<usize> = live
                    .iter()
                    .copied()
                    .filter(|&o| !moved[o] && self.threads[o].pu != from)
                    .collect();
                if others.is_empty() {
                    continue;
                }
                let o = others[self.rng.below(others.len() as u64) as usize];
                let to = self.threads[o].pu;
                self.relocate(t, to, at);
                self.relocate(o, from, at);
                moved[o] = true;
            }
            moved[t] = true;
        }
    }

    /// Moves thread `ti` to PU `to` at time `at` (the balancer's moves): its outstanding accesses
    /// complete, it pays the migration cost, and its caches stay behind.
    fn relocate(&mut self, ti: usize, to: usize, at: f64) {
        let from = self.threads[ti].pu;
        if from == to {
            return;
        }
        let cost = self.cfg.thread_migration_ns;
        let th = &mut self.threads[ti];
        let drained = th.hot.window.drain(at);
        th.pu = to;
        th.migrations += 1;
        th.ready_at = th.ready_at.max(drained) + cost;
        th.allowed = CpuSet::new();
        th.allowed.insert(self.pus[to].cpu);
        self.stats.migrations += 1;
        self.stats.migration_cost += cost;
        if self.threads[ti].state == State::Ready {
            self.pus[from].runq.retain(|&x| x != ti);
            self.enqueue(ti, to);
        }
    }

    /// The thread to run next on PU `p`, handling time slices; None when its run queue is empty.
    fn pick(&mut self, p: usize) -> Option<usize> {
        let slice = self.cfg.slice_ns;
        let cs = self.cfg.context_switch_ns;
        let pu = &mut self.pus[p];
        let front = *pu.runq.front()?;
        if pu.runq.len() == 1 {
            // One thread (issue 4: the common case, every ~4 accesses of a suite workload): what
            // the general steps below do for it, without the scans and the rotation by 0. Not
            // ready yet: the clock jumps to its `ready_at` (the fold's minimum, infinite for an
            // infinite or NaN `ready_at`, which no `<` picks).
            let r = self.threads[front].ready_at;
            if !matches!(
                r.partial_cmp(&pu.clock),
                Some(Ordering::Less | Ordering::Equal)
            ) {
                pu.clock = if r < f64::INFINITY { r } else { f64::INFINITY };
            }
            pu.slice_end = pu.clock + slice;
            return Some(front);
        }
        if pu.runq.len() > 1 && pu.clock >= pu.slice_end {
            let th = &mut self.threads[front];
            let drained = th.hot.window.drain(pu.clock);
            pu.clock = drained + cs;
            pu.runq.rotate_left(1);
            pu.slice_end = pu.clock + slice;
        } else if pu.runq.len() == 1 {
            pu.slice_end = pu.clock + slice;
        }
        let threads = &self.threads;
        let k = pu
            .runq
            .iter()
            .position(|&t| threads[t].ready_at <= pu.clock);
        match k {
            Some(k) => {
                pu.runq.rotate_left(k);
            }
            None => {
                let (k, at) = pu
                    .runq
                    .iter()
                    .enumerate()
                    .map(|(k, &t)| (k, threads[t].ready_at))
                    .fold((0, f64::INFINITY), |a, b| if b.1 < a.1 { b } else { a });
                pu.runq.rotate_left(k);
                pu.clock = at;
                pu.slice_end = at + slice;
            }
        }
        pu.runq.front().copied()
    }

    fn run_pu(&mut self, p: usize, horizon: f64) {
        // The directory's form, matched once here instead of on every lookup (`dir::Form`).
        // And the first two levels' geometry on a common-shape path (`Geom`, `Pu::geom`).
        match (self.dir.kind(), self.pus[p].geom) {
            (FormKind::Packed, 0) => self.run_pu_in::<PackedForm, AnyGeom>(p, horizon),
            (FormKind::Narrow, 0) => self.run_pu_in::<NarrowForm, AnyGeom>(p, horizon),
            (FormKind::Wide, 0) => self.run_pu_in::<WideForm, AnyGeom>(p, horizon),
            (FormKind::Packed, 1) => self.run_pu_in::<PackedForm, P8Geom>(p, horizon),
            (FormKind::Narrow, 1) => self.run_pu_in::<NarrowForm, P8Geom>(p, horizon),
            (FormKind::Wide, 1) => self.run_pu_in::<WideForm, P8Geom>(p, horizon),
            (FormKind::Packed, _) => self.run_pu_in::<PackedForm, P8W20Geom>(p, horizon),
            (FormKind::Narrow, _) => self.run_pu_in::<NarrowForm, P8W20Geom>(p, horizon),
            (FormKind::Wide, _) => self.run_pu_in::<WideForm, P8W20Geom>(p, horizon),
        }
    }

    /// `run_pu` with the directory's form `D` and the first two levels' geometry `G`.
    fn run_pu_in<D: Form, G: Geom>(&mut self, p: usize, horizon: f64) {
        // The horizon counts the PUs runnable now: when an op of this PU wakes others (a barrier
        // that completes, a post, a thread that ends), it stops after that op, and `run_until`
        // lets them catch up. Before issue 4's fix it ran on to the old horizon, infinite when it
        // had been the only PU left running: the last thread to reach a barrier then ran its
        // whole next phase (100 µs in nas-bt) ahead of the threads it had just released.
        self.woke = false;
        loop {
            let Some(ti) = self.pick(p) else { return };
            let pi = self.threads[ti].proc;
            let pr = &self.procs[pi];
            let private = self.private_lines && pr.page_shift == 12;
            let cx = Cx {
                pi,
                armed: pr.armed > 0,
                private,
                dir_used: self.dir.len() > 0,
                ..self.pu_cx[p]
            };
            // The thread's hot state is `self.run` until this loop is left (`stop`).
            std::mem::swap(&mut self.run, &mut self.threads[ti].hot);
            // Run this thread until the horizon, its slice's end (when others wait), or it stops.
            // Only `pick` changes the slice's end. The PU's clock is `clock` while accesses run
            // (`step` takes and returns it), and written back before any other op and every exit.
            let shared = self.pus[p].runq.len() > 1;
            let slice_end = self.pus[p].slice_end;
            let mut clock = self.pus[p].clock;
            // Private lines on a `P8W20Geom` path: the fast path (`fast.rs`) while it applies.
            let mut fast = G::P8
                && G::W20
                && self.fast_path
                && cx.private
                && (!cx.dir_used || self.fast_on_directory)
                && !cx.armed
                && cx.p3.is_some();
            let limit = if shared { slice_end } else { f64::INFINITY };
            loop {
                // Only towards a far horizon: a run of a few accesses (PUs a quantum apart) costs
                // the loop's entry and exit more than it saves.
                if fast && horizon - clock > self.fast_min_run_ns {
                    (clock, fast) = self.run_fast::<D, G>(ti, &cx, clock, horizon, limit);
                }
                if clock > horizon {
                    self.pus[p].clock = clock;
                    self.stop(ti);
                    return;
                }
                if shared && clock >= slice_end {
                    self.pus[p].clock = clock;
                    break;
                }
                let op = self.next_op::<D, G>(&cx);
                if let Some(Op::Access(a)) = op {
                    clock = self.step::<D, G>(ti, &cx, a, clock);
                    continue;
                }
                self.pus[p].clock = clock;
                match op {
                    None => {
                        self.finish(ti, p);
                        break;
                    }
                    Some(Op::Compute(c)) => self.pus[p].clock += c as f64 * self.cycle_ns,
                    Some(Op::Barrier) => {
                        self.barrier(ti, p);
                        break;
                    }
                    Some(Op::Post(id)) => self.post(ti, p, id),
                    Some(Op::Wait(id)) => {
                        if self.wait(ti, p, id) {
                            break;
                        }
                    }
                    Some(Op::Access(_)) => {}
                }
                clock = self.pus[p].clock;
                if self.woke {
                    self.stop(ti);
                    return;
                }
            }
            self.stop(ti);
            if self.woke {
                return;
            }
        }
    }

    /// Gives the thread `ti` that `run_pu_in` ran its hot state back (`Simulator::run`).
    fn stop(&mut self, ti: usize) {
        std::mem::swap(&mut self.run, &mut self.threads[ti].hot);
    }

    /// The next op of thread `ti` (running on PU `p`), from its lookahead buffer, which is kept
    /// `LOOKAHEAD` ops full. An access entering the buffer gets its host fetches started (its sets
    /// on `p`'s path, its directory slot, its page slot); the access `VICTIM_AHEAD` from the front
    /// gets the directory slots of its sets' least recently used lines started. Hints only: what
    /// is simulated does not depend on them. While the directory is empty (`Cx::dir_used`: a run
    /// of private pages, such as one thread's) neither directory slots nor victims are fetched:
    /// at 1 GiB they cost 6 % of the instructions and 5 % of the time and saved nothing (issue 4,
    /// 2026-12-05).
    #[inline]
    fn next_op<D: Form, G: Geom>(&mut self, cx: &Cx) -> Option<Op> {
        let th = &mut *self.run;
        let pi = cx.pi;
        let fetch = th.l1_misses > 0;
        th.l1_misses = th.l1_misses.saturating_sub(1);
        if !fetch {
            // Hitting the first level: no fetches to start; run what was pulled, then pull
            // straight from the generator.
            if th.ahead_len == 0 {
                self.cur_llc = NO_SET;
                self.cur_page = NO_PAGE;
                return th.pull();
            }
        }
        // The directory does not change before this returns: its form and layout read once,
        // if it holds a line (`Cx::dir_used`).
        let dp = if cx.dir_used {
            Some(self.dir.prefetcher::<D>())
        } else {
            None
        };
        while fetch && usize::from(th.ahead_len) < LOOKAHEAD {
            let Some(op) = th.pull() else {
                break;
            };
            let slot = (usize::from(th.ahead_head) + usize::from(th.ahead_len)) % LOOKAHEAD;
            th.ahead[slot] = op;
            th.ahead_len += 1;
            if let Op::Access(a) = op {
                let key = ((pi as u64) << ASID_SHIFT) | ((a.vaddr >> 6) & LINE_MASK);
                // The inner levels' tags are small enough to stay in the host's caches.
                let mut llc_set = NO_SET;
                if let Some(llc) = cx.llc {
                    let c = &self.caches[llc].cache;
                    let base = c.set_of(key);
                    // With `G::W20` the PU's last level is its `Path3`'s, 20-way.
                    if G::W20 {
                        c.prefetch_w20(base);
                    } else {
                        c.prefetch_in(base);
                    }
                    llc_set = (llc, base);
                }
                th.ahead_llc[slot] = llc_set;
                if let Some(dp) = dp {
                    dp.fetch(key);
                }
                let pr = &self.procs[pi];
                th.ahead_page[slot] = pr
                    .pages
                    .prefetch(a.vaddr >> pr.page_shift)
                    .unwrap_or(NO_PAGE);
            }
        }
        if let (true, Some(dp)) = (fetch && usize::from(th.ahead_len) > VICTIM_AHEAD, dp) {
            let slot = (usize::from(th.ahead_head) + VICTIM_AHEAD) % LOOKAHEAD;
            if let Op::Access(a) = th.ahead[slot] {
                let key = ((pi as u64) << ASID_SHIFT) | ((a.vaddr >> 6) & LINE_MASK);
                let (llc, base) = th.ahead_llc[slot];
                if let Some(f) = cx.p3 {
                    // The common shape: both levels after the first have a directory bit.
                    let c2 = &mut self.caches[f.l2].cache;
                    let lru2 = if G::P8 { c2.lru_p8(key) } else { c2.lru(key) };
                    if let Some(victim) = lru2 {
                        Self::prefetch_victim2(&self.caches, &dp, f, victim);
                    }
                    let c = &self.caches[f.l3].cache;
                    let lru = match (f.l3 == llc, G::W20) {
                        (true, true) => c.lru_w20(base),
                        (true, false) => c.lru_in(base),
                        (false, _) => c.lru(key),
                    };
                    if let Some(victim) = lru {
                        Self::prefetch_victim3(&self.procs, &dp, victim);
                    }
                } else {
                    for &k in self.pus[cx.p].path.iter().skip(1) {
                        let c = &self.caches[k];
                        if c.bit.is_some() {
                            let lru = if k == llc {
                                c.cache.lru_in(base)
                            } else {
                                c.cache.lru(key)
                            };
                            if let Some(victim) = lru {
                                dp.fetch(victim.line());
                            }
                        }
                    }
                }
            }
        }
        if th.ahead_len == 0 {
            return None;
        }
        let op = th.ahead[usize::from(th.ahead_head)];
        self.cur_llc = th.ahead_llc[usize::from(th.ahead_head)];
        self.cur_page = th.ahead_page[usize::from(th.ahead_head)];
        th.ahead_head = ((usize::from(th.ahead_head) + 1) % LOOKAHEAD) as u8;
        th.ahead_len -= 1;
        Some(op)
    }

    fn drain(&mut self, p: usize) -> f64 {
        let th = &mut *self.run;
        let t = th.window.drain(self.pus[p].clock);
        self.pus[p].clock = t;
        t
    }

    fn finish(&mut self, ti: usize, p: usize) {
        let t = self.drain(p);
        let th = &mut self.threads[ti];
        th.end = t;
        th.state = State::Done;
        self.pus[p].runq.retain(|&x| x != ti);
        let pi = th.proc;
        self.procs[pi].live -= 1;
        self.check_barrier(pi);
    }

    fn barrier(&mut self, ti: usize, p: usize) {
        let t = self.drain(p);
        self.threads[ti].state = State::Blocked;
        self.pus[p].runq.retain(|&x| x != ti);
        let pi = self.threads[ti].proc;
        let pr = &mut self.procs[pi];
        pr.barrier_time = pr.barrier_time.max(t);
        pr.waiting.push(ti);
        self.check_barrier(pi);
    }

    /// `Op::Post`: the flag is set when the thread's outstanding accesses are done (the item's
    /// stores reached the caches); threads waiting for it resume then.
    fn post(&mut self, ti: usize, p: usize, id: u64) {
        let t = self.drain(p);
        let pi = self.threads[ti].proc;
        let pr = &mut self.procs[pi];
        let set = *pr.flags.entry(id).or_insert(t);
        let Some(waiters) = pr.flag_waiters.remove(&id) else {
            return;
        };
        for w in waiters {
            let th = &mut self.threads[w];
            th.state = State::Ready;
            th.ready_at = th.ready_at.max(set);
            let q = th.pu;
            self.enqueue(w, q);
        }
    }

    /// `Op::Wait`: true when the thread blocks (the flag is not set yet).
    fn wait(&mut self, ti: usize, p: usize, id: u64) -> bool {
        let pi = self.threads[ti].proc;
        if let Some(&set) = self.procs[pi].flags.get(&id) {
            let c = &mut self.pus[p].clock;
            *c = c.max(set);
            return false;
        }
        let t = self.drain(p);
        let th = &mut self.threads[ti];
        th.state = State::Blocked;
        th.ready_at = t;
        self.pus[p].runq.retain(|&x| x != ti);
        self.procs[pi].flag_waiters.entry(id).or_default().push(ti);
        true
    }

    fn check_barrier(&mut self, pi: usize) {
        let pr = &mut self.procs[pi];
        if pr.waiting.is_empty() || pr.waiting.len() < pr.live {
            return;
        }
        let t = pr.barrier_time;
        let waiting = std::mem::take(&mut pr.waiting);
        pr.barrier_time = 0.0;
        for ti in waiting {
            let th = &mut self.threads[ti];
            th.state = State::Ready;
            th.ready_at = t;
            let p = th.pu;
            self.enqueue(ti, p);
        }
    }

    /// One access of thread `ti` on PU `cx.p`, whose clock is `clock` (`self.pus[p].clock` is not
    /// read: `run_pu_in` keeps the clock while accesses run); returns the PU's clock after it.
    #[inline(always)]
    fn step<D: Form, G: Geom>(&mut self, ti: usize, cx: &Cx, a: Access, clock: f64) -> f64 {
        let p = cx.p;
        let t = self
            .run
            .issue(a, clock, self.cfg.issue_cycles, self.cycle_ns);
        // `armed` only falls while `run_pu` runs (`induce_faults` arms pages between its calls).
        let induced = if cx.armed && self.procs[cx.pi].armed > 0 {
            self.induced_fault(ti, p, t, a.vaddr)
        } else {
            0.0
        };
        let (lat, mut stall) = self.access::<D, G>(ti, cx, t, a);
        stall += induced;
        self.step_end(ti, p, t, lat, stall, a)
    }

    /// The end of `step` for an access issued at `t` that takes `lat` after a stall of `stall`:
    /// the clock after it, a hardware sample if it is due.
    #[inline(always)]
    fn step_end(
        &mut self,
        ti: usize,
        p: usize,
        mut t: f64,
        lat: f64,
        stall: f64,
        a: Access,
    ) -> f64 {
        if stall > 0.0 {
            self.pus[p].clock = t;
            t = self.drain(p) + stall;
        }
        let th = &mut *self.run;
        th.complete(t, lat);
        if th.sample_countdown != u64::MAX {
            th.sample_countdown -= 1;
            if th.sample_countdown == 0 {
                // A sample may stall the PU (`hw_sample` adds its cost to the clock).
                self.pus[p].clock = t;
                self.hw_sample(ti, p, t, lat, a);
                return self.pus[p].clock;
            }
        }
        t
    }

    /// Records a sample of thread `ti` on PU `p` at time `t` (what every sampler emits).
    fn record_sample(
        &mut self,
        ti: usize,
        p: usize,
        t: f64,
        vaddr: u64,
        kind: AccessKind,
        latency_ns: Option<f64>,
    ) {
        let th = &self.threads[ti];
        self.samples.push(Sample {
            time_ns: t as u64,
            pid: th.pid,
            tid: th.tid,
            cpu: self.pus[p].cpu,
            node: self.pus[p].node_id,
            vaddr,
            kind,
            latency_ns,
        });
        self.stats.samples += 1;
    }

    /// An access to a page marked by the induced-fault sampler faults: one `Fault` sample, and the
    /// cost as a stall. Returns the stall.
    fn induced_fault(&mut self, ti: usize, p: usize, t: f64, vaddr: u64) -> f64 {
        let pi = self.threads[ti].proc;
        let pr = &mut self.procs[pi];
        let vp = vaddr >> pr.page_shift;
        let Some(mut pg) = pr.pages.get(vp) else {
            return 0.0;
        };
        if !pg.armed {
            return 0.0;
        }
        pg.armed = false;
        pr.pages.insert(vp, pg);
        pr.armed -= 1;
        self.record_sample(ti, p, t, vaddr, AccessKind::Fault, None);
        self.cfg
            .induced_faults
            .as_ref()
            .map(|f| f.cost_ns)
            .unwrap_or(0.0)
    }

    fn hw_sample(&mut self, ti: usize, p: usize, t: f64, lat: f64, a: Access) {
        let gap = self.next_sample_gap();
        self.run.sample_countdown = gap;
        let Some(s) = &self.cfg.hw_sampling else {
            return;
        };
        if lat < s.min_latency_ns {
            return;
        }
        let cost = s.cost_ns;
        let kind = if a.write {
            AccessKind::Store
        } else {
            AccessKind::Load
        };
        self.record_sample(ti, p, t, a.vaddr, kind, Some(lat));
        self.pus[p].clock += cost;
    }

    /// One access through the cache hierarchy: (latency, stall before it such as a page fault).
    /// A hit in the first level (most accesses of most runs) is handled here and returns before
    /// the code of the other levels, which `access_beyond_l1` holds (one call site, inlined): the
    /// same steps as one loop over the levels, in code the compiler lays out better for the hit.
    #[inline]
    fn access<D: Form, G: Geom>(&mut self, ti: usize, cx: &Cx, t: f64, a: Access) -> (f64, f64) {
        let key = ((cx.pi as u64) << ASID_SHIFT) | ((a.vaddr >> 6) & LINE_MASK);
        self.stats.accesses += 1;
        let first = cx.l1.and_then(|k| {
            self.stats.probes[0] += 1;
            // With `G::P8` the PU has a `Path3` whose first level is `k` and has no directory bit.
            let st = if G::P8 {
                self.caches[k].cache.touch_p8(key)
            } else {
                self.caches[k].cache.touch(key)
            };
            if !G::P8 && st.is_none() && self.caches[k].bit.is_some() {
                // The first level missed: as the loop in `access_beyond_l1` does after a miss.
                if let Some(victim) = self.caches[k].cache.lru(key) {
                    self.dir.prefetch::<D>(victim.line());
                }
            }
            Some((k, st?))
        });
        let Some((k, st)) = first else {
            return match cx.p3 {
                Some(f) => self.access_beyond_l1_3::<D, G>(ti, cx, t, a, key, f),
                None => self.access_beyond_l1::<D, G>(ti, cx, t, a, key),
            };
        };
        self.stats.hits[0] += 1;
        let lat = cx.lat3[0];
        // A read of a private level's line, or a write of a line written already, ends here. One
        // branch on both, without `&&`'s on `a.write` alone: whether an access writes is as random
        // as the workload's mix, whether the line ends here much less (issue 4: 0.38 mispredictions
        // an access at 16 KiB before, 0.08 after, callgrind's branch simulation).
        let read_private = !a.write & (0 < cx.n_private);
        if read_private | (a.write & (st == MODIFIED)) {
            return (lat, 0.0);
        }
        if a.write && st == EXCLUSIVE {
            // A private line's dirty bit is its second level's state (`private_lines`); the
            // second level keeps the first inclusive, so it holds the line.
            let private = cx.private
                && cx.p3.is_some_and(|f| {
                    let st2 = self.caches[f.l2].cache.write_private(key);
                    debug_assert!(st2.is_some(), "a first-level line outside the second");
                    st2.is_some_and(|s| s != SHARED)
                });
            if !private {
                self.dir.update::<D, _>(key, |e| e.dirty = true);
            }
            self.caches[k].cache.set_state(key, MODIFIED);
            return (lat, 0.0);
        }
        self.coherent::<D, G>(ti, cx, key, t, a.write, Some(0), true)
    }

    /// The rest of `access` after the first level missed (or when the path has no level): the
    /// levels after the first, then the coherence actions. A hit here is never in the first level.
    #[inline(always)]
    fn access_beyond_l1<D: Form, G: Geom>(
        &mut self,
        ti: usize,
        cx: &Cx,
        t: f64,
        a: Access,
        key: u64,
    ) -> (f64, f64) {
        let p = cx.p;
        let pu = &self.pus[p];
        let mut hit = None;
        for (pos, &k) in pu.path.iter().enumerate().skip(1) {
            if pos == 1 && self.run.l1_misses == 0 {
                // The first level missed after a run of hits, so `next_op` started no fetches
                // for this access: start the host's fetches of the last level's set, the line's
                // directory slot and its page's slot now, so that their host misses overlap.
                if let Some(&llc) = pu.path.last() {
                    let c = &self.caches[llc].cache;
                    let base = c.set_of(key);
                    c.prefetch_in(base);
                    self.cur_llc = (llc, base);
                }
                self.dir.prefetch::<D>(key);
                let pr = &self.procs[cx.pi];
                self.cur_page = pr
                    .pages
                    .prefetch(a.vaddr >> pr.page_shift)
                    .unwrap_or(NO_PAGE);
            }
            self.stats.probes[pos.min(7)] += 1;
            let base = self.set_in(k, key);
            if self.caches[k].cache.touch_in(base, key).is_some() {
                hit = Some(pos);
                break;
            }
            // A tracked level missed: the fill that follows will most likely evict its least
            // recently used line, whose directory entry will then be updated; start that fetch.
            if self.caches[k].bit.is_some() {
                if let Some(victim) = self.caches[k].cache.lru_in(base) {
                    self.dir.prefetch::<D>(victim.line());
                }
            }
        }
        self.run.l1_misses = 2 * LOOKAHEAD as u8;
        if let Some(pos) = hit {
            self.stats.hits[pos.min(7)] += 1;
            if !a.write && pos < pu.n_private {
                for q in 0..pos {
                    let k = self.pus[p].path[q];
                    self.caches[k].cache.fill_absent(key, SHARED);
                }
                return (pu.lat[pos], 0.0);
            }
        }
        self.coherent::<D, G>(ti, cx, key, t, a.write, hit, false)
    }

    /// `access_beyond_l1` for a PU whose path has the common shape `f` (`Path3`): the same steps
    /// in the same order, as straight-line code. The second level's set is computed here: `set_of`
    /// depends only on the cache and the key, so it is the one `set_in` would give.
    #[inline(always)]
    fn access_beyond_l1_3<D: Form, G: Geom>(
        &mut self,
        ti: usize,
        cx: &Cx,
        t: f64,
        a: Access,
        key: u64,
        f: Path3,
    ) -> (f64, f64) {
        // Whether `next_op` ran its lookahead for this access: it then started the fetches of
        // the sets and directory slots below, its victims' included (`VICTIM_AHEAD`).
        let ahead = self.run.l1_misses > 0;
        if !ahead {
            // As in `access_beyond_l1`: start the fetches `next_op` did not start.
            let c = &self.caches[f.l3].cache;
            let base = c.set_of(key);
            if G::W20 {
                c.prefetch_w20(base);
            } else {
                c.prefetch_in(base);
            }
            self.cur_llc = (f.l3, base);
            self.dir.prefetch::<D>(key);
            let pr = &self.procs[cx.pi];
            self.cur_page = pr
                .pages
                .prefetch(a.vaddr >> pr.page_shift)
                .unwrap_or(NO_PAGE);
        }
        self.stats.probes[1] += 1;
        let c2 = &mut self.caches[f.l2].cache;
        let hit2 = if G::P8 {
            c2.touch_p8(key)
        } else {
            c2.touch_in(c2.set_of(key), key)
        };
        if hit2.is_some() {
            self.run.l1_misses = 2 * LOOKAHEAD as u8;
            self.stats.hits[1] += 1;
            if !a.write {
                // A read hit in the private second level: the line into the first level only.
                let c1 = &mut self.caches[f.l1].cache;
                if G::P8 {
                    c1.fill_absent_p8(key, SHARED);
                } else {
                    c1.fill_absent(key, SHARED);
                }
                return (cx.lat3[1], 0.0);
            }
            // A `SHARED` line is in the directory; another is private to this domain.
            let maybe_private = hit2 != Some(SHARED);
            return self.coherent::<D, G>(ti, cx, key, t, true, Some(1), maybe_private);
        }
        if !ahead {
            let c2 = &mut self.caches[f.l2].cache;
            let lru2 = if G::P8 { c2.lru_p8(key) } else { c2.lru(key) };
            if let Some(v) = lru2 {
                Self::prefetch_victim2(&self.caches, &self.dir.prefetcher::<D>(), f, v);
            }
        }
        self.stats.probes[2] += 1;
        let base3 = self.set_in(f.l3, key);
        let c3 = &mut self.caches[f.l3].cache;
        let hit3 = if G::W20 {
            c3.touch_w20(base3, key)
        } else {
            c3.touch_in(base3, key)
        };
        let hit = if hit3.is_some() {
            Some(2)
        } else {
            if !ahead {
                let lru3 = if G::W20 {
                    c3.lru_w20(base3)
                } else {
                    c3.lru_in(base3)
                };
                if let Some(v) = lru3 {
                    Self::prefetch_victim3(&self.procs, &self.dir.prefetcher::<D>(), v);
                }
            }
            None
        };
        self.run.l1_misses = 2 * LOOKAHEAD as u8;
        if hit.is_some() {
            self.stats.hits[2] += 1;
        }
        self.l3_tail::<D, G>(ti, cx, f, key, t, a.write, hit3)
    }

    /// The end of `access_beyond_l1_3` once the third level's lookup gave `hit3` (the first two
    /// levels missed): the coherence actions. A private line's are inlined; a line the third
    /// level holds `SHARED` is in the directory, so its page is shared: no need to look the page
    /// up.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn l3_tail<D: Form, G: Geom>(
        &mut self,
        ti: usize,
        cx: &Cx,
        f: Path3,
        key: u64,
        t: f64,
        write: bool,
        hit3: Option<u8>,
    ) -> (f64, f64) {
        let hit = hit3.map(|_| 2);
        if cx.private && hit3 != Some(SHARED) && self.private_page::<D>(cx, key) {
            let l3_dirty = hit3 == Some(MODIFIED);
            return self.coherent_private::<D, G>(ti, cx, f, key, t, write, hit, l3_dirty);
        }
        self.coherent::<D, G>(ti, cx, key, t, write, hit, false)
    }

    /// Starts the host's fetch of what the eviction of `v` from the second level of `f` will
    /// look up: its directory slot, or for a private line left dirty there (`private_lines`)
    /// its set in the third level (`private_victim2`).
    #[inline(always)]
    fn prefetch_victim2(caches: &[CacheInst], dp: &Prefetcher, f: Path3, v: Evicted) {
        match v.state() {
            SHARED => dp.fetch(v.line()),
            MODIFIED => caches[f.l3].cache.prefetch(v.line()),
            _ => {}
        }
    }

    /// `prefetch_victim2` for a third-level victim: a dirty private line's page entry, for its
    /// domain (`private_victim3`) and its writeback.
    #[inline(always)]
    fn prefetch_victim3(procs: &[Process], dp: &Prefetcher, v: Evicted) {
        match v.state() {
            SHARED => dp.fetch(v.line()),
            MODIFIED => {
                if let Some(pr) = procs.get((v.line() >> ASID_SHIFT) as usize) {
                    pr.pages
                        .prefetch(((v.line() & LINE_MASK) << 6) >> pr.page_shift);
                }
            }
            _ => {}
        }
    }

    /// The first entry of `key`'s set in cache `k`: the one `next_op` computed for the current
    /// access when `k` is its last-level cache, else computed here.
    #[inline(always)]
    fn set_in(&self, k: usize, key: u64) -> usize {
        let c = &self.caches[k].cache;
        if self.cur_llc.0 == k {
            debug_assert_eq!(self.cur_llc.1, c.set_of(key), "stale last-level set");
            self.cur_llc.1
        } else {
            c.set_of(key)
        }
    }

    /// The coherence actions of an access that reached the directory: a hit at path level `hit`
    /// (None: every level missed). A line that may be private (`maybe_private`: false when its
    /// state in a tracked level said `SHARED`, or the caller looked already) goes to
    /// `coherent_private` if its page is private to this domain; only writes hitting the first
    /// or second level come here so (`access_beyond_l1_3` dispatches the others itself).
    #[allow(clippy::too_many_arguments)]
    fn coherent<D: Form, G: Geom>(
        &mut self,
        ti: usize,
        cx: &Cx,
        key: u64,
        t: f64,
        write: bool,
        hit: Option<usize>,
        maybe_private: bool,
    ) -> (f64, f64) {
        if maybe_private && cx.private {
            if let Some(f) = cx.p3 {
                if self.private_page::<D>(cx, key) {
                    return self.coherent_private::<D, G>(ti, cx, f, key, t, write, hit, false);
                }
            }
        }
        let p = cx.p;
        // One probe of the directory for the read here and the write below (`insert_at`): in
        // between only caches, the fabric and page tables change, never the directory.
        let (at, e) = self.dir.entry::<D>(key);
        let node = cx.node;
        let path_bits = cx.path_bits;
        let others = and_not(e.holders, path_bits);
        let owner = (e.owner as usize).checked_sub(1);
        // Another PU's caches hold the line beyond this path's (not only a cache both share).
        let owner_other = owner.filter(|&o| {
            let held = [
                e.holders[0] & self.pus[o].path_bits[0],
                e.holders[1] & self.pus[o].path_bits[1],
            ];
            o != p && any(and_not(held, path_bits))
        });
        // An access that hits a level outside the owner's path finds a current copy there: the
        // owner has not written since that level got it (a write invalidates every copy outside
        // its path). Only MOESI's Owned lines (dirty, shared) get there: a read is a hit, a
        // write an upgrade that waits for its invalidations only, as for a clean shared line.
        let owned_hit = e.dirty
            && owner_other.is_some_and(|o| {
                hit.is_some_and(|pos| !self.pus[o].path.contains(&self.pus[p].path[pos]))
            });
        // The node of the cache that sends a dirty line this path does not hold: its owner's,
        // or for a dirty line without an owner (kept dirty in its node's caches by a read from
        // that node, below) one of its holders'.
        let supplier = match owner_other {
            Some(o) if e.dirty && !owned_hit => Some(self.pus[o].node),
            None if e.dirty && e.owner == 0 && hit.is_none() => self.holder_node(e.holders),
            _ => None,
        };
        // A read of a line dirty elsewhere writes it back to memory and leaves every copy
        // clean (MESI; MESIF across nodes), or leaves it dirty (MESIF within a node; MOESI).
        let cleaned = !write && supplier.is_some_and(|on| self.writes_back(on, node));
        let mut stall = 0.0;
        let mut lat;
        match supplier {
            Some(on) => {
                lat = if on == node {
                    self.cfg.c2c_local_ns
                } else {
                    self.stats.c2c_remote += 1;
                    self.fabric.latency(node, on) + self.fabric.occupy_route(t, on, node)
                };
                self.stats.c2c += 1;
                if hit.is_none() {
                    self.stats.llc_misses += 1;
                }
                // The protocol decides (`writes_back`). Until 2026-11-27 every such read was
                // written back (threads sharing written data on one node sent their memory
                // controller a write per transfer); until 2026-11-28 every machine had MESIF's
                // rule.
                if cleaned {
                    self.writeback(key, on, t);
                }
            }
            None => match hit {
                Some(pos) => lat = cx.lat(pos, &self.pus),
                None => {
                    self.stats.llc_misses += 1;
                    // A new page here is shared: `private_page` did not take it.
                    let sole = if cx.private { SOLE_SHARED } else { 0 };
                    let (l, s) = self.memory(ti, cx, key, t, sole);
                    lat = l;
                    stall = s;
                }
            },
        }
        let mut ne = e;
        let upto;
        let l1_state;
        if write {
            let mut far: f64 = 0.0;
            for (w, &word) in others.iter().enumerate() {
                let mut bits = word;
                while bits != 0 {
                    let b = w * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let mut k = b;
                    while k < self.tracked.len() {
                        let inst = self.tracked[k];
                        if self.caches[inst].cache.remove(key) {
                            self.stats.invalidations += 1;
                            let n = self.caches[inst].node;
                            if n != node {
                                far = later(far, self.fabric.latency(node, n));
                            } else {
                                far = later(far, self.cfg.c2c_local_ns);
                            }
                        }
                        for q in 0..self.caches[inst].inner.len() {
                            let inner = self.caches[inst].inner[q];
                            self.caches[inner].cache.remove(key);
                        }
                        k += DIR_BITS;
                    }
                }
            }
            if hit.is_some() && (owner_other.is_none() || owned_hit) {
                lat = later(lat, far);
            }
            upto = hit.unwrap_or(cx.path_len).max(1);
            // This path's caches that held the line keep it; the levels before `upto` get it.
            let filled = self.filled_bits(cx, upto);
            for ((h, b), f) in ne.holders.iter_mut().zip(path_bits).zip(filled) {
                *h = (*h & b) | f;
            }
            ne.owner = p as u32 + 1;
            ne.dirty = true;
            l1_state = MODIFIED;
        } else {
            if let Some(o) = owner_other {
                if let Some(&k) = self.pus[o].path.first() {
                    self.caches[k].cache.set_state(key, SHARED);
                }
                // MOESI's owner keeps the dirty line (Owned) and its write-back; otherwise a
                // line still dirty has no owner (unless this path alone holds it, below) and
                // goes back to memory with its last copy (`WriteBack::LastCopy`).
                if !(self.coherence == Coherence::Moesi && e.dirty) {
                    ne.owner = 0;
                }
            }
            ne.dirty = e.dirty && !cleaned;
            let alone = !any(others);
            upto = hit.unwrap_or(cx.path_len);
            for (h, f) in ne.holders.iter_mut().zip(self.filled_bits(cx, upto)) {
                *h |= f;
            }
            l1_state = if alone {
                // A dirty line here (not `owner_other`'s) is dirty in a cache of this path: its
                // owner's, whoever that was, now this PU's, still dirty.
                ne.owner = p as u32 + 1;
                if ne.dirty {
                    MODIFIED
                } else {
                    EXCLUSIVE
                }
            } else {
                SHARED
            };
        }
        self.dir.insert_at::<D>(at, key, ne);
        // The levels before the one that hit (all, on a miss) were probed by `access` and do not
        // hold the line; nothing since has put it there (invalidations and evictions only remove).
        let missed = hit.unwrap_or(usize::MAX);
        if let Some(f) = cx.p3 {
            self.fill3::<D, G>(f, key, upto, missed, [l1_state, SHARED, SHARED], t);
            return (lat, stall);
        }
        for pos in 0..upto.min(cx.path_len) {
            let k = self.pus[p].path[pos];
            let st = if pos == 0 { l1_state } else { SHARED };
            let base = self.set_in(k, key);
            let c = &mut self.caches[k].cache;
            let ev = if pos < missed {
                c.fill_absent_in(base, key, st)
            } else {
                c.fill(key, st)
            };
            if let Some(ev) = ev {
                self.evicted::<D, G>(k, ev.line(), t);
            }
        }
        (lat, stall)
    }

    /// Whether a read from `node` of a line dirty in a cache of node `on` writes the line back
    /// to memory, leaving every copy clean: the one rule by which the protocols differ here.
    /// - MESI (Itanium 2 on SGI's NUMAlink): always; on the bus the memory takes the data
    ///   with the reader (an implicit write-back), and the directory's sharing write-back
    ///   does the same between nodes.
    /// - MESIF (Intel): between nodes (copies shared across them are clean); within a node
    ///   the inclusive L3 takes the line from the owning core and keeps it dirty until its
    ///   last copy leaves.
    /// - MOESI (AMD): never; the owner's copy becomes Owned, serves later readers wherever
    ///   they are, and is written back when it leaves.
    #[inline]
    fn writes_back(&self, on: usize, node: usize) -> bool {
        match self.coherence {
            Coherence::Mesi => true,
            Coherence::Mesif => on != node,
            Coherence::Moesi => false,
        }
    }

    /// The node of a cache whose directory bit is among `holders` (the first such), if any.
    fn holder_node(&self, holders: [u64; 2]) -> Option<usize> {
        let (w, &word) = holders.iter().enumerate().find(|(_, &h)| h != 0)?;
        let b = w * 64 + word.trailing_zeros() as usize;
        let k = *self.tracked.get(b)?;
        Some(self.caches[k].node)
    }

    /// Whether the page of `key` is private to `cx`'s domain (`private_lines`), taking it if no
    /// domain has touched it yet and the process still takes pages (`Process::takes_pages`;
    /// else it is shared from the start). A page private to another domain is shared from now
    /// on (`share_page`) and is not.
    #[inline(always)]
    fn private_page<D: Form>(&mut self, cx: &Cx, key: u64) -> bool {
        let mine = cx.domain + 1;
        let pr = &mut self.procs[cx.pi];
        let vp = ((key & LINE_MASK) << 6) >> pr.page_shift;
        let slot = slot_ahead(self.cur_page, &pr.pages, vp);
        debug_assert!(
            self.cur_page == NO_PAGE || pr.pages.slot(vp) == slot,
            "stale page slot"
        );
        let sole = slot.and_then(|i| pr.pages.sole_at(i));
        match sole {
            Some(s) if s == mine => true,
            // Not present (a first touch: `memory` gives the page to this domain, or makes it
            // shared), or present but untouched: no cache holds a line of either.
            None | Some(0) => {
                let take = pr.takes_pages();
                if let Some(i) = slot.filter(|_| sole.is_some()) {
                    pr.pages
                        .set_sole_at(i, if take { mine } else { SOLE_SHARED });
                }
                pr.private_pages += u64::from(take);
                take
            }
            Some(SOLE_SHARED) => false,
            Some(other) => {
                self.share_page::<D>(cx.pi, vp, usize::from(other - 1));
                false
            }
        }
    }

    /// A page private to domain `d` becomes shared: each of its lines that `d`'s caches hold
    /// gets the directory entry the directory would have (`private_entry`), and its state in
    /// those caches becomes `SHARED`, as every directory line's.
    fn share_page<D: Form>(&mut self, pi: usize, vp: u64, d: usize) {
        let pr = &mut self.procs[pi];
        pr.pages.set_sole(vp, SOLE_SHARED);
        pr.turned_shared += 1;
        let shift = pr.page_shift;
        let Some(&rep) = self.domain_pu.get(d) else {
            return;
        };
        let Some(f) = self.pus[rep].p3 else { return };
        let first = ((pi as u64) << ASID_SHIFT) | ((vp << (shift - 6)) & LINE_MASK);
        for line in first..first + (1 << (shift - 6)) {
            // Each level's state, now `SHARED` (a `MODIFIED_OUTER` copy in the second level
            // means the third holds the line `MODIFIED`).
            let s2 = self.caches[f.l2].cache.take_state(line, SHARED);
            let c3 = &mut self.caches[f.l3].cache;
            let s3 = if s2 == Some(MODIFIED_OUTER) {
                c3.set_state(line, SHARED).then_some(MODIFIED)
            } else {
                c3.take_state(line, SHARED)
            };
            debug_assert!(
                s2 != Some(MODIFIED_OUTER) || s3.is_some(),
                "L3 lost {line:#x}"
            );
            if let Some(e) = Self::private_entry_of(f, rep, s2, s3) {
                self.dir.insert::<D>(line, e);
            }
        }
    }

    /// The directory entry of a line of a page private to PU `rep`'s domain, as the directory
    /// would hold it: its holders are the domain's second and third levels that hold it, its
    /// owner the domain (any of its PUs: they share every cache, so the directory cannot tell
    /// them apart), dirty if either level has a written state. None if neither holds it.
    #[cfg(test)]
    fn private_entry(&self, rep: usize, line: u64) -> Option<DirEntry> {
        let f = self.pus.get(rep)?.p3?;
        let s2 = self.caches[f.l2].cache.state_of(line);
        let s3 = self.caches[f.l3].cache.state_of(line);
        Self::private_entry_of(f, rep, s2, s3)
    }

    /// `private_entry` from the line's states `s2` and `s3` in the second and third levels of
    /// `f` (None: not held there).
    fn private_entry_of(f: Path3, rep: usize, s2: Option<u8>, s3: Option<u8>) -> Option<DirEntry> {
        if s2.is_none() && s3.is_none() {
            return None;
        }
        let mut holders = [0u64; 2];
        for (st, b) in [(s2, f.b2), (s3, f.b3)] {
            if st.is_some() {
                holders[b / 64] |= 1 << (b % 64);
            }
        }
        Some(DirEntry {
            holders,
            owner: rep as u32 + 1,
            dirty: matches!(s2, Some(MODIFIED | MODIFIED_OUTER)) || s3 == Some(MODIFIED),
        })
    }

    /// `coherent` for a line of a page private to `cx`'s domain (`private_lines`): no other
    /// cache holds it, so no invalidation and no transfer; the latency is the hit's or memory's.
    /// The states carry the dirty bit (`private_lines`): a write that misses or hits the third
    /// level leaves the line `MODIFIED` there and `MODIFIED_OUTER` in the second; one that hits
    /// the first or second level marks the second's copy written (`written`: the third's copy,
    /// if any, is clean then). A read hitting the third level takes its state inward. The first
    /// level gets the directory's state for a line held alone: `MODIFIED` if dirty, else
    /// `EXCLUSIVE`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn coherent_private<D: Form, G: Geom>(
        &mut self,
        ti: usize,
        cx: &Cx,
        f: Path3,
        key: u64,
        t: f64,
        write: bool,
        hit: Option<usize>,
        l3_dirty: bool,
    ) -> (f64, f64) {
        let (lat, stall) = match hit {
            Some(pos) => (cx.lat(pos, &self.pus), 0.0),
            None => {
                self.stats.llc_misses += 1;
                self.memory(ti, cx, key, t, cx.domain + 1)
            }
        };
        let missed = hit.unwrap_or(usize::MAX);
        debug_assert!(
            write || hit.is_none_or(|pos| pos >= 2),
            "a private read hit in L1/L2"
        );
        match hit {
            // A write hitting the first or second level, which holds the line (it keeps the
            // first inclusive): the first level's copy becomes `MODIFIED`.
            Some(pos @ (0 | 1)) => {
                let c2 = &mut self.caches[f.l2].cache;
                if pos == 1 {
                    // Just made most recently used there by `access_beyond_l1_3`.
                    c2.written_mru(c2.set_of(key));
                } else {
                    c2.write_private(key);
                }
                self.fill3::<D, G>(f, key, 1, missed, [MODIFIED; 3], t);
            }
            _ => {
                // The states without a branch on them (whether a line is dirty is as random as
                // the writes): clean `EXCLUSIVE` (1) everywhere, or `MODIFIED` (2) in the first
                // and third levels and `MODIFIED_OUTER` (3) in the second.
                let dirty = u8::from(write || l3_dirty);
                if hit.is_some() {
                    // Hit in the third level, just made most recently used there.
                    let base = self.set_in(f.l3, key);
                    self.caches[f.l3]
                        .cache
                        .set_mru_state(base, EXCLUSIVE + dirty);
                }
                let states = [EXCLUSIVE + dirty, EXCLUSIVE + 2 * dirty, EXCLUSIVE + dirty];
                let upto = if hit.is_some() { 2 } else { 3 };
                self.fill3::<D, G>(f, key, upto, missed, states, t);
            }
        }
        (lat, stall)
    }

    /// The directory bits of the levels `0..upto` of `cx`'s path: the caches `coherent` fills.
    /// Only those and the path's caches that already held the line hold it afterwards: the
    /// directory's holders are exactly the caches that hold the line (bits aliasing aside), so a
    /// dirty line is written back when it leaves its owner's last cache (issue 4, 2026-11-27:
    /// the whole path's bits were set, a non-inclusive level's too, whether it held the line
    /// or not).
    #[inline(always)]
    fn filled_bits(&self, cx: &Cx, upto: usize) -> [u64; 2] {
        match cx.fill_bits.get(upto) {
            Some(&bits) => bits,
            None => self.pus[cx.p].fill_bits[upto.min(cx.path_len)],
        }
    }

    /// The fill loop at the end of `coherent` for a path of the common shape `f`: the levels
    /// `0..upto` (at most 3), those before `missed` known not to hold the line. The first level has
    /// no directory bit and nothing inside it, so its victim needs nothing (`evicted` would return
    /// at once); the second's victim leaves the first level and its directory bit.
    #[inline(always)]
    ///
    /// `states` are the three levels' states for the line (a private line's carry its dirty bit,
    /// `private_lines`); a victim's state says where its coherence state is: `SHARED`, in the
    /// directory; else in the levels' states (`private_victim2`, `private_victim3` for a
    /// `MODIFIED` one; the others need nothing).
    fn fill3<D: Form, G: Geom>(
        &mut self,
        f: Path3,
        key: u64,
        upto: usize,
        missed: usize,
        states: [u8; 3],
        t: f64,
    ) {
        if upto == 0 {
            return;
        }
        let [l1_state, l2_state, l3_state] = states;
        let c = &mut self.caches[f.l1].cache;
        match (G::P8, 0 < missed) {
            (true, true) => c.fill_absent_p8(key, l1_state),
            (true, false) => c.fill_p8(key, l1_state),
            (false, true) => c.fill_absent(key, l1_state),
            (false, false) => c.fill(key, l1_state),
        };
        if upto == 1 {
            return;
        }
        let c = &mut self.caches[f.l2].cache;
        let ev = match (G::P8, 1 < missed) {
            (true, true) => c.fill_absent_p8(key, l2_state),
            (true, false) => c.fill_p8(key, l2_state),
            (false, true) => c.fill_absent(key, l2_state),
            (false, false) => c.fill(key, l2_state),
        };
        if let Some(ev) = ev {
            let c1 = &mut self.caches[f.l1].cache;
            if G::P8 {
                c1.remove_p8(ev.line());
            } else {
                c1.remove(ev.line());
            }
            match ev.state() {
                SHARED => self.evicted_bit::<D, G>(f.l2, f.b2, ev.line(), t),
                MODIFIED => self.private_victim2(f, ev.line(), t),
                // Clean, or dirty in the third level as well: nothing to do.
                _ => {}
            }
        }
        if upto == 2 {
            return;
        }
        let base = self.set_in(f.l3, key);
        let c = &mut self.caches[f.l3].cache;
        let ev = match (G::W20, 2 < missed) {
            (true, true) => c.fill_absent_w20(base, key, l3_state),
            (false, true) => c.fill_absent_in(base, key, l3_state),
            (_, false) => c.fill(key, l3_state),
        };
        if let Some(ev) = ev {
            match ev.state() {
                SHARED => self.evicted_bit::<D, G>(f.l3, f.b3, ev.line(), t),
                MODIFIED => self.private_victim3(f, ev.line(), t),
                _ => {}
            }
        }
    }

    /// A private line left the second level of `f` `MODIFIED` (`private_lines`): the third
    /// level's copy, if any, is clean; it takes the dirty bit (as the directory keeps the entry
    /// dirty while a cache of its owner holds it), else the line is written back.
    #[inline]
    fn private_victim2(&mut self, f: Path3, line: u64, t: f64) {
        if !self.caches[f.l3].cache.set_state(line, MODIFIED) {
            self.writeback(line, self.caches[f.l2].node, t);
        }
    }

    /// A private line left the third level `f.l3` `MODIFIED` (`private_lines`): if its domain's
    /// second level holds it (`MODIFIED_OUTER`), that copy keeps the dirty bit, else the line is
    /// written back. The domain is the page's (`Page::sole`); it may be another than `f`'s, on
    /// a shared third level.
    fn private_victim3(&mut self, f: Path3, line: u64, t: f64) {
        let Some(pr) = self.procs.get((line >> ASID_SHIFT) as usize) else {
            return;
        };
        // The page's entry, looked up once for its domain and its home.
        let slot = pr.pages.slot(((line & LINE_MASK) << 6) >> pr.page_shift);
        let home = slot.and_then(|s| pr.pages.node_at(s));
        let held = slot
            .and_then(|s| pr.pages.sole_at(s))
            .and_then(|sole| self.domain_pu.get(usize::from(sole).checked_sub(1)?))
            .and_then(|&rep| self.pus[rep].p3)
            .is_some_and(|g| self.caches[g.l2].cache.set_state(line, MODIFIED));
        if !held {
            if let Some(home) = home {
                self.write_back_to(usize::from(home), self.caches[f.l3].node, t);
            }
        }
    }

    fn evicted<D: Form, G: Geom>(&mut self, k: usize, line: u64, t: f64) {
        for q in 0..self.caches[k].inner.len() {
            let inner = self.caches[k].inner[q];
            self.caches[inner].cache.remove(line);
        }
        let Some(b) = self.caches[k].bit else { return };
        self.evicted_bit::<D, G>(k, b, line, t);
    }

    /// The directory's part of `evicted`: `line` left cache `k`, whose directory bit is `b`.
    #[inline(always)]
    fn evicted_bit<D: Form, G: Geom>(&mut self, k: usize, b: usize, line: u64, t: f64) {
        let pus = &self.pus;
        // The entry is removed in the same probe when no holder is left.
        let Some((wb, _)) = self.dir.drop_holder::<D>(line, b, |o| pus[o].path_bits) else {
            return;
        };
        match wb {
            Some(WriteBack::Owner(o)) => self.writeback(line, self.pus[o].node, t),
            Some(WriteBack::LastCopy) => self.writeback(line, self.caches[k].node, t),
            None => {}
        }
    }

    /// A dirty line goes back to its home memory from node `from` (occupies queues; nobody waits).
    fn writeback(&mut self, key: u64, from: usize, t: f64) {
        let pi = (key >> ASID_SHIFT) as usize;
        let Some(pr) = self.procs.get(pi) else { return };
        let vp = ((key & LINE_MASK) << 6) >> pr.page_shift;
        let Some(home) = pr.pages.slot(vp).and_then(|s| pr.pages.node_at(s)) else {
            return;
        };
        self.write_back_to(usize::from(home), from, t);
    }

    /// `writeback` to the memory of node `home`.
    #[inline]
    fn write_back_to(&mut self, home: usize, from: usize, t: f64) {
        self.stats.writebacks += 1;
        // Writebacks occupy the queues (so reads behind them wait) but nobody waits for them: their
        // own waits are not counted as IMC or link queueing.
        self.fabric.writeback(t, from, home);
    }

    /// A line from memory: page lookup (first touch, induced fault, migration in progress), then the
    /// fabric. Returns (latency, stall before the access).
    fn memory(&mut self, ti: usize, cx: &Cx, key: u64, t: f64, sole: u16) -> (f64, f64) {
        let (p, pi, node) = (cx.p, cx.pi, cx.node);
        let pr = &mut self.procs[pi];
        let vaddr = (key & LINE_MASK) << 6;
        let vp = vaddr >> pr.page_shift;
        let mut stall = 0.0;
        let mut fault = false;
        let slot = slot_ahead(self.cur_page, &pr.pages, vp);
        let found = match slot {
            Some(s) => pr.pages.get_at(s, vp),
            None => None,
        };
        let home = match found {
            Some(pg) => {
                if pg.blocked_until > t {
                    stall += pg.blocked_until - t;
                }
                usize::from(pg.node)
            }
            None => {
                let home = first_touch_home(&pr.policy, &self.mem_nodes, &self.machine, node, vp);
                pr.pages.insert_in(
                    slot,
                    vp,
                    Page {
                        node: home as u16,
                        blocked_until: 0.0,
                        armed: false,
                        // The first toucher's domain's, or shared (`private_page`).
                        sole,
                    },
                );
                pr.page_list.push(vp);
                self.stats.faults += 1;
                stall += if pr.page_shift >= 21 {
                    self.cfg.huge_fault_ns
                } else {
                    self.cfg.fault_ns
                };
                fault = self.cfg.first_touch_samples;
                home
            }
        };
        if fault {
            self.record_sample(ti, p, t, vaddr, AccessKind::Fault, None);
        }
        let lat = self.fabric.read(t + stall, node, home);
        let th = &mut *self.run;
        if home == node {
            self.stats.local += 1;
            th.local += 1;
        } else {
            self.stats.remote += 1;
            th.remote += 1;
        }
        (lat, stall)
    }

    /// The figures so far.
    pub fn report(&self) -> Report {
        let s = &self.stats;
        let makespan = self.threads.iter().map(|t| t.end).fold(0.0, f64::max);
        let threads: Vec<ThreadReport> = self
            .threads
            .iter()
            .map(|t| {
                let start = self.procs[t.proc].start;
                let end = if t.state == State::Done {
                    t.end
                } else {
                    self.now.max(start)
                };
                ThreadReport {
                    pid: t.pid,
                    tid: t.tid,
                    name: t.name.clone(),
                    cpu: self.pus[t.pu].cpu,
                    start_ns: start as u64,
                    end_ns: end as u64,
                    time_ns: (end - start).max(0.0) as u64,
                    accesses: t.hot.accesses,
                    local_accesses: t.hot.local,
                    remote_accesses: t.hot.remote,
                    migrations: t.migrations,
                }
            })
            .collect();
        let levels = self.pus.iter().map(|p| p.path.len()).max().unwrap_or(0);
        let em = &self.cfg.energy;
        let secs = makespan * 1e-9;
        let mut dynamic_nj = 0.0;
        for (pos, &n) in s.probes.iter().enumerate().take(levels) {
            let e = match pos {
                0 => em.l1_nj,
                1 if levels > 2 => em.l2_nj,
                _ => em.llc_nj,
            };
            dynamic_nj += n as f64 * e;
        }
        let dram_lines: u64 = self.fabric.mc_lines.iter().sum();
        dynamic_nj += dram_lines as f64 * em.dram_line_nj;
        dynamic_nj += (self.fabric.link_bytes as f64 / LINE) * em.link_line_nj;
        let energy_j = secs
            * (em.static_w_per_package * self.machine.packages.len().max(1) as f64
                + em.static_w_per_node * self.machine.nodes.len().max(1) as f64)
            + dynamic_nj * 1e-9;
        Report {
            machine: self.machine.name.clone(),
            seed: self.cfg.seed,
            makespan_ns: makespan as u64,
            accesses: s.accesses,
            cache_hits: s.hits[..levels.min(8)].to_vec(),
            llc_misses: s.llc_misses,
            local_accesses: s.local,
            remote_accesses: s.remote,
            imc_queue_ns: self.fabric.mc_wait_ns,
            link_queue_ns: self.fabric.link_wait_ns,
            queue_past_history: self.fabric.past_history(),
            interconnect_bytes: self.fabric.link_bytes,
            c2c_transfers: s.c2c,
            c2c_remote: s.c2c_remote,
            invalidations: s.invalidations,
            writebacks: s.writebacks,
            page_faults: s.faults,
            migrations: s.migrations,
            migration_cost_ns: s.migration_cost,
            page_migrations: s.page_migrations,
            page_migration_cost_ns: s.page_migration_cost,
            samples: s.samples,
            energy_j,
            threads,
        }
    }

    // ---- Environment support (crate::env) ----

    pub(crate) fn task_list(&self) -> Vec<numaff_engine::Task> {
        let mut v: Vec<numaff_engine::Task> = self
            .threads
            .iter()
            .filter(|t| t.state != State::Done && self.procs[t.proc].start <= self.now)
            .map(|t| numaff_engine::Task {
                id: TaskId {
                    pid: t.pid,
                    tid: t.tid,
                },
                cpu: Some(self.pus[t.pu].cpu),
                allowed: t.allowed.clone(),
                name: t.name.clone(),
            })
            .collect();
        v.sort_by_key(|t| t.id);
        v
    }

    pub(crate) fn take_samples(&mut self, out: &mut Vec<Sample>) -> usize {
        let n = self.samples.len();
        out.append(&mut self.samples);
        n
    }

    pub(crate) fn page_node(&self, pi: usize, vaddr: u64) -> Option<u32> {
        let pr = &self.procs[pi];
        pr.pages
            .get(vaddr >> pr.page_shift)
            .map(|pg| self.machine.nodes[usize::from(pg.node)].id)
    }

    /// Moves thread `task` onto the least loaded PU of `cpus` (staying put if it already runs in
    /// `cpus`). Returns (from cpu, to cpu, cost ns), or None when no such live thread.
    pub(crate) fn migrate_thread(
        &mut self,
        task: TaskId,
        cpus: &CpuSet,
    ) -> Option<Result<(u32, u32, f64), ()>> {
        let ti = self
            .threads
            .iter()
            .position(|t| t.pid == task.pid && t.tid == task.tid && t.state != State::Done)?;
        let from = self.threads[ti].pu;
        let from_cpu = self.pus[from].cpu;
        self.threads[ti].allowed = cpus.clone();
        if cpus.contains(from_cpu) {
            return Some(Ok((from_cpu, from_cpu, 0.0)));
        }
        let Some(to) = (0..self.pus.len())
            .filter(|&p| cpus.contains(self.pus[p].cpu))
            .min_by_key(|&p| (self.pus[p].runq.len(), p))
        else {
            return Some(Err(()));
        };
        let cost = self.cfg.thread_migration_ns;
        let now = self.now;
        let th = &mut self.threads[ti];
        let drained = th.hot.window.drain(now);
        th.pu = to;
        th.migrations += 1;
        th.ready_at = th.ready_at.max(drained) + cost;
        self.stats.migrations += 1;
        self.stats.migration_cost += cost;
        if self.threads[ti].state == State::Ready {
            self.pus[from].runq.retain(|&x| x != ti);
            self.enqueue(ti, to);
        }
        Some(Ok((from_cpu, self.pus[to].cpu, cost)))
    }

    /// Moves pages of process `pi` to node position `ni`; see [`numaff_engine::Environment::move_pages`].
    pub(crate) fn migrate_pages(
        &mut self,
        pi: usize,
        vaddrs: &[u64],
        ni: usize,
    ) -> numaff_engine::PageMove {
        let mut out = numaff_engine::PageMove {
            requested: vaddrs.len(),
            moved: 0,
            bytes: 0,
            failed: Vec::new(),
            cost_ns: self.cfg.migration_call_ns,
        };
        let mut t = self.now + self.cfg.migration_call_ns;
        let shift = self.procs[pi].page_shift;
        let lines = (1u64 << shift) / LINE as u64;
        for &va in vaddrs {
            let vp = va >> shift;
            let Some(mut pg) = self.procs[pi].pages.get(vp) else {
                out.failed
                    .push((va, numaff_engine::PageMoveFailure::NotPresent));
                continue;
            };
            if usize::from(pg.node) == ni {
                out.moved += 1;
                continue;
            }
            if pg.blocked_until > self.now {
                out.failed.push((va, numaff_engine::PageMoveFailure::Busy));
                continue;
            }
            let done =
                self.fabric.copy(t, usize::from(pg.node), ni, lines) + self.cfg.migration_page_ns;
            t = done;
            pg.node = ni as u16;
            pg.blocked_until = done;
            self.procs[pi].pages.insert(vp, pg);
            out.moved += 1;
            out.bytes += 1 << shift;
            self.stats.page_migrations += 1;
        }
        out.cost_ns = t - self.now;
        self.stats.page_migration_cost += out.cost_ns;
        out
    }

    /// Lines in the directory (for tests of its bookkeeping). Lines of private pages have none
    /// (`private_lines`).
    pub fn directory_len(&self) -> usize {
        self.dir.len()
    }

    /// Whether lines of pages only one private domain has touched stay out of the directory,
    /// their coherence state in the cache tags (issue 4; the same figures either way).
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

    /// The private domain whose tags hold `line`'s coherence state, if its page is private
    /// (`private_lines`; tests).
    #[cfg(test)]
    fn private_domain(&self, line: u64) -> Option<usize> {
        let pr = self.procs.get((line >> ASID_SHIFT) as usize)?;
        let vp = ((line & LINE_MASK) << 6) >> pr.page_shift;
        let s = pr.pages.sole(vp)?;
        let private = self.private_lines && pr.page_shift == 12 && s != 0 && s != SOLE_SHARED;
        private.then(|| usize::from(s - 1))
    }

    /// The coherence entry of `line` wherever it is kept: the directory's, or for a private line
    /// the one its tags give (`private_entry`), which must then have none in the directory.
    #[cfg(test)]
    fn coherence_entry(&self, line: u64) -> Option<DirEntry> {
        match self.private_domain(line) {
            Some(d) => {
                let e = self.dir.get_any(line);
                assert!(
                    e.is_none(),
                    "{line:#x} is private and in the directory: {e:?}"
                );
                self.private_entry(self.domain_pu[d], line)
            }
            None => self.dir.get_any(line),
        }
    }

    /// The processes' pids in spawn order.
    pub fn pids(&self) -> Vec<u32> {
        self.procs.iter().map(|p| p.pid).collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::config::{HwSampling, OsScheduler};
    use crate::stream::ThreadSpec;

    /// Four threads on PUs far apart run random reads and writes (one in three) over a shared
    /// 2 MiB region (L2 misses, L3 hits, sharing, invalidations, c2c transfers), over lines that
    /// all fall in one set of the last-level cache of PU 0 (its evictions), and over a private
    /// region, with barriers; every seventh access is sampled with its latency. Returns the
    /// report and samples (Debug), and how many PUs have the common shape.
    fn run(m: &Machine, general: bool) -> (String, String, usize) {
        run_with(m, general, None, true).unwrap()
    }

    /// `run` with the directory in form `form` (`None`: the one `new` picks); `None` if that form
    /// cannot hold the machine's directory.
    fn run_with(
        m: &Machine,
        general: bool,
        form: Option<FormKind>,
        private: bool,
    ) -> Option<(String, String, usize)> {
        let (mut sim, r, shaped) = mixed(m, general, form, None, private)?;
        let mut s = Vec::new();
        sim.take_samples(&mut s);
        Some((format!("{r:?}"), format!("{s:?}"), shaped))
    }

    /// The simulator after `run_with`'s run (with the os scheduler `os`, if given), its report
    /// and how many PUs have the common shape.
    fn mixed(
        m: &Machine,
        general: bool,
        form: Option<FormKind>,
        os: Option<OsScheduler>,
        private: bool,
    ) -> Option<(Simulator, Report, usize)> {
        let cfg = SimConfig {
            hw_sampling: Some(HwSampling {
                period: 7,
                jitter: 0.0,
                min_latency_ns: 0.0,
                cost_ns: 1.0,
            }),
            os_scheduler: os,
            ..SimConfig::default()
        };
        let mut sim = Simulator::new(m, cfg);
        if !private || general {
            sim = sim.without_private_lines();
        }
        if let Some(kind) = form {
            sim.dir = Directory::with_kind(sim.tracked.len(), sim.pus.len() as u32, kind)?;
        }
        let shaped = sim.pus.iter().filter(|pu| pu.p3.is_some()).count();
        if general {
            for pu in &mut sim.pus {
                // The dispatch on geometry goes with the shape: the general path throughout.
                pu.p3 = None;
                pu.geom = 0;
            }
        }
        // 48 lines of one set of PU 0's last level (more than its ways), from 0x2000_0000.
        let llc = *sim.pus[0].path.last().unwrap();
        let c = &sim.caches[llc].cache;
        let first = 0x2000_0000u64 >> 6;
        let set = c.set_of(first);
        let conflict: Vec<u64> = (first..).filter(|&l| c.set_of(l) == set).take(48).collect();
        let cpus: Vec<u32> = m.pus().iter().collect();
        let picks = [0, 1, cpus.len() / 2, cpus.len() - 1];
        let mut spec = ProcessSpec::new("shape", DataPolicy::Interleave);
        for (k, &i) in picks.iter().enumerate() {
            let conflict = conflict.clone();
            let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (k as u64 + 1);
            let ops: Vec<Op> = (0..4_000u64)
                .map(|i| {
                    if i % 1_000 == 999 {
                        return Op::Barrier;
                    }
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let vaddr = match x % 8 {
                        0..=3 => 0x1000_0000 + (x >> 20) % (2 << 20),
                        4 | 5 => conflict[(x >> 24) as usize % conflict.len()] << 6,
                        _ => 0x4000_0000 + ((k as u64) << 24) + (x >> 28) % (64 << 10),
                    };
                    Op::Access(if (x >> 40).is_multiple_of(3) {
                        Access::write(vaddr)
                    } else {
                        Access::read(vaddr)
                    })
                })
                .collect();
            spec = spec.thread(ThreadSpec::new(format!("t{k}"), cpus[i], ops.into_iter()));
        }
        sim.spawn(spec).unwrap();
        let r = sim.run();
        Some((sim, r, shaped))
    }

    /// Regression (issue 4, 2026-11-27): the directory's holders are exactly the tracked caches
    /// that hold each line, and no entry outlives the line's last cached copy. A write that hit in
    /// the first or second level set the non-inclusive last level's bit whether it held the line
    /// or not; the stale bit kept the entry (and a dirty owner) after the line left every cache.
    /// On every catalog machine whose tracked caches have a bit each (no aliasing), on the common
    /// shape's path and the general one, after `run`'s mix (its conflict lines leave lines in the
    /// second level that the last level dropped, and its writes then hit them), and with an os
    /// scheduler that moves threads every 20 µs or so (lines left in the caches a thread moved from).
    #[test]
    fn issue4_directory_holders_are_the_caches_that_hold_the_line() {
        let mut checked = 0;
        // Every 20 µs (a move costs 5 µs: moving every 2 µs at this rate starves the threads).
        let moving = OsScheduler {
            interval_ns: 20_000,
            move_probability: 0.5,
        };
        for name in numaff_machine::catalog::names() {
            let m = numaff_machine::catalog::load(name).unwrap();
            for (general, os) in [(false, None), (true, None), (false, Some(moving.clone()))] {
                let (sim, r, _) = mixed(&m, general, None, os.clone(), true).unwrap();
                if os.is_some() {
                    assert!(r.migrations >= 4, "{name}: {} thread moves", r.migrations);
                }
                if sim.tracked.len() > DIR_BITS {
                    continue;
                }
                let mut lines = std::collections::BTreeSet::new();
                for (b, &k) in sim.tracked.iter().enumerate() {
                    for line in sim.caches[k].cache.lines() {
                        lines.insert(line);
                        let e = sim.coherence_entry(line);
                        let held = e.is_some_and(|e| e.holders[b / 64] >> (b % 64) & 1 == 1);
                        assert!(held, "{name}: cache {k} holds {line:#x}, its bit is clear");
                        // Where a line's coherence state is kept shows in its states (with
                        // private lines, no tracked cache is a first level, whose state is its own).
                        if sim.private_lines {
                            let st = sim.caches[k].cache.state_of(line).unwrap();
                            let private = sim.private_domain(line).is_some();
                            assert_eq!(st != SHARED, private, "{name}: {line:#x} in {k}: {st}");
                        }
                    }
                }
                let mut private = 0;
                let mut shared_dirty = 0;
                let mut owned_across = 0;
                for &line in &lines {
                    if let Some(d) = sim.private_domain(line) {
                        private += 1;
                        // The states hold the dirty bit (`private_lines`): with the second
                        // level holding the line, the third's copy is dirty exactly when the
                        // second's is `MODIFIED_OUTER`; a written first-level copy is a written
                        // second-level one.
                        let f = sim.pus[sim.domain_pu[d]].p3.unwrap();
                        let c = |k: usize| sim.caches[k].cache.state_of(line);
                        let (s1, s2, s3) = (c(f.l1), c(f.l2), c(f.l3));
                        if let Some(s2) = s2 {
                            let outer = s2 == MODIFIED_OUTER;
                            assert_eq!(
                                outer,
                                s3 == Some(MODIFIED),
                                "{name}: {line:#x} {s2} {s3:?}"
                            );
                        }
                        if s1 == Some(MODIFIED) {
                            assert!(
                                matches!(s2, Some(MODIFIED | MODIFIED_OUTER)),
                                "{name}: {line:#x}"
                            );
                        }
                    }
                    let e = sim.coherence_entry(line).unwrap();
                    let nodes: std::collections::BTreeSet<usize> = (0..sim.tracked.len())
                        .filter(|&b| e.holders[b / 64] >> (b % 64) & 1 == 1)
                        .map(|b| sim.caches[sim.tracked[b]].node)
                        .collect();
                    let moesi = sim.coherence == Coherence::Moesi;
                    // An owner holds the line in a cache of its path. A dirty line is held on
                    // one node only (a read from another node wrote it back), but under MOESI,
                    // whose owner keeps it dirty (Owned) for readers anywhere; and only MESIF
                    // keeps a line dirty without an owner (a transfer within a node).
                    if let Some(o) = (e.owner as usize).checked_sub(1) {
                        let bits = sim.pus[o].path_bits;
                        let held = (e.holders[0] & bits[0]) | (e.holders[1] & bits[1]) != 0;
                        assert!(held, "{name}: {line:#x}'s owner {o} holds it nowhere");
                        if e.dirty && nodes.len() > 1 {
                            assert!(moesi, "{name}: {line:#x} dirty on {nodes:?}");
                            owned_across += 1;
                        }
                    } else if e.dirty {
                        assert_eq!(sim.coherence, Coherence::Mesif, "{name}: {line:#x}");
                        assert_eq!(nodes.len(), 1, "{name}: {line:#x} dirty on {nodes:?}");
                        shared_dirty += 1;
                    }
                    for (b, &k) in sim.tracked.iter().enumerate() {
                        if e.holders[b / 64] >> (b % 64) & 1 == 1 {
                            let c = &sim.caches[k].cache;
                            assert!(c.contains(line), "{name}: {line:#x}'s bit {b} is stale");
                        }
                    }
                }
                // Every entry is one of those lines: none outlives the last cached copy.
                assert_eq!(
                    sim.dir.len(),
                    lines.len() - private,
                    "{name}: entries of uncached lines"
                );
                if name == "laso-hpl" && !general && os.is_none() {
                    // The private lines were exercised: each thread's own region (threads the
                    // os scheduler moves share theirs with the domains they move to).
                    assert!(private > 1000, "{name}: {private} private lines");
                    // And lines written on one core and read on another of the node.
                    assert!(shared_dirty > 0, "{name}: no line dirty without an owner");
                }
                if name == "kmaf-opteron" && !general && os.is_none() {
                    // MOESI: lines written on one node and read on another.
                    assert!(owned_across > 0, "{name}: no owned line read elsewhere");
                }
                checked += 1;
            }
        }
        assert!(checked >= 4, "{checked} runs checked");
    }

    /// Private lines (issue 4, 2026-11-27: `Simulator::private_lines`) keep the coherence state
    /// of lines only one domain has touched in the cache tags instead of the directory; the
    /// figures must be the directory's, bit for bit: on every catalog machine, with threads
    /// that stay (each keeps its region private) and with threads the os scheduler moves (their
    /// regions turn shared while their lines are in the caches they left, dirty ones among them).
    #[test]
    fn issue4_private_lines_give_the_directorys_figures() {
        let moving = OsScheduler {
            interval_ns: 20_000,
            move_probability: 0.5,
        };
        let mut with_private = 0;
        for name in numaff_machine::catalog::names() {
            let m = numaff_machine::catalog::load(name).unwrap();
            for os in [None, Some(moving.clone())] {
                let (mut a, ra, _) = mixed(&m, false, None, os.clone(), true).unwrap();
                let (mut b, rb, _) = mixed(&m, false, None, os.clone(), false).unwrap();
                assert!(!b.private_lines());
                assert_eq!(
                    format!("{ra:?}"),
                    format!("{rb:?}"),
                    "{name} {os:?}: report"
                );
                let (mut sa, mut sb) = (Vec::new(), Vec::new());
                a.take_samples(&mut sa);
                b.take_samples(&mut sb);
                assert_eq!(
                    format!("{sa:?}"),
                    format!("{sb:?}"),
                    "{name} {os:?}: samples"
                );
                if a.private_lines() {
                    with_private += 1;
                    // The run went past the point where pages stop being made private
                    // (`Process::takes_pages`): figures equal on both sides of it.
                    let pr = &a.procs[0];
                    assert!(
                        pr.private_pages >= 256 && !pr.takes_pages(),
                        "{name} {os:?}"
                    );
                    // The directory held fewer lines: the private ones were in the tags (all
                    // may have turned shared where threads moved).
                    let (da, db) = (a.directory_len(), b.directory_len());
                    assert!(
                        da < db || (os.is_some() && da == db),
                        "{name} {os:?}: {da} {db}"
                    );
                }
            }
        }
        // laso-hpl, laso-lpl, kmaf-xeon, agung-xeon2, agung-xeon56, agung-sim-4x16.
        assert!(with_private >= 12, "{with_private} runs with private lines");
    }

    #[test]
    fn issue4_common_shape_path_gives_the_general_paths_figures() {
        let mut shaped_machines = 0;
        for name in numaff_machine::catalog::names() {
            let m = numaff_machine::catalog::load(name).unwrap();
            let (r3, s3, shaped) = run(&m, false);
            let (r, s, _) = run(&m, true);
            assert_eq!(r3, r, "{name}: report");
            assert_eq!(s3, s, "{name}: samples");
            if shaped > 0 {
                shaped_machines += 1;
            }
            if name == "laso-hpl" {
                assert_eq!(shaped, m.pus().iter().count(), "laso-hpl: every PU shaped");
                // ... and on the geometry of `P8W20Geom` (change 23), so that its lookups ran.
                let sim = Simulator::new(&m, SimConfig::default());
                let f = sim.pus[0].p3.unwrap();
                let c = |k: usize| &sim.caches[k].cache;
                assert!(c(f.l1).is_p8() && c(f.l2).is_p8() && c(f.l3).is_w20());
            }
        }
        assert!(shaped_machines > 0);
    }

    /// One thread on laso-hpl's first PU: a read of one line, `Compute(100_000)` (past the
    /// first read's miss, so that nothing later waits for it), `n` more reads of that line (first
    /// level hits), then `tail`. Returns the thread's end (ns), the hardware samples taken (those
    /// with a latency: not the first touch's fault sample), the first level's hit latency and the
    /// cycle time.
    fn one_line(n: usize, tail: &[Op], cfg: SimConfig) -> (f64, u64, f64, f64) {
        let m = numaff_machine::catalog::load("laso-hpl").unwrap();
        let mut sim = Simulator::new(&m, cfg);
        let a = Op::Access(Access::read(0x1000_0000));
        let mut ops = vec![a, Op::Compute(100_000)];
        ops.extend(std::iter::repeat_n(a, n));
        ops.extend_from_slice(tail);
        let cpu = m.pus().iter().next().unwrap();
        let spec = ProcessSpec::new("line", DataPolicy::FirstTouch).thread(ThreadSpec::new(
            "t",
            cpu,
            ops.into_iter(),
        ));
        sim.spawn(spec).unwrap();
        sim.run();
        let mut samples = Vec::new();
        sim.take_samples(&mut samples);
        let hw = samples.iter().filter(|s| s.latency_ns.is_some()).count() as u64;
        let p = sim.threads[0].pu;
        (sim.threads[0].end, hw, sim.pus[p].lat[0], sim.cycle_ns)
    }

    /// `run_pu_in` keeps the PU's clock in a local while a thread's accesses run and `step` hands
    /// it back (issue 4): an op after the accesses must start from the clock they left, and a
    /// hardware sample's cost must still move it. With the clock written back too late, the
    /// `Compute` below would start from the time the thread was picked (0), and with a sample's
    /// cost dropped, sampling would cost nothing.
    #[test]
    fn issue4_hot_state_follows_its_thread() {
        // Two threads time-sliced on one PU every 300 ns and a third on another PU, each with its
        // own number of accesses over a private 8 MiB region (memory reads, local and remote
        // under interleaving), with a compute op every 50th: each thread's hot state (its ops,
        // window, access and memory counts) must come back to it at every slice's end, horizon
        // and finish (`Simulator::run` holds it only while the thread runs, change 30).
        let m = numaff_machine::catalog::load("laso-hpl").unwrap();
        let cfg = SimConfig {
            slice_ns: 300.0,
            ..SimConfig::default()
        };
        let mut sim = Simulator::new(&m, cfg);
        let cpus: Vec<u32> = m.pus().iter().collect();
        let counts = [3_000u64, 2_000, 2_500];
        let mut spec = ProcessSpec::new("hot", DataPolicy::Interleave);
        for (k, &n) in counts.iter().enumerate() {
            let mut x = 0x2545_f491_4f6c_dd1du64 ^ (k as u64 + 1);
            let mut ops = Vec::new();
            for i in 0..n {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                ops.push(Op::Access(Access::read(
                    0x1000_0000 + ((k as u64) << 24) + (x >> 20) % (8 << 20),
                )));
                if i % 50 == 49 {
                    ops.push(Op::Compute(100));
                }
            }
            let cpu = cpus[if k < 2 { 0 } else { cpus.len() - 1 }];
            spec = spec.thread(ThreadSpec::new(format!("t{k}"), cpu, ops.into_iter()));
        }
        sim.spawn(spec).unwrap();
        let r = sim.run();
        assert!(sim.all_done());
        assert_eq!(r.accesses, counts.iter().sum::<u64>());
        for (t, &n) in r.threads.iter().zip(&counts) {
            assert_eq!(t.accesses, n, "{}", t.name);
            let mem = t.local_accesses + t.remote_accesses;
            assert!(mem > n / 2 && mem <= n, "{}: {mem} memory reads", t.name);
        }
        let local: u64 = r.threads.iter().map(|t| t.local_accesses).sum();
        let remote: u64 = r.threads.iter().map(|t| t.remote_accesses).sum();
        assert_eq!((local, remote), (r.local_accesses, r.remote_accesses));
        assert!(local > 0 && remote > 0);
        // The two threads sharing PU 0 took turns: each ended after the other had started.
        let (a, b) = (&r.threads[0], &r.threads[1]);
        assert!(a.end_ns > b.start_ns && b.end_ns > a.start_ns);
    }

    #[test]
    fn issue4_ops_and_samples_see_the_clock_the_accesses_left() {
        let n = 2_000;
        let c = 1_000_000;
        let (plain, _, lat1, cycle) = one_line(n, &[], SimConfig::default());
        let (computed, ..) = one_line(n, &[Op::Compute(c)], SimConfig::default());
        // Without the tail the thread ends when its last hit is done; with it, `c` cycles after
        // that hit was issued (long after it is done).
        let want = c as f64 * cycle - lat1;
        assert!(lat1 > 0.0 && plain > 1_000.0, "{lat1} {plain}");
        assert!(
            (computed - plain - want).abs() < 1e-6 * computed,
            "compute after accesses: {computed} - {plain} != {want}"
        );
        // Every sample delays the later accesses by its cost (all hits of one latency, each
        // cost far above it), so the thread ends that much later in all.
        let cost = 50.0;
        let sampled = SimConfig {
            hw_sampling: Some(HwSampling {
                period: 10,
                jitter: 0.0,
                min_latency_ns: 0.0,
                cost_ns: cost,
            }),
            ..SimConfig::default()
        };
        let (with, samples, ..) = one_line(n, &[], sampled);
        assert_eq!(samples, (n as u64 + 1) / 10, "one sample per 10 accesses");
        let want = samples as f64 * cost;
        assert!(
            (with - plain - want).abs() < 1e-6 * with,
            "sampling: {with} - {plain} != {samples} x {cost}"
        );
    }

    /// The access path is generic over the directory's form (`dir::Form`, picked once per
    /// `run_pu`): every form that can hold a machine's directory gives the figures of the form
    /// `new` picks, on every catalog machine, on the common-shape and the general paths.
    #[test]
    fn issue4_every_directory_form_gives_the_same_figures() {
        let mut runs = [0; 3];
        for name in numaff_machine::catalog::names() {
            let m = numaff_machine::catalog::load(name).unwrap();
            for general in [false, true] {
                let (r, s, _) = run(&m, general);
                for (i, kind) in [FormKind::Packed, FormKind::Narrow, FormKind::Wide]
                    .into_iter()
                    .enumerate()
                {
                    let Some((rk, sk, _)) = run_with(&m, general, Some(kind), true) else {
                        continue;
                    };
                    runs[i] += 1;
                    assert_eq!(rk, r, "{name} {kind:?} general {general}: report");
                    assert_eq!(sk, s, "{name} {kind:?} general {general}: samples");
                }
            }
        }
        // laso-hpl's directory fits the packed form; every machine's fits the wide one.
        assert!(runs[0] > 0 && runs[1] > 0, "{runs:?}");
        assert_eq!(runs[2], 2 * numaff_machine::catalog::names().len());
    }
}
