//! Measures this host's memory latency and read bandwidth between NUMA nodes (`numaff topo
//! --measure`), as Intel MLC does: a pointer chase for latency, a multi-threaded streaming read for
//! bandwidth.

use std::fmt;
use std::io;
use std::sync::{Barrier, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::{MachineError, Result};
use crate::model::{Machine, Matrix};

/// `MPOL_BIND` of `<linux/mempolicy.h>`: allocate only on the given nodes.
const MPOL_BIND: libc::c_int = 2;
/// `MPOL_MF_STRICT`: fail if pages of the range are not on the policy's nodes.
const MPOL_MF_STRICT: libc::c_uint = 1 << 0;
/// `MPOL_MF_MOVE`: move pages of the range (owned by this process) onto the policy's nodes.
const MPOL_MF_MOVE: libc::c_uint = 1 << 1;

/// The smallest default buffer, whatever the caches: 256 MiB.
pub const MIN_DEFAULT_BUFFER_BYTES: u64 = 256 << 20;
/// The smallest buffer `measure` accepts: one 4 KiB page.
pub const MIN_BUFFER_BYTES: u64 = 4096;
/// Huge page size used to align the buffer when huge pages are asked for.
const HUGE_PAGE: usize = 2 << 20;
/// Cache line size assumed when the machine does not give one.
const DEFAULT_LINE: usize = 64;

/// How to measure. [`Default`] gives MLC-like settings that take a few seconds per cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeasureOptions {
    /// Bytes of the buffer of each memory node. `None`: [`default_buffer_bytes`], well above the
    /// last-level cache: max(8 x the total last-level cache of the machine, 256 MiB), capped by a
    /// quarter of the memory node.
    pub buffer_bytes: Option<u64>,
    /// Dependent loads timed in each latency repeat.
    pub latency_loads: u64,
    /// Passes over the whole buffer in each bandwidth repeat.
    pub bandwidth_passes: u32,
    /// Timed repeats of each cell (after one untimed warm-up); the median is reported.
    pub repeats: u32,
    /// Reading threads per cpu node for bandwidth, pinned to the first PUs of the node. `None`: one
    /// per PU of the node.
    pub bandwidth_threads: Option<usize>,
    /// Ask for transparent huge pages (`madvise(MADV_HUGEPAGE)`) so that the chase measures memory
    /// rather than page walks (TLB misses); ignored where THP is off.
    pub huge_pages: bool,
    /// Seed of the random chase permutation (the same seed gives the same chase).
    pub seed: u64,
}

impl Default for MeasureOptions {
    fn default() -> Self {
        MeasureOptions {
            buffer_bytes: None,
            latency_loads: 1_000_000,
            bandwidth_passes: 4,
            repeats: 5,
            bandwidth_threads: None,
            huge_pages: true,
            seed: 0x6e75_6d61_6666, // "numaff"
        }
    }
}

/// The smallest and largest of the repeats of one cell.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Spread {
    /// Smallest repeat.
    pub min: f64,
    /// Largest repeat.
    pub max: f64,
}

/// The result of [`measure`]: matrices indexed like [`Machine::nodes`] (row = node of the cpus,
/// column = node of the memory). Rows of nodes without cpus stay 0.0.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measurement {
    /// Node ids, in the order of the rows and columns.
    pub nodes: Vec<u32>,
    /// Median ns per dependent load.
    pub latency_ns: Matrix<f64>,
    /// Smallest and largest latency repeat, ns.
    pub latency_spread_ns: Matrix<Spread>,
    /// Median read bandwidth, MB/s (10^6 bytes per second).
    pub bandwidth_mbps: Matrix<f64>,
    /// Smallest and largest bandwidth repeat, MB/s.
    pub bandwidth_spread_mbps: Matrix<Spread>,
    /// Buffer size used for each memory node (by column), bytes.
    pub buffer_bytes: Vec<u64>,
    /// Bandwidth threads used for each cpu node (by row; 0 for nodes without cpus).
    pub threads: Vec<usize>,
    /// Repeats per cell.
    pub repeats: u32,
    /// Wall time of the whole measurement, seconds.
    pub seconds: f64,
    /// What the figures should be read with: steps skipped, settings that bias them.
    pub notes: Vec<String>,
}

impl Measurement {
    /// Stores the latency and bandwidth matrices into `m`, matching nodes by id (cells of nodes the
    /// measurement does not know stay 0.0).
    pub fn apply_to(&self, m: &mut Machine) {
        let pos: Vec<Option<usize>> = m
            .nodes
            .iter()
            .map(|n| self.nodes.iter().position(|&id| id == n.id))
            .collect();
        let remap = |src: &Matrix<f64>| -> Matrix<f64> {
            pos.iter()
                .map(|r| {
                    pos.iter()
                        .map(|c| match (r, c) {
                            (Some(r), Some(c)) => src[*r][*c],
                            _ => 0.0,
                        })
                        .collect()
                })
                .collect()
        };
        m.latency_ns = Some(remap(&self.latency_ns));
        m.bandwidth_mbps = Some(remap(&self.bandwidth_mbps));
    }
}

