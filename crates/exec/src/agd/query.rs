//! An AGD dataset as a record source restricted to regions and filtered (samtools view's `-f/-F/-q`
//! and regions, as `sortase view` of a dataset reads it): the chunks to read with what their
//! records must overlap ([`pieces`]), then the selected records counted ([`count_pieces`]) or
//! rebuilt and written in order ([`write_pieces`]).
//!
//! Regions follow samtools: a record overlaps `chr:beg-end` when it starts before `end` and its
//! alignment end (htslib `bam_endpos`, from the CIGAR; `pos + 1` for an unmapped record) is past
//! `beg`, so unmapped reads placed inside the region are included; `*` is the unplaced reads. Several
//! regions are queried one after another (a record in two regions is printed twice), or with
//! `multi_region` (samtools `-M`) as one union: each record once, in file order.
//!
//! A region query needs a coordinate-sorted dataset, as samtools needs an indexed file. The chunks
//! to read come from the manifest's per-chunk positions (first and last position and the largest
//! alignment end per reference, recorded at import): a chunk that cannot hold an overlapping record
//! is never opened. Inside a chunk the `results` columns that decide (flag, mapq, ref_id, pos,
//! cigar) are read first, and the other groups only for the selected rows (their pages skipped
//! through the Parquet page index) when some but not all rows match. Chunks are processed in
//! parallel windows of the runtime's threads and written in order.

use super::columns::duplicate_group;
use super::{chunk_batch, dataset_header, open_manifest, write_in_order};
use crate::error::Error;
use crate::runtime::Runtime;
use crate::writer::SortedOutput;
use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, UInt16Type, UInt8Type};
use arrow_array::{Array, BooleanArray};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sortase_agd::{
    self as agd, ChunkEntry, ChunkPositions, ExtraGroup, Group, Manifest, PositionsBuilder,
};
use sortase_bam::query::{self, Region};
use sortase_bam::{cigar, flags, Header, RecordBatch};
use std::path::Path;

/// What a record must overlap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// A reference interval, 0-based half-open (`end` `i64::MAX`: to the reference's end).
    Placed {
        /// The reference.
        tid: i32,
        /// Start.
        beg: i64,
        /// End.
        end: i64,
    },
    /// The unplaced records (`ref_id` -1; the region `*`).
    Unplaced,
}

impl Target {
    fn of(r: Region) -> Self {
        Target::Placed {
            tid: r.tid as i32,
            beg: r.beg,
            end: r.end,
        }
    }

    /// Whether the chunk of `positions` can hold a record overlapping the target.
    fn may_overlap(&self, positions: &ChunkPositions) -> bool {
        match *self {
            Target::Unplaced => positions.unplaced > 0,
            Target::Placed { tid, beg, end } => positions
                .spans
                .iter()
                .any(|s| s.ref_id == tid && i64::from(s.first_pos) < end && s.max_end > beg),
        }
    }

    /// Whether a record at `ref_id`, `pos` with alignment end `end` overlaps the target (htslib's
    /// iterator test: `pos < end && bam_endpos > beg`).
    #[inline]
    fn overlaps(&self, ref_id: i32, pos: i32, record_end: i64) -> bool {
        match *self {
            Target::Unplaced => ref_id < 0,
            Target::Placed { tid, beg, end } => {
                ref_id == tid && i64::from(pos) < end && record_end > beg
            }
        }
    }
}

/// A chunk to read and what its records must overlap (`None`: no region, every record).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Piece {
    /// The chunk.
    pub chunk: ChunkEntry,
    /// The targets.
    pub targets: Option<Vec<Target>>,
}

/// samtools' `-f/-F/-q`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Filter {
    require: u16,
    exclude: u16,
    min_mapq: u8,
}

impl Filter {
    /// Records with every flag of `require`, none of `exclude` and a mapping quality of at least
    /// `min_mapq` (samtools `-f`, `-F`, `-q`).
    pub fn new(require: u16, exclude: u16, min_mapq: u8) -> Self {
        Filter {
            require,
            exclude,
            min_mapq,
        }
    }

    #[inline]
    fn pass(&self, flag: u16, mapq: u8) -> bool {
        flag & self.require == self.require && flag & self.exclude == 0 && mapq >= self.min_mapq
    }

    fn passes_all(&self) -> bool {
        self.require == 0 && self.exclude == 0 && self.min_mapq == 0
    }
}

