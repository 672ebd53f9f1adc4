//! Discovery through hwloc (XML fixtures, synthetic topologies, this machine) and through sysfs
//! (fixture trees, this machine). Fixtures: tests/fixtures, made by make-hwloc-xml.sh and
//! make-sysfs.py (their outputs are committed).

// The helpers below are test code too: a broken fixture should panic there (allow-unwrap-in-tests
// only covers #[test] functions).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use numaff_machine::{sysfs, Coherence, CpuSet, Machine, MachineError};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn set(list: &str) -> CpuSet {
    CpuSet::parse(list).unwrap()
}

/// (level, kind suffix, size, cpus) of every cache, in the model's order.
fn caches(m: &Machine) -> Vec<(u8, &'static str, u64, String)> {
    m.caches
        .iter()
        .map(|c| (c.level, c.kind.suffix(), c.size_bytes, c.cpus.to_string()))
        .collect()
}

fn count(m: &Machine, level: u8, suffix: &str, size: u64) -> usize {
    m.caches
        .iter()
        .filter(|c| c.level == level && c.kind.suffix() == suffix && c.size_bytes == size)
        .count()
}

fn node_cpus(m: &Machine) -> Vec<String> {
    m.nodes.iter().map(|n| n.cpus.to_string()).collect()
}

fn core_pus(m: &Machine) -> Vec<String> {
    m.cores().map(|(_, c)| c.pus.to_string()).collect()
}

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// The 2-node shape of hwloc-2node.xml and sysfs-2node.
fn check_2node_shape(m: &Machine) {
    let s = m.summary();
    assert_eq!((s.nodes, s.packages, s.cores, s.pus), (2, 2, 8, 16));
    assert_eq!(node_cpus(m), ["0-7", "8-15"]);
    assert!(m.nodes.iter().all(|n| n.memory_bytes == 4 * GIB));
    assert_eq!(m.packages.iter().map(|p| p.id).collect::<Vec<_>>(), [0, 1]);
    assert_eq!(core_pus(m)[..2], ["0-1", "2-3"]);
    assert_eq!(m.caches.len(), 2 + 8 + 8 + 8);
    assert_eq!(count(m, 1, "d", 32 * KIB), 8);
    assert_eq!(count(m, 1, "i", 32 * KIB), 8);
    assert_eq!(count(m, 2, "", MIB), 8);
    assert_eq!(count(m, 3, "", 16 * MIB), 2);
    assert_eq!(
        m.last_level_caches()
            .iter()
            .map(|c| c.cpus.to_string())
            .collect::<Vec<_>>(),
        ["0-7", "8-15"]
    );
    assert!(m
        .caches
        .iter()
        .all(|c| c.line_bytes == 64 && c.associativity.is_none()));
    assert_eq!(m.distances, Some(vec![vec![10, 21], vec![21, 10]]));
    assert_eq!(m.page_size, 4096);
}

/// The 4-node shape of hwloc-4node.xml and sysfs-4node.
fn check_4node_shape(m: &Machine) {
    let s = m.summary();
    assert_eq!((s.nodes, s.packages, s.cores, s.pus), (4, 2, 8, 16));
    assert_eq!(node_cpus(m), ["0-3", "4-7", "8-11", "12-15"]);
    assert!(m.nodes.iter().all(|n| n.memory_bytes == 2 * GIB));
    assert_eq!(m.total_memory(), 8 * GIB);
    assert_eq!(m.package_of_pu(7), Some(0));
    assert_eq!(m.package_of_pu(8), Some(1));
    assert_eq!(m.caches.len(), 8 + 8 + 4);
    assert_eq!(count(m, 1, "d", 32 * KIB), 8);
    assert_eq!(count(m, 2, "", 512 * KIB), 8);
    assert_eq!(count(m, 3, "", 8 * MIB), 4);
    assert_eq!(caches(m)[0], (1, "d", 32 * KIB, "0-1".to_string()));
    assert_eq!(
        m.last_level_caches()
            .iter()
            .map(|c| c.cpus.to_string())
            .collect::<Vec<_>>(),
        node_cpus(m)
    );
    assert_eq!(
        m.distances,
        Some(vec![
            vec![10, 12, 20, 22],
            vec![12, 10, 22, 20],
            vec![20, 22, 10, 12],
            vec![22, 20, 12, 10],
        ])
    );
    assert_eq!(m.distance(1, 2), Some(22));
    assert_eq!(m.frequency_mhz, Some(3000.0));
    // Both fixtures name the vendor AuthenticAMD (cpuid, as hwloc and /proc/cpuinfo give it).
    assert_eq!(m.coherence, Some(Coherence::Moesi));
}