/// What a cell measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CellKind {
    /// The pointer chase.
    Latency,
    /// The streaming read.
    Bandwidth,
}

impl fmt::Display for CellKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CellKind::Latency => "latency",
            CellKind::Bandwidth => "bandwidth",
        })
    }
}

/// Reported as each cell starts (`finished == false`) and ends (`finished == true`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Node of the measuring cpus.
    pub cpu_node: u32,
    /// Node of the memory.
    pub mem_node: u32,
    /// Latency or bandwidth.
    pub kind: CellKind,
    /// Cells finished so far (this one included once `finished`).
    pub done: usize,
    /// Cells in all: 2 x cpu nodes x nodes.
    pub total: usize,
    /// Whether this cell has just finished (else it is starting).
    pub finished: bool,
}

impl fmt::Display for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} from the cpus of node {} to the memory of node {}",
            self.kind, self.cpu_node, self.mem_node
        )
    }
}

/// The default buffer for a memory node: max(8 x the total size of the machine's last-level caches,
/// 256 MiB), capped by a quarter of the node's memory (when known), in whole 2 MiB.
pub fn default_buffer_bytes(machine: &Machine, mem_node: u32) -> u64 {
    let llc: u64 = machine
        .last_level_caches()
        .iter()
        .map(|c| c.size_bytes)
        .sum();
    let mut bytes = llc.saturating_mul(8).max(MIN_DEFAULT_BUFFER_BYTES);
    if let Some(node) = machine.nodes.iter().find(|n| n.id == mem_node) {
        if node.memory_bytes > 0 {
            bytes = bytes.min(node.memory_bytes / 4);
        }
    }
    let huge = HUGE_PAGE as u64;
    if bytes >= huge {
        bytes - bytes % huge
    } else {
        bytes.max(MIN_BUFFER_BYTES)
    }
}

