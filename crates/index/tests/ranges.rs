//! Property tests of the range planner (`sortase_index::range`) on BAMs built in memory.
//!
//! Each BAM is written with [`ParallelWriter`]; the virtual offset of every record start is known from
//! [`ParallelWriter::position`] and the [`BlockLog`]. Then, for many range counts, the records read range
//! by range must be all records exactly once, in order, and [`find_record_start`] must only ever answer a
//! true record start. A small xorshift generator keeps the fixed cases deterministic; the proptest at
//! the end draws random files and range counts (`PROPTEST_CASES` sets how many; default here 24).

use sortase_bam::{virtual_offset, Header, Reference};
use sortase_bgzf::{BlockLog, CompressionLevel, ParallelWriter, WriterOptions};
use sortase_index::range::{find_record_start, map_ranges, plan_ranges, RangeStream};
use std::collections::BTreeSet;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Deterministic xorshift64* generator.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A temporary file, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str) -> Self {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(
            "sortase-ranges-{}-{n}-{name}.bam",
            std::process::id()
        ));
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// One raw record with its `block_size` prefix.
struct Spec<'a> {
    ref_id: i32,
    pos: i32,
    name: &'a [u8],
    l_seq: usize,
    flag: u16,
    /// Bytes for the quality field (cycled); random when empty.
    qual: &'a [u8],
    aux: &'a [u8],
}

fn record(s: &Spec<'_>, rng: &mut Rng) -> Vec<u8> {
    let n_cigar: u16 = if s.ref_id >= 0 && s.l_seq > 0 && s.flag & 4 == 0 {
        1
    } else {
        0
    };
    let mut r = Vec::with_capacity(64 + s.l_seq * 2);
    r.extend_from_slice(&s.ref_id.to_le_bytes());
    r.extend_from_slice(&s.pos.to_le_bytes());
    r.push(s.name.len() as u8 + 1);
    r.push(60);
    r.extend_from_slice(&4680u16.to_le_bytes());
    r.extend_from_slice(&n_cigar.to_le_bytes());
    r.extend_from_slice(&s.flag.to_le_bytes());
    r.extend_from_slice(&(s.l_seq as u32).to_le_bytes());
    r.extend_from_slice(&(-1i32).to_le_bytes());
    r.extend_from_slice(&(-1i32).to_le_bytes());
    r.extend_from_slice(&0i32.to_le_bytes());
    r.extend_from_slice(s.name);
    r.push(0);
    if n_cigar == 1 {
        r.extend_from_slice(&((s.l_seq as u32) << 4).to_le_bytes()); // {l_seq}M
    }
    for _ in 0..s.l_seq.div_ceil(2) {
        r.push(
            [0x11u8, 0x12, 0x14, 0x18, 0x21, 0x24, 0x42, 0x48, 0x84, 0x88][rng.below(10) as usize],
        );
    }
    for i in 0..s.l_seq {
        r.push(if s.qual.is_empty() {
            rng.below(42) as u8
        } else {
            s.qual[i % s.qual.len()]
        });
    }
    r.extend_from_slice(s.aux);
    let mut out = (r.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(&r);
    out
}

/// How records go into blocks.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Blocking {
    /// Records straddle blocks freely.
    Straddle,
    /// As htslib writes: a record starts a new block when it would not fit in the open one.
    Record,
}

/// A BAM on disk and the truth about it.
struct Bam {
    file: TempFile,
    n_ref: usize,
    /// Every record, with its `block_size` prefix, in file order.
    records: Vec<Vec<u8>>,
    /// Virtual offset of every record's first byte (block holding that byte, offset in it).
    starts: Vec<u64>,
    log: BlockLog,
    /// No record is longer than a few KiB (so every block holds a provable record start).
    small_records: bool,
}

impl Bam {
    fn path(&self) -> &Path {
        &self.file.0
    }

    /// Compressed offset of every data block (no EOF marker) and its uncompressed size.
    fn blocks(&self) -> Vec<(u64, u32)> {
        let offs = self.log.compressed_offsets();
        self.log
            .blocks
            .iter()
            .enumerate()
            .map(|(i, &(_, u))| (offs[i], u))
            .collect()
    }
}

