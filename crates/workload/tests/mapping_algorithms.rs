//! The mapping algorithms as thread placements of a simulated run, on the workload's own
//! communication matrix (kMAF's sharing detection over its access streams), mapping files, and
//! kMAF's Oracle data mapping.

#![allow(clippy::unwrap_used)]

mod common;

use common::sp;
use numaff_machine::catalog as machines;
use numaff_policy::mapping::MappingFile;
use numaff_workload::{
    comm_matrix, oracle_kmaf, placement, Algorithm, PageProfile, ThreadPolicy, WorkloadError,
};

/// nas-sp (each thread sweeps its share and reads the facing halos of both neighbours, the first
/// and last thread being neighbours too) with 8 threads.
fn sp8() -> numaff_workload::Workload {
    sp().with_threads(8)
}

/// Whether threads `t` and `u` of 8 are neighbours on nas-sp's ring.
fn ring_neighbours(t: usize, u: usize) -> bool {
    let d = t.abs_diff(u);
    d == 1 || d == 7
}

#[test]
fn comm_matrix_of_a_nearest_neighbour_workload_is_heaviest_next_to_the_diagonal() {
    let w = sp8();
    let c = comm_matrix(&w).unwrap();
    assert_eq!(c.len(), 8);
    for t in 0..8 {
        let row: Vec<f64> = (0..8).map(|u| c.get(t, u)).collect();
        println!("{t}: {row:?}");
    }
    for t in 0..8 {
        assert_eq!(c.get(t, t), 0.0, "no sharing with oneself");
        let (best, most) = (0..8)
            .filter(|&u| u != t)
            .map(|u| (u, c.get(t, u)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap();
        assert!(most > 0.0, "thread {t} shares with someone");
        assert!(
            ring_neighbours(t, best),
            "thread {t} shares most with thread {best}, not a neighbour"
        );
        let next = c.get(t, (t + 7) % 8).min(c.get(t, (t + 1) % 8));
        for u in 0..8 {
            assert_eq!(c.get(t, u), c.get(u, t), "symmetric at ({t},{u})");
            if u != t && !ring_neighbours(t, u) {
                assert!(
                    c.get(t, u) < next,
                    "({t},{u}) = {} is not below the neighbours' {next}",
                    c.get(t, u)
                );
            }
        }
    }
}

#[test]
fn different_programs_never_share() {
    let mut w = sp().with_threads(2);
    let mut second = w.programs[0].clone();
    second.name = Some("sp-again".into());
    w.programs.push(second);
    let c = comm_matrix(&w).unwrap();
    assert_eq!(c.len(), 4);
    assert!(
        c.get(0, 1) > 0.0 && c.get(2, 3) > 0.0,
        "each program shares"
    );
    for (t, u) in [(0, 2), (0, 3), (1, 2), (1, 3)] {
        assert_eq!(c.get(t, u), 0.0, "threads {t} and {u} are of two programs");
    }
}

#[test]
fn eagermap_puts_neighbouring_threads_on_one_node() {
    let m = machines::load("kmaf-sim-4x2").unwrap(); // 4 nodes of 2 PUs
    let w = sp8();
    let cpus = placement(&m, &w, &"eagermap".parse().unwrap(), 0).unwrap()[0].clone();
    let node = |t: usize| m.node_of_pu(cpus[t]).unwrap();
    println!("eagermap: {cpus:?}");
    for t in 0..8 {
        let mate = (0..8).find(|&u| u != t && node(u) == node(t)).unwrap();
        assert!(
            ring_neighbours(t, mate),
            "thread {t} shares node {} with thread {mate}, not a neighbour: {cpus:?}",
            node(t)
        );
    }
}

#[test]
fn every_algorithm_name_gives_a_valid_placement_or_names_what_is_missing() {
    let m = machines::load("kmaf-sim-4x2").unwrap();
    let w = sp8();
    let pus = m.pus();
    for name in Algorithm::NAMES {
        match name.parse::<ThreadPolicy>() {
            Ok(policy) => {
                assert_eq!(policy, ThreadPolicy::Map(name.parse().unwrap()));
                let cpus = placement(&m, &w, &policy, 3).unwrap()[0].clone();
                assert_eq!(cpus.len(), 8, "{name}");
                assert!(cpus.iter().all(|&c| pus.contains(c)), "{name}: {cpus:?}");
                let mut distinct = cpus.clone();
                distinct.sort();
                distinct.dedup();
                assert_eq!(distinct.len(), 8, "{name}: distinct PUs, {cpus:?}");
            }
            Err(e) => {
                assert!(
                    matches!(e, WorkloadError::NeedsRunMetrics(_)),
                    "{name}: {e}"
                );
                assert!(["cimar", "nimar"].contains(&name), "{name}: {e}");
                let text = e.to_string();
                assert!(text.contains(name) && text.contains("3DyRM"), "{text}");
                // Built directly, it is refused the same way.
                let direct = ThreadPolicy::Map(name.parse().unwrap());
                let e = placement(&m, &w, &direct, 0).unwrap_err();
                assert!(matches!(e, WorkloadError::NeedsRunMetrics(_)), "{e}");
            }
        }
    }
    let e = "treematchx"
        .parse::<ThreadPolicy>()
        .unwrap_err()
        .to_string();
    assert!(e.contains("eagermap") && e.contains("map:FILE"), "{e}");
}

#[test]
fn a_mapping_file_places_threads_as_written() {
    let m = machines::load("kmaf-sim-4x2").unwrap();
    let w = sp8();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hand.toml");
    let written = vec![7, 0, 6, 1, 5, 2, 4, 3];
    MappingFile::new("hand", &m, written.clone())
        .save(&path)
        .unwrap();
    let policy: ThreadPolicy = format!("map:{}", path.display()).parse().unwrap();
    assert_eq!(placement(&m, &w, &policy, 0).unwrap()[0], written);
}

#[test]
fn a_bad_mapping_file_gives_a_clear_error() {
    let m = machines::load("kmaf-sim-4x2").unwrap();
    let w = sp8();
    let dir = tempfile::tempdir().unwrap();
    // Fewer tasks than the workload's threads.
    let short = dir.path().join("short.toml");
    MappingFile::new("hand", &m, vec![0, 1, 2])
        .save(&short)
        .unwrap();
    let policy: ThreadPolicy = format!("map:{}", short.display()).parse().unwrap();
    let e = placement(&m, &w, &policy, 0).unwrap_err().to_string();
    assert!(
        e.contains("3 tasks") && e.contains("8 threads") && e.contains("short.toml"),
        "{e}"
    );
    // A PU the machine does not have.
    let far = dir.path().join("far.toml");
    MappingFile::new("hand", &m, vec![0, 1, 2, 3, 4, 5, 6, 99])
        .save(&far)
        .unwrap();
    let policy: ThreadPolicy = format!("map:{}", far.display()).parse().unwrap();
    let e = placement(&m, &w, &policy, 0).unwrap_err().to_string();
    assert!(e.contains("cpu 99") && e.contains("kmaf-sim-4x2"), "{e}");
    // Not a mapping file, or none at all.
    let junk = dir.path().join("junk.toml");
    std::fs::write(&junk, "placement = \"everywhere\"\n").unwrap();
    let e = format!("map:{}", junk.display())
        .parse::<ThreadPolicy>()
        .unwrap_err()
        .to_string();
    assert!(e.contains("junk.toml"), "{e}");
    let e = format!("map:{}", dir.path().join("none.toml").display())
        .parse::<ThreadPolicy>()
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot read mapping file"), "{e}");
    let e = "map:".parse::<ThreadPolicy>().unwrap_err().to_string();
    assert!(e.contains("map:FILE"), "{e}");
}

#[test]
fn oracle_sends_an_exclusive_page_to_its_node_and_interleaves_shared_pages() {
    let m = machines::load("kmaf-sim-4x2").unwrap(); // nodes 0-3, all with memory
    let profile = PageProfile::from_rows(
        4,
        [
            (100, vec![0, 0, 90, 10]),   // exclusivity 0.9 > min_Loc (80 %): node 2
            (101, vec![1, 0, 0, 0]),     // one access: exclusive, node 0
            (102, vec![0, 0, 50, 50]),   // shared: 102 mod 4 = node 2
            (103, vec![0, 80, 20, 0]),   // exactly 80 % is not above min_Loc: 103 mod 4 = 3
            (205, vec![30, 30, 30, 10]), // shared: 205 mod 4 = 1
            (206, vec![5, 95, 0, 0]),    // node 1
        ],
    );
    let placed = oracle_kmaf(&m, &profile);
    let got: Vec<(u64, u32)> = placed.into_iter().collect();
    assert_eq!(
        got,
        vec![(100, 2), (101, 0), (102, 2), (103, 3), (205, 1), (206, 1)]
    );
}

#[test]
fn oracle_data_keeps_nearest_neighbour_pages_local() {
    use common::{remote_share, sim};
    use numaff_workload::DataChoice;
    let w = sp8();
    let oracle = sim(&w, "eagermap", DataChoice::Oracle);
    let interleave = sim(&w, "eagermap", DataChoice::Interleave);
    println!(
        "remote: oracle {:.3}, interleave {:.3}",
        remote_share(&oracle),
        remote_share(&interleave)
    );
    assert!(remote_share(&oracle) < 0.5 * remote_share(&interleave));
}
