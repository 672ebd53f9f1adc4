//! Discovery of a [`Machine`] through hwloc (Debian's libhwloc 2.9, via `hwlocality`): the running
//! machine, hwloc XML exports (`lstopo --of xml`) and synthetic topologies ("pack:2 core:4 pu:2").

use std::ffi::CStr;
use std::path::Path;

use hwlocality::cpu::cpuset::CpuSet as HwCpuSet;
use hwlocality::memory::attribute::{Initiator, MemoryAttribute};
use hwlocality::object::attributes::{CacheAssociativity, ObjectAttributes};
use hwlocality::object::distance::DistancesKind;
use hwlocality::object::types::{CacheType, ObjectType};
use hwlocality::object::TopologyObject;
use hwlocality::topology::builder::{BuildFlags, TopologyBuilder, TypeFilter};
use hwlocality::Topology;

use crate::cpuset::CpuSet;
use crate::error::{MachineError, Result};
use crate::model::{Cache, CacheKind, Coherence, Core, Machine, Matrix, Node, Package};

/// An example synthetic description, for error messages.
const SYNTHETIC_EXAMPLE: &str = "pack:2 numa:1(memory=64GiB) l3:1(size=32MiB) core:8 pu:2";

/// 1 MiB/s in MB/s.
const MIB_PER_S_IN_MB_PER_S: f64 = 1.048_576;

/// The running machine, as hwloc sees it: name = host name, source = "hwloc VERSION", page size
/// from the system. PUs and nodes outside this process' cgroup are included: the model describes the
/// machine, not what this process may use.
///
/// # Mapping onto numaff's model (the same for XML and synthetic topologies)
///
/// - NUMANode objects give the nodes (os index, local memory, cpuset). hwloc gives a memory-only
///   node (KNL MCDRAM, CXL, NVDIMM) the cpuset of its locality, so it would share its PUs with the
///   DRAM node beside it; numaff gives each PU to the node with the smallest cpuset containing it
///   (on a tie the lowest id), which leaves such nodes without cpus as the kernel lists them.
/// - Package objects give the packages (one package 0 when there is none), Core objects the cores
///   (each PU is its own core when there is none).
/// - Every CPU cache object (unified, data and instruction caches of every level) gives a cache.
///   Instruction caches are kept (hwloc hides them by default). hwloc's "unknown" associativity is
///   `None`, "fully associative" is `Some(0)`; an unknown line size is taken as 64 bytes and noted in
///   `assumptions`.
/// - `distances`: hwloc's NUMA latency distance matrix (Linux' SLIT as "NUMALatency"), when one
///   covers every node.
/// - `latency_ns` / `bandwidth_mbps`: the Latency (ns) and Bandwidth memory attributes from initiators
///   to NUMA nodes, when every (cpu node, node) pair has a value (rows of memory-only nodes are 0).
///   An initiator stands for a node when its cpuset is the node's, lies inside it (a PU) or holds it
///   (a package), in that order of preference.
///   hwloc gives bandwidth in MiB/s (2^20 bytes/s); numaff stores MB/s (10^6 bytes/s), so values are
///   multiplied by 1.048576.
/// - `frequency_mhz`: the largest FrequencyMaxMHz (else FrequencyBaseMHz) of the cpu kinds.
/// - `coherence`: from the packages' CPUVendor (`Coherence::of_vendor`: MOESI for AMD, MESIF
///   for Intel) when every package that names one names the same.
pub fn discover() -> Result<Machine> {
    let action = "discover this machine";
    let topology = builder(action)?.build().map_err(|e| {
        hwloc_error(
            action,
            format!("{e}; run `lstopo` to see hwloc's own report"),
        )
    })?;
    let mut m = to_machine(&topology)?;
    m.name = root_info(&topology, "HostName")
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|s| s.trim().to_string())
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_string());
    m.source = Some(format!("hwloc {}", hwloc_version(&topology)));
    m.page_size = crate::sysfs::system_page_size();
    finish(m, "hwloc discovery")
}

/// A machine from an hwloc XML file (`lstopo --of xml FILE.xml`, `hwloc-annotate`). Its name is the
/// exported machine's host name, else the file name without extension.
pub fn from_xml_file(path: &Path) -> Result<Machine> {
    let text = std::fs::read_to_string(path).map_err(|source| MachineError::Io {
        action: "read hwloc XML file",
        path: path.to_path_buf(),
        source,
    })?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    let m = from_xml_isolated(&text, &path.display().to_string(), &stem)?;
    finish(m, &path.display().to_string())
}

