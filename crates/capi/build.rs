// Gives libnumaff.so the soname libnumaff.so.MAJOR, so programs linked against an installed
// libnumaff.so (a symlink to libnumaff.so.MAJOR.MINOR.PATCH) keep working across compatible updates.
//
// A program linked against the build tree's target/<profile>/libnumaff.so asks for the soname
// too, so the build tree gets the link libnumaff.so.MAJOR -> libnumaff.so in target/<profile> and
// target/<profile>/deps. A build script runs before the library is linked, so the link is made
// first and dangles until the link step writes libnumaff.so beside it.
use std::path::Path;

fn main() {
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_else(|_| "0".into());
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libnumaff.so.{major}");
    println!("cargo:rerun-if-changed=build.rs");
    if let Ok(out_dir) = std::env::var("OUT_DIR") {
        soname_links(Path::new(&out_dir), &format!("libnumaff.so.{major}"));
    }
}

/// Links `soname` -> libnumaff.so in the profile directory above `out_dir`
/// (target/<profile>/build/numaff-capi-HASH/out) and in its deps/, where cargo puts the library.
/// Anything unexpected (another layout, a regular file of that name, a failure) leaves things as
/// they are with a warning: the link is a convenience of the build tree, not part of the build.
#[cfg(unix)]
fn soname_links(out_dir: &Path, soname: &str) {
    let Some(profile) = out_dir
        .parent()
        .and_then(Path::parent)
        .filter(|build| build.file_name().is_some_and(|n| n == "build"))
        .and_then(Path::parent)
    else {
        println!("cargo:warning=unexpected OUT_DIR layout; no {soname} link in the build tree");
        return;
    };
    for dir in [profile.to_path_buf(), profile.join("deps")] {
        let link = dir.join(soname);
        match std::fs::symlink_metadata(&link) {
            Ok(m) if m.file_type().is_symlink() => {
                if std::fs::read_link(&link).is_ok_and(|t| t == Path::new("libnumaff.so")) {
                    continue;
                }
                let _ = std::fs::remove_file(&link);
            }
            Ok(_) => {
                println!(
                    "cargo:warning={} exists and is not a link; left as it is",
                    link.display()
                );
                continue;
            }
            Err(_) => {}
        }
        if let Err(e) = std::fs::create_dir_all(&dir)
            .and_then(|()| std::os::unix::fs::symlink("libnumaff.so", &link))
        {
            println!(
                "cargo:warning=cannot link {} -> libnumaff.so: {e}",
                link.display()
            );
        }
    }
}

#[cfg(not(unix))]
fn soname_links(_out_dir: &Path, _soname: &str) {}
