//! The guest kernel: a stock Debian cloud kernel, resolved through the `linux-image-cloud-amd64`
//! metapackage (never a hard-coded version), fetched with `apt-get download` and cached under target/.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::host::{self, FileLock};

/// The Debian metapackage that always depends on the current cloud kernel image.
pub const METAPACKAGE: &str = "linux-image-cloud-amd64";

/// A kernel ready to boot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kernel {
    /// The image package, e.g. `linux-image-6.1.0-56-cloud-amd64`.
    pub package: String,
    /// The package's Debian version (e.g. `6.1.192-2`), or "cached" when apt could not be asked.
    pub version: String,
    /// The extracted `vmlinuz`.
    pub vmlinuz: PathBuf,
}

/// The image package the metapackage's candidate depends on, from `apt-cache depends` output.
pub fn parse_depends(text: &str) -> Option<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("Depends:"))
        .map(|d| d.trim().trim_start_matches('<').trim_end_matches('>'))
        .find(|d| d.starts_with("linux-image-") && *d != METAPACKAGE)
        .map(str::to_string)
}

/// The `Version:` field of the first stanza of `apt-cache show` output.
pub fn parse_version(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("Version:"))
        .map(|v| v.trim().to_string())
}

/// Asks apt which image package the metapackage resolves to now, and its version.
pub fn resolve() -> Result<(String, String)> {
    let apt_index_error = |e: Error| match e {
        Error::Command { stderr, .. } => Error::AptIndex {
            detail: format!("apt-cache knows no {METAPACKAGE}: {stderr}"),
        },
        other => other,
    };
    let depends =
        host::run_output("apt-cache", &["depends", METAPACKAGE], None).map_err(apt_index_error)?;
    let package = parse_depends(&depends).ok_or_else(|| Error::AptIndex {
        detail: format!("`apt-cache depends {METAPACKAGE}` names no linux-image package"),
    })?;
    let show = host::run_output("apt-cache", &["show", &package], None).map_err(apt_index_error)?;
    // `apt-cache show` lists every version; the candidate is the one the metapackage pins, which
    // `apt-cache policy` names. Fall back to the first stanza.
    let version = host::run_output("apt-cache", &["policy", &package], None)
        .ok()
        .and_then(|p| {
            p.lines()
                .find_map(|l| l.trim().strip_prefix("Candidate:"))
                .map(|v| v.trim().to_string())
        })
        .filter(|v| v != "(none)")
        .or_else(|| parse_version(&show))
        .unwrap_or_else(|| "unknown".into());
    Ok((package, version))
}

/// The current kernel, downloaded on first use and cached in `<target>/testvm/kernels/<package>/`.
/// Concurrent callers (other test binaries) wait on a file lock while one downloads. When apt cannot
/// be asked but a kernel is cached, the newest cached one is used.
pub fn obtain() -> Result<Kernel> {
    let cache = host::cache_dir()?;
    let kernels = cache.join("kernels");
    fs::create_dir_all(&kernels).map_err(|e| Error::io("cannot create", &kernels, e))?;
    let _lock = FileLock::acquire(&cache.join("kernel.lock"))?;
    let (package, version) = match resolve() {
        Ok(pv) => pv,
        Err(e) => return newest_cached(&kernels).ok_or(e),
    };
    let dir = kernels.join(&package);
    let vmlinuz = dir.join("vmlinuz");
    if !vmlinuz.is_file() {
        download(&package, &version, &dir)?;
    }
    Ok(Kernel {
        package,
        version,
        vmlinuz,
    })
}

fn newest_cached(kernels: &Path) -> Option<Kernel> {
    let mut found: Vec<(std::time::SystemTime, PathBuf, String)> = fs::read_dir(kernels)
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let vmlinuz = e.path().join("vmlinuz");
            let mtime = fs::metadata(&vmlinuz).ok()?.modified().ok()?;
            Some((mtime, vmlinuz, e.file_name().to_string_lossy().into_owned()))
        })
        .collect();
    found.sort();
    let (_, vmlinuz, package) = found.pop()?;
    Some(Kernel {
        package,
        version: "cached".into(),
        vmlinuz,
    })
}

/// `apt-get download` + `dpkg-deb -x` into a scratch dir next to `dir`, then keep only vmlinuz.
fn download(package: &str, version: &str, dir: &Path) -> Result<()> {
    let t0 = std::time::Instant::now();
    let parent = dir.parent().unwrap_or(dir);
    let scratch = parent.join(format!(".download-{package}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&scratch);
    fs::create_dir_all(&scratch).map_err(|e| Error::io("cannot create", &scratch, e))?;
    let result = (|| -> Result<()> {
        let spec = format!("{package}={version}");
        let spec = if version == "unknown" { package } else { &spec };
        host::run_output("apt-get", &["download", "-q", spec], Some(&scratch))?;
        let deb = fs::read_dir(&scratch)
            .map_err(|e| Error::io("cannot read", &scratch, e))?
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "deb"))
            .ok_or_else(|| Error::Command {
                command: format!("apt-get download {spec}"),
                status: "succeeded".into(),
                stderr: format!("but left no .deb in {}", scratch.display()),
            })?;
        let root = scratch.join("root");
        host::run_output(
            "dpkg-deb",
            &[
                std::ffi::OsStr::new("-x"),
                deb.as_os_str(),
                root.as_os_str(),
            ],
            None,
        )?;
        let boot = root.join("boot");
        let image = fs::read_dir(&boot)
            .map_err(|e| Error::io("cannot read", &boot, e))?
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-"))
            })
            .ok_or_else(|| Error::Invalid(format!("{} holds no boot/vmlinuz-*", deb.display())))?;
        fs::create_dir_all(dir).map_err(|e| Error::io("cannot create", dir, e))?;
        let tmp = dir.join("vmlinuz.tmp");
        fs::copy(&image, &tmp).map_err(|e| Error::io("cannot copy", &image, e))?;
        let dest = dir.join("vmlinuz");
        fs::rename(&tmp, &dest).map_err(|e| Error::io("cannot rename", &tmp, e))?;
        Ok(())
    })();
    let _ = fs::remove_dir_all(&scratch);
    result?;
    let _ = writeln!(
        std::io::stderr(),
        "testvm: downloaded {package} {version} in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depends_names_the_image_package() {
        let text = "linux-image-cloud-amd64\n  Depends: linux-image-6.1.0-56-cloud-amd64\n";
        assert_eq!(
            parse_depends(text).as_deref(),
            Some("linux-image-6.1.0-56-cloud-amd64")
        );
        assert_eq!(parse_depends("linux-image-cloud-amd64\n"), None);
    }

    #[test]
    fn version_is_the_first_stanza() {
        let text = "Package: x\nVersion: 6.1.192-2\n\nPackage: x\nVersion: 6.1.176-1\n";
        assert_eq!(parse_version(text).as_deref(), Some("6.1.192-2"));
    }
}