/// A machine from hwloc XML text; `origin` names it in errors and, when the XML has no host name,
/// becomes the machine's name.
pub fn from_xml_str(xml: &str, origin: &str) -> Result<Machine> {
    let m = from_xml_isolated(xml, origin, origin)?;
    finish(m, origin)
}

/// A machine from an hwloc synthetic description such as "pack:4 core:8 pu:2" (see hwloc's
/// "Synthetic topologies"); its name is the description.
pub fn from_synthetic(desc: &str) -> Result<Machine> {
    let action = format!("build a synthetic topology from {desc:?}");
    let explain = || {
        let reason = diagnose_synthetic(desc)
            .map(|r| format!("{r}; "))
            .unwrap_or_default();
        format!(
            "{reason}hwloc expects levels from the top down, each `type:count` with optional \
             attributes in parentheses, ending with PUs, e.g. \"{SYNTHETIC_EXAMPLE}\" \
             (set HWLOC_SYNTHETIC_VERBOSE=1 to see hwloc's own diagnosis)"
        )
    };
    if let Some(problem) = synthetic_size_problem(desc) {
        return Err(MachineError::Spec(format!(
            "synthetic topology {desc:?}: {problem}"
        )));
    }
    let topology = builder(&action)?
        .from_synthetic(desc)
        .map_err(|_| hwloc_error(&action, explain()))?
        .build()
        .map_err(|e| hwloc_error(&action, format!("{e}; {}", explain())))?;
    let mut m = to_machine(&topology)?;
    m.name = desc.trim().to_string();
    m.source = Some(format!(
        "hwloc {} synthetic topology",
        hwloc_version(&topology)
    ));
    m.page_size = page_size_of(&topology, &mut m.assumptions);
    finish(m, &format!("synthetic topology {desc:?}"))
}

/// The cap a synthetic description exceeds, if any, found from its counts before hwloc builds
/// anything: the product of the level counts is the PUs (below [`crate::validate::MAX_PUS`]), the
/// product up to a `numa` level the NUMA nodes (below [`crate::validate::MAX_NODES`]).
fn synthetic_size_problem(desc: &str) -> Option<String> {
    // Drop attributes in parentheses, then read each `type:count`.
    let mut plain = String::new();
    let mut depth = 0usize;
    for c in desc.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 => plain.push(c),
            _ => {}
        }
    }
    // hwloc reads a count with strtoul: its leading digits. A level may be a bare count ("2 2 4").
    let leading_count = |text: &str| -> Option<u64> {
        let digits: String = text
            .trim()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        (!digits.is_empty()).then(|| digits.parse().unwrap_or(u64::MAX))
    };
    let (mut objects, mut nodes) = (1u64, None);
    for level in plain.split_whitespace() {
        let (ty, count) = match level.split_once(':') {
            Some((ty, count)) => (ty, leading_count(count).unwrap_or(1)),
            None => match leading_count(level) {
                Some(count) => ("", count),
                None => continue,
            },
        };
        objects = objects.saturating_mul(count);
        let ty = ty.trim_start_matches('[').to_ascii_lowercase();
        if ty.starts_with("numa") || ty.starts_with("node") {
            nodes = Some(objects);
        }
    }
    let problem = crate::validate::size_problem(
        usize::try_from(objects).unwrap_or(usize::MAX),
        None,
        nodes.map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX)),
        None,
    )?;
    Some(problem.problem)
}

/// The cap an hwloc XML exceeds, if any, found from its text before hwloc reads it: more `PU` or
/// `NUMANode` objects than [`crate::validate::MAX_PUS`] or [`crate::validate::MAX_NODES`], or an
/// `os_index` of one that is negative (hwloc would read "-5" as 4294967291) or not below the cap.
fn xml_size_problem(xml: &str) -> Option<String> {
    use crate::validate::{MAX_NODES, MAX_PUS};
    let attribute = |tag: &str, name: &str| -> Option<String> {
        let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
        let len = tag[at..].find('"')?;
        Some(tag[at..at + len].to_string())
    };
    let (mut pus, mut nodes) = (0usize, 0usize);
    for part in xml.split("<object").skip(1) {
        let tag = &part[..part.find('>').unwrap_or(part.len())];
        let (count, cap, limit) = match attribute(tag, "type").as_deref() {
            Some("PU") => (&mut pus, MAX_PUS, "NR_CPUS"),
            Some("NUMANode") => (&mut nodes, MAX_NODES, "MAX_NUMNODES"),
            _ => continue,
        };
        *count += 1;
        let what = if cap == MAX_PUS { "PU" } else { "NUMANode" };
        if *count > cap {
            return Some(format!(
                "more than {cap} {what} objects; numaff takes at most {cap} (Linux's largest \
                 {limit}): describe a real machine (or part of one)"
            ));
        }
        let Some(index) = attribute(tag, "os_index") else {
            continue;
        };
        let bad = match index.trim().parse::<i64>() {
            Ok(i) if i < 0 => "is negative",
            Ok(i) if i >= cap as i64 => "is not below the cap",
            Ok(_) => continue,
            Err(_) => "is not a number",
        };
        return Some(format!(
            "{what} object number {count} (in document order) has os_index=\"{index}\", which \
             {bad}; a {what}'s os_index must be from 0 to {} (Linux's largest {limit}): fix its \
             os_index attribute",
            cap - 1
        ));
    }
    None
}