fn write_bam(
    name: &str,
    n_ref: usize,
    records: Vec<Vec<u8>>,
    blocking: Blocking,
    level: i32,
    end_block_after_header: bool,
) -> Bam {
    let refs: Vec<Reference> = (0..n_ref)
        .map(|i| Reference {
            name: format!("chr{i}").into_bytes(),
            length: 100_000_000,
        })
        .collect();
    let mut text = String::from("@HD\tVN:1.6\tSO:coordinate\n");
    for r in &refs {
        text.push_str(&format!(
            "@SQ\tSN:{}\tLN:{}\n",
            String::from_utf8_lossy(&r.name),
            r.length
        ));
    }
    let header = Header::new(text, refs);
    let file = TempFile::new(name);
    let mut w = ParallelWriter::new(
        File::create(&file.0).unwrap(),
        WriterOptions::new(2, CompressionLevel::samtools(level)),
    );
    w.write_all(&header.to_bam_bytes()).unwrap();
    if end_block_after_header {
        w.end_block().unwrap();
    }
    let mut positions = Vec::with_capacity(records.len());
    for r in &records {
        if blocking == Blocking::Record {
            w.reserve(r.len()).unwrap();
        }
        positions.push(w.position());
        w.write_all(r).unwrap();
    }
    let (_, log) = w.finish().unwrap();
    let offs = log.compressed_offsets();
    let starts = positions
        .iter()
        .map(|&(block, off)| (offs[block as usize] << 16) | u64::from(off))
        .collect();
    let small_records = records.iter().all(|r| r.len() < 4096);
    Bam {
        file,
        n_ref,
        records,
        starts,
        log,
        small_records,
    }
}

/// The four kinds of files of the brief, plus an all-unmapped one and a header-only one.
fn test_bams() -> Vec<Bam> {
    let mut rng = Rng::new(2024);
    let mut out = Vec::new();

    // (a) records of 0-3000 bases straddling blocks, with aux fields; coordinate order on 3 refs.
    let recs = straddling_records(&mut rng);
    out.push(write_bam(
        "straddle",
        3,
        recs.clone(),
        Blocking::Straddle,
        1,
        false,
    ));
    out.push(write_bam("straddle0", 3, recs, Blocking::Straddle, 0, true));

    // (b) records over 64 KiB (l_seq ~100 000) among small ones.
    let recs = huge_records(&mut rng);
    out.push(write_bam(
        "huge",
        1,
        recs.clone(),
        Blocking::Straddle,
        1,
        false,
    ));
    out.push(write_bam("huge_rec", 1, recs, Blocking::Record, 6, true));

    // (c) blocks of hundreds of small records; (d) an unmapped tail (refID -1).
    let recs = small_records(&mut rng);
    out.push(write_bam(
        "small_rec",
        3,
        recs.clone(),
        Blocking::Record,
        1,
        true,
    ));
    out.push(write_bam(
        "small_straddle",
        3,
        recs,
        Blocking::Straddle,
        0,
        false,
    ));

    // All unmapped, no references at all.
    let recs = unmapped_records(&mut rng);
    out.push(write_bam("unmapped", 0, recs, Blocking::Straddle, 1, false));

    // A header and no records.
    out.push(write_bam("empty", 2, Vec::new(), Blocking::Record, 6, true));
    out
}

/// 1500 records of 0-2000 bases with aux fields, in coordinate order on 3 references.
fn straddling_records(rng: &mut Rng) -> Vec<Vec<u8>> {
    (0..1500)
        .map(|i| {
            let name = format!("a{i}");
            let aux: &[u8] = match i % 3 {
                0 => b"NMC\x05",
                1 => b"XAZhello\0RGZgrp1\0",
                _ => b"",
            };
            let l_seq = rng.below(2000) as usize;
            record(
                &Spec {
                    ref_id: i / 500,
                    pos: (i % 500) * 100,
                    name: name.as_bytes(),
                    l_seq,
                    flag: 0,
                    qual: &[],
                    aux,
                },
                rng,
            )
        })
        .collect()
}

/// 100 records on one reference, every fifth over 64 KiB.
fn huge_records(rng: &mut Rng) -> Vec<Vec<u8>> {
    (0..100)
        .map(|i| {
            let name = format!("b{i}");
            let l_seq = if i % 5 == 1 {
                90_000 + rng.below(20_000) as usize
            } else {
                rng.below(300) as usize
            };
            record(
                &Spec {
                    ref_id: 0,
                    pos: i * 10,
                    name: name.as_bytes(),
                    l_seq,
                    flag: 0,
                    qual: &[],
                    aux: b"",
                },
                rng,
            )
        })
        .collect()
}

