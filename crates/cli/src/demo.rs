//! `numaff demo`: the front door. Shows the machine numaff runs on next to one of the papers' NUMA
//! machines, so a new user sees what numaff knows about both before placing anything.

use anyhow::Result;
use clap::Args;

use numaff_machine::{render, spec};

use crate::demo_ring::RING_THREADS;

#[derive(Args)]
pub struct DemoArgs {
    /// The machine to show beside the host (a catalog name, file or synthetic description).
    #[arg(long, value_name = "MACHINE", default_value = "kmaf-sim-4x2")]
    machine: String,
}

pub fn run(args: &DemoArgs) -> Result<()> {
    let host = numaff_machine::discover_host()?;
    let other = spec::resolve(&args.machine)?;
    println!("numaff demo — what numaff sees\n");
    let column = |title: String, m: &numaff_machine::Machine| {
        format!(
            "{title}\n{}\n\n{}",
            render::brief(m),
            render::tree(m).join("\n")
        )
    };
    let left = column(format!("This machine ({})", host.name), &host);
    let right = column(format!("{} (from the papers)", other.name), &other);
    print!("{}", render::side_by_side(&left, &right, 4));
    println!();
    print!(
        "{}",
        render::side_by_side(&render::figures(&host), &render::figures(&other), 4)
    );
    println!();
    if host.nodes.len() <= 1 {
        println!(
            "This machine has a single NUMA node: every memory access is local here, so numaff can\n\
             only show placement on multi-node machines (in QEMU guests and in its simulator).\n"
        );
    }
    print!("{}", mapping_example(&other)?);
    print!("{}", simulation_example(&args.machine, &other));
    print!("{}", observing_example());
    let me = std::process::id() as i32;
    match numaff_linux::view::process(me, &host, None) {
        Ok(view) => {
            let total: u64 = view.pages_per_node.values().sum();
            let per_node: Vec<String> = view
                .pages_per_node
                .iter()
                .map(|(n, p)| {
                    format!(
                        "node {n}: {}",
                        numaff_machine::file::Size(p * host.page_size).human()
                    )
                })
                .collect();
            let t = view.threads.first();
            println!(
                "This demo process (pid {me}) runs {} thread{}{}; {} of its memory is in RAM ({}).",
                view.threads.len(),
                if view.threads.len() == 1 { "" } else { "s" },
                t.map(|t| format!(
                    ", the first on cpu {} (node {})",
                    t.cpu,
                    t.node.map_or("?".into(), |n| n.to_string())
                ))
                .unwrap_or_default(),
                numaff_machine::file::Size(total * host.page_size).human(),
                per_node.join(", ")
            );
            println!("`numaff show PID` shows that for any process: threads, mappings, pages per node.\n");
        }
        Err(e) => println!("(cannot show this process: {e})\n"),
    }
    println!("Next:");
    println!("  numaff topo --list                       the papers' machines");
    println!(
        "  numaff topo --machine laso-hpl           one of them, with measured latency/bandwidth"
    );
    println!(
        "  numaff topo --measure                    measure this machine's latency and bandwidth"
    );
    println!("  numaff topo --export host.toml           save this machine as a machine file");
    println!("  numaff show $$                           where this shell's threads and pages are");
    Ok(())
}