/// How long the child loading an XML may take before it is killed.
const XML_LOAD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The text a panic in the XML child reports, so callers (and the fuzz target) can tell a numaff bug
/// from bad input.
pub const CONVERSION_PANIC: &str = "numaff panicked while converting hwloc's topology";

/// In the XML child: a crash there is expected and reported by the parent, so it ends the child
/// at once with no core file, whatever handlers the parent installed (a fuzzer's, which wrote a
/// `crash-*` file per hwloc assert of the child; the Rust runtime's stack-overflow handler).
fn quiet_crash() {
    let no_core = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: setrlimit reads one valid rlimit; signal only resets dispositions of this process
    // (the child), which runs no handler of its own. Failures leave the inherited ones: harmless.
    unsafe {
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        for sig in [
            libc::SIGABRT,
            libc::SIGSEGV,
            libc::SIGBUS,
            libc::SIGILL,
            libc::SIGFPE,
            libc::SIGTRAP,
        ] {
            libc::signal(sig, libc::SIG_DFL);
        }
    }
}

/// Loads XML in a forked child process and returns its machine through a pipe as machine-file text.
///
/// hwloc 2.9's XML loader crashes on some malformed files (fuzzing found a SIGSEGV in
/// `hwloc_bitmap_compare_first` under `hwloc_topology_load`), and debug builds of hwlocality run
/// `hwloc_topology_check`, whose C asserts abort. Isolated in a child, such a crash becomes a clear
/// error instead of killing numaff.
///
/// Forking is only safe while this process has one thread: a child forked while another thread holds
/// a lock (the dynamic loader's, taken when hwloc loads its plugins) deadlocks — seen in the
/// multi-threaded test harness. So a multi-threaded caller loads the XML in-process, without the
/// isolation; the `numaff` command and the fuzz target are single-threaded when they import.
fn from_xml_isolated(xml: &str, origin: &str, default_name: &str) -> Result<Machine> {
    if let Some(problem) = xml_size_problem(xml) {
        return Err(MachineError::Spec(format!("{origin}: {problem}")));
    }
    if !single_threaded() {
        let mut m = from_xml_inner(xml, origin)?;
        if m.name.is_empty() {
            m.name = default_name.to_string();
        }
        return Ok(m);
    }
    use std::io::{Read, Write};
    use std::os::fd::FromRawFd;

    let action = format!("import the hwloc XML {origin}");
    let fail = |message: String| hwloc_error(&action, message);
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds is a valid array of two ints for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(fail(format!(
            "cannot create a pipe: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: fork has no preconditions; the child only runs the conversion and _exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        let err = std::io::Error::last_os_error();
        // SAFETY: both descriptors were just created by pipe2 and are owned here.
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
        return Err(fail(format!("cannot fork a process to load it in: {err}")));
    }
    if pid == 0 {
        quiet_crash();
        // Child: convert, write "ok\n<toml>" or "err\n<message>" or "panic", and leave at once.
        // SAFETY: fds[1] is the write end, owned by this process.
        let mut out = unsafe { std::fs::File::from_raw_fd(fds[1]) };
        let loaded = std::panic::catch_unwind(|| {
            from_xml_inner(xml, origin).and_then(|mut m| {
                if m.name.is_empty() {
                    m.name = default_name.to_string();
                }
                crate::file::to_toml_string(&m)
            })
        });
        let answer = match loaded {
            Ok(Ok(text)) => format!("ok\n{text}"),
            Ok(Err(MachineError::Hwloc { action, message })) => {
                format!("hwloc\n{action}\n{message}")
            }
            Ok(Err(e)) => format!("err\n{e}"),
            Err(_) => "panic\n".to_string(),
        };
        let code = i32::from(out.write_all(answer.as_bytes()).is_err());
        // SAFETY: _exit ends the child without running the parent's destructors or atexit hooks.
        unsafe { libc::_exit(code) }
    }
    // Parent.
    // SAFETY: fds[1] is the write end, owned here and no longer needed; fds[0] becomes a File.
    unsafe { libc::close(fds[1]) };
    let mut input = unsafe { std::fs::File::from_raw_fd(fds[0]) };
    let deadline = std::time::Instant::now() + XML_LOAD_TIMEOUT;
    let mut answer = Vec::new();
    let mut chunk = [0u8; 65536];
    let read_result = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let mut pfd = libc::pollfd {
            fd: fds[0],
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = libc::c_int::try_from(left.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: pfd is one valid pollfd.
        let ready = unsafe { libc::poll(&mut pfd, 1, ms) };
        if ready == 0 {
            break Err("timed out".to_string());
        }
        if ready < 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            break Err(err.to_string());
        }
        match input.read(&mut chunk) {
            Ok(0) => break Ok(()),
            Ok(n) => answer.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => break Err(e.to_string()),
        }
    };
    if read_result.is_err() {
        // SAFETY: pid is our child; killing it is harmless if it already exited.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let mut status = 0;
    // SAFETY: pid is our child; status is a valid int.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            break;
        }
    }
    if let Err(why) = read_result {
        return Err(fail(format!(
            "loading it {why} after {} s; is the file an hwloc XML export?",
            XML_LOAD_TIMEOUT.as_secs()
        )));
    }
    if libc::WIFSIGNALED(status) {
        return Err(fail(format!(
            "hwloc crashed (signal {}) while loading it: the file is not a consistent hwloc XML \
             export; export it again with `lstopo-no-graphics --of xml FILE.xml`",
            libc::WTERMSIG(status)
        )));
    }
    let answer = String::from_utf8_lossy(&answer);
    match answer.split_once('\n') {
        Some(("ok", text)) => crate::file::from_toml_str(text, origin),
        Some(("hwloc", message)) => Err(match message.split_once('\n') {
            Some((action, message)) => hwloc_error(action, message.to_string()),
            None => fail(message.to_string()),
        }),
        Some(("err", message)) => Err(MachineError::Spec(message.to_string())),
        Some(("panic", _)) => Err(fail(format!(
            "{CONVERSION_PANIC}; please report this with the file"
        ))),
        _ => Err(fail(
            "the process loading it ended without an answer".to_string(),
        )),
    }
}

/// Whether this process has a single thread (`Threads:` of /proc/self/status).
fn single_threaded() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Threads:").map(|v| v.trim() == "1"))
        })
        .unwrap_or(false)
}

