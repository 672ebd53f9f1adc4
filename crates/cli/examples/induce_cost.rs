//! The cost per induced fault of each `--induce` way numaff ships (README, "numaff profile"):
//! `cargo build -p numaff && cargo run -p numaff --example induce_cost [-- --guest]`.
//!
//! Runs tests/profile/rewrite.c (one thread rewrites a 64 MiB buffer, one write per page per pass)
//! with and without induced faults, in one run, `REPS` times each, and prints per repetition the
//! program's time for the passes and its minor faults (getrusage): cost per induced fault =
//! Δ time / Δ faults. Host: the uffd agent alone (LD_PRELOAD, no sampler) on private and shared
//! memory, then under `numaff profile` (sampler + agent vs sampler alone). `--guest`: the same
//! under `numaff profile` in a 2-node QEMU guest (TCG, Debian's kernel) with soft-dirty re-arming,
//! and soft-dirty faults timed inside one process (tests/profile/selfrearm.c: passes right after
//! `clear_refs` against plain passes, alternated). `--balancing` (root): NUMA-balancing hinting
//! faults on the host (kernel.numa_balancing set to 1 for the measurement, then restored), timed
//! inside one process (tests/profile/hintcost.c: passes that took hinting faults against plain
//! passes), alone and under `numaff profile --induce balancing`; with `--guest` also in the guest.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a measurement program

use std::path::{Path, PathBuf};
use std::process::Command;

use numaff_linux::induce;
use numaff_testvm::Guest;

const REPS: usize = 3;

fn numbers(out: &str) -> (f64, f64) {
    let get = |k: &str| -> f64 {
        out.lines()
            .find_map(|l| l.strip_prefix(k))
            .unwrap_or_else(|| panic!("no {k} in:\n{out}"))
            .trim()
            .parse()
            .unwrap()
    };
    (get("SECONDS "), get("FAULTS "))
}