/// htslib `bam_endpos` from the `cigar` column's text: `pos` plus the lengths of the
/// reference-consuming operations, `pos + 1` when unmapped or there are none. (A long CIGAR kept in
/// a `CG` tag is stored as `<l_seq>S<rlen>N`, whose `N` is the real reference length.)
#[inline]
fn end_of(pos: i32, flag: u16, cigar_text: Option<&[u8]>) -> i64 {
    let mut rlen = 0i64;
    if flag & flags::UNMAPPED == 0 {
        let mut len = 0i64;
        for &c in cigar_text.unwrap_or_default() {
            if c.is_ascii_digit() {
                len = len * 10 + i64::from(c - b'0');
                continue;
            }
            if cigar::code_of(c).is_some_and(cigar::consumes_reference) {
                rlen += len;
            }
            len = 0;
        }
    }
    i64::from(pos) + if rlen == 0 { 1 } else { rlen }
}

/// The columns a selection reads: the filter's, and the positions' for a region query.
fn selection_columns(regions: bool) -> &'static [&'static str] {
    if regions {
        &["flag", "ref_id", "pos", "mapq", "cigar"]
    } else {
        &["flag", "mapq"]
    }
}

/// Which rows of `chunk` pass the filter and overlap one of `targets`, from the `results` group.
fn select_rows(
    dir: &Path,
    chunk: &ChunkEntry,
    duplicate: Option<&BooleanArray>,
    targets: Option<&[Target]>,
    filter: Filter,
) -> anyhow::Result<BooleanArray> {
    let file = agd::read_group(
        dir,
        Group::Results,
        chunk,
        Some(selection_columns(targets.is_some())),
    )?;
    let b = &file.batch;
    let column = |name: &str| file.column(name);
    let stored = column("flag")?.as_primitive::<UInt16Type>();
    // The `duplicate` group (agd markdup) sets or clears 0x400, as export applies it.
    let flag = |i: usize| match duplicate {
        Some(d) if d.is_valid(i) && d.value(i) => stored.value(i) | flags::DUPLICATE,
        Some(d) if d.is_valid(i) => stored.value(i) & !flags::DUPLICATE,
        _ => stored.value(i),
    };
    let mapq = column("mapq")?.as_primitive::<UInt8Type>();
    let n = b.num_rows();
    // HOT: once per record of the chunk; plain arrays, the mask built in one allocation.
    let Some(targets) = targets else {
        return Ok((0..n)
            .map(|i| Some(filter.pass(flag(i), mapq.value(i))))
            .collect());
    };
    let ref_id = column("ref_id")?.as_primitive::<Int32Type>();
    let pos = column("pos")?.as_primitive::<Int32Type>();
    let cigar_text = column("cigar")?.as_string::<i32>();
    Ok((0..n)
        .map(|i| {
            let (f, r, p) = (flag(i), ref_id.value(i), pos.value(i));
            if !filter.pass(f, mapq.value(i)) {
                return Some(false);
            }
            let text = cigar_text
                .is_valid(i)
                .then(|| cigar_text.value(i).as_bytes());
            let end = end_of(p, f, text);
            Some(targets.iter().any(|t| t.overlaps(r, p, end)))
        })
        .collect())
}

/// The selected records of one piece, rebuilt.
fn piece_batch(
    dir: &Path,
    manifest: &Manifest,
    chunk: &ChunkEntry,
    duplicate: Option<&BooleanArray>,
    rows: &BooleanArray,
) -> anyhow::Result<RecordBatch> {
    let selected = rows.true_count();
    if selected == 0 {
        return Ok(RecordBatch::default());
    }
    if selected == rows.len() {
        return chunk_batch(dir, manifest, chunk);
    }
    let files = Group::ALL
        .iter()
        .map(|&g| agd::read_group_rows(dir, g, chunk, None, Some(rows)))
        .collect::<Result<Vec<_>, _>>()?;
    let bytes: usize = files.iter().map(|f| f.batch.get_array_memory_size()).sum();
    let mut buf = Vec::with_capacity(bytes + 64 * selected);
    let mut offsets = Vec::with_capacity(selected);
    agd::append_records(&files, &mut buf, &mut offsets)?;
    if let Some(d) = duplicate {
        let kept: BooleanArray = (0..rows.len())
            .filter(|&i| rows.value(i))
            .map(|i| d.is_valid(i).then(|| d.value(i)))
            .collect();
        super::columns::apply_duplicates(&mut buf, &offsets, &kept);
    }
    let end = buf.len();
    Ok(RecordBatch::from_parts(buf, offsets, end, 0))
}

