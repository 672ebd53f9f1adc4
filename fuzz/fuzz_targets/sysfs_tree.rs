//! Fuzzes machine discovery from a sysfs tree (`--sysfs`): the input is a list of files, each
//! `=== relative/path` then its contents, written into a fresh temporary directory and read back
//! with numaff_machine::sysfs::discover_from; a machine or an error, never a panic.
#![no_main]

use std::path::{Path, PathBuf};

use libfuzzer_sys::fuzz_target;

/// At most this many files, each path at most this deep.
const MAX_FILES: usize = 256;
const MAX_DEPTH: usize = 12;

/// The path under the tree a header names, if every component is a plain name.
fn relative(header: &str) -> Option<PathBuf> {
    let mut path = PathBuf::new();
    let mut depth = 0;
    for part in header.trim().split('/').filter(|p| !p.is_empty()) {
        let plain = part
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
        if !plain || part == "." || part == ".." || part.len() > 64 {
            return None;
        }
        depth += 1;
        path.push(part);
    }
    (depth > 0 && depth <= MAX_DEPTH).then_some(path)
}

fn write_tree(root: &Path, text: &str) {
    let mut files = 0;
    for section in text.split("=== ").skip(1) {
        let (header, body) = section.split_once('\n').unwrap_or((section, ""));
        let Some(rel) = relative(header) else {
            continue;
        };
        let path = root.join(rel);
        if let Some(parent) = path.parent() {
            if std::fs::create_dir_all(parent).is_err() {
                continue;
            }
        }
        // A path that is a directory already (or under a file) is skipped.
        if std::fs::write(&path, body).is_ok() {
            files += 1;
        }
        if files == MAX_FILES {
            break;
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let root = std::env::temp_dir().join(format!("numaff-fuzz-sysfs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    if std::fs::create_dir_all(&root).is_err() {
        return;
    }
    write_tree(&root, text);
    if let Ok(machine) = numaff_machine::sysfs::discover_from(&root) {
        assert!(machine.pu_count() > 0, "a discovered machine has PUs");
    }
    let _ = std::fs::remove_dir_all(&root);
});
