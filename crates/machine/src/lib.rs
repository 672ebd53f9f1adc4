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

use std::io::Write;
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

/// Writes a file atomically: the data goes to a temporary file beside it, which is then renamed over
/// the target, so a reader (or a crash) never sees a partial file.
pub fn write_atomic(path: &Path, data: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let io = |action, source| MachineError::Io {
        action,
        path: path.to_path_buf(),
        source,
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(io("write", e));
    }
    Ok(())
}
