//! numaff's machine model: topology, caches, distances, latency and bandwidth between nodes.
//! Discovered through hwloc (or sysfs), read from machine files and the papers' catalog, or measured.

pub mod catalog;
pub mod cpuset;
pub mod error;
pub mod file;
#[cfg(feature = "hwloc")]
pub mod hwloc;
pub mod measure;
pub mod model;
pub mod sysfs;
pub mod validate;

pub use cpuset::CpuSet;
pub use error::{FieldProblem, MachineError, Result};
pub use model::{
    Cache, CacheKind, Core, FactorSource, Interconnect, Machine, Matrix, Node, NumaFactor, Package,
    Summary,
};

use std::io::Write;
use std::path::Path;

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
