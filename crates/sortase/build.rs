//! Records the version of the arrow crates this build resolved (from the workspace's Cargo.lock) for
//! `sortase::versions`: arrow exposes no version constant.

use std::path::{Path, PathBuf};

/// The first `version = "…"` after `name = "<name>"` in a Cargo.lock.
fn locked_version(lock: &str, name: &str) -> Option<String> {
    let wanted = format!("name = \"{name}\"");
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == wanted {
            let version = lines.next()?.trim().strip_prefix("version = ")?;
            return Some(version.trim_matches('"').to_string());
        }
    }
    None
}

fn find_lock(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .map(|dir| dir.join("Cargo.lock"))
        .find(|p| p.is_file())
}

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let lock = find_lock(&manifest);
    if let Some(lock) = &lock {
        println!("cargo:rerun-if-changed={}", lock.display());
    }
    let text = lock
        .and_then(|p| std::fs::read_to_string(p).ok())
        .unwrap_or_default();
    let version = locked_version(&text, "arrow-array").unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=SORTASE_ARROW_VERSION={version}");
}
