//! `numaff mapp`: the MApp preprocessor (Minas 004 §3.2): rewrites the large static arrays of a C
//! file into libnumaff allocations placed with the policy the machine calls for.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use numaff_machine::spec;
use numaff_mapp::{transform, Report};

#[derive(Args)]
pub struct MappArgs {
    /// The C file to transform.
    input: PathBuf,
    /// Write the transformed file here (atomically; nothing is written on error). Without it the
    /// transformed file goes to stdout and the report to stderr.
    #[arg(short, long, value_name = "OUT.c")]
    output: Option<PathBuf>,
    /// The machine to choose the policy and the size threshold for (default: this machine): a
    /// machine file, an hwloc XML export, a catalog name or a synthetic description.
    #[arg(long, value_name = "MACHINE", default_value = "host")]
    machine: String,
    /// Print the full report: the policy and why, the size threshold, and every file-scope array
    /// with its line, size, and whether and why it was rewritten (without it: one summary line).
    #[arg(long)]
    report: bool,
    /// Print the full report as JSON (implies --report).
    #[arg(long)]
    json: bool,
}

pub fn run(args: &MappArgs) -> Result<()> {
    let out = crate::output::check_opt(args.output.as_deref())?;
    let machine = spec::resolve(&args.machine)
        .with_context(|| format!("cannot load machine {:?}", args.machine))?;
    let meta = std::fs::metadata(&args.input)
        .with_context(|| format!("cannot read {}", args.input.display()))?;
    if meta.len() > numaff_mapp::MAX_INPUT_BYTES as u64 {
        anyhow::bail!(
            "{}: {} bytes; MApp takes C files up to {} bytes",
            args.input.display(),
            meta.len(),
            numaff_mapp::MAX_INPUT_BYTES
        );
    }
    let bytes = std::fs::read(&args.input)
        .with_context(|| format!("cannot read {}", args.input.display()))?;
    let source = String::from_utf8(bytes)
        .map_err(|e| anyhow::anyhow!("{}: not UTF-8 text: {e}", args.input.display()))?;
    let t = transform(&source, &machine)
        .map_err(|e| anyhow::anyhow!("{}:{e}", args.input.display()))?;
    let input = args.input.display().to_string();
    let report = if args.json {
        serde_json::to_string_pretty(&t.report)? + "\n"
    } else if args.report {
        text_report(&t.report, &input)
    } else {
        summary(&t.report, &input)
    };
    match &out {
        Some(out) => {
            crate::output::write(out, t.output.as_bytes())?;
            print!("{report}");
        }
        None => {
            print!("{}", t.output);
            eprint!("{report}");
        }
    }
    Ok(())
}

fn mib(bytes: u64) -> String {
    if bytes < 1 << 20 {
        return format!("{bytes} B");
    }
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// One line: what changed, and where the reasons are.
fn summary(r: &Report, input: &str) -> String {
    let rewritten = r.arrays.iter().filter(|a| a.rewritten).count();
    if !r.changed {
        return format!(
            "{input}: no eligible array ({} file-scope arrays kept); output identical to input \
             (--report says why)\n",
            r.arrays.len()
        );
    }
    format!(
        "{input}: {rewritten} arrays rewritten ({}), {} kept (--report says why)\n",
        r.decision.policy.name(),
        r.arrays.len() - rewritten
    )
}

fn text_report(r: &Report, input: &str) -> String {
    let mut s = format!(
        "policy: {} ({})\nthreshold: {} bytes ({}, the largest cache)\n",
        r.decision.policy.name(),
        r.decision.reason,
        r.threshold_bytes,
        mib(r.threshold_bytes)
    );
    if r.arrays.is_empty() {
        s.push_str(&format!("{input}: no file-scope arrays\n"));
    }
    for a in &r.arrays {
        let size = a.bytes.map(mib).unwrap_or_else(|| "size unknown".into());
        let what = if a.rewritten {
            format!("rewritten, {}", r.decision.policy.name())
        } else {
            "kept".to_string()
        };
        s.push_str(&format!(
            "{input}:{}: {} {} ({size}): {what}: {}\n",
            a.line,
            a.name,
            one_line(&a.declared, DECLARED_CHARS),
            a.reason
        ));
    }
    if !r.changed {
        s.push_str(&format!(
            "{input}: no eligible array; output identical to input\n"
        ));
    }
    s
}

/// The longest declaration the text report shows (`--json` has it whole).
const DECLARED_CHARS: usize = 100;

/// `text` on one line (runs of whitespace, newlines included, become one space), cut to `max`
/// characters with an ellipsis: the report keeps one line per array whatever the sizes' text.
fn one_line(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let mut cut: String = flat.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}
