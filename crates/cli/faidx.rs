//! `sortase faidx`: samtools faidx's flags → [`sortase::FaidxJob`].

use anyhow::Result;
use sortase::FaidxJob;
use std::path::PathBuf;

/// Arguments of `sortase faidx` (samtools faidx's flags).
#[derive(clap::Args, Debug)]
pub struct FaidxArgs {
    /// Write regions to FILE (.gz/.bgz/.bgzf: bgzipped); with no regions, the .fai name.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Bases per output line [the input's line length]; 0: no wrapping.
    #[arg(
        short = 'n',
        long = "length",
        value_name = "INT",
        allow_negative_numbers = true
    )]
    length: Option<i64>,
    /// Continue after a region whose sequence is not in the index.
    #[arg(short = 'c', long = "continue")]
    keep_going: bool,
    /// File of regions, one per line.
    #[arg(short = 'r', long = "region-file", value_name = "FILE")]
    region_file: Option<PathBuf>,
    /// File and index in FASTQ format.
    #[arg(short = 'f', long = "fastq")]
    fastq: bool,
    /// Reverse complement sequences.
    #[arg(short = 'i', long = "reverse-complement")]
    reverse: bool,
    /// Strand mark: rc (/rc on the reverse strand), no, sign ((+)/(-)), custom,POS,NEG.
    #[arg(long = "mark-strand", value_name = "TYPE", default_value = "rc")]
    mark_strand: String,
    /// Name of the .fai index [FILE.fai].
    #[arg(long = "fai-idx", value_name = "FILE")]
    fai_idx: Option<PathBuf>,
    /// Name of the .gzi index [FILE.gzi].
    #[arg(long = "gzi-idx", value_name = "FILE")]
    gzi_idx: Option<PathBuf>,
    #[command(flatten)]
    threads: crate::args::Threads,
    /// FASTA/FASTQ file, plain or bgzipped.
    input: PathBuf,
    /// Regions: NAME, NAME:BEG-END, {NAME}:BEG-END.
    regions: Vec<String>,
}

/// Runs `sortase faidx`; warnings are printed as they arise, as samtools prints them.
pub fn run(args: FaidxArgs) -> Result<()> {
    let job = FaidxJob {
        input: args.input,
        regions: args.regions,
        region_file: args.region_file,
        output: args.output,
        line_length: args.length,
        keep_going: args.keep_going,
        fastq: args.fastq,
        reverse_complement: args.reverse,
        mark_strand: args.mark_strand,
        fai_index: args.fai_idx,
        gzi_index: args.gzi_idx,
    };
    let rt = args.threads.runtime(None)?;
    job.run_with_warnings(&rt, &mut |w| eprintln!("{w}"))?;
    Ok(())
}