/// Measures the latency and bandwidth matrices of `machine` from every node with cpus to every node,
/// reporting each cell to `progress`. Needs the nodes and PUs to be the running machine's.
///
/// For each memory node one buffer is mapped (anonymous mmap), bound to that node with
/// `mbind(MPOL_BIND, MPOL_MF_STRICT | MPOL_MF_MOVE)` before any page of it is touched, and then
/// initialised as a single random cycle of cache-line-sized slots (Sattolo's algorithm). For each
/// node with cpus (a row of the matrices) the buffer is then
///
/// - chased from one PU of the cpu node: every load depends on the previous one, so the time per load
///   is the load-to-use latency of that memory seen from that node (ns);
/// - read as a stream of words by as many threads as the node has PUs (by default), each pinned to
///   one PU and summing its own share of the buffer, started together by a barrier: bytes read over
///   the elapsed time is the read bandwidth, in MB/s with MB = 10^6 bytes (as MLC).
///
/// Each cell is measured `repeats` times after one untimed warm-up and the **median** of the repeats
/// is reported, with the smallest and largest repeat as its spread. The median is chosen because the
/// machines we run on are shared: other jobs disturb some repeats (a preempted chase, a bandwidth
/// thread sharing its PU), and the median ignores those in either direction without betting on one
/// lucky repeat, as the minimum latency / maximum bandwidth would.
///
/// The memory is unmapped and the caller's cpu affinity restored when the measurement ends, also when
/// it fails. Every failing system call is an error that names the call, its object and what to do.
pub fn measure(
    machine: &Machine,
    opts: &MeasureOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<Measurement> {
    check_options(machine, opts)?;
    let started = Instant::now();
    let n = machine.nodes.len();
    let line = line_bytes(machine);
    let cpu_rows: Vec<usize> = (0..n)
        .filter(|&r| !machine.nodes[r].cpus.is_empty())
        .collect();
    let total = 2 * cpu_rows.len() * n;
    let mut out = Measurement {
        nodes: machine.nodes.iter().map(|n| n.id).collect(),
        latency_ns: vec![vec![0.0; n]; n],
        latency_spread_ns: vec![vec![Spread::default(); n]; n],
        bandwidth_mbps: vec![vec![0.0; n]; n],
        bandwidth_spread_mbps: vec![vec![Spread::default(); n]; n],
        buffer_bytes: vec![0; n],
        threads: vec![0; n],
        repeats: opts.repeats,
        seconds: 0.0,
        notes: Vec::new(),
    };
    for &r in &cpu_rows {
        let pus = machine.nodes[r].cpus.len();
        out.threads[r] = opts.bandwidth_threads.unwrap_or(pus);
    }
    if opts.huge_pages && thp_mode().as_deref() == Some("never") {
        out.notes.push(
            "transparent huge pages are off (/sys/kernel/mm/transparent_hugepage/enabled is \
             [never]): latency includes TLB misses on 4 KiB pages"
                .into(),
        );
    }

    // Restores the caller's affinity on every way out, including `?` and panics.
    let affinity = AffinityGuard::save()?;
    let llc: u64 = machine
        .last_level_caches()
        .iter()
        .map(|c| c.size_bytes)
        .sum();
    let mut done = 0;
    for c in 0..n {
        let mem = &machine.nodes[c];
        let bytes = opts
            .buffer_bytes
            .unwrap_or_else(|| default_buffer_bytes(machine, mem.id));
        out.buffer_bytes[c] = bytes;
        if bytes < llc.saturating_mul(4) {
            push_once(
                &mut out.notes,
                format!(
                    "the buffer ({} KiB) is not well above the last-level cache ({} KiB in all): \
                     the figures include cache hits and understate memory latency",
                    bytes >> 10,
                    llc >> 10
                ),
            );
        }
        let mut buf = prepare_buffer(machine, mem.id, bytes, line, opts, &mut out.notes)?;
        for &r in &cpu_rows {
            let node = &machine.nodes[r];
            for kind in [CellKind::Latency, CellKind::Bandwidth] {
                let report = |done, finished| Progress {
                    cpu_node: node.id,
                    mem_node: mem.id,
                    kind,
                    done,
                    total,
                    finished,
                };
                progress(report(done, false));
                let samples = match kind {
                    CellKind::Latency => {
                        let pu = node.cpus.first().ok_or_else(|| no_cpus(node.id))?;
                        latency_ns(&mut buf, pu, opts)?
                    }
                    CellKind::Bandwidth => {
                        let pus: Vec<u32> = node.cpus.iter().take(out.threads[r]).collect();
                        bandwidth_mbps(buf.words(), &pus, opts)?
                    }
                };
                let (median, spread) = summarize(samples);
                let (cell, spread_cell) = match kind {
                    CellKind::Latency => (&mut out.latency_ns, &mut out.latency_spread_ns),
                    CellKind::Bandwidth => {
                        (&mut out.bandwidth_mbps, &mut out.bandwidth_spread_mbps)
                    }
                };
                cell[r][c] = median;
                spread_cell[r][c] = spread;
                done += 1;
                progress(report(done, true));
            }
        }
        drop(buf);
    }
    affinity.restore()?;
    out.seconds = started.elapsed().as_secs_f64();
    Ok(out)
}

fn check_options(machine: &Machine, opts: &MeasureOptions) -> Result<()> {
    let bad = |what: String| Err(MachineError::Measure(what));
    if let Some(b) = opts.buffer_bytes {
        if b < MIN_BUFFER_BYTES {
            return bad(format!(
                "buffer size {b} bytes is too small; give a buffer of at least {MIN_BUFFER_BYTES} \
                 bytes, and well above the last-level cache (default: {} MiB here) to measure memory",
                default_buffer_bytes(machine, machine.nodes.first().map_or(0, |n| n.id)) >> 20
            ));
        }
        if usize::try_from(b).is_err() {
            return bad(format!(
                "buffer size {b} bytes does not fit in this process's address space; give a smaller buffer"
            ));
        }
    }
    if opts.latency_loads == 0 {
        return bad("latency loads per cell is 0; give at least 1 (default 1000000)".into());
    }
    if opts.repeats == 0 {
        return bad("repeats is 0; give at least 1 (default 5)".into());
    }
    if opts.bandwidth_passes == 0 {
        return bad("bandwidth passes is 0; give at least 1 (default 4)".into());
    }
    if machine.nodes.is_empty() {
        return bad(format!(
            "machine {} has no NUMA node; measure a machine with at least one node",
            machine.name
        ));
    }
    let cpu_nodes: Vec<_> = machine.cpu_nodes().collect();
    if cpu_nodes.is_empty() {
        return bad(format!(
            "machine {} has no node with cpus; there is nothing to measure from",
            machine.name
        ));
    }
    if let Some(t) = opts.bandwidth_threads {
        if t == 0 {
            return bad(
                "bandwidth threads per node is 0; give at least 1 (default: all PUs of the node)"
                    .into(),
            );
        }
        for node in cpu_nodes {
            if t > node.cpus.len() {
                return bad(format!(
                    "{t} bandwidth threads asked for, but node {} has only {} PUs ({}); give at most {}",
                    node.id,
                    node.cpus.len(),
                    node.cpus,
                    node.cpus.len()
                ));
            }
        }
    }
    Ok(())
}

fn no_cpus(node: u32) -> MachineError {
    MachineError::Measure(format!("node {node} has no cpu to measure from"))
}

/// The cache line of the machine (largest line of its caches), 64 bytes when unknown or odd.
fn line_bytes(machine: &Machine) -> usize {
    let line = machine
        .caches
        .iter()
        .map(|c| c.line_bytes as usize)
        .max()
        .unwrap_or(DEFAULT_LINE);
    if line >= std::mem::size_of::<usize>() && line.is_power_of_two() && line <= 4096 {
        line
    } else {
        DEFAULT_LINE
    }
}

/// The bracketed word of /sys/kernel/mm/transparent_hugepage/enabled.
fn thp_mode() -> Option<String> {
    let text = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok()?;
    let start = text.find('[')? + 1;
    let end = start + text[start..].find(']')?;
    Some(text[start..end].to_string())
}

/// Median and spread of the repeats (at least one).
fn summarize(mut samples: Vec<f64>) -> (f64, Spread) {
    samples.sort_by(f64::total_cmp);
    let k = samples.len();
    if k == 0 {
        return (0.0, Spread::default());
    }
    let median = if k % 2 == 1 {
        samples[k / 2]
    } else {
        (samples[k / 2 - 1] + samples[k / 2]) / 2.0
    };
    (
        median,
        Spread {
            min: samples[0],
            max: samples[k - 1],
        },
    )
}

// ---------------------------------------------------------------------------------------------
// The buffer: mmap, mbind, initialise, munmap.

/// An anonymous private mapping (memmap2), unmapped on drop. `start .. start + len` is the part in
/// use (aligned to 2 MiB when huge pages are asked for).
struct Buffer {
    _map: memmap2::MmapMut,
    start: *mut usize,
    len: usize,
}

impl Buffer {
    fn map(len: usize, align: usize) -> io::Result<Buffer> {
        let map_len = len
            .checked_add(align)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))?;
        let mut map = memmap2::MmapOptions::new().len(map_len).map_anon()?;
        let base = map.as_mut_ptr();
        let offset = (base as usize).next_multiple_of(align.max(1)) - base as usize;
        Ok(Buffer {
            start: base.wrapping_add(offset).cast(),
            _map: map,
            len,
        })
    }

    fn words(&self) -> &[usize] {
        // SAFETY: start .. start + len lies inside the mapping, which is readable, zero-filled
        // (anonymous) and lives as long as self; start is page aligned.
        unsafe { std::slice::from_raw_parts(self.start, self.len / std::mem::size_of::<usize>()) }
    }

    fn words_mut(&mut self) -> &mut [usize] {
        // SAFETY: as in `words`, and &mut self makes this the only reference.
        unsafe {
            std::slice::from_raw_parts_mut(self.start, self.len / std::mem::size_of::<usize>())
        }
    }
}

