//! The library's state and operations in safe(ish) Rust: the machine, the arrays it allocated, the
//! thread schedule, and placement of an array's pages on nodes. The C entry points (crate::ffi) are
//! thin wrappers over [`Library`].

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use numaff_linux::mempolicy::{self, Mode};
use numaff_linux::moves::{self, Budget, Dest, Scope};
use numaff_linux::pages::{self, PageStatus};
use numaff_machine::{CpuSet, Machine};

use crate::error::{Error, Result, EINVAL, ENOARRAY, ENODE, ENOMEM, EPARTIAL, ESYS};
use crate::map;

/// MADV_POPULATE_WRITE (Linux 5.14): fault pages in writable without changing their contents.
const MADV_POPULATE_WRITE: libc::c_int = 23;

/// How threads are placed for the bind policies (004 §3.1's thread scheduling).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sched {
    /// Thread t on its own core when threads <= cores (else on PU t mod PUs); numaff_bind_thread pins.
    Pin,
    /// The operating system schedules; numaff_bind_thread does nothing. Blocks are still placed on
    /// the node where the pin schedule would have put each thread.
    Os,
    /// Thread t on the user's cpu t mod n (numaff_set_thread_cpus); numaff_bind_thread pins.
    User,
}

/// A policy applied to an array, for statistics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Policy {
    /// Nothing applied: first touch.
    FirstTouch,
    BindAll(Vec<u32>),
    BindBlock {
        block_rows: u64,
    },
    Cyclic,
    CyclicBlock {
        block_rows: u64,
    },
    SkewMapp,
    PrimeMapp,
    Random {
        seed: u64,
    },
    RandomBlock {
        block_rows: u64,
        seed: u64,
    },
    Migrated,
}

impl Policy {
    pub fn describe(&self) -> String {
        match self {
            Policy::FirstTouch => "first-touch".into(),
            Policy::BindAll(n) => format!("bind_all {n:?}"),
            Policy::BindBlock { block_rows } => format!("bind_block ({block_rows} rows per block)"),
            Policy::Cyclic => "cyclic".into(),
            Policy::CyclicBlock { block_rows } => format!("cyclic_block ({block_rows} rows)"),
            Policy::SkewMapp => "skew_mapp".into(),
            Policy::PrimeMapp => "prime_mapp".into(),
            Policy::Random { seed } => format!("random (seed {seed})"),
            Policy::RandomBlock { block_rows, seed } => {
                format!("random_block ({block_rows} rows, seed {seed})")
            }
            Policy::Migrated => "migrated".into(),
        }
    }
}

/// One array allocated by the library: a private anonymous mapping of whole pages.
#[derive(Debug, Clone)]
pub struct Array {
    pub addr: usize,
    /// Mapped bytes (whole pages).
    pub mapped: usize,
    /// Bytes asked for.
    pub bytes: u64,
    pub elem_size: u64,
    pub dims: Vec<u64>,
    pub policy: Policy,
}

impl Array {
    /// Rows are along the first dimension: a row of a 1-D array is one element.
    pub fn rows(&self) -> u64 {
        self.dims[0]
    }
    pub fn row_bytes(&self) -> u64 {
        self.dims[1..].iter().product::<u64>() * self.elem_size
    }
}

pub struct Library {
    pub machine: Machine,
    /// The memory nodes the policies spread over, by id (nodes with memory, allowed to us).
    pub nodes: Vec<u32>,
    /// The cpus this process may use, in node then core order: the pin schedule's order.
    pub cores: Vec<u32>,
    pub pus: Vec<u32>,
    pub page: u64,
    pub arrays: BTreeMap<usize, Array>,
    pub sched: Sched,
    pub user_cpus: Vec<u32>,
    pub threads: Option<u32>,
    pub seed: u64,
    pub migrated_pages: u64,
    pub pinned: BTreeSet<u32>,
}

/// OMP_NUM_THREADS's first value, if set and valid.
fn omp_threads() -> Option<u32> {
    let v = std::env::var("OMP_NUM_THREADS").ok()?;
    v.split(',').next()?.trim().parse().ok().filter(|n| *n > 0)
}

