//! Fuzzes hwloc XML import: any bytes give a machine or an error, never a panic, and an imported
//! machine survives the machine-file round trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use numaff_machine::file::{from_toml_str, to_toml_string};
use numaff_machine::hwloc::{from_xml_str, CONVERSION_PANIC};

fuzz_target!(|data: &[u8]| {
    let Ok(xml) = std::str::from_utf8(data) else {
        return;
    };
    // hwloc runs in a child process (the fuzzer is single-threaded): a crash of hwloc itself is an
    // error, but a panic of numaff's conversion is a bug to report.
    let result = from_xml_str(xml, "fuzz.xml");
    if let Err(e) = &result {
        assert!(!e.to_string().contains(CONVERSION_PANIC), "{e}");
    }
    if let Ok(machine) = result {
        let written = to_toml_string(&machine).expect("an imported machine can be written");
        let again = from_toml_str(&written, "rewritten.toml").expect("a written machine loads");
        assert_eq!(machine, again, "round trip changed the machine");
    }
});