/// 30 000 records of under 40 bases on 3 references, the last 6000 unmapped (refID -1).
fn small_records(rng: &mut Rng) -> Vec<Vec<u8>> {
    (0..30_000)
        .map(|i| {
            let name = format!("c{i}");
            let tail = i >= 24_000;
            let l_seq = rng.below(40) as usize;
            record(
                &Spec {
                    ref_id: if tail { -1 } else { i / 8000 },
                    pos: if tail { -1 } else { i % 8000 },
                    name: name.as_bytes(),
                    l_seq,
                    flag: if tail { 4 } else { 0 },
                    qual: &[],
                    aux: b"",
                },
                rng,
            )
        })
        .collect()
}

/// 5000 unmapped records and no references.
fn unmapped_records(rng: &mut Rng) -> Vec<Vec<u8>> {
    (0..5000)
        .map(|i| {
            let name = format!("u{i}");
            let l_seq = rng.below(200) as usize;
            record(
                &Spec {
                    ref_id: -1,
                    pos: -1,
                    name: name.as_bytes(),
                    l_seq,
                    flag: 4,
                    qual: &[],
                    aux: b"",
                },
                rng,
            )
        })
        .collect()
}

/// Every record of `bam`'s ranges for `n`, read with `RangeStream`, checked against the truth.
/// With `also_map`, [`map_ranges`] (on 1-4 threads) must give the same records.
fn check_plan(bam: &Bam, n: usize, also_map: bool, failures: &mut Vec<String>) {
    let name = bam.path().display().to_string();
    let plan =
        plan_ranges(bam.path(), n).unwrap_or_else(|e| panic!("{name}: plan_ranges({n}): {e}"));
    let ranges = &plan.ranges;
    let label = format!("{name} n={n} ({} ranges)", ranges.len());
    if ranges.is_empty() || ranges.len() > n.max(1) {
        failures.push(format!("{label}: bad range count"));
        return;
    }
    if ranges.last().unwrap().end != u64::MAX {
        failures.push(format!("{label}: last range does not end at u64::MAX"));
    }
    for w in ranges.windows(2) {
        if w[0].end != w[1].start || w[0].start >= w[0].end {
            failures.push(format!("{label}: ranges not contiguous/increasing: {w:?}"));
        }
    }
    let truth: BTreeSet<u64> = bam.starts.iter().copied().collect();
    for r in ranges.iter().skip(1) {
        if !truth.contains(&r.start) {
            failures.push(format!(
                "{label}: range start {}:{} is not a record start",
                r.start >> 16,
                r.start & 0xffff
            ));
        }
    }
    let got = read_ranges(bam, ranges, &label, failures);
    compare_records(&label, &got, &bam.records, failures);
    if also_map {
        check_map(bam, &plan, n, &label, failures);
    }
}

/// The records of `ranges` read with `RangeStream`, each checked to start inside its range.
fn read_ranges(
    bam: &Bam,
    ranges: &[sortase_index::range::RecordRange],
    label: &str,
    failures: &mut Vec<String>,
) -> Vec<Vec<u8>> {
    let mut got: Vec<Vec<u8>> = Vec::with_capacity(bam.records.len());
    for (i, r) in ranges.iter().enumerate() {
        let mut s = RangeStream::open(bam.path(), r, bam.n_ref)
            .unwrap_or_else(|e| panic!("{label}: open range {i}: {e}"));
        let mut cursor = 0;
        while let Some(batch) = s
            .next_batch()
            .unwrap_or_else(|e| panic!("{label}: range {i} {r:?}: {e}"))
        {
            // Where each record starts, from the stream's own block table.
            let mut u = batch.stream_offset();
            for raw in batch.iter_raw() {
                let v = virtual_offset(s.block_table(), &mut cursor, u);
                if v < r.start || v >= r.end {
                    failures.push(format!(
                        "{label}: range {i} {r:?} yields a record at {v} outside it"
                    ));
                }
                u += raw.len() as u64;
                got.push(raw.to_vec());
            }
        }
    }
    got
}