fn from_xml_inner(xml: &str, origin: &str) -> Result<Machine> {
    let action = format!("import the hwloc XML {origin}");
    let topology = builder(&action)?
        .from_xml(xml)
        .map_err(|e| {
            hwloc_error(
                &action,
                format!(
                    "{e}; give an XML written by `lstopo --of xml FILE.xml` or hwloc-annotate \
                     (set HWLOC_XML_VERBOSE=1 to see where hwloc's parser stopped)"
                ),
            )
        })?
        .build()
        .map_err(|e| hwloc_error(&action, e.to_string()))?;
    let mut m = to_machine(&topology)?;
    m.name = root_info(&topology, "HostName").unwrap_or_default();
    m.source = Some(match root_info(&topology, "hwlocVersion") {
        Some(v) => format!("hwloc XML {origin} (exported by hwloc {v})"),
        None => format!("hwloc XML {origin}"),
    });
    m.page_size = page_size_of(&topology, &mut m.assumptions);
    Ok(m)
}

/// A builder that keeps what numaff models: disallowed PUs and nodes, instruction caches.
fn builder(action: &str) -> Result<TopologyBuilder> {
    Topology::builder()
        .with_flags(BuildFlags::INCLUDE_DISALLOWED)
        .map_err(|e| hwloc_error(action, format!("cannot set the build flags: {e}")))?
        .with_cpu_cache_type_filter(TypeFilter::KeepAll)
        .map_err(|e| hwloc_error(action, format!("cannot keep the caches: {e}")))?
        .with_cpu_icache_type_filter(TypeFilter::KeepAll)
        .map_err(|e| hwloc_error(action, format!("cannot keep the instruction caches: {e}")))
}

fn finish(mut m: Machine, origin: &str) -> Result<Machine> {
    m.normalize();
    crate::file::check(&m, origin)?;
    Ok(m)
}

fn hwloc_error(action: &str, message: String) -> MachineError {
    MachineError::Hwloc {
        action: action.to_string(),
        message: plain_errno(&message),
    }
}