impl Library {
    /// The library on `machine`, restricted to the nodes and cpus this process may use.
    pub fn new(machine: Machine) -> Result<Library> {
        let allowed_nodes = mempolicy::allowed_nodes().ok();
        let allowed_cpus = numaff_linux::affinity::get(0).ok();
        let mut nodes: Vec<u32> = machine
            .nodes
            .iter()
            .filter(|n| n.memory_bytes > 0)
            .map(|n| n.id)
            .collect();
        if nodes.is_empty() {
            nodes = machine.nodes.iter().map(|n| n.id).collect();
        }
        if let Some(a) = &allowed_nodes {
            if nodes.iter().any(|n| a.contains(*n)) {
                nodes.retain(|n| a.contains(*n));
            }
        }
        if nodes.is_empty() {
            return Err(Error::new(
                crate::error::ETOPO,
                format!("machine '{}' has no NUMA node", machine.name),
            ));
        }
        let ok_cpu = |c: u32| allowed_cpus.as_ref().is_none_or(|a| a.contains(c));
        let node_key = |c: u32| machine.node_of_pu(c).unwrap_or(u32::MAX);
        let mut cores: Vec<u32> = machine
            .cores()
            .filter_map(|(_, core)| core.pus.iter().find(|c| ok_cpu(*c)))
            .collect();
        cores.sort_by_key(|c| (node_key(*c), *c));
        let mut pus: Vec<u32> = machine.pus().iter().filter(|c| ok_cpu(*c)).collect();
        pus.sort_by_key(|c| (node_key(*c), *c));
        if cores.is_empty() {
            cores = allowed_cpus.map(|a| a.iter().collect()).unwrap_or_default();
        }
        if pus.is_empty() {
            pus = cores.clone();
        }
        let page = pages::page_size() as u64;
        let seed = std::env::var("NUMAFF_SEED")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0x6e75_6d61_6666);
        Ok(Library {
            machine,
            nodes,
            cores,
            pus,
            page,
            arrays: BTreeMap::new(),
            sched: Sched::Pin,
            user_cpus: Vec::new(),
            threads: None,
            seed,
            migrated_pages: 0,
            pinned: BTreeSet::new(),
        })
    }

    /// The thread count the block policies assume: numaff_set_threads, else OMP_NUM_THREADS, else
    /// the number of cpus this process may use.
    pub fn thread_count(&self) -> u32 {
        self.threads
            .or_else(omp_threads)
            .unwrap_or(self.pus.len().max(1) as u32)
    }

    /// The cpu thread `t` runs on under the schedule (for Os: where Pin would have put it).
    pub fn cpu_of_thread(&self, t: u32) -> Option<u32> {
        let t = t as usize;
        let list = match self.sched {
            Sched::User if !self.user_cpus.is_empty() => &self.user_cpus,
            _ if (self.thread_count() as usize) <= self.cores.len() => &self.cores,
            _ => &self.pus,
        };
        if list.is_empty() {
            None
        } else {
            Some(list[t % list.len()])
        }
    }

    /// The node (id) thread `t` runs on; a cpu-less or memory-less answer falls back to cyclic.
    pub fn node_of_thread(&self, t: u32) -> u32 {
        self.cpu_of_thread(t)
            .and_then(|c| self.machine.node_of_pu(c))
            .filter(|n| self.nodes.contains(n))
            .unwrap_or(self.nodes[t as usize % self.nodes.len()])
    }

    /// Pins the calling thread as thread `t` of the schedule (nothing under Sched::Os).
    pub fn bind_thread(&mut self, t: u32) -> Result<()> {
        if self.sched == Sched::Os {
            return Ok(());
        }
        let cpu = self
            .cpu_of_thread(t)
            .ok_or_else(|| Error::new(ENODE, "no cpu to pin threads on"))?;
        let set: CpuSet = std::iter::once(cpu).collect();
        numaff_linux::affinity::set(0, &set)?;
        self.pinned.insert(cpu);
        Ok(())
    }

    /// Checks a node list given by the caller against the machine's nodes.
    pub fn check_nodes(&self, nodes: &[i32]) -> Result<Vec<u32>> {
        if nodes.is_empty() {
            return Ok(self.nodes.clone());
        }
        nodes
            .iter()
            .map(|&n| {
                u32::try_from(n)
                    .ok()
                    .filter(|n| self.nodes.contains(n))
                    .ok_or_else(|| {
                        Error::new(
                            ENODE,
                            format!(
                                "node {n} is not a memory node of this machine (nodes {:?})",
                                self.nodes
                            ),
                        )
                    })
            })
            .collect()
    }

    pub fn check_cpus(&self, cpus: &[i32]) -> Result<Vec<u32>> {
        let all = self.machine.pus();
        cpus.iter()
            .map(|&c| {
                u32::try_from(c)
                    .ok()
                    .filter(|c| all.contains(*c))
                    .ok_or_else(|| {
                        Error::new(ENODE, format!("cpu {c} is not a cpu of this machine"))
                    })
            })
            .collect()
    }

    /// Allocates an array of `dims` elements of `elem_size` bytes: page-aligned, contiguous, zeroed,
    /// no page present yet, base pages only (MADV_NOHUGEPAGE) so every page can be placed.
    pub fn alloc(&mut self, dims: &[u64], elem_size: u64) -> Result<usize> {
        if elem_size == 0 || dims.contains(&0) {
            return Err(Error::new(
                EINVAL,
                "array dimensions and element size must be > 0",
            ));
        }
        let bytes = dims
            .iter()
            .try_fold(elem_size, |a, d| a.checked_mul(*d))
            .filter(|b| *b <= isize::MAX as u64 / 2)
            .ok_or_else(|| {
                Error::new(
                    EINVAL,
                    format!("array size {dims:?} x {elem_size} overflows"),
                )
            })?;
        let mapped = bytes.div_ceil(self.page) * self.page;
        // A raw mapping rather than an owned memmap2 one: it belongs to the C program and must live
        // until numaff_free, whatever happens to the library's state.
        // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapped as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::new(
                ENOMEM,
                format!(
                    "cannot map {mapped} bytes for an array: {}",
                    std::io::Error::last_os_error()
                ),
            ));
        }
        // SAFETY: advice on the mapping just made; failure (no THP support) is harmless.
        unsafe { libc::madvise(p, mapped as usize, libc::MADV_NOHUGEPAGE) };
        let addr = p as usize;
        self.arrays.insert(
            addr,
            Array {
                addr,
                mapped: mapped as usize,
                bytes,
                elem_size,
                dims: dims.to_vec(),
                policy: Policy::FirstTouch,
            },
        );
        Ok(addr)
    }

    pub fn array(&self, addr: usize) -> Result<&Array> {
        self.arrays.get(&addr).ok_or_else(|| {
            Error::new(
                ENOARRAY,
                format!("{addr:#x} is not the start of an array from numaff_alloc_*"),
            )
        })
    }

    pub fn free(&mut self, addr: usize) -> Result<()> {
        let a = self.array(addr)?.clone();
        // SAFETY: the mapping was made by alloc with exactly this address and length.
        let r = unsafe { libc::munmap(a.addr as *mut libc::c_void, a.mapped) };
        if r != 0 {
            return Err(Error::new(
                ESYS,
                format!(
                    "munmap of array {addr:#x}: {}",
                    std::io::Error::last_os_error()
                ),
            ));
        }
        self.arrays.remove(&addr);
        Ok(())
    }

    /// The target node (id) of every page of array `a` under `policy`.
    pub fn targets(&self, a: &Array, policy: &Policy) -> Vec<u32> {
        let npages = a.mapped as u64 / self.page;
        let m = self.nodes.len() as u32;
        let threads = self.thread_count();
        let rb = a.row_bytes();
        let unit = |i: u64, block_rows: u64| map::row_of_page(i, self.page, rb) / block_rows.max(1);
        let capacity: Vec<u64>;
        let idx = |i: u64| -> u32 {
            match policy {
                Policy::Cyclic | Policy::FirstTouch | Policy::Migrated => {
                    self.nodes[map::cyclic(i, m) as usize]
                }
                Policy::CyclicBlock { block_rows } => {
                    self.nodes[map::cyclic(unit(i, *block_rows), m) as usize]
                }
                Policy::SkewMapp => self.nodes[map::skew_mapp(i, m) as usize],
                Policy::PrimeMapp => self.nodes[map::prime_mapp(i, m) as usize],
                Policy::Random { seed } => self.nodes[map::random(i, *seed, m) as usize],
                Policy::RandomBlock { block_rows, seed } => {
                    self.nodes[map::random(unit(i, *block_rows), *seed, m) as usize]
                }
                Policy::BindBlock { block_rows } => {
                    self.node_of_thread(map::bind_block(i, self.page, rb, *block_rows, threads))
                }
                Policy::BindAll(_) => 0, // handled below
            }
        };
        if let Policy::BindAll(nodes) = policy {
            capacity = nodes.iter().map(|n| self.free_pages(*n)).collect();
            return (0..npages)
                .map(|i| nodes[map::bind_all(i, &capacity) as usize])
                .collect();
        }
        (0..npages).map(idx).collect()
    }

    /// Free pages on a node now (MemFree of its sysfs meminfo, less 1/16 kept for the kernel), or
    /// unlimited when unknown.
    fn free_pages(&self, node: u32) -> u64 {
        let path = format!("/sys/devices/system/node/node{node}/meminfo");
        let kb = std::fs::read_to_string(path).ok().and_then(|t| {
            t.lines()
                .find(|l| l.contains("MemFree:"))
                .and_then(|l| l.split_whitespace().nth(3))
                .and_then(|v| v.parse::<u64>().ok())
        });
        match kb {
            Some(kb) => kb * 1024 / self.page * 15 / 16,
            None => u64::MAX / 4,
        }
    }

    /// Applies `policy` to the whole array at `addr`: computes each page's node and places it.
    pub fn apply(&mut self, addr: usize, policy: Policy) -> Result<()> {
        let a = self.array(addr)?.clone();
        let targets = self.targets(&a, &policy);
        let r = self.place(&a, 0, &targets);
        if let Some(arr) = self.arrays.get_mut(&addr) {
            arr.policy = policy;
        }
        r
    }

    /// Moves rows [first_row, first_row + nrows) of the array (nrows 0: to its end) onto `nodes`,
    /// in contiguous equal parts (one node: all of them there).
    pub fn migrate(
        &mut self,
        addr: usize,
        first_row: u64,
        nrows: u64,
        nodes: &[u32],
    ) -> Result<()> {
        let a = self.array(addr)?.clone();
        let rows = a.rows();
        if first_row >= rows || nodes.is_empty() {
            return Err(Error::new(
                EINVAL,
                format!("rows from {first_row} of an array of {rows} rows"),
            ));
        }
        let last = if nrows == 0 {
            rows
        } else {
            first_row.saturating_add(nrows).min(rows)
        };
        let rb = a.row_bytes();
        let first_page = first_row * rb / self.page;
        let end_page = (last * rb).div_ceil(self.page);
        let n = end_page - first_page;
        let per = n.div_ceil(nodes.len() as u64).max(1);
        let targets: Vec<u32> = (0..n).map(|i| nodes[(i / per) as usize]).collect();
        let r = self.place(&a, first_page, &targets);
        if let Some(arr) = self.arrays.get_mut(&addr) {
            arr.policy = Policy::Migrated;
        }
        r
    }

    /// Moves columns [first_col, first_col + ncols) (ncols 0: to the end) of every row of a 2-D or
    /// 3-D array onto `nodes`, in contiguous equal parts of the columns (map::column_pages).
    pub fn migrate_cols(
        &mut self,
        addr: usize,
        first_col: u64,
        ncols: u64,
        nodes: &[u32],
    ) -> Result<()> {
        let a = self.array(addr)?.clone();
        if a.dims.len() < 2 {
            return Err(Error::new(
                EINVAL,
                "a 1-D array has no columns: use numaff_migrate for its rows",
            ));
        }
        let cols = a.dims[1];
        if first_col >= cols || nodes.is_empty() {
            return Err(Error::new(
                EINVAL,
                format!("columns from {first_col} of an array of {cols} columns"),
            ));
        }
        let last = if ncols == 0 {
            cols
        } else {
            first_col.saturating_add(ncols).min(cols)
        };
        let col_bytes = a.dims[2..].iter().product::<u64>() * a.elem_size;
        let moved = map::column_pages(
            a.rows(),
            a.row_bytes(),
            col_bytes,
            first_col,
            last - first_col,
            nodes.len() as u32,
            self.page,
        );
        let idx: Vec<u64> = moved.iter().map(|(p, _)| *p).collect();
        let targets: Vec<u32> = moved.iter().map(|(_, n)| nodes[*n as usize]).collect();
        let r = self.place_pages(&a, &idx, &targets);
        if let Some(arr) = self.arrays.get_mut(&addr) {
            arr.policy = Policy::Migrated;
        }
        r
    }

    /// Places pages first_page.. of `a` on `targets` (see [`Library::place_pages`]).
    fn place(&mut self, a: &Array, first_page: u64, targets: &[u32]) -> Result<()> {
        let idx: Vec<u64> = (first_page..first_page + targets.len() as u64).collect();
        self.place_pages(a, &idx, targets)
    }

    /// Places the pages `idx` (indices, increasing) of `a` on `targets`: absent pages are faulted
    /// in on their node (a placement thread with a preferred-node policy, MADV_POPULATE_WRITE),
    /// present ones moved with move_pages; then each run of pages is bound (MPOL_BIND over the
    /// library's nodes, nothing moved) so that the kernel's NUMA balancing leaves them where they are.
    fn place_pages(&mut self, a: &Array, idx: &[u64], targets: &[u32]) -> Result<()> {
        let addrs: Vec<u64> = idx.iter().map(|p| a.addr as u64 + p * self.page).collect();
        // Runs of consecutive pages: (first address, bytes).
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for &ad in &addrs {
            match runs.last_mut() {
                Some((start, len)) if *start + *len == ad => *len += self.page,
                _ => runs.push((ad, self.page)),
            }
        }
        // A range policy would win over the placement thread's policy: clear it first.
        for (start, len) in &runs {
            mempolicy::mbind(*start, *len, Mode::Default, 0, &CpuSet::new(), 0)?;
        }
        let before = pages::query(0, &addrs)?;
        let mut absent: BTreeMap<u32, Vec<(u64, u64)>> = BTreeMap::new();
        for (i, s) in before.status.iter().enumerate() {
            // Never-touched pages read as -ENOENT, or as -EFAULT where not even their page table
            // exists yet (move_pages' FOLL_DUMP walk); the array is mapped, so both mean absent.
            if matches!(s, PageStatus::NotPresent | PageStatus::BadAddress) {
                let runs = absent.entry(targets[i]).or_default();
                match runs.last_mut() {
                    Some((start, n)) if *start + *n * self.page == addrs[i] => *n += 1,
                    _ => runs.push((addrs[i], 1)),
                }
            }
        }
        if !absent.is_empty() {
            populate(&absent, self.page)?;
        }
        let progress = moves::move_pages(
            0,
            &addrs,
            Dest::PerPage(targets),
            Scope::Private,
            Budget::UNLIMITED,
        )?;
        self.migrated_pages += progress.counts.moved;
        let nodes: CpuSet = self.nodes.iter().copied().collect();
        for (start, len) in &runs {
            mempolicy::mbind(*start, *len, Mode::Bind, 0, &nodes, 0)?;
        }
        let c = &progress.counts;
        let off = targets.len() as u64 - c.on_target();
        if off > 0 {
            let code = if c.no_memory > 0 { ENOMEM } else { EPARTIAL };
            return Err(Error::new(
                code,
                format!(
                    "{off} of {} pages of array {:#x} are not on their node: {c:?}",
                    targets.len(),
                    a.addr
                ),
            ));
        }
        Ok(())
    }

    /// Pages per node (by node id) of the array now, from a move_pages query; absent pages under
    /// the key u32::MAX.
    pub fn pages_per_node(&self, addr: usize) -> Result<BTreeMap<u32, u64>> {
        let a = self.array(addr)?;
        let st = pages::query_range(0, a.addr as u64, a.mapped as u64)?;
        let mut m = st.per_node();
        let absent = st
            .status
            .iter()
            .filter(|s| matches!(s, PageStatus::NotPresent | PageStatus::BadAddress))
            .count() as u64;
        if absent > 0 {
            m.insert(u32::MAX, absent);
        }
        Ok(m)
    }

    /// The statistics report of numaff_print_stats.
    pub fn report(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "numaff: machine '{}': nodes {:?}, {} cores, {} cpus, page {} B",
            self.machine.name,
            self.nodes,
            self.cores.len(),
            self.pus.len(),
            self.page
        );
        let pinned: Vec<u32> = self.pinned.iter().copied().collect();
        let _ = writeln!(
            s,
            "numaff: {} threads assumed, schedule {:?}, cpus pinned {:?}",
            self.thread_count(),
            self.sched,
            pinned
        );
        let mut used = BTreeSet::new();
        for a in self.arrays.values() {
            let per = self.pages_per_node(a.addr).unwrap_or_default();
            let mut parts: Vec<String> = Vec::new();
            for (n, c) in &per {
                if *n == u32::MAX {
                    parts.push(format!("absent {c}"));
                } else {
                    used.insert(*n);
                    parts.push(format!("node{n} {c}"));
                }
            }
            let _ = writeln!(
                s,
                "numaff: array {:#x} {:?} x {} B, {} pages, {}: {}",
                a.addr,
                a.dims,
                a.elem_size,
                a.mapped as u64 / self.page,
                a.policy.describe(),
                parts.join(", ")
            );
        }
        let used: Vec<u32> = used.into_iter().collect();
        let _ = writeln!(
            s,
            "numaff: nodes in use {:?}; pages migrated {}",
            used, self.migrated_pages
        );
        s
    }
}

