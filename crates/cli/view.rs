//! `sortase view`: samtools view's conversions, filters, region queries and counting.
//!
//! BAM → BAM copies raw records into a parallel BGZF writer (no decode/encode); SAM output is formatted
//! in parallel batches; CRAM goes through noodles.

use crate::input::{Format, Input};
use crate::output::Destination;
use crate::record_sink::{OutFormat as RecordFormat, RecordSink};
use anyhow::{bail, Context, Result};
use sortase_bam::{cram::CramWriter, flags, query, Header, RecordBatch, RecordRef};
use sortase_bgzf::{CompressionLevel, ParallelWriter, WriterOptions};
use std::io::Write;
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
    /// Threads in total [all cores].
    #[arg(short = '@', long = "threads", value_name = "INT")]
    threads: Option<usize>,
    /// Compression level 0-9 (samtools' meaning) [6].
    #[arg(short = 'l', value_name = "INT", allow_negative_numbers = true)]
    level: Option<i32>,
    /// Do not add a @PG line to the header.
    #[arg(long = "no-PG")]
    no_pg: bool,
    /// Reference FASTA (for CRAM).
    #[arg(short = 'T', long = "reference", value_name = "FILE")]
    reference: Option<PathBuf>,
    /// Only records with all of these flag bits set (number or names).
    #[arg(short = 'f', long = "require-flags", value_name = "FLAG")]
    require: Option<String>,
    /// Only records with none of these flag bits set.
    #[arg(short = 'F', long = "excl-flags", value_name = "FLAG")]
    exclude: Option<String>,
    /// Only records with mapping quality ≥ INT.
    #[arg(short = 'q', long = "min-MQ", value_name = "INT", default_value_t = 0)]
    min_mapq: u8,
    /// Print help.
    #[arg(long = "help", action = clap::ArgAction::Help)]
    help: Option<bool>,
    /// Input SAM/BAM/CRAM file, `-` for stdin.
    input: String,
    /// Regions (`chr`, `chr:beg-end`) on an indexed BAM.
    regions: Vec<String>,
}

/// Which records pass `-f/-F/-q`.
#[derive(Debug, Clone, Copy)]
struct Filter {
    require: u16,
    exclude: u16,
    min_mapq: u8,
}

impl Filter {
    #[inline]
    fn pass(&self, r: &RecordRef<'_>) -> bool {
        let flag = r.flag();
        flag & self.require == self.require
            && flag & self.exclude == 0
            && r.mapping_quality() >= self.min_mapq
    }
}

/// Parses a flag as samtools does: decimal, 0x hex, 0 octal, or comma-separated names.
fn parse_flags(s: &str) -> Result<u16> {
    let parsed = if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u16::from_str_radix(hex, 16).ok()
    } else if s.len() > 1 && s.starts_with('0') {
        u16::from_str_radix(&s[1..], 8).ok()
    } else {
        s.parse().ok()
    };
    if let Some(v) = parsed {
        return Ok(v);
    }
    let mut v = 0;
    for name in s.split(',') {
        v |= match name {
            "PAIRED" => flags::PAIRED,
            "PROPER_PAIR" => flags::PROPER_PAIR,
            "UNMAP" => flags::UNMAPPED,
            "MUNMAP" => flags::MATE_UNMAPPED,
            "REVERSE" => flags::REVERSE,
            "MREVERSE" => flags::MATE_REVERSE,
            "READ1" => flags::READ1,
            "READ2" => flags::READ2,
            "SECONDARY" => flags::SECONDARY,
            "QCFAIL" => flags::QC_FAIL,
            "DUP" => flags::DUPLICATE,
            "SUPPLEMENTARY" => flags::SUPPLEMENTARY,
            _ => bail!("invalid flag {s:?}: use a number or names such as UNMAP,SECONDARY"),
        };
    }
    Ok(v)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OutFormat {
    Sam,
    Bam(CompressionLevel),
    Cram,
}