/// hwlocality's errors print their errno as Rust debug output (`failed with errno Some(Errno {
/// code: 22, description: Some("Invalid argument") })`): said here as its text and number
/// (`failed: Invalid argument (errno 22)`).
fn plain_errno(message: &str) -> String {
    const HEAD: &str = " with errno Some(Errno { code: ";
    let Some(at) = message.find(HEAD) else {
        return message.replace(" with errno None", "");
    };
    let rest = &message[at + HEAD.len()..];
    let Some(end) = rest.find(" })") else {
        return message.to_string();
    };
    let inner = &rest[..end];
    let code = inner.split(',').next().unwrap_or("").trim();
    let text = inner
        .split_once("description: Some(\"")
        .and_then(|(_, t)| t.strip_suffix("\")"))
        .map(str::to_string)
        .or_else(|| {
            code.parse::<i32>()
                .ok()
                .map(|c| std::io::Error::from_raw_os_error(c).to_string())
        })
        .unwrap_or_default();
    format!(
        "{}: {text} (errno {code}){}",
        &message[..at],
        &rest[end + " })".len()..]
    )
}

fn text(s: &CStr) -> String {
    s.to_string_lossy().into_owned()
}

fn root_info(topology: &Topology, key: &str) -> Option<String> {
    topology.root_object().info(key).map(text)
}

/// The version of the hwloc that built the topology ("2.9.0"), else its API version.
fn hwloc_version(topology: &Topology) -> String {
    root_info(topology, "hwlocVersion").unwrap_or_else(|| {
        let v = hwlocality::hwloc_api_version();
        format!("(API {}.{})", v >> 16, (v >> 8) & 0xff)
    })
}

/// The smallest page size of the NUMA nodes (hwloc records them in XML exports), else 4 KiB.
fn page_size_of(topology: &Topology, assumptions: &mut Vec<String>) -> u64 {
    let smallest = topology
        .objects_with_type(ObjectType::NUMANode)
        .filter_map(|n| match n.attributes() {
            Some(ObjectAttributes::NUMANode(a)) => {
                a.page_types().iter().map(|p| p.size().get()).min()
            }
            _ => None,
        })
        .min();
    smallest.unwrap_or_else(|| {
        assumptions.push("hwloc gives no page size; assumed 4 KiB".to_string());
        4096
    })
}

fn cpus_of(set: &HwCpuSet) -> CpuSet {
    set.iter_set()
        .filter_map(|i| u32::try_from(usize::from(i)).ok())
        .collect()
}

fn object_cpus(obj: &TopologyObject) -> CpuSet {
    obj.cpuset().map(|s| cpus_of(&s)).unwrap_or_default()
}

/// An object's os index, else its logical index (synthetic and some XML objects have none).
fn object_id(obj: &TopologyObject) -> u32 {
    let index = obj.os_index().unwrap_or_else(|| obj.logical_index());
    u32::try_from(index).unwrap_or(u32::MAX)
}

