//! `numaff topo --measure` on this host: plausibility of the figures, shape of the result, errors.
//! The host's machine is read here from sysfs in a few lines (discovery proper lives elsewhere).

// Test helpers outside #[test] functions: a panic is the wanted failure.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

use numaff_machine::hostmeasure::{measure, CellKind, MeasureOptions, Progress};
use numaff_machine::{
    validate, Cache, CacheKind, Core, CpuSet, Machine, MachineError, Node, Package,
};

/// Measurements run one at a time: the host has 2 PUs and parallel tests would disturb each other.
static SERIAL: Mutex<()> = Mutex::new(());

fn read(path: impl AsRef<Path>) -> String {
    std::fs::read_to_string(path.as_ref())
        .unwrap_or_else(|e| panic!("{}: {e}", path.as_ref().display()))
        .trim()
        .to_string()
}

fn size(text: &str) -> u64 {
    let (num, unit) = text.split_at(
        text.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len()),
    );
    let n: u64 = num.parse().unwrap();
    n * match unit {
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        _ => 1,
    }
}

/// This host from sysfs: its nodes (cpus, memory), one core per PU, and its last-level caches.
fn host() -> Machine {
    let mut m = Machine::new("host");
    let online = CpuSet::parse(&read("/sys/devices/system/node/online")).unwrap();
    for id in online.iter() {
        let dir = format!("/sys/devices/system/node/node{id}");
        let cpus = CpuSet::parse(&read(format!("{dir}/cpulist"))).unwrap();
        let meminfo = read(format!("{dir}/meminfo"));
        let kb: u64 = meminfo
            .lines()
            .find(|l| l.contains("MemTotal"))
            .and_then(|l| l.split_whitespace().nth(3))
            .unwrap()
            .parse()
            .unwrap();
        m.nodes.push(Node {
            id,
            memory_bytes: kb * 1024,
            cpus,
        });
    }
    let pus = CpuSet::parse(&read("/sys/devices/system/cpu/online")).unwrap();
    m.packages.push(Package {
        id: 0,
        cores: pus
            .iter()
            .map(|p| Core {
                pus: [p].into_iter().collect(),
            })
            .collect(),
    });
    let mut llcs: Vec<Cache> = Vec::new();
    for pu in pus.iter() {
        let dir = format!("/sys/devices/system/cpu/cpu{pu}/cache");
        let Some(top) = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("index"))
            .max_by_key(|e| read(e.path().join("level")).parse::<u8>().unwrap())
        else {
            continue;
        };
        let p = top.path();
        let cpus = CpuSet::parse(&read(p.join("shared_cpu_list"))).unwrap();
        if llcs.iter().any(|c| c.cpus == cpus) {
            continue;
        }
        llcs.push(Cache {
            level: read(p.join("level")).parse().unwrap(),
            kind: CacheKind::Unified,
            size_bytes: size(&read(p.join("size"))),
            line_bytes: read(p.join("coherency_line_size")).parse().unwrap(),
            associativity: None,
            latency_cycles: None,
            cpus,
        });
    }
    m.caches = llcs;
    m.normalize();
    m
}

fn llc_bytes(m: &Machine) -> u64 {
    m.last_level_caches().iter().map(|c| c.size_bytes).sum()
}

