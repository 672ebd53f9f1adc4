//! libnumaff's performance figure: allocation + placement of an array under each policy, relative
//! to malloc + first touch in the same run, here and in a 4-node QEMU guest (bench/place.c).
//! A measurement, not a test: `cargo bench -p numaff-capi --bench place`; NUMAFF_PLACE_MIB (default
//! 1024) sets the size here, NUMAFF_PLACE_GUEST_MIB (default 1024) in the guest, NUMAFF_PLACE_REPS
//! (default 3 here, 1 in the guest) the repetitions.
#![allow(clippy::unwrap_used)] // a measurement driver: a failure should stop it loudly

#[path = "../tests/common/mod.rs"]
mod common;

use std::process::Command;

use numaff_testvm::Guest;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let mib = env_u64("NUMAFF_PLACE_MIB", 1024);
    let guest_mib = env_u64("NUMAFF_PLACE_GUEST_MIB", 1024);
    let reps = env_u64("NUMAFF_PLACE_REPS", 3);
    // In the target dir, whose path the guest mirrors (the program's rpath points there).
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let exe = dir.path().join("place");
    common::compile(&common::crate_dir().join("bench/place.c"), &exe, &["-O2"]);

    println!("here ({}):", common::profile_dir().display());
    let out = common::run(Command::new(&exe).args([mib.to_string(), reps.to_string()]));
    print!("{out}");

    // 4 nodes x 1 cpu; each node can hold half the array besides the guest's own memory.
    let node_mib = guest_mib / 2 + 256;
    let guest = Guest::new(4, 1, node_mib).timeout(590).file(&exe, "/place");
    let command = format!("/place {guest_mib} 1");
    match guest.run(&["sh", "-c", &command]) {
        Ok(run) => {
            println!(
                "guest: 4 nodes x 1 cpu x {node_mib} MiB (TCG), {:.1} s, exit {}:",
                run.seconds, run.exit_code
            );
            print!("{}", run.output);
            if run.exit_code != 0 {
                std::process::exit(1);
            }
        }
        Err(e) => {
            eprintln!("place benchmark in a guest: {e}");
            std::process::exit(1);
        }
    }
}