#[test]
fn sysfs_reads_the_2node_fixture() {
    let m = sysfs::discover_from(&fixture("sysfs-2node")).unwrap();
    check_2node_shape(&m);
    assert_eq!(m.name, "sysfs-2node");
    assert!(m.source.as_deref().unwrap().starts_with("sysfs at "));
    assert_eq!(m.frequency_mhz, None);
    assert_eq!(m.coherence, None, "no proc/cpuinfo");
    assert!(m.assumptions.is_empty(), "{:?}", m.assumptions);
}

/// The coherence protocol follows /proc/cpuinfo's vendor_id: MOESI for AMD, MESIF for Intel,
/// nothing for a vendor numaff does not know.
#[test]
fn sysfs_coherence_follows_the_cpu_vendor() {
    for (vendor, expected) in [
        ("GenuineIntel", Some(Coherence::Mesif)),
        ("AuthenticAMD", Some(Coherence::Moesi)),
        ("HygonGenuine", Some(Coherence::Moesi)),
        ("CentaurHauls", None),
    ] {
        let dir = copy_tree("sysfs-2node");
        let info = format!("processor\t: 0\nvendor_id\t: {vendor}\nmodel name\t: a cpu\n");
        std::fs::write(dir.path().join("proc/cpuinfo"), info).unwrap();
        let m = sysfs::discover_from(dir.path()).unwrap();
        assert_eq!(m.coherence, expected, "{vendor}");
        assert_eq!(m.description.as_deref(), Some("a cpu"));
    }
}

#[test]
fn sysfs_reads_the_4node_fixture() {
    let m = sysfs::discover_from(&fixture("sysfs-4node")).unwrap();
    check_4node_shape(&m);
    assert_eq!(m.latency_ns, None);
}

#[test]
fn sysfs_reads_a_1node_fixture_without_numa_support() {
    let m = sysfs::discover_from(&fixture("sysfs-1node")).unwrap();
    let s = m.summary();
    // cpu 8 is offline: it is left out.
    assert_eq!((s.nodes, s.packages, s.cores, s.pus), (1, 1, 4, 8));
    assert_eq!(m.nodes[0].id, 0);
    assert_eq!(m.nodes[0].cpus, set("0-7"));
    assert_eq!(m.nodes[0].memory_bytes, 16 * GIB);
    // SMT siblings numbered the x86 way, read from thread_siblings_list.
    assert_eq!(core_pus(&m), ["0,4", "1,5", "2,6", "3,7"]);
    assert_eq!(m.caches.len(), 4 + 4 + 4 + 1);
    assert_eq!(count(&m, 1, "d", 48 * KIB), 4);
    assert_eq!(count(&m, 1, "i", 32 * KIB), 4);
    assert_eq!(count(&m, 2, "", 1280 * KIB), 4);
    let l3 = m.last_level_caches();
    assert_eq!(l3.len(), 1);
    assert_eq!(
        (
            l3[0].size_bytes,
            l3[0].associativity,
            l3[0].cpus.to_string()
        ),
        (12 * MIB, Some(12), "0-7".to_string())
    );
    assert_eq!(m.caches[0].associativity, Some(12));
    assert_eq!(m.caches[0].cpus, set("0,4"));
    assert_eq!(m.distances, None);
    assert_eq!(m.frequency_mhz, Some(4700.0));
    assert_eq!(m.numa_factor(), None);
}

/// Copies a fixture tree into a temporary directory, to break it.
fn copy_tree(name: &str) -> tempfile::TempDir {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let target = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                copy(&entry.path(), &target);
            } else {
                std::fs::copy(entry.path(), target).unwrap();
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    copy(&fixture(name), dir.path());
    dir
}

/// Breaks one file of the 2-node tree (None removes it) and returns the error's path and message.
fn broken_2node(file: &str, content: Option<&str>) -> (PathBuf, String) {
    let dir = copy_tree("sysfs-2node");
    let path = dir.path().join(file);
    match content {
        Some(text) => std::fs::write(&path, text).unwrap(),
        None => std::fs::remove_file(&path).unwrap(),
    }
    let err = sysfs::discover_from(dir.path()).unwrap_err();
    let message = err.to_string();
    match err {
        MachineError::Sysfs { path: p, .. } => {
            assert_eq!(p, path, "{message}");
            assert!(message.contains(file), "{message}");
            (p, message)
        }
        other => panic!("expected a sysfs error naming {file}, got {other}"),
    }
}