fn output_format(args: &ViewArgs) -> Result<OutFormat> {
    let level = if args.uncompressed {
        CompressionLevel::STORED
    } else {
        CompressionLevel::samtools(args.level.unwrap_or(-1))
    };
    let named = match args
        .output_fmt
        .as_deref()
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        None => None,
        Some("sam") => Some(OutFormat::Sam),
        Some("bam") => Some(OutFormat::Bam(level)),
        Some("cram") => Some(OutFormat::Cram),
        Some(other) => bail!("-O {other}: unknown output format (use sam, bam or cram)"),
    };
    // Like samtools, with no format option the output file's extension decides.
    let by_extension = args
        .output
        .as_ref()
        .and_then(|p| p.extension())
        .and_then(|e| match e.to_str()?.to_ascii_lowercase().as_str() {
            "bam" => Some(OutFormat::Bam(level)),
            "cram" => Some(OutFormat::Cram),
            "sam" => Some(OutFormat::Sam),
            _ => None,
        });
    Ok(named.unwrap_or(if args.cram {
        OutFormat::Cram
    } else if args.bam || args.uncompressed || args.level.is_some() {
        OutFormat::Bam(level)
    } else {
        by_extension.unwrap_or(OutFormat::Sam)
    }))
}

/// Runs `sortase view`.
pub fn run(args: ViewArgs) -> Result<()> {
    let threads = args
        .threads
        .unwrap_or_else(crate::common::default_threads)
        .max(1);
    let filter = Filter {
        require: args
            .require
            .as_deref()
            .map(parse_flags)
            .transpose()?
            .unwrap_or(0),
        exclude: args
            .exclude
            .as_deref()
            .map(parse_flags)
            .transpose()?
            .unwrap_or(0),
        min_mapq: args.min_mapq,
    };
    let format = output_format(&args)?;
    if args.count && args.regions.is_empty() && args.input != "-" && is_bam_file(&args.input) {
        // Counting a BAM file: byte ranges on all cores, per-range counts summed.
        let (_, parts) = crate::stats::scan(
            args.input.as_ref(),
            threads,
            |_| 0u64,
            |n, r| *n += u64::from(filter.pass(r)),
        )
        .with_context(|| args.input.clone())?;
        let (dest, mut out) = Destination::open(args.output.as_deref())?;
        writeln!(out, "{}", parts.iter().sum::<u64>())?;
        out.flush()?;
        drop(out);
        return dest.commit();
    }
    let size = std::fs::metadata(&args.input).map(|m| m.len()).unwrap_or(0);
    let progress = crate::common::progress("view", size);
    let input_name = args.input.clone();
    let mut input = Input::open(&args.input, threads, args.reference.as_deref(), &progress)
        .with_context(|| input_name.clone())?;
    let mut header = input.header.clone();
    if !args.no_pg && !args.count {
        header.add_program(
            "sortase",
            env!("CARGO_PKG_VERSION"),
            &crate::common::command_line(),
        );
    }
    let (dest, out) = Destination::open(args.output.as_deref())?;
    let out_name = dest.name.clone();
    let mut sink =
        Sink::new(format, &args, &header, threads, out).with_context(|| out_name.clone())?;
    if !args.header_only {
        let mut each = |batch: RecordBatch| sink.write_batch(batch, filter);
        if args.regions.is_empty() {
            input
                .for_each_batch(&mut each)
                .with_context(|| input_name.clone())?;
        } else {
            for_each_region_batch(&args, &mut input, &mut each)
                .with_context(|| input_name.clone())?;
        }
    }
    sink.finish().with_context(|| out_name.clone())?;
    progress.finish();
    dest.commit()
}

/// Whether `path` is a BGZF file holding BAM (checked from its first block).
fn is_bam_file(path: &str) -> bool {
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    let mut reader = sortase_bgzf::SeekReader::new(std::io::BufReader::new(file));
    let mut magic = [0u8; 4];
    std::io::Read::read_exact(&mut reader, &mut magic).is_ok() && &magic == b"BAM\x01"
}

