//! The versions of the libraries compiled into sortase, for `sortase --version` (as `samtools
//! --version` names its htslib): the CRAM codec (htslib, asked at run time), libdeflate and ISA-L (BGZF),
//! minimap2 (fq2bam), zstd, parquet and arrow (AGD datasets).

/// One library compiled into sortase and its version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Component {
    /// The library's name, e.g. `htslib`.
    pub name: &'static str,
    /// Its version as the library itself states it, e.g. `1.24`.
    pub version: String,
    /// Where the version comes from or what the library is used for, e.g. `CRAM codec`.
    pub note: String,
}

/// The libraries compiled into sortase, codec first.
///
/// ```
/// let components = sortase::versions::components();
/// let htslib = components.iter().find(|c| c.name == "htslib").unwrap();
/// assert_eq!(htslib.version, sortase_cram::htslib_version());
/// ```
pub fn components() -> Vec<Component> {
    let parquet = parquet::file::properties::DEFAULT_CREATED_BY;
    let parquet = parquet
        .strip_prefix("parquet-rs version ")
        .unwrap_or(parquet);
    let component = |name, version: &str, note: &str| Component {
        name,
        version: version.to_string(),
        note: note.to_string(),
    };
    vec![
        component(
            "htslib",
            &sortase_cram::htslib_version(),
            &format!(
                "CRAM codec; compiled from {}",
                sortase_cram::htslib_source()
            ),
        ),
        component(
            "libdeflate",
            sortase_bgzf::LIBDEFLATE_VERSION,
            "BGZF levels 3-9",
        ),
        component("ISA-L", sortase_bgzf::ISAL_VERSION, "BGZF levels 1-2"),
        component("minimap2", sortase_align::minimap2_version(), "fq2bam"),
        component("zstd", zstd_safe::version_string(), "AGD Parquet chunks"),
        component("parquet", parquet, "AGD datasets; Rust crate"),
        component("arrow", env!("SORTASE_ARROW_VERSION"), "Rust crate"),
    ]
}
