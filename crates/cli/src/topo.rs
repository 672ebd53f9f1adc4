//! `numaff topo`: show a machine (the host, a machine file, a catalog machine, an hwloc export or a
//! synthetic description) as a tree or JSON, list the catalog, export machine files, measure.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;

use indicatif::{ProgressBar, ProgressStyle};
use numaff_machine::hostmeasure::{self, MeasureOptions, Measurement};
use numaff_machine::{catalog, file, render, spec, Machine};

#[derive(Args)]
pub struct TopoArgs {
    /// Show this machine instead of the host: a machine file, an hwloc XML export, a catalog name,
    /// or an hwloc synthetic description such as "pack:4 core:8 pu:2".
    #[arg(long, value_name = "MACHINE", conflicts_with_all = ["from_hwloc", "sysfs"])]
    machine: Option<String>,
    /// Import an hwloc XML export (`lstopo --of xml > FILE.xml`).
    #[arg(long, value_name = "FILE.xml", conflicts_with = "sysfs")]
    from_hwloc: Option<PathBuf>,
    /// Read the topology from a sysfs tree under ROOT (ROOT/sys/devices/system/...) instead of hwloc;
    /// `--sysfs /` reads this machine without hwloc.
    #[arg(long, value_name = "ROOT")]
    sysfs: Option<PathBuf>,
    /// List the catalog of the papers' machines with their sources.
    #[arg(long, conflicts_with_all = ["machine", "from_hwloc", "sysfs", "export"])]
    list: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Write the machine to a file, in the format its extension names: .toml, a machine file (with
    /// measured matrices, if --measure); .xml, hwloc XML (for lstopo and hwloc-calc).
    #[arg(long, value_name = "FILE.toml|FILE.xml")]
    export: Option<PathBuf>,
    /// Measure memory latency (pointer chase) and read bandwidth (all PUs of a node streaming) from
    /// every cpu node to every memory node of this machine, like Intel MLC. Takes a few seconds per
    /// pair of nodes; combine with --export to store the matrices in a machine file.
    #[arg(long, conflicts_with_all = ["machine", "from_hwloc"])]
    measure: bool,
    /// Buffer per memory node for --measure (default: max(8 x last-level cache, 256 MiB), at most a
    /// quarter of the node's memory), e.g. "512 MiB".
    #[arg(long, value_name = "SIZE", requires = "measure", value_parser = parse_size)]
    buffer: Option<u64>,
    /// Reading threads per node for the bandwidth measurement (default: every PU of the node).
    #[arg(long, value_name = "N", requires = "measure")]
    threads: Option<usize>,
    /// Timed repeats of each measurement; the median is reported (default 5).
    #[arg(long, value_name = "N", requires = "measure")]
    repeats: Option<u32>,
}

fn parse_size(text: &str) -> std::result::Result<u64, String> {
    file::Size::parse(text).map(|s| s.0)
}

/// What `--json` prints for one machine.
#[derive(Serialize)]
struct TopoJson<'a> {
    machine: &'a Machine,
    summary: numaff_machine::Summary,
    /// Every PU with its core (logical index), package and node.
    pus: Vec<PuJson>,
}

#[derive(Serialize)]
struct PuJson {
    os_index: u32,
    core: usize,
    package: u32,
    node: Option<u32>,
}

pub fn run(args: &TopoArgs) -> Result<()> {
    if args.list {
        return list(args.json);
    }
    let export = args.export.as_deref().map(ExportFormat::of).transpose()?;
    crate::output::check_opt(args.export.as_deref())?;
    let mut machine = load(args)?;
    let measurement = if args.measure {
        let m = run_measure(&machine, args)?;
        m.apply_to(&mut machine);
        Some(m)
    } else {
        None
    };
    if let (Some(path), Some(format)) = (&args.export, export) {
        match format {
            ExportFormat::Toml => file::save(&machine, path),
            ExportFormat::HwlocXml => numaff_machine::hwloc_xml::save(&machine, path),
        }
        .with_context(|| format!("cannot export the machine to {}", path.display()))?;
        if !args.json {
            eprintln!("numaff: wrote {} ({})", path.display(), machine.name);
        }
    }
    if args.json {
        let mut value = serde_json::to_value(to_json(&machine))?;
        if let (Some(m), Some(obj)) = (&measurement, value.as_object_mut()) {
            obj.insert("measurement".into(), serde_json::to_value(m)?);
        }
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print!("{}", render::topology(&machine));
        if let Some(m) = &measurement {
            print_measurement(m);
        }
    }
    Ok(())
}

/// What `--export` writes, by the file's extension.
#[derive(Clone, Copy)]
enum ExportFormat {
    Toml,
    HwlocXml,
}

