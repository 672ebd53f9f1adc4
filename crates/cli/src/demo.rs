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
             only show placement on multi-node machines (in QEMU guests and in its simulator)."
        );
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
    Ok(())
}