fn measure_err(what: String) -> MachineError {
    MachineError::Measure(what)
}

/// Maps the buffer of a memory node, binds it there, and writes the chase into it.
fn prepare_buffer(
    machine: &Machine,
    node: u32,
    bytes: u64,
    line: usize,
    opts: &MeasureOptions,
    notes: &mut Vec<String>,
) -> Result<Buffer> {
    let mib = bytes as f64 / f64::from(1 << 20);
    let len = usize::try_from(bytes)
        .map_err(|_| measure_err(format!("buffer of {mib:.0} MiB does not fit in memory")))?;
    let len = len - len % line;
    let mut avail = node_available_bytes(node);
    if machine.nodes.len() == 1 {
        // Some virtual machines' node meminfo undercounts (seen here: 4 GiB free in the node, 21
        // in /proc/meminfo); with one node the system-wide figure is the node's.
        avail = avail.max(system_available_bytes());
    }
    if let Some(avail) = avail {
        if bytes > avail {
            return Err(measure_err(format!(
                "buffer of {mib:.0} MiB is larger than the memory available on node {node} \
                 ({:.0} MiB free or reclaimable); try a smaller --buffer",
                avail as f64 / f64::from(1 << 20)
            )));
        }
    }
    let align = if opts.huge_pages { HUGE_PAGE } else { 0 };
    let mut buf = Buffer::map(len, align).map_err(|e| {
        measure_err(format!(
            "cannot map a buffer of {mib:.0} MiB for node {node} (mmap): {e}; try a smaller --buffer"
        ))
    })?;
    if opts.huge_pages {
        // SAFETY: the range lies inside our own fresh mapping.
        let rc = unsafe { libc::madvise(buf.start.cast(), buf.len, libc::MADV_HUGEPAGE) };
        if rc != 0 {
            let e = io::Error::last_os_error();
            push_once(
                notes,
                format!(
                    "huge pages not available (madvise MADV_HUGEPAGE: {e}): latency includes TLB \
                     misses on 4 KiB pages"
                ),
            );
        }
    }
    match mbind(buf.start.cast(), buf.len, node) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) && machine.nodes.len() == 1 => {
            push_once(
                notes,
                format!(
                    "mbind is not available (ENOSYS: kernel without NUMA support); the buffer was \
                     not bound, which on this single-node machine places it on node {node} anyway"
                ),
            );
        }
        Err(e) => return Err(mbind_error(e, node, mib)),
    }
    let base = buf.start as usize;
    init_chase(buf.words_mut(), line, opts.seed, base);
    check_placement(&buf, node, machine.page_size)?;
    Ok(buf)
}

fn push_once(notes: &mut Vec<String>, note: String) {
    if !notes.contains(&note) {
        notes.push(note);
    }
}

