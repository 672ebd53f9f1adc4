//! Mapping files: a file saved by an earlier build loads and matches its machine.
#![allow(clippy::unwrap_used)]

use numaff_machine::spec;

/// A mapping file written by an earlier build (`numaff map --machine kmaf-sim-4x2 --algo eagermap
/// -o`, 2 tasks) still loads and still matches its machine: the fingerprint is stable across
/// builds, as `hash_bytes` promises. (It also seeds the mapping_file fuzz target.)
#[test]
fn a_saved_mapping_file_loads_and_matches_its_machine() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/kmaf-sim-4x2-eagermap.toml"
    );
    let f = numaff_policy::mapping::MappingFile::load(std::path::Path::new(path)).unwrap();
    assert_eq!(f.placement, [0, 1]);
    assert!(f.matches(&spec::resolve("kmaf-sim-4x2").unwrap()));
    assert!(!f.matches(&spec::resolve("laso-hpl").unwrap()));
}
