//! Side-by-side benchmark of numaff's communication-aware mappings with Scotch's static mapper.
//!
//! For every tree, matrix family and size it builds one communication matrix (also with shuffled
//! thread ids), maps it with numaff's eagermap and locality (through `map()`, tree construction
//! included) and with `scotch_gmap -b0 -Cd` onto the matching `tleaf` architecture (every level
//! link cost 1, so Scotch's leaf distance is our hop distance), scores every placement with ONE
//! evaluator ([`numaff_policy::quality::hop_cost`]) and prints cost ratios to Scotch and times.
//! numaff's times are the thread's cpu time (best of `--runs`), so that other jobs on a shared
//! machine do not inflate them; Scotch's time is its own "Mapping" figure (`-vt`), without
//! process start and graph I/O.
//! With `--stability` it also maps M + 5 % noise and counts the threads that move
//! ([`numaff_policy::quality::moved_threads`], up to tree symmetries), for locality also when
//! it is given the mapping of M as the current placement ([`numaff_policy::hier::locality_from`]).
//! With `--levels` it prints, under each row, the weight Scotch's and locality's placements cut at
//! each tree level and locality's exact cost (where the printed ratios round to 1.000). With
//! `--seeds K`, every shuffled row is also mapped under K other shuffles of the thread ids (one run
//! each, no times) and the spread of locality / Scotch is printed: one shuffle is one sample.
//!
//! Needs Scotch (`apt-get install scotch libscotch-dev`, see scripts/setup.sh); not run by CI.
//! Run on one core:
//!
//! ```text
//! cargo build --release -p numaff-policy --example vs_scotch
//! taskset -c 1 target/release/examples/vs_scotch [--sizes 64,256,1024,4096] [--trees 4x8x2,16x4x8x2,2x12x2]
//!     [--families chain,2d,3d,all,random,clustered,master] [--stability] [--levels] [--seeds K] [--runs 3]
//!     [--digest]   (locality only, no Scotch: exact cost and a hash of each placement)
//!     [--repeat K] (with --digest: K calls per row, the median and the least cpu time)
//! ```

use std::fmt::Write as _;
use std::process::Command;

use numaff_machine::rng::SplitMix64;
use numaff_policy::quality::{hop_cost, moved_threads};
use numaff_policy::{map, Algorithm, CommMatrix, MapInput, Placement, Tree};

mod common;
use common::thread_cpu_ms;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const TREES: [(&str, &str); 3] = [
    ("4x8x2", "pack:4 core:8 pu:2"),
    ("16x4x8x2", "pack:16 l3:4 core:8 pu:2"),
    ("2x12x2", "pack:2 core:12 pu:2"),
];
const FAMILIES: [&str; 7] = ["chain", "2d", "3d", "all", "random", "clustered", "master"];

/// Near-balanced factorisation of `n` into `k` factors (largest first).
fn dims(n: usize, k: usize) -> Vec<usize> {
    if k == 1 {
        return vec![n];
    }
    let target = (n as f64).powf(1.0 / k as f64).round() as usize;
    let mut best: usize = 1;
    for d in 1..=n {
        if (n / d) * d == n && d.abs_diff(target) < best.abs_diff(target) {
            best = d;
        }
    }
    let mut v = dims(n / best, k - 1);
    v.push(best);
    v.sort_unstable_by(|a, b| b.cmp(a));
    v
}