/// `mbind(addr, len, MPOL_BIND, {node}, MPOL_MF_STRICT | MPOL_MF_MOVE)`.
fn mbind(addr: *mut libc::c_void, len: usize, node: u32) -> io::Result<()> {
    let bits = libc::c_ulong::BITS as usize;
    let node = node as usize;
    let mut mask: Vec<libc::c_ulong> = vec![0; node / bits + 1];
    mask[node / bits] |= 1 << (node % bits);
    // The kernel reads maxnode - 1 bits (libnuma passes the mask size + 1).
    let maxnode = mask.len() * bits + 1;
    // SAFETY: addr/len is a range of our own mapping; mask outlives the call and holds maxnode - 1
    // bits.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mbind,
            addr,
            len,
            MPOL_BIND,
            mask.as_ptr(),
            maxnode,
            MPOL_MF_STRICT | MPOL_MF_MOVE,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn mbind_error(e: io::Error, node: u32, mib: f64) -> MachineError {
    let advice = match e.raw_os_error() {
        Some(libc::EINVAL) => format!(
            "node {node} does not exist, is offline, or is not allowed by this process's cpuset \
             (see Mems_allowed_list in /proc/self/status); measure only the allowed nodes or run \
             in a cpuset that includes node {node}"
        ),
        Some(libc::EPERM) => format!(
            "not permitted to bind memory to node {node}; run in a cpuset that includes node {node}"
        ),
        Some(libc::ENOMEM) => {
            format!("the buffer is too large for node {node}; try a smaller --buffer")
        }
        Some(libc::EIO) => format!("pages of the buffer could not be moved to node {node}"),
        Some(libc::ENOSYS) => "the kernel has no NUMA support (ENOSYS), but the machine has \
                               several nodes; run on a NUMA kernel"
            .to_string(),
        _ => "check the node and the buffer size".to_string(),
    };
    measure_err(format!(
        "cannot bind the {mib:.0} MiB buffer to node {node} (mbind MPOL_BIND): {e}; {advice}"
    ))
}

/// MemFree + FilePages - Shmem of the node from sysfs: what the node could give us. `None` when the
/// node's meminfo cannot be read (then the check is left to the kernel).
fn node_available_bytes(node: u32) -> Option<u64> {
    let text =
        std::fs::read_to_string(format!("/sys/devices/system/node/node{node}/meminfo")).ok()?;
    let field = |name: &str| -> Option<u64> {
        text.lines().find_map(|l| {
            let rest = l.split_once(':').filter(|(k, _)| k.ends_with(name))?.1;
            let kb: u64 = rest.split_whitespace().next()?.parse().ok()?;
            Some(kb * 1024)
        })
    };
    let free = field(" MemFree")?;
    let file = field(" FilePages").unwrap_or(0);
    let shmem = field(" Shmem").unwrap_or(0);
    Some(free + file.saturating_sub(shmem))
}

/// MemAvailable of /proc/meminfo, bytes.
fn system_available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Asks the kernel (move_pages without target nodes: a query) where a sample of the buffer's pages
/// are, and fails if one is not on `node`. Skipped where move_pages is unavailable.
fn check_placement(buf: &Buffer, node: u32, page_size: u64) -> Result<()> {
    let page = usize::try_from(page_size).unwrap_or(4096).max(1);
    let pages = buf.len.div_ceil(page);
    let count = pages.min(64);
    let addrs: Vec<*mut libc::c_void> = (0..count)
        .map(|i| {
            let offset = (i * pages / count) * page;
            buf.start.cast::<u8>().wrapping_add(offset).cast()
        })
        .collect();
    let mut status: Vec<libc::c_int> = vec![0; count];
    // SAFETY: addrs and status hold `count` entries and outlive the call; nodes = NULL only queries.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            0,
            count,
            addrs.as_ptr(),
            std::ptr::null::<libc::c_int>(),
            status.as_mut_ptr(),
            0,
        )
    };
    if rc != 0 {
        // ENOSYS (no NUMA) or an old kernel: nothing to check with.
        return Ok(());
    }
    if let Some((i, &s)) = status
        .iter()
        .enumerate()
        .find(|(_, &s)| s >= 0 && s as u32 != node)
    {
        return Err(measure_err(format!(
            "page {i} of the sample of the buffer lies on node {s}, not on node {node} it was bound \
             to; the measurement would be wrong (is another policy overriding mbind?)"
        )));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The chase.

/// Sattolo's algorithm over the `n` slots `words[0], words[stride], words[2 stride], ...`: leaves in
/// slot i the index of its successor, and the successors form one single cycle through all slots.
fn sattolo(words: &mut [usize], stride: usize, n: usize, seed: u64) {
    let mut rng = crate::rng::SplitMix64::new(seed);
    for i in 0..n {
        words[i * stride] = i;
    }
    for i in (1..n).rev() {
        let j = rng.below(i); // j < i: never a fixed point, hence one cycle
        words.swap(i * stride, j * stride);
    }
}

/// The successor of each of `n` slots in a random single cycle (the permutation the chase follows).
pub fn cyclic_permutation(n: usize, seed: u64) -> Vec<usize> {
    let mut v = vec![0; n];
    sattolo(&mut v, 1, n, seed);
    v
}

/// Writes the chase into the buffer: the first word of each `line`-sized slot holds the address of
/// the next slot of one random cycle through all slots. `base` is the address of `words[0]`.
fn init_chase(words: &mut [usize], line: usize, seed: u64, base: usize) {
    let stride = line / std::mem::size_of::<usize>();
    let n = words.len() / stride;
    // First touch in order (the pages are allocated on the bound node now), then shuffle.
    sattolo(words, stride, n, seed);
    for i in 0..n {
        words[i * stride] = base + words[i * stride] * line;
    }
}

/// Follows `loads` dependent pointers from `p`; returns where it stopped.
///
/// # Safety
/// `p` and every pointer reachable from it must point to a readable word holding another such
/// pointer (a chase written by [`init_chase`] in a live buffer).
#[inline(never)]
unsafe fn chase(mut p: *const usize, loads: u64) -> *const usize {
    let mut left = loads;
    while left >= 8 {
        // SAFETY: the caller's contract; volatile so that no load is elided or merged.
        unsafe {
            p = std::ptr::read_volatile(p) as *const usize;
            p = std::ptr::read_volatile(p) as *const usize;
            p = std::ptr::read_volatile(p) as *const usize;
            p = std::ptr::read_volatile(p) as *const usize;
            p = std::ptr::read_volatile(p) as *const usize;
            p = std::ptr::read_volatile(p) as *const usize;
            p = std::ptr::read_volatile(p) as *const usize;
            p = std::ptr::read_volatile(p) as *const usize;
        }
        left -= 8;
    }
    while left > 0 {
        // SAFETY: as above.
        p = unsafe { std::ptr::read_volatile(p) } as *const usize;
        left -= 1;
    }
    p
}

/// The calling thread's cpu time in ns (CLOCK_THREAD_CPUTIME_ID).
fn thread_cpu_ns() -> Result<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec for clock_gettime to fill.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return Err(MachineError::Measure(format!(
            "cannot read this thread's cpu time (clock_gettime): {}",
            io::Error::last_os_error()
        )));
    }
    Ok(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// ns per dependent load, one figure per repeat, chased from `pu`.
///
/// The chase is timed with the thread's cpu time, not the wall clock: on a shared machine the
/// thread may be preempted by other jobs, and time spent waiting for a cpu is not memory latency
/// (a stalled load still counts as cpu time). With other jobs running, wall-clock timing gives
/// 600 ns and more where the machine's latency is 160-200 ns.
fn latency_ns(buf: &mut Buffer, pu: u32, opts: &MeasureOptions) -> Result<Vec<f64>> {
    pin_to(pu)?;
    let mut p = buf.start as *const usize;
    // SAFETY: the buffer holds a chase written by init_chase and lives across these calls.
    p = std::hint::black_box(unsafe { chase(p, opts.latency_loads) }); // warm-up
    let mut samples = Vec::with_capacity(opts.repeats as usize);
    for _ in 0..opts.repeats {
        let t = thread_cpu_ns()?;
        // SAFETY: as above.
        p = std::hint::black_box(unsafe { chase(p, opts.latency_loads) });
        samples.push(thread_cpu_ns()?.saturating_sub(t) as f64 / opts.latency_loads as f64);
    }
    Ok(samples)
}

// ---------------------------------------------------------------------------------------------
// The streaming read.

/// Sum of the words (wrapping): a loop the compiler vectorises, reading every byte once.
#[inline(never)]
fn sum_words(words: &[usize]) -> usize {
    let mut acc = [0usize; 8];
    let mut chunks = words.chunks_exact(8);
    for c in &mut chunks {
        for k in 0..8 {
            acc[k] = acc[k].wrapping_add(c[k]);
        }
    }
    let tail = chunks
        .remainder()
        .iter()
        .fold(0usize, |a, &w| a.wrapping_add(w));
    acc.iter().fold(tail, |a, &w| a.wrapping_add(w))
}

/// How the reading threads agree to start: every thread reports it is pinned (or why it is not),
/// the spawning thread then says go or stop. Avoids a barrier that waits forever for a thread that
/// could not be spawned or pinned.
#[derive(Default)]
struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

#[derive(Default)]
struct GateState {
    ready: usize,
    failure: Option<String>,
    go: Option<bool>,
}

impl Gate {
    fn lock(&self) -> std::sync::MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A worker: report, then wait for the decision.
    fn arrive(&self, failure: Option<String>) -> bool {
        let mut s = self.lock();
        s.ready += 1;
        if failure.is_some() && s.failure.is_none() {
            s.failure = failure;
        }
        self.changed.notify_all();
        while s.go.is_none() {
            s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        s.go == Some(true)
    }

    /// The spawner: wait for `expected` workers (all of them spawned), decide.
    fn decide(&self, expected: usize, spawn_failure: Option<String>) -> Option<String> {
        let mut s = self.lock();
        if spawn_failure.is_none() {
            while s.ready < expected {
                s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner());
            }
        }
        let failure = spawn_failure.or_else(|| s.failure.clone());
        s.go = Some(failure.is_none());
        self.changed.notify_all();
        failure
    }
}

/// MB/s (10^6 bytes per second) of all `pus` reading their shares of `words` together, one figure
/// per repeat.
fn bandwidth_mbps(words: &[usize], pus: &[u32], opts: &MeasureOptions) -> Result<Vec<f64>> {
    let k = pus.len().max(1);
    // Shares in whole 64-byte lines, the last one taking the rest.
    let per = (words.len() / k) & !7;
    let shares: Vec<&[usize]> = (0..k)
        .map(|i| {
            let end = if i + 1 == k {
                words.len()
            } else {
                (i + 1) * per
            };
            &words[i * per..end]
        })
        .collect();
    let gate = Gate::default();
    let barrier = Barrier::new(k);
    let repeats = opts.repeats as usize;
    let passes = opts.bandwidth_passes;
    let per_thread: Vec<Result<Vec<(Instant, Instant)>>> = std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(k);
        let mut spawn_failure = None;
        for (&pu, &share) in pus.iter().zip(&shares) {
            let (gate, barrier) = (&gate, &barrier);
            let spawned = std::thread::Builder::new()
                .name(format!("numaff-bw-{pu}"))
                .spawn_scoped(s, move || -> Result<Vec<(Instant, Instant)>> {
                    let pinned = pin_to(pu);
                    let failure = pinned.as_ref().err().map(|e| e.to_string());
                    if !gate.arrive(failure) {
                        pinned?;
                        return Ok(Vec::new());
                    }
                    std::hint::black_box(sum_words(share)); // warm-up
                    let mut times = Vec::with_capacity(repeats);
                    for _ in 0..repeats {
                        barrier.wait();
                        let t0 = Instant::now();
                        for _ in 0..passes {
                            std::hint::black_box(sum_words(std::hint::black_box(share)));
                        }
                        times.push((t0, Instant::now()));
                    }
                    Ok(times)
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    spawn_failure = Some(format!("cannot start a reading thread for PU {pu}: {e}"));
                    break;
                }
            }
        }
        let failure = gate.decide(k, spawn_failure.clone());
        let mut results: Vec<Result<Vec<(Instant, Instant)>>> = handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(measure_err("a bandwidth reading thread panicked".into()))
                })
            })
            .collect();
        if let Some(f) = failure {
            if results.iter().all(|r| r.is_ok()) {
                results.push(Err(measure_err(f)));
            }
        }
        results
    });
    let per_thread = per_thread.into_iter().collect::<Result<Vec<_>>>()?;
    let bytes = std::mem::size_of_val(words) as f64 * f64::from(passes);
    let mut samples = Vec::with_capacity(repeats);
    for r in 0..repeats {
        let start = per_thread
            .iter()
            .filter_map(|t| t.get(r))
            .map(|t| t.0)
            .min();
        let end = per_thread
            .iter()
            .filter_map(|t| t.get(r))
            .map(|t| t.1)
            .max();
        if let (Some(a), Some(b)) = (start, end) {
            let secs = b
                .duration_since(a)
                .max(Duration::from_nanos(1))
                .as_secs_f64();
            samples.push(bytes / secs / 1e6);
        }
    }
    Ok(samples)
}

