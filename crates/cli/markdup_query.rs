//! `sortase markdup` on query-grouped input: samblaster's algorithm (`sortase_markdup::samblaster`).
//!
//! Each input batch is cut into read-name groups (a group straddling batches is carried into the
//! next one); the groups' signatures are computed in parallel, then inserted into the signature set
//! in input order (first seen wins), and the records written with their 0x400 flags in input order.

use crate::input::Input;
use crate::markdup::MarkdupArgs;
use crate::record_sink::{resolve_format, OutFormat, SortedOutput};
use anyhow::{bail, Context, Result};
use sortase::Progress;
use sortase_bgzf::CompressionLevel;
use sortase_markdup::samblaster::side::SideOptions;
use sortase_markdup::samblaster::{Layout, Options, SigSet};
use std::path::PathBuf;

mod marking;
mod side_out;

use marking::{Carry, State};

/// samblaster's own options.
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Query-grouped input (samblaster)")]
pub struct QueryArgs {
    /// Add MC and MQ tags to all records of pairs with both primaries present (samblaster
    /// --addMateTags).
    #[arg(long = "addMateTags")]
    pub add_mate_tags: bool,
    /// Accept the input's duplicate marks: mark nothing (samblaster -a).
    #[arg(short = 'a', long = "acceptDupMarks")]
    pub accept_dups: bool,
    /// Pass groups without a usable primary pair through instead of failing (samblaster
    /// --ignoreUnmated).
    #[arg(long = "ignoreUnmated")]
    pub ignore_unmated: bool,
    /// Padding of each reference in samblaster's signature layout (samblaster --maxReadLength;
    /// changes which alignments at reference ends compare equal).
    #[arg(long = "maxReadLength", value_name = "INT", default_value_t = 500)]
    pub max_read_length: i32,
    /// Do not print the summary to stderr (samblaster -q).
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,
    /// Leave duplicates out of the side outputs -d, -s, --unmappedFile (samblaster -e; -r implies it).
    #[arg(short = 'e', long = "excludeDups")]
    pub exclude_dups: bool,
    /// Write discordant pairs' primaries to FILE (SAM; BAM if it ends in .bam) (samblaster -d).
    #[arg(short = 'd', long = "discordantFile", value_name = "FILE")]
    pub discordant_file: Option<PathBuf>,
    /// Write split reads to FILE (SAM; BAM if it ends in .bam), names suffixed _1/_2 (samblaster -s).
    #[arg(short = 's', long = "splitterFile", value_name = "FILE")]
    pub splitter_file: Option<PathBuf>,
    /// Write unmapped and clipped reads to FILE as FASTQ (FASTA if they have no qualities).
    /// samblaster's short form -u is not taken: -u is samtools' uncompressed BAM here.
    #[arg(long = "unmappedFile", value_name = "FILE")]
    pub unmapped_file: Option<PathBuf>,
    /// Split-read compatibility with bwa mem -M: 0x100 records are split-read candidates too.
    #[arg(short = 'M')]
    pub compat: bool,
    /// Most alignments of a read for it to be a split-read candidate.
    #[arg(long = "maxSplitCount", value_name = "INT", default_value_t = 2)]
    pub max_split_count: i32,
    /// Fewest bases of a split read's alignments that must not overlap.
    #[arg(long = "minNonOverlap", value_name = "INT", default_value_t = 20)]
    pub min_non_overlap: i32,
    /// Smallest indel between alignments on one strand for a split read.
    #[arg(long = "minIndelSize", value_name = "INT", default_value_t = 50)]
    pub min_indel_size: i32,
    /// Most unaligned bases between a split read's alignments.
    #[arg(long = "maxUnmappedBases", value_name = "INT", default_value_t = 50)]
    pub max_unmapped_bases: i32,
    /// Shortest clip for --unmappedFile.
    #[arg(long = "minClipSize", value_name = "INT", default_value_t = 20)]
    pub min_clip: i32,
}

impl QueryArgs {
    fn side_options(&self) -> Result<SideOptions> {
        if self.splitter_file.is_some() && self.min_non_overlap < 1 {
            bail!(
                "--minNonOverlap {}: must be at least 1",
                self.min_non_overlap
            );
        }
        if self.splitter_file.is_some() && self.max_split_count < 2 {
            bail!(
                "--maxSplitCount {}: must be at least 2",
                self.max_split_count
            );
        }
        Ok(SideOptions {
            splitters: self.splitter_file.is_some(),
            unmapped_clipped: self.unmapped_file.is_some(),
            compat: self.compat,
            max_split_count: self.max_split_count.max(0) as usize,
            min_non_overlap: self.min_non_overlap,
            min_indel_size: self.min_indel_size,
            max_unmapped_bases: self.max_unmapped_bases,
            min_clip: self.min_clip,
        })
    }
}

