//! `numaff show PID...`: per thread (cpu, node, cpu use) and per mapping (pages per node, policy)
//! for each process, plus its pages per node in total — numastat -p, per thread and per mapping.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;
use serde::Serialize;

use numaff_linux::view::{self, ProcessView};
use numaff_machine::file::Size;
use numaff_machine::Machine;

#[derive(Args)]
pub struct ShowArgs {
    /// Process ids to show (`$$` is this shell).
    #[arg(required = true, value_name = "PID")]
    pids: Vec<i32>,
    /// Print JSON (with --watch, one JSON document per line and refresh).
    #[arg(long)]
    json: bool,
    /// Refresh every SECONDS until every process has exited (Ctrl-C stops).
    #[arg(long, value_name = "SECONDS")]
    watch: Option<f64>,
    /// Also list mappings that have no page in memory.
    #[arg(long)]
    all: bool,
    /// How long to watch the threads to compute their cpu use, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 0.2)]
    cpu_window: f64,
}

#[derive(Serialize)]
struct ShowJson<'a> {
    processes: &'a [ProcessView],
    errors: Vec<String>,
}

pub fn run(args: &ShowArgs) -> Result<()> {
    if !(args.cpu_window >= 0.0 && args.cpu_window.is_finite()) {
        bail!(
            "--cpu-window must be a number of seconds >= 0, not {}",
            args.cpu_window
        );
    }
    if let Some(w) = args.watch {
        if !(w > 0.0 && w.is_finite()) {
            bail!("--watch takes a positive number of seconds, not {w}");
        }
    }
    let machine = numaff_machine::discover_host()?;
    let window = (args.cpu_window > 0.0).then(|| Duration::from_secs_f64(args.cpu_window));
    let clear = args.watch.is_some() && !args.json && std::io::stdout().is_terminal();
    let mut refreshes = 0u64;
    loop {
        let (processes, errors) = read_all(&args.pids, &machine, window);
        if args.watch.is_some() && refreshes > 0 && processes.is_empty() {
            eprintln!("numaff: every process shown has exited");
            return Ok(());
        }
        refreshes += 1;
        if args.json {
            let doc = ShowJson {
                processes: &processes,
                errors: errors.clone(),
            };
            if args.watch.is_some() {
                println!("{}", serde_json::to_string(&doc)?);
            } else {
                println!("{}", serde_json::to_string_pretty(&doc)?);
            }
        } else {
            if clear {
                print!("\x1b[2J\x1b[H");
            }
            print!("{}", render(&processes, &machine, args.all));
            // With nothing shown the errors are the command's error, printed once below.
            if !processes.is_empty() || args.watch.is_some() {
                for e in &errors {
                    eprintln!("numaff: {e}");
                }
            }
        }
        match args.watch {
            Some(secs) if !processes.is_empty() => {
                std::thread::sleep(Duration::from_secs_f64(secs))
            }
            _ => {
                if !errors.is_empty() && processes.is_empty() {
                    bail!("{}", errors.join("; "));
                }
                if !errors.is_empty() {
                    // Some processes were shown; still say that not all could be.
                    std::process::exit(1);
                }
                return Ok(());
            }
        }
    }
}

fn read_all(
    pids: &[i32],
    machine: &Machine,
    window: Option<Duration>,
) -> (Vec<ProcessView>, Vec<String>) {
    let mut processes = Vec::new();
    let mut errors = Vec::new();
    for &pid in pids {
        match view::process(pid, machine, window) {
            Ok(p) => processes.push(p),
            Err(e) => errors.push(e.to_string()),
        }
    }
    (processes, errors)
}

/// The text view of the processes.
pub fn render(processes: &[ProcessView], machine: &Machine, all: bool) -> String {
    let mut out = String::new();
    for p in processes {
        let nodes: BTreeSet<u32> = machine
            .nodes
            .iter()
            .map(|n| n.id)
            .chain(p.pages_per_node.keys().copied())
            .collect();
        let total: u64 = p.pages_per_node.values().sum();
        let _ = writeln!(
            out,
            "pid {} ({} thread{}, {} in memory): {}",
            p.pid,
            p.threads.len(),
            if p.threads.len() == 1 { "" } else { "s" },
            Size(total * machine.page_size).human(),
            p.command
        );
        let shares: Vec<String> = nodes
            .iter()
            .map(|n| {
                let pages = p.pages_per_node.get(n).copied().unwrap_or(0);
                let pct = if total > 0 {
                    100.0 * pages as f64 / total as f64
                } else {
                    0.0
                };
                format!(
                    "node {n} {} ({pct:.0}%)",
                    Size(pages * machine.page_size).human()
                )
            })
            .collect();
        let _ = writeln!(out, "  memory per node: {}", shares.join(", "));
        let _ = writeln!(
            out,
            "  {:>8}  {:<16} {:>4} {:>4} {:>6}",
            "tid", "name", "cpu", "node", "cpu%"
        );
        for t in &p.threads {
            let node = t.node.map_or("-".to_string(), |n| n.to_string());
            let cpu = t.cpu_percent.map_or("-".to_string(), |c| format!("{c:.1}"));
            let _ = writeln!(
                out,
                "  {:>8}  {:<16} {:>4} {:>4} {:>6}",
                t.tid, t.name, t.cpu, node, cpu
            );
        }
        let mut header = format!("  {:<33} {:<6} {:<16}", "mapping", "kind", "policy");
        for n in &nodes {
            let _ = write!(header, " {:>8}", format!("node{n}"));
        }
        header.push_str("  path");
        let _ = writeln!(out, "{header}");
        let mut hidden = 0;
        for m in &p.mappings {
            if !all && m.pages_per_node.values().all(|&v| v == 0) {
                hidden += 1;
                continue;
            }
            let mut line = format!(
                "  {:<33} {:<6} {:<16}",
                format!("{:#x}-{:#x}", m.start, m.end),
                m.kind,
                m.policy
            );
            for n in &nodes {
                let _ = write!(
                    line,
                    " {:>8}",
                    m.pages_per_node.get(n).copied().unwrap_or(0)
                );
            }
            if let Some(path) = &m.path {
                let _ = write!(line, "  {path}");
            }
            if m.huge || m.page_size != machine.page_size {
                let _ = write!(line, " ({} pages)", Size(m.page_size).human());
            }
            let _ = writeln!(out, "{}", line.trim_end());
        }
        if hidden > 0 {
            let _ = writeln!(
                out,
                "  ({hidden} mappings with no page in memory not shown; --all shows them)"
            );
        }
        let _ = writeln!(
            out,
            "  (page counts in pages of {} unless noted)",
            Size(machine.page_size).human()
        );
        out.push('\n');
    }
    out
}
