//! numaff-guest: the payload the multi-node tests run inside QEMU guests
//! (crates/testvm/tests/numaff_linux_in_guests.rs), printing what it saw as `key=value` lines.
//!
//! It drives numaff-linux against its own memory and against child processes (copies of itself
//! started with `hold`, `writer`, `mover`); the tests parse and check its lines; `error=...` and
//! exit status 1 when a step itself fails.
//!
//! Every buffer is an anonymous private mapping with MADV_NOHUGEPAGE (the guest kernel's THP is
//! "always": without it a 2 MiB region faults in as one huge folio and page counts are not exact).
//! Data is a pattern derived from (seed, page, generation), so every byte can be checked.
//!
//! Subcommands (options as `--name value`):
//!   move --pages N --to 1,3          allocate on node 0, move to each node in turn, check each time
//!   migrate --pages N --from 0 --to 1 migrate_pages on a child that holds N pages on node 0
//!   policy                           interleave / bind / preferred (VMA and thread) on every node
//!   affinity --node K                pin a thread to a cpu of node K; the thread reports its cpu
//!   enomem --pages N --to 1          move more pages than node 1 can hold
//!   exit-during --pages N --runs R   the target is killed while its pages move
//!   eperm                            a copy of this program as uid 65534 acts on a root process
//!   stress --runs R --seed S --pages N --max-ms M   randomised moves while a writer checks its data
//!   bench --pages N --batches 1,16,256,4096 --reps R   raw move_pages pages/s per batch size
//!   contend --pages N --rounds R     moves while a second thread moves the same pages back
//!   hold, writer, mover, refused     the child roles of the above

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use numaff_linux::mempolicy::{self, Mode};
use numaff_linux::moves::{self, Budget, Dest, MoveCounts, Scope};
use numaff_linux::{affinity, balancing, mpol, numa_maps, pages, tasks};
use numaff_machine::rng::{mix, SplitMix64};
use numaff_machine::CpuSet;

type R<T> = Result<T, String>;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = args.first() else {
        eprintln!("usage: numaff-guest SUBCOMMAND [--option value]...");
        std::process::exit(2);
    };
    let o = Opts::parse(&args[1..]);
    let r = match cmd.as_str() {
        "move" => cmd_move(&o),
        "migrate" => cmd_migrate(&o),
        "policy" => cmd_policy(&o),
        "affinity" => cmd_affinity(&o),
        "enomem" => cmd_enomem(&o),
        "exit-during" => cmd_exit_during(&o),
        "eperm" => cmd_eperm(&o),
        "stress" => cmd_stress(&o),
        "bench" => cmd_bench(&o),
        "contend" => cmd_contend(&o),
        "hold" => cmd_hold(&o),
        "writer" => cmd_writer(&o),
        "mover" => cmd_mover(&o),
        "refused" => cmd_refused(&o),
        other => Err(format!("unknown subcommand {other:?}")),
    };
    let _ = std::io::stdout().flush();
    if let Err(e) = r {
        println!("error={e}");
        let _ = std::io::stdout().flush();
        std::process::exit(1);
    }
}

// ---------------------------------------------------------------------------------------------
// Small helpers: options, output, randomness, buffers, patterns.

struct Opts(BTreeMap<String, String>);

impl Opts {
    fn parse(args: &[String]) -> Opts {
        let mut m = BTreeMap::new();
        let mut i = 0;
        while i < args.len() {
            if let Some(k) = args[i].strip_prefix("--") {
                let v = args.get(i + 1).cloned().unwrap_or_default();
                m.insert(k.to_string(), v);
                i += 2;
            } else {
                i += 1;
            }
        }
        Opts(m)
    }
    fn num(&self, k: &str, default: u64) -> R<u64> {
        match self.0.get(k) {
            Some(v) => v.parse().map_err(|_| format!("--{k}: not a number: {v:?}")),
            None => Ok(default),
        }
    }
    fn list(&self, k: &str, default: &str) -> R<Vec<u64>> {
        let s = self.0.get(k).map(String::as_str).unwrap_or(default);
        s.split(',')
            .filter(|x| !x.is_empty())
            .map(|x| x.parse().map_err(|_| format!("--{k}: bad list {s:?}")))
            .collect()
    }
}

fn out(key: &str, value: impl std::fmt::Display) {
    println!("{key}={value}");
}