/// A small thread-mapping example on the paper machine: one thread per PU, threads communicating in
/// pairs (0,1), (2,3), ... but with shuffled ids, as real programs number them. Locality mapping puts
/// each pair next to each other; compact and scatter, which ignore communication, do not.
fn mapping_example(machine: &numaff_machine::Machine) -> Result<String> {
    use numaff_policy::{map, quality::hop_cost, Algorithm, CommMatrix, MapInput, Tree};
    let n = machine.pu_count().clamp(2, 16) / 2 * 2;
    // A fixed shuffle: partner of thread i is (i * 5 + 3) % n's pair mate, made symmetric.
    let order: Vec<usize> = (0..n).map(|i| (i * 5 + 3) % n).collect();
    let mut comm = CommMatrix::new(n);
    for k in (0..n).step_by(2) {
        comm.add_pair(order[k], order[k + 1], 100.0);
    }
    let tree = Tree::from_machine(machine);
    let mut out = format!(
        "Thread mapping on {}: {n} threads that talk in pairs (ids shuffled); hop cost = Σ comm × distance:\n",
        machine.name
    );
    for algo in [Algorithm::Compact, Algorithm::Scatter, Algorithm::Locality] {
        let mut input = MapInput::new(machine, n);
        input.comm = Some(&comm);
        let placement = map(algo, &input)?;
        let pus: Vec<String> = placement.iter().map(|p| p.to_string()).collect();
        out.push_str(&format!(
            "  {:<9} hop cost {:>6.0}   PUs of threads 0..{}: {}\n",
            algo.to_string(),
            hop_cost(&tree, &comm, &placement),
            n - 1,
            pus.join(" ")
        ));
    }
    out.push_str(
        "  `numaff map --compare --matrix M.csv --machine NAME` does this for your own matrix.\n\n",
    );
    Ok(out)
}

/// The demo simulates nas-sp with its arrays scaled by this (half: a quick demo).
const SIM_SCALE: f64 = 0.5;
/// The seed of the demo's runs; the os placement runs [`OS_SEEDS`] seeds from it.
const SIM_SEED: u64 = 1;
/// The os placement's moves are random (and follow any change of timing), so one run of it is one
/// sample: its row is the mean over this many seeds, with their range.
const OS_SEEDS: u64 = 5;

/// The `numaff sim` commands that print the demo's simulated numbers on machine `spec`: the os
/// placement over its seeds, then the comparison of the two oracle placements.
fn sim_commands(spec: &str) -> [String; 2] {
    let common = format!(
        "numaff sim --machine {} --workload nas-sp --scale {SIM_SCALE} --seed {SIM_SEED}",
        shell_word(spec)
    );
    [
        format!("{common} --seeds {OS_SEEDS}"),
        format!(
            "{common} --threads scatter --threads compact --data oracle-remote --data oracle-local"
        ),
    ]
}

