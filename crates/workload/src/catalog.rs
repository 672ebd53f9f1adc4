//! The shipped workloads: the files under `workloads/`, built into numaff like the machines are,
//! so `--workload nas-sp` works anywhere and `numaff sim --list-workloads` can show them.

use std::path::Path;

use crate::error::WorkloadError;
use crate::spec::Workload;

/// One shipped workload: its name and file text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CatalogEntry {
    /// Catalog name (also the file name under `workloads/` and the workload's `name`).
    pub name: &'static str,
    /// The workload file, as shipped.
    pub text: &'static str,
}

impl CatalogEntry {
    /// Parses and checks this entry.
    pub fn load(&self) -> Result<Workload, WorkloadError> {
        Workload::from_toml(self.text, &format!("workloads/{}.toml", self.name))
    }
}

macro_rules! entry {
    ($name:literal) => {
        CatalogEntry {
            name: $name,
            text: include_str!(concat!("../../../workloads/", $name, ".toml")),
        }
    };
}

static ENTRIES: &[CatalogEntry] = &[
    entry!("nas-bt"),
    entry!("nas-cg"),
    entry!("nas-dc"),
    entry!("nas-ep"),
    entry!("nas-ft"),
    entry!("nas-is"),
    entry!("nas-lu"),
    entry!("nas-mg"),
    entry!("nas-sp"),
    entry!("nas-ua"),
    entry!("parsec-streamcluster"),
    entry!("parsec-canneal"),
    entry!("parsec-dedup"),
    entry!("parsec-ferret"),
    entry!("parsec-facesim"),
    entry!("parsec-fluidanimate"),
    entry!("parsec-x264"),
    entry!("mix-arrivals"),
    entry!("mix-queue"),
];

/// Every shipped workload, NAS first, then PARSEC, then the multi-program scenarios.
pub fn entries() -> &'static [CatalogEntry] {
    ENTRIES
}

/// The names, in catalog order.
pub fn names() -> Vec<&'static str> {
    ENTRIES.iter().map(|e| e.name).collect()
}

/// A shipped workload by name.
pub fn load(name: &str) -> Result<Workload, WorkloadError> {
    match ENTRIES.iter().find(|e| e.name == name) {
        Some(e) => e.load(),
        None => Err(WorkloadError::UnknownWorkload {
            name: name.to_string(),
            known: names().join(", "),
        }),
    }
}

/// A workload by file path (anything that names an existing file or ends in .toml) or by name.
pub fn resolve(spec: &str) -> Result<Workload, WorkloadError> {
    let path = Path::new(spec);
    if path.is_file() || spec.ends_with(".toml") {
        let text = std::fs::read_to_string(path).map_err(|error| WorkloadError::ReadWorkload {
            path: spec.to_string(),
            error,
        })?;
        return Workload::from_toml(&text, spec);
    }
    load(spec)
}