fn report(label: &str, base: (f64, f64), with: (f64, f64)) {
    let extra = with.1 - base.1;
    println!(
        "{label:<40} base {:.3} s {:>8} faults | induced {:.3} s {:>8} faults | {:.2} µs per induced fault",
        base.0,
        base.1,
        with.0,
        with.1,
        (with.0 - base.0) / extra.max(1.0) * 1e6
    );
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run");
    assert!(out.status.success(), "{cmd:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn main() {
    let guest = std::env::args().any(|a| a == "--guest");
    let balancing = std::env::args().any(|a| a == "--balancing");
    let dir = std::env::temp_dir().join(format!("numaff-induce-cost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/profile/rewrite.c");
    let prog = dir.join("rewrite");
    assert!(Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&prog)
        .arg(&src)
        .status()
        .unwrap()
        .success());
    let selfrearm = dir.join("selfrearm");
    assert!(Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&selfrearm)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/profile/selfrearm.c"))
        .status()
        .unwrap()
        .success());
    let hintcost = dir.join("hintcost");
    assert!(Command::new("cc")
        .args(["-O2", "-pthread", "-o"])
        .arg(&hintcost)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/profile/hintcost.c"))
        .status()
        .unwrap()
        .success());
    let numaff: PathBuf = std::env::var_os("NUMAFF_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| numaff_testvm::host::target_dir().join("debug/numaff"));
    assert!(
        numaff.exists(),
        "{} missing: cargo build -p numaff",
        numaff.display()
    );

    if let Err(e) = induce::uffd_async_probe() {
        println!("host: uffd agent unavailable: {e}");
    } else {
        let agent = induce::install_agent(&dir).unwrap();
        let status = dir.join("status");
        for rep in 0..REPS {
            for kind in ["private", "shared"] {
                let base = numbers(&run(Command::new(&prog).args(["64", "3000", kind])));
                let mut c = Command::new(&prog);
                c.args(["64", "3000", kind]);
                for (k, v) in induce::agent_env(&agent, 5.0, None, &status) {
                    c.env(k, v);
                }
                let with = numbers(&run(&mut c));
                report(
                    &format!("host rep {rep}: agent alone, {kind}, rate 5"),
                    base,
                    with,
                );
            }
            let prof = |how: &str| {
                numbers(&run(Command::new(&numaff)
                    .args(["profile", "-o"])
                    .arg(dir.join("t.parquet"))
                    .args([
                        "--induce",
                        how,
                        "--induce-rate",
                        "5",
                        "--induce-budget",
                        "off",
                        "--",
                    ])
                    .arg(&prog)
                    .args(["64", "3000", "private"])))
            };
            let base = prof("off");
            let with = prof("uffd");
            report(
                &format!("host rep {rep}: profile + agent, private"),
                base,
                with,
            );
        }
    }

    if balancing {
        host_balancing(&numaff, &hintcost, &dir);
    }

    if guest {
        // Per repetition: the program alone, with soft-dirty re-arming from a shell loop (no
        // sampler), and under numaff profile without and with soft-dirty re-arming.
        let script = format!(
            "for r in $(seq {REPS}); do \
             echo '@@ alone'; /rewrite 16 3000 private; \
             echo '@@ clear_refs'; /rewrite 16 3000 private > /tmp/o & p=$!; \
             while kill -0 $p 2>/dev/null; do echo 4 > /proc/$p/clear_refs 2>/dev/null; sleep 0.2; done; \
             cat /tmp/o; \
             for how in off soft-dirty; do echo \"@@ $how\"; \
             /numaff profile -o /tmp/t.parquet --induce $how --induce-rate 5 --induce-budget off \
             -- /rewrite 16 3000 private 2>&1 | grep -E 'SECONDS|FAULTS|numaff:'; done; done; \
             echo SELFREARM; for r in $(seq {REPS}); do /selfrearm 40; done"
        );
        let g = Guest::new(2, 2, 256)
            .kernel_arg("numa_balancing=disable")
            .file(&numaff, "/numaff")
            .file(&prog, "/rewrite")
            .file(&selfrearm, "/selfrearm")
            .timeout(300);
        let out = g.run(&["sh", "-c", &script]).unwrap();
        let (loops, selfrearm_out) = out
            .output
            .split_once("SELFREARM")
            .expect("the guest script's output");
        for l in selfrearm_out
            .lines()
            .filter(|l| l.starts_with("PERFAULT") || l.starts_with("CLEAR_REFS"))
        {
            println!("guest soft-dirty, inside one process (selfrearm.c): {l}");
        }
        let parts: Vec<&str> = loops.split("@@ ").skip(1).collect();
        for (i, four) in parts.chunks(4).enumerate() {
            if let [alone, clear, off, sd] = four {
                report(
                    &format!("guest rep {i}: clear_refs every 0.2 s alone"),
                    numbers(alone),
                    numbers(clear),
                );
                report(
                    &format!("guest rep {i}: profile + soft-dirty, rate 5"),
                    numbers(off),
                    numbers(sd),
                );
            }
        }
        println!("{}", out.output);
        if balancing {
            guest_balancing(&numaff, &hintcost);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Seconds each hintcost run rewrites its buffer: on the host the kernel's default scan delay and
/// period (1 s, growing while a scan finds nothing to migrate) give 3-4 scans of the 64 MiB in 20 s.
const HINT_SECONDS: &str = "20";

fn hint_line(label: &str, out: &str) {
    let field = |k: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(k))
            .map_or("?", str::trim)
            .to_string()
    };
    println!(
        "{label:<44} {} hinted passes, {} hinting faults, plain pass {} s | {} µs per hinting fault",
        field("HINTED_PASSES "),
        field("HINT_FAULTS "),
        field("PLAIN "),
        field("PERFAULT ")
    );
}

/// Puts back kernel.numa_balancing as it was, also when a run panics.
struct RestoreSysctl(String);

impl Drop for RestoreSysctl {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(BALANCING_SYSCTL, &self.0) {
            eprintln!(
                "could not restore {BALANCING_SYSCTL} to {}: {e}; set it by hand",
                self.0.trim()
            );
        }
    }
}

const BALANCING_SYSCTL: &str = "/proc/sys/kernel/numa_balancing";

fn host_balancing(numaff: &Path, hintcost: &Path, dir: &Path) {
    let before = match std::fs::read_to_string(BALANCING_SYSCTL) {
        Ok(v) => v,
        Err(e) => return println!("host: no NUMA balancing ({BALANCING_SYSCTL}: {e})"),
    };
    if let Err(e) = std::fs::write(BALANCING_SYSCTL, "1") {
        return println!(
            "host: cannot enable NUMA balancing ({BALANCING_SYSCTL}: {e}); run as root"
        );
    }
    let _restore = RestoreSysctl(before);
    for rep in 0..REPS {
        hint_line(
            &format!("host rep {rep}: balancing alone"),
            &run(Command::new(hintcost).arg(HINT_SECONDS)),
        );
        hint_line(
            &format!("host rep {rep}: profile --induce balancing"),
            &run(Command::new(numaff)
                .args(["profile", "-o"])
                .arg(dir.join("h.parquet"))
                .args(["--induce", "balancing", "--"])
                .arg(hintcost)
                .arg(HINT_SECONDS)),
        );
    }
}

fn guest_balancing(numaff: &Path, hintcost: &Path) {
    // Scan delay and minimum period cut to 100 ms (debugfs), as the guest test does.
    let script = format!(
        "mount -t debugfs none /sys/kernel/debug 2>/dev/null; \
         for f in scan_delay_ms scan_period_min_ms; do \
         echo 100 > /sys/kernel/debug/sched/numa_balancing/$f; done; \
         for r in $(seq {REPS}); do echo '@@ alone'; /hintcost 5; \
         echo '@@ profile'; /numaff profile -o /tmp/h.parquet --induce balancing -- /hintcost 5 2>&1; done"
    );
    let g = Guest::new(2, 2, 256)
        .kernel_arg("numa_balancing=enable")
        .file(numaff, "/numaff")
        .file(hintcost, "/hintcost")
        .timeout(300);
    let out = g.run(&["sh", "-c", &script]).unwrap();
    for (i, part) in out.output.split("@@ ").skip(1).enumerate() {
        let (how, rest) = part.split_once('\n').unwrap_or((part, ""));
        hint_line(&format!("guest rep {}: balancing, {how}", i / 2), rest);
    }
}