/// `s` as one shell word: as it is when it has no character the shell treats specially, else in
/// single quotes.
fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,+@%".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Decision quality in the simulator on the paper machine (`spec`, as the user gave it): an SP-like
/// workload at [`SIM_SCALE`] with the Linux-like default placement (over several seeds), with
/// threads placed compactly, and with each page on the node that uses it most (kMAF §3's
/// experiment), then the `numaff sim` commands that print the same numbers. A failure to simulate
/// is reported as a line, not an error.
fn simulation_example(spec: &str, machine: &numaff_machine::Machine) -> String {
    use numaff_workload::{catalog, run, Algorithm, DataChoice, RunOptions, ThreadPolicy};
    let workload = match catalog::load("nas-sp") {
        Ok(w) => w.scaled(SIM_SCALE),
        Err(e) => return format!("(cannot load the nas-sp workload: {e})\n\n"),
    };
    let mut out = format!(
        "Simulated on {}: nas-sp at scale {SIM_SCALE} (NAS SP-like, its arrays scaled by \
         {SIM_SCALE} for a quick demo, {} threads), three placements:\n",
        machine.name,
        workload.programs.iter().map(|p| p.threads).sum::<u32>()
    );
    // As kMAF §3.1: the Linux-like default, then threads apart with pages on the nodes that use
    // them least (T_R D_R), then neighbours together with pages where they are used most (T_L D_L).
    let cases = [
        ("os, first-touch", ThreadPolicy::Os, DataChoice::FirstTouch),
        (
            "scatter, oracle-remote",
            ThreadPolicy::Map(Algorithm::Scatter),
            DataChoice::OracleRemote,
        ),
        (
            "compact, oracle-local",
            ThreadPolicy::Map(Algorithm::Compact),
            DataChoice::OracleLocal,
        ),
    ];
    let mut base = None;
    for (label, threads, data) in cases {
        let seeds = if threads == ThreadPolicy::Os {
            OS_SEEDS
        } else {
            1
        };
        let runs: Result<Vec<_>, numaff_workload::WorkloadError> = (1..=seeds)
            .map(|i| {
                let seed = SIM_SEED + i - 1;
                let opts = RunOptions {
                    threads: threads.clone(),
                    data: data.clone(),
                    seed,
                };
                run(machine, &workload, &opts)
            })
            .collect();
        match runs {
            Ok(rs) => {
                let each: Vec<f64> = rs.iter().map(|r| r.makespan_ns as f64 / 1e6).collect();
                let spread = crate::sim::Spread::of(&each);
                let ms = spread.mean;
                let local: u64 = rs.iter().map(|r| r.local_accesses).sum();
                let total = rs
                    .iter()
                    .map(|r| r.local_accesses + r.remote_accesses)
                    .sum::<u64>()
                    .max(1);
                let range = if rs.len() > 1 {
                    let (lo, hi) = (spread.min, spread.max);
                    format!(" (mean of {} seeds, {lo:.2}-{hi:.2})", rs.len())
                } else {
                    String::new()
                };
                let speedup = base.map_or(String::new(), |b: f64| {
                    format!(", {:.2}x the speed of the first", b / ms)
                });
                base.get_or_insert(ms);
                out.push_str(&format!(
                    "  {label:<22} {ms:>7.2} ms simulated{range}, {:>3.0} % of memory accesses local{speedup}\n",
                    100.0 * local as f64 / total as f64
                ));
            }
            Err(e) => out.push_str(&format!("  {label:<22} cannot simulate: {e}\n")),
        }
    }
    let [os, oracles] = sim_commands(spec);
    out.push_str(&format!(
        "  The same numbers from `numaff sim`: the os row from\n    {os}\n  and the other two \
         (next to the two mixed placements, kMAF Fig. 1) from\n    {oracles}\n  \
         `numaff sim --list-workloads` and `numaff sim --help` for more.\n\n"
    ));
    out
}

/// Observing a real program on this machine: `numaff profile` (page faults and induced faults) on
/// the built-in ring of [`RING_THREADS`] threads, then the analysis's communication matrix, in the
/// ring's order, and whether its heaviest pairs are the ring's neighbours. Whatever fails (perf
/// events refused, no way to induce faults) becomes a line saying so.
fn observing_example() -> String {
    let mut out = format!(
        "Observing a program: `numaff profile` on a built-in ring of {RING_THREADS} threads (thread i writes a\n\
         buffer that thread i+1 reads) for {RING_MS} ms, sampling page faults and inducing more\n\
         (10 re-arms per page per second, no cost cap):\n"
    );
    match profile_ring() {
        Ok(text) => out.push_str(&text),
        Err(e) => out.push_str(&format!("  (cannot show it here: {e:#})\n")),
    }
    out.push_str(
        "  `numaff profile -- ./prog` then `numaff analyze trace.parquet` do this for your program.\n\n",
    );
    out
}

/// How long the demo's ring runs.
const RING_MS: u64 = 1500;

