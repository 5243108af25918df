//! `sortase markdup`: duplicate marking on query-grouped input (samblaster's algorithm, see
//! `markdup_query.rs`) or on coordinate-sorted input (Picard MarkDuplicates', see `markdup_coord.rs`).
//! The input's `@HD` line decides which, unless `--mode` says so.

use anyhow::Result;
use sortase_bam::Header;
use std::path::PathBuf;

/// Which algorithm runs.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// From the input's @HD line: SO:coordinate is coordinate, anything else query-grouped.
    Auto,
    /// Query-grouped input (aligner output): samblaster's algorithm.
    Query,
    /// Coordinate-sorted input: Picard MarkDuplicates' algorithm.
    Coordinate,
}

/// Arguments of `sortase markdup`.
#[derive(clap::Args, Debug)]
pub struct MarkdupArgs {
    /// Write the output to FILE [stdout].
    #[arg(short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Output format: sam, bam or cram [bam, or from the -o extension].
    #[arg(short = 'O', long = "output-fmt", value_name = "FORMAT")]
    pub output_fmt: Option<String>,
    /// Threads in total [all cores].
    #[arg(short = '@', long = "threads", value_name = "INT")]
    pub threads: Option<usize>,
    /// Compression level 0-9 with samtools' meaning.
    #[arg(short = 'l', value_name = "INT", allow_negative_numbers = true)]
    pub level: Option<i32>,
    /// Uncompressed BAM output.
    #[arg(short = 'u')]
    pub uncompressed: bool,
    /// Write an index with the output (coordinate-sorted BAM only; CSI, or BAI via `##idx##…bai`).
    #[arg(long = "write-index")]
    pub write_index: bool,
    /// Index format for --write-index: csi or bai [csi, or from the ##idx## name].
    #[arg(long = "index-format", value_name = "bai|csi")]
    pub index_format: Option<String>,
    /// Do not add a @PG line to the header.
    #[arg(long = "no-PG")]
    pub no_pg: bool,
    /// Reference FASTA (CRAM input or output).
    #[arg(long = "reference", value_name = "FILE")]
    pub reference: Option<PathBuf>,
    /// Algorithm: auto (from @HD SO), query (samblaster) or coordinate (Picard).
    #[arg(long = "mode", value_enum, default_value_t = Mode::Auto)]
    pub mode: Mode,
    /// Remove duplicates instead of flagging them (samblaster -r, Picard REMOVE_DUPLICATES).
    #[arg(short = 'r', long = "removeDups")]
    pub remove: bool,
    /// Temporary files go to PREFIX.sortase-PID-N.tmp/ [OUT.tmp or TMPDIR].
    #[arg(short = 'T', value_name = "PREFIX")]
    pub temp_prefix: Option<PathBuf>,
    /// samblaster's options (query-grouped input).
    #[command(flatten)]
    pub query: crate::markdup_query::QueryArgs,
    /// Picard's options (coordinate-sorted input).
    #[command(flatten)]
    pub coord: crate::markdup_coord::CoordArgs,
    /// Input SAM/BAM/CRAM file [stdin].
    pub input: Option<String>,
}

/// The `@HD` field `key` (e.g. `SO`), if the header has one.
pub fn hd_field<'h>(header: &'h Header, key: &str) -> Option<&'h str> {
    let hd = header.text().lines().find(|l| l.starts_with("@HD\t"))?;
    hd.split('\t')
        .skip(1)
        .find_map(|f| f.strip_prefix(key)?.strip_prefix(':'))
}

/// The algorithm for `header` when `--mode auto`.
pub fn detect_mode(header: &Header) -> Mode {
    match hd_field(header, "SO") {
        Some("coordinate") => Mode::Coordinate,
        _ => Mode::Query,
    }
}

/// Runs `sortase markdup`.
pub fn run(args: MarkdupArgs) -> Result<()> {
    let input_name = args.input.clone().unwrap_or_else(|| "-".into());
    let threads = args
        .threads
        .unwrap_or_else(crate::common::default_threads)
        .max(1);
    let progress = crate::common::progress(
        "markdup",
        std::fs::metadata(&input_name).map(|m| m.len()).unwrap_or(0),
    );
    let input =
        crate::input::Input::open(&input_name, threads, args.reference.as_deref(), &progress)
            .map_err(|e| e.context(input_name.clone()))?;
    let mode = match args.mode {
        Mode::Auto => detect_mode(&input.header),
        m => m,
    };
    match mode {
        Mode::Coordinate => {
            crate::markdup_coord::run(&args, input, &input_name, threads, &progress)
        }
        _ => crate::markdup_query::run(&args, input, &input_name, threads, &progress),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_from_hd() {
        let h = |t: &str| Header::from_sam_text(t.into()).unwrap();
        assert_eq!(
            detect_mode(&h("@HD\tVN:1.6\tSO:coordinate\n")),
            Mode::Coordinate
        );
        assert_eq!(detect_mode(&h("@HD\tVN:1.6\tSO:queryname\n")), Mode::Query);
        assert_eq!(
            detect_mode(&h("@HD\tVN:1.6\tSO:unsorted\tGO:query\n")),
            Mode::Query
        );
        assert_eq!(detect_mode(&h("@SQ\tSN:c\tLN:5\n")), Mode::Query);
        assert_eq!(hd_field(&h("@HD\tVN:1.6\tGO:query\n"), "GO"), Some("query"));
    }
}
