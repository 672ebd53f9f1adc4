//! The catalog of the papers' machines against the papers: counts, memory, last-level cache and
//! NUMA factor as printed, the measured matrices of Laso et al., and lossless machine-file round trips.

use numaff_machine::catalog;
use numaff_machine::file::{from_toml_str, to_toml_string};
use numaff_machine::{FactorSource, Machine};

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

/// The NUMA factor as a paper states it.
#[derive(Debug, Clone, Copy)]
enum Paper {
    /// One figure (kMAF Table 1 and Table 4), read as the factor of the farthest node pair.
    Max(f64),
    /// A range "from a to b" (Minas §4): the nearest and the farthest remote node.
    Range(f64, f64),
    /// "more than N x higher" (Laso et al. §5, Server HPL): the mean over remote pairs exceeds N.
    MeanAbove(f64),
    /// "about N x higher" (Laso et al. §5, Server LPL): the mean over remote pairs, within 0.05.
    MeanAbout(f64),
    /// The paper gives none; the file's assumed distances give this farthest-pair factor.
    NotGiven(f64),
}

/// What the papers say of each machine (memory, LLC: per instance).
struct Expect {
    name: &'static str,
    nodes: usize,
    packages: usize,
    cores: usize,
    pus: usize,
    memory: u64,
    llc: u64,
    page_size: u64,
    factor: Paper,
}

