//! Alignment files as indexed BAMs: an engine that plans its reads from a BAM index's compressed
//! offsets and reads them by byte range (snp-pileup's, crates/ops `pileup`) gets each CRAM among
//! its inputs as a temporary indexed BAM ([`IndexedBams`]), which a CRAM (containers, `.crai`) does
//! not give. The records are htslib's decoding, as samtools' own `sam_read1` gets them.

use crate::error::{Error, ErrorKind, Result};
use crate::output::{OutFormat, ResolvedOutput};
use crate::runtime::Runtime;
use anyhow::Context;
use sortase_bgzf::CompressionLevel;
use std::path::{Path, PathBuf};

/// Inputs with each CRAM replaced by a temporary indexed BAM of its records (BGZF level 1, index
/// built on the fly) in a directory under the runtime's temporary directory.
pub struct IndexedBams {
    paths: Vec<PathBuf>,
    /// (temporary BAM, the CRAM it holds), for messages.
    names: Vec<(String, String)>,
    /// The temporary BAMs' directory, removed with them when this is dropped.
    dir: Option<crate::files::TempDir>,
}

impl IndexedBams {
    /// `inputs`, each CRAM among them (its records decoded by htslib, with `reference`) as a
    /// temporary indexed BAM.
    pub fn decode(bams: &[PathBuf], reference: Option<&Path>, rt: &Runtime) -> Result<Self> {
        let mut decoded = Self {
            paths: bams.to_vec(),
            names: Vec::new(),
            dir: None,
        };
        for (i, path) in bams.iter().enumerate() {
            if !crate::input::is_cram(path) {
                continue;
            }
            if decoded.dir.is_none() {
                decoded.dir = Some(crate::files::TempDir::create(rt.temp_dir())?);
            }
            let dir = decoded.dir.as_ref().expect("created above").path();
            let bam = dir.join(format!("{i}.bam"));
            let name = path.display().to_string();
            decode_cram(&name, &bam, reference, rt)
                .map_err(|e| Error::from(e).context(name.clone()))?;
            decoded.names.push((bam.display().to_string(), name));
            decoded.paths[i] = bam;
        }
        Ok(decoded)
    }

    /// Runs `f` on the paths, naming the CRAMs instead of their temporary BAMs in its error.
    pub fn run<T>(&self, f: impl FnOnce(&[PathBuf]) -> Result<T>) -> Result<T> {
        f(&self.paths).map_err(|e| {
            if self.names.is_empty() {
                return e;
            }
            let mut message = e.to_string();
            for (bam, cram) in &self.names {
                message = message.replace(bam.as_str(), cram);
            }
            Error::new(e.kind(), message)
        })
    }
}

/// Decodes the CRAM `name` into `bam` with an index next to it (`bam.bai`, or `bam.csi` for
/// references too long for a BAI).
fn decode_cram(
    name: &str,
    bam: &Path,
    reference: Option<&Path>,
    rt: &Runtime,
) -> anyhow::Result<()> {
    use crate::writer::{CramOut, SortedOutput};
    let size = std::fs::metadata(name).map(|m| m.len()).unwrap_or(0);
    let progress = rt.progress("snp-pileup (decoding CRAM)", size);
    let mut input = crate::input::Input::open(name, rt.threads(), reference, &progress)?;
    input.set_cancel(rt.cancel_flag().clone());
    let order = input
        .header
        .text()
        .lines()
        .find(|l| l.starts_with("@HD\t"))
        .and_then(|hd| hd.split('\t').find_map(|f| f.strip_prefix("SO:")))
        .map(str::to_string);
    if let Some(order) = order.filter(|o| o != "coordinate" && o != "unknown") {
        return Err(Error::new(
            ErrorKind::Input,
            format!("not sorted by coordinate (@HD SO:{order}); sort it with `samtools sort` and index it"),
        )
        .into());
    }
    // A BAI when every reference fits one (2^29 bases), else a CSI: the pileup engine's probes
    // may query past a reference's end, which a CSI sized to the longest reference (samtools'
    // depth) refuses ("invalid start bound").
    let bai = input
        .header
        .references()
        .iter()
        .all(|r| u64::from(r.length) < 1 << 29);
    let mut index = bam.as_os_str().to_owned();
    index.push(if bai { ".bai" } else { ".csi" });
    let out = ResolvedOutput {
        data: Some(bam.to_path_buf()),
        index: Some((PathBuf::from(index), bai)),
        format: OutFormat::Bam(CompressionLevel::from_libdeflate(1)),
    };
    let mut out = SortedOutput::open(&out, &input.header, rt.threads(), &CramOut::default())?;
    input.for_each_batch(|b| {
        out.sink
            .write_batch(b)
            .context("not sorted by coordinate, or the temporary BAM cannot be written")
    })?;
    out.finish()?;
    progress.finish();
    Ok(())
}