/// Integer-weighted symmetric matrix of a family (`None`: not generated at this size).
fn family(name: &str, n: usize, rng: &mut SplitMix64) -> Option<CommMatrix> {
    let mut c = CommMatrix::new(n);
    match name {
        "chain" => (0..n - 1).for_each(|i| c.add_pair(i, i + 1, 100.0)),
        "2d" | "3d" => {
            let d = dims(n, if name == "2d" { 2 } else { 3 });
            let mut stride = vec![1; d.len()];
            for k in (0..d.len() - 1).rev() {
                stride[k] = stride[k + 1] * d[k + 1];
            }
            for i in 0..n {
                for k in 0..d.len() {
                    if (i / stride[k]) % d[k] + 1 < d[k] {
                        c.add_pair(i, i + stride[k], 100.0);
                    }
                }
            }
        }
        "all" => {
            if n > 1024 {
                return None;
            }
            for i in 0..n {
                for j in i + 1..n {
                    c.add_pair(i, j, 10.0);
                }
            }
        }
        "random" => {
            for i in 0..n {
                for _ in 0..(4 + rng.below(13)) / 2 {
                    let j = rng.below(n);
                    if j != i {
                        c.add_pair(i, j, 1.0 + rng.below(100) as f64);
                    }
                }
            }
        }
        "clustered" => {
            // groups of 5, 7, 11, 3, 13 (no tree arity) exchanging 100 inside, 1-5 with one random task
            let sizes = [5, 7, 11, 3, 13];
            let (mut start, mut g) = (0, 0);
            while start < n {
                let end = (start + sizes[g % sizes.len()]).min(n);
                for i in start..end {
                    for j in i + 1..end {
                        c.add_pair(i, j, 100.0);
                    }
                }
                start = end;
                g += 1;
            }
            for i in 0..n {
                let j = rng.below(n);
                if j != i {
                    c.add_pair(i, j, 1.0 + rng.below(5) as f64);
                }
            }
        }
        "master" => {
            // task 0 exchanges 100 with every worker; workers 10 with the next worker
            for i in 1..n {
                c.add_pair(0, i, 100.0);
                if i + 1 < n {
                    c.add_pair(i, i + 1, 10.0);
                }
            }
        }
        _ => return None,
    }
    Some(c)
}

fn shuffled(c: &CommMatrix, rng: &mut SplitMix64) -> CommMatrix {
    let n = c.len();
    let mut perm: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        perm.swap(i, rng.below(i + 1));
    }
    let mut out = CommMatrix::new(n);
    for i in 0..n {
        for j in 0..n {
            let v = c.get(i, j);
            if v != 0.0 {
                out.set(perm[i], perm[j], v);
            }
        }
    }
    out
}

/// Every non-zero weight times 1 + U(-5 %, +5 %), rounded, symmetric.
fn noisy(c: &CommMatrix, rng: &mut SplitMix64) -> CommMatrix {
    let n = c.len();
    let mut out = CommMatrix::new(n);
    for i in 0..n {
        for j in i + 1..n {
            let v = c.get(i, j);
            if v != 0.0 {
                let f = 1.0 + (rng.below(10_001) as f64 / 10_000.0 - 0.5) * 0.1;
                let w = (v * f).round().max(1.0);
                out.set(i, j, w);
                out.set(j, i, w);
            }
        }
    }
    out
}

/// The tleaf description of a tree whose levels are uniform: arity per level, link cost 1 each.
/// With fewer tasks than PUs, only as many top-level subtrees as the tasks fill (the first ones,
/// as numaff packs a partly used machine): with `-b0` on the whole tree Scotch would spread them.
fn tleaf(tree: &Tree, n: usize) -> Res<String> {
    let mut s = String::new();
    let mut levels = 0;
    for l in 0..tree.depth() {
        let mut a = tree.width(l + 1) / tree.width(l);
        if a * tree.width(l) != tree.width(l + 1) {
            return Err(format!("level {l} of the tree is not uniform").into());
        }
        if l == 0 && n < tree.pu_count() {
            a = n.div_ceil(tree.pu_count() / a).max(1);
        }
        if a > 1 {
            // a top level of one subtree is left out (Scotch refuses it; distances stay those of
            // the subtree)
            let _ = write!(s, " {a} 1");
            levels += 1;
        }
    }
    Ok(format!("tleaf {levels}{s}"))
}

/// Scotch graph file (edge weights only, base 0) of the symmetric pair weights.
fn grf(c: &CommMatrix) -> String {
    let n = c.len();
    let mut rows = Vec::with_capacity(n);
    let mut arcs = 0;
    for i in 0..n {
        let mut row = String::new();
        let mut deg = 0;
        for j in 0..n {
            let w = (c.get(i, j) + c.get(j, i)) / 2.0;
            if i != j && w > 0.0 {
                let _ = write!(row, " {} {j}", w.round().max(1.0) as u64);
                deg += 1;
            }
        }
        arcs += deg;
        rows.push(format!("{deg}{row}"));
    }
    format!("0\n{n} {arcs}\n0 010\n{}\n", rows.join("\n"))
}

