//! The guest's root file system: a gzip'd newc cpio with static busybox, an /init script, the
//! files a test asks for and the shared libraries (plus loader) those files need, found with ldd.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::host;

/// Where Debian's `busybox-static` puts its binary.
pub const BUSYBOX: &str = "/bin/busybox";

/// The contents of one file in the image.
#[derive(Clone, Debug)]
enum Source {
    Host(PathBuf),
    Bytes(Vec<u8>),
}

/// An initramfs under construction: guest path -> (contents, mode).
#[derive(Clone, Debug, Default)]
pub struct Initramfs {
    files: BTreeMap<String, (Source, u32)>,
    dirs: BTreeSet<String>,
}

/// ELF files larger than this are stripped of debug info before they go into a guest.
const STRIP_ABOVE: u64 = 16 << 20;

/// The bytes of `path` without debug info, through binutils' objcopy.
fn stripped(path: &Path) -> Result<Vec<u8>> {
    // One output file per call: tests of one binary build guests from several threads at once, and
    // a name shared by two of them let one remove the file the other was about to read.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let out = std::env::temp_dir().join(format!(
        "numaff-testvm-strip-{}-{call}-{}",
        std::process::id(),
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    ));
    let status = std::process::Command::new("objcopy")
        .arg("--strip-debug")
        .arg(path)
        .arg(&out)
        .status()
        .map_err(|e| Error::io("cannot run objcopy (binutils) to strip", path, e))?;
    if !status.success() {
        let _ = fs::remove_file(&out);
        return Err(Error::Invalid(format!(
            "objcopy --strip-debug {} failed ({status})",
            path.display()
        )));
    }
    let bytes = fs::read(&out).map_err(|e| Error::io("cannot read", &out, e));
    let _ = fs::remove_file(&out);
    bytes
}

/// Whether an ELF file asks for a program interpreter (i.e. is dynamically linked).
pub fn is_dynamic_elf(bytes: &[u8]) -> bool {
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" || bytes[4] != 2 || bytes[5] != 1 {
        return false; // not a little-endian 64-bit ELF: nothing for ldd to do
    }
    let u16_at = |o: usize| u16::from_le_bytes([bytes[o], bytes[o + 1]]) as usize;
    let u64_at = |o: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&bytes[o..o + 8]);
        u64::from_le_bytes(b) as usize
    };
    let (phoff, phentsize, phnum) = (u64_at(32), u16_at(54), u16_at(56));
    (0..phnum).any(|i| {
        let o = phoff + i * phentsize;
        o + 4 <= bytes.len()
            && u32::from_le_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]) == 3
        // PT_INTERP
    })
}

/// The absolute library paths in `ldd` output (loader included; vdso and "not found" excluded).
pub fn parse_ldd(text: &str) -> std::result::Result<Vec<String>, String> {
    let mut libs = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.contains("not found") {
            return Err(format!("missing shared library: {line}"));
        }
        let path = match line.split_once("=>") {
            Some((_, rest)) => rest.trim(),
            None => line,
        };
        if let Some(p) = path
            .split_whitespace()
            .next()
            .filter(|p| p.starts_with('/'))
        {
            libs.push(p.to_string());
        }
    }
    Ok(libs)
}

fn parents(path: &str) -> impl Iterator<Item = String> + '_ {
    Path::new(path)
        .ancestors()
        .skip(1)
        .map(|p| p.to_string_lossy().into_owned())
        .filter(|p| p != "/" && !p.is_empty())
}

impl Initramfs {
    /// An image with busybox (which must be static) and the standard mount points.
    pub fn new() -> Result<Initramfs> {
        let bytes = fs::read(BUSYBOX).map_err(|e| Error::Missing {
            what: "static busybox".into(),
            detail: format!("{BUSYBOX}: {e}"),
        })?;
        if is_dynamic_elf(&bytes) {
            return Err(Error::Missing {
                what: "static busybox".into(),
                detail: format!(
                    "{BUSYBOX} is dynamically linked (package busybox, not busybox-static)"
                ),
            });
        }
        let mut image = Initramfs::default();
        for d in ["/bin", "/dev", "/proc", "/sys", "/tmp", "/etc", "/root"] {
            image.dirs.insert(d.into());
        }
        image.add_bytes("/bin/busybox", bytes, 0o755);
        Ok(image)
    }

    /// Adds in-memory contents at `guest` with permission bits `mode`.
    pub fn add_bytes(&mut self, guest: &str, bytes: Vec<u8>, mode: u32) {
        self.dirs.extend(parents(guest));
        self.files
            .insert(guest.into(), (Source::Bytes(bytes), mode));
    }

