//! What a `--machine` argument names: a machine file, an hwloc XML export, a catalog machine, an
//! hwloc synthetic description ("pack:4 core:8 pu:2"), or "host". One resolver for every command.

use std::path::Path;

use crate::error::{MachineError, Result};
use crate::{catalog, file, Machine};

/// How a `--machine` argument was understood.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecKind {
    /// The running machine, discovered.
    Host,
    /// A TOML machine file.
    File,
    /// An hwloc XML export.
    HwlocXml,
    /// A machine of the papers' catalog.
    Catalog,
    /// An hwloc synthetic description.
    Synthetic,
}

/// The help text every `--machine` option shows.
pub const SPEC_HELP: &str = "a machine file (.toml), an hwloc XML export (.xml), a catalog name \
(see `numaff topo --list`), an hwloc synthetic description such as \"pack:2 numa:2 core:4 pu:2\", \
or \"host\"";

/// Classifies a `--machine` argument without loading it.
pub fn classify(spec: &str) -> Result<SpecKind> {
    let spec = spec.trim();
    let path = Path::new(spec);
    if spec.is_empty() {
        return Err(MachineError::Spec(format!(
            "empty machine; give {SPEC_HELP}"
        )));
    }
    if spec == "host" {
        return Ok(SpecKind::Host);
    }
    if path.is_file() {
        let is_xml = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("xml"));
        return Ok(if is_xml {
            SpecKind::HwlocXml
        } else {
            SpecKind::File
        });
    }
    if catalog::names().contains(&spec) {
        return Ok(SpecKind::Catalog);
    }
    if spec.contains(':') && !spec.contains('/') {
        return Ok(SpecKind::Synthetic);
    }
    if spec.contains('/') || spec.ends_with(".toml") || spec.ends_with(".xml") {
        return Err(MachineError::Spec(format!(
            "machine file {spec} does not exist (or is not a regular file)"
        )));
    }
    Err(MachineError::Spec(format!(
        "unknown machine {spec:?}: not a file, not a catalog name, not a synthetic description.\n\
         Catalog machines: {}.\nGive {SPEC_HELP}.",
        catalog::names().join(", ")
    )))
}

/// Loads the machine a `--machine` argument names.
pub fn resolve(spec: &str) -> Result<Machine> {
    let spec = spec.trim();
    match classify(spec)? {
        SpecKind::Host => crate::discover_host(),
        SpecKind::File => file::load(Path::new(spec)),
        SpecKind::HwlocXml => from_hwloc_xml(Path::new(spec)),
        SpecKind::Catalog => catalog::load(spec),
        SpecKind::Synthetic => synthetic(spec),
    }
}

/// Imports an hwloc XML export (`lstopo --of xml`).
pub fn from_hwloc_xml(path: &Path) -> Result<Machine> {
    #[cfg(feature = "hwloc")]
    {
        crate::hwloc::from_xml_file(path)
    }
    #[cfg(not(feature = "hwloc"))]
    {
        Err(MachineError::Spec(format!(
            "cannot import {}: this numaff was built without hwloc (feature `hwloc`)",
            path.display()
        )))
    }
}

fn synthetic(spec: &str) -> Result<Machine> {
    #[cfg(feature = "hwloc")]
    {
        crate::hwloc::from_synthetic(spec)
    }
    #[cfg(not(feature = "hwloc"))]
    {
        Err(MachineError::Spec(format!(
            "cannot build the synthetic machine {spec:?}: this numaff was built without hwloc (feature `hwloc`)"
        )))
    }
}