/// What one piece gives: its count, or its records.
enum PieceOut {
    Count(u64),
    Records(RecordBatch),
}

/// One piece's count or records, with the `duplicate` group (agd markdup) applied to the flags;
/// records need the `manifest` (a distributed count task carries only the group).
fn run_piece(
    dir: &Path,
    manifest: Option<&Manifest>,
    duplicate: Option<&ExtraGroup>,
    piece: &Piece,
    filter: Filter,
    count: bool,
) -> anyhow::Result<PieceOut> {
    let chunk = &piece.chunk;
    let duplicate = super::columns::duplicate_column(dir, duplicate, chunk)?;
    if let (false, None, true, Some(m)) = (count, &piece.targets, filter.passes_all(), manifest) {
        return Ok(PieceOut::Records(chunk_batch(dir, m, chunk)?));
    }
    let rows = select_rows(
        dir,
        chunk,
        duplicate.as_ref(),
        piece.targets.as_deref(),
        filter,
    )?;
    if count {
        return Ok(PieceOut::Count(rows.true_count() as u64));
    }
    let manifest =
        manifest.ok_or_else(|| anyhow::anyhow!("agd view: records need the manifest"))?;
    Ok(PieceOut::Records(piece_batch(
        dir,
        manifest,
        chunk,
        duplicate.as_ref(),
        &rows,
    )?))
}

/// The positions of `chunk` computed from its `results` group (a dataset whose manifest does not
/// record them).
fn computed_positions(dir: &Path, chunk: &ChunkEntry) -> anyhow::Result<ChunkPositions> {
    let file = agd::read_group(dir, Group::Results, chunk, Some(selection_columns(true)))?;
    let b = &file.batch;
    let column = |name: &str| file.column(name);
    let flag = column("flag")?.as_primitive::<UInt16Type>();
    let ref_id = column("ref_id")?.as_primitive::<Int32Type>();
    let pos = column("pos")?.as_primitive::<Int32Type>();
    let cigar_text = column("cigar")?.as_string::<i32>();
    let mut builder = PositionsBuilder::default();
    for i in 0..b.num_rows() {
        let text = cigar_text
            .is_valid(i)
            .then(|| cigar_text.value(i).as_bytes());
        let (f, p) = (flag.value(i), pos.value(i));
        builder.push(ref_id.value(i), p, end_of(p, f, text));
    }
    Ok(builder.finish())
}

/// Counts the records of `pieces` that pass `filter`, on `rt`'s threads.
pub fn count_pieces(
    dir: &Path,
    duplicate: Option<&ExtraGroup>,
    pieces: &[Piece],
    filter: Filter,
    rt: &Runtime,
) -> anyhow::Result<u64> {
    let counts = rt.install(|| {
        pieces
            .par_iter()
            .map(
                |p| match run_piece(dir, None, duplicate, p, filter, true)? {
                    PieceOut::Count(n) => Ok(n),
                    PieceOut::Records(b) => Ok(b.len() as u64),
                },
            )
            .collect::<anyhow::Result<Vec<u64>>>()
    })?;
    Ok(counts.iter().sum())
}

/// The chunks to read with what their records must overlap, in output order, and the warnings of
/// regions that do not parse.
pub fn pieces(
    dir: &Path,
    regions: &[String],
    multi_region: bool,
    rt: &Runtime,
) -> anyhow::Result<(Manifest, Vec<Piece>, Vec<String>)> {
    if multi_region && regions.is_empty() {
        return Err(Error::argument("-M needs regions (none were given)").into());
    }
    let mut manifest = open_manifest(dir)?;
    let mut warnings = Vec::new();
    let pieces = if regions.is_empty() {
        manifest
            .chunks
            .iter()
            .map(|chunk| Piece {
                chunk: chunk.clone(),
                targets: None,
            })
            .collect()
    } else {
        let header = dataset_header(&manifest);
        let targets = parse_targets(regions, multi_region, &header, &mut warnings);
        plan_regions(dir, &targets, multi_region, &mut manifest, rt)?
    };
    Ok((manifest, pieces, warnings))
}

