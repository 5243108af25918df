//! `sortase index`: BAI (default) or CSI (`-c`) identical to `samtools index`.

use crate::output::OutputFile;
use anyhow::{Context, Result};
use sortase_index::IndexFormat;
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `sortase index` (samtools index's flags).
#[derive(clap::Args, Debug)]
pub struct IndexArgs {
    /// Write a BAI index (default).
    #[arg(short = 'b', long = "bai", conflicts_with = "csi")]
    bai: bool,
    /// Write a CSI index.
    #[arg(short = 'c', long = "csi")]
    csi: bool,
    /// min_shift for CSI (implies -c).
    #[arg(short = 'm', long = "min-shift", value_name = "INT")]
    min_shift: Option<u32>,
    /// Threads in total [all cores].
    #[arg(short = '@', long = "threads", value_name = "INT")]
    threads: Option<usize>,
    /// Index file name [in.bam.bai or in.bam.csi].
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Input BAM (coordinate-sorted).
    input: PathBuf,
    /// Index file name (old positional form).
    out_positional: Option<PathBuf>,
}

/// Runs `sortase index`.
pub fn run(args: IndexArgs) -> Result<()> {
    let threads = args
        .threads
        .unwrap_or_else(crate::common::default_threads)
        .max(1);
    let csi = args.csi || args.min_shift.is_some();
    let min_shift = args.min_shift.unwrap_or(14);
    let out = args
        .output
        .clone()
        .or(args.out_positional.clone())
        .unwrap_or_else(|| {
            let mut s = args.input.as_os_str().to_owned();
            s.push(if csi { ".csi" } else { ".bai" });
            PathBuf::from(s)
        });
    let name = args.input.display().to_string();
    std::fs::File::open(&args.input).with_context(|| format!("{name}: cannot open"))?;
    let bytes = sortase_index::index_file(&args.input, threads, |longest| {
        if csi {
            IndexFormat::csi_for(min_shift, longest)
        } else {
            IndexFormat::Bai
        }
    })
    .with_context(|| name.clone())?;
    let (pending, mut f) = OutputFile::create(&out)?;
    f.write_all(&bytes)
        .with_context(|| format!("{}: cannot write", out.display()))?;
    f.sync_all().ok();
    pending.commit()
}