const EXPECT: &[Expect] = &[
    // 000 Table 1: 4 x 2-core processors, shared 512 KB L2, NUMA factor 3.
    Expect {
        name: "kmaf-sim-4x2",
        nodes: 4,
        packages: 4,
        cores: 8,
        pus: 8,
        memory: 4 * GIB, // not in the paper: 1 GiB per node assumed
        llc: 512 << 10,
        page_size: 4096,
        factor: Paper::Max(3.0),
    },
    // 000 Table 4: 2 nodes, 4 x 2-core Itanium 2, 8 threads, 4 MB L3, 16 GB, 16 KB pages, 2.1.
    Expect {
        name: "kmaf-itanium",
        nodes: 2,
        packages: 4,
        cores: 8,
        pus: 8,
        memory: 16 * GIB,
        llc: 4 * MIB,
        page_size: 16 << 10,
        factor: Paper::Max(2.1),
    },
    // 000 Table 4: 4 nodes, 4 x 8-core X7550 with SMT (64 threads), 18 MB L3, 128 GB, 1.5.
    Expect {
        name: "kmaf-xeon",
        nodes: 4,
        packages: 4,
        cores: 32,
        pus: 64,
        memory: 128 * GIB,
        llc: 18 * MIB,
        page_size: 4096,
        factor: Paper::Max(1.5),
    },
    // 000 Table 4: 8 nodes, 4 x 8-core Opteron 6386 with SMT (64 threads), 2 x 6 MB L3, 128 GB, 2.8.
    Expect {
        name: "kmaf-opteron",
        nodes: 8,
        packages: 4,
        cores: 32,
        pus: 64,
        memory: 128 * GIB,
        llc: 6 * MIB,
        page_size: 4096,
        factor: Paper::Max(2.8),
    },
    // 001 §5: 4 nodes x 10 cores (40), 25 MB L3, 256 GB, remote latency more than 3x local.
    Expect {
        name: "laso-hpl",
        nodes: 4,
        packages: 4,
        cores: 40,
        pus: 40,
        memory: 256 * GIB,
        llc: 25 * MIB,
        page_size: 4096,
        factor: Paper::MeanAbove(3.0),
    },
    // 001 §5: 4 nodes x 20 cores (80), 27.5 MB L3, 1 TB, remote latency about 1.7x local.
    Expect {
        name: "laso-lpl",
        nodes: 4,
        packages: 4,
        cores: 80,
        pus: 80,
        memory: 1024 * GIB,
        llc: 55 * MIB / 2,
        page_size: 4096,
        factor: Paper::MeanAbout(1.7),
    },
    // 002 §2.4.1: 2 nodes x 28 logical cores (56), 64 GB per node, 35 MB L3.
    Expect {
        name: "agung-xeon56",
        nodes: 2,
        packages: 2,
        cores: 28,
        pus: 56,
        memory: 128 * GIB,
        llc: 35 * MIB,
        page_size: 4096,
        factor: Paper::NotGiven(2.1),
    },
    // 002 §4.4.1: 2 nodes x 16 logical cores (32), 20 MB L3.
    Expect {
        name: "agung-xeon2",
        nodes: 2,
        packages: 2,
        cores: 16,
        pus: 32,
        memory: 64 * GIB, // not in the thesis: 32 GiB per node assumed
        llc: 20 * MIB,
        page_size: 4096,
        factor: Paper::NotGiven(2.1),
    },
    // 002 §4.4.5: KNL in SNC-4, 4 nodes x 72 logical cores (288).
    Expect {
        name: "agung-knl4",
        nodes: 4,
        packages: 1,
        cores: 72,
        pus: 288,
        memory: 96 * GIB, // not in the thesis: 24 GiB per node assumed
        llc: MIB,
        page_size: 4096,
        factor: Paper::NotGiven(2.1),
    },
    // 002 Table 3.1: 4 x 16-core processors, 20 MB L3 shared by 16 cores.
    Expect {
        name: "agung-sim-4x16",
        nodes: 4,
        packages: 4,
        cores: 64,
        pus: 64,
        memory: 256 * GIB, // not in the thesis: 64 GiB per node assumed
        llc: 20 * MIB,
        page_size: 4096,
        factor: Paper::NotGiven(3.1),
    },
    // 004 §4: 8 nodes of 2 cores, 2 MB shared cache and 4 GB per node (32 GB), 1.2 to 1.5.
    Expect {
        name: "minas-opteron",
        nodes: 8,
        packages: 8,
        cores: 16,
        pus: 16,
        memory: 32 * GIB,
        llc: 2 * MIB,
        page_size: 4096,
        factor: Paper::Range(1.2, 1.5),
    },
    // 004 §4: 6 nodes of 2 Itanium 2 (12) with 4 MB cache each, 4 GB per node (24 GB), 1.2 to 1.3.
    Expect {
        name: "minas-altix",
        nodes: 6,
        packages: 12,
        cores: 12,
        pus: 12,
        memory: 24 * GIB,
        llc: 4 * MIB,
        page_size: 16 << 10,
        factor: Paper::Range(1.2, 1.3),
    },
];

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn every_machine_loads_and_validates() {
    assert_eq!(catalog::names().len(), 12);
    for e in catalog::entries() {
        let m = catalog::load(e.name).unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(m.name, e.name);
        let source = m.source.as_deref().unwrap_or_default();
        assert!(
            source.contains(".txt") && source.contains('§'),
            "{}: source must cite paper file and section: {source:?}",
            e.name
        );
        assert!(m.description.is_some(), "{}: no description", e.name);
        assert!(!m.assumptions.is_empty(), "{}: no assumptions", e.name);
        assert!(m.frequency_mhz.is_some(), "{}: no frequency", e.name);
        assert!(!m.caches.is_empty(), "{}: no caches", e.name);
        assert!(m.interconnect.is_some(), "{}: no interconnect", e.name);
    }
    let listing = catalog::list().unwrap();
    assert_eq!(
        listing.iter().map(|l| l.name).collect::<Vec<_>>(),
        catalog::names()
    );
    assert!(listing
        .iter()
        .all(|l| l.source.is_some() && l.summary.numa_factor.is_some()));
}

#[test]
fn round_trip_is_lossless() {
    for e in catalog::entries() {
        let m = e.load().unwrap();
        let text = to_toml_string(&m).unwrap();
        let again = from_toml_str(&text, "round trip").unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(
            m, again,
            "{}: file -> model -> file -> model differs",
            e.name
        );
        assert_eq!(
            to_toml_string(&again).unwrap(),
            text,
            "{}: to_toml_string is not a fixpoint",
            e.name
        );
    }
}