fn profile_ring() -> Result<String> {
    use anyhow::{bail, Context};
    let exe = std::env::current_exe().context("cannot find numaff's own executable")?;
    let dir = std::env::temp_dir().join(format!("numaff-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create {} (set TMPDIR)", dir.display()))?;
    let trace = dir.join("ring.parquet");
    let run = std::process::Command::new(&exe)
        // No budget: the ring is numaff itself, whose thousands of private pages (heap, stacks)
        // share the agent's rotation with the ring's 64 shared ones; on a loaded machine the
        // ring's cpu time is small, and 0.5 % of it re-arms each buffer page only about once in
        // 14 ticks instead of every tick, too rarely for the matrix to show the ring.
        .args(["profile", "--induce", "auto", "--induce-rate", "10"])
        .args(["--induce-budget", "off", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(&exe)
        .args(["demo-ring", &RING_MS.to_string()])
        .output();
    let result = (|| {
        let run = run.context("cannot run numaff profile")?;
        let stdout = String::from_utf8_lossy(&run.stdout);
        if !run.status.success() {
            let stderr = String::from_utf8_lossy(&run.stderr);
            bail!(
                "{}",
                stderr
                    .trim()
                    .lines()
                    .last()
                    .unwrap_or("numaff profile failed")
            );
        }
        let stderr = String::from_utf8_lossy(&run.stderr);
        let induced = stderr
            .lines()
            .find_map(|l| l.strip_prefix("numaff: induced faults: "))
            .and_then(|l| l.split([',', '(']).next())
            .unwrap_or("unknown")
            .trim()
            .to_string();
        // THREAD i tid, in ring order.
        let mut tids = [0u32; RING_THREADS];
        for l in stdout.lines().filter_map(|l| l.strip_prefix("THREAD ")) {
            let mut f = l.split(' ').filter_map(|x| x.parse::<u32>().ok());
            if let (Some(i), Some(tid)) = (f.next(), f.next()) {
                if let Some(slot) = tids.get_mut(i as usize) {
                    *slot = tid;
                }
            }
        }
        let a = numaff_behave::analyze::analyze_file(
            &trace,
            &numaff_behave::analyze::AnalyzeConfig::default(),
        )?;
        let index: Vec<Option<usize>> = tids
            .iter()
            .map(|&tid| a.threads.iter().position(|t| t.tid == tid))
            .collect();
        let cell = |i: usize, j: usize| match (index[i], index[j]) {
            (Some(x), Some(y)) => a.communication_matrix[x][y],
            _ => 0.0,
        };
        let mut text = format!(
            "  {} samples, induced faults: {induced}; communication between the threads, KiB:\n       ",
            a.coverage.samples
        );
        for j in 0..RING_THREADS {
            text.push_str(&format!("{:>7}", format!("t{j}")));
        }
        text.push('\n');
        for i in 0..RING_THREADS {
            text.push_str(&format!("    t{i} "));
            for j in 0..RING_THREADS {
                if i == j {
                    text.push_str(&format!("{:>7}", "-"));
                } else {
                    text.push_str(&format!("{:>7.0}", cell(i, j) / 1024.0));
                }
            }
            text.push('\n');
        }
        let neighbours =
            |i: usize, j: usize| (i + 1) % RING_THREADS == j || (j + 1) % RING_THREADS == i;
        let (mut least_neighbour, mut most_other) = (f64::INFINITY, 0.0f64);
        for i in 0..RING_THREADS {
            for j in 0..RING_THREADS {
                if i == j {
                    continue;
                }
                if neighbours(i, j) {
                    least_neighbour = least_neighbour.min(cell(i, j));
                } else {
                    most_other = most_other.max(cell(i, j));
                }
            }
        }
        text.push_str(if least_neighbour > 0.0 && least_neighbour > most_other {
            "  The heaviest pairs are the ring's neighbours: numaff found who talks to whom from page faults.\n"
        } else {
            "  The ring's neighbours are not the heaviest pairs in this run (too few induced faults?).\n"
        });
        Ok(text)
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

#[cfg(test)]
mod tests {
    use super::sim_commands;

    #[test]
    fn suggested_sim_commands_quote_a_machine_given_as_a_description() {
        let [os, _] = sim_commands("numa:2 pu:4");
        assert!(
            os.starts_with("numaff sim --machine 'numa:2 pu:4' --workload nas-sp --scale 0.5"),
            "{os}"
        );
        let [_, oracles] = sim_commands("it's.toml");
        assert!(oracles.contains(r"--machine 'it'\''s.toml'"), "{oracles}");
    }
}
