//! Resolving a job's output as samtools does, in one place for every job: the format (`-O`, then
//! `-u`/`-l`, then the file's extension), the data path and the `--write-index` target (`##idx##`,
//! `--index-format`, `.crai` for CRAM), and where temporary files go (`-T`, else next to the
//! output). Below [`crate::writer`], which writes what is resolved here.

use crate::error::{Error, Result};
use crate::options::OutputSpec;
use anyhow::bail;
use sortase_bgzf::CompressionLevel;
use std::path::{Path, PathBuf};

/// Output format of a record stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutFormat {
    /// SAM text.
    Sam,
    /// BAM at a BGZF level.
    Bam(CompressionLevel),
    /// CRAM (needs a reference).
    Cram,
    /// An AGD dataset directory (`-O agd`, or an existing directory as the output), written by the
    /// jobs that have a dataset sink (sort); the record writers here refuse it.
    Agd,
}

/// Why a record writer refuses [`OutFormat::Agd`]: a dataset is written by a job's dataset sink.
pub const AGD_REFUSED: &str =
    "AGD output (-O agd, or a directory as -o): only sort writes a dataset (sortase sort -O agd)";

/// Resolves samtools' output options: `-O` wins, then `-u`/`-l` imply BAM, then an existing
/// directory is a dataset (AGD), then the output file's extension, then `default`.
pub fn resolve_format(
    output_fmt: Option<&str>,
    output: Option<&Path>,
    level: CompressionLevel,
    default: OutFormat,
) -> anyhow::Result<OutFormat> {
    if let Some(f) = output_fmt {
        return Ok(match f.to_ascii_lowercase().as_str() {
            "sam" => OutFormat::Sam,
            "bam" => OutFormat::Bam(level),
            "cram" => OutFormat::Cram,
            "agd" => OutFormat::Agd,
            other => bail!(Error::argument(format!(
                "-O {other}: unknown output format (use sam, bam, cram or agd)"
            ))),
        });
    }
    if output.is_some_and(Path::is_dir) {
        return Ok(OutFormat::Agd);
    }
    let by_extension = output.and_then(|p| p.extension()).and_then(|e| {
        match e.to_str()?.to_ascii_lowercase().as_str() {
            "bam" => Some(OutFormat::Bam(level)),
            "cram" => Some(OutFormat::Cram),
            "sam" => Some(OutFormat::Sam),
            _ => None,
        }
    });
    Ok(by_extension.unwrap_or(match default {
        OutFormat::Bam(_) => OutFormat::Bam(level),
        d => d,
    }))
}

/// The data path, the BAM index path and whether it is a BAI, as samtools' `auto_index` names them:
/// `OUT##idx##INDEX` splits the name, `--index-format` (`bai`/`csi`) wins over the index name's
/// extension. [`index_target`] adds CRAM's `.crai`.
pub fn split_index_name(output: &Path, format: Option<&str>) -> Result<(PathBuf, PathBuf, bool)> {
    let s = output.to_string_lossy();
    let (data, idx) = match s.split_once("##idx##") {
        Some((d, i)) => (PathBuf::from(d), Some(PathBuf::from(i))),
        None => (output.to_path_buf(), None),
    };
    let bai = match format.map(str::to_ascii_lowercase).as_deref() {
        Some("bai") => true,
        Some("csi") => false,
        Some(other) => {
            return Err(Error::argument(format!(
                "--index-format {other}: use bai or csi"
            )))
        }
        None => idx
            .as_ref()
            .is_some_and(|i| i.to_string_lossy().ends_with(".bai")),
    };
    let idx = idx.unwrap_or_else(|| {
        let mut n = data.as_os_str().to_owned();
        n.push(if bai { ".bai" } else { ".csi" });
        PathBuf::from(n)
    });
    Ok((data, idx, bai))
}

/// The index file of `--write-index` for `format` output to `output` (samtools' `auto_index`): the
/// name after `##idx##` if given, else the data file's name plus `.crai` for CRAM, `.bai` or `.csi`
/// for BAM ([`split_index_name`]). Returns the data path, the index path and whether it is a BAI.
pub fn index_target(
    output: &Path,
    index_format: Option<&str>,
    format: OutFormat,
) -> Result<(PathBuf, PathBuf, bool)> {
    let (data, index, bai) = split_index_name(output, index_format)?;
    if format != OutFormat::Cram || output.to_string_lossy().contains("##idx##") {
        return Ok((data, index, bai));
    }
    let mut crai = data.as_os_str().to_owned();
    crai.push(".crai");
    Ok((data, PathBuf::from(crai), false))
}

impl OutputSpec {
    /// The data file's path without a `##idx##` suffix (`None`: standard output).
    pub fn data_path(&self) -> Result<Option<PathBuf>> {
        match self.path.as_deref() {
            Some(p) if p != Path::new("-") => Ok(Some(split_index_name(p, None)?.0)),
            _ => Ok(None),
        }
    }

    /// The output format `-O` or the data file's name gives, else BAM; the BGZF level is `-u`, then
    /// `-l`, then `default_level` ([`Self::compression_level`]), as sort, markdup and agd export
    /// resolve it.
    pub fn format_or_bam(&self, default_level: u8) -> anyhow::Result<OutFormat> {
        let level = self.compression_level(default_level);
        let data = self.data_path()?;
        resolve_format(
            self.format.as_deref(),
            data.as_deref(),
            level,
            OutFormat::Bam(level),
        )
    }

