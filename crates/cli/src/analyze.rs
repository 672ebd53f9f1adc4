//! `numaff analyze TRACE [--html report.html] [--json]`: DeLocProf's analysis of a trace (002 ch. 2)
//! on kMAF's tables (000 §4.3) — the communication matrix, clusters of events in time, the metrics
//! and class — with a self-contained HTML report and each of its figures as SVG and PNG.
//!
//! The text output is in [`text`], the figures in [`figures`], the HTML report in [`report`].

mod figures;
mod report;
mod text;

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;

use numaff_behave::analyze::{analyze_file, analyze_messages, AnalyzeConfig};
use numaff_behave::{messages, TraceMeta, TraceReader};

use report::write_report;
use text::render_text;

#[derive(Args)]
pub struct AnalyzeArgs {
    /// The trace (Parquet, as `numaff profile` writes, or CSV with a header line), or a CSV of MPI
    /// messages with the header time_ns,sender,receiver,bytes (README "numaff analyze").
    #[arg(value_name = "TRACE")]
    trace: PathBuf,
    /// Write a self-contained HTML report here, and each figure beside it as SVG and PNG
    /// (REPORT-matrix.svg, ...).
    #[arg(long, value_name = "REPORT.html")]
    html: Option<PathBuf>,
    /// Print the analysis as JSON.
    #[arg(long)]
    json: bool,
    /// Interval of CommDyn (changes of the task order between intervals), in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
    interval: f64,
}

pub fn run(args: &AnalyzeArgs) -> Result<()> {
    // The report and its figures are checked before the trace is read.
    for p in args.html.iter().flat_map(|h| report::output_paths(h)) {
        crate::output::check(&p)?;
    }
    if !(args.interval > 0.0 && args.interval.is_finite()) {
        bail!(
            "--interval takes a positive number of seconds, not {}",
            args.interval
        );
    }
    let cfg = AnalyzeConfig {
        interval_ns: ((args.interval * 1e9) as u64).max(1),
        groups: args.json,
        ..AnalyzeConfig::default()
    };
    // A CSV whose header names a `sender` is a trace of MPI messages (numaff_behave::messages).
    let (meta, a) = if messages::is_message_trace(&args.trace)? {
        let m = messages::read_messages(&args.trace)?;
        (TraceMeta::default(), analyze_messages(&m, &cfg))
    } else {
        let meta = TraceReader::open(&args.trace)?.meta().clone();
        let a = analyze_file(&args.trace, &cfg)?;
        (meta, a)
    };
    if args.json {
        let doc = serde_json::json!({
            "trace": args.trace,
            "command": meta.command,
            "machine": meta.machine,
            "threads": a.threads,
            "nodes": a.nodes,
            "comm_source": a.comm_source,
            "communication_matrix": a.communication_matrix,
            "events": a.events,
            "clusters": a.clustering.k,
            "cluster_means_ns": a.clustering.means,
            "groups": a.groups,
            "metrics": a.metrics,
            "class": a.class,
            "advice": a.advice,
            "pages": a.pages,
            "coverage": a.coverage,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{}", render_text(&args.trace, &a, args.interval));
    }
    if let Some(html) = &args.html {
        let written = write_report(html, &args.trace, &meta, &a)?;
        let msg = format!(
            "numaff: wrote {} and {} figure files beside it",
            html.display(),
            written
        );
        if args.json {
            eprintln!("{msg}");
        } else {
            println!("{msg}");
        }
    }
    Ok(())
}