#[test]
fn sysfs_errors_name_the_file_and_the_problem() {
    let cpu = "sys/devices/system/cpu";
    let node = "sys/devices/system/node";
    let (_, m) = broken_2node(&format!("{cpu}/online"), None);
    assert!(m.contains("missing"), "{m}");
    let (_, m) = broken_2node(&format!("{cpu}/online"), Some("0-3,,5\n"));
    assert!(m.contains("empty element"), "{m}");
    let (_, m) = broken_2node(
        &format!("{cpu}/cpu3/topology/physical_package_id"),
        Some("x\n"),
    );
    assert!(m.contains("\"x\" is not a package id"), "{m}");
    let (_, m) = broken_2node(&format!("{cpu}/cpu5/topology/core_cpus_list"), None);
    assert!(m.contains("thread_siblings_list"), "{m}");
    let (_, m) = broken_2node(&format!("{cpu}/cpu2/cache/index3/size"), Some("lots\n"));
    assert!(m.contains("\"lots\" is not a size"), "{m}");
    let (_, m) = broken_2node(&format!("{cpu}/cpu2/cache/index0/level"), Some("one\n"));
    assert!(m.contains("not a number"), "{m}");
    let (_, m) = broken_2node(&format!("{node}/node1/distance"), Some("21 10 30\n"));
    assert!(m.contains("3 distances for 2 nodes"), "{m}");
    let (_, m) = broken_2node(
        &format!("{node}/node1/meminfo"),
        Some("Node 1 MemFree: 5 kB\n"),
    );
    assert!(m.contains("no MemTotal"), "{m}");
    let (_, m) = broken_2node(&format!("{node}/node0/cpulist"), None);
    assert!(m.contains("missing"), "{m}");
}

#[test]
fn sysfs_inconsistent_tree_is_invalid_not_a_panic() {
    // cpu 3 claimed by both nodes: the model's validation names the field.
    let dir = copy_tree("sysfs-2node");
    std::fs::write(
        dir.path().join("sys/devices/system/node/node1/cpulist"),
        "3,8-15\n",
    )
    .unwrap();
    let err = sysfs::discover_from(dir.path()).unwrap_err();
    assert!(
        err.problems().iter().any(|p| p.field == "node[1].cpus"),
        "{err}"
    );
}

#[test]
fn sysfs_discovers_this_machine() {
    let m = sysfs::discover().unwrap();
    numaff_machine::file::check(&m, "this machine").unwrap();
    let online =
        CpuSet::parse(&std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap()).unwrap();
    assert_eq!(m.pus(), online);
    assert_eq!(m.source.as_deref(), Some("sysfs"));
    assert!(m.page_size.is_power_of_two());
    assert!(!m.nodes.is_empty() && m.total_memory() > 0);
}

/// PUs of this machine as `nproc` counts them (this process' affinity), and the online cpus.
fn host_pus() -> (usize, usize) {
    let nproc = std::process::Command::new("nproc")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().unwrap().get());
    let online =
        CpuSet::parse(&std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap()).unwrap();
    (nproc, online.len())
}

#[test]
fn discover_host_finds_every_pu() {
    let m = numaff_machine::discover_host().unwrap();
    numaff_machine::file::check(&m, "this machine").unwrap();
    let (nproc, online) = host_pus();
    // The model is the whole machine: it counts the online cpus. nproc counts the cpus this process
    // may use, the same number unless the test runs in a restricted cpuset.
    assert_eq!(m.pu_count(), online);
    if nproc == online {
        assert_eq!(m.pu_count(), nproc);
    }
    let source = m.source.as_deref().unwrap();
    if cfg!(feature = "hwloc") {
        assert!(source.starts_with("hwloc "), "{source}");
    } else {
        assert_eq!(source, "sysfs");
    }
    assert!(!m.name.is_empty());
    assert!(m.page_size.is_power_of_two());
}

#[cfg(feature = "hwloc")]
mod hwloc {
    use super::*;
    use numaff_machine::hwloc;

    fn xml(name: &str) -> Machine {
        hwloc::from_xml_file(&fixture(name)).unwrap()
    }

