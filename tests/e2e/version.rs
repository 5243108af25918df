//! `sortase --version` names the libraries compiled in, one `Using NAME VERSION (…)` line each, as
//! `samtools --version` names its htslib. The htslib line must be what the linked library reports at
//! run time (`hts_version()`) and be at least 1.23.1; the others are checked against the versions Cargo.lock resolved.

use crate::common::sortase;

/// The version Cargo.lock resolved for crate `name`.
fn locked(name: &str) -> String {
    let lock = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.lock"))
        .expect("Cargo.lock");
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == format!("name = \"{name}\"") {
            let version = lines.next().unwrap().trim();
            return version
                .trim_start_matches("version = ")
                .trim_matches('"')
                .to_string();
        }
    }
    panic!("{name} not in Cargo.lock");
}

/// The version on the `Using NAME …` line.
fn using(text: &str, name: &str) -> String {
    let prefix = format!("Using {name} ");
    let line = text
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no `{prefix}` line in:\n{text}"));
    line[prefix.len()..].split(' ').next().unwrap().to_string()
}

#[test]
fn version_names_the_libraries() {
    let run = sortase(&["--version"]).expect_ok();
    let text = run.text();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some(concat!("sortase ", env!("CARGO_PKG_VERSION"))),
        "{text}"
    );
    // htslib: the run-time answer of the library the CRAM crate links (hts_version()).
    assert_eq!(
        using(&text, "htslib"),
        sortase_cram::htslib_version(),
        "{text}"
    );
    // The CRAM codec carries the decoder security fixes of htslib 1.23.1 (docs/security.md).
    let htslib = using(&text, "htslib");
    let numeric: Vec<u32> = htslib
        .split('.')
        .map(|p| {
            p.parse()
                .unwrap_or_else(|_| panic!("htslib version {htslib:?}"))
        })
        .collect();
    assert!(
        numeric.as_slice() >= [1, 23, 1].as_slice(),
        "htslib {htslib} is older than 1.23.1:\n{text}"
    );
    assert!(
        text.contains(&format!(
            "Using htslib {htslib} (CRAM codec; compiled from {})",
            sortase_cram::htslib_source()
        )),
        "{text}"
    );
    // libdeflate-sys 1.26.x bundles libdeflate 1.26.
    let deflate = locked("libdeflate-sys");
    let major_minor: Vec<&str> = deflate.split('.').take(2).collect();
    assert_eq!(using(&text, "libdeflate"), major_minor.join("."), "{text}");
    // isal-sys "0.5.3+496255c" builds ISA-L 2.31.0 (its configure.ac); the pin in crates/bgzf keeps
    // the two together.
    assert_eq!(locked("isal-sys"), "0.5.3+496255c");
    assert_eq!(using(&text, "ISA-L"), "2.31.0", "{text}");
    // zstd-sys "2.1.3+zstd.1.5.7" bundles zstd 1.5.7.
    let zstd = locked("zstd-sys");
    assert_eq!(
        Some(using(&text, "zstd").as_str()),
        zstd.split("+zstd.").nth(1),
        "{text}"
    );
    assert_eq!(using(&text, "parquet"), locked("parquet"), "{text}");
    assert_eq!(using(&text, "arrow"), locked("arrow-array"), "{text}");
    let minimap2 = using(&text, "minimap2");
    assert!(
        minimap2.starts_with("2.") && minimap2.contains("-r"),
        "{text}"
    );
    // -V stays the short form.
    let short = sortase(&["-V"]).expect_ok().text();
    assert_eq!(short.trim(), concat!("sortase ", env!("CARGO_PKG_VERSION")));
}
