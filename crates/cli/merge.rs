//! `sortase merge`: samtools merge for sorted inputs: headers combined as samtools combines them,
//! records translated (reference ids, RG/PG tags). Sorted BAM files are merged by key range on all
//! threads ([`crate::merge_ranges`]); stdin, SAM and CRAM inputs, inputs whose reference order
//! conflicts, and inputs that turn out not to be sorted are merged on one thread (one reader thread
//! per input), which reproduces samtools' heap merge exactly, unsorted inputs included.

use crate::input::{Format, Input};
use crate::merge_ranges::{MergeInput, MergePlan};
use crate::range_output;
use crate::record_sink::{resolve_format, OutFormat, SortedOutput};
use anyhow::{bail, Context, Result};
use sortase::Progress;
use sortase_bam::header_merge::{HeaderMerger, MergeOptions, Translation};
use sortase_bam::{Header, RecordBatch};
use sortase_bgzf::CompressionLevel;
use sortase_sort::merge::{merge, Source};
use sortase_sort::{ordered_tasks, SortError, SortOrder};
use std::path::PathBuf;

/// Arguments of `sortase merge` (samtools merge's flags and meanings).
#[derive(clap::Args, Debug)]
#[command(disable_help_flag = true)]
pub struct MergeArgs {
    /// Output file [stdout with `-o -`].
    #[arg(short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
    /// Output format: sam, bam or cram.
    #[arg(short = 'O', long = "output-fmt", value_name = "FORMAT")]
    output_fmt: Option<String>,
    /// Threads in total [all cores].
    #[arg(short = '@', long = "threads", value_name = "INT")]
    threads: Option<usize>,
    /// Compression level 0-9 (samtools' meaning).
    #[arg(short = 'l', value_name = "INT", allow_negative_numbers = true)]
    level: Option<i32>,
    /// Uncompressed BAM output.
    #[arg(short = 'u')]
    uncompressed: bool,
    /// Compression level 1.
    #[arg(short = '1')]
    fast: bool,
    /// Inputs are sorted by read name (natural order).
    #[arg(short = 'n')]
    by_name: bool,
    /// Inputs are sorted by read name (lexicographic order).
    #[arg(short = 'N')]
    by_name_lex: bool,
    /// Inputs are sorted by TAG.
    #[arg(short = 't', value_name = "TAG")]
    tag: Option<String>,
    /// Attach an RG tag to each record, named after its input file.
    #[arg(short = 'r')]
    attach_rg: bool,
    /// Combine @RG lines with colliding IDs instead of renaming them.
    #[arg(short = 'c')]
    combine_rg: bool,
    /// Combine @PG lines with colliding IDs instead of renaming them.
    #[arg(short = 'p')]
    combine_pg: bool,
    /// Seed for the suffixes of renamed IDs [time].
    #[arg(short = 's', value_name = "VALUE")]
    seed: Option<i64>,
    /// Overwrite the output file if it exists.
    #[arg(short = 'f')]
    force: bool,
    /// File listing input files, one per line.
    #[arg(short = 'b', value_name = "FILE")]
    list: Option<PathBuf>,
    /// Use the header of FILE as the base of the output header.
    #[arg(short = 'h', value_name = "FILE")]
    header_file: Option<PathBuf>,
    /// Write an index with the output (CSI; `out.bam##idx##out.bam.bai` for BAI).
    #[arg(long = "write-index")]
    write_index: bool,
    /// Do not add a @PG line to the header.
    #[arg(long = "no-PG")]
    no_pg: bool,
    /// Reference FASTA (CRAM).
    #[arg(long = "reference", value_name = "FILE")]
    reference: Option<PathBuf>,
    /// Report how the merge ran (key ranges, or why on one thread) on stderr.
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
    /// Print help.
    #[arg(long = "help", action = clap::ArgAction::Help)]
    help: Option<bool>,
    /// Input files.
    inputs: Vec<String>,
}

/// samtools' RG name for `-r`: the file name without directory and .bam/.sam/.cram.
fn rg_name(path: &str) -> String {
    let mut s = path;
    for ext in [".bam", ".sam"] {
        if s.len() > 4 && s.ends_with(ext) {
            s = &s[..s.len() - 4];
        }
    }
    if s.len() > 5 && s.ends_with(".cram") {
        s = &s[..s.len() - 5];
    }
    s.rsplit('/').next().unwrap_or(s).to_string()
}