#[test]
fn counts_memory_and_caches_match_the_papers() {
    assert_eq!(
        EXPECT.iter().map(|x| x.name).collect::<Vec<_>>(),
        catalog::names()
    );
    for x in EXPECT {
        let m = catalog::load(x.name).unwrap();
        let s = m.summary();
        let got = (s.nodes, s.packages, s.cores, s.pus);
        assert_eq!(
            got,
            (x.nodes, x.packages, x.cores, x.pus),
            "{}: (nodes, packages, cores, PUs)",
            x.name
        );
        assert_eq!(s.memory_bytes, x.memory, "{}: memory", x.name);
        assert_eq!(m.page_size, x.page_size, "{}: page size", x.name);
        // Nodes are alike on every machine of the papers: same PUs and memory each.
        for n in &m.nodes {
            assert_eq!(n.cpus.len(), x.pus / x.nodes, "{}: node {}", x.name, n.id);
            assert_eq!(n.memory_bytes, x.memory / x.nodes as u64, "{}", x.name);
        }
        let llc = m.last_level_caches();
        assert!(!llc.is_empty(), "{}", x.name);
        for c in llc {
            assert_eq!(c.size_bytes, x.llc, "{}: last-level cache size", x.name);
        }
    }
}

#[test]
fn numa_factor_matches_the_papers() {
    for x in EXPECT {
        let m = catalog::load(x.name).unwrap();
        let f = m.numa_factor().unwrap();
        let ok = match x.factor {
            Paper::Max(v) | Paper::NotGiven(v) => close(f.max, v),
            Paper::Range(lo, hi) => close(f.min, lo) && close(f.max, hi),
            Paper::MeanAbove(v) => f.mean > v,
            Paper::MeanAbout(v) => (f.mean - v).abs() < 0.05,
        };
        assert!(ok, "{}: factor {f:?}, paper says {:?}", x.name, x.factor);
        let want_source = if x.name.starts_with("laso-") {
            FactorSource::Latency
        } else {
            FactorSource::Distances
        };
        assert_eq!(f.source, want_source, "{}", x.name);
    }
    // The single figures with uniform remote nodes are exact everywhere.
    for name in ["kmaf-itanium", "kmaf-xeon"] {
        let f = catalog::load(name).unwrap().numa_factor().unwrap();
        assert!(close(f.min, f.max) && close(f.mean, f.max), "{name}: {f:?}");
    }
    // kMAF's simulated ring: 2 at one hop, 3 at two hops (32 / 64 / 96 cycles).
    let f = catalog::load("kmaf-sim-4x2")
        .unwrap()
        .numa_factor()
        .unwrap();
    assert!(close(f.min, 2.0), "{f:?}");
}

fn matrices(m: &Machine) -> (&Vec<Vec<f64>>, &Vec<Vec<f64>>) {
    match (&m.latency_ns, &m.bandwidth_mbps) {
        (Some(l), Some(b)) => (l, b),
        _ => panic!("{}: latency and bandwidth matrices expected", m.name),
    }
}

/// 1 - mean remote bandwidth / mean local bandwidth.
fn bandwidth_loss(b: &[Vec<f64>]) -> f64 {
    let n = b.len();
    let local: f64 = (0..n).map(|i| b[i][i]).sum::<f64>() / n as f64;
    let remote: f64 = (0..n)
        .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
        .map(|(i, j)| b[i][j])
        .sum::<f64>()
        / (n * (n - 1)) as f64;
    1.0 - remote / local
}

