//! Builds numaff's LD_PRELOAD agent for induced faults (agent/numaff_agent.c) into a shared object
//! in OUT_DIR, which `numaff_linux::induce` embeds and writes out when `numaff profile` needs it.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let src = "agent/numaff_agent.c";
    println!("cargo:rerun-if-changed={src}");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let so = out.join("libnumaff_agent.so");
    // cc finds the C compiler as cargo configures it (CC, target); it builds archives, not shared
    // objects, so the link step is run here with the compiler it found.
    let compiler = cc::Build::new().get_compiler();
    let status = Command::new(compiler.path())
        .args(["-O2", "-Wall", "-shared", "-fPIC", "-pthread", "-o"])
        .arg(&so)
        .arg(src)
        .status()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run the C compiler {} for {src} ({e}): install build-essential \
                 (scripts/setup.sh)",
                compiler.path().display()
            )
        });
    assert!(status.success(), "the C compiler failed on {src}");
}
