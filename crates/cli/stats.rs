//! `sortase flagstat` and `sortase idxstats`: counters computed per byte range on all cores, summed.

use anyhow::{bail, Context, Result};
use sortase_index::range::{map_ranges, plan_ranges};
use sortase_ops::{flagstat::FlagStat, idxstats::IdxStats};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Ranges per thread: more ranges than threads keep all threads busy to the end.
const RANGES_PER_THREAD: usize = 4;

/// Arguments of `sortase flagstat`.
#[derive(clap::Args, Debug)]
pub struct FlagstatArgs {
    /// Threads in total [all cores].
    #[arg(short = '@', long = "threads", value_name = "INT")]
    threads: Option<usize>,
    /// Output format: default, json or tsv.
    #[arg(
        short = 'O',
        long = "output-fmt",
        value_name = "FORMAT",
        default_value = "default"
    )]
    format: String,
    /// Input BAM.
    input: PathBuf,
}

/// Arguments of `sortase idxstats`.
#[derive(clap::Args, Debug)]
pub struct IdxstatsArgs {
    /// Threads in total [all cores].
    #[arg(short = '@', long = "threads", value_name = "INT")]
    threads: Option<usize>,
    /// Input BAM.
    input: PathBuf,
}

fn threads(t: Option<usize>) -> usize {
    t.unwrap_or_else(crate::common::default_threads).max(1)
}

/// Counts records of a BAM on all cores with `add`, one accumulator per range, merged in order.
pub fn scan<T: Send>(
    path: &Path,
    threads: usize,
    new: impl Fn(usize) -> T + Sync,
    add: impl Fn(&mut T, &sortase_bam::RecordRef<'_>) + Sync,
) -> Result<(sortase_bam::Header, Vec<T>)> {
    let plan = plan_ranges(path, threads * RANGES_PER_THREAD)?;
    let n_ref = plan.header.references().len();
    let parts = map_ranges(path, &plan, threads, |mut stream| {
        let mut acc = new(n_ref);
        while let Some(batch) = stream.next_batch()? {
            for r in batch.iter() {
                add(&mut acc, &r);
            }
        }
        Ok::<_, sortase_bam::BamError>(acc)
    })?;
    Ok((plan.header, parts))
}

/// Runs `sortase flagstat`.
pub fn flagstat(args: FlagstatArgs) -> Result<()> {
    let name = args.input.display().to_string();
    let (_, parts) = scan(
        &args.input,
        threads(args.threads),
        |_| FlagStat::default(),
        FlagStat::add,
    )
    .with_context(|| name.clone())?;
    let mut total = FlagStat::default();
    parts.iter().for_each(|p| total.merge(p));
    let text = match args.format.as_str() {
        "json" | "JSON" => total.to_json(),
        "tsv" | "TSV" => total.to_tsv(),
        _ => total.to_default(),
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(())
}

/// Runs `sortase idxstats`: from the index's metadata when there is one, else a parallel scan.
pub fn idxstats(args: IdxstatsArgs) -> Result<()> {
    let name = args.input.display().to_string();
    let mut out = String::new();
    if let Some(index) = sortase_bam::query::find_index(&args.input) {
        let header = read_header(&args.input).with_context(|| name.clone())?;
        let stats = read_index_stats(&index).with_context(|| index.display().to_string())?;
        for (i, r) in header.references().iter().enumerate() {
            let (m, u) = stats.0.get(i).copied().flatten().unwrap_or((0, 0));
            out.push_str(&format!(
                "{}\t{}\t{m}\t{u}\n",
                String::from_utf8_lossy(&r.name),
                r.length
            ));
        }
        out.push_str(&format!("*\t0\t0\t{}\n", stats.1));
    } else {
        let (header, parts) = scan(
            &args.input,
            threads(args.threads),
            IdxStats::new,
            IdxStats::add,
        )
        .with_context(|| name.clone())?;
        let mut total = IdxStats::new(header.references().len());
        parts.iter().for_each(|p| total.merge(p));
        if !total.is_position_sorted() {
            bail!("{name}: file is not position sorted");
        }
        for (r, c) in header.references().iter().zip(&total.per_reference) {
            out.push_str(&format!(
                "{}\t{}\t{}\t{}\n",
                String::from_utf8_lossy(&r.name),
                r.length,
                c[0],
                c[1]
            ));
        }
        out.push_str(&format!(
            "*\t0\t{}\t{}\n",
            total.unplaced[0], total.unplaced[1]
        ));
    }
    std::io::stdout().lock().write_all(out.as_bytes())?;
    Ok(())
}

fn read_header(path: &Path) -> Result<sortase_bam::Header> {
    let file = std::fs::File::open(path).context("cannot open")?;
    let mut reader = sortase_bgzf::SeekReader::new(std::io::BufReader::new(file));
    Ok(sortase_bam::Header::read_bam(&mut reader)?)
}

type IndexStats = (Vec<Option<(u64, u64)>>, u64);

/// Per-reference (mapped, unmapped) from the index's metadata pseudo-bins, and the unplaced count.
fn read_index_stats(path: &Path) -> Result<IndexStats> {
    if path.extension().is_some_and(|e| e == "csi") {
        Ok(stats_of(&noodles::csi::fs::read(path)?))
    } else {
        Ok(stats_of(&noodles::bam::bai::fs::read(path)?))
    }
}

fn stats_of<I>(index: &noodles::csi::binning_index::Index<I>) -> IndexStats
where
    I: noodles::csi::binning_index::index::reference_sequence::Index,
{
    use noodles::csi::binning_index::{BinningIndex, ReferenceSequence as _};
    let refs = index
        .reference_sequences()
        .iter()
        .map(|r| {
            r.metadata()
                .map(|m| (m.mapped_record_count(), m.unmapped_record_count()))
        })
        .collect();
    (refs, index.unplaced_unmapped_record_count().unwrap_or(0))
}
