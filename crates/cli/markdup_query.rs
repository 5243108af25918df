//! samblaster's flags of `sortase markdup` (query-grouped input), as
//! [`sortase::markdup::SamblasterOptions`].

use sortase::markdup::SamblasterOptions;
use std::path::PathBuf;

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
    /// The job's samblaster options (`-q` stays with the CLI: it only silences the summary).
    pub fn options(&self) -> SamblasterOptions {
        SamblasterOptions {
            add_mate_tags: self.add_mate_tags,
            accept_dups: self.accept_dups,
            ignore_unmated: self.ignore_unmated,
            max_read_length: self.max_read_length,
            exclude_dups: self.exclude_dups,
            discordant_file: self.discordant_file.clone(),
            splitter_file: self.splitter_file.clone(),
            unmapped_file: self.unmapped_file.clone(),
            compat: self.compat,
            max_split_count: self.max_split_count,
            min_non_overlap: self.min_non_overlap,
            min_indel_size: self.min_indel_size,
            max_unmapped_bases: self.max_unmapped_bases,
            min_clip: self.min_clip,
        }
    }
}