/// Everything but name, source and page size, which depend on where the topology came from.
fn to_machine(topology: &Topology) -> Result<Machine> {
    use crate::validate::{MAX_NODES, MAX_PUS};
    // The caps first: counts, and os indexes (an XML's os_index="-5" reads as 4294967291).
    for (ty, cap, name, limit) in [
        (ObjectType::PU, MAX_PUS, "PU", "NR_CPUS"),
        (ObjectType::NUMANode, MAX_NODES, "NUMANode", "MAX_NUMNODES"),
    ] {
        let count = topology.objects_with_type(ty).count();
        if count > cap {
            return Err(MachineError::Spec(format!(
                "{count} {name} objects; numaff takes at most {cap} (Linux's largest {limit}): \
                 describe a real machine (or part of one)"
            )));
        }
        for obj in topology.objects_with_type(ty) {
            if let Some(i) = obj.os_index().filter(|&i| i >= cap) {
                let signed = i as u32 as i32;
                let read_as = if signed < 0 {
                    format!(" (read from {signed}: negative)")
                } else {
                    String::new()
                };
                return Err(MachineError::Spec(format!(
                    "{name} L#{} has os_index {i}{read_as}; a {name}'s os_index must be below \
                     {cap} (Linux's largest {limit}): fix its os_index attribute",
                    obj.logical_index()
                )));
            }
        }
    }
    let mut m = Machine::new(String::new());
    let pus: CpuSet = topology
        .objects_with_type(ObjectType::PU)
        .map(object_id)
        .collect();

    // Nodes, sorted by id; each PU goes to the smallest node cpuset holding it.
    let mut numa: Vec<(u32, u64, CpuSet, &TopologyObject)> = topology
        .objects_with_type(ObjectType::NUMANode)
        .map(|obj| {
            let memory = match obj.attributes() {
                Some(ObjectAttributes::NUMANode(a)) => a.local_memory().map_or(0, |v| v.get()),
                _ => 0,
            };
            (object_id(obj), memory, object_cpus(obj), obj)
        })
        .collect();
    numa.sort_by_key(|n| n.0);
    let mut node_cpus = vec![CpuSet::new(); numa.len()];
    for pu in &pus {
        let owner = numa
            .iter()
            .enumerate()
            .filter(|(_, n)| n.2.contains(pu))
            .min_by_key(|(_, n)| (n.2.len(), n.0));
        if let Some((i, _)) = owner {
            node_cpus[i].insert(pu);
        }
    }
    for (i, (id, memory, locality, _)) in numa.iter().enumerate() {
        if node_cpus[i].is_empty() && !locality.is_empty() {
            m.assumptions.push(format!(
                "hwloc places node {id} near cpus {locality}, which belong to another node; \
                 numaff models it as a memory-only node, as the kernel lists it"
            ));
        }
        m.nodes.push(Node {
            id: *id,
            memory_bytes: *memory,
            cpus: std::mem::take(&mut node_cpus[i]),
        });
    }

    // Cores, then packages.
    let mut cores: Vec<CpuSet> = topology
        .objects_with_type(ObjectType::Core)
        .map(|c| object_cpus(c).intersection(&pus))
        .filter(|c| !c.is_empty())
        .collect();
    let covered = cores.iter().fold(CpuSet::new(), |a, c| a.union(c));
    cores.extend(
        pus.iter()
            .filter(|p| !covered.contains(*p))
            .map(|p| [p].into_iter().collect::<CpuSet>()),
    );
    let mut packages: Vec<(u32, CpuSet)> = topology
        .objects_with_type(ObjectType::Package)
        .map(|p| (object_id(p), object_cpus(p)))
        .collect();
    if packages.is_empty() {
        packages.push((0, pus.clone()));
    }
    m.packages = packages
        .iter()
        .map(|(id, _)| Package {
            id: *id,
            cores: Vec::new(),
        })
        .collect();
    for core in cores {
        let first = core.first().unwrap_or_default();
        let Some(p) = packages.iter().position(|(_, set)| set.contains(first)) else {
            return Err(hwloc_error(
                "map the topology",
                format!("core with PUs {core} is in no package; the topology is inconsistent"),
            ));
        };
        m.packages[p].cores.push(Core { pus: core });
    }
    m.packages.retain(|p| !p.cores.is_empty());

    // Caches.
    let mut unknown_line = 0;
    let mut no_size = 0;
    for obj in topology.objects() {
        if !obj.object_type().is_cpu_cache() {
            continue;
        }
        let Some(ObjectAttributes::Cache(attr)) = obj.attributes() else {
            continue;
        };
        let cpus = object_cpus(obj).intersection(&pus);
        let Some(size) = attr.size() else {
            no_size += 1;
            continue;
        };
        if cpus.is_empty() {
            continue;
        }
        let kind = match attr.cache_type() {
            CacheType::Data => CacheKind::Data,
            CacheType::Instruction => CacheKind::Instruction,
            _ => CacheKind::Unified,
        };
        let line_bytes = match attr.line_size() {
            Some(l) => u32::try_from(l.get()).unwrap_or(64),
            None => {
                unknown_line += 1;
                64
            }
        };
        let associativity = match attr.associativity() {
            CacheAssociativity::Ways(w) => Some(u32::try_from(w.get()).unwrap_or(u32::MAX)),
            CacheAssociativity::Full => Some(0),
            CacheAssociativity::Unknown => None,
        };
        m.caches.push(Cache {
            level: u8::try_from(attr.depth()).unwrap_or(u8::MAX),
            kind,
            size_bytes: size.get(),
            line_bytes,
            associativity,
            latency_cycles: None,
            cpus,
        });
    }
    if unknown_line > 0 {
        m.assumptions.push(format!(
            "hwloc does not know the line size of {unknown_line} caches; assumed 64 bytes"
        ));
    }
    if no_size > 0 {
        m.assumptions.push(format!(
            "hwloc does not know the size of {no_size} caches; they are left out"
        ));
    }

    let numa_objects: Vec<&TopologyObject> = numa.iter().map(|n| n.3).collect();
    m.distances = distances(topology, &numa_objects, &mut m.assumptions);
    let cpu_sets: Vec<CpuSet> = m.nodes.iter().map(|n| n.cpus.clone()).collect();
    m.latency_ns = memattr_matrix(
        MemoryAttribute::latency(topology),
        "Latency",
        &numa_objects,
        &cpu_sets,
        1.0,
        &mut m.assumptions,
    );
    m.bandwidth_mbps = memattr_matrix(
        MemoryAttribute::bandwidth(topology),
        "Bandwidth",
        &numa_objects,
        &cpu_sets,
        MIB_PER_S_IN_MB_PER_S,
        &mut m.assumptions,
    );
    m.frequency_mhz = frequency(topology);
    m.coherence = coherence(topology);
    m.description = topology
        .objects_with_type(ObjectType::Package)
        .find_map(|p| p.info("CPUModel"))
        .map(text);
    Ok(m)
}

