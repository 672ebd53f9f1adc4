//! `numaff map`: computes a thread mapping from a communication matrix, prints its quality next to
//! compact and scatter (or every algorithm with --compare), saves it as a mapping file and exports it
//! to launcher syntax.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;

use numaff_machine::Machine;
use numaff_policy::export::{self, ExportKind, Granularity};
use numaff_policy::mapping::{self, MachineId, MappingFile};
use numaff_policy::quality::{self, BusiestEdge, Shares};
use numaff_policy::{comm, Algorithm, CommMatrix, MapInput, Placement, Tree};

#[derive(Args)]
pub struct MapArgs {
    /// Mapping algorithm: compact, scatter, round-robin, packed, random, eagermap, locality,
    /// balance, deloc, ondeloc, cimar, nimar.
    #[arg(long, value_name = "A", required_unless_present_any = ["compare", "from"])]
    algo: Option<String>,
    /// Communication matrix: CSV, one row per task, cells separated by commas or spaces.
    #[arg(long, value_name = "M.csv", conflicts_with = "trace")]
    matrix: Option<PathBuf>,
    /// The number of tasks, without a communication matrix: enough for the algorithms that do not
    /// read one (compact, scatter, round-robin, packed, random).
    #[arg(long, value_name = "N", conflicts_with_all = ["matrix", "trace", "from"])]
    tasks: Option<usize>,
    /// A trace to take the communication matrix from (`numaff profile`'s Parquet or CSV, or a CSV
    /// of MPI messages): the tasks are its threads (or ranks) in trace order; the cpu of each
    /// thread's last sample is the current placement when the trace was recorded on this machine.
    #[arg(long, value_name = "T")]
    trace: Option<PathBuf>,
    /// The machine to map on (default: this machine).
    #[arg(long, value_name = "X", help = format!("The machine to map on: {} (default: host)", numaff_machine::spec::SPEC_HELP))]
    machine: Option<String>,
    /// Save the mapping to this TOML file (for `numaff apply`).
    #[arg(short = 'o', long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Print the mapping in a launcher's syntax on stdout (the figures then go to stderr): omp,
    /// gomp, kmp, rankfile, slurm, slurm-mask, likwid.
    #[arg(long, value_name = "KIND")]
    export: Option<String>,
    /// Binding width of the exports: pu (each task on its PU) or core (on every PU of its core).
    #[arg(long, value_name = "G", default_value = "pu")]
    granularity: String,
    /// Host name written in rankfiles (default: this host's name).
    #[arg(long, value_name = "NAME")]
    host: Option<String>,
    /// Run every algorithm on the input and print a table.
    #[arg(long, conflicts_with_all = ["algo", "from", "output", "export"])]
    compare: bool,
    /// Export a saved mapping file instead of computing one (with --export).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["algo", "matrix", "trace", "output"], requires = "export")]
    from: Option<PathBuf>,
    /// Seed of the random algorithm.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// The figures of one algorithm's result.
#[derive(Serialize)]
struct Figures {
    algorithm: String,
    /// PU (kernel cpu id) of each task, in matrix order; empty when the algorithm failed.
    placement: Placement,
    hop_cost: Option<f64>,
    latency_cost: Option<f64>,
    shares: Option<Shares>,
    busiest_edge: Option<BusiestEdge>,
    /// (node id, tasks) per node with cpus.
    tasks_per_node: Vec<(u32, usize)>,
    /// (PU, tasks) per PU of the machine, in tree order.
    tasks_per_pu: Vec<(u32, usize)>,
    /// Threads moved against the current placement (with --trace recorded on this machine),
    /// counted up to swaps of interchangeable subtrees (`quality::moved_threads`).
    #[serde(skip_serializing_if = "Option::is_none")]
    moved: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// The most tasks `--tasks` takes.
const MAX_TASKS: usize = 65_536;

#[derive(Serialize)]
struct ExportJson {
    kind: &'static str,
    text: String,
    usage: String,
}

#[derive(Serialize)]
struct MapJson<'a> {
    machine: MachineId,
    tasks: usize,
    matrix: Option<String>,
    matrix_hash: Option<String>,
    #[serde(flatten)]
    result: &'a Figures,
    nodes: Option<Vec<u32>>,
    baselines: Vec<&'a Figures>,
    /// With --trace: the thread id (or MPI rank) of each task, in matrix order.
    #[serde(skip_serializing_if = "Option::is_none")]
    tids: Option<Vec<u32>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    export: Option<ExportJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    saved_to: Option<String>,
}

#[derive(Serialize)]
struct CompareJson<'a> {
    machine: MachineId,
    tasks: usize,
    matrix: Option<String>,
    results: &'a [Figures],
}