/// [`map_ranges`] on 1-4 threads must give the records of `bam`.
fn check_map(
    bam: &Bam,
    plan: &sortase_index::range::RangePlan,
    n: usize,
    label: &str,
    failures: &mut Vec<String>,
) {
    let threads = 1 + n % 4;
    let parts = map_ranges(bam.path(), plan, threads, |mut s| {
        let mut v = Vec::new();
        while let Some(b) = s.next_batch()? {
            v.extend(b.iter_raw().map(<[u8]>::to_vec));
        }
        Ok::<_, sortase_bam::BamError>(v)
    })
    .unwrap_or_else(|e| panic!("{label}: map_ranges: {e}"));
    if parts.len() != plan.ranges.len() {
        failures.push(format!(
            "{label}: map_ranges returned {} results for {} ranges",
            parts.len(),
            plan.ranges.len()
        ));
    }
    let mapped: Vec<Vec<u8>> = parts.into_iter().flatten().collect();
    compare_records(
        &format!("{label} map_ranges({threads})"),
        &mapped,
        &bam.records,
        failures,
    );
}

fn compare_records(label: &str, got: &[Vec<u8>], want: &[Vec<u8>], failures: &mut Vec<String>) {
    if got == want {
        return;
    }
    let i = got.iter().zip(want).take_while(|(a, b)| a == b).count();
    failures.push(format!(
        "{label}: {} records read, {} written; first difference at record {i}",
        got.len(),
        want.len()
    ));
}

#[test]
fn ranges_cover_every_record_exactly_once() {
    let bams = test_bams();
    let mut rng = Rng::new(7);
    let mut failures = Vec::new();
    for bam in &bams {
        let mut counts: Vec<usize> = vec![1, 2, 50];
        counts.extend((0..5).map(|_| 1 + rng.below(50) as usize));
        for (k, n) in counts.into_iter().enumerate() {
            check_plan(bam, n, k % 2 == 0, &mut failures);
        }
    }
    assert!(
        failures.is_empty(),
        "{} failure(s):\n  {}",
        failures.len(),
        failures.join("\n  ")
    );
}

/// `find_record_start`'s answer `got` at byte offset `cut`: a true record start in or after the
/// first block starting at or after the cut; with small records, exactly the first one there.
fn check_cut(
    bam: &Bam,
    truth: &BTreeSet<u64>,
    blocks: &[(u64, u32)],
    cut: u64,
    got: Option<u64>,
    failures: &mut Vec<String>,
) {
    let name = bam.path().display().to_string();
    // The first data block starting at or after the cut.
    let first_block = blocks
        .iter()
        .find(|&&(c, u)| c >= cut && u > 0)
        .map(|b| b.0);
    let expected = first_block.and_then(|b| truth.range(b << 16..).next().copied());
    match got {
        Some(v) => {
            if !truth.contains(&v) {
                failures.push(format!(
                    "{name}: cut {cut}: answer {}:{} is not a record start (expected {:?})",
                    v >> 16,
                    v & 0xffff,
                    expected.map(|e| (e >> 16, e & 0xffff))
                ));
            } else if first_block.is_none_or(|b| v < b << 16) {
                failures.push(format!(
                    "{name}: cut {cut}: answer {}:{} is before the first block at/after the cut",
                    v >> 16,
                    v & 0xffff
                ));
            } else if bam.small_records && Some(v) != expected {
                failures.push(format!(
                    "{name}: cut {cut}: answer {}:{} is not the first record start {:?}",
                    v >> 16,
                    v & 0xffff,
                    expected.map(|e| (e >> 16, e & 0xffff))
                ));
            }
        }
        None => {
            if bam.small_records && expected.is_some() {
                failures.push(format!(
                    "{name}: cut {cut}: no answer, but record start {:?} follows",
                    expected.map(|e| (e >> 16, e & 0xffff))
                ));
            }
        }
    }
}