/// The NUMA latency matrix, indexed like `nodes` (sorted by id), when one covers every node.
fn distances(
    topology: &Topology,
    nodes: &[&TopologyObject],
    assumptions: &mut Vec<String>,
) -> Option<Matrix<u32>> {
    let all = topology.distances(None).ok()?;
    let mut candidates: Vec<_> = all
        .iter()
        .filter(|d| !d.kind().contains(DistancesKind::MEANS_BANDWIDTH))
        .filter(|d| {
            d.objects()
                .all(|o| o.is_some_and(|o| o.object_type() == ObjectType::NUMANode))
        })
        .collect();
    // Prefer the OS's matrix (NUMALatency), then any latency-like one.
    candidates.sort_by_key(|d| {
        let name = d.name().map(text).unwrap_or_default();
        (
            name != "NUMALatency",
            !d.kind().contains(DistancesKind::MEANS_LATENCY),
        )
    });
    let d = candidates.first()?;
    let name = d.name().map(text).unwrap_or_else(|| "unnamed".to_string());
    let positions: Option<Vec<usize>> = nodes.iter().map(|n| d.object_idx(n)).collect();
    let Some(positions) = positions else {
        assumptions.push(format!(
            "hwloc's {name} distance matrix does not cover every node; distances left out"
        ));
        return None;
    };
    let n = d.num_objects();
    let values = d.distances();
    let mut matrix = Vec::with_capacity(nodes.len());
    for &r in &positions {
        let mut row = Vec::with_capacity(nodes.len());
        for &c in &positions {
            let v = values.get(r * n + c).copied()?;
            let Ok(v) = u32::try_from(v) else {
                assumptions.push(format!(
                    "hwloc's {name} distance {v} does not fit SLIT units; distances left out"
                ));
                return None;
            };
            row.push(v);
        }
        matrix.push(row);
    }
    Some(matrix)
}

/// How well an initiator's cpuset stands for the cpus of a node: exactly, from inside (a PU or core
/// of the node), or from outside (a package holding the node). `None` when unrelated.
fn initiator_rank(initiator: &CpuSet, node: &CpuSet) -> Option<(u8, usize)> {
    if initiator.is_empty() || !initiator.intersects(node) {
        None
    } else if initiator == node {
        Some((0, initiator.len()))
    } else if initiator.is_subset(node) {
        Some((1, initiator.len()))
    } else if node.is_subset(initiator) {
        Some((2, initiator.len()))
    } else {
        None
    }
}

/// A memory attribute as a matrix (row = node of the initiator, column = target node), scaled by
/// `scale`; `None` unless every cpu node has a value for every node.
fn memattr_matrix(
    attr: MemoryAttribute<'_>,
    name: &str,
    nodes: &[&TopologyObject],
    node_cpus: &[CpuSet],
    scale: f64,
    assumptions: &mut Vec<String>,
) -> Option<Matrix<f64>> {
    let mut matrix = vec![vec![0.0; nodes.len()]; nodes.len()];
    let mut found = 0usize;
    let mut missing = 0usize;
    for (c, target) in nodes.iter().enumerate() {
        let values: Vec<(CpuSet, u64)> = match attr.initiators(target) {
            Ok((initiators, values)) => initiators
                .iter()
                .map(|i| match i {
                    Initiator::CpuSet(set) => cpus_of(set),
                    Initiator::Object(obj) => object_cpus(obj),
                })
                .zip(values)
                .collect(),
            Err(_) => Vec::new(),
        };
        found += values.len();
        for (r, cpus) in node_cpus.iter().enumerate() {
            if cpus.is_empty() {
                continue; // memory-only node: no cpu to measure from, the row stays 0
            }
            let best = values
                .iter()
                .filter_map(|(set, v)| initiator_rank(set, cpus).map(|rank| (rank, *v)))
                .min_by_key(|(rank, _)| *rank);
            match best {
                Some((_, v)) => matrix[r][c] = v as f64 * scale,
                None => missing += 1,
            }
        }
    }
    if found == 0 {
        return None;
    }
    if missing > 0 {
        assumptions.push(format!(
            "hwloc's {name} memory attribute lacks {missing} (cpu node, memory node) pairs; \
             left out"
        ));
        return None;
    }
    Some(matrix)
}