/// Runs `sortase merge`.
pub fn run(args: MergeArgs) -> Result<()> {
    let threads = args
        .threads
        .unwrap_or_else(crate::common::default_threads)
        .max(1);
    let order = sortase::Order::from_flags(args.by_name, args.by_name_lex, args.tag.as_deref())
        .resolve()?;
    let mut inputs = Vec::new();
    if let Some(list) = &args.list {
        let text = std::fs::read_to_string(list)
            .with_context(|| format!("{}: cannot read the input list", list.display()))?;
        inputs.extend(text.lines().filter(|l| !l.is_empty()).map(str::to_string));
    }
    inputs.extend(args.inputs.iter().cloned());
    if inputs.is_empty() {
        bail!("merge: give at least one (and usually two or more) input files");
    }
    let output = args.output.clone().unwrap_or_else(|| PathBuf::from("-"));
    let (data_path, index_path, bai) = sortase::options::index_target(&output, None)?;
    let to_stdout = data_path == std::path::Path::new("-");
    if !args.force && !to_stdout && data_path.is_file() {
        bail!("{}: file exists; use -f to overwrite", data_path.display());
    }
    let level = if args.uncompressed {
        CompressionLevel::STORED
    } else if args.fast {
        CompressionLevel::samtools(1)
    } else {
        CompressionLevel::samtools(args.level.unwrap_or(-1))
    };
    let format = resolve_format(
        args.output_fmt.as_deref(),
        (!to_stdout).then_some(data_path.as_path()),
        level,
        OutFormat::Bam(level),
    )?;

    let per_input = (threads / inputs.len()).max(1);
    let progress = crate::common::progress("merge", 0);
    let mut opened = Vec::with_capacity(inputs.len());
    for name in &inputs {
        let input = Input::open(name, per_input, args.reference.as_deref(), &progress)
            .with_context(|| name.clone())?;
        opened.push(input);
    }
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64)
    });
    let mut merger = HeaderMerger::new(
        MergeOptions {
            combine_rg: args.combine_rg,
            combine_pg: args.combine_pg,
            rg_override: inputs
                .iter()
                .map(|n| args.attach_rg.then(|| rg_name(n)))
                .collect(),
        },
        seed,
    );
    if let Some(h) = &args.header_file {
        let name = h.display().to_string();
        let base = Input::open(&name, 1, args.reference.as_deref(), &progress)
            .with_context(|| name.clone())?;
        merger.add(&base.header, usize::MAX);
    }
    let mut translations: Vec<std::sync::Arc<Translation>> = Vec::new();
    let mut lost_order = false;
    for (i, input) in opened.iter().enumerate() {
        let t = merger.add(&input.header, i);
        if t.lost_coordinate_order && order == SortOrder::Coordinate {
            lost_order = true;
            eprintln!(
                "[bam_merge_core] Order of targets in file {} caused coordinate sort to be lost",
                inputs[i]
            );
            merger.reset_order();
        }
        translations.push(std::sync::Arc::new(t));
    }
    if !merger.has_hd() {
        eprintln!("[W::bam_merge_core2] No @HD tag found.");
    }
    let mut header: Header = merger.finish();
    if !args.no_pg {
        header.add_program(
            "sortase",
            env!("CARGO_PKG_VERSION"),
            &crate::common::command_line(),
        );
    }

    let write_index = args.write_index && !to_stdout;
    if write_index && (order != SortOrder::Coordinate || !matches!(format, OutFormat::Bam(_))) {
        bail!("--write-index: sortase indexes coordinate-sorted BAM output only");
    }
    // Sorted BAM files merge by key range on all cores; stdin, SAM, CRAM, inputs whose reference
    // order conflicts, and inputs found unsorted take the one-thread merge (samtools' interleaving).
    let ranged = !lost_order
        && inputs.iter().all(|n| n != "-")
        && opened.iter().all(|i| i.format == Format::Bam);
    if ranged {
        let merge_inputs: Vec<MergeInput> = inputs
            .iter()
            .zip(&opened)
            .zip(&translations)
            .map(|((name, input), t)| MergeInput {
                path: PathBuf::from(name),
                n_ref: input.header.references().len(),
                translation: t.clone(),
            })
            .collect();
        drop(opened);
        let index = write_index.then_some((index_path.as_path(), bai));
        let output = (!to_stdout).then_some(data_path.as_path());
        let target = RangedTarget {
            output,
            index,
            format,
            header: &header,
            reference: args.reference.as_deref(),
        };
        let started = std::time::Instant::now();
        // Sampling finds most unsorted inputs before any output exists; a range task that finds
        // one later can start over on one thread only if the output is a file.
        let result = match MergePlan::new(order, merge_inputs, threads) {
            Ok(plan) => {
                if args.verbose {
                    eprintln!(
                        "[sortase merge] {} inputs sampled in {:.2} s; merging {} key ranges on {threads} threads",
                        inputs.len(),
                        started.elapsed().as_secs_f64(),
                        plan.ranges()
                    );
                }
                ranged_merge(&plan, &translations, &target, threads, &progress)
                    .map_err(|e| (e, !to_stdout))
            }
            Err(e) => Err((e.into(), true)),
        };
        match result {
            Ok(()) => {
                progress.finish();
                return Ok(());
            }
            Err((e, true)) if is_unordered(&e) => {
                if args.verbose {
                    eprintln!("[sortase merge] {e:#}: merging on one thread instead");
                }
            }
            Err((e, _)) => return Err(e),
        }
        opened = Vec::with_capacity(inputs.len());
        for name in &inputs {
            let input = Input::open(name, per_input, args.reference.as_deref(), &progress)
                .with_context(|| name.clone())?;
            opened.push(input);
        }
    }
    if args.verbose {
        eprintln!(
            "[sortase merge] {} inputs merged on one thread ({})",
            inputs.len(),
            if ranged {
                "an input is not sorted"
            } else {
                "stdin, SAM or CRAM input, or conflicting reference order"
            }
        );
    }
    let mut out = SortedOutput::open(
        (!to_stdout).then_some(data_path.as_path()),
        write_index.then_some((index_path.as_path(), bai)),
        format,
        &header,
        threads,
        args.reference.as_deref(),
    )?;

    std::thread::scope(|scope| -> Result<()> {
        let mut sources = Vec::with_capacity(opened.len());
        let attach: Vec<std::sync::Arc<Translation>> = translations.clone();
        for ((mut input, t), name) in opened.into_iter().zip(translations).zip(&inputs) {
            let (tx, rx) = crossbeam_channel::bounded::<Result<RecordBatch, String>>(4);
            scope.spawn(move || {
                let identity = t.tids_identity();
                let r = input.for_each_batch(|batch| {
                    let mut buf = Vec::with_capacity(batch.bytes().len() + 1024);
                    let mut offsets = Vec::with_capacity(batch.len());
                    for raw in batch.iter_raw() {
                        offsets.push(buf.len() as u32);
                        t.translate_into(raw, &mut buf, identity);
                    }
                    let end = buf.len();
                    tx.send(Ok(RecordBatch::from_parts(buf, offsets, end, 0)))
                        .map_err(|_| anyhow::anyhow!("merge stopped"))
                });
                if let Err(e) = r {
                    let _ = tx.send(Err(format!("{name}: {e:#}")));
                }
            });
            sources.push(Source::feed(Box::new(move || match rx.recv() {
                Ok(Ok(b)) => Ok(Some(b)),
                Ok(Err(e)) => Err(SortError::Input(e)),
                Err(_) => Ok(None),
            }))?);
        }
        let mut scratch = Vec::new();
        merge(order, &mut sources, |i, _, r| {
            if attach[i].attach_rg_into(r, &mut scratch) {
                Ok(out.sink.write(&scratch)?)
            } else {
                Ok(out.sink.write(r)?)
            }
        })?;
        Ok(())
    })?;
    out.finish()?;
    progress.finish();
    Ok(())
}