    /// Where `format` output goes, as samtools view resolves it: the data file ([`Self::data_path`])
    /// and, with `--write-index`, its index ([`Self::written_index`]).
    pub fn resolve_as(&self, format: OutFormat) -> anyhow::Result<ResolvedOutput> {
        Ok(ResolvedOutput {
            index: self.written_index(format)?,
            data: self.data_path()?,
            format,
        })
    }

    /// The index of `--write-index` (path, BAI?) for `format` output, as samtools view names it: BAM
    /// gets a CSI (or BAI), CRAM a `.crai` ([`index_target`]); it needs BAM or CRAM output to a file.
    pub fn written_index(&self, format: OutFormat) -> anyhow::Result<Option<(PathBuf, bool)>> {
        if !self.write_index {
            return Ok(None);
        }
        let Some(path) = self.path.as_deref().filter(|p| *p != Path::new("-")) else {
            bail!(Error::argument("--write-index needs an output file (-o)"));
        };
        if format == OutFormat::Sam {
            bail!(Error::argument(
                "--write-index: sortase writes indexes for BAM and CRAM output only"
            ));
        }
        let (_, index, bai) = index_target(path, self.index_format.as_deref(), format)?;
        Ok(Some((index, bai)))
    }
}

/// Where temporary files go: `-T PREFIX`, else next to the output (`OUT.tmp`), else `fallback`.
pub fn temp_prefix(given: Option<&Path>, output: Option<&Path>, fallback: &Path) -> PathBuf {
    match (given, output) {
        (Some(t), _) => t.to_path_buf(),
        (None, Some(d)) => {
            let mut p = d.as_os_str().to_owned();
            p.push(".tmp");
            PathBuf::from(p)
        }
        (None, None) => fallback.to_path_buf(),
    }
}

/// The output's resolved form: data path, index (path, BAI?), format. The sinks open it
/// ([`crate::writer::SortedOutput::open`], [`crate::range_output::open`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedOutput {
    /// The data file (`None`: standard output).
    pub data: Option<PathBuf>,
    /// The index of `--write-index`: its path and whether it is a BAI.
    pub index: Option<(PathBuf, bool)>,
    /// The output format.
    pub format: OutFormat,
}

impl ResolvedOutput {
    /// `format` output to `path` (`None` or `-`: standard output), without an index.
    pub fn unindexed(path: Option<&Path>, format: OutFormat) -> Self {
        Self {
            data: path.filter(|p| *p != Path::new("-")).map(Path::to_path_buf),
            index: None,
            format,
        }
    }

    /// The index, borrowed: its path and whether it is a BAI.
    pub fn index_file(&self) -> Option<(&Path, bool)> {
        self.index.as_ref().map(|(p, bai)| (p.as_path(), *bai))
    }

    /// The files the output leaves: the data file (none for standard output), then the index.
    pub fn files(&self) -> Vec<PathBuf> {
        let index = self.index.iter().map(|(p, _)| p.clone());
        self.data.iter().cloned().chain(index).collect()
    }
}

/// Resolves `-o/-O/-l/-u/--write-index` as samtools sort does (`coordinate`: the sort order is
/// coordinate, the only one indexes are written for).
pub fn resolve_output(
    output: &OutputSpec,
    default_level: u8,
    coordinate: bool,
    warnings: &mut Vec<String>,
) -> anyhow::Result<ResolvedOutput> {
    let path = output.path.as_deref().filter(|p| *p != Path::new("-"));
    let (data, index) = match path {
        Some(o) if output.write_index => {
            let (d, i, bai) = split_index_name(o, output.index_format.as_deref())?;
            (Some(d), Some((i, bai)))
        }
        Some(o) => (Some(split_index_name(o, None)?.0), None),
        None => (None, None),
    };
    let format = output.format_or_bam(default_level)?;
    if format == OutFormat::Cram {
        warnings.extend(output.cram_reference_warning());
    }
    let index = match (index, coordinate, format) {
        (Some(i), true, OutFormat::Bam(_)) => Some(i),
        // CRAM: a `.crai` (samtools' name unless `##idx##` gives one), built from the written file.
        (Some((i, _)), true, OutFormat::Cram) => {
            let i = match path {
                Some(o) => index_target(o, output.index_format.as_deref(), format)?.1,
                None => i,
            };
            Some((i, false))
        }
        (Some(_), true, _) => {
            return Err(Error::argument(
                "--write-index: sortase writes indexes for BAM and CRAM output only",
            )
            .into())
        }
        (Some(_), _, _) => {
            warnings.push(
                "[W::bam_sort] Ignoring --write-index as it only works for position sorted files."
                    .into(),
            );
            None
        }
        (None, _, _) => None,
    };
    if output.write_index && data.is_none() {
        return Err(Error::argument("--write-index needs an output file (-o)").into());
    }
    Ok(ResolvedOutput {
        data,
        index,
        format,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_names_follow_samtools_auto_index() {
        let (d, i, bai) = split_index_name(Path::new("o.bam##idx##o.bam.bai"), None).unwrap();
        assert_eq!((d, i, bai), ("o.bam".into(), "o.bam.bai".into(), true));
        let cram = |name: &str| index_target(Path::new(name), None, OutFormat::Cram).unwrap();
        assert_eq!(
            cram("o.cram"),
            ("o.cram".into(), "o.cram.crai".into(), false)
        );
        assert_eq!(cram("o.cram##idx##i.crai").1, PathBuf::from("i.crai"));
        let bam = index_target(
            Path::new("o.bam"),
            Some("BAI"),
            OutFormat::Bam(CompressionLevel::STORED),
        );
        assert_eq!(bam.unwrap().1, PathBuf::from("o.bam.bai"));
        assert!(split_index_name(Path::new("o.bam"), Some("tbi")).is_err());
    }
}
