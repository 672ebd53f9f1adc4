//! move_pages pages/s per batch size in a 2-node QEMU guest, relative to the largest
//! batch. A measurement, not a test: `cargo bench -p numaff-testvm --bench move_pages`.

use numaff_testvm::Guest;

fn main() {
    let payload = env!("CARGO_BIN_EXE_numaff-guest");
    let guest = Guest::new(2, 2, 512)
        .kernel_arg("numa_balancing=disable")
        .timeout(400)
        .file(payload, "/numaff-guest");
    let command = "/numaff-guest bench --pages 16384 --batches 1,16,64,256,1024,4096 --reps 5";
    let run = match guest.run(&["sh", "-c", command]) {
        Ok(run) => run,
        Err(e) => {
            eprintln!("move_pages benchmark: {e}");
            std::process::exit(1);
        }
    };
    println!(
        "guest: 2 nodes x 2 cpus x 512 MiB, {:.1} s, exit {}",
        run.seconds, run.exit_code
    );
    println!("{:>6} {:>12} {:>9}", "batch", "pages/s", "relative");
    for line in run.output.lines() {
        if let Some(rest) = line.strip_prefix("bench.batch=") {
            let mut it = rest.split_whitespace();
            let batch = it.next().unwrap_or("?");
            let rate = it.next().unwrap_or("").trim_start_matches("pages_per_s:");
            let rel = it.next().unwrap_or("").trim_start_matches("relative:");
            println!("{batch:>6} {rate:>12} {rel:>9}");
        } else if let Some(rest) = line.strip_prefix("bench.numaff=") {
            println!("numaff's move_to_node: {rest}");
        } else if let Some(rest) = line.strip_prefix("bench.sample=") {
            println!("  {rest}");
        }
    }
    if run.exit_code != 0 {
        eprintln!("{}", run.output);
        std::process::exit(1);
    }
}
