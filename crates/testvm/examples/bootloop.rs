//! Boots the same guest again and again and prints the console of any that fails, to catch rare
//! boot hangs (such as the multi-threaded TCG one `guest.rs` avoids). Usage:
//! `cargo run --release -p numaff-testvm --example bootloop -- RUNS [NODES CPUS MIB] [KERNEL_ARG...]`
//! with `SCRIPT` (a busybox sh script; default: print the uptime) and `TIMEOUT` (seconds, 40).
//! `loglevel=5` as a kernel argument keeps the boot quiet but shows a soft lockup's backtrace.
use numaff_testvm::Guest;

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let runs: usize = a.first().and_then(|s| s.parse().ok()).unwrap_or(20);
    let nodes: usize = a.get(1).and_then(|s| s.parse().ok()).unwrap_or(2);
    let cpus: usize = a.get(2).and_then(|s| s.parse().ok()).unwrap_or(2);
    let mib: u64 = a.get(3).and_then(|s| s.parse().ok()).unwrap_or(256);
    let (mut ok, mut bad) = (0, 0);
    for i in 0..runs {
        let timeout = std::env::var("TIMEOUT").ok().and_then(|t| t.parse().ok());
        let mut g = Guest::new(nodes, cpus, mib).timeout(timeout.unwrap_or(40));
        for k in a.iter().skip(4) {
            g = g.kernel_arg(k);
        }
        let script = std::env::var("SCRIPT").unwrap_or_else(|_| "cat /proc/uptime; sleep 1".into());
        match g.run(&["sh", "-c", &script]) {
            Ok(r) => {
                ok += 1;
                println!("run {i}: {:.1} s {}", r.seconds, r.output.trim());
            }
            Err(e) => {
                bad += 1;
                println!("run {i}: FAILED\n{e}");
            }
        }
    }
    println!("ok {ok} bad {bad}");
}
