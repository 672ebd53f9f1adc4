//! Output files written safely: a path is checked before any work (its directory exists and is
//! writable, it is not a directory), a regular file is replaced atomically, a device or FIFO is
//! written straight.
//!
//! A symlink is followed to its target, which is replaced atomically in the target's directory (the
//! link stays). A temporary file is removed on every failure, so no partial output remains.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Symlinks followed at most when resolving an output path (as the kernel's ELOOP limit).
const MAX_LINKS: usize = 40;

/// How an output path is written.
#[derive(Debug, Clone, PartialEq, Eq)]
enum How {
    /// A regular file, or a new one: a temporary beside it, renamed over it.
    Replace {
        /// The permission bits of the file replaced (not setuid, setgid or sticky), kept on the
        /// new one.
        mode: Option<u32>,
    },
    /// A character or block device, or a FIFO: opened and written in place, never replaced.
    Stream,
}

/// An output path checked for writing: where it leads (through symlinks) and how it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputPath {
    given: PathBuf,
    /// The file written: `given`, or the end of its chain of symlinks.
    target: PathBuf,
    how: How,
}

fn problem(kind: io::ErrorKind, text: String) -> io::Error {
    io::Error::new(kind, text)
}

/// The directory a path is in (`.` for a bare name).
fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Whether this process may create files in `dir` (write and search permission, a writable
/// file system).
fn writable_dir(dir: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: access reads a NUL-terminated string that lives across the call.
    unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) == 0 }
}

