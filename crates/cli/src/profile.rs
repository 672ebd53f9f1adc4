//! `numaff profile [-o trace.parquet] [--sampler page-faults] [--duration D] -- CMD` (or `--pid PID`):
//! samples a program's memory accesses into a trace for `numaff analyze`.
//!
//! The program is not traced (no ptrace): numaff forks, the child waits on a pipe
//! ([`numaff_linux::launch`]), numaff opens one inherited page-fault event per cpu on the child
//! (enabled at exec, as `perf record` does), then lets it exec. If numaff dies, the events go with
//! it and the program runs on.
//!
//! The steps have a module each: [`plan`] checks the arguments, [`record`] opens the samplers and
//! drains them, [`writer`] writes the trace in the background, [`report`] says what was recorded,
//! and [`import`] converts `perf script` text or a trace instead of sampling.

mod import;
mod plan;
mod record;
mod report;
mod writer;

use anyhow::{Context, Result};

use numaff_behave::{TraceMeta, TraceWriter};
use numaff_linux::induce;
use numaff_linux::sampler;

pub use plan::ProfileArgs;
use plan::Task;
use writer::BackgroundWriter;

/// Records (or imports, or lists samplers); the exit status is the program's (128 + the signal
/// that killed it), 0 when its end was not seen.
pub fn run(args: &ProfileArgs) -> Result<u8> {
    let plan = match Task::from_args(args)? {
        Task::ListSamplers => {
            list_samplers();
            return Ok(0);
        }
        Task::Import { input, output } => return import::run(input, output).map(|()| 0),
        Task::Record(plan) => plan,
    };
    let agent = record::Agent::install(&plan)?;
    let machine = record::discover_machine().context("cannot discover this machine")?;
    let command_line = record::command_line(&plan);
    let mut meta = record::trace_meta(&plan, &machine, &command_line);
    // The trace is created before the program is started: a failure here starts nothing.
    let trace = TraceWriter::create(plan.output, &meta)?;
    let mut target = record::Target::open(&plan, &machine, &agent, command_line)?;
    let thp = report::announce(&plan, &target);
    let mut soft_dirty = record::soft_dirty_rearmer(&plan, target.pid);
    record::stop_on_signals();

    let writer = BackgroundWriter::start(trace);
    let recorded = record::sample(
        &plan,
        &agent,
        &mut target,
        &mut soft_dirty,
        &writer,
        &mut meta,
    )?;
    let mut writer = writer.finish()?;

    let totals = report::Totals::of(&mut target.samplers);
    report::add_rates(&mut meta, &plan, &totals, &recorded, thp);
    let induce_line =
        report::induced_faults(&mut meta, &plan, soft_dirty.as_ref(), &agent, target.pid);
    writer.append_meta(&TraceMeta {
        rates: meta.rates.clone(),
        thread_names: meta.thread_names.clone(),
        ..TraceMeta::default()
    });
    drop(target.samplers);
    writer.finish()?;
    let cpu = report::cpu_times(target.pid, target.cpu_at_start, &recorded);
    report::print_summary(
        &plan,
        &totals,
        &recorded,
        meta.thread_names.len(),
        induce_line,
        cpu,
    );
    Ok(report::exit_code(recorded.status))
}

/// `--list-samplers`: the samplers and the ways of inducing faults, whether each works here and
/// why not, and what `--induce auto` picks.
fn list_samplers() {
    for s in sampler::list_samplers() {
        println!("{s}");
    }
    let opts = induce::options();
    println!();
    println!("induced faults (--induce):");
    for o in &opts {
        println!("{o}");
    }
    println!(
        "--induce auto uses here: {} for a command, {} with --pid",
        induce::choose(&opts, true),
        induce::choose(&opts, false)
    );
}