/// `find_record_start` at random byte offsets: every answer is a true record start in or after the first
/// block starting at or after the offset; with small records, exactly the first record start there.
#[test]
fn find_record_start_only_finds_true_starts() {
    let bams = test_bams();
    let mut rng = Rng::new(11);
    let mut failures = Vec::new();
    for bam in &bams {
        let name = bam.path().display().to_string();
        let truth: BTreeSet<u64> = bam.starts.iter().copied().collect();
        let blocks = bam.blocks();
        let file_len = std::fs::metadata(bam.path()).unwrap().len();
        let mut file = sortase_io::Source::open_path(bam.path()).unwrap();
        let mut cuts: Vec<u64> = (0..150).map(|_| rng.below(file_len)).collect();
        // Block starts themselves and their neighbours.
        for &(c, _) in blocks.iter().step_by(1 + blocks.len() / 40) {
            cuts.extend([c, c + 1, c.saturating_sub(1)]);
        }
        cuts.extend([0, file_len - 1]);
        let mut found = 0;
        for cut in cuts {
            let got = find_record_start(&mut file, cut, bam.n_ref)
                .unwrap_or_else(|e| panic!("{name}: find_record_start({cut}): {e}"));
            found += usize::from(got.is_some());
            check_cut(bam, &truth, &blocks, cut, got, &mut failures);
        }
        if !bam.records.is_empty() && found == 0 {
            failures.push(format!("{name}: no cut found any record start"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failure(s):\n  {}",
        failures.len(),
        failures.join("\n  ")
    );
}

/// A fake record (block_size 34, refID 0, unmapped, empty sequence, name "A") whose bytes are all
/// below 94, so that it can appear inside the quality string of a real read.
fn fake_record() -> Vec<u8> {
    let mut r = Vec::new();
    r.extend_from_slice(&34u32.to_le_bytes());
    r.extend_from_slice(&0i32.to_le_bytes()); // refID 0
    r.extend_from_slice(&16i32.to_le_bytes()); // pos
    r.extend_from_slice(&[2, 30]); // l_read_name, mapq
    r.extend_from_slice(&4680u16.to_le_bytes()); // bin
    r.extend_from_slice(&0u16.to_le_bytes()); // n_cigar_op
    r.extend_from_slice(&4u16.to_le_bytes()); // flag
    r.extend_from_slice(&0u32.to_le_bytes()); // l_seq
    r.extend_from_slice(&0i32.to_le_bytes()); // next_refID 0
    r.extend_from_slice(&0i32.to_le_bytes()); // next_pos
    r.extend_from_slice(&0i32.to_le_bytes()); // tlen
    r.extend_from_slice(b"A\0");
    assert_eq!(r.len(), 38);
    assert!(r.iter().all(|&b| b < 94));
    r
}

/// Reads whose quality strings (valid Phred values 0-93) are a tiling of fake records ending exactly at
/// the end of the read: from inside such a read, a chain of "valid records" runs into the real ones.
/// The planner may cut at a fake start, but the ranges' results must still be exact.
#[test]

fn quality_strings_that_look_like_records_do_not_fool_the_planner() {
    let fake = fake_record();
    let mut rng = Rng::new(5);
    let mut recs = Vec::new();
    for i in 0..40 {
        let name = format!("q{i}");
        let l_seq = fake.len() * 2000 + 3; // 76 003 bases; the quality string ends with whole fakes
        let mut qual = vec![20u8; 3];
        while qual.len() < l_seq {
            qual.extend_from_slice(&fake);
        }
        recs.push(record(
            &Spec {
                ref_id: 0,
                pos: i * 1000,
                name: name.as_bytes(),
                l_seq,
                flag: 0,
                qual: &qual,
                aux: b"",
            },
            &mut rng,
        ));
    }
    let bam = write_bam("fake_quals", 1, recs, Blocking::Straddle, 0, true);
    let truth: BTreeSet<u64> = bam.starts.iter().copied().collect();
    let file_len = std::fs::metadata(bam.path()).unwrap().len();
    let mut file = sortase_io::Source::open_path(bam.path()).unwrap();
    let mut false_starts = Vec::new();
    for k in 0..40 {
        let cut = file_len * k / 40;
        if let Some(v) = find_record_start(&mut file, cut, bam.n_ref).unwrap() {
            if !truth.contains(&v) {
                false_starts.push(format!("cut {cut} -> {}:{}", v >> 16, v & 0xffff));
            }
        }
    }
    // The boundary finder is a heuristic and may be fooled here; what must hold is that map_ranges
    // notices (each range checks that it ends where the next begins) and still answers exactly.
    println!("find_record_start false starts: {}", false_starts.len());
    for n in [2, 7, 12] {
        let plan = plan_ranges(bam.path(), n).unwrap();
        let parts = sortase_index::range::map_ranges(bam.path(), &plan, 3, |mut s| {
            let mut v = Vec::new();
            while let Some(b) = s.next_batch()? {
                v.extend(b.iter_raw().map(<[u8]>::to_vec));
            }
            Ok::<_, sortase_bam::BamError>(v)
        })
        .unwrap();
        assert_eq!(parts.concat(), bam.records, "n={n}");
    }
}

/// A range whose planned end is not a record start (one byte past a true start) yields records up to
/// that start's record at most and then `RangeBoundary` naming the next true start, whether the
/// records around the end straddle blocks (read on past the end's block) or not.
#[test]
fn a_false_range_end_reports_the_next_true_start() {
    let bams = test_bams();
    let mut rng = Rng::new(13);
    let mut failures = Vec::new();
    for bam in bams.iter().filter(|b| b.records.len() >= 3) {
        let name = bam.path().display().to_string();
        let n = bam.starts.len();
        let mut picks: Vec<usize> = (0..6)
            .map(|_| 1 + rng.below(n as u64 - 1) as usize)
            .collect();
        picks.extend([1, n - 1]);
        for i in picks {
            if bam.starts[i] & 0xffff == 0xffff {
                continue;
            }
            let range = sortase_index::range::RecordRange {
                start: bam.starts[0],
                end: bam.starts[i] + 1,
            };
            let mut s = RangeStream::open(bam.path(), &range, bam.n_ref).unwrap();
            let mut got = Vec::new();
            let err = loop {
                match s.next_batch() {
                    Ok(Some(b)) => got.extend(b.iter_raw().map(<[u8]>::to_vec)),
                    Ok(None) => break None,
                    Err(e) => break Some(e),
                }
            };
            let want_found = bam.starts.get(i + 1).copied().unwrap_or(u64::MAX);
            match err {
                Some(sortase_bam::BamError::RangeBoundary { expected, found })
                    if expected == range.end && found == want_found => {}
                other => failures.push(format!("{name} end {i}+1: {other:?}")),
            }
            // The batch holding the false end fails whole: the records before it come out.
            if got.len() > i + 1 || got[..] != bam.records[..got.len()] {
                failures.push(format!(
                    "{name} end {i}+1: {} records, not a prefix",
                    got.len()
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failure(s):\n  {}",
        failures.len(),
        failures.join("\n  ")
    );
}

fn proptest_config() -> proptest::test_runner::Config {
    let mut config = proptest::test_runner::Config::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = 24;
    }
    config
}

proptest::proptest! {
    #![proptest_config(proptest_config())]

    /// Random BAMs (record sizes from empty to over a block, straddling blocks or not, any level)
    /// cut into any number of ranges: the ranges tile the file and yield every record exactly once.
    #[test]
    fn planned_cuts_cover_the_file_exactly_once(
        seed in proptest::prelude::any::<u64>(),
        wanted in 0usize..3000,
        max_seq in proptest::sample::select(vec![1u64, 40, 400, 4000, 80_000]),
        unmapped_tail in 0usize..3000,
        straddle in proptest::prelude::any::<bool>(),
        level in 0i32..=6,
        end_block_after_header in proptest::prelude::any::<bool>(),
        n in 1usize..40,
    ) {
        let mut rng = Rng::new(seed);
        // About 1.5 MB of bases at most, so a case takes milliseconds.
        let n_records = wanted.min(3_000_000 / max_seq as usize);
        let records = (0..n_records)
            .map(|i| {
                let tail = i >= unmapped_tail;
                let name = format!("p{i}");
                record(
                    &Spec {
                        ref_id: if tail { -1 } else { (i / 1000) as i32 },
                        pos: if tail { -1 } else { (i % 1000) as i32 },
                        name: name.as_bytes(),
                        l_seq: rng.below(max_seq) as usize,
                        flag: if tail { 4 } else { 0 },
                        qual: &[],
                        aux: if i % 2 == 0 { b"NMC\x01" } else { b"" },
                    },
                    &mut rng,
                )
            })
            .collect();
        let blocking = if straddle { Blocking::Straddle } else { Blocking::Record };
        let bam = write_bam("prop", 3, records, blocking, level, end_block_after_header);
        let mut failures = Vec::new();
        check_plan(&bam, n, n % 3 == 0, &mut failures);
        proptest::prop_assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}

/// A first record whose `block_size` claims more than a record may have (3 GiB, followed by
/// 1 MiB of filler) is refused by the planner, as the readers refuse it, instead of being left to
/// the ranges: each cut's boundary search would first inflate the rest of the file after it.
#[test]
fn a_first_record_claiming_more_than_a_record_may_have_is_refused_by_the_planner() {
    let mut claim = (3u32 << 30).to_le_bytes().to_vec();
    claim.extend_from_slice(&[0x11; 1 << 20]);
    let bam = write_bam("claim", 1, vec![claim], Blocking::Straddle, 6, false);
    let e = plan_ranges(&bam.file.0, 8).unwrap_err().to_string();
    assert!(
        e.contains("block_size 3221225472") && e.contains("offset"),
        "{e}"
    );
}
