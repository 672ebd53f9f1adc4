//! The `numaff` binary: parses the command line and calls the crates. Kept thin on purpose;
//! each subcommand lives in its own module.

mod analyze;
mod apply;
mod demo;
mod demo_ring;
mod map;
mod mapp;
mod output;
mod profile;
mod show;
mod sim;
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
    /// Compute a thread mapping from a communication matrix, judge it against compact and scatter,
    /// save it and export it to launcher syntax (OpenMP, Open MPI, Slurm, likwid-pin).
    #[command(after_help = "Examples:
  numaff map --algo locality --matrix comm.csv -o app.toml   map on this machine and save
  numaff map --compare --matrix comm.csv --machine laso-hpl  every algorithm, one table
  numaff map --algo eagermap --matrix comm.csv --export omp  OMP_PLACES on stdout
  numaff map --from app.toml --export rankfile > ranks       an Open MPI rankfile
  numaff map --algo locality --trace run.parquet -o app.toml the matrix of a numaff profile trace")]
    Map(map::MapArgs),
    /// Run a program with its threads pinned to a mapping file, in creation order (the main thread
    /// first), following threads created later and child processes. Exits with the program's status.
    #[command(after_help = "Examples:
  numaff apply app.toml -- ./solver input.dat
  numaff apply app.toml --skip 0x2 -- ./omp_prog     leave the 2nd created thread unpinned
  numaff apply app.toml -v -- ./prog                 report every thread as it is pinned")]
    Apply(apply::ApplyArgs),
    /// Run a workload on a simulated machine (one of the papers' machines) with a static thread and
    /// data placement and print what the papers measure: makespan, local/remote accesses, LLC
    /// misses, memory-controller queueing, interconnect volume, c2c transfers, migrations, energy.
    #[command(after_help = "Examples:
  numaff sim --list-workloads
  numaff sim --machine kmaf-sim-4x2 --workload nas-sp --threads compact --data oracle-local
  numaff sim --machine laso-hpl --workload parsec-streamcluster --data interleave --json
  numaff sim --machine kmaf-sim-4x2 --workload my.toml --threads 0,2,4,6 --data bind:0
  numaff sim --machine laso-hpl --workload nas-sp --seeds 5      the os baseline over 5 seeds
  numaff sim --machine kmaf-sim-4x2 --workload nas-sp --threads compact --threads scatter
      --data oracle-local --data oracle-remote      four placements compared (kMAF Fig. 1)
  numaff sim --machine kmaf-sim-4x2 --workload nas-sp --threads eagermap --data oracle
                                                 kMAF's Oracle: EagerMap threads, oracle pages
  numaff sim --machine kmaf-sim-4x2 --workload nas-sp --threads map:m.toml   a mapping file
  numaff sim --machine laso-lpl --measure        the simulated MLC matrices
  numaff sim --machine laso-hpl --trace rec.parquet --threads recorded   replay a recorded trace")]
    Sim(sim::SimArgs),
    /// Analyse a trace of memory-access samples (DeLocProf): the communication matrix between
    /// threads, clusters of communication in time, the metrics Lcomm, CommR, CommC, DramR, CommLoc,
    /// CommDyn, the class (Non-mapping, Static, Dynamic) and the page-usage pattern.
    #[command(after_help = "Examples:
  numaff analyze trace.parquet                       metrics, class, heaviest pairs
  numaff analyze trace.parquet --json                the same as JSON (communication_matrix, ...)
  numaff analyze trace.parquet --html report.html    a report, and report-*.svg/png figures
  numaff analyze samples.csv --interval 0.1          a CSV trace; CommDyn over 100 ms intervals
  numaff analyze messages.csv                        MPI messages (time_ns,sender,receiver,bytes)")]
    Analyze(analyze::AnalyzeArgs),
    /// MApp (Minas): rewrite the large static arrays of a C file into libnumaff allocations placed
    /// with the memory policy the machine calls for (cyclic or bind_block), and report why.
    #[command(after_help = "Examples:
  numaff mapp solver.c -o solver_numa.c                     for this machine
  numaff mapp solver.c -o out.c --machine minas-opteron     for a catalog machine
  numaff mapp solver.c -o out.c --report                    what changed and why, per array
  numaff mapp solver.c --json -o out.c                      the report as JSON
Build the output against libnumaff: gcc -fopenmp out.c $(pkg-config --cflags --libs numaff)")]
    Mapp(mapp::MappArgs),
    /// Sample a program's memory accesses (page faults through perf_event_open, or PEBS / IBS
    /// where the PMU has them) into a trace for `numaff analyze`: its threads, the pages they touch
    /// and the node they ran on.
    #[command(after_help = "Examples:
  numaff profile -- ./solver input.dat              writes trace.parquet
  numaff profile -o run.parquet --duration 10s -- ./server
  numaff profile --pid 812 --duration 30s           a running process
  numaff profile --sample-period 8 -- ./solver      one page fault in 8: less overhead
  numaff profile --sampler pebs -- ./solver         Intel PEBS loads and stores (untested on hardware)
  numaff profile --list-samplers                    which samplers work here, and why not")]
    Profile(profile::ProfileArgs),
    /// The program `numaff demo` profiles (threads in a ring); not for users.
    #[command(hide = true)]
    DemoRing(demo_ring::DemoRingArgs),
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
        Command::Map(args) => map::run(&args),
        Command::Sim(args) => sim::run(&args),
        Command::Mapp(args) => mapp::run(&args),
        Command::Apply(args) => match apply::run(&args) {
            Ok(code) => return ExitCode::from(code),
            Err(e) => Err(e),
        },
        Command::Analyze(args) => analyze::run(&args),
        Command::Profile(args) => match profile::run(&args) {
            Ok(code) => return ExitCode::from(code),
            Err(e) => Err(e),
        },
        Command::DemoRing(args) => demo_ring::run(&args),
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
