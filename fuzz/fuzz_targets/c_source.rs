//! Fuzzes MApp's C input (`numaff mapp FILE.c`): any text gives a transformed file or an error,
//! never a panic; a transformed file is C that parses, and transforming it again changes nothing
//! (its eligible arrays are pointers now, and what was kept is kept again).
#![no_main]

use libfuzzer_sys::fuzz_target;
use numaff_mapp::transform;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for name in ["kmaf-sim-4x2", "minas-opteron"] {
        let machine = numaff_machine::catalog::load(name).expect("catalog machine");
        let Ok(t) = transform(text, &machine) else {
            continue;
        };
        if !t.report.changed {
            assert_eq!(t.output, text, "an unchanged file is returned as it was");
            continue;
        }
        let again = transform(&t.output, &machine).expect("the transformed file parses");
        assert!(
            !again.report.changed,
            "a second transform changed:\n{}",
            t.output
        );
    }
});
