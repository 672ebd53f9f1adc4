//! Fuzzes mapping files (`numaff apply FILE`, `numaff map --from FILE --export KIND`): any text
//! gives a mapping or an error, never a panic; a mapping that loads writes back to text that loads
//! the same, and exports to every launcher syntax (or says why it cannot).
#![no_main]

use libfuzzer_sys::fuzz_target;
use numaff_policy::export::{self, ExportKind, Granularity};
use numaff_policy::mapping::MappingFile;

/// Past this many tasks the exports are not tried: the fuzzer would spend its time formatting.
const TASKS_TO_EXPORT: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(m) = MappingFile::from_toml(text, "fuzz.toml") else {
        return;
    };
    let written = m.to_toml();
    let again =
        MappingFile::from_toml(&written, "rewritten.toml").expect("a written mapping loads");
    assert_eq!(written, again.to_toml(), "round trip changed the mapping");
    if m.placement.len() > TASKS_TO_EXPORT {
        return;
    }
    let machine = numaff_machine::catalog::load("kmaf-sim-4x2").expect("catalog machine");
    let _ = m.matches(&machine);
    let mut all = Vec::new();
    for g in [Granularity::Pu, Granularity::Core] {
        all.push(export::targets(&machine, &m.placement, g));
    }
    all.push(export::targets_without_machine(
        &m.placement,
        m.nodes.as_deref(),
    ));
    for ts in &all {
        for kind in ExportKind::ALL {
            let _ = export::export(kind, ts, "node1");
        }
    }
});