pub fn run(args: &MapArgs) -> Result<()> {
    crate::output::check_opt(args.output.as_deref())?;
    let granularity = match args.granularity.as_str() {
        "pu" | "fine" | "thread" => Granularity::Pu,
        "core" => Granularity::Core,
        other => bail!("--granularity takes pu or core, not {other:?}"),
    };
    let export_kind = args
        .export
        .as_deref()
        .map(|k| k.parse::<ExportKind>().map_err(anyhow::Error::msg))
        .transpose()?;
    let algo = args
        .algo
        .as_deref()
        .map(|a| a.parse::<Algorithm>())
        .transpose()?;
    let spec = args.machine.as_deref().unwrap_or("host");
    let machine = numaff_machine::spec::resolve(spec)
        .with_context(|| format!("cannot load the machine {spec:?}"))?;

    if let Some(from) = &args.from {
        let kind = export_kind.context("--from needs --export KIND")?;
        let file = MappingFile::load(from)?;
        // Every launcher syntax names cpus: one the machine does not have would be bound to
        // nothing (or fail at the program's start), so the export is refused here.
        let pus = machine.pus();
        if let Some((task, pu)) = file
            .placement
            .iter()
            .enumerate()
            .find(|&(_, &pu)| !pus.contains(pu))
        {
            let which = if file.matches(&machine) {
                "the file says it was computed for this machine: was placement edited? \
                 give PUs of the machine"
                    .to_string()
            } else {
                format!(
                    "the file was computed for machine {} ({}): give it with --machine",
                    file.machine.name, file.machine.fingerprint
                )
            };
            bail!(
                "{}: task {task} is mapped to PU {pu}, which machine {} does not have (PUs {pus}); {which}",
                from.display(),
                machine.name
            );
        }
        if !file.matches(&machine) {
            eprintln!(
                "numaff: warning: {} was computed for machine {} ({}), not for {} ({}); \
                 sockets and cores in the export are this machine's",
                from.display(),
                file.machine.name,
                file.machine.fingerprint,
                machine.name,
                mapping::fingerprint(&machine)
            );
        }
        return print_export(kind, &machine, &file.placement, granularity, args);
    }

    // The input: a matrix file, or the matrix of a trace with its threads' ids and last cpus, or
    // only a number of tasks.
    let (comm, matrix_name, matrix_hash, traced) = match (&args.trace, &args.matrix) {
        (None, None) => {
            let Some(n) = args.tasks else {
                bail!(
                    "give the communication: --matrix M.csv (one row of numbers per task) or \
                     --trace T (a trace of numaff profile, or a CSV of MPI messages), or only \
                     --tasks N for {}",
                    no_matrix_algorithms()
                );
            };
            if !(1..=MAX_TASKS).contains(&n) {
                bail!("--tasks takes a number of tasks from 1 to {MAX_TASKS}, not {n}");
            }
            if let Some(a) = algo.filter(|a| a.needs_comm()) {
                bail!(
                    "{} reads the communication between tasks: give --matrix M.csv or --trace T \
                     instead of --tasks ({} need only --tasks)",
                    a.name(),
                    no_matrix_algorithms()
                );
            }
            (None, None, None, None)
        }
        (Some(path), _) => {
            let t = load_trace(path, &machine)?;
            let name = format!(
                "{} ({} {} in trace order)",
                path.display(),
                t.tids.len(),
                t.kind
            );
            let hash = mapping::hash_bytes(t.comm.to_csv().as_bytes());
            (Some(t.comm.clone()), Some(name), Some(hash), Some(t))
        }
        (None, Some(matrix_path)) => {
            let bytes = read_matrix_file(matrix_path)?;
            let text = String::from_utf8_lossy(&bytes);
            let comm = CommMatrix::from_csv(&text, &matrix_path.display().to_string())?;
            let name = matrix_path.display().to_string();
            (
                Some(comm),
                Some(name),
                Some(mapping::hash_bytes(&bytes)),
                None,
            )
        }
    };
    let tasks = comm
        .as_ref()
        .map_or(args.tasks.unwrap_or(0), CommMatrix::len);
    let comm = comm.as_ref();
    let current = traced.as_ref().and_then(|t| t.current.as_ref());
    let groups = traced.as_ref().and_then(|t| t.groups.as_deref());
    let tree = Tree::from_machine(&machine);
    let run_one =
        |a: Algorithm| figures(a, &machine, &tree, tasks, comm, current, groups, args.seed);

    if args.compare {
        let results: Vec<Figures> = Algorithm::ALL.iter().map(|&a| run_one(a)).collect();
        if args.json {
            let doc = CompareJson {
                machine: MachineId::of(&machine),
                tasks,
                matrix: matrix_name,
                results: &results,
            };
            println!("{}", serde_json::to_string_pretty(&doc)?);
        } else {
            print!(
                "{}",
                header(&machine, tasks, matrix_name.as_deref(), "every algorithm")
            );
            if let Some(line) = oversubscribed(tasks, tree.pu_count()) {
                println!("{line}");
            }
            print!("{}", table(&results));
        }
        return Ok(());
    }

    let algo = algo.context("give --algo A (or --compare)")?;
    let result = run_one(algo);
    if let Some(e) = &result.error {
        // Neither a matrix nor a trace gives the 3DyRM metrics these two start from (README).
        if matches!(algo, Algorithm::Cimar | Algorithm::Nimar) {
            bail!(
                "{e}; {} also needs each thread's 3DyRM metrics (operations, memory accesses, \
                 latency, from hardware sampling), for which `numaff map` has no input yet: use \
                 another algorithm here (`numaff map --compare` lists them)",
                algo.name()
            );
        }
        bail!("{e}");
    }
    let baselines: Vec<Figures> = [Algorithm::Compact, Algorithm::Scatter]
        .into_iter()
        .filter(|&b| b != algo)
        .map(run_one)
        .collect();

    let mut file = MappingFile::new(algo.name(), &machine, result.placement.clone());
    match &args.trace {
        Some(t) => file.input.trace = Some(t.display().to_string()),
        None => file.input.matrix = matrix_name.clone(),
    }
    file.input.matrix_hash = matrix_hash;
    if algo == Algorithm::Random {
        file.input.seed = Some(args.seed);
    }
    file.quality = mapping::Quality {
        hop_cost: result.hop_cost,
        latency_cost: result.latency_cost,
        share_core: result.shares.map(|s| s.core),
        share_cache: result.shares.and_then(|s| s.cache),
        share_node: result.shares.map(|s| s.node),
    };
    if let Some(out) = &args.output {
        file.save(out)?;
    }

    if args.json {
        let export = match export_kind {
            Some(k) => {
                let ts = export::targets(&machine, &result.placement, granularity);
                let e = export::export(k, &ts, &host_name(args))?;
                Some(ExportJson {
                    kind: k.name(),
                    text: e.text,
                    usage: e.usage,
                })
            }
            None => None,
        };
        let doc = MapJson {
            machine: file.machine.clone(),
            tasks,
            matrix: matrix_name,
            matrix_hash: file.input.matrix_hash.clone(),
            result: &result,
            nodes: file.nodes.clone(),
            baselines: baselines.iter().collect(),
            tids: traced.as_ref().map(|t| t.tids.clone()),
            export,
            saved_to: args.output.as_ref().map(|p| p.display().to_string()),
        };
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }

    let mut text = header(&machine, tasks, matrix_name.as_deref(), algo.name());
    if let Some(t) = &traced {
        let what = if t.kind == "threads" { "tid" } else { "rank" };
        let _ = writeln!(
            text,
            "tasks ({what} of each, in matrix order):        {}{}",
            join(&t.tids),
            if t.current.is_some() {
                "\ncurrent placement (cpu of each at its last sample): yes"
            } else {
                ""
            }
        );
    }
    let _ = writeln!(
        text,
        "placement (PU of each task, in matrix order): {}",
        join(&result.placement)
    );
    if let Some(nodes) = &file.nodes {
        let _ = writeln!(
            text,
            "nodes     (node of each task):                 {}",
            join(nodes)
        );
    }
    let most = result
        .tasks_per_pu
        .iter()
        .map(|&(_, c)| c)
        .max()
        .unwrap_or(0);
    let used = result.tasks_per_pu.iter().filter(|&&(_, c)| c > 0).count();
    let _ = writeln!(
        text,
        "tasks per PU: at most {most}, {used} of {} PUs used",
        result.tasks_per_pu.len()
    );
    if let Some(moved) = result.moved {
        let _ = writeln!(
            text,
            "threads moved against the current placement (up to symmetric swaps): {moved} of {}",
            result.placement.len()
        );
    }
    if let Some(line) = oversubscribed(tasks, tree.pu_count()) {
        let _ = writeln!(text, "{line}");
    }
    text.push('\n');
    let mut rows = vec![result];
    rows.extend(baselines);
    text.push_str(&table(&rows));
    if let Some(out) = &args.output {
        let _ = writeln!(
            text,
            "\nsaved to {} (run it with `numaff apply {} -- CMD`)",
            out.display(),
            out.display()
        );
    }
    match export_kind {
        Some(kind) => {
            // The figures go to stderr so that stdout is the export alone.
            eprint!("{text}");
            print_export(kind, &machine, &rows[0].placement, granularity, args)
        }
        None => {
            print!("{text}");
            Ok(())
        }
    }
}

