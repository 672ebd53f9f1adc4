//! Fuzzes the parsers of /proc/PID/task/TID/stat, numa_maps, maps and sched (numaff_linux): any
//! text gives records or an error, never a panic.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for line in text.lines().take(64) {
        let _ = numaff_linux::tasks::parse_stat(line);
    }
    let _ = numaff_linux::numa_maps::parse(&text, Path::new("/proc/1/numa_maps"));
    let _ = numaff_linux::maps::parse(&text, Path::new("/proc/1/maps"));
    let _ = numaff_linux::sched::parse(&text, Path::new("/proc/1/sched"));
});
