//! The output files of every command (`-o`, `--export`, `--html` and its figures): each path is
//! checked before the command does any work, and written whole or not at all.
//!
//! The rules are [`numaff_machine::outfile`]'s: a regular file is replaced atomically, a symlink is
//! written through to its target, a device or FIFO is written in place, a directory is refused.

use std::path::Path;

use anyhow::{anyhow, Result};
use numaff_machine::outfile::OutputPath;

/// Checks that `path` can be written (its directory exists and is writable, it is not a
/// directory) before any work starts, so that a bad path fails at once and leaves nothing behind.
pub fn check(path: &Path) -> Result<OutputPath> {
    OutputPath::check(path).map_err(|e| anyhow!("cannot write {}: {e}", path.display()))
}

/// Checks an optional output path.
pub fn check_opt(path: Option<&Path>) -> Result<Option<OutputPath>> {
    path.map(check).transpose()
}

/// Writes `data` to a checked output, whole or not at all.
pub fn write(out: &OutputPath, data: &[u8]) -> Result<()> {
    out.write(data)
        .map_err(|e| anyhow!("cannot write {}: {e}", out.path().display()))
}
