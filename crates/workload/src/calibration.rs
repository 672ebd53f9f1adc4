//! The simulator held against the papers' published results: kMAF §6's suite gains over the OS
//! baseline, its Fig. 1 and DeLoc's mappings, computed here, asserted by `tests/calibration.rs`.

use numaff_machine::Machine;
use numaff_sim::Report;

use crate::{catalog, kernels, run, DataChoice, RunOptions, ThreadPolicy, Workload, WorkloadError};

/// kMAF's suite (000 §5.2): the NAS-OMP and PARSEC programs, as the catalog has them.
pub const KMAF_SUITE: [&str; 17] = [
    "nas-bt",
    "nas-cg",
    "nas-dc",
    "nas-ep",
    "nas-ft",
    "nas-is",
    "nas-lu",
    "nas-mg",
    "nas-sp",
    "nas-ua",
    "parsec-canneal",
    "parsec-dedup",
    "parsec-facesim",
    "parsec-ferret",
    "parsec-fluidanimate",
    "parsec-streamcluster",
    "parsec-x264",
];

/// A machine of kMAF §6 with its published geometric-mean gains over the OS, in percent.
#[derive(Debug, Clone, Copy)]
pub struct SuitePublished {
    /// The catalog machine.
    pub machine: &'static str,
    /// Threads per program: the machine's PUs (000 §5.2).
    pub threads: u32,
    /// Compact threads, first-touch data.
    pub compact: f64,
    /// The oracle: EagerMap threads, exclusive pages local, shared pages interleaved (000 §5.3).
    pub oracle: f64,
    /// Where the figures are.
    pub source: &'static str,
}

/// kMAF §6.1's geometric means over the suite (the text under Figs. 4, 5 and 6).
pub const KMAF_SUITE_PUBLISHED: [SuitePublished; 3] = [
    SuitePublished {
        machine: "kmaf-itanium",
        threads: 8,
        compact: 1.7,
        oracle: 14.3,
        source: "000 §6.1, Fig. 4",
    },
    SuitePublished {
        machine: "kmaf-xeon",
        threads: 64,
        compact: 6.7,
        oracle: 17.7,
        source: "000 §6.1, Fig. 5",
    },
    SuitePublished {
        machine: "kmaf-opteron",
        threads: 64,
        compact: 7.7,
        oracle: 42.0,
        source: "000 §6.1, Fig. 6",
    },
];

/// kMAF Fig. 1 (000 §3.2): SP's gains over T_R D_R, in percent: T_R D_L, T_L D_R, T_L D_L.
pub const KMAF_FIG1_PUBLISHED: [f64; 3] = [31.0, 15.0, 62.0];

/// How many times the machine's last-level caches together a suite run's arrays cover. kMAF ran
/// NAS class B and C and PARSEC's native inputs (000 §5.2: 6.1 GB per program on average, a
/// hundred times the largest machine's 72 MB of L3), so a placement there changes where misses
/// go, not whether the data fits. Arrays about as large as the caches put a run on the edge of
/// LRU's cliff, where moving one neighbour's halo onto another node tips a whole sweep into
/// misses: 4 times the caches keeps every run clear of it at a simulation cost CI can bear.
pub const CACHE_RATIO: f64 = 4.0;

/// The bytes of the machine's last-level caches together.
pub fn llc_bytes(machine: &Machine) -> u64 {
    machine
        .last_level_caches()
        .iter()
        .map(|c| c.size_bytes)
        .fold(0, u64::saturating_add)
}

/// The bytes of the arrays a workload allocates.
pub fn footprint_bytes(w: &Workload) -> u64 {
    w.programs
        .iter()
        .map(|p| kernels::footprint_bytes(p, u64::from(p.threads)))
        .fold(0, u64::saturating_add)
}

/// The factor by which to scale `w` so that its arrays cover `ratio` times the machine's
/// last-level caches: 1 when they already do (or the machine gives no caches).
pub fn cache_exceeding_scale(machine: &Machine, w: &Workload, ratio: f64) -> f64 {
    let (llc, own) = (llc_bytes(machine), footprint_bytes(w));
    if llc == 0 || own == 0 {
        return 1.0;
    }
    (ratio * llc as f64 / own as f64).max(1.0)
}

/// One workload's makespans under the OS baseline (mean over its seeds), Compact and the oracle.
#[derive(Debug, Clone)]
pub struct SuiteRun {
    /// The workload.
    pub workload: String,
    /// The scale its arrays ran at.
    pub scale: f64,
    /// The os placement's makespan, mean over the seeds, ns.
    pub os_ns: f64,
    /// Compact threads, first-touch data, ns.
    pub compact_ns: f64,
    /// EagerMap threads, oracle data, ns.
    pub oracle_ns: f64,
}