#[test]
fn defaults_are_plausible_on_this_host() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let m = host();
    let opts = MeasureOptions::default();
    let t = Instant::now();
    let r = measure(&m, &opts, &mut |_| {}).unwrap();
    let secs = t.elapsed().as_secs_f64();
    let n = m.nodes.len();
    eprintln!(
        "host: {n} node(s), {} PUs, LLC {} MiB; buffer {} MiB; latency {:?} ns (spread {:?}); \
         bandwidth {:?} MB/s (spread {:?}); {secs:.1} s; notes {:?}",
        m.pu_count(),
        llc_bytes(&m) >> 20,
        r.buffer_bytes[0] >> 20,
        r.latency_ns,
        r.latency_spread_ns,
        r.bandwidth_mbps,
        r.bandwidth_spread_mbps,
        r.notes
    );
    if n == 1 {
        assert_eq!(r.nodes, vec![m.nodes[0].id]);
        assert_eq!((r.latency_ns.len(), r.latency_ns[0].len()), (1, 1));
        assert_eq!((r.bandwidth_mbps.len(), r.bandwidth_mbps[0].len()), (1, 1));
    }
    // The default buffer is well above the last-level cache.
    assert!(r.buffer_bytes[0] >= 256 << 20);
    assert!(r.buffer_bytes[0] >= (8 * llc_bytes(&m)).min(m.nodes[0].memory_bytes / 4));
    for (row, node) in m.nodes.iter().enumerate() {
        if node.cpus.is_empty() {
            continue;
        }
        for col in 0..n {
            let lat = r.latency_ns[row][col];
            let bw = r.bandwidth_mbps[row][col];
            // A chase over gigabytes of 4 KiB pages misses the TLB on nearly every load; in a VM
            // each miss is a two-dimensional page walk, which measures 450-550 ns on a KVM guest
            // whose 8 x LLC buffer is 3.8 GiB. Bare-metal DRAM is 60-150 ns.
            assert!((50.0..=1000.0).contains(&lat), "latency {lat} ns");
            assert!(bw > 1000.0, "bandwidth {bw} MB/s");
        }
    }
}

#[test]
fn small_buffer_quick_run_has_the_shape() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut m = host();
    let opts = MeasureOptions {
        buffer_bytes: Some(4 << 20),
        latency_loads: 20_000,
        bandwidth_passes: 1,
        repeats: 3,
        ..MeasureOptions::default()
    };
    let mut events: Vec<Progress> = Vec::new();
    let r = measure(&m, &opts, &mut |p| events.push(p)).unwrap();
    let n = m.nodes.len();
    let cpu_nodes = m.cpu_nodes().count();
    assert_eq!(r.nodes, m.nodes.iter().map(|n| n.id).collect::<Vec<_>>());
    for matrix in [&r.latency_ns, &r.bandwidth_mbps] {
        assert_eq!(matrix.len(), n);
        assert!(matrix.iter().all(|row| row.len() == n));
    }
    assert_eq!(r.buffer_bytes, vec![4 << 20; n]);
    assert_eq!(r.repeats, 3);
    for (row, node) in m.nodes.iter().enumerate() {
        assert_eq!(r.threads[row], node.cpus.len());
        for col in 0..n {
            let (lat, bw) = (r.latency_ns[row][col], r.bandwidth_mbps[row][col]);
            if node.cpus.is_empty() {
                assert_eq!((lat, bw), (0.0, 0.0));
            } else {
                assert!(lat > 0.0 && bw > 0.0, "[{row}][{col}]: {lat} ns, {bw} MB/s");
                let s = r.latency_spread_ns[row][col];
                assert!(s.min <= lat && lat <= s.max);
                let s = r.bandwidth_spread_mbps[row][col];
                assert!(s.min <= bw && bw <= s.max);
            }
        }
    }
    // A 4 MiB buffer is inside this host's last-level cache: the result says so.
    if llc_bytes(&m) >= 1 << 20 {
        assert!(
            r.notes.iter().any(|n| n.contains("last-level cache")),
            "{:?}",
            r.notes
        );
    }
    // Progress: every cell starts then finishes, in order, and the count reaches the total.
    let total = 2 * cpu_nodes * n;
    assert_eq!(events.len(), 2 * total);
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.total, total);
        assert_eq!(e.finished, i % 2 == 1);
        assert_eq!(e.done, i.div_ceil(2));
        let kind = if (i / 2) % 2 == 0 {
            CellKind::Latency
        } else {
            CellKind::Bandwidth
        };
        assert_eq!(e.kind, kind);
    }
    assert!(events[0]
        .to_string()
        .contains("latency from the cpus of node"));
    // Stored into the machine, the matrices validate.
    r.apply_to(&mut m);
    assert_eq!(m.latency_ns.as_ref(), Some(&r.latency_ns));
    assert_eq!(m.bandwidth_mbps.as_ref(), Some(&r.bandwidth_mbps));
    assert_eq!(validate::problems(&m), vec![]);
}