/// Faults in each run of absent pages on its node, from a short-lived thread whose memory policy
/// prefers that node (so the caller's own policy is never touched, and a full node spills over
/// instead of failing; move_pages then reports what is not on its node).
fn populate(absent: &BTreeMap<u32, Vec<(u64, u64)>>, page: u64) -> Result<()> {
    std::thread::scope(|s| {
        s.spawn(|| -> Result<()> {
            for (node, runs) in absent {
                let set: CpuSet = std::iter::once(*node).collect();
                mempolicy::set_thread_policy(Mode::Preferred, 0, &set)?;
                for (start, n) in runs {
                    fault_in(*start, *n * page, page)?;
                }
            }
            Ok(())
        })
        .join()
        .unwrap_or_else(|_| {
            Err(Error::new(
                crate::error::EINTERNAL,
                "placement thread panicked",
            ))
        })
    })
}

/// Faults [start, start + len) in for writing without changing its contents.
fn fault_in(start: u64, len: u64, page: u64) -> Result<()> {
    // SAFETY: the range lies in an array mapping of this process (read/write, private anonymous).
    let r = unsafe {
        libc::madvise(
            start as *mut libc::c_void,
            len as usize,
            MADV_POPULATE_WRITE,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() != Some(libc::EINVAL) {
        return Err(Error::new(
            ESYS,
            format!("madvise(MADV_POPULATE_WRITE) on {start:#x}+{len}: {e}"),
        ));
    }
    // Kernels before 5.14: write each page's first byte back to itself (absent pages read as 0).
    let mut a = start;
    while a < start + len {
        let p = a as *mut u8;
        // SAFETY: p is inside the array mapping; the byte written is the byte read.
        unsafe { std::ptr::write_volatile(p, std::ptr::read_volatile(p)) };
        a += page;
    }
    Ok(())
}