    #[test]
    fn hwloc_reads_the_2node_xml() {
        let m = xml("hwloc-2node.xml");
        check_2node_shape(&m);
        assert_eq!(m.name, "hwloc-2node");
        let source = m.source.as_deref().unwrap();
        assert!(
            source.contains("hwloc-2node.xml") && source.contains("hwloc 2."),
            "{source}"
        );
        assert_eq!(
            (m.latency_ns.as_ref(), m.bandwidth_mbps.as_ref()),
            (None, None)
        );
        assert_eq!(m.frequency_mhz, None);
        assert!(m.assumptions.is_empty(), "{:?}", m.assumptions);
        let f = m.numa_factor().unwrap();
        assert!((f.max - 2.1).abs() < 1e-9);
    }

    #[test]
    fn hwloc_memattr_xml_gives_latency_and_bandwidth() {
        let m = xml("hwloc-2node-memattr.xml");
        check_2node_shape(&m);
        // Row = node of the initiator, column = node of the memory. The fixture gives initiators as
        // a node cpuset, as a PU (pu:8 for node 1) and as a package (package 1 for node 1).
        assert_eq!(
            m.latency_ns,
            Some(vec![vec![90.0, 140.0], vec![145.0, 92.0]])
        );
        // hwloc's MiB/s in MB/s.
        let bw = m.bandwidth_mbps.clone().unwrap();
        let expected = [[20000.0, 10000.0], [10500.0, 19000.0]];
        for r in 0..2 {
            for c in 0..2 {
                assert!(
                    (bw[r][c] - expected[r][c] * 1.048576).abs() < 1e-6,
                    "{bw:?}"
                );
            }
        }
        assert!((bw[0][0] - 20971.52).abs() < 1e-6);
        let f = m.numa_factor().unwrap();
        assert_eq!(f.source, numaff_machine::FactorSource::Latency);
        assert!((f.min - 140.0 / 90.0).abs() < 1e-9 && (f.max - 145.0 / 92.0).abs() < 1e-9);
    }

    /// hwloc's CPUVendor gives the protocol when every package names the same vendor.
    #[test]
    fn hwloc_coherence_follows_the_packages_vendor() {
        let text = std::fs::read_to_string(fixture("hwloc-4node.xml")).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let load = |xml: String| {
            let path = dir.path().join("m.xml");
            std::fs::write(&path, xml).unwrap();
            hwloc::from_xml_file(&path).unwrap().coherence
        };
        assert_eq!(load(text.clone()), Some(Coherence::Moesi));
        assert_eq!(
            load(text.replace("AuthenticAMD", "GenuineIntel")),
            Some(Coherence::Mesif)
        );
        assert_eq!(load(text.replacen("AuthenticAMD", "GenuineIntel", 1)), None);
        assert_eq!(xml("hwloc-2node.xml").coherence, None);
    }

    #[test]
    fn hwloc_reads_the_4node_xml() {
        let m = xml("hwloc-4node.xml");
        check_4node_shape(&m);
        assert_eq!(m.latency_ns, None);
        let f = m.numa_factor().unwrap();
        assert!((f.min - 1.2).abs() < 1e-9 && (f.max - 2.2).abs() < 1e-9);
    }

    #[test]
    fn hwloc_reads_the_8node_xml() {
        let m = xml("hwloc-8node.xml");
        let s = m.summary();
        assert_eq!((s.nodes, s.packages, s.cores, s.pus), (8, 4, 16, 16));
        assert_eq!(
            node_cpus(&m),
            ["0-1", "2-3", "4-5", "6-7", "8-9", "10-11", "12-13", "14-15"]
        );
        assert_eq!(
            m.nodes.iter().map(|n| n.id).collect::<Vec<_>>(),
            (0..8).collect::<Vec<_>>()
        );
        assert!(m.nodes.iter().all(|n| n.memory_bytes == GIB));
        assert!(m.packages.iter().all(|p| p.cores.len() == 4));
        assert!(m.cores().all(|(_, c)| c.pus.len() == 1));
        assert_eq!(m.package_of_pu(5), Some(1));
        assert_eq!(caches(&m).len(), 8);
        assert_eq!(count(&m, 2, "", MIB), 8);
        assert_eq!(caches(&m)[7], (2, "", MIB, "14-15".to_string()));
        assert_eq!(m.distances, None);
        assert_eq!(m.numa_factor(), None);
    }