impl std::fmt::Display for SuiteRun {
    /// One line: the workload, its scale, the os makespan and the two gains over it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:22} scale {:5.2}  os {:8.3} ms  compact {:+7.1} %  oracle {:+7.1} %",
            self.workload,
            self.scale,
            self.os_ns / 1e6,
            100.0 * (self.os_ns / self.compact_ns - 1.0),
            100.0 * (self.os_ns / self.oracle_ns - 1.0)
        )
    }
}

/// The geometric mean of `speedups` (baseline time over each run's) as a gain in percent.
pub fn geomean_gain(speedups: impl IntoIterator<Item = f64>) -> f64 {
    let (mut sum, mut n) = (0.0, 0usize);
    for s in speedups {
        sum += s.ln();
        n += 1;
    }
    if n == 0 {
        return 0.0;
    }
    100.0 * ((sum / n as f64).exp() - 1.0)
}

/// The suite's geometric-mean gains over the OS baseline: (Compact, oracle), in percent.
pub fn suite_gains(runs: &[SuiteRun]) -> (f64, f64) {
    (
        geomean_gain(runs.iter().map(|r| r.os_ns / r.compact_ns)),
        geomean_gain(runs.iter().map(|r| r.os_ns / r.oracle_ns)),
    )
}

/// How large a [`suite`] run is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SuiteSize {
    /// Runs of the os baseline per workload (its initial placement is random).
    pub os_seeds: u32,
    /// How many times the caches together each workload's arrays cover ([`CACHE_RATIO`]).
    pub cache_ratio: f64,
    /// At most this many iterations of each program's main loop (the catalog's: 4 to 10).
    pub max_iterations: Option<u32>,
}

impl SuiteSize {
    /// The figures of the README's table: five os seeds, the catalog's iterations.
    pub const FULL: SuiteSize = SuiteSize {
        os_seeds: 5,
        cache_ratio: CACHE_RATIO,
        max_iterations: None,
    };
    /// What CI can afford: two os seeds and two iterations (the first warms the caches and the
    /// pages, the second runs in the steady state the figures are about).
    pub const CI: SuiteSize = SuiteSize {
        os_seeds: 2,
        cache_ratio: CACHE_RATIO,
        max_iterations: Some(2),
    };
}

/// Runs kMAF §6's comparison for `workloads` on `machine` with `threads` threads each: the os
/// baseline (first-touch data) over `size.os_seeds` seeds, Compact (first-touch) and the oracle
/// (`--threads eagermap --data oracle`), every workload scaled to `size.cache_ratio` times the
/// caches. Runs `jobs` simulations at once; `done(finished, total)` after each.
pub fn suite(
    machine: &Machine,
    threads: u32,
    workloads: &[&str],
    size: SuiteSize,
    jobs: usize,
    done: &(dyn Fn(usize, usize) + Sync),
) -> Result<Vec<SuiteRun>, WorkloadError> {
    let mut loaded = Vec::new();
    for name in workloads {
        let mut w = catalog::load(name)?.with_threads(threads);
        if let Some(most) = size.max_iterations {
            for p in &mut w.programs {
                p.iterations = p.iterations.min(most.max(1));
                for q in &mut p.then {
                    q.iterations = q.iterations.min(most.max(1));
                }
            }
        }
        let s = cache_exceeding_scale(machine, &w, size.cache_ratio);
        loaded.push((w.scaled(s), s));
    }
    let os_seeds = size.os_seeds;
    let os_seeds = os_seeds.max(1);
    // One job per simulation: os seeds, then compact, then the oracle, per workload.
    let per = os_seeds as usize + 2;
    let total = loaded.len() * per;
    let job = |i: usize| -> Result<f64, WorkloadError> {
        let (w, _) = &loaded[i / per];
        let k = i % per;
        let opts = match k.checked_sub(os_seeds as usize) {
            None => RunOptions {
                threads: ThreadPolicy::Os,
                data: DataChoice::FirstTouch,
                seed: k as u64,
            },
            Some(0) => RunOptions {
                threads: "compact".parse()?,
                data: DataChoice::FirstTouch,
                seed: 0,
            },
            Some(_) => RunOptions {
                threads: "eagermap".parse()?,
                data: "oracle".parse()?,
                seed: 0,
            },
        };
        Ok(run(machine, w, &opts)?.makespan_ns as f64)
    };
    let times = run_jobs(total, jobs, &job, done)?;
    Ok(loaded
        .iter()
        .enumerate()
        .map(|(i, (w, s))| {
            let t = &times[i * per..(i + 1) * per];
            SuiteRun {
                workload: w.name.clone(),
                scale: *s,
                os_ns: t[..os_seeds as usize].iter().sum::<f64>() / f64::from(os_seeds),
                compact_ns: t[os_seeds as usize],
                oracle_ns: t[os_seeds as usize + 1],
            }
        })
        .collect())
}

