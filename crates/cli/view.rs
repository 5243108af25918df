//! `sortase view` (and `sortase agd view`, the same arguments): samtools view's flags →
//! [`sortase::ViewJob`] → the count (`-c`) and warnings. The input is a SAM/BAM/CRAM file or an AGD
//! dataset directory. The filters themselves live in `sortase_ops::filter`; this file only names
//! them.

use crate::args::{NoPg, Threads};
use crate::common;
use anyhow::Result;
use sortase::view::{parse_flags, FilterSpec};
use sortase::{OutputSpec, ViewJob};
use std::path::PathBuf;

/// Arguments of `sortase view` (samtools view's flags and meanings).
#[derive(clap::Args, Debug)]
#[command(disable_help_flag = true)]
pub struct ViewArgs {
    /// Output BAM.
    #[arg(short = 'b', long = "bam")]
    bam: bool,
    /// Output CRAM (requires -T).
    #[arg(short = 'C', long = "cram")]
    cram: bool,
    /// Uncompressed BAM output (level 0 BGZF).
    #[arg(short = 'u', long = "uncompressed")]
    uncompressed: bool,
    /// Fast BAM compression (level 1; BAM unless the output name says SAM or CRAM).
    #[arg(short = '1', long = "fast")]
    fast: bool,
    /// Output format: sam, bam or cram.
    #[arg(short = 'O', long = "output-fmt", value_name = "FORMAT")]
    output_fmt: Option<String>,
    /// Write output to FILE [stdout].
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Include the header in SAM output.
    #[arg(short = 'h', long = "with-header")]
    with_header: bool,
    /// Print the header only.
    #[arg(short = 'H', long = "header-only")]
    header_only: bool,
    /// Print only the count of matching records.
    #[arg(short = 'c', long = "count")]
    count: bool,
    /// The regions as one union: each record once, in file order (AGD datasets).
    #[arg(short = 'M', long = "use-index")]
    multi_region: bool,
    #[command(flatten)]
    threads: Threads,
    /// Only records in read group STR.
    #[arg(short = 'r', long = "read-group", value_name = "STR")]
    read_group: Option<String>,
    /// Only records in library STR (the `LB` of their read group's `@RG` line).
    #[arg(short = 'l', long = "library", value_name = "STR")]
    library: Option<String>,
    /// Index the output as it is written (BAM: CSI, `out.bam##idx##out.bam.bai` for BAI; CRAM:
    /// `.crai`).
    #[arg(long = "write-index")]
    write_index: bool,
    #[command(flatten)]
    pg: NoPg,
    /// Reference FASTA (for CRAM).
    #[arg(short = 'T', long = "reference", value_name = "FILE")]
    reference: Option<PathBuf>,
    /// Output option, samtools' `--output-fmt-option`: level=N for BAM; version=3.0|3.1,
    /// seqs_per_slice=N, embed_ref, no_ref, ... for CRAM (repeatable; also `-O bam,level=N`).
    #[arg(long = "output-fmt-option", value_name = "OPT=VAL")]
    output_fmt_option: Vec<String>,
    /// Only records with all of these flag bits set (number or names).
    #[arg(short = 'f', long = "require-flags", value_name = "FLAG")]
    require: Option<String>,
    /// Only records with none of these flag bits set.
    #[arg(short = 'F', long = "excl-flags", value_name = "FLAG")]
    exclude: Option<String>,
    /// Only records with mapping quality ≥ INT.
    #[arg(
        short = 'q',
        long = "min-MQ",
        visible_alias = "min-mapq",
        value_name = "INT",
        default_value_t = 0
    )]
    min_mapq: u8,
    /// Only records overlapping the regions of this BED file (0-based, end exclusive; gzip or
    /// plain). With regions, records in both.
    #[arg(
        short = 'L',
        long = "target-file",
        visible_alias = "targets-file",
        value_name = "FILE"
    )]
    target_file: Option<PathBuf>,
    /// Only records in a read group listed in FILE, or in none; `^FILE`: in none listed there.
    #[arg(short = 'R', long = "read-group-file", value_name = "[^]FILE")]
    read_group_file: Option<String>,
    /// Only records that have a read group.
    #[arg(short = 'n', long = "exclude-no-read-group")]
    exclude_no_read_group: bool,
    /// Only records with tag TAG (with value VAL); repeat for more values of the same tag.
    #[arg(short = 'd', long = "tag", value_name = "TAG[:VAL]")]
    tag: Vec<String>,
    /// Only records whose tag TAG has a value listed in FILE.
    #[arg(short = 'D', long = "tag-file", value_name = "TAG:FILE")]
    tag_file: Option<String>,
    /// Only records whose name is listed in FILE; `^FILE`: whose name is not.
    #[arg(short = 'N', long = "qname-file", value_name = "[^]FILE")]
    qname_file: Option<String>,
    /// Only records for which the htslib filter expression is true, e.g.
    /// 'mapq >= 30 && flag.paired && [NM] < 5' or 'qname =~ "^SRR"'.
    #[arg(
        short = 'e',
        long = "expr",
        visible_alias = "expression",
        value_name = "EXPR",
        allow_hyphen_values = true
    )]
    expr: Option<String>,
    /// Print help.
    #[arg(long = "help", action = clap::ArgAction::Help)]
    help: Option<bool>,
    /// Input SAM/BAM/CRAM file, `-` for stdin, or an AGD dataset directory.
    input: String,
    /// Regions (`chr`, `chr:beg-end`, `*`) of an indexed BAM or CRAM or a coordinate-sorted
    /// dataset.
    regions: Vec<String>,
}

/// Runs `sortase view`.
pub fn run(args: ViewArgs) -> Result<()> {
    let flags = |f: &Option<String>| f.as_deref().map(parse_flags).transpose();
    // -O wins, then -C, then -b; -u and a level alone mean BAM (the job's rule).
    let named = match (args.cram, args.bam) {
        (true, _) => Some("cram".to_string()),
        (false, true) => Some("bam".to_string()),
        _ => None,
    };
    let job = ViewJob {
        input: args.input,
        output: OutputSpec {
            path: args.output,
            format: args.output_fmt.or(named),
            level: args.fast.then_some(1),
            uncompressed: args.uncompressed,
            reference: args.reference,
            format_options: args.output_fmt_option,
            write_index: args.write_index,
            ..OutputSpec::default()
        }
        .with_format_options()?,
        with_header: args.with_header,
        header_only: args.header_only,
        count: args.count,
        filter: FilterSpec {
            require_flags: flags(&args.require)?.unwrap_or(0),
            exclude_flags: flags(&args.exclude)?.unwrap_or(0),
            min_mapq: args.min_mapq,
            read_group: args.read_group,
            read_group_file: args.read_group_file,
            exclude_no_read_group: args.exclude_no_read_group,
            library: args.library,
            targets_file: args.target_file,
            tags: args.tag,
            tag_file: args.tag_file,
            qname_file: args.qname_file,
            expression: args.expr,
        },
        regions: args.regions,
        multi_region: args.multi_region,
        program: args.pg.program(),
    };
    let rt = args.threads.runtime(None)?;
    let report = job.run(&rt)?;
    common::print_warnings(&report.warnings);
    if let (Some(n), true) = (report.count, report.outputs.is_empty()) {
        common::print_stdout(format!("{n}\n"))?;
    }
    Ok(())
}