    /// hwloc and sysfs must give the same model of the same machine. Excluded: `name` (the file
    /// name of each fixture) and `source` (says which discovery ran). Everything else is compared,
    /// page size included (both 4 KiB: the XML's page types, sysfs' default).
    fn same_model(xml_fixture: &str, sysfs_fixture: &str) {
        let mut from_hwloc = xml(xml_fixture);
        let mut from_sysfs = sysfs::discover_from(&fixture(sysfs_fixture)).unwrap();
        for m in [&mut from_hwloc, &mut from_sysfs] {
            m.name = String::new();
            m.source = None;
        }
        assert_eq!(from_hwloc, from_sysfs);
    }

    #[test]
    fn hwloc_and_sysfs_agree_on_2_nodes() {
        same_model("hwloc-2node.xml", "sysfs-2node");
    }

    #[test]
    fn hwloc_and_sysfs_agree_on_4_nodes() {
        same_model("hwloc-4node.xml", "sysfs-4node");
    }

    #[test]
    fn discovered_machines_round_trip_through_machine_files() {
        for name in [
            "hwloc-2node-memattr.xml",
            "hwloc-4node.xml",
            "hwloc-8node.xml",
        ] {
            let m = xml(name);
            let text = numaff_machine::file::to_toml_string(&m).unwrap();
            assert_eq!(numaff_machine::file::from_toml_str(&text, name).unwrap(), m);
        }
    }