/// A per-node count map as `0:12,1:4084` (empty string for none).
fn fmt_nodes(m: &BTreeMap<u32, u64>) -> String {
    m.iter()
        .map(|(n, c)| format!("{n}:{c}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn fmt_counts(c: &MoveCounts) -> String {
    let mut s = format!(
        "moved:{},already_there:{},not_present:{},bad_address:{},busy:{},no_memory:{},shared:{},failed:{},elsewhere:{}",
        c.moved,
        c.already_there,
        c.not_present,
        c.bad_address,
        c.busy,
        c.no_memory,
        c.shared,
        c.failed,
        c.elsewhere
    );
    for (e, n) in &c.other {
        s.push_str(&format!(",errno{e}:{n}"));
    }
    s
}

fn e2s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// An anonymous private mapping of whole pages without transparent huge pages.
struct Buf {
    /// Owns the mapping (unmapped on drop); `ptr` is its start.
    _map: memmap2::MmapMut,
    ptr: *mut u8,
    len: usize,
}

impl Buf {
    fn new(pages: usize) -> R<Buf> {
        let len = pages * pages::page_size();
        let mut map = memmap2::MmapMut::map_anon(len)
            .map_err(|e| format!("mmap of {pages} pages failed: {e}"))?;
        map.advise(memmap2::Advice::NoHugePage)
            .map_err(|e| format!("madvise(MADV_NOHUGEPAGE) failed: {e}"))?;
        Ok(Buf {
            ptr: map.as_mut_ptr(),
            _map: map,
            len,
        })
    }
    fn pages(&self) -> usize {
        self.len / pages::page_size()
    }
    fn addr(&self) -> u64 {
        self.ptr as u64
    }
    fn addrs(&self) -> Vec<u64> {
        moves::page_addrs(self.addr(), self.len as u64)
    }
    /// Page `p` as 64-bit words.
    #[allow(clippy::mut_from_ref)] // the mapping is ours; callers never hold two views of a page
    fn page(&self, p: usize) -> &mut [u64] {
        let ps = pages::page_size();
        assert!(p < self.pages());
        // SAFETY: page p lies inside the mapping, is 8-byte aligned and ps / 8 words long.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(p * ps) as *mut u64, ps / 8) }
    }
}

/// The pattern word `i` of page `p`, generation `g`, for `seed`.
fn word(seed: u64, p: usize, g: u32, i: usize) -> u64 {
    mix(seed ^ ((p as u64) << 24) ^ ((g as u64) << 48) ^ i as u64)
}

fn write_page(b: &Buf, seed: u64, p: usize, g: u32) {
    for (i, w) in b.page(p).iter_mut().enumerate() {
        *w = word(seed, p, g, i);
    }
}

/// Whether page `p` holds generation `g` exactly.
fn page_ok(b: &Buf, seed: u64, p: usize, g: u32) -> bool {
    b.page(p)
        .iter()
        .enumerate()
        .all(|(i, &w)| w == word(seed, p, g, i))
}

fn fill(b: &Buf, seed: u64) {
    for p in 0..b.pages() {
        write_page(b, seed, p, 0);
    }
}

/// Pages that do not hold generation 0 of `seed`.
fn bad_pages(b: &Buf, seed: u64) -> usize {
    (0..b.pages()).filter(|&p| !page_ok(b, seed, p, 0)).count()
}

/// FNV-1a over the buffer's words: the checksum printed before and after a move.
fn checksum(b: &Buf) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in 0..b.pages() {
        for &w in b.page(p).iter() {
            h = (h ^ w).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

fn nodes(list: &str) -> R<CpuSet> {
    CpuSet::parse(list).map_err(e2s)
}

fn node_cpus(node: u32) -> R<CpuSet> {
    let path = format!("/sys/devices/system/node/node{node}/cpulist");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    nodes(&text)
}

fn online_nodes() -> R<CpuSet> {
    let text =
        std::fs::read_to_string("/sys/devices/system/node/online").map_err(|e| e.to_string())?;
    nodes(&text)
}

/// Allocates `pages` pages on `node` (thread policy BIND while they are touched, DEFAULT after: the
/// mapping itself keeps the DEFAULT policy, so the pages are free to move) and fills them.
fn alloc_on(node: u32, pages: usize, seed: u64) -> R<Buf> {
    let b = Buf::new(pages)?;
    let one: CpuSet = std::iter::once(node).collect();
    mempolicy::set_thread_policy(Mode::Bind, 0, &one).map_err(e2s)?;
    fill(&b, seed);
    mempolicy::set_thread_policy(Mode::Default, 0, &CpuSet::new()).map_err(e2s)?;
    Ok(b)
}

fn per_node(pid: i32, addrs: &[u64]) -> R<BTreeMap<u32, u64>> {
    Ok(pages::query(pid, addrs).map_err(e2s)?.per_node())
}

/// Pages per node of the mapping that starts at `start` in /proc/PID/numa_maps.
fn numa_maps_at(pid: i32, start: u64) -> R<String> {
    let pid = if pid == 0 {
        std::process::id() as i32
    } else {
        pid
    };
    let maps = numa_maps::read(pid).map_err(e2s)?;
    let m = maps
        .iter()
        .find(|m| m.start == start)
        .ok_or_else(|| format!("no mapping at {start:#x} in /proc/{pid}/numa_maps"))?;
    Ok(fmt_nodes(&m.pages_per_node))
}

fn print_balancing() {
    match balancing::numa_balancing() {
        Ok(b) => out("numa_balancing", format!("{b:?}")),
        Err(e) => out("numa_balancing", format!("unknown ({e})")),
    }
}

// ---------------------------------------------------------------------------------------------
// Children: `hold` keeps pages on a node until told to check them.

struct Held {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    addr: u64,
    pages: usize,
}

impl Held {
    fn pid(&self) -> i32 {
        self.child.id() as i32
    }
    fn addrs(&self) -> Vec<u64> {
        moves::page_addrs(self.addr, (self.pages * pages::page_size()) as u64)
    }
    /// Asks the child to check its data; its `intact=` answer.
    fn check(&mut self) -> R<String> {
        writeln!(self.stdin, "check").map_err(e2s)?;
        self.expect("intact")
    }
    fn expect(&mut self, key: &str) -> R<String> {
        let prefix = format!("{key}=");
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(60))
                .map_err(|_| format!("child {} said no {key}=", self.pid()))?;
            if let Some(v) = line.strip_prefix(&prefix) {
                return Ok(v.to_string());
            }
            if let Some(e) = line.strip_prefix("error=") {
                return Err(format!("child {}: {e}", self.pid()));
            }
        }
    }
    fn finish(mut self) -> R<i32> {
        let _ = writeln!(self.stdin, "exit");
        let st = self.child.wait().map_err(e2s)?;
        Ok(st.code().unwrap_or(-1))
    }
}

fn self_exe() -> R<std::path::PathBuf> {
    std::env::current_exe().map_err(e2s)
}

/// Starts a child (a copy of this program) with `args`, its stdout lines on a channel.
fn spawn(args: &[String], uid: Option<u32>) -> R<(Child, ChildStdin, mpsc::Receiver<String>)> {
    let mut cmd = Command::new(self_exe()?);
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if let Some(u) = uid {
        cmd.uid(u).gid(u);
    }
    let mut child = cmd.spawn().map_err(e2s)?;
    let stdin = child.stdin.take().ok_or("no child stdin")?;
    let stdout = child.stdout.take().ok_or("no child stdout")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    Ok((child, stdin, rx))
}

fn spawn_hold(pages: usize, node: u32, seed: u64) -> R<Held> {
    let args: Vec<String> = [
        "hold",
        "--pages",
        &pages.to_string(),
        "--node",
        &node.to_string(),
        "--seed",
        &seed.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (child, stdin, lines) = spawn(&args, None)?;
    let mut h = Held {
        child,
        stdin,
        lines,
        addr: 0,
        pages,
    };
    h.addr = h.expect("addr")?.parse().map_err(e2s)?;
    Ok(h)
}

fn cmd_hold(o: &Opts) -> R<()> {
    let n = o.num("pages", 1024)? as usize;
    let node = o.num("node", 0)? as u32;
    let seed = o.num("seed", 1)?;
    let b = alloc_on(node, n, seed)?;
    out("addr", b.addr());
    std::io::stdout().flush().map_err(e2s)?;
    for line in std::io::stdin().lock().lines() {
        match line.map_err(e2s)?.trim() {
            "check" => {
                let bad = bad_pages(&b, seed);
                out("intact", format!("{} bad_pages:{bad}", bad == 0));
                std::io::stdout().flush().map_err(e2s)?;
            }
            "exit" => break,
            _ => {}
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The checks.

fn cmd_move(o: &Opts) -> R<()> {
    let n = o.num("pages", 4096)? as usize;
    let seed = o.num("seed", 42)?;
    print_balancing();
    let b = alloc_on(0, n, seed)?;
    let addrs = b.addrs();
    let sum0 = checksum(&b);
    out("move.pages", n);
    out("move.start.query", fmt_nodes(&per_node(0, &addrs)?));
    out("move.start.numa_maps", numa_maps_at(0, b.addr())?);
    out("move.start.checksum", format!("{sum0:016x}"));
    for to in o.list("to", "1")? {
        let to = to as u32;
        let t0 = Instant::now();
        let c = moves::move_to_node(0, &addrs, to, Scope::Private).map_err(e2s)?;
        let secs = t0.elapsed().as_secs_f64();
        let k = format!("move.to{to}");
        out(&format!("{k}.counts"), fmt_counts(&c));
        out(&format!("{k}.seconds"), format!("{secs:.3}"));
        out(&format!("{k}.query"), fmt_nodes(&per_node(0, &addrs)?));
        out(&format!("{k}.numa_maps"), numa_maps_at(0, b.addr())?);
        let sum = checksum(&b);
        out(&format!("{k}.checksum"), format!("{sum:016x}"));
        out(&format!("{k}.bad_pages"), bad_pages(&b, seed));
        // Moving again finds every page there already.
        let again = moves::move_to_node(0, &addrs, to, Scope::Private).map_err(e2s)?;
        out(&format!("{k}.again.already_there"), again.already_there);
    }
    Ok(())
}

fn cmd_migrate(o: &Opts) -> R<()> {
    let n = o.num("pages", 2048)? as usize;
    let from = o.num("from", 0)? as u32;
    let to = o.num("to", 1)? as u32;
    print_balancing();
    let mut h = spawn_hold(n, from, 7)?;
    let pid = h.pid();
    let addrs = h.addrs();
    out("migrate.pages", n);
    out("migrate.before.query", fmt_nodes(&per_node(pid, &addrs)?));
    out("migrate.before.numa_maps", numa_maps_at(pid, h.addr)?);
    let before_total = numa_maps::total_pages_per_node(
        &numa_maps::read(pid).map_err(e2s)?,
        pages::page_size() as u64,
    );
    out("migrate.before.process", fmt_nodes(&before_total));
    let one = |n: u32| -> CpuSet { std::iter::once(n).collect() };
    let t0 = Instant::now();
    let left = moves::migrate_pages(pid, &one(from), &one(to)).map_err(e2s)?;
    out(
        "migrate.seconds",
        format!("{:.3}", t0.elapsed().as_secs_f64()),
    );
    out("migrate.not_moved", left);
    out("migrate.after.query", fmt_nodes(&per_node(pid, &addrs)?));
    out("migrate.after.numa_maps", numa_maps_at(pid, h.addr)?);
    let after_total = numa_maps::total_pages_per_node(
        &numa_maps::read(pid).map_err(e2s)?,
        pages::page_size() as u64,
    );
    out("migrate.after.process", fmt_nodes(&after_total));
    out("migrate.intact", h.check()?);
    out("migrate.child_exit", h.finish()?);
    Ok(())
}

fn cmd_policy(o: &Opts) -> R<()> {
    let n_per = o.num("pages-per-node", 64)? as usize;
    let online = online_nodes()?;
    let all: Vec<u32> = online.iter().collect();
    let last = *all.last().ok_or("no nodes")?;
    out("policy.nodes", &online);
    let modes = mempolicy::supported_modes().map_err(e2s)?;
    out(
        "policy.supported",
        modes.iter().map(|m| m.name()).collect::<Vec<_>>().join(","),
    );
    let set = |v: &[u32]| -> CpuSet { v.iter().copied().collect() };
    let touch = |b: &Buf| {
        for p in 0..b.pages() {
            b.page(p)[0] = p as u64 + 1;
        }
    };
    let mode_name = |addr: u64| -> String {
        match mempolicy::policy_at(addr) {
            Ok(p) => format!("{}:{}", p.mode.map_or("unknown", |m| m.name()), p.nodes),
            Err(e) => format!("error {e}"),
        }
    };

    // VMA policies (mbind) on fresh mappings, then touched.
    let cases: Vec<(&str, Mode, Vec<u32>)> = vec![
        ("vma.interleave_all", Mode::Interleave, all.clone()),
        ("vma.bind_last", Mode::Bind, vec![last]),
        ("vma.preferred_last", Mode::Preferred, vec![last]),
        (
            "vma.interleave_odd",
            Mode::Interleave,
            all.iter().copied().filter(|n| n % 2 == 1).collect(),
        ),
    ];
    for (name, mode, ns) in &cases {
        let b = Buf::new(n_per * all.len())?;
        mempolicy::mbind(b.addr(), b.len as u64, *mode, 0, &set(ns), 0).map_err(e2s)?;
        touch(&b);
        out(&format!("policy.{name}.nodes"), set(ns));
        out(&format!("policy.{name}.mode"), mode_name(b.addr()));
        out(
            &format!("policy.{name}.query"),
            fmt_nodes(&per_node(0, &b.addrs())?),
        );
        out(
            &format!("policy.{name}.numa_maps"),
            numa_maps_at(0, b.addr())?,
        );
        // VMA interleave places the page at `addr` on node number (page offset mod k) of the set;
        // for anonymous memory the page offset is addr / page size.
        if *mode == Mode::Interleave {
            let addrs = b.addrs();
            let q = pages::query(0, &addrs).map_err(e2s)?;
            let ps = pages::page_size() as u64;
            let mut off = 0usize;
            for (a, s) in addrs.iter().zip(&q.status) {
                let want = ns[((a / ps) % ns.len() as u64) as usize];
                if *s != pages::PageStatus::Node(want) {
                    off += 1;
                }
            }
            out(&format!("policy.{name}.off_round_robin"), off);
        }
    }

    // Thread policies (set_mempolicy) for new allocations of this thread, in a helper thread so
    // the main thread's policy stays DEFAULT.
    let mut thread_cases: Vec<(&str, Mode, Vec<u32>)> = vec![
        ("thread.bind_1", Mode::Bind, vec![1]),
        ("thread.interleave_all", Mode::Interleave, all.clone()),
        ("thread.preferred_last", Mode::Preferred, vec![last]),
    ];
    if modes.contains(&Mode::PreferredMany) && all.len() >= 4 {
        thread_cases.push(("thread.preferred_many_1_3", Mode::PreferredMany, vec![1, 3]));
    }
    for (name, mode, ns) in thread_cases {
        let nodes = set(&ns);
        let r = std::thread::spawn(move || -> R<(String, String)> {
            mempolicy::set_thread_policy(mode, 0, &nodes).map_err(e2s)?;
            let tp = mempolicy::thread_policy().map_err(e2s)?;
            let b = Buf::new(n_per * 4)?;
            for p in 0..b.pages() {
                b.page(p)[0] = 1;
            }
            let q = per_node(0, &b.addrs())?;
            Ok((
                format!("{}:{}", tp.mode.map_or("unknown", |m| m.name()), tp.nodes),
                fmt_nodes(&q),
            ))
        })
        .join()
        .map_err(|_| "policy thread panicked".to_string())??;
        out(&format!("policy.{name}.nodes"), set(&ns));
        out(&format!("policy.{name}.mode"), r.0);
        out(&format!("policy.{name}.query"), r.1);
    }
    out(
        "policy.main_thread_after",
        mempolicy::thread_policy()
            .map_err(e2s)?
            .mode
            .map_or("unknown", |m| m.name()),
    );
    Ok(())
}

fn getcpu() -> (i32, i32) {
    let mut cpu: libc::c_uint = 0;
    let mut node: libc::c_uint = 0;
    // SAFETY: getcpu writes the two unsigned ints passed; the third argument is unused (NULL).
    let r = unsafe {
        libc::syscall(
            libc::SYS_getcpu,
            &mut cpu as *mut libc::c_uint,
            &mut node as *mut libc::c_uint,
            std::ptr::null_mut::<libc::c_void>(),
        )
    };
    if r < 0 {
        (-1, -1)
    } else {
        (cpu as i32, node as i32)
    }
}

fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

fn cmd_affinity(o: &Opts) -> R<()> {
    let node = o.num("node", 2)? as u32;
    let cpus = node_cpus(node)?;
    let cpu = cpus.last().ok_or(format!("node {node} has no cpu"))?;
    out("affinity.node", node);
    out("affinity.node_cpus", &cpus);
    out("affinity.target_cpu", cpu);
    let (tid_tx, tid_rx) = mpsc::channel::<i32>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (res_tx, res_rx) = mpsc::channel::<(i32, i32, i32, i32, u32)>();
    let worker = std::thread::spawn(move || {
        let _ = tid_tx.send(gettid());
        let _ = go_rx.recv();
        // SAFETY: sched_getcpu has no preconditions.
        let first = unsafe { libc::sched_getcpu() };
        // Spin a little so the kernel has every chance to move us if it were going to.
        let t0 = Instant::now();
        let mut x = 0u64;
        while t0.elapsed() < Duration::from_millis(200) {
            x = x.wrapping_add(mix(x));
        }
        // SAFETY: as above.
        let later = unsafe { libc::sched_getcpu() };
        let (gc, gn) = getcpu();
        let _ = res_tx.send((first, later, gc, gn, (x & 1) as u32));
        // Stay alive until the main thread has read /proc.
        let _ = go_rx.recv();
    });
    let tid = tid_rx.recv().map_err(e2s)?;
    let before = affinity::get(tid).map_err(e2s)?;
    out("affinity.before", &before);
    let target: CpuSet = std::iter::once(cpu).collect();
    affinity::set(tid, &target).map_err(e2s)?;
    out("affinity.after", affinity::get(tid).map_err(e2s)?);
    go_tx.send(()).map_err(e2s)?;
    let (first, later, gc, gn, _) = res_rx.recv().map_err(e2s)?;
    out("affinity.thread.sched_getcpu_first", first);
    out("affinity.thread.sched_getcpu_later", later);
    out("affinity.thread.getcpu_cpu", gc);
    out("affinity.thread.getcpu_node", gn);
    let ts = tasks::threads(std::process::id() as i32).map_err(e2s)?;
    let t = ts
        .iter()
        .find(|t| t.tid == tid)
        .ok_or("thread not in /proc")?;
    out("affinity.proc_cpu", t.cpu);
    // A cpu set with no online cpu is refused with advice.
    let bogus: CpuSet = std::iter::once(4000).collect();
    match affinity::set(tid, &bogus) {
        Ok(()) => out("affinity.bogus", "accepted"),
        Err(e) => out("affinity.bogus", e),
    }
    go_tx.send(()).map_err(e2s)?;
    worker.join().map_err(|_| "worker panicked".to_string())?;
    Ok(())
}

fn cmd_enomem(o: &Opts) -> R<()> {
    let n = o.num("pages", 24576)? as usize;
    let to = o.num("to", 1)? as u32;
    let seed = o.num("seed", 9)?;
    print_balancing();
    let b = alloc_on(0, n, seed)?;
    let addrs = b.addrs();
    let sum0 = checksum(&b);
    out("enomem.pages", n);
    out("enomem.start.query", fmt_nodes(&per_node(0, &addrs)?));
    out("enomem.start.checksum", format!("{sum0:016x}"));
    let t0 = Instant::now();
    match moves::move_pages(0, &addrs, Dest::Node(to), Scope::Private, Budget::UNLIMITED) {
        Ok(p) => {
            out("enomem.result", "ok");
            out("enomem.counts", fmt_counts(&p.counts));
            out("enomem.total", p.counts.total());
            out("enomem.done", p.done);
        }
        Err(e) => out("enomem.result", format!("error {e}")),
    }
    out(
        "enomem.seconds",
        format!("{:.3}", t0.elapsed().as_secs_f64()),
    );
    out("enomem.after.query", fmt_nodes(&per_node(0, &addrs)?));
    out("enomem.after.numa_maps", numa_maps_at(0, b.addr())?);
    out("enomem.after.checksum", format!("{:016x}", checksum(&b)));
    out("enomem.after.bad_pages", bad_pages(&b, seed));
    // What the kernel itself says for a batch that cannot fit (the counts above hide whether it
    // was a per-page -ENOMEM or a failed call): the raw return value and statuses.
    let q = pages::query(0, &addrs).map_err(e2s)?;
    let left: Vec<u64> = addrs
        .iter()
        .zip(&q.status)
        .filter(|(_, s)| **s != pages::PageStatus::Node(to))
        .map(|(a, _)| *a)
        .take(256)
        .collect();
    if !left.is_empty() {
        let ptrs: Vec<*mut libc::c_void> = left.iter().map(|&a| a as *mut libc::c_void).collect();
        let nodes = vec![to as libc::c_int; left.len()];
        let mut status = vec![libc::c_int::MIN; left.len()];
        // SAFETY: the three arrays hold left.len() elements and outlive the call; our own pages.
        let r = unsafe {
            libc::syscall(
                libc::SYS_move_pages,
                0 as libc::pid_t,
                left.len() as libc::c_ulong,
                ptrs.as_ptr(),
                nodes.as_ptr(),
                status.as_mut_ptr(),
                mpol::MPOL_MF_MOVE as libc::c_int,
            )
        };
        let err = std::io::Error::last_os_error();
        let mut hist: BTreeMap<String, u64> = BTreeMap::new();
        for s in &status {
            let k = match *s {
                libc::c_int::MIN => "unwritten".to_string(),
                s => s.to_string(),
            };
            *hist.entry(k).or_insert(0) += 1;
        }
        out(
            "enomem.raw",
            format!(
                "pages:{} return:{r}{} statuses:{hist:?}",
                left.len(),
                if r < 0 {
                    format!(" ({err})")
                } else {
                    String::new()
                }
            ),
        );
    }
    out("enomem.final.bad_pages", bad_pages(&b, seed));
    Ok(())
}

/// How a move against a target that dies ended, in words.
fn ending(r: &numaff_linux::Result<moves::MoveProgress>) -> String {
    match r {
        Ok(p) if p.target_exited => format!("target_exited done:{}", p.done),
        Ok(p) => format!("finished done:{} moved:{}", p.done, p.counts.moved),
        Err(e) => format!("error {e}"),
    }
}

fn cmd_exit_during(o: &Opts) -> R<()> {
    let n = o.num("pages", 16384)? as usize;
    let runs = o.num("runs", 6)?;
    print_balancing();
    for run in 0..runs {
        let mut h = spawn_hold(n, 0, run)?;
        let pid = h.pid();
        let addrs = h.addrs();
        // Kill after 0, 20, 40, ... ms; odd runs reap the child at once (ESRCH), even runs leave a
        // zombie (no mm: EINVAL from the kernel).
        let delay = Duration::from_millis(run * 20);
        let reap = run % 2 == 1;
        let use_migrate = run % 3 == 2;
        let killer = std::thread::spawn(move || {
            std::thread::sleep(delay);
            // SAFETY: kill has no memory-safety preconditions; pid is our own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            if reap {
                let _ = h.child.wait();
            }
            h
        });
        let t0 = Instant::now();
        let end = if use_migrate {
            let one = |n: u32| -> CpuSet { std::iter::once(n).collect() };
            match moves::migrate_pages(pid, &one(0), &one(1)) {
                Ok(left) => format!("migrate finished not_moved:{left}"),
                Err(e) => format!("migrate error {e}"),
            }
        } else {
            ending(&moves::move_pages(
                pid,
                &addrs,
                Dest::Node(1),
                Scope::Private,
                Budget::UNLIMITED,
            ))
        };
        let secs = t0.elapsed().as_secs_f64();
        let mut h = killer.join().map_err(|_| "killer panicked".to_string())?;
        let _ = h.child.wait();
        // After the target is gone for good, a move says so.
        let after = ending(&moves::move_pages(
            pid,
            &addrs[..1],
            Dest::Node(1),
            Scope::Private,
            Budget::UNLIMITED,
        ));
        out(
            &format!("exit_during.run{run}"),
            format!(
                "delay_ms:{} reap:{reap} {end} seconds:{secs:.3} | afterwards: {after}",
                delay.as_millis()
            ),
        );
    }
    Ok(())
}

fn cmd_eperm(_o: &Opts) -> R<()> {
    let h = spawn_hold(16, 0, 3)?;
    let pid = h.pid();
    let args: Vec<String> = [
        "refused",
        "--pid",
        &pid.to_string(),
        "--addr",
        &h.addr.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (mut child, stdin, lines) = spawn(&args, Some(65534))?;
    drop(stdin);
    let status = child.wait().map_err(e2s)?;
    // Every line, up to the end of its output: `try_iter` would take only those the reader thread
    // had passed on when the child was reaped, and could lose the last line (`own=`).
    for line in lines.iter() {
        println!("eperm.{line}");
    }
    out("eperm.child_exit", status.code().unwrap_or(-1));
    out("eperm.target_exit", h.finish()?);
    Ok(())
}

fn cmd_refused(o: &Opts) -> R<()> {
    let pid = o.num("pid", 0)? as i32;
    let addr = o.num("addr", 0)?;
    // SAFETY: getuid/geteuid have no preconditions.
    out("uid", unsafe { libc::getuid() });
    let one = |n: u32| -> CpuSet { std::iter::once(n).collect() };
    match moves::move_to_node(pid, &[addr], 1, Scope::Private) {
        Ok(c) => out("move", format!("accepted {}", fmt_counts(&c))),
        Err(e) => out("move", e),
    }
    match moves::migrate_pages(pid, &one(0), &one(1)) {
        Ok(n) => out("migrate", format!("accepted {n}")),
        Err(e) => out("migrate", e),
    }
    match pages::query(pid, &[addr]) {
        Ok(p) => out("query", format!("accepted {:?}", p.status)),
        Err(e) => out("query", e),
    }
    // Its own pages it may move.
    let b = alloc_on(0, 4, 1)?;
    match moves::move_to_node(0, &b.addrs(), 1, Scope::Private) {
        Ok(c) => out("own", fmt_counts(&c)),
        Err(e) => out("own", format!("error {e}")),
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Stress: a writer rewrites and checks its pages while they are moved about; one side is killed
// at a random moment.

/// The writer: fills `pages` pages, then forever: check a random page against its generation,
/// write the next generation; every `pass` writes check every page and print `pass=`. On "stop"
/// on stdin, check every page and print `final=`.
fn cmd_writer(o: &Opts) -> R<()> {
    let n = o.num("pages", 2048)? as usize;
    let seed = o.num("seed", 1)?;
    let pass_every = o.num("pass", 2000)?;
    let b = Buf::new(n)?;
    let mut gen = vec![0u32; n];
    fill(&b, seed);
    out("addr", b.addr());
    std::io::stdout().flush().map_err(e2s)?;
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = Arc::clone(&stop);
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            match line.as_deref().map(str::trim) {
                Ok("stop") | Err(_) => break,
                _ => {}
            }
        }
        s2.store(true, Ordering::SeqCst);
    });
    let mut rng = SplitMix64::new(seed ^ 0x5eed);
    let mut bad = 0u64;
    let mut writes = 0u64;
    let mut passes = 0u64;
    let mut next_pass = pass_every.max(1);
    let full = |gen: &[u32], bad: &mut u64| {
        for (p, &g) in gen.iter().enumerate() {
            if !page_ok(&b, seed, p, g) {
                *bad += 1;
                println!("corrupt=page:{p} gen:{g} seed:{seed}");
            }
        }
    };
    while !stop.load(Ordering::Relaxed) {
        let p = rng.below(n);
        if !page_ok(&b, seed, p, gen[p]) {
            bad += 1;
            println!("corrupt=page:{p} gen:{} seed:{seed}", gen[p]);
        }
        gen[p] = gen[p].wrapping_add(1);
        write_page(&b, seed, p, gen[p]);
        writes += 1;
        if writes >= next_pass {
            next_pass += pass_every.max(1);
            full(&gen, &mut bad);
            passes += 1;
            out("pass", format!("{passes} bad:{bad} writes:{writes}"));
            std::io::stdout().flush().map_err(e2s)?;
        }
    }
    full(&gen, &mut bad);
    out("final", format!("bad:{bad} writes:{writes} pages:{n}"));
    Ok(())
}

/// Moves the pages [addr, addr + pages) of `pid` about at random until stopped or the target is
/// gone: random ranges to random nodes, per-page random nodes, small page budgets; with
/// `--migrate 1`, whole-process migrate_pages between random node pairs instead. Prints
/// `mover_end=` with how it ended (never panics on a vanished target).
fn mover_loop(pid: i32, addrs: &[u64], migrate: bool, seed: u64, stop: &AtomicBool) -> String {
    let Ok(online) = online_nodes() else {
        return "error cannot read online nodes".into();
    };
    let all: Vec<u32> = online.iter().collect();
    let mut rng = SplitMix64::new(seed ^ 0x3a0e);
    let mut moved = 0u64;
    let mut calls = 0u64;
    while !stop.load(Ordering::Relaxed) {
        calls += 1;
        if migrate {
            let from = all[rng.below(all.len())];
            let to = all[rng.below(all.len())];
            let one = |n: u32| -> CpuSet { std::iter::once(n).collect() };
            match moves::migrate_pages(pid, &one(from), &one(to)) {
                Ok(_) => {}
                Err(e) if e.errno() == Some(libc::ESRCH) => {
                    return format!("target_exited calls:{calls} error:{e}")
                }
                Err(e) => return format!("error {e}"),
            }
            continue;
        }
        let lo = rng.below(addrs.len());
        let hi = lo + 1 + rng.below(addrs.len() - lo);
        let range = &addrs[lo..hi];
        let per: Vec<u32>;
        let dest = if rng.below_u64(4) == 0 {
            per = (0..range.len())
                .map(|_| all[rng.below(all.len())])
                .collect();
            Dest::PerPage(&per)
        } else {
            Dest::Node(all[rng.below(all.len())])
        };
        let budget = Budget::pages(1 + rng.below(1024));
        let mut done = 0;
        while done < range.len() && !stop.load(Ordering::Relaxed) {
            match moves::move_pages(pid, &range[done..], dest.from(done), Scope::Private, budget) {
                Ok(p) if p.target_exited => {
                    return format!("target_exited calls:{calls} moved:{moved}")
                }
                Ok(p) => {
                    moved += p.counts.moved;
                    done += p.done;
                }
                Err(e) if e.errno() == Some(libc::ESRCH) => {
                    return format!("target_exited calls:{calls} moved:{moved} error:{e}")
                }
                Err(e) => return format!("error {e}"),
            }
        }
    }
    format!("stopped calls:{calls} moved:{moved}")
}

fn cmd_mover(o: &Opts) -> R<()> {
    let pid = o.num("pid", 0)? as i32;
    let addr = o.num("addr", 0)?;
    let n = o.num("pages", 0)? as usize;
    let seed = o.num("seed", 1)?;
    let migrate = o.num("migrate", 0)? == 1;
    let addrs = moves::page_addrs(addr, (n * pages::page_size()) as u64);
    out("mover", "started");
    std::io::stdout().flush().map_err(e2s)?;
    let stop = AtomicBool::new(false);
    out("mover_end", mover_loop(pid, &addrs, migrate, seed, &stop));
    Ok(())
}

/// One stress run: Ok(summary) or Err(failure), both naming the seed.
fn stress_run(seed: u64, n: usize, max_ms: u64) -> R<String> {
    let t0 = Instant::now();
    let mut rng = SplitMix64::new(seed);
    // The mode rotates with the seed, so any three consecutive runs cover all three.
    let mode = seed % 3;
    let kill_after = Duration::from_millis(20 + rng.below_u64(max_ms.max(21) - 20));
    let s = |x: &str| x.to_string();
    let (mut writer, mut wstdin, wlines) = spawn(
        &[
            s("writer"),
            s("--pages"),
            n.to_string(),
            s("--seed"),
            seed.to_string(),
            s("--pass"),
            (n as u64).to_string(),
        ],
        None,
    )?;
    let wpid = writer.id() as i32;
    let first = wlines
        .recv_timeout(Duration::from_secs(60))
        .map_err(|_| format!("seed {seed}: writer never started"))?;
    let addr: u64 = first
        .strip_prefix("addr=")
        .ok_or(format!("seed {seed}: writer said {first:?}"))?
        .parse()
        .map_err(e2s)?;
    let addrs = moves::page_addrs(addr, (n * pages::page_size()) as u64);
    let mut lines: Vec<String> = Vec::new();
    let mode_name;
    let mover_end;
    match mode {
        0 => {
            // The target dies: the writer is killed while this process moves its pages.
            mode_name = "kill-writer";
            let stop = AtomicBool::new(false);
            let killer = std::thread::spawn(move || {
                std::thread::sleep(kill_after);
                // SAFETY: kill of our own child; no memory-safety preconditions.
                unsafe { libc::kill(wpid, libc::SIGKILL) };
            });
            mover_end = mover_loop(wpid, &addrs, false, seed, &stop);
            killer.join().map_err(|_| "killer panicked".to_string())?;
            let _ = writer.wait();
            // To the end of its output (the reader thread may still hold its last lines).
            lines.extend(wlines.iter());
        }
        _ => {
            // numaff dies: a mover process (move_pages, or migrate_pages in mode 2) is killed, then
            // the writer checks every page.
            mode_name = if mode == 1 {
                "kill-mover"
            } else {
                "kill-migrator"
            };
            let (mut mover, _mstdin, mlines) = spawn(
                &[
                    s("mover"),
                    s("--pid"),
                    wpid.to_string(),
                    s("--addr"),
                    addr.to_string(),
                    s("--pages"),
                    n.to_string(),
                    s("--seed"),
                    seed.to_string(),
                    s("--migrate"),
                    if mode == 2 { s("1") } else { s("0") },
                ],
                None,
            )?;
            let _ = mlines.recv_timeout(Duration::from_secs(60));
            std::thread::sleep(kill_after);
            let tk = Instant::now();
            let _ = mover.kill();
            let st = mover.wait().map_err(e2s)?;
            // SIGKILL takes effect when the mover's current syscall returns: a whole-process
            // migrate_pages is not cut short.
            let kill_ms = tk.elapsed().as_millis();
            // To the end of its output, as above: a `mover_end=` not yet passed on would read
            // as a kill.
            let ended: Vec<String> = mlines.iter().collect();
            mover_end = match ended.iter().find_map(|l| l.strip_prefix("mover_end=")) {
                Some(e) => format!("ended before the kill: {e}"),
                None => format!("killed ({st}) after {kill_ms} ms"),
            };
            writeln!(wstdin, "stop").map_err(e2s)?;
            let t0 = Instant::now();
            loop {
                match wlines.recv_timeout(Duration::from_secs(60)) {
                    Ok(l) => {
                        let fin = l.starts_with("final=");
                        lines.push(l);
                        if fin {
                            break;
                        }
                    }
                    Err(_) => {
                        return Err(format!(
                            "seed {seed}: writer gave no final check after {:.0} s",
                            t0.elapsed().as_secs_f64()
                        ))
                    }
                }
            }
            let st = writer.wait().map_err(e2s)?;
            if !st.success() {
                return Err(format!("seed {seed}: writer exited with {st}"));
            }
        }
    }
    let corrupt: Vec<&String> = lines.iter().filter(|l| l.starts_with("corrupt=")).collect();
    let passes = lines.iter().filter(|l| l.starts_with("pass=")).count();
    let fin = lines
        .iter()
        .find_map(|l| l.strip_prefix("final="))
        .unwrap_or("none (killed)");
    let bad_in_lines = lines.iter().any(|l| {
        (l.starts_with("pass=") || l.starts_with("final="))
            && !l.contains(" bad:0 ")
            && !l.contains("=bad:0 ")
    });
    let summary = format!(
        "seed:{seed} mode:{mode_name} kill_ms:{} passes:{passes} final:[{fin}] mover:[{mover_end}] seconds:{:.2}",
        kill_after.as_millis(),
        t0.elapsed().as_secs_f64()
    );
    if !corrupt.is_empty() || bad_in_lines {
        return Err(format!(
            "CORRUPTION {summary} corrupt:{}",
            corrupt
                .iter()
                .take(5)
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(";")
        ));
    }
    if mover_end.starts_with("error") {
        return Err(format!("MOVER FAILED {summary}"));
    }
    Ok(summary)
}

fn cmd_stress(o: &Opts) -> R<()> {
    let runs = o.num("runs", 20)?;
    let base = o.num("seed", 1)?;
    let n = o.num("pages", 2048)? as usize;
    let max_ms = o.num("max-ms", 500)?;
    print_balancing();
    out(
        "stress.seeds",
        format!("{base}..={}", base + runs.max(1) - 1),
    );
    let mut failures = 0;
    let t0 = Instant::now();
    for i in 0..runs {
        let seed = base + i;
        match stress_run(seed, n, max_ms) {
            Ok(s) => out("stress.run", format!("ok {s}")),
            Err(e) => {
                failures += 1;
                out("stress.run", format!("FAIL {e}"));
            }
        }
        std::io::stdout().flush().map_err(e2s)?;
    }
    out("stress.runs", runs);
    out("stress.failures", failures);
    out(
        "stress.seconds",
        format!("{:.1}", t0.elapsed().as_secs_f64()),
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Benchmark: raw move_pages (no query first) on batches of 1, 16, 256, 4096 pages.

fn raw_move(addrs: &[u64], node: i32) -> R<usize> {
    let ptrs: Vec<*mut libc::c_void> = addrs.iter().map(|&a| a as *mut libc::c_void).collect();
    let nodes = vec![node as libc::c_int; addrs.len()];
    let mut status = vec![0 as libc::c_int; addrs.len()];
    // SAFETY: the three arrays hold addrs.len() elements and outlive the call; the pages are ours.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            0 as libc::pid_t,
            addrs.len() as libc::c_ulong,
            ptrs.as_ptr(),
            nodes.as_ptr(),
            status.as_mut_ptr(),
            mpol::MPOL_MF_MOVE as libc::c_int,
        )
    };
    if r < 0 {
        return Err(format!("move_pages: {}", std::io::Error::last_os_error()));
    }
    Ok(status.iter().filter(|&&s| s == node).count())
}

/// `contend`: this process moves its pages between nodes 0 and 1, `rounds` times, while a second
/// thread moves the same pages the other way with raw move_pages: the kernel reports the pages the
/// other thread holds isolated as busy, which `moves::move_pages` tries again before it returns.
/// Then, alone, one more move places every page on node 1, the data intact.
fn cmd_contend(o: &Opts) -> R<()> {
    let n = o.num("pages", 256)? as usize;
    let rounds = o.num("rounds", 40)?;
    let seed = 11;
    let b = alloc_on(0, n, seed)?;
    let addrs = b.addrs();
    let stop = AtomicBool::new(false);
    let (mut retried, mut still_busy, mut calls) = (0, 0, 0);
    let other_moves = std::thread::scope(|s| -> R<u64> {
        let other = s.spawn(|| {
            let mut k = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let _ = raw_move(&addrs, (k % 2) as i32);
                k += 1;
            }
            k
        });
        let mut result = Ok(());
        for i in 0..rounds {
            let to = Dest::Node(((i + 1) % 2) as u32);
            match moves::move_pages(0, &addrs, to, Scope::Private, Budget::UNLIMITED) {
                Ok(p) => {
                    retried += p.busy_retried;
                    still_busy += p.counts.busy;
                    calls += u64::from(p.calls);
                }
                Err(e) => {
                    result = Err(e2s(e));
                    break;
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        let k = other
            .join()
            .map_err(|_| "the other mover panicked".to_string())?;
        result.map(|()| k)
    })?;
    let fin = moves::move_pages(0, &addrs, Dest::Node(1), Scope::Private, Budget::UNLIMITED)
        .map_err(e2s)?;
    out("contend.pages", n);
    out("contend.rounds", rounds);
    out("contend.calls", calls);
    out("contend.other_moves", other_moves);
    out("contend.busy_retried", retried);
    out("contend.still_busy", still_busy);
    out("contend.final", fmt_counts(&fin.counts));
    out("contend.final.query", fmt_nodes(&per_node(0, &addrs)?));
    out("contend.bad", bad_pages(&b, seed));
    Ok(())
}

fn cmd_bench(o: &Opts) -> R<()> {
    let n = o.num("pages", 8192)? as usize;
    let batches = o.list("batches", "1,16,256,4096")?;
    let reps = o.num("reps", 3)?;
    print_balancing();
    let b = alloc_on(0, n, 5)?;
    let addrs = b.addrs();
    let mut best: BTreeMap<u64, f64> = BTreeMap::new();
    // One unmeasured round trip first, so every measured move finds the pages settled.
    for to in [1, 0] {
        raw_move(&addrs, to)?;
    }
    // Each sample is a round trip, 0 -> 1 and back, so both directions weigh the same in every
    // batch size (moving towards node 1 and towards node 0 cost differently in these guests).
    for rep in 0..reps {
        for &batch in &batches {
            let mut secs = [0.0f64; 2];
            for (i, to) in [1, 0].into_iter().enumerate() {
                let t0 = Instant::now();
                let mut on = 0;
                for chunk in addrs.chunks(batch as usize) {
                    on += raw_move(chunk, to)?;
                }
                secs[i] = t0.elapsed().as_secs_f64();
                if on != n {
                    return Err(format!(
                        "batch {batch}: only {on} of {n} pages reached node {to}"
                    ));
                }
            }
            let rate = 2.0 * n as f64 / (secs[0] + secs[1]);
            out(
                "bench.sample",
                format!(
                    "rep:{rep} batch:{batch} to1_s:{:.4} to0_s:{:.4} pages_per_s:{rate:.0}",
                    secs[0], secs[1]
                ),
            );
            let e = best.entry(batch).or_insert(0.0);
            *e = e.max(rate);
        }
    }
    let top = best
        .get(&batches.iter().copied().max().unwrap_or(1))
        .copied()
        .unwrap_or(1.0);
    for (batch, rate) in &best {
        out(
            "bench.batch",
            format!("{batch} pages_per_s:{rate:.0} relative:{:.2}", rate / top),
        );
    }
    // numaff's own path (query, then move what is not there yet, BATCH pages per call).
    let mut best_numaff = 0.0f64;
    for rep in 0..reps {
        let mut secs = [0.0f64; 2];
        for (i, to) in [1u32, 0].into_iter().enumerate() {
            let t0 = Instant::now();
            let c = moves::move_to_node(0, &addrs, to, Scope::Private).map_err(e2s)?;
            secs[i] = t0.elapsed().as_secs_f64();
            if c.moved != n as u64 {
                return Err(format!("numaff path: {}", fmt_counts(&c)));
            }
        }
        let rate = 2.0 * n as f64 / (secs[0] + secs[1]);
        out(
            "bench.sample",
            format!(
                "rep:{rep} numaff batch:{} to1_s:{:.4} to0_s:{:.4} pages_per_s:{rate:.0}",
                pages::BATCH,
                secs[0],
                secs[1]
            ),
        );
        best_numaff = best_numaff.max(rate);
    }
    out(
        "bench.numaff",
        format!(
            "batch:{} pages_per_s:{best_numaff:.0} relative:{:.2}",
            pages::BATCH,
            best_numaff / top
        ),
    );
    Ok(())
}