/// Whether `e` says an input is not in the order the ranged merge needs.
fn is_unordered(e: &anyhow::Error) -> bool {
    matches!(e.downcast_ref::<SortError>(), Some(SortError::Unordered(_)))
}

/// Where the ranged merge writes.
struct RangedTarget<'a> {
    output: Option<&'a std::path::Path>,
    index: Option<(&'a std::path::Path, bool)>,
    format: OutFormat,
    header: &'a Header,
    reference: Option<&'a std::path::Path>,
}

/// Merges sorted BAM files by key range on `threads` workers ([`crate::merge_ranges`]).
fn ranged_merge(
    plan: &MergePlan,
    attach: &[std::sync::Arc<Translation>],
    target: &RangedTarget<'_>,
    threads: usize,
    progress: &Progress,
) -> Result<()> {
    let (mut encoder, mut writer) = range_output::open(
        target.output,
        target.index,
        target.format,
        target.header,
        target.reference,
    )?;
    let name = writer.name.clone();
    let ranges = plan.ranges();
    let per_range = plan.compressed_bytes() / ranges as u64;
    // BAM records take about 3-4 times their compressed size.
    encoder.expect_range_bytes((per_range * 4) as usize);
    ordered_tasks(
        threads,
        ranges,
        threads,
        |r| encoder.encode(&mut plan.open(r, attach)?),
        |range| {
            progress.add(per_range);
            writer.write(range)
        },
    )
    .with_context(|| name.clone())?;
    plan.check_samples()?;
    writer.finish(matches!(target.format, OutFormat::Bam(_)))
}
