//! Fuzzes hwloc synthetic machine descriptions ("pack:2 numa:2 core:4 pu:2"): any text gives a
//! machine within the caps or an error, never a panic or an unbounded build.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // A description is one short line; hwloc's parser is not what this bounds, the caps are.
    if text.len() > 512 {
        return;
    }
    if let Ok(machine) = numaff_machine::hwloc::from_synthetic(text) {
        assert!(machine.pu_count() > 0, "a synthetic machine has PUs");
        assert!(machine.pu_count() <= numaff_machine::validate::MAX_PUS);
    }
});