    /// Adds the host file `host` at `guest` and, if it is a dynamic ELF, every library ldd lists
    /// for it at the same path as on the host. ELF files above 16 MiB go in without their debug
    /// info (`objcopy --strip-debug`): debug builds of numaff carry some 200 MiB of it, which the
    /// guest's RAM-backed root cannot hold beside everything else (exec then failed with "Text file
    /// busy").
    pub fn add_file(&mut self, host_path: &Path, guest: &str) -> Result<()> {
        use std::os::unix::fs::PermissionsExt;
        if !guest.starts_with('/') {
            return Err(Error::Invalid(format!(
                "guest path {guest:?} is not absolute"
            )));
        }
        let meta = fs::metadata(host_path).map_err(|e| Error::io("cannot read", host_path, e))?;
        let mut head = vec![0u8; 4096];
        let n = {
            use std::io::Read;
            fs::File::open(host_path)
                .and_then(|mut f| f.read(&mut head))
                .map_err(|e| Error::io("cannot read", host_path, e))?
        };
        head.truncate(n);
        if is_dynamic_elf(&head) {
            let out = host::run_output("ldd", &[host_path], None)?;
            let libs = parse_ldd(&out)
                .map_err(|m| Error::Invalid(format!("{}: {m}", host_path.display())))?;
            for lib in libs {
                if !self.files.contains_key(&lib) {
                    self.dirs.extend(parents(&lib));
                    self.files
                        .insert(lib.clone(), (Source::Host(PathBuf::from(&lib)), 0o755));
                }
            }
        }
        self.dirs.extend(parents(guest));
        let mode = meta.permissions().mode() & 0o7777;
        let source = if head.starts_with(b"\x7fELF") && meta.len() > STRIP_ABOVE {
            Source::Bytes(stripped(host_path)?)
        } else {
            Source::Host(host_path.to_path_buf())
        };
        self.files.insert(guest.into(), (source, mode));
        Ok(())
    }

    /// The directories holding the shared libraries (for the guest's LD_LIBRARY_PATH).
    pub fn library_dirs(&self) -> Vec<String> {
        let mut dirs: Vec<String> = self
            .files
            .keys()
            .filter(|p| p.contains(".so"))
            .filter_map(|p| {
                Path::new(p)
                    .parent()
                    .map(|d| d.to_string_lossy().into_owned())
            })
            .collect();
        dirs.sort();
        dirs.dedup();
        dirs
    }

    /// Writes the gzip'd newc archive (with /dev/console, so no root is needed to build it).
    pub fn write_gz(&self, out: &Path) -> Result<()> {
        let file = fs::File::create(out).map_err(|e| Error::io("cannot create", out, e))?;
        let gz = flate2::write::GzEncoder::new(
            std::io::BufWriter::new(file),
            flate2::Compression::fast(),
        );
        let io = |e| Error::io("cannot write", out, e);
        let mut w = gz;
        let mut ino = 1u32;
        let mut next_ino = || {
            ino += 1;
            ino
        };
        let name = |p: &str| p.trim_start_matches('/').to_string();
        for d in &self.dirs {
            w = cpio::newc::Builder::new(&name(d))
                .ino(next_ino())
                .mode(0o040755)
                .nlink(2)
                .write(w, 0)
                .finish()
                .map_err(io)?;
        }
        w = cpio::newc::Builder::new("dev/console")
            .ino(next_ino())
            .mode(0o020600)
            .nlink(1)
            .rdev_major(5)
            .rdev_minor(1)
            .write(w, 0)
            .finish()
            .map_err(io)?;
        for (guest, (source, mode)) in &self.files {
            let bytes = match source {
                Source::Bytes(b) => std::borrow::Cow::Borrowed(b),
                Source::Host(p) => std::borrow::Cow::Owned(
                    fs::read(p).map_err(|e| Error::io("cannot read", p, e))?,
                ),
            };
            let size = u32::try_from(bytes.len())
                .map_err(|_| Error::Invalid(format!("{guest} is larger than 4 GiB")))?;
            let mut fw = cpio::newc::Builder::new(&name(guest))
                .ino(next_ino())
                .mode(0o100000 | (mode & 0o7777))
                .nlink(1)
                .write(w, size);
            fw.write_all(&bytes).map_err(io)?;
            w = fw.finish().map_err(io)?;
        }
        let gz = cpio::newc::trailer(w).map_err(io)?;
        let mut buf = gz.finish().map_err(io)?;
        buf.flush().map_err(io)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output_gives_paths_with_loader() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibhwloc.so.15 => /lib/x86_64-linux-gnu/libhwloc.so.15 (0x1)\n\t/lib64/ld-linux-x86-64.so.2 (0x2)\n";
        assert_eq!(
            parse_ldd(text).unwrap(),
            [
                "/lib/x86_64-linux-gnu/libhwloc.so.15",
                "/lib64/ld-linux-x86-64.so.2"
            ]
        );
        assert!(parse_ldd("\tlibfoo.so => not found\n").is_err());
    }

    #[test]
    fn this_test_binary_is_dynamic_and_busybox_is_not_elf_garbage() {
        let me = fs::read(std::env::current_exe().unwrap()).unwrap();
        // Rust test binaries link glibc dynamically unless built with crt-static.
        assert!(is_dynamic_elf(&me));
        assert!(!is_dynamic_elf(b"#!/bin/sh\necho hi\n"));
    }
}
