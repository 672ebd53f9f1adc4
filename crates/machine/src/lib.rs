//! numaff's machine model: topology, caches, distances, latency and bandwidth between nodes.
//! Discovered through hwloc (or sysfs), read from machine files and the papers' catalog, or measured.

pub mod catalog;
pub mod cpuset;
pub mod error;
pub mod file;
pub mod hostmeasure;
#[cfg(feature = "hwloc")]
pub mod hwloc;
pub mod hwloc_xml;
pub mod model;
pub mod outfile;
pub mod render;
pub mod rng;
pub mod spec;
pub mod sysfs;
pub mod validate;

pub use cpuset::CpuSet;
pub use error::{FieldProblem, MachineError, Result};
pub use model::{
    Cache, CacheKind, Coherence, Core, FactorSource, Interconnect, Machine, Matrix, Node,
    NumaFactor, Package, Summary,
};

use std::path::Path;

/// The machine numaff runs on: through hwloc when the `hwloc` feature is on and hwloc works, else
/// from sysfs. `source` says which ("hwloc 2.9.0" or "sysfs"); when hwloc failed, `assumptions` says
/// why sysfs was read instead.
pub fn discover_host() -> Result<Machine> {
    #[cfg(feature = "hwloc")]
    {
        match hwloc::discover() {
            Ok(m) => Ok(m),
            Err(hwloc_error) => match sysfs::discover() {
                Ok(mut m) => {
                    m.assumptions
                        .push(format!("read sysfs because hwloc failed: {hwloc_error}"));
                    Ok(m)
                }
                Err(MachineError::Sysfs { path, problem }) => Err(MachineError::Sysfs {
                    path,
                    problem: format!("{problem} (hwloc had failed first: {hwloc_error})"),
                }),
                Err(e) => Err(e),
            },
        }
    }
    #[cfg(not(feature = "hwloc"))]
    {
        sysfs::discover()
    }
}

/// Writes an output file whole or not at all ([`outfile`]): a regular file (or a new one) gets a
/// temporary beside it renamed over it, a symlink is followed to its target, a device or FIFO is
/// written in place; a directory, or a directory that is missing or not writable, is refused.
pub fn write_atomic(path: &Path, data: &[u8]) -> Result<()> {
    outfile::OutputPath::check(path)
        .and_then(|out| out.write(data))
        .map_err(|source| MachineError::Io {
            action: "write",
            path: path.to_path_buf(),
            source,
        })
}