#[test]
fn restores_the_callers_affinity() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let m = host();
    let get = || {
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
        assert_eq!(rc, 0);
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .collect::<Vec<_>>()
    };
    let before = get();
    let opts = MeasureOptions {
        buffer_bytes: Some(1 << 20),
        latency_loads: 1000,
        bandwidth_passes: 1,
        repeats: 1,
        ..MeasureOptions::default()
    };
    measure(&m, &opts, &mut |_| {}).unwrap();
    assert_eq!(get(), before);
    // Also when it fails (on a node that does not exist here, after pinning for node 0's cells).
    let mut bad = m.clone();
    bad.nodes.push(Node {
        id: 63,
        memory_bytes: 1 << 30,
        cpus: CpuSet::new(),
    });
    assert!(measure(&bad, &opts, &mut |_| {}).is_err());
    assert_eq!(get(), before);
}

#[test]
fn bad_options_give_clear_errors() {
    let m = host();
    let run = |opts: MeasureOptions| match measure(&m, &opts, &mut |_| {}) {
        Err(e @ MachineError::Measure(_)) => e.to_string(),
        other => panic!("expected a measurement error, got {other:?}"),
    };
    let e = run(MeasureOptions {
        buffer_bytes: Some(0),
        ..MeasureOptions::default()
    });
    assert!(e.contains("buffer size 0 bytes is too small"), "{e}");
    assert!(e.contains("at least 4096 bytes"), "{e}");
    let e = run(MeasureOptions {
        repeats: 0,
        ..MeasureOptions::default()
    });
    assert!(e.contains("repeats is 0"), "{e}");
    let e = run(MeasureOptions {
        latency_loads: 0,
        ..MeasureOptions::default()
    });
    assert!(e.contains("latency loads"), "{e}");
    let e = run(MeasureOptions {
        bandwidth_threads: Some(0),
        ..MeasureOptions::default()
    });
    assert!(e.contains("bandwidth threads per node is 0"), "{e}");
    let e = run(MeasureOptions {
        bandwidth_threads: Some(m.pu_count() + 1),
        ..MeasureOptions::default()
    });
    assert!(e.contains("has only"), "{e}");
}

#[test]
fn unknown_memory_node_names_node_and_remedy() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut m = host();
    m.nodes.push(Node {
        id: 63,
        memory_bytes: 1 << 30,
        cpus: CpuSet::new(),
    });
    let opts = MeasureOptions {
        buffer_bytes: Some(1 << 20),
        latency_loads: 1000,
        repeats: 1,
        ..MeasureOptions::default()
    };
    let e = measure(&m, &opts, &mut |_| {}).unwrap_err().to_string();
    assert!(e.contains("node 63") && e.contains("mbind"), "{e}");
    assert!(e.contains("cpuset"), "{e}");
}

#[test]
fn buffer_larger_than_memory_is_refused_before_touching_it() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let m = host();
    // 1 PiB: refused by the check of the node's available memory (or, without it, by mmap).
    let opts = MeasureOptions {
        buffer_bytes: Some(1 << 50),
        ..MeasureOptions::default()
    };
    let t = Instant::now();
    let e = measure(&m, &opts, &mut |_| {}).unwrap_err().to_string();
    assert!(e.contains(&format!("node {}", m.nodes[0].id)), "{e}");
    assert!(e.contains("try a smaller --buffer"), "{e}");
    assert!(
        t.elapsed().as_secs() < 2,
        "refused only after {:?}",
        t.elapsed()
    );
}