impl OutputPath {
    /// Checks that `path` can be written, without writing anything: it is not a directory, its
    /// directory (after following symlinks) exists and is writable. The errors say what is wrong
    /// and what to do; they do not name `path` (the caller does).
    pub fn check(path: &Path) -> io::Result<Self> {
        if path.as_os_str().is_empty() {
            return Err(problem(
                io::ErrorKind::InvalidInput,
                "the output path is empty: give a file name".into(),
            ));
        }
        // A device or FIFO, reached through any links (also /proc's, as /dev/stdout's to a pipe,
        // which name no path): opened by the path given.
        if let Ok(m) = std::fs::metadata(path) {
            let ft = m.file_type();
            if ft.is_char_device() || ft.is_block_device() || ft.is_fifo() {
                return Ok(OutputPath {
                    given: path.to_path_buf(),
                    target: path.to_path_buf(),
                    how: How::Stream,
                });
            }
        }
        let mut target = path.to_path_buf();
        for _ in 0..MAX_LINKS {
            let meta = match std::fs::symlink_metadata(&target) {
                Ok(m) => m,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    return Self::new_file(path, target);
                }
                Err(e) => return Err(e),
            };
            let ft = meta.file_type();
            if ft.is_symlink() {
                let next = std::fs::read_link(&target)?;
                target = dir_of(&target).join(next);
                continue;
            }
            if ft.is_dir() {
                return Err(problem(
                    io::ErrorKind::IsADirectory,
                    "it is a directory: give a file name in it".into(),
                ));
            }
            if ft.is_char_device() || ft.is_block_device() || ft.is_fifo() {
                return Ok(OutputPath {
                    given: path.to_path_buf(),
                    target,
                    how: How::Stream,
                });
            }
            if ft.is_socket() {
                return Err(problem(
                    io::ErrorKind::InvalidInput,
                    "it is a socket, which cannot be written as a file: give a file name".into(),
                ));
            }
            let dir = dir_of(&target);
            if !writable_dir(dir) {
                return Err(not_writable(dir));
            }
            return Ok(OutputPath {
                given: path.to_path_buf(),
                target,
                how: How::Replace {
                    mode: Some(meta.permissions().mode() & 0o777),
                },
            });
        }
        Err(problem(
            io::ErrorKind::InvalidInput,
            format!("more than {MAX_LINKS} symlinks lead from it (a loop?)"),
        ))
    }

    /// A path that does not exist yet (`target`, reached from `given`).
    fn new_file(given: &Path, target: PathBuf) -> io::Result<Self> {
        let dir = dir_of(&target);
        match std::fs::metadata(dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(problem(
                    io::ErrorKind::NotADirectory,
                    format!("{} is not a directory", dir.display()),
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(problem(
                    io::ErrorKind::NotFound,
                    format!(
                        "its directory {} does not exist (create it first, or give another path)",
                        dir.display()
                    ),
                ))
            }
            Err(e) => {
                return Err(problem(
                    e.kind(),
                    format!("cannot look at its directory {}: {e}", dir.display()),
                ))
            }
        }
        if !writable_dir(dir) {
            return Err(not_writable(dir));
        }
        Ok(OutputPath {
            given: given.to_path_buf(),
            target,
            how: How::Replace { mode: None },
        })
    }

    /// The path as given.
    pub fn path(&self) -> &Path {
        &self.given
    }

    /// Whether the output is a device or FIFO, written in place.
    pub fn is_stream(&self) -> bool {
        self.how == How::Stream
    }

    /// Opens the output: a new temporary file beside the target (to be renamed over it by
    /// [`Pending::commit`]), or the device or FIFO itself. The file is the one to write.
    pub fn create(&self) -> io::Result<(File, Pending)> {
        match &self.how {
            How::Stream => {
                let f = OpenOptions::new().write(true).open(&self.target)?;
                Ok((
                    f,
                    Pending {
                        tmp: None,
                        target: self.target.clone(),
                    },
                ))
            }
            How::Replace { mode } => {
                let (f, tmp) = self.temporary("")?;
                if let Some(m) = mode {
                    // The new file keeps the mode of the one it replaces; failing that, the
                    // default mode is harmless.
                    let _ = f.set_permissions(std::fs::Permissions::from_mode(*m));
                }
                Ok((
                    f,
                    Pending {
                        tmp: Some(tmp),
                        target: self.target.clone(),
                    },
                ))
            }
        }
    }

    /// A new temporary file in the target's directory, named `.NAME.tmp.PID.N` + `suffix`.
    fn temporary(&self, suffix: &str) -> io::Result<(File, PathBuf)> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let dir = dir_of(&self.target);
        let name = self
            .target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let tmp = dir.join(format!(".{name}.tmp.{}.{n}{suffix}", std::process::id()));
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o666)
                .open(&tmp)
            {
                Ok(f) => return Ok((f, tmp)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Writes `data` to the output, whole or not at all.
    pub fn write(&self, data: &[u8]) -> io::Result<()> {
        let (mut f, pending) = self.create()?;
        f.write_all(data)?;
        pending.commit(f)
    }

    /// Writes the output through `write`, which is given a path to create and fill (for writers
    /// that open files by name, such as an image encoder that picks the format by the extension
    /// `suffix`). A regular target gets the file renamed over it; a device or FIFO its bytes.
    pub fn write_by_name<E: From<io::Error>>(
        &self,
        suffix: &str,
        write: impl FnOnce(&Path) -> Result<(), E>,
    ) -> Result<(), E> {
        let (f, tmp) = match self.how {
            How::Replace { .. } => self.temporary(suffix)?,
            How::Stream => {
                let scratch = OutputPath {
                    given: self.given.clone(),
                    target: std::env::temp_dir().join("numaff-output"),
                    how: How::Replace { mode: None },
                };
                scratch.temporary(suffix)?
            }
        };
        drop(f);
        let guard = Pending {
            tmp: Some(tmp.clone()),
            target: self.target.clone(),
        };
        write(&tmp)?;
        match self.how {
            How::Replace { mode } => {
                if let Some(m) = mode {
                    let _ = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(m));
                }
                let f = File::open(&tmp)?;
                guard.commit(f)?;
            }
            How::Stream => {
                let data = std::fs::read(&tmp)?;
                drop(guard);
                self.write(&data)?;
            }
        }
        Ok(())
    }
}

fn not_writable(dir: &Path) -> io::Error {
    problem(
        io::ErrorKind::PermissionDenied,
        format!(
            "its directory {} is not writable here (give a path in a directory you can write)",
            dir.display()
        ),
    )
}