fn for_each_region_batch(
    args: &ViewArgs,
    input: &mut Input,
    each: &mut dyn FnMut(RecordBatch) -> Result<()>,
) -> Result<()> {
    if input.format != Format::Bam || args.input == "-" {
        bail!("region queries need an indexed BAM file (not SAM, CRAM or stdin)");
    }
    let mut indexed = query::IndexedBam::open(args.input.as_ref())?;
    for r in &args.regions {
        if r == "*" {
            each(indexed.query_unplaced()?)?;
            continue;
        }
        match query::parse_region(r, &input.header) {
            Ok(region) => each(indexed.query(region)?)?,
            Err(why) => eprintln!("sortase: region \"{r}\" {why}; continuing"),
        }
    }
    Ok(())
}

/// Where records go.
enum Sink {
    Count {
        out: Box<dyn Write + Send>,
        n: u64,
    },
    /// SAM text, formatted in parallel batches by the shared record sink.
    Sam(Box<RecordSink>),
    Bam(ParallelWriter<Box<dyn Write + Send>>),
    Cram(Box<CramWriter<Box<dyn Write + Send>>>),
}

impl Sink {
    fn new(
        format: OutFormat,
        args: &ViewArgs,
        header: &Header,
        threads: usize,
        out: Box<dyn Write + Send>,
    ) -> Result<Self> {
        if args.count {
            return Ok(Sink::Count { out, n: 0 });
        }
        Ok(match format {
            OutFormat::Sam => {
                let shown = if args.with_header || args.header_only {
                    header.clone()
                } else {
                    Header::new(String::new(), header.references().to_vec())
                };
                let sink = RecordSink::new(RecordFormat::Sam, &shown, threads, None, None, out)?;
                Sink::Sam(Box::new(sink))
            }
            OutFormat::Bam(level) => {
                let mut w = ParallelWriter::new(out, WriterOptions::new(threads, level));
                w.write_all(&header.to_bam_bytes())?;
                w.end_block()?;
                Sink::Bam(w)
            }
            OutFormat::Cram => {
                if args.reference.is_none() {
                    bail!("CRAM output needs the reference: give -T/--reference FILE");
                }
                Sink::Cram(Box::new(CramWriter::new(
                    out,
                    header,
                    args.reference.as_deref(),
                )?))
            }
        })
    }

    fn write_batch(&mut self, batch: RecordBatch, filter: Filter) -> Result<()> {
        match self {
            Sink::Count { n, .. } => *n += batch.iter().filter(|r| filter.pass(r)).count() as u64,
            Sink::Sam(sink) => {
                if filter.require == 0 && filter.exclude == 0 && filter.min_mapq == 0 {
                    sink.write_batch(batch)?;
                } else {
                    for (i, r) in batch.iter().enumerate() {
                        if filter.pass(&r) {
                            sink.write(batch.raw(i))?;
                        }
                    }
                }
            }
            Sink::Bam(w) => {
                for (i, r) in batch.iter().enumerate() {
                    if filter.pass(&r) {
                        w.write_record(batch.raw(i))?;
                    }
                }
            }
            Sink::Cram(w) => {
                if filter.require == 0 && filter.exclude == 0 && filter.min_mapq == 0 {
                    w.write_batch(&batch)?;
                } else {
                    let mut buf = Vec::new();
                    let mut offsets = Vec::new();
                    for (i, r) in batch.iter().enumerate() {
                        if filter.pass(&r) {
                            offsets.push(buf.len() as u32);
                            buf.extend_from_slice(batch.raw(i));
                        }
                    }
                    let end = buf.len();
                    w.write_batch(&RecordBatch::from_parts(buf, offsets, end, 0))?;
                }
            }
        }
        Ok(())
    }

    fn finish(self) -> Result<()> {
        match self {
            Sink::Count { mut out, n } => {
                writeln!(out, "{n}")?;
                out.flush()?;
            }
            Sink::Sam(sink) => {
                sink.finish()?;
            }
            Sink::Bam(w) => {
                let (mut out, _) = w.finish()?;
                out.flush()?;
            }
            Sink::Cram(w) => {
                let mut out = w.finish()?;
                out.flush()?;
            }
        }
        Ok(())
    }
}