/// kMAF Fig. 1 (000 §3.1-3.2) with the suite's SP (nas-sp, 8 threads) on `m`, kmaf-sim-4x2: the
/// reports of T_L D_L, T_R D_L, T_L D_R and T_R D_R. T_L = threads in order on the cpus
/// (each thread's neighbour on its processor), T_R = thread i on processor i mod 4 (every
/// neighbour pair on two processors one ring hop apart: kMAF says only that T_R places threads
/// that share data "far apart in the hierarchy"); D_L / D_R = oracle-local / oracle-remote
/// from the profiling replay.
pub fn fig1(m: &Machine, scale: f64, seed: u64) -> Result<[Report; 4], WorkloadError> {
    let w = catalog::load("nas-sp")?.scaled(scale);
    let (tl, tr) = ("0,1,2,3,4,5,6,7", "0,2,4,6,1,3,5,7");
    let cases = [
        (tl, DataChoice::OracleLocal),
        (tr, DataChoice::OracleLocal),
        (tl, DataChoice::OracleRemote),
        (tr, DataChoice::OracleRemote),
    ];
    let [a, b, c, d] = cases.map(|(threads, data)| {
        let opts = RunOptions {
            threads: threads.parse()?,
            data,
            seed,
        };
        run(m, &w, &opts)
    });
    Ok([a?, b?, c?, d?])
}

/// Fig. 1's gains over T_R D_R in percent, in [`KMAF_FIG1_PUBLISHED`]'s order (T_R D_L, T_L D_R,
/// T_L D_L), from [`fig1`]'s makespans.
pub fn fig1_gains(reports: &[Report; 4]) -> [f64; 3] {
    let [ll, rl, lr, rr] = reports.each_ref().map(|r| r.makespan_ns as f64);
    [
        100.0 * (rr / rl - 1.0),
        100.0 * (rr / lr - 1.0),
        100.0 * (rr / ll - 1.0),
    ]
}

/// Runs `job(0..total)` on `jobs` threads; the results in index order, or the first error.
fn run_jobs(
    total: usize,
    jobs: usize,
    job: &(dyn Fn(usize) -> Result<f64, WorkloadError> + Sync),
    done: &(dyn Fn(usize, usize) + Sync),
) -> Result<Vec<f64>, WorkloadError> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let next = AtomicUsize::new(0);
    let finished = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<f64, WorkloadError>>>> =
        Mutex::new((0..total).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, total.max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    break;
                }
                let r = job(i);
                if let Ok(mut all) = results.lock() {
                    all[i] = Some(r);
                }
                done(finished.fetch_add(1, Ordering::Relaxed) + 1, total);
            });
        }
    });
    let all = results
        .into_inner()
        .map_err(|_| WorkloadError::Simulator("a simulation thread panicked".to_string()))?;
    all.into_iter()
        .map(|r| {
            r.unwrap_or_else(|| {
                Err(WorkloadError::Simulator(
                    "a simulation did not run".to_string(),
                ))
            })
        })
        .collect()
}

/// The PARSEC-like workloads of DeLoc's evaluation (002 §3.4, Fig. 3.4): the suite's PARSEC part.
pub const DELOC_PARSEC: &[&str] = KMAF_SUITE.split_at(10).1;

/// The thread mappings DeLoc is compared with (002 §3.4): Locality, Packed, Balance and DeLoc.
pub const DELOC_MAPPINGS: [&str; 4] = ["locality", "packed", "balance", "deloc"];

/// DeLoc's comparison (002 §3.4, Xeon56 with every core busy): per workload, the makespans (ns)
/// of [`DELOC_MAPPINGS`] on `machine` with one thread per PU, each computed from the workload's
/// own communication matrix, first-touch data, arrays scaled by `scale`.
pub fn deloc(
    machine: &Machine,
    workloads: &[&str],
    scale: f64,
    jobs: usize,
) -> Result<Vec<(String, [f64; 4])>, WorkloadError> {
    let threads = u32::try_from(machine.pu_count()).unwrap_or(u32::MAX);
    let mut loaded = Vec::new();
    for name in workloads {
        loaded.push(catalog::load(name)?.with_threads(threads).scaled(scale));
    }
    let job = |i: usize| -> Result<f64, WorkloadError> {
        let opts = RunOptions {
            threads: DELOC_MAPPINGS[i % 4].parse()?,
            data: DataChoice::FirstTouch,
            seed: 0,
        };
        Ok(run(machine, &loaded[i / 4], &opts)?.makespan_ns as f64)
    };
    let times = run_jobs(loaded.len() * 4, jobs, &job, &|_, _| {})?;
    Ok(loaded
        .iter()
        .zip(times.chunks_exact(4))
        .map(|(w, t)| (w.name.clone(), [t[0], t[1], t[2], t[3]]))
        .collect())
}