// ---------------------------------------------------------------------------------------------
// Affinity.

/// A cpu mask of any size, as sched_{get,set}affinity take it.
#[derive(Clone)]
struct CpuMask(Vec<libc::c_ulong>);

impl CpuMask {
    fn with_cpu(cpu: u32) -> CpuMask {
        let bits = libc::c_ulong::BITS as usize;
        let cpu = cpu as usize;
        let words = (cpu / bits + 1).max(1024 / bits);
        let mut v = vec![0; words];
        v[cpu / bits] |= 1 << (cpu % bits);
        CpuMask(v)
    }

    fn bytes(&self) -> usize {
        self.0.len() * std::mem::size_of::<libc::c_ulong>()
    }

    /// The calling thread's mask; grows the mask until the kernel accepts its size.
    fn get() -> io::Result<CpuMask> {
        let mut words = 1024 / libc::c_ulong::BITS as usize;
        loop {
            let mut m = CpuMask(vec![0; words]);
            // SAFETY: the kernel writes at most m.bytes() bytes into the mask.
            let rc = unsafe { libc::sched_getaffinity(0, m.bytes(), m.0.as_mut_ptr().cast()) };
            if rc == 0 {
                return Ok(m);
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINVAL) && words < (1 << 16) {
                words *= 2;
                continue;
            }
            return Err(e);
        }
    }

