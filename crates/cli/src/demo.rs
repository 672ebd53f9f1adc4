//! `numaff demo`: the front door. Shows the machine numaff runs on next to one of the papers' NUMA
//! machines, so a new user sees what numaff knows about both before placing anything.

use anyhow::Result;
use clap::Args;

use numaff_machine::{render, spec};

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