/// An output being written: [`Pending::commit`] puts it in place; dropped before, it removes its
/// temporary file, so nothing partial remains.
#[derive(Debug)]
pub struct Pending {
    tmp: Option<PathBuf>,
    target: PathBuf,
}

impl Pending {
    /// Finishes the output written through `file`: a temporary is synced and renamed over the
    /// target; a device or FIFO is only flushed.
    pub fn commit(mut self, mut file: File) -> io::Result<()> {
        file.flush()?;
        if let Some(tmp) = &self.tmp {
            file.sync_all()?;
            drop(file);
            std::fs::rename(tmp, &self.target)?;
            self.tmp = None;
        }
        Ok(())
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(tmp) = self.tmp.take() {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::OutputPath;
    use std::path::Path;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .expect("read dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_symlink_is_written_through_and_stays_a_link() {
        let d = tempfile::tempdir().expect("tempdir");
        std::fs::write(d.path().join("real.txt"), "old").expect("write");
        std::os::unix::fs::symlink("real.txt", d.path().join("link")).expect("symlink");
        let out = OutputPath::check(&d.path().join("link")).expect("check");
        out.write(b"new").expect("write");
        let link = std::fs::symlink_metadata(d.path().join("link")).expect("meta");
        assert!(link.file_type().is_symlink());
        assert_eq!(
            std::fs::read_to_string(d.path().join("real.txt")).expect("read"),
            "new"
        );
        assert_eq!(names(d.path()), ["link", "real.txt"]);
    }

    #[test]
    fn a_dangling_symlink_creates_its_target() {
        let d = tempfile::tempdir().expect("tempdir");
        std::os::unix::fs::symlink("made.txt", d.path().join("link")).expect("symlink");
        OutputPath::check(&d.path().join("link"))
            .expect("check")
            .write(b"x")
            .expect("write");
        assert_eq!(names(d.path()), ["link", "made.txt"]);
    }

    #[test]
    fn a_directory_or_a_missing_directory_is_refused_before_writing() {
        let d = tempfile::tempdir().expect("tempdir");
        let e = OutputPath::check(d.path()).expect_err("a directory");
        assert!(e.to_string().contains("is a directory"), "{e}");
        let e = OutputPath::check(&d.path().join("no/x")).expect_err("no dir");
        assert!(e.to_string().contains("does not exist"), "{e}");
        assert!(names(d.path()).is_empty());
    }

    #[test]
    fn a_failed_write_leaves_no_temporary() {
        let d = tempfile::tempdir().expect("tempdir");
        let out = OutputPath::check(&d.path().join("x.txt")).expect("check");
        let (f, pending) = out.create().expect("create");
        assert_eq!(names(d.path()).len(), 1);
        drop((f, pending));
        assert!(names(d.path()).is_empty());
    }

    #[test]
    fn a_replaced_file_keeps_its_mode() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().join("x.txt");
        std::fs::write(&p, "old").expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        OutputPath::check(&p)
            .expect("check")
            .write(b"new")
            .expect("write");
        let mode = std::fs::metadata(&p).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn a_pipe_reached_through_proc_links_is_written_in_place() {
        let mut fds = [0; 2];
        // SAFETY: pipe writes two fds into a live array.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let p = format!("/proc/self/fd/{}", fds[1]);
        let out = OutputPath::check(Path::new(&p)).expect("check");
        assert!(out.is_stream());
        out.write(b"abc").expect("write");
        let mut buf = [0u8; 3];
        // SAFETY: reads 3 bytes into a live buffer; the fds are ours.
        unsafe {
            assert_eq!(libc::read(fds[0], buf.as_mut_ptr().cast(), 3), 3);
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
        assert_eq!(&buf, b"abc");
    }

    #[test]
    fn dev_null_is_written_in_place() {
        let out = OutputPath::check(Path::new("/dev/null")).expect("check");
        assert!(out.is_stream());
        out.write(b"nothing").expect("write");
    }
}