    /// Sets the calling thread's mask.
    fn set(&self) -> io::Result<()> {
        // SAFETY: the kernel reads self.bytes() bytes from the mask.
        let rc = unsafe { libc::sched_setaffinity(0, self.bytes(), self.0.as_ptr().cast()) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

/// Pins the calling thread to one PU.
fn pin_to(pu: u32) -> Result<()> {
    CpuMask::with_cpu(pu).set().map_err(|e| {
        let advice = match e.raw_os_error() {
            Some(libc::EINVAL) => format!(
                "PU {pu} is offline or not allowed by this process's cpuset (see Cpus_allowed_list \
                 in /proc/self/status); run in a cpuset that includes it"
            ),
            Some(libc::EPERM) => "not permitted to change this thread's affinity".to_string(),
            _ => "check that the machine description is this machine".to_string(),
        };
        measure_err(format!(
            "cannot pin the measuring thread to PU {pu} (sched_setaffinity): {e}; {advice}"
        ))
    })
}

/// The caller's affinity, put back by `restore` or, failing that, on drop.
struct AffinityGuard {
    saved: Option<CpuMask>,
}

impl AffinityGuard {
    fn save() -> Result<AffinityGuard> {
        let saved = CpuMask::get().map_err(|e| {
            measure_err(format!(
                "cannot read the calling thread's cpu affinity (sched_getaffinity): {e}"
            ))
        })?;
        Ok(AffinityGuard { saved: Some(saved) })
    }

    fn restore(mut self) -> Result<()> {
        match self.saved.take() {
            Some(m) => m.set().map_err(|e| {
                measure_err(format!(
                    "cannot restore the calling thread's cpu affinity (sched_setaffinity): {e}"
                ))
            }),
            None => Ok(()),
        }
    }
}

impl Drop for AffinityGuard {
    fn drop(&mut self) {
        if let Some(m) = self.saved.take() {
            let _ = m.set();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_single_cycle(next: &[usize]) -> bool {
        let n = next.len();
        let mut seen = vec![false; n];
        let mut i = 0;
        for _ in 0..n {
            if i >= n || seen[i] {
                return false;
            }
            seen[i] = true;
            i = next[i];
        }
        i == 0 && seen.iter().all(|&s| s)
    }

    #[test]
    fn chase_permutation_is_one_cycle_over_all_slots() {
        for n in [1, 2, 3, 7, 64, 1000, 4097] {
            for seed in [0, 1, 42, 0xdead_beef] {
                let p = cyclic_permutation(n, seed);
                assert!(is_single_cycle(&p), "n = {n}, seed = {seed}: {p:?}");
            }
        }
        // Seeded: reproducible, and the seed matters.
        assert_eq!(cyclic_permutation(100, 7), cyclic_permutation(100, 7));
        assert_ne!(cyclic_permutation(100, 7), cyclic_permutation(100, 8));
    }

    #[test]
    fn chase_in_buffer_visits_every_line_once() {
        let line = 64;
        let mut buf = Buffer::map(64 * 1024, 0).unwrap();
        let base = buf.start as usize;
        init_chase(buf.words_mut(), line, 3, base);
        let n = buf.len / line;
        let mut seen = vec![false; n];
        let mut p = buf.start as *const usize;
        for _ in 0..n {
            let slot = (p as usize - base) / line;
            assert_eq!((p as usize - base) % line, 0);
            assert!(!seen[slot], "slot {slot} visited twice");
            seen[slot] = true;
            p = unsafe { chase(p, 1) };
        }
        assert_eq!(p as usize, base, "the chase must close after all slots");
        assert!(seen.iter().all(|&s| s));
        // 8-at-a-time and 1-at-a-time agree.
        let a = unsafe { chase(buf.start, 1000) };
        let mut b = buf.start as *const usize;
        for _ in 0..1000 {
            b = unsafe { chase(b, 1) };
        }
        assert_eq!(a, b);
    }

    #[test]
    fn median_and_spread_of_repeats() {
        let v: Vec<usize> = (1..=1003).collect();
        assert_eq!(sum_words(&v), 1003 * 1004 / 2);
        assert_eq!(summarize(vec![3.0, 1.0, 2.0]).0, 2.0);
        let (m, s) = summarize(vec![4.0, 1.0, 3.0, 2.0]);
        assert_eq!((m, s.min, s.max), (2.5, 1.0, 4.0));
    }

    #[test]
    fn default_buffer_follows_the_llc_and_node_memory_rule() {
        use crate::model::{Cache, CacheKind, Node};
        use crate::CpuSet;
        let mut m = Machine::new("t");
        m.nodes.push(Node {
            id: 0,
            memory_bytes: 64 << 30,
            cpus: CpuSet::parse("0-1").unwrap(),
        });
        // No caches known: 256 MiB.
        assert_eq!(default_buffer_bytes(&m, 0), 256 << 20);
        let llc = |size| Cache {
            level: 3,
            kind: CacheKind::Unified,
            size_bytes: size,
            line_bytes: 64,
            associativity: None,
            latency_cycles: None,
            cpus: CpuSet::parse("0-1").unwrap(),
        };
        m.caches = vec![llc(32 << 20)];
        assert_eq!(default_buffer_bytes(&m, 0), 256 << 20);
        m.caches = vec![llc(32 << 20), llc(64 << 20)];
        assert_eq!(default_buffer_bytes(&m, 0), 768 << 20);
        // Capped by a quarter of the node.
        m.nodes[0].memory_bytes = 1 << 30;
        assert_eq!(default_buffer_bytes(&m, 0), 256 << 20);
        m.nodes[0].memory_bytes = 512 << 20;
        assert_eq!(default_buffer_bytes(&m, 0), 128 << 20);
    }

    #[test]
    fn affinity_mask_round_trip() {
        let before = CpuMask::get().unwrap();
        let guard = AffinityGuard::save().unwrap();
        let first = (0..before.0.len() * 64)
            .find(|&i| before.0[i / 64] & (1 << (i % 64)) != 0)
            .unwrap();
        pin_to(first as u32).unwrap();
        assert_eq!(CpuMask::get().unwrap().0, CpuMask::with_cpu(first as u32).0);
        guard.restore().unwrap();
        assert_eq!(CpuMask::get().unwrap().0, before.0);
    }
}
