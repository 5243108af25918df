//! Reads libdeflate's version macro from the header libdeflate-sys built (it exports its include
//! directory as `DEP_LIBDEFLATE_INCLUDE`), for `sortase_bgzf::LIBDEFLATE_VERSION`.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_LIBDEFLATE_INCLUDE");
    let version = std::env::var_os("DEP_LIBDEFLATE_INCLUDE")
        .map(|dir| PathBuf::from(dir).join("libdeflate.h"))
        .and_then(|header| {
            println!("cargo:rerun-if-changed={}", header.display());
            std::fs::read_to_string(header).ok()
        })
        .and_then(|text| {
            text.lines().find_map(|line| {
                let rest = line.trim().strip_prefix("#define")?.trim_start();
                let value = rest.strip_prefix("LIBDEFLATE_VERSION_STRING")?.trim();
                Some(value.trim_matches('"').to_string())
            })
        })
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=SORTASE_LIBDEFLATE_VERSION={version}");
}
