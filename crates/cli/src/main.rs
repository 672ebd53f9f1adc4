//! The `numaff` binary: parses the command line and calls the crates. Kept thin on purpose;
//! each subcommand lives in its own module.

mod analyze;
mod demo;
mod show;
mod topo;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// numaff places the threads and memory pages of parallel programs on NUMA machines.
///
/// Start with `numaff demo`. Every `--machine` option takes a machine file, an hwloc XML export, a
/// catalog name (`numaff topo --list`), an hwloc synthetic description such as
/// "pack:2 numa:2 core:4 pu:2", or "host".
#[derive(Parser)]
#[command(name = "numaff", version, about, long_about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show what numaff sees: this machine next to one of the papers' machines.
    Demo(demo::DemoArgs),
    /// Show, export, import or measure a machine topology (nodes, packages, caches, cores, PUs).
    #[command(after_help = "Examples:
  numaff topo                               this machine: tree, distances, NUMA factor
  numaff topo --list                        the papers' machines
  numaff topo --machine laso-hpl --json     a catalog machine as JSON
  numaff topo --machine \"pack:2 numa:2 core:4 pu:2\"
  numaff topo --from-hwloc lstopo.xml --export machine.toml
  numaff topo --measure --export host.toml  measure latency/bandwidth and save them")]
    Topo(topo::TopoArgs),
    /// Show where the threads and pages of running processes are: per thread its cpu and node, per
    /// mapping its pages per node and memory policy, and the total per node.
    #[command(after_help = "Examples:
  numaff show $$                     this shell
  numaff show --json 812 913         two processes as JSON
  numaff show --watch 1 812          refresh every second until 812 exits")]
    Show(show::ShowArgs),
    /// Analyse a trace of memory-access samples (DeLocProf): the communication matrix between
    /// threads, clusters of communication in time, the metrics Lcomm, CommR, CommC, DramR, CommLoc,
    /// CommDyn, the class (Non-mapping, Static, Dynamic) and the page-usage pattern.
    #[command(after_help = "Examples:
  numaff analyze trace.parquet                       metrics, class, heaviest pairs
  numaff analyze trace.parquet --json                the same as JSON (communication_matrix, ...)
  numaff analyze trace.parquet --html report.html    a report, and report-*.svg/png figures
  numaff analyze samples.csv --interval 0.1          a CSV trace; CommDyn over 100 ms intervals")]
    Analyze(analyze::AnalyzeArgs),
}

fn main() -> ExitCode {
    // Die quietly on a closed pipe (`numaff topo | head`) like other Unix tools, instead of
    // panicking in println!.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(args) => demo::run(&args),
        Command::Topo(args) => topo::run(&args),
        Command::Show(args) => show::run(&args),
        Command::Analyze(args) => analyze::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("numaff: error: {}", describe(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes, skipping a cause whose text the message above it already includes.
fn describe(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let s = cause.to_string();
        if text.contains(&s) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&s);
    }
    text
}