#[test]
fn laso_matrices_are_the_papers_tables() {
    // 001 Table 2 (Server HPL).
    let hpl = catalog::load("laso-hpl").unwrap();
    let (lat, bw) = matrices(&hpl);
    for (r, c, v) in [
        (0, 0, 85.8),
        (0, 2, 271.4),
        (1, 3, 271.5),
        (2, 1, 252.7),
        (3, 1, 271.9),
        (3, 3, 85.7),
    ] {
        assert!(close(lat[r][c], v), "HPL latency[{r}][{c}]");
    }
    for (r, c, v) in [
        (0, 0, 59497.0),
        (0, 1, 12709.0),
        (2, 3, 12689.0),
        (3, 1, 11992.0),
    ] {
        assert!(close(bw[r][c], v), "HPL bandwidth[{r}][{c}]");
    }
    // "its bandwidth is reduced by 79%".
    assert!((bandwidth_loss(bw) - 0.79).abs() < 0.01);
    // The 2-hop pairs 0-2 and 1-3 are the slowest and are not linked directly.
    let ic = hpl.interconnect.as_ref().unwrap();
    assert!(!ic.links.contains(&(0, 2)) && !ic.links.contains(&(1, 3)));
    assert_eq!(hpl.links_per_node(), Some(vec![2, 2, 2, 2]));
    for (r, row) in lat.iter().enumerate() {
        let far = (r + 2) % 4;
        for c in (0..4).filter(|&c| c != r && c != far) {
            assert!(row[far] > row[c], "HPL row {r}");
        }
    }

    // 001 Table 3 (Server LPL).
    let lpl = catalog::load("laso-lpl").unwrap();
    let (lat, bw) = matrices(&lpl);
    for (r, c, v) in [(0, 0, 88.3), (0, 1, 145.1), (2, 0, 139.0), (3, 2, 143.3)] {
        assert!(close(lat[r][c], v), "LPL latency[{r}][{c}]");
    }
    for (r, c, v) in [(1, 3, 17100.0), (2, 2, 76306.0), (3, 0, 17141.0)] {
        assert!(close(bw[r][c], v), "LPL bandwidth[{r}][{c}]");
    }
    // "the bandwidth is decreased by 78% approximately".
    assert!((bandwidth_loss(bw) - 0.78).abs() < 0.01);
    assert_eq!(lpl.links_per_node(), Some(vec![3, 3, 3, 3]));
}

#[test]
fn interconnects_match_the_papers() {
    // 004 §4: three HyperTransport links per node except nodes 0 and 1; two NUMAlink per node.
    let m = catalog::load("minas-opteron").unwrap();
    assert_eq!(m.links_per_node(), Some(vec![2, 2, 3, 3, 3, 3, 3, 3]));
    let m = catalog::load("minas-altix").unwrap();
    assert_eq!(m.links_per_node(), Some(vec![2; 6]));
    // 000 Table 1: bidirectional ring, hop latency 32 cycles at 1.8 GHz.
    let m = catalog::load("kmaf-sim-4x2").unwrap();
    assert_eq!(m.links_per_node(), Some(vec![2; 4]));
    let hop = m.interconnect.as_ref().unwrap().hop_latency_ns.unwrap();
    assert!((hop - 32.0 / 1.8).abs() < 0.01, "{hop}");
    // 002 Table 3.1: five bidirectional links of 25.6 GB/s.
    let m = catalog::load("agung-sim-4x16").unwrap();
    let ic = m.interconnect.as_ref().unwrap();
    assert_eq!(ic.links.len(), 5);
    assert_eq!(ic.link_bandwidth_mbps, Some(25600.0));
}

#[test]
fn smt_numbering_follows_the_kernel() {
    // First threads of all cores first, then their siblings.
    for (name, per_core) in [
        ("kmaf-xeon", 2),
        ("kmaf-opteron", 2),
        ("agung-xeon56", 2),
        ("agung-xeon2", 2),
        ("agung-knl4", 4),
    ] {
        let m = catalog::load(name).unwrap();
        let cores = m.core_count() as u32;
        for (i, (_, core)) in m.cores().enumerate() {
            let want: Vec<u32> = (0..per_core).map(|t| i as u32 + t * cores).collect();
            assert_eq!(core.pus.iter().collect::<Vec<_>>(), want, "{name} core {i}");
        }
    }
}