/// The pieces of a region query of `targets`, in output order.
fn plan_regions(
    dir: &Path,
    targets: &[Target],
    multi_region: bool,
    manifest: &mut Manifest,
    rt: &Runtime,
) -> anyhow::Result<Vec<Piece>> {
    if manifest.chunks.iter().any(|c| c.positions.is_none()) {
        let computed = rt.install(|| {
            manifest
                .chunks
                .par_iter()
                .map(|c| computed_positions(dir, c))
                .collect::<anyhow::Result<Vec<_>>>()
        })?;
        manifest.set_positions(computed);
    }
    if manifest.coordinate_sorted() != Some(true) {
        return Err(Error::argument(
            "region queries need a coordinate-sorted dataset (as samtools needs an indexed file); \
             this one is not sorted: sort the BAM and import it again",
        )
        .into());
    }
    let positions = |c: &ChunkEntry| c.positions.clone().unwrap_or_default();
    let mut pieces = Vec::new();
    if multi_region {
        for c in &manifest.chunks {
            let p = positions(c);
            let hits: Vec<Target> = targets
                .iter()
                .filter(|t| t.may_overlap(&p))
                .copied()
                .collect();
            if !hits.is_empty() {
                pieces.push(Piece {
                    chunk: c.clone(),
                    targets: Some(hits),
                });
            }
        }
    } else {
        for t in targets {
            for c in &manifest.chunks {
                if t.may_overlap(&positions(c)) {
                    pieces.push(Piece {
                        chunk: c.clone(),
                        targets: Some(vec![*t]),
                    });
                }
            }
        }
    }
    Ok(pieces)
}

/// `regions` as targets; warnings for those that do not parse.
fn parse_targets(
    regions: &[String],
    multi_region: bool,
    header: &Header,
    warnings: &mut Vec<String>,
) -> Vec<Target> {
    let mut targets = Vec::new();
    for r in regions {
        if r == "*" {
            targets.push(Target::Unplaced);
            continue;
        }
        // htslib's region list (`-M`) reads the end as a number and refuses an empty one
        // (`chr:beg-`), where a single region means "to the reference's end" (samtools 1.24).
        if multi_region && r.ends_with('-') {
            warnings.push(format!(
                "sortase: region \"{r}\" specifies an invalid region or unknown reference; \
                 continuing"
            ));
            continue;
        }
        match query::parse_region(r, header) {
            Ok(region) => targets.push(Target::of(region)),
            Err(why) => warnings.push(format!("sortase: region \"{r}\" {why}; continuing")),
        }
    }
    targets
}

/// Writes the records of `pieces` of the dataset `dir` that pass `filter`, in order, to `out`
/// (the `duplicate` group's flags applied); the number written.
pub fn write_pieces(
    dir: &Path,
    manifest: &Manifest,
    pieces: &[Piece],
    filter: Filter,
    out: SortedOutput,
    rt: &Runtime,
) -> anyhow::Result<u64> {
    let duplicate = duplicate_group(manifest);
    write_in_order(
        rt,
        pieces,
        out,
        |p| {
            Ok(
                match run_piece(dir, Some(manifest), duplicate, p, filter, false)? {
                    PieceOut::Records(b) => b,
                    PieceOut::Count(_) => RecordBatch::default(),
                },
            )
        },
        || Ok(()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_follow_bam_endpos() {
        assert_eq!(end_of(10, 0, Some(b"4M")), 14);
        assert_eq!(
            end_of(10, 0, Some(b"2S3M1I2D4N1=1X5H")),
            10 + 3 + 2 + 4 + 1 + 1
        );
        assert_eq!(end_of(10, 0, Some(b"4S")), 11);
        assert_eq!(end_of(10, 0, None), 11);
        assert_eq!(end_of(10, flags::UNMAPPED, Some(b"4M")), 11);
    }

    #[test]
    fn targets_overlap_as_htslib() {
        let t = Target::Placed {
            tid: 0,
            beg: 100,
            end: 200,
        };
        assert!(t.overlaps(0, 50, 101));
        assert!(!t.overlaps(0, 50, 100));
        assert!(t.overlaps(0, 199, 200));
        assert!(!t.overlaps(0, 200, 201));
        assert!(!t.overlaps(1, 150, 151));
        assert!(Target::Unplaced.overlaps(-1, -1, 0));
        let span = |first_pos, max_end| ChunkPositions {
            sorted: true,
            spans: vec![agd::RefSpan {
                ref_id: 0,
                first_pos,
                last_pos: first_pos,
                max_end,
                records: 1,
            }],
            unplaced: 0,
        };
        assert!(t.may_overlap(&span(10, 101)));
        assert!(!t.may_overlap(&span(10, 100)));
        assert!(!t.may_overlap(&span(200, 300)));
        assert!(!Target::Unplaced.may_overlap(&span(200, 300)));
    }
}