/// Runs scotch_gmap; placement and Scotch's own mapping time (ms).
fn scotch(
    tree: &Tree,
    target: &str,
    c: &CommMatrix,
    dir: &std::path::Path,
) -> Res<(Placement, f64)> {
    let (g, t, m) = (dir.join("m.grf"), dir.join("t.tgt"), dir.join("m.map"));
    std::fs::write(&g, grf(c))?;
    std::fs::write(&t, format!("{target}\n"))?;
    let out = Command::new("scotch_gmap")
        .args(["-b0", "-Cd", "-vt"])
        .arg(&g)
        .arg(&t)
        .arg(&m)
        .output()
        .map_err(|e| format!("scotch_gmap: {e} (apt-get install scotch)"))?;
    if !out.status.success() {
        return Err(format!(
            "scotch_gmap failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let log =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let ms = log
        .lines()
        .find_map(|l| l.strip_prefix("T\tMapping\t"))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map_or(f64::NAN, |s| s * 1e3);
    let text = std::fs::read_to_string(&m)?;
    let mut p = vec![0u32; c.len()];
    for line in text.lines().skip(1) {
        let mut it = line.split_whitespace().map(str::parse::<usize>);
        if let (Some(Ok(v)), Some(Ok(part))) = (it.next(), it.next()) {
            p[v] = tree.pu(part);
        }
    }
    Ok((p, ms))
}

/// The weight cut at each tree level, top first: entry `l` sums the pairs whose PUs lie in
/// different vertices of level `l + 1` (the hop cost is the sum of the entries).
fn level_cuts(tree: &Tree, c: &CommMatrix, p: &Placement) -> Vec<f64> {
    let lv: Vec<usize> = p.iter().map(|&pu| tree.leaf_of(pu).unwrap_or(0)).collect();
    let mut cuts = vec![0.0; tree.depth()];
    for i in 0..c.len() {
        for j in i + 1..c.len() {
            let w = (c.get(i, j) + c.get(j, i)) / 2.0;
            if w != 0.0 {
                for cut in &mut cuts[tree.common_level(lv[i], lv[j])..] {
                    *cut += w;
                }
            }
        }
    }
    cuts
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    let sizes: Vec<usize> = arg(&args, "--sizes")
        .unwrap_or_else(|| "64,256,1024,4096".into())
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let trees = arg(&args, "--trees").unwrap_or_else(|| "4x8x2,16x4x8x2,2x12x2".into());
    let fams = arg(&args, "--families").unwrap_or_else(|| FAMILIES.join(","));
    let runs: usize = arg(&args, "--runs").map_or(Ok(3), |s| s.parse())?;
    let stability = args.iter().any(|a| a == "--stability");
    let levels = args.iter().any(|a| a == "--levels");
    let seeds: usize = arg(&args, "--seeds").map_or(Ok(0), |s| s.parse())?;
    let digest = args.iter().any(|a| a == "--digest");
    let repeat: usize = arg(&args, "--repeat").map_or(Ok(1), |s| s.parse())?;
    if repeat == 0 {
        return Err("--repeat must be at least 1".into());
    }
    let dir = std::env::temp_dir().join(format!("numaff-vs-scotch-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let algos = [Algorithm::Eagermap, Algorithm::Locality];
    println!(
        "{:9} {:10} {:>5} {:>4} | {:>12} | {:>7} {:>7} {:>7} | {:>8} {:>8} {:>8}{}",
        "tree",
        "family",
        "n",
        "shuf",
        "scotch cost",
        "eager/S",
        "local/S",
        "ident/S",
        "eager ms",
        "local ms",
        "scot ms",
        if stability {
            "  | moved under 5% noise: eager local scotch local+current"
        } else {
            ""
        }
    );
    for (tname, spec) in TREES
        .iter()
        .filter(|(t, _)| trees.split(',').any(|x| x == *t))
    {
        let m = numaff_machine::spec::resolve(spec)?;
        let tree = Tree::from_machine(&m);
        for fam in fams.split(',') {
            for &n in &sizes {
                let mut rng = SplitMix64::new(0x5c07c4 ^ n as u64);
                let Some(base) = family(fam, n, &mut rng) else {
                    continue;
                };
                let target = tleaf(&tree, n)?;
                for shuf in [false, true] {
                    let c = if shuf {
                        shuffled(&base, &mut rng)
                    } else {
                        base.clone()
                    };
                    let input = MapInput::with_comm(&m, &c);
                    if digest {
                        // locality alone: exact cost and a hash of the placement (FNV-1a), so
                        // two builds can be compared bit for bit without Scotch
                        // `--repeat K`: K calls, the median and least cpu time (K = 1: the one call)
                        let mut ts = Vec::new();
                        let mut p = Vec::new();
                        for _ in 0..repeat {
                            let t = thread_cpu_ms();
                            p = map(Algorithm::Locality, &input)?;
                            ts.push(thread_cpu_ms() - t);
                        }
                        ts.sort_by(f64::total_cmp);
                        let ms = ts[ts.len() / 2];
                        let h = p.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &pu| {
                            (h ^ u64::from(pu)).wrapping_mul(0x0100_0000_01b3)
                        });
                        let min = if repeat > 1 {
                            format!(" {:8.2}", ts[0])
                        } else {
                            String::new()
                        };
                        println!(
                            "{tname:9} {fam:10} {n:5} {:>4} | {} {h:016x} | {ms:8.2}{min}",
                            if shuf { "yes" } else { "no" },
                            hop_cost(&tree, &c, &p)
                        );
                        continue;
                    }
                    let (sp, sms) = scotch(&tree, &target, &c, &dir)?;
                    let sc = hop_cost(&tree, &c, &sp);
                    let ident = hop_cost(&tree, &c, &map(Algorithm::RoundRobin, &input)?);
                    let mut ratios = Vec::new();
                    let mut times = Vec::new();
                    let mut places = Vec::new();
                    for algo in algos {
                        let mut best = f64::MAX;
                        let mut p = Vec::new();
                        for _ in 0..runs {
                            let t = thread_cpu_ms();
                            p = map(algo, &input)?;
                            best = best.min(thread_cpu_ms() - t);
                        }
                        ratios.push(hop_cost(&tree, &c, &p) / sc);
                        times.push(best);
                        places.push(p);
                    }
                    let mut line = format!(
                        "{tname:9} {fam:10} {n:5} {:>4} | {sc:12.0} | {:7.3} {:7.3} {:7.3} | {:8.2} {:8.2} {:8.2}",
                        if shuf { "yes" } else { "no" },
                        ratios[0],
                        ratios[1],
                        ident / sc,
                        times[0],
                        times[1],
                        sms
                    );
                    if stability {
                        let c2 = noisy(&c, &mut rng);
                        let input2 = MapInput::with_comm(&m, &c2);
                        let mut moved = Vec::new();
                        for (algo, p) in algos.iter().zip(&places) {
                            moved.push(moved_threads(&tree, p, &map(*algo, &input2)?));
                        }
                        let (sp2, _) = scotch(&tree, &target, &c2, &dir)?;
                        moved.push(moved_threads(&tree, &sp, &sp2));
                        // locality told the current mapping (keeps it when within 1 %)
                        let mut input3 = MapInput::with_comm(&m, &c2);
                        input3.current = Some(&places[1]);
                        let kept = map(Algorithm::Locality, &input3)?;
                        moved.push(moved_threads(&tree, &places[1], &kept));
                        let _ = write!(
                            line,
                            "  | {:5} {:5} {:5} {:5}",
                            moved[0], moved[1], moved[2], moved[3]
                        );
                    }
                    println!("{line}");
                    if shuf && seeds > 0 {
                        // the same family under `seeds` other shuffles of the ids
                        let mut r = Vec::with_capacity(seeds);
                        for k in 1..=seeds as u64 {
                            let mut rs = SplitMix64::new(0x5eed_0000 ^ (k << 20) ^ n as u64);
                            let cs = shuffled(&base, &mut rs);
                            let (sps, _) = scotch(&tree, &target, &cs, &dir)?;
                            let ps = map(Algorithm::Locality, &MapInput::with_comm(&m, &cs))?;
                            r.push(hop_cost(&tree, &cs, &ps) / hop_cost(&tree, &cs, &sps));
                        }
                        let mean = r.iter().sum::<f64>() / r.len() as f64;
                        let (lo, hi) = r
                            .iter()
                            .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
                        println!(
                            "    {seeds} more shuffles: locality/Scotch mean {mean:.3}, min {lo:.3}, max {hi:.3}, dearer in {}",
                            r.iter().filter(|&&x| x > 1.0 + 1e-12).count()
                        );
                    }
                    if levels {
                        println!(
                            "    cut per level (top first), exact cost: scotch {:?} {sc}, locality {:?} {}",
                            level_cuts(&tree, &c, &sp),
                            level_cuts(&tree, &c, &places[1]),
                            hop_cost(&tree, &c, &places[1])
                        );
                    }
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
