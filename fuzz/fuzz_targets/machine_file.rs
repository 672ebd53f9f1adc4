//! Fuzzes machine-file parsing: any text gives a machine or an error, never a panic, and a machine
//! that loads writes back to text that loads to the same machine.
#![no_main]

use libfuzzer_sys::fuzz_target;
use numaff_machine::file::{from_toml_str, to_toml_string};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(machine) = from_toml_str(text, "fuzz.toml") {
        let written = to_toml_string(&machine).expect("a valid machine can be written");
        let again = from_toml_str(&written, "rewritten.toml").expect("a written machine loads");
        assert_eq!(machine, again, "round trip changed the machine");
    }
});