impl ExportFormat {
    fn of(path: &Path) -> Result<Self> {
        let ext = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase());
        match ext.as_deref() {
            Some("toml") => Ok(ExportFormat::Toml),
            Some("xml") => Ok(ExportFormat::HwlocXml),
            _ => anyhow::bail!(
                "--export {}: name the format by the extension: FILE.toml for a numaff machine \
                 file, FILE.xml for hwloc XML",
                path.display()
            ),
        }
    }
}

/// Measures with a progress bar on stderr (hidden when stderr is not a terminal).
fn run_measure(machine: &Machine, args: &TopoArgs) -> Result<Measurement> {
    let mut opts = MeasureOptions {
        buffer_bytes: args.buffer,
        bandwidth_threads: args.threads,
        ..MeasureOptions::default()
    };
    if let Some(r) = args.repeats {
        opts.repeats = r;
    }
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} measuring [{bar:30}] {pos}/{len} {msg} ({elapsed})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    let result = hostmeasure::measure(machine, &opts, &mut |p| {
        bar.set_length(p.total as u64);
        bar.set_position(p.done as u64);
        if !p.finished {
            bar.set_message(p.to_string());
        }
    });
    bar.finish_and_clear();
    result.context("cannot measure this machine's latency and bandwidth")
}

fn print_measurement(m: &Measurement) {
    let buffers: Vec<String> = m
        .buffer_bytes
        .iter()
        .map(|&b| file::Size(b).to_string())
        .collect();
    println!(
        "\nMeasured in {:.1} s: median of {} repeats per cell; buffers {}; bandwidth threads {}.",
        m.seconds,
        m.repeats,
        buffers.join(", "),
        m.threads
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    );
    let ids = &m.nodes;
    let spread = |s: &Vec<Vec<hostmeasure::Spread>>| -> Vec<Vec<f64>> {
        s.iter()
            .map(|r| r.iter().map(|c| c.max - c.min).collect())
            .collect()
    };
    println!(
        "{}",
        render::matrix(
            "Latency spread (max - min of repeats, ns)",
            ids,
            &spread(&m.latency_spread_ns),
            1
        )
    );
    println!(
        "{}",
        render::matrix(
            "Bandwidth spread (max - min of repeats, MB/s)",
            ids,
            &spread(&m.bandwidth_spread_mbps),
            0
        )
    );
    for note in &m.notes {
        println!("note: {note}");
    }
}

/// The machine the arguments name: --machine, --from-hwloc, --sysfs, or the host.
fn load(args: &TopoArgs) -> Result<Machine> {
    if let Some(s) = &args.machine {
        return Ok(spec::resolve(s)?);
    }
    if let Some(path) = &args.from_hwloc {
        if !path.is_file() {
            bail!("hwloc XML file {} does not exist; make one with `lstopo-no-graphics --of xml FILE.xml`", path.display());
        }
        return Ok(spec::from_hwloc_xml(path)?);
    }
    if let Some(root) = &args.sysfs {
        return Ok(numaff_machine::sysfs::discover_from(root)?);
    }
    Ok(numaff_machine::discover_host()?)
}

pub fn to_json(m: &Machine) -> impl Serialize + '_ {
    let pus = m
        .cores()
        .enumerate()
        .flat_map(|(core, (package, c))| c.pus.iter().map(move |pu| (pu, core, package)))
        .map(|(pu, core, package)| PuJson {
            os_index: pu,
            core,
            package,
            node: m.node_of_pu(pu),
        })
        .collect();
    TopoJson {
        machine: m,
        summary: m.summary(),
        pus,
    }
}

#[derive(Serialize)]
struct ListEntry {
    name: &'static str,
    description: Option<String>,
    source: Option<String>,
    nodes: usize,
    cores: usize,
    pus: usize,
    numa_factor: Option<numaff_machine::NumaFactor>,
}

fn list(json: bool) -> Result<()> {
    let mut entries = Vec::new();
    for name in catalog::names() {
        let m = catalog::load(name)?;
        let s = m.summary();
        entries.push(ListEntry {
            name,
            description: m.description.clone(),
            source: m.source.clone(),
            nodes: s.nodes,
            cores: s.cores,
            pus: s.pus,
            numa_factor: s.numa_factor,
        });
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&entries)?);
        return Ok(());
    }
    println!(
        "{:<16} {:>5} {:>5} {:>5} {:>11}  source",
        "name", "nodes", "cores", "PUs", "NUMA factor"
    );
    for e in &entries {
        let factor = match e.numa_factor {
            Some(f) if (f.max - f.min).abs() < 0.005 => format!("{:.2}", f.max),
            Some(f) => format!("{:.2}-{:.2}", f.min, f.max),
            None => "-".into(),
        };
        println!(
            "{:<16} {:>5} {:>5} {:>5} {:>11}  {}",
            e.name,
            e.nodes,
            e.cores,
            e.pus,
            factor,
            e.source.as_deref().unwrap_or("")
        );
    }
    println!(
        "\nShow one with `numaff topo --machine NAME`; any --machine option takes these names."
    );
    Ok(())
}
