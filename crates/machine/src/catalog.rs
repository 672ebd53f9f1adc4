//! The catalog of the papers' machines: the machine files under `machines/`, built into numaff, so
//! `--machine kmaf-xeon` and the simulator work anywhere and `numaff topo --list` can show them.

use serde::Serialize;

use crate::error::{MachineError, Result};
use crate::file;
use crate::model::{Machine, Summary};

/// One machine of the catalog: its name and its machine-file text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CatalogEntry {
    /// Catalog name (also the file name under `machines/` and the machine's `name`).
    pub name: &'static str,
    /// The machine file, as shipped.
    pub text: &'static str,
}

impl CatalogEntry {
    /// Parses and validates this entry's machine file.
    pub fn load(&self) -> Result<Machine> {
        file::from_toml_str(self.text, &self.origin())
    }

    /// How errors name this entry: the file it was built from.
    pub fn origin(&self) -> String {
        format!("machines/{}.toml", self.name)
    }
}

macro_rules! entry {
    ($name:literal) => {
        CatalogEntry {
            name: $name,
            text: include_str!(concat!("../../../machines/", $name, ".toml")),
        }
    };
}

/// The machines, grouped by paper (000 kMAF, 001 Laso et al., 002 Agung, 004 Minas). Each file's
/// `source` names the paper, section and table its figures come from; its `assumptions` list every
/// figure that was not in the paper, with the reason for the value chosen.
static ENTRIES: &[CatalogEntry] = &[
    entry!("kmaf-sim-4x2"),
    entry!("kmaf-itanium"),
    entry!("kmaf-xeon"),
    entry!("kmaf-opteron"),
    entry!("laso-hpl"),
    entry!("laso-lpl"),
    entry!("agung-xeon56"),
    entry!("agung-xeon2"),
    entry!("agung-knl4"),
    entry!("agung-sim-4x16"),
    entry!("minas-opteron"),
    entry!("minas-altix"),
];

/// Every catalog entry, in catalog order (by paper).
pub fn entries() -> &'static [CatalogEntry] {
    ENTRIES
}

/// The catalog names, in catalog order.
pub fn names() -> Vec<&'static str> {
    ENTRIES.iter().map(|e| e.name).collect()
}

/// The entry with this name, if there is one.
pub fn find(name: &str) -> Option<&'static CatalogEntry> {
    ENTRIES.iter().find(|e| e.name == name)
}

/// Loads a catalog machine by name. An unknown name is a [`MachineError::Spec`] that lists the
/// known ones.
pub fn load(name: &str) -> Result<Machine> {
    match find(name) {
        Some(entry) => entry.load(),
        None => Err(MachineError::Spec(format!(
            "no machine named {name:?} in the catalog; known machines: {} (see `numaff topo --list`)",
            names().join(", ")
        ))),
    }
}

/// One line of `numaff topo --list`: a catalog machine, where its figures come from, and its counts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Listing {
    /// Catalog name.
    pub name: &'static str,
    /// Paper, section and table.
    pub source: Option<String>,
    /// The machine in one line.
    pub description: Option<String>,
    /// Counts, memory and NUMA factor.
    pub summary: Summary,
}

/// Every catalog machine with its source, description and summary, in catalog order.
pub fn list() -> Result<Vec<Listing>> {
    ENTRIES
        .iter()
        .map(|e| {
            let m = e.load()?;
            Ok(Listing {
                name: e.name,
                summary: m.summary(),
                source: m.source,
                description: m.description,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_name_lists_known_ones() {
        let err = load("no-such-box").unwrap_err();
        assert!(matches!(err, MachineError::Spec(_)), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains("\"no-such-box\""), "{msg}");
        for name in names() {
            assert!(msg.contains(name), "{msg}");
        }
    }

    #[test]
    fn names_are_unique_and_match_files() {
        let mut seen = names();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), entries().len());
        for e in entries() {
            assert_eq!(find(e.name), Some(e));
            assert!(
                e.text.contains(&format!("name = \"{}\"", e.name)),
                "{} does not carry its own name",
                e.origin()
            );
        }
    }
}