    /// Synthetic descriptions that claim more PUs or nodes than the caps are refused from their
    /// counts, before hwloc builds (and numaff converts) a billion objects.
    #[test]
    fn synthetic_descriptions_beyond_the_caps_are_refused_at_once() {
        let start = std::time::Instant::now();
        let e = hwloc::from_synthetic("numa:1000000000 pu:1")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("1000000000 PUs; numaff takes at most 8192"),
            "{e}"
        );
        let e = hwloc::from_synthetic("pack:2 numa:1000(memory=1GiB) pu:1")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("2000 NUMA nodes; numaff takes at most 1024"),
            "{e}"
        );
        // Bare counts are levels too, and hwloc reads "9999x" as 9999 (a fuzzer's "55555" once
        // made hwloc build 55,555 PUs before the cap refused them).
        for desc in ["55555", "2 2 9999", "pack:2 core:9999x pu:1"] {
            let e = hwloc::from_synthetic(desc).unwrap_err().to_string();
            assert!(e.contains("PUs; numaff takes at most 8192"), "{desc}: {e}");
        }
        assert!(start.elapsed() < std::time::Duration::from_secs(2));
        assert_eq!(hwloc::from_synthetic("2 2 2").unwrap().pu_count(), 8);
        assert_eq!(
            hwloc::from_synthetic("pack:2 core:4 pu:2")
                .unwrap()
                .pu_count(),
            16
        );
    }

    /// hwloc reads os_index="-5" as 4294967291: a node or PU index beyond the caps is an error
    /// naming the object.
    #[test]
    fn an_hwloc_os_index_out_of_range_names_the_object() {
        let text = std::fs::read_to_string(fixture("hwloc-2node.xml")).unwrap();
        let node = text.replacen(
            r#"<object type="NUMANode" os_index="0""#,
            r#"<object type="NUMANode" os_index="-5""#,
            1,
        );
        assert_ne!(node, text);
        let e = hwloc::from_xml_str(&node, "neg").unwrap_err().to_string();
        assert!(
            e.contains("neg: NUMANode object number 1 (in document order) has os_index=\"-5\", which is negative")
                && e.contains("from 0 to 1023"),
            "{e}"
        );
        let pu = text.replacen(
            r#"<object type="PU" os_index="0""#,
            r#"<object type="PU" os_index="100000""#,
            1,
        );
        let e = hwloc::from_xml_str(&pu, "big").unwrap_err().to_string();
        assert!(
            e.contains("big: PU object number 1 (in document order) has os_index=\"100000\", which is not below the cap")
                && e.contains("from 0 to 8191"),
            "{e}"
        );
        let mut many = String::from("<topology>");
        for i in 0..2000 {
            many.push_str(&format!(r#"<object type="NUMANode" os_index="{i}"/>"#));
        }
        let e = hwloc::from_xml_str(&many, "many").unwrap_err().to_string();
        assert!(e.contains("more than 1024 NUMANode objects"), "{e}");
    }

    #[test]
    fn from_xml_str_names_the_machine_after_the_origin() {
        let text = std::fs::read_to_string(fixture("hwloc-8node.xml")).unwrap();
        let m = hwloc::from_xml_str(&text, "eight").unwrap();
        assert_eq!(m.name, "eight");
        assert_eq!(m.pu_count(), 16);
    }

    #[test]
    fn hwloc_synthetic_pack4_core8_pu2_builds_the_tree() {
        let m = hwloc::from_synthetic("pack:4 core:8 pu:2").unwrap();
        assert_eq!(m.pu_count(), 64);
        assert_eq!(m.core_count(), 32);
        assert_eq!(m.packages.len(), 4);
        // hwloc adds one NUMA node when the description has none.
        assert_eq!(m.nodes.len(), 1);
        assert_eq!(m.nodes[0].cpus, set("0-63"));
        assert_eq!(m.name, "pack:4 core:8 pu:2");
        assert!(m.source.as_deref().unwrap().contains("synthetic"));
    }

    #[test]
    fn hwloc_synthetic_with_attributes_keeps_them() {
        let m = hwloc::from_synthetic("pack:2 numa:2(memory=3GiB) l3:1(size=12MiB) core:3 pu:1")
            .unwrap();
        assert_eq!(m.nodes.len(), 4);
        assert!(m.nodes.iter().all(|n| n.memory_bytes == 3 * GIB));
        assert_eq!(count(&m, 3, "", 12 * MIB), 4);
    }

    #[test]
    fn memory_only_nodes_get_no_cpus() {
        // KNL-like: each package has a DRAM node and a small second node (MCDRAM) with the same
        // locality. hwloc gives both the package's cpuset; the kernel lists the cpus under one.
        let m = hwloc::from_synthetic("pack:2 [numa(memory=4GiB)] [numa(memory=1GiB)] core:2 pu:1")
            .unwrap();
        assert_eq!(node_cpus(&m), ["0-1", "", "2-3", ""]);
        assert_eq!(m.nodes[1].memory_bytes, GIB);
        assert_eq!(m.cpu_nodes().count(), 2);
        assert_eq!(m.assumptions.len(), 2, "{:?}", m.assumptions);
        assert!(m.assumptions[0].contains("memory-only"));
    }

    #[test]
    fn bad_synthetic_descriptions_give_clear_errors() {
        for (desc, hint) in [
            ("pack:4 core:x pu:2", "\"core:x\" has no number"),
            ("", "empty"),
            ("pack:2 pu:2 core:2", "not PUs"),
            ("pack:2 numa:1(memory=1GiB core:2 pu:1", "parentheses"),
            ("banana:3 pu:2", "pu:2"),
        ] {
            let err = hwloc::from_synthetic(desc).unwrap_err();
            let message = err.to_string();
            assert!(
                matches!(err, MachineError::Hwloc { .. }),
                "{desc}: {message}"
            );
            assert!(message.contains(hint), "{desc}: {message}");
            assert!(message.contains("e.g. \"pack:2"), "{desc}: {message}");
        }
    }

    #[test]
    fn bad_xml_gives_clear_errors() {
        let err = hwloc::from_xml_str("<topology>", "broken.xml").unwrap_err();
        let message = err.to_string();
        assert!(matches!(err, MachineError::Hwloc { .. }), "{message}");
        assert!(
            message.contains("broken.xml") && message.contains("lstopo"),
            "{message}"
        );
        let err = hwloc::from_xml_file(Path::new("/nonexistent/topo.xml")).unwrap_err();
        assert!(matches!(err, MachineError::Io { .. }), "{err}");
        assert!(err.to_string().contains("/nonexistent/topo.xml"));
    }

    #[test]
    fn hwloc_discovers_this_machine_like_sysfs() {
        let from_hwloc = hwloc::discover().unwrap();
        let from_sysfs = sysfs::discover().unwrap();
        assert!(from_hwloc
            .source
            .as_deref()
            .unwrap()
            .starts_with("hwloc 2."));
        // Counts and sets the kernel gives both; caches and memory may differ in detail (hwloc
        // fixes some firmware quirks), so they are not compared here.
        assert_eq!(from_hwloc.pus(), from_sysfs.pus());
        assert_eq!(node_cpus(&from_hwloc), node_cpus(&from_sysfs));
        assert_eq!(core_pus(&from_hwloc), core_pus(&from_sysfs));
        assert_eq!(from_hwloc.distances, from_sysfs.distances);
        assert_eq!(from_hwloc.page_size, from_sysfs.page_size);
    }
}