/// The largest maximum (else base) frequency of the cpu kinds, in MHz.
fn frequency(topology: &Topology) -> Option<f64> {
    let kinds = topology.cpu_kinds().ok()?;
    let mut best: Option<f64> = None;
    for kind in kinds {
        let get = |key: &str| {
            kind.infos
                .iter()
                .find(|i| i.name().to_bytes() == key.as_bytes())
                .and_then(|i| text(i.value()).trim().parse::<f64>().ok())
                .filter(|f| f.is_finite() && *f > 0.0)
        };
        if let Some(f) = get("FrequencyMaxMHz").or_else(|| get("FrequencyBaseMHz")) {
            best = Some(best.map_or(f, |b: f64| b.max(f)));
        }
    }
    best
}

/// The coherence protocol of the packages' vendor, if every package that names a vendor names
/// the same known one.
fn coherence(topology: &Topology) -> Option<Coherence> {
    let mut vendors = topology
        .objects_with_type(ObjectType::Package)
        .filter_map(|p| p.info("CPUVendor"))
        .map(text);
    let first = vendors.next()?;
    if vendors.any(|v| v != first) {
        return None;
    }
    Coherence::of_vendor(&first)
}

/// The levels of a synthetic description: split at spaces outside parentheses.
fn synthetic_levels(desc: &str) -> Vec<String> {
    let mut levels = Vec::new();
    let mut current = String::new();
    let mut depth = 0i32;
    for ch in desc.chars() {
        match ch {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ => {}
        }
        if ch.is_whitespace() && depth <= 0 {
            if !current.is_empty() {
                levels.push(std::mem::take(&mut current));
            }
        } else {
            current.push(ch);
        }
    }
    if !current.is_empty() {
        levels.push(current);
    }
    levels
}

/// A reason why hwloc may have rejected a synthetic description, where one can be seen.
fn diagnose_synthetic(desc: &str) -> Option<String> {
    let levels = synthetic_levels(desc);
    let Some(last) = levels.last() else {
        return Some("the description is empty".to_string());
    };
    for level in &levels {
        if level.matches('(').count() != level.matches(')').count() {
            return Some(format!("level {level:?} has unbalanced parentheses"));
        }
        let head = level.split('(').next().unwrap_or(level);
        let count = head.rsplit(':').next().unwrap_or(head);
        if count.parse::<u64>().is_err() {
            return Some(format!(
                "level {level:?} has no number of objects (write type:count, e.g. core:8)"
            ));
        }
    }
    let head = last.split('(').next().unwrap_or(last);
    if let Some((ty, _)) = head.split_once(':') {
        if !ty.eq_ignore_ascii_case("pu") {
            return Some(format!(
                "the last level is {last:?}, not PUs (end with pu:N)"
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn hwloc_errors_say_the_errno_in_words() {
        let m = super::plain_errno(
            "hwloc_topology_load failed with errno Some(Errno { code: 22, description: \
             Some(\"Invalid argument\") })",
        );
        assert_eq!(m, "hwloc_topology_load failed: Invalid argument (errno 22)");
        assert_eq!(
            super::plain_errno("hwloc_x failed with errno None; see lstopo"),
            "hwloc_x failed; see lstopo"
        );
        assert_eq!(super::plain_errno("no errno here"), "no errno here");
    }

    use super::*;

    #[test]
    fn ranks_initiators() {
        let node: CpuSet = CpuSet::parse("0-7").unwrap();
        assert_eq!(initiator_rank(&node, &node), Some((0, 8)));
        assert_eq!(
            initiator_rank(&CpuSet::parse("3").unwrap(), &node),
            Some((1, 1))
        );
        assert_eq!(
            initiator_rank(&CpuSet::parse("0-15").unwrap(), &node),
            Some((2, 16))
        );
        assert_eq!(initiator_rank(&CpuSet::parse("4-11").unwrap(), &node), None);
        assert_eq!(initiator_rank(&CpuSet::parse("8").unwrap(), &node), None);
    }

    #[test]
    fn diagnoses_synthetic_descriptions() {
        assert!(diagnose_synthetic("  ").unwrap().contains("empty"));
        assert!(diagnose_synthetic("pack:2 core:x pu:2")
            .unwrap()
            .contains("\"core:x\""));
        assert!(diagnose_synthetic("pack:2 pu:2 core:2")
            .unwrap()
            .contains("not PUs"));
        assert!(diagnose_synthetic("pack:2 numa:1(memory=1GiB core:2 pu:1")
            .unwrap()
            .contains("parentheses"));
        assert_eq!(
            diagnose_synthetic("pack:2 l3:1(size=8MiB) core:2 pu:2"),
            None
        );
        assert_eq!(
            synthetic_levels("pack:2 numa:1(memory=1GiB indexes=0,1) pu:2"),
            vec!["pack:2", "numa:1(memory=1GiB indexes=0,1)", "pu:2"]
        );
    }
}
