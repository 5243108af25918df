//! `sortase markdup` on query-grouped input: samblaster's algorithm (`sortase_markdup::samblaster`).
//!
//! Each input batch is cut into read-name groups (a group straddling batches is carried into the
//! next one); the groups' signatures are computed in parallel, then inserted into the signature set
//! in input order (first seen wins), and the records written with their 0x400 flags in input order.

use crate::input::Input;
use crate::markdup::MarkdupArgs;
use crate::progress::Progress;
use crate::record_sink::{resolve_format, OutFormat, SortedOutput};
use anyhow::{bail, Context, Result};
use rayon::prelude::*;
use sortase_bam::{flags, RecordBatch};
use sortase_bgzf::CompressionLevel;
use sortase_markdup::samblaster::{self, mate_tags, Layout, Options, SigSet, Verdict};

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
    /// Padding of each reference in samblaster's signature layout [500] (samblaster
    /// --maxReadLength; changes which alignments at reference ends compare equal).
    #[arg(long = "maxReadLength", value_name = "INT", default_value_t = 500)]
    pub max_read_length: i32,
    /// Do not print the summary to stderr (samblaster -q).
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,
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
    let lengths: Vec<u64> = input.header.references().iter().map(|r| u64::from(r.length)).collect();
    let layout = Layout::new(&lengths, q.max_read_length).with_context(|| input_name.to_string())?;
    let opts = Options {
        ignore_unmated: q.ignore_unmated,
        accept_dups: q.accept_dups,
    };
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
        header.add_program("sortase", env!("CARGO_PKG_VERSION"), &crate::command_line());
    }
    let mut out = SortedOutput::open(
        args.output.as_deref(),
        None,
        format,
        &header,
        threads,
        args.reference.as_deref(),
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
        groups: 0,
        dups: 0,
    };
    let mut carry = Carry::default();
    input.for_each_batch(|batch| {
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
            state.process(&group, &[0..group.len()], sink, &pool, input_name)?;
        }
        let mut bounds = Vec::with_capacity(batch.len() / 2);
        let mut g = start;
        for i in start + 1..batch.len() {
            if batch.record(i).read_name() != batch.record(i - 1).read_name() {
                bounds.push(g..i);
                g = i;
            }
        }
        for i in g..batch.len() {
            carry.push(batch.raw(i));
        }
        state.process(&batch, &bounds, sink, &pool, input_name)?;
        Ok(())
    })
    .with_context(|| input_name.to_string())?;
    if !carry.is_empty() {
        let group = carry.take();
        state.process(&group, &[0..group.len()], &mut out.sink, &pool, input_name)?;
    }
    out.finish()?;
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

struct State {
    layout: Layout,
    opts: Options,
    sigs: SigSet,
    remove: bool,
    mate_tags: bool,
    scratch: Vec<u8>,
    groups: u64,
    dups: u64,
}

impl State {
    /// Marks and writes the groups `bounds` of `batch`, in order.
    fn process(
        &mut self,
        batch: &RecordBatch,
        bounds: &[std::ops::Range<usize>],
        sink: &mut crate::record_sink::RecordSink,
        pool: &rayon::ThreadPool,
        input_name: &str,
    ) -> Result<()> {
        let (layout, opts) = (&self.layout, &self.opts);
        let verdicts: Vec<samblaster::Group> = pool.install(|| {
            bounds
                .par_iter()
                .with_min_len(256)
                .map(|r| samblaster::analyze(batch, r.clone(), layout, opts))
                .collect()
        });
        for (range, group) in bounds.iter().zip(&verdicts) {
            self.groups += 1;
            let dup = match group.verdict {
                Verdict::Pass => false,
                Verdict::Sig(s) => !self.sigs.insert(s),
                Verdict::Broken => {
                    let r = batch.record(range.start);
                    bail!(
                        "{input_name}: read {}: no primary record of its mate in the group of its name; \
                         is the input grouped by read name (aligner output, `sortase sort -n`)? \
                         Coordinate-sorted input needs --mode coordinate",
                        String::from_utf8_lossy(r.read_name())
                    )
                }
                Verdict::UnknownReference => bail!(
                    "{input_name}: read {}: mapped to a reference missing from the header",
                    String::from_utf8_lossy(batch.record(range.start).read_name())
                ),
            };
            self.dups += u64::from(dup);
            let pair = group
                .pair
                .filter(|_| self.mate_tags)
                .map(|(a, b)| {
                    (
                        batch.record(range.start + a as usize),
                        batch.record(range.start + b as usize),
                    )
                });
            for i in range.clone() {
                let raw = batch.raw(i);
                let flag = batch.record(i).flag();
                let flag = if dup { flag | flags::DUPLICATE } else { flag };
                if self.remove && flag & flags::DUPLICATE != 0 {
                    continue;
                }
                if !dup && pair.is_none() {
                    sink.write(raw)?;
                    continue;
                }
                self.scratch.clear();
                match &pair {
                    Some((a, b)) => {
                        let sources = mate_tags::mate_of(&batch.record(i), a, b);
                        mate_tags::append_with_tags(raw, &sources, &mut self.scratch);
                    }
                    None => self.scratch.extend_from_slice(raw),
                }
                self.scratch[18..20].copy_from_slice(&flag.to_le_bytes());
                sink.write(&self.scratch)?;
            }
        }
        Ok(())
    }
}

/// Records of a group that continues past the end of a batch.
#[derive(Default)]
struct Carry {
    buf: Vec<u8>,
    offsets: Vec<u32>,
    name: Vec<u8>,
}

impl Carry {
    fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }
    fn continues(&self, name: &[u8]) -> bool {
        self.name == name
    }
    fn push(&mut self, raw: &[u8]) {
        if self.offsets.is_empty() {
            self.name.clear();
            let r = sortase_bam::RecordRef::new_unchecked(&raw[4..]);
            self.name.extend_from_slice(r.read_name());
        }
        self.offsets.push(self.buf.len() as u32);
        self.buf.extend_from_slice(raw);
    }
    fn take(&mut self) -> RecordBatch {
        let buf = std::mem::take(&mut self.buf);
        let end = buf.len();
        RecordBatch::from_parts(buf, std::mem::take(&mut self.offsets), end, 0)
    }
}