fn print_export(
    kind: ExportKind,
    machine: &Machine,
    placement: &[u32],
    g: Granularity,
    args: &MapArgs,
) -> Result<()> {
    let ts = export::targets(machine, placement, g);
    let e = export::export(kind, &ts, &host_name(args))?;
    if args.json {
        let doc = ExportJson {
            kind: kind.name(),
            text: e.text,
            usage: e.usage,
        };
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        if e.text.ends_with('\n') {
            print!("{}", e.text);
        } else {
            println!("{}", e.text);
        }
        eprintln!("numaff: {} export: {}", kind.name(), e.usage);
    }
    Ok(())
}

fn host_name(args: &MapArgs) -> String {
    if let Some(h) = &args.host {
        return h.clone();
    }
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is 256 bytes long and gethostname writes at most that many.
    let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if r != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The longest line of a matrix file: [`comm::MAX_TASKS`] cells of up to 40 characters each.
const MAX_MATRIX_LINE: usize = comm::MAX_TASKS * 40;

/// The bytes of a matrix file, read line by line so that one claiming more than
/// [`comm::MAX_TASKS`] tasks (by its first row's cells, its rows or a line longer than
/// [`MAX_MATRIX_LINE`]) is refused before it is read whole.
fn read_matrix_file(path: &Path) -> Result<Vec<u8>> {
    use std::io::{BufRead, Read};
    let origin = path.display().to_string();
    let file = std::fs::File::open(path)
        .with_context(|| format!("cannot read the matrix {}", path.display()))?;
    let mut reader = std::io::BufReader::new(file);
    let mut bytes = Vec::new();
    let (mut line_no, mut rows) = (0usize, 0usize);
    loop {
        let start = bytes.len();
        let n = (&mut reader)
            .take(MAX_MATRIX_LINE as u64 + 1)
            .read_until(b'\n', &mut bytes)
            .with_context(|| format!("cannot read the matrix {}", path.display()))?;
        if n == 0 {
            return Ok(bytes);
        }
        line_no += 1;
        let line = String::from_utf8_lossy(&bytes[start..]);
        let cells = line
            .split(|c: char| c == ',' || c == ';' || c.is_whitespace())
            .filter(|c| !c.is_empty())
            .count();
        if cells > comm::MAX_TASKS {
            let what = format!("line {line_no} has more than {} cells", comm::MAX_TASKS);
            return Err(comm::too_many(&origin, what, cells).into());
        }
        if n > MAX_MATRIX_LINE {
            bail!(
                "{origin}: line {line_no} is longer than {MAX_MATRIX_LINE} bytes ({} cells of 40 \
                 characters): numaff map takes at most {} tasks; is it a matrix?",
                comm::MAX_TASKS,
                comm::MAX_TASKS
            );
        }
        let trimmed = line.trim();
        if !trimmed.is_empty() && !trimmed.starts_with('#') {
            rows += 1;
            if rows > comm::MAX_TASKS {
                let what = format!("more than {} rows", comm::MAX_TASKS);
                return Err(comm::too_many(&origin, what, rows).into());
            }
        }
    }
}

/// What `--trace` gives: the communication matrix of the trace's threads (or MPI ranks), the
/// groups of pairs that communicate at the same time (for deloc), their ids in trace order
/// (ascending pid, then tid), and the current placement (each thread's cpu at
/// its last sample) when the trace was recorded on `machine` (same fingerprint) and every such cpu
/// is one of its PUs.
#[derive(Clone)]
struct TraceInput {
    comm: CommMatrix,
    /// DeLocProf's groups of concurrently communicating pairs (one per cluster in time), for deloc.
    groups: Option<Vec<Vec<numaff_policy::deloc::Pair>>>,
    tids: Vec<u32>,
    /// "threads", or "MPI ranks" for a message trace.
    kind: &'static str,
    current: Option<Placement>,
}

fn load_trace(path: &std::path::Path, machine: &Machine) -> Result<TraceInput> {
    use numaff_behave::analyze::{analyze_file, analyze_messages, AnalyzeConfig};
    use numaff_behave::messages;
    let cfg = AnalyzeConfig {
        groups: true,
        ..AnalyzeConfig::default()
    };
    let message_trace = messages::is_message_trace(path)?;
    let (a, current) = if message_trace {
        (
            analyze_messages(&messages::read_messages(path)?, &cfg),
            None,
        )
    } else {
        let a = analyze_file(path, &cfg)?;
        let reader = numaff_behave::TraceReader::open(path)?;
        let recorded_here = reader
            .meta()
            .machine
            .as_deref()
            .and_then(|t| numaff_machine::file::from_toml_str(t, "the trace's machine").ok())
            .is_some_and(|m| mapping::fingerprint(&m) == mapping::fingerprint(machine));
        let current = if recorded_here {
            let mut last = std::collections::HashMap::new();
            for batch in reader {
                for x in batch? {
                    last.insert((x.pid, x.tid), x.cpu);
                }
            }
            let pus = machine.pus();
            a.threads
                .iter()
                .map(|t| {
                    last.get(&(t.pid, t.tid))
                        .copied()
                        .filter(|&c| pus.contains(c))
                })
                .collect::<Option<Placement>>()
        } else {
            None
        };
        (a, current)
    };
    if a.threads.is_empty() {
        bail!(
            "{}: the trace has no samples, so no communication to map",
            path.display()
        );
    }
    let comm = CommMatrix::from_rows(&a.communication_matrix)
        .with_context(|| format!("{}: the trace's matrix is not square", path.display()))?;
    let groups = a.groups.as_ref().map(|gs| {
        gs.iter()
            .map(|g| {
                g.iter()
                    .map(|p| numaff_policy::deloc::Pair {
                        a: p.a,
                        b: p.b,
                        comm: p.bytes,
                    })
                    .collect()
            })
            .collect()
    });
    Ok(TraceInput {
        comm,
        groups,
        tids: a.threads.iter().map(|t| t.tid).collect(),
        kind: if message_trace {
            "MPI ranks"
        } else {
            "threads"
        },
        current,
    })
}

/// The line that says the PUs are oversubscribed, when there are more tasks than PUs: the figures
/// then compare placements in which tasks share PUs.
fn oversubscribed(tasks: usize, pus: usize) -> Option<String> {
    (tasks > pus && pus > 0).then(|| {
        format!(
            "PUs oversubscribed: {tasks} tasks on {pus} PUs, {:.2} tasks per PU: tasks share \
             PUs in every placement below, and the costs compare such placements",
            tasks as f64 / pus as f64
        )
    })
}

/// The algorithms that need no communication matrix (`--tasks N` is enough), in words.
fn no_matrix_algorithms() -> String {
    Algorithm::ALL
        .iter()
        .filter(|a| !a.needs_comm() && !matches!(a, Algorithm::Cimar | Algorithm::Nimar))
        .map(|a| a.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// One algorithm's placement of `tasks` tasks and, with a communication matrix, its costs.
#[allow(clippy::too_many_arguments)]
fn figures(
    algo: Algorithm,
    machine: &Machine,
    tree: &Tree,
    tasks: usize,
    comm: Option<&CommMatrix>,
    current: Option<&Placement>,
    groups: Option<&[Vec<numaff_policy::deloc::Pair>]>,
    seed: u64,
) -> Figures {
    let mut input = match comm {
        Some(c) => MapInput::with_comm(machine, c),
        None => MapInput::new(machine, tasks),
    };
    input.seed = seed;
    input.current = current;
    input.groups = groups;
    match numaff_policy::map(algo, &input) {
        Ok(p) => Figures {
            algorithm: algo.name().to_string(),
            hop_cost: comm.map(|c| quality::hop_cost(tree, c, &p)),
            latency_cost: comm.and_then(|c| quality::latency_cost(machine, c, &p)),
            shares: comm.map(|c| quality::shares(machine, c, &p)),
            busiest_edge: comm.and_then(|c| quality::busiest_edge(tree, c, &p)),
            tasks_per_node: quality::tasks_per_node(machine, &p),
            tasks_per_pu: quality::tasks_per_pu(tree, &p),
            moved: current.map(|c| quality::moved_threads(tree, c, &p)),
            placement: p,
            error: None,
        },
        Err(e) => Figures {
            algorithm: algo.name().to_string(),
            placement: Vec::new(),
            hop_cost: None,
            latency_cost: None,
            shares: None,
            busiest_edge: None,
            tasks_per_node: Vec::new(),
            tasks_per_pu: Vec::new(),
            moved: None,
            error: Some(e.to_string()),
        },
    }
}

fn header(m: &Machine, tasks: usize, matrix: Option<&str>, what: &str) -> String {
    let from = match matrix {
        Some(matrix) => {
            let file = Path::new(matrix)
                .file_name()
                .map_or(matrix.to_string(), |f| f.to_string_lossy().into_owned());
            format!("from {file}")
        }
        None => "(--tasks, no communication matrix: no costs)".to_string(),
    };
    format!(
        "{what} on {} ({}), {tasks} tasks {from}\n",
        m.name,
        mapping::summary(m)
    )
}

fn join(v: &[u32]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

fn pct(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{:.0}%", 100.0 * v))
}

fn num(x: Option<f64>) -> String {
    match x {
        None => "-".into(),
        Some(v) if v.abs() >= 1e6 => format!("{v:.3e}"),
        Some(v) if v.fract() == 0.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.1}"),
    }
}

/// The figures as a table; the first row's hop cost is the reference of the "vs best" column.
fn table(rows: &[Figures]) -> String {
    let best = rows
        .iter()
        .filter_map(|r| r.hop_cost)
        .fold(f64::INFINITY, f64::min);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<12} {:>10} {:>8} {:>12} {:>7} {:>8} {:>7}  {:<16} tasks per node",
        "algorithm",
        "hop cost",
        "vs best",
        "latency cost",
        "in core",
        "in cache",
        "in node",
        "busiest edge"
    );
    for r in rows {
        if let Some(e) = &r.error {
            let why = e.split_once(": ").map_or(e.as_str(), |(_, w)| w);
            let _ = writeln!(out, "{:<12} {:>10}  ({why})", r.algorithm, "-");
            continue;
        }
        let vs = match r.hop_cost {
            Some(h) if best > 0.0 && best.is_finite() => format!("{:.2}x", h / best),
            Some(_) => "1.00x".into(),
            None => "-".into(),
        };
        let edge = r.busiest_edge.as_ref().map_or("-".to_string(), |e| {
            let pus: numaff_machine::CpuSet = e.pus.iter().copied().collect();
            format!("{} {}", e.level, pus)
        });
        let per_node: Vec<String> = r
            .tasks_per_node
            .iter()
            .map(|(n, c)| format!("{n}:{c}"))
            .collect();
        let s = r.shares;
        let _ = writeln!(
            out,
            "{:<12} {:>10} {:>8} {:>12} {:>7} {:>8} {:>7}  {:<16} {}",
            r.algorithm,
            num(r.hop_cost),
            vs,
            num(r.latency_cost),
            pct(s.map(|s| s.core)),
            pct(s.and_then(|s| s.cache)),
            pct(s.map(|s| s.node)),
            edge,
            per_node.join(" ")
        );
    }
    out
}