/// Marks duplicates in query-grouped `input`.
pub fn run(
    args: &MarkdupArgs,
    mut input: Input,
    input_name: &str,
    threads: usize,
    progress: &Progress,
) -> Result<()> {
    let q = &args.query;
    let lengths: Vec<u64> = input
        .header
        .references()
        .iter()
        .map(|r| u64::from(r.length))
        .collect();
    // samblaster needs @SQ lines only to mark (-a marks nothing).
    let lengths = if q.accept_dups && lengths.is_empty() {
        vec![0]
    } else {
        lengths
    };
    let layout =
        Layout::new(&lengths, q.max_read_length).with_context(|| input_name.to_string())?;
    let opts = Options {
        ignore_unmated: q.ignore_unmated,
        accept_dups: q.accept_dups,
    };
    let side_opts = q.side_options()?;
    let level = if args.uncompressed {
        CompressionLevel::STORED
    } else {
        CompressionLevel::samtools(args.level.unwrap_or(-1))
    };
    let format = resolve_format(
        args.output_fmt.as_deref(),
        args.output.as_deref(),
        level,
        OutFormat::Bam(level),
    )?;
    let mut header = input.header.clone();
    if !args.no_pg {
        header.add_program(
            "sortase",
            env!("CARGO_PKG_VERSION"),
            &crate::common::command_line(),
        );
    }
    let mut out = SortedOutput::open(
        args.output.as_deref(),
        None,
        format,
        &header,
        threads,
        args.reference.as_deref(),
    )?;
    let side = side_out::Side::open(
        q.discordant_file.as_deref(),
        q.splitter_file.as_deref(),
        q.unmapped_file.as_deref(),
        q.exclude_dups || args.remove,
        &header,
        threads,
    )?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?;
    let mut state = State {
        layout,
        opts,
        sigs: SigSet::default(),
        remove: args.remove,
        mate_tags: q.add_mate_tags,
        scratch: Vec::new(),
        side,
        side_opts,
        marks: Vec::new(),
        extents: Vec::new(),
        groups: 0,
        dups: 0,
        names: (input_name.to_string(), out.name.clone()),
    };
    let mut carry = Carry::default();
    let mut failed: Option<anyhow::Error> = None;
    let read = input.for_each_batch(|batch| {
        let sink = &mut out.sink;
        // Records continuing the carried group come first.
        let mut start = 0;
        if !carry.is_empty() {
            while start < batch.len() && carry.continues(batch.record(start).read_name()) {
                carry.push(batch.raw(start));
                start += 1;
            }
            if start == batch.len() {
                return Ok(());
            }
            let group = carry.take();
            if let Err(e) = state.process_whole(&group, sink, &pool) {
                return Err(anyhow::Error::msg(failed.insert(e).to_string()));
            }
        }
        let mut bounds = Vec::with_capacity(batch.len() / 2);
        let mut g = start;
        let mut prev = batch.record(start).read_name();
        for i in start + 1..batch.len() {
            let name = batch.record(i).read_name();
            if name != prev {
                bounds.push(g..i);
                g = i;
                prev = name;
            }
        }
        for i in g..batch.len() {
            carry.push(batch.raw(i));
        }
        if let Err(e) = state.process(&batch, &bounds, sink, &pool) {
            return Err(anyhow::Error::msg(failed.insert(e).to_string()));
        }
        Ok(())
    });
    // Errors of the marking and writing name their file already; reading errors get the input's.
    if let Err(e) = read {
        return Err(failed
            .take()
            .unwrap_or_else(|| e.context(input_name.to_string())));
    }
    if !carry.is_empty() {
        let group = carry.take();
        state.process_whole(&group, &mut out.sink, &pool)?;
    }
    out.finish()?;
    state.side.finish()?;
    let _ = progress;
    if !q.quiet {
        eprintln!(
            "sortase markdup: {} {} duplicate groups of {} read names",
            if args.remove { "removed" } else { "marked" },
            state.dups,
            state.groups
        );
    }
    Ok(())
}
