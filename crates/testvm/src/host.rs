//! Host-side plumbing: where the harness keeps its cache (under the cargo target dir), file locks
//! shared across test binaries, and running host commands with errors that name them.

use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Result};

/// The cargo target directory of the running build: `CARGO_TARGET_DIR` when absolute, else the
/// nearest ancestor of the running executable holding cargo's `CACHEDIR.TAG`, else the workspace's
/// `target/` next to this crate.
pub fn target_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        let dir = PathBuf::from(dir);
        if dir.is_absolute() {
            return dir;
        }
    }
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe
            .ancestors()
            .skip(1)
            .find(|d| d.join("CACHEDIR.TAG").is_file())
        {
            return dir.to_path_buf();
        }
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target")
}

/// `<target>/testvm`, created if needed: the kernel cache, the locks and `guest-times.log`.
pub fn cache_dir() -> Result<PathBuf> {
    let dir = target_dir().join("testvm");
    fs::create_dir_all(&dir).map_err(|e| Error::io("cannot create", &dir, e))?;
    Ok(dir)
}

/// An exclusive `flock` on a file, held until dropped (the kernel drops it if the process dies).
pub struct FileLock {
    _file: File,
}

impl FileLock {
    /// Blocks until this process holds the lock on `path` (created if missing).
    pub fn acquire(path: &Path) -> Result<FileLock> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| Error::io("cannot open lock file", path, e))?;
        loop {
            // SAFETY: flock on a descriptor we own; no memory is passed.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
            if rc == 0 {
                return Ok(FileLock { _file: file });
            }
            let err = std::io::Error::last_os_error();
            if err.kind() != std::io::ErrorKind::Interrupted {
                return Err(Error::io("cannot lock", path, err));
            }
        }
    }
}

/// Whether `name` is an executable file in one of the `PATH` directories.
pub fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].iter().map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| {
            use std::os::unix::fs::PermissionsExt;
            fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Runs `program args...` (in `cwd` if given) and returns its stdout; a failure names the command
/// and carries its stderr.
pub fn run_output<S: AsRef<OsStr>>(
    program: &str,
    args: &[S],
    cwd: Option<&Path>,
) -> Result<String> {
    let mut cmd = Command::new(program);
    cmd.args(args);
    if let Some(cwd) = cwd {
        cmd.current_dir(cwd);
    }
    let shown = std::iter::once(program.to_string())
        .chain(
            args.iter()
                .map(|a| a.as_ref().to_string_lossy().into_owned()),
        )
        .collect::<Vec<_>>()
        .join(" ");
    let out = cmd.output().map_err(|e| {
        let status = if e.kind() == std::io::ErrorKind::NotFound {
            format!("{program} is not on PATH; it comes with Debian's apt, dpkg and libc-bin")
        } else {
            "could not start".into()
        };
        Error::Command {
            command: shown.clone(),
            status,
            stderr: e.to_string(),
        }
    })?;
    if !out.status.success() {
        return Err(Error::Command {
            command: shown,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
