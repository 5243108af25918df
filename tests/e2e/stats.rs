//! `sortase index`, `flagstat` and `idxstats` against samtools.
//!
//! Every coordinate-sorted BAM (made by the oracle's `samtools sort`) goes
//! through [`compare_all`]: BAI, CSI and CSI `-m 12` indexes must be
//! byte-identical to `samtools index`; `flagstat` (default, json, tsv) and
//! `idxstats` (no index, `.bai`, `.csi`) must print exactly what samtools
//! prints; every sortase command runs with `-@ 1` and `-@ 3`. Where samtools
//! fails, sortase must fail too and leave no index file.
//!
//! Inputs: the htslib-test corpus, generated edge cases (each in four block
//! layouts: samtools' default, `-l 1`, `-u`, and re-blocked into stored blocks
//! of random sizes so that records and the header straddle block boundaries),
//! unsorted and truncated BAMs.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::bgzf::{crc32, EOF_BLOCK};
use crate::common::{
    assert_no_failures, check_same, dir_listing, gunzip, line, p, run, sortase, tempdir, unmapped,
    Rng,
};
use crate::edge_cases;
use crate::oracle::{oracle, Oracle};
use crate::view_corpus::{corpus_dir, find_sams};

/// sortase's thread counts under test.
const THREADS: &[&str] = &["1", "3"];
/// For the re-blocked layout (many small blocks): also 16 threads, i.e. 64
/// byte ranges, so that nearly every block boundary is a range boundary.
const MORE_THREADS: &[&str] = &["1", "3", "16"];

/// Index kinds: label, samtools/sortase flags, extension.
const INDEXES: [(&str, &[&str], &str); 3] = [
    ("BAI", &[], "bai"),
    ("CSI", &["-c"], "csi"),
    ("CSI -m 12", &["-c", "-m", "12"], "csi"),
];

/// Fewer compared corpus files than this means the test lost its corpus.
const MIN_COMPARED: usize = 60;

fn first_line(s: &str) -> &str {
    s.lines().find(|l| !l.trim().is_empty()).unwrap_or("")
}

/// `path` with `.ext` appended (in.bam → in.bam.bai).
fn with_ext(path: &Path, ext: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".");
    s.push(ext);
    PathBuf::from(s)
}

fn remove_indexes(bam: &Path) {
    for ext in ["bai", "csi"] {
        let _ = std::fs::remove_file(with_ext(bam, ext));
    }
}

/// Where two byte strings first differ, with a few bytes of each around it.
fn byte_diff(ours: &[u8], theirs: &[u8]) -> Option<String> {
    if ours == theirs {
        return None;
    }
    let at = ours.iter().zip(theirs).take_while(|(a, b)| a == b).count();
    let hex = |b: &[u8]| {
        let end = (at + 16).min(b.len());
        let start = at.saturating_sub(4).min(end);
        b[start..end]
            .iter()
            .map(|x| format!("{x:02x}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    Some(format!(
        "sizes {} (ours) vs {} (samtools), first difference at byte {at}: ours [{}] samtools [{}] (from byte {})",
        ours.len(),
        theirs.len(),
        hex(ours),
        hex(theirs),
        at.saturating_sub(4)
    ))
}

/// Compare two index files; for CSI (BGZF-compressed) also locate the
/// difference in the decompressed data.
fn index_diff(ours: &Path, theirs: &Path, csi: bool) -> Option<String> {
    let (a, b) = (std::fs::read(ours).unwrap(), std::fs::read(theirs).unwrap());
    let raw = byte_diff(&a, &b)?;
    if !csi {
        return Some(raw);
    }
    let inner = match (try_gunzip(ours), try_gunzip(theirs)) {
        (Ok(a), Ok(b)) => byte_diff(&a, &b).unwrap_or_else(|| "same decompressed content".into()),
        (Err(e), _) => format!("ours does not decompress: {e}"),
        (_, Err(e)) => format!("samtools' does not decompress: {e}"),
    };
    Some(format!("{raw}; decompressed: {inner}"))
}

/// Decompress a BGZF file (python3's gzip module), or why not.
fn try_gunzip(path: &Path) -> Result<Vec<u8>, String> {
    let py = crate::common::python();
    let code =
        "import gzip,sys;sys.stdout.buffer.write(gzip.decompress(open(sys.argv[1],'rb').read()))";
    let r = run(Path::new(&py), &["-c".into(), code.into()], &[p(path)]);
    if r.ok() {
        Ok(r.stdout)
    } else {
        Err(r.stderr.lines().last().unwrap_or("").to_string())
    }
}

/// One sortase command compared with one samtools command by exit status
/// and stdout. Returns whether both succeeded.
fn compare_stdout(
    failures: &mut Vec<String>,
    label: &str,
    args: &[&str],
    theirs: &crate::common::Run,
) -> bool {
    let ours = sortase(args);
    match (theirs.ok(), ours.ok()) {
        (true, true) => {
            check_same(failures, label, &ours.text(), &theirs.text());
            return true;
        }
        (true, false) => failures.push(format!(
            "{label}: samtools succeeds, sortase fails: {}",
            ours.failure()
        )),
        (false, true) => failures.push(format!(
            "{label}: samtools fails ({}) but sortase succeeds and prints {} bytes",
            first_line(&theirs.stderr),
            ours.stdout.len()
        )),
        (false, false) => {}
    }
    false
}

/// What [`compare_all`] found.
struct Checked {
    failures: Vec<String>,
    /// Comparisons where both programs succeeded (outputs compared).
    both_ok: usize,
}

/// Every comparison on one BAM. `bam` must sit in a directory of its own:
/// index files are created next to it.
fn compare_all(st: &Oracle, bam: &Path, label: &str, threads: &[&str]) -> Checked {
    let dir = bam.parent().expect("bam in a directory");
    let mut failures = Vec::new();
    let mut both_ok = 0;
    remove_indexes(bam);

    // index
    let mut reference_index: [Option<PathBuf>; 2] = [None, None]; // bai, csi
    for (i, (kind, flags, ext)) in INDEXES.iter().enumerate() {
        let theirs = dir.join(format!("samtools{i}.{ext}"));
        let mut args = vec!["index"];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["-o", p(&theirs), p(bam)]);
        let st_run = st.run(&args);
        if st_run.ok() && i < 2 {
            reference_index[i] = Some(theirs.clone());
        }
        for &t in threads {
            // -@ 1 writes with -o, -@ 3 to the default name (with -b for BAI).
            let (ours, mut args) = if t == "1" {
                let ours = dir.join(format!("sortase{i}.{ext}"));
                (ours, vec!["index", "-@", t, "-o"])
            } else {
                let args = if *ext == "bai" {
                    vec!["index", "-b", "-@", t]
                } else {
                    vec!["index", "-@", t]
                };
                (with_ext(bam, ext), args)
            };
            let ours_s = p(&ours).to_string();
            if t == "1" {
                args.push(&ours_s);
            }
            let mut full = args.clone();
            full.splice(1..1, flags.iter().copied());
            full.push(p(bam));
            let lab = format!("{label}: index {kind} -@ {t}");
            let run = sortase(&full);
            match (st_run.ok(), run.ok()) {
                (true, true) => match ours.exists() {
                    false => {
                        failures.push(format!("{lab}: no index written at {}", ours.display()))
                    }
                    true => {
                        both_ok += 1;
                        if let Some(d) = index_diff(&ours, &theirs, *ext == "csi") {
                            failures.push(format!("{lab}: {d}"));
                        }
                    }
                },
                (true, false) => failures.push(format!(
                    "{lab}: samtools succeeds, sortase fails: {}",
                    run.failure()
                )),
                (false, true) => failures.push(format!(
                    "{lab}: samtools fails ({}) but sortase succeeds",
                    first_line(&st_run.stderr)
                )),
                (false, false) => {
                    if ours.exists() {
                        failures.push(format!("{lab}: failed but left {}", ours.display()));
                    }
                }
            }
            let _ = std::fs::remove_file(&ours);
        }
    }

    // flagstat
    for fmt in [None, Some("json"), Some("tsv")] {
        let mut st_args = vec!["flagstat"];
        if let Some(f) = fmt {
            st_args.extend_from_slice(&["-O", f]);
        }
        st_args.push(p(bam));
        let theirs = st.run(&st_args);
        for &t in threads {
            let mut args = vec!["flagstat", "-@", t];
            match fmt {
                Some(f) => args.extend_from_slice(&["-O", f]),
                // The default format named explicitly once.
                None if t == "3" => args.extend_from_slice(&["-O", "default"]),
                None => {}
            }
            args.push(p(bam));
            let lab = format!("{label}: flagstat -O {} -@ {t}", fmt.unwrap_or("default"));
            both_ok += usize::from(compare_stdout(&mut failures, &lab, &args, &theirs));
        }
    }

    // idxstats: by scanning, then from a .bai, then from a .csi alone
    for (what, index) in [
        ("no index", None),
        ("with .bai", Some(("bai", &reference_index[0]))),
        ("with .csi", Some(("csi", &reference_index[1]))),
    ] {
        remove_indexes(bam);
        if let Some((ext, src)) = index {
            let Some(src) = src else { continue }; // samtools could not index it
            std::fs::copy(src, with_ext(bam, ext)).unwrap();
        }
        let theirs = st.run(&["idxstats", p(bam)]);
        for &t in threads {
            let lab = format!("{label}: idxstats ({what}) -@ {t}");
            let args = ["idxstats", "-@", t, p(bam)];
            both_ok += usize::from(compare_stdout(&mut failures, &lab, &args, &theirs));
        }
    }
    remove_indexes(bam);
    Checked { failures, both_ok }
}

/// Run `work` over `items` on two threads, keeping the input order.
fn par_map<T: Sync, R: Send>(items: &[T], work: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let results = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(item) = items.get(i) else { break };
                let r = work(item);
                results.lock().unwrap().push((i, r));
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

#[test]
fn corpus_index_flagstat_idxstats() {
    let (Some(st), Some(dir)) = (oracle(), corpus_dir()) else {
        return;
    };
    let mut sams = Vec::new();
    find_sams(&dir, &mut sams);
    sams.sort();
    let outcomes = par_map(&sams, |sam| {
        let name = sam.strip_prefix(&dir).unwrap().display().to_string();
        let tmp = tempdir();
        let bam = tmp.path().join("x.bam");
        let sort = st.run(&["sort", "-o", p(&bam), p(sam)]);
        if !sort.ok() {
            return (name, Err(first_line(&sort.stderr).to_string()));
        }
        let f = compare_all(st, &bam, &name, THREADS);
        (name, Ok(f))
    });
    let (mut compared, mut both_ok, mut failures) = (0, 0, Vec::new());
    for (name, outcome) in outcomes {
        match outcome {
            Ok(c) => {
                compared += 1;
                both_ok += c.both_ok;
                failures.extend(c.failures);
            }
            Err(why) => eprintln!("stats corpus: skipped {name}: oracle cannot sort it: {why}"),
        }
    }
    eprintln!(
        "stats corpus: compared {compared} of {} files ({both_ok} comparisons where both succeeded)",
        sams.len()
    );
    assert!(
        compared > MIN_COMPARED,
        "only {compared} corpus files compared (want > {MIN_COMPARED})"
    );
    // 18 comparisons per file; only a few files cannot be indexed.
    assert!(
        both_ok > compared * 15,
        "only {both_ok} comparisons of {compared} files where both programs succeeded"
    );
    assert_no_failures("corpus index/flagstat/idxstats", &failures);
}

// ---------------------------------------------------------------------------
// Generated edge cases

/// One BGZF block holding `data` in a stored (uncompressed) deflate block.
fn stored_block(data: &[u8]) -> Vec<u8> {
    assert!(!data.is_empty() && data.len() <= 0xff00);
    let len = data.len() as u16;
    let bsize = (18 + 5 + data.len() + 8 - 1) as u16;
    let mut b = vec![
        0x1f, 0x8b, 0x08, 0x04, 0, 0, 0, 0, 0, 0xff, 0x06, 0, 0x42, 0x43, 0x02, 0,
    ];
    b.extend_from_slice(&bsize.to_le_bytes());
    b.push(0x01);
    b.extend_from_slice(&len.to_le_bytes());
    b.extend_from_slice(&(!len).to_le_bytes());
    b.extend_from_slice(data);
    b.extend_from_slice(&crc32(data).to_le_bytes());
    b.extend_from_slice(&(data.len() as u32).to_le_bytes());
    b
}

/// Rewrite a BGZF file into blocks of random sizes (some of 1-8 bytes, so
/// even `block_size` fields are cut), ignoring record boundaries.
fn reblock(src: &Path, dst: &Path, seed: u64) {
    let data = gunzip(src);
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    let mut at = 0;
    while at < data.len() {
        let n = match rng.below(8) {
            0 => 1 + rng.below(8),
            1 => 0xff00,
            _ => 1 + rng.below(30_000),
        } as usize;
        let end = (at + n).min(data.len());
        out.extend(stored_block(&data[at..end]));
        at = end;
    }
    out.extend_from_slice(&EOF_BLOCK);
    std::fs::write(dst, out).unwrap();
}

/// Sort `sam` with the oracle and compare everything on four block layouts.
fn check_case(name: &str, sam: &str, seed: u64) {
    let Some(st) = oracle() else { return };
    let tmp = tempdir();
    let input = tmp.path().join("in.sam");
    std::fs::write(&input, sam).unwrap();
    let sorted = tmp.path().join("sorted.bam");
    st.run(&["sort", "-o", p(&sorted), p(&input)]).expect_ok();
    let records = |bam: &Path| st.run(&["view", "--no-PG", p(bam)]).expect_ok().stdout;
    let expected = records(&sorted);
    let mut failures = Vec::new();
    for variant in ["default", "l1", "u", "reblocked"] {
        let sub = tmp.path().join(variant);
        std::fs::create_dir(&sub).unwrap();
        let bam = sub.join(format!("{name}.bam"));
        match variant {
            "default" => {
                std::fs::copy(&sorted, &bam).unwrap();
            }
            "l1" => {
                // `-1`: level 1 (`view -l` is the library filter)
                st.run(&["view", "-1", "-o", p(&bam), p(&sorted)])
                    .expect_ok();
            }
            "u" => {
                st.run(&["view", "-u", "-o", p(&bam), p(&sorted)])
                    .expect_ok();
            }
            _ => reblock(&sorted, &bam, seed),
        }
        assert!(
            records(&bam) == expected,
            "{name} [{variant}]: test input broken: not the records of the sorted BAM"
        );
        let threads = if variant == "reblocked" {
            MORE_THREADS
        } else {
            THREADS
        };
        let c = compare_all(st, &bam, &format!("{name} [{variant}]"), threads);
        // flagstat always works, idxstats always without index: at least 8.
        if c.both_ok < 8 {
            failures.push(format!(
                "{name} [{variant}]: only {} comparisons succeeded",
                c.both_ok
            ));
        }
        failures.extend(c.failures);
    }
    assert_no_failures(name, &failures);
}

fn header(contigs: &[(&str, u64)]) -> String {
    let mut h = line(&["@HD", "VN:1.6", "SO:unsorted"]);
    for (name, len) in contigs {
        h += &line(&["@SQ", &format!("SN:{name}"), &format!("LN:{len}")]);
    }
    h
}

/// Every combination of the 12 flag bits, twice, with random placement:
/// mapped, unmapped placed at a position, unmapped unplaced; mates on the
/// same contig, another one, or none; MAPQ 0-60 (around the flagstat
/// threshold 5) and 255.
fn flag_combinations() -> String {
    let contigs = [("chr1", 100_000u64), ("chr2", 50_000), ("chr3", 2_000)];
    let mut rng = Rng::new(41);
    let mut s = header(&contigs);
    for rep in 0..2 {
        for flag in 0u64..4096 {
            let c = rng.below(3) as usize;
            let (chr, len) = contigs[c];
            let pos = (1 + rng.below(len - 100)).to_string();
            let mapq = match rng.below(5) {
                0 => "255".to_string(),
                1 => rng.below(10).to_string(),
                _ => rng.below(61).to_string(),
            };
            let unplaced = flag & 4 != 0 && rng.below(3) == 0;
            let (rname, pos, cigar, mapq) = match (flag & 4 != 0, unplaced) {
                (true, true) => ("*", "0".to_string(), "*", "0".to_string()),
                (true, false) => (chr, pos, "*", "0".to_string()),
                (false, _) => (chr, pos, "40M", mapq),
            };
            let other = contigs[(c + 1 + rng.below(2) as usize) % 3];
            let (rnext, pnext) = if flag & 1 == 0 && rng.below(2) == 0 {
                ("*", "0".to_string())
            } else {
                match rng.below(4) {
                    _ if rname == "*" => ("*", "0".to_string()),
                    0 => ("=", (1 + rng.below(len - 100)).to_string()),
                    1 => (other.0, (1 + rng.below(other.1 - 100)).to_string()),
                    2 => ("*", "0".to_string()),
                    _ => (chr, pos.clone()),
                }
            };
            s += &line(&[
                &format!("f{rep}_{flag}"),
                &flag.to_string(),
                rname,
                &pos,
                &mapq,
                cigar,
                rnext,
                &pnext,
                "0",
                &rng.bases(40),
                &rng.quals(40),
            ]);
        }
    }
    s
}

/// Read pairs as an aligner writes them: proper pairs, a mapped read with
/// its unmapped mate placed at its position, mates on other contigs,
/// duplicates and QC failures, then unmapped pairs and single reads with no
/// position (the unplaced tail).
fn mates_and_unplaced_tail() -> String {
    let contigs = [("chr1", 200_000u64), ("chr2", 100_000), ("chrEmpty", 5000)];
    let mut rng = Rng::new(5);
    let mut s = header(&contigs);
    let rec = |s: &mut String, name: &str, flag: u64, f: [&str; 7], rng: &mut Rng| {
        let n = 30;
        let extra = match rng.below(10) {
            0 => 0x400,
            1 => 0x200,
            2 => 0x600,
            _ => 0,
        };
        *s += &line(&[
            name,
            &(flag | extra).to_string(),
            f[0],
            f[1],
            f[2],
            f[3],
            f[4],
            f[5],
            f[6],
            &rng.bases(n),
            &rng.quals(n),
        ]);
    };
    for i in 0..600 {
        let name = format!("p{i}");
        let c = if rng.below(3) == 0 { "chr2" } else { "chr1" };
        let a = 1 + rng.below(90_000);
        let b = a + rng.below(500);
        let (a_s, b_s) = (a.to_string(), b.to_string());
        let tlen = (b + 30 - a).to_string();
        let ntlen = format!("-{tlen}");
        match i % 6 {
            0 | 1 => {
                rec(
                    &mut s,
                    &name,
                    99,
                    [c, &a_s, "60", "30M", "=", &b_s, &tlen],
                    &mut rng,
                );
                rec(
                    &mut s,
                    &name,
                    147,
                    [c, &b_s, "60", "30M", "=", &a_s, &ntlen],
                    &mut rng,
                );
            }
            2 => {
                rec(
                    &mut s,
                    &name,
                    73,
                    [c, &a_s, "37", "30M", "=", &a_s, "0"],
                    &mut rng,
                );
                rec(
                    &mut s,
                    &name,
                    133,
                    [c, &a_s, "0", "*", "=", &a_s, "0"],
                    &mut rng,
                );
            }
            3 => {
                rec(
                    &mut s,
                    &name,
                    137,
                    [c, &a_s, "3", "30M", "=", &a_s, "0"],
                    &mut rng,
                );
                rec(
                    &mut s,
                    &name,
                    69,
                    [c, &a_s, "0", "*", "=", &a_s, "0"],
                    &mut rng,
                );
            }
            4 => {
                let o = if c == "chr1" { "chr2" } else { "chr1" };
                let q = if rng.below(2) == 0 { "4" } else { "5" };
                rec(
                    &mut s,
                    &name,
                    65,
                    [c, &a_s, q, "30M", o, &b_s, "0"],
                    &mut rng,
                );
                rec(
                    &mut s,
                    &name,
                    129,
                    [o, &b_s, "60", "30M", c, &a_s, "0"],
                    &mut rng,
                );
            }
            _ => {
                rec(
                    &mut s,
                    &name,
                    77,
                    ["*", "0", "0", "*", "*", "0", "0"],
                    &mut rng,
                );
                rec(
                    &mut s,
                    &name,
                    141,
                    ["*", "0", "0", "*", "*", "0", "0"],
                    &mut rng,
                );
            }
        }
    }
    for i in 0..200 {
        rec(
            &mut s,
            &format!("u{i}"),
            4,
            ["*", "0", "0", "*", "*", "0", "0"],
            &mut rng,
        );
    }
    s
}

/// 5000 contigs of varied lengths; reads on every 7th, only placed unmapped
/// reads on every 11th, and an unplaced tail.
fn five_thousand_contigs() -> String {
    let mut rng = Rng::new(17);
    let lengths: Vec<u64> = (0..5000)
        .map(|i| match i % 97 {
            0 => 250_000_000,
            _ => 500 + rng.below(100_000),
        })
        .collect();
    let mut s = line(&["@HD", "VN:1.6", "SO:unsorted"]);
    for (i, len) in lengths.iter().enumerate() {
        s += &line(&["@SQ", &format!("SN:contig_{i}"), &format!("LN:{len}")]);
    }
    for (i, &len) in lengths.iter().enumerate() {
        let name = format!("contig_{i}");
        if i % 7 == 0 {
            for k in 0..1 + rng.below(4) {
                let pos = (1 + rng.below(len - 20)).to_string();
                s += &line(&[
                    &format!("r{i}_{k}"),
                    "0",
                    &name,
                    &pos,
                    "30",
                    "20M",
                    "*",
                    "0",
                    "0",
                    &rng.bases(20),
                    "*",
                ]);
            }
        }
        if i % 11 == 0 {
            let pos = (1 + rng.below(len - 20)).to_string();
            s += &line(&[
                &format!("u{i}"),
                "4",
                &name,
                &pos,
                "0",
                "*",
                "*",
                "0",
                "0",
                &rng.bases(20),
                "*",
            ]);
        }
    }
    for i in 0..50 {
        s += &unmapped(&format!("tail{i}"), "ACGT");
    }
    s
}

/// A contig longer than BAI can index (2^29): samtools refuses a BAI for
/// reads past 2^29 - 1, CSI works (deeper with `-m 12`).
fn beyond_bai_range() -> String {
    let mut s = header(&[("small", 10_000), ("huge", 1_000_000_000)]);
    let reads = [
        ("small", 100u64),
        ("huge", 1),
        ("huge", 536_870_900),
        ("huge", 536_870_912),
        ("huge", 536_870_913),
        ("huge", 900_000_000),
        ("huge", 999_999_981),
    ];
    for (i, (chr, pos)) in reads.iter().enumerate() {
        s += &line(&[
            &format!("b{i}"),
            "0",
            chr,
            &pos.to_string(),
            "60",
            "20M",
            "*",
            "0",
            "0",
            "ACGTACGTACGTACGTACGT",
            "*",
        ]);
    }
    s
}

/// Reads only up to 2^29 on a long contig: BAI works.
fn just_within_bai_range() -> String {
    let mut s = header(&[("huge", 1_000_000_000)]);
    for (i, pos) in [1u64, 16_385, 536_870_000, 536_870_892].iter().enumerate() {
        s += &line(&[
            &format!("w{i}"),
            "0",
            "huge",
            &pos.to_string(),
            "60",
            "20M",
            "*",
            "0",
            "0",
            "ACGTACGTACGTACGTACGT",
            "*",
        ]);
    }
    s
}

/// Many unmapped, unplaced reads, with or without `@SQ` lines.
fn all_unmapped(with_sq: bool) -> String {
    let mut rng = Rng::new(23);
    let mut s = if with_sq {
        header(&[("chr1", 1000), ("chr2", 1000)])
    } else {
        line(&["@HD", "VN:1.6", "SO:unsorted"])
    };
    for i in 0..3000 {
        let (flag, seq) = match i % 3 {
            0 => ("4", rng.bases(100)),
            1 => ("77", rng.bases(100)),
            _ => ("1677", rng.bases(100)), // 0x600 | 141
        };
        s += &line(&[
            &format!("u{i}"),
            flag,
            "*",
            "0",
            "0",
            "*",
            "*",
            "0",
            "0",
            &seq,
            &rng.quals(100),
        ]);
    }
    s
}

/// Unusual reference spans: zero-length (`10S`, `5I`, no CIGAR), huge
/// `N` skips across many bins and linear-index windows, reads past the end
/// of their contig, mapped reads with POS 0 (samtools makes them unmapped),
/// placed unmapped reads with a CIGAR, and reads near 2^29 on a contig of
/// length 2^29 - 1.
fn odd_spans() -> String {
    let contigs = [("c1", 5_000_000u64), ("c2", 1000), ("c3", 536_870_911)];
    let mut rng = Rng::new(29);
    let mut s = header(&contigs);
    for i in 0..3000 {
        let c = rng.below(3) as usize;
        let (chr, len) = contigs[c];
        // On c3, only case 7 comes near 2^29 (a BAI cannot index past it).
        let mut pos = 1 + rng.below(if c == 2 { len - 4_000_000 } else { len });
        let (flag, cigar, seq) = match rng.below(9) {
            0 => ("0", "10S".to_string(), rng.bases(10)),
            1 => ("16", "5I".to_string(), rng.bases(5)),
            2 => ("0", "*".to_string(), rng.bases(8)),
            3 => {
                let n = 1 + rng.below(3_000_000);
                ("0", format!("10M{n}N10M"), rng.bases(20))
            }
            4 if c != 2 => {
                pos = len + 1 + rng.below(100); // past the end (BAI still works)
                ("0", "30M".to_string(), rng.bases(30))
            }
            5 => {
                pos = 0; // samtools: treated as unmapped
                ("0", "10M".to_string(), rng.bases(10))
            }
            6 => ("4", "20M".to_string(), rng.bases(20)),
            7 if c == 2 => {
                pos = 536_870_900 - rng.below(20_000);
                ("0", "10M".to_string(), rng.bases(10))
            }
            _ => ("1024", "50M".to_string(), rng.bases(50)),
        };
        let (chr, pos) = if flag == "4" && rng.below(4) == 0 {
            ("*", 0)
        } else {
            (chr, pos)
        };
        s += &line(&[
            &format!("o{i}"),
            flag,
            chr,
            &pos.to_string(),
            "40",
            &cigar,
            "*",
            "0",
            "0",
            &seq,
            "*",
        ]);
    }
    s
}

/// Long reads of 100 kb and huge CIGARs among ordinary reads.
fn long_reads_among_short() -> String {
    let mut rng = Rng::new(31);
    let mut s = header(&[("chr1", 1_000_000), ("chr2", 300_000)]);
    let mut reads: Vec<(String, u64)> = Vec::new();
    for i in 0..6 {
        let pos = 1 + rng.below(800_000);
        let n = 100_000;
        let cigar = if i % 2 == 0 {
            format!("{n}M")
        } else {
            format!("2000S{}M3000I5D{}M", 50_000, n - 55_000)
        };
        let fields = [
            format!("long{i}"),
            if i == 5 { "16".into() } else { "0".into() },
            "chr1".into(),
            pos.to_string(),
            "60".into(),
            cigar,
            "*".into(),
            "0".into(),
            "0".into(),
            rng.bases(n),
            if i % 3 == 0 { rng.quals(n) } else { "*".into() },
        ];
        reads.push((fields.join("\t") + "\n", pos));
    }
    // 70000-op CIGAR (CG tag): 1M1D x 35000 (span 70000), and 1M1I (span 35000)
    for (name, unit, pos) in [("cg_del", "1M1D", 10_000u64), ("cg_ins", "1M1I", 600_000)] {
        let cigar = unit.repeat(35_000);
        let fields = [
            name.to_string(),
            "0".into(),
            "chr1".into(),
            pos.to_string(),
            "60".into(),
            cigar,
            "*".into(),
            "0".into(),
            "0".into(),
            rng.bases(if unit == "1M1D" { 35_000 } else { 70_000 }),
            "*".into(),
        ];
        reads.push((fields.join("\t") + "\n", pos));
    }
    for i in 0..3000 {
        let pos = 1 + rng.below(999_000);
        reads.push((
            line(&[
                &format!("s{i}"),
                "0",
                "chr1",
                &pos.to_string(),
                "20",
                "100M",
                "*",
                "0",
                "0",
                &rng.bases(100),
                &rng.quals(100),
            ]),
            pos,
        ));
    }
    for (r, _) in &reads {
        s += r;
    }
    // one long read on chr2 too
    s += &line(&[
        "long_chr2",
        "0",
        "chr2",
        "1",
        "60",
        "100000M",
        "*",
        "0",
        "0",
        &rng.bases(100_000),
        "*",
    ]);
    s
}

#[test]
fn generated_flag_combinations() {
    check_case("flags", &flag_combinations(), 1);
}

#[test]
fn generated_mates_and_unplaced_tail() {
    check_case("mates", &mates_and_unplaced_tail(), 2);
}

#[test]
fn generated_five_thousand_contigs() {
    check_case("contigs5000", &five_thousand_contigs(), 3);
}

#[test]
fn generated_beyond_bai_range() {
    check_case("beyond_bai", &beyond_bai_range(), 4);
}

#[test]
fn generated_just_within_bai_range() {
    check_case("within_bai", &just_within_bai_range(), 5);
}

#[test]
fn generated_all_unmapped_with_references() {
    check_case("unmapped_sq", &all_unmapped(true), 6);
}

#[test]
fn generated_all_unmapped_without_references() {
    check_case("unmapped_nosq", &all_unmapped(false), 7);
}

#[test]
fn generated_long_reads_and_huge_cigars() {
    check_case("long", &long_reads_among_short(), 8);
}

#[test]
fn generated_odd_spans() {
    check_case("spans", &odd_spans(), 11);
}

#[test]
fn generated_header_without_references_or_records() {
    check_case("hd_only", &line(&["@HD", "VN:1.6", "SO:unsorted"]), 9);
}

/// Reads whose quality strings (valid Phred values, `!`-`b`) spell a tiling
/// of small "records" (block_size 34, refID 0, unmapped, name `A`) that ends
/// exactly at the end of the read. From a cut inside such a read, the range
/// planner's record-boundary finder sees a chain of valid records running
/// into the real ones, and flagstat/idxstats count phantom records.
fn qualities_that_look_like_records() -> String {
    let fake: [u8; 38] = [
        34, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0, 2, 30, 0x48, 0x12, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 65, 0,
    ];
    let mut qual = String::from("555");
    for _ in 0..2000 {
        qual.extend(fake.iter().map(|&b| (b + 33) as char));
    }
    let n = qual.len();
    let mut rng = Rng::new(13);
    let mut s = header(&[("chr1", 10_000_000)]);
    for i in 0..24 {
        let pos = (1 + i * 1000).to_string();
        s += &line(&[
            &format!("q{i}"),
            "0",
            "chr1",
            &pos,
            "60",
            &format!("{n}M"),
            "*",
            "0",
            "0",
            &rng.bases(n),
            &qual,
        ]);
    }
    s
}

#[test]

fn generated_qualities_that_look_like_records() {
    check_case("fake_quals", &qualities_that_look_like_records(), 10);
}

/// The view suite's edge-case generators, through the stats commands (one
/// test each, so they run in parallel).
macro_rules! view_edge_case {
    ($($test:ident => $generator:ident),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                check_case(stringify!($generator), &edge_cases::$generator(), 100);
            }
        )*
        /// Generators of `edge_cases::all()` without a test of their own above.
        #[test]
        fn view_edge_others() {
            let covered = [$(stringify!($generator)),*];
            for (name, make) in edge_cases::all() {
                if !covered.contains(&name) {
                    check_case(name, &make(), 100);
                }
            }
        }
    };
}

view_edge_case! {
    view_edge_unmapped => unmapped,
    view_edge_secondary_supplementary => secondary_supplementary,
    view_edge_many_contigs => many_contigs,
    view_edge_huge_cigar => huge_cigar,
    view_edge_header_only => header_only,
    view_edge_array_tags => array_tags,
    view_edge_scalar_tags => scalar_tags,
    view_edge_float_tags => float_tags,
    view_edge_long_reads => long_reads,
    view_edge_sequences => sequences,
    view_edge_misc_fields => misc_fields,
}

/// The benchmark BAM, when present (not required).
#[test]
fn bench_bam_if_present() {
    let src = Path::new("/work/bench-data/tiny.sorted.bam");
    if !src.exists() {
        eprintln!("SKIP bench_bam_if_present: {} not present", src.display());
        return;
    }
    let Some(st) = oracle() else { return };
    let tmp = tempdir();
    let bam = tmp.path().join("tiny.sorted.bam");
    std::os::unix::fs::symlink(src, &bam).unwrap();
    let failures = compare_all(st, &bam, "bench tiny.sorted.bam", MORE_THREADS).failures;
    assert_no_failures("bench BAM", &failures);
}

// ---------------------------------------------------------------------------
// Unsorted and truncated inputs

/// `n` 100 bp reads in the order given by `order` (contig index, position).
fn reads_sam(contigs: &[(&str, u64)], order: &[(usize, u64)], seed: u64) -> String {
    let mut rng = Rng::new(seed);
    let mut s = header(contigs);
    for (i, &(c, pos)) in order.iter().enumerate() {
        let (chr, flag, cigar) = if c == usize::MAX {
            ("*", "4", "*")
        } else {
            (contigs[c].0, "0", "100M")
        };
        let pos = if c == usize::MAX { 0 } else { pos };
        s += &line(&[
            &format!("r{i}"),
            flag,
            chr,
            &pos.to_string(),
            "60",
            cigar,
            "*",
            "0",
            "0",
            &rng.bases(100),
            &rng.quals(100),
        ]);
    }
    s
}

/// Unsorted BAMs (the disorder deep inside the file, where only a parallel
/// range's boundary sees it, or right at the start): `sortase index` fails
/// with an error naming the file and leaves no index (nor any other file);
/// `idxstats` without an index fails like samtools; flagstat still works.
#[test]
fn unsorted_input_is_rejected() {
    let Some(st) = oracle() else { return };
    let contigs = [("chr1", 1_000_000u64), ("chr2", 1_000_000)];
    let n = 6000u64;
    let cases: Vec<(&str, Vec<(usize, u64)>)> = vec![
        // positions going back in the middle of one contig
        (
            "pos_back_mid",
            (0..n)
                .map(|i| (0, if i < n / 2 { 500_000 + i } else { 1 + i }))
                .collect(),
        ),
        // chr2 block before a chr1 block, each sorted
        (
            "tid_back",
            (0..n)
                .map(|i| (if i < n / 2 { 1 } else { 0 }, 1 + i * 10))
                .collect(),
        ),
        // chr1, chr2, chr1 again: a contig's records not contiguous
        (
            "tid_interleaved",
            (0..n)
                .map(|i| {
                    (
                        if (n / 3..2 * n / 3).contains(&i) {
                            1
                        } else {
                            0
                        },
                        1 + i * 10,
                    )
                })
                .collect(),
        ),
        // the very last record goes back
        (
            "last_back",
            (0..n)
                .map(|i| (0, if i + 1 < n { 1000 + i * 10 } else { 5 }))
                .collect(),
        ),
        // the second record goes back
        (
            "second_back",
            (0..n)
                .map(|i| (0, if i == 1 { 1 } else { 100 + i * 10 }))
                .collect(),
        ),
        // mapped reads after unplaced unmapped ones
        (
            "mapped_after_unplaced",
            (0..n)
                .map(|i| {
                    if i % 1000 == 999 {
                        (usize::MAX, 0)
                    } else {
                        (0, 1 + i * 10)
                    }
                })
                .collect(),
        ),
    ];
    let mut failures = Vec::new();
    for (name, order) in cases {
        let tmp = tempdir();
        let dir = tmp.path();
        let sam = dir.join("in.sam");
        std::fs::write(&sam, reads_sam(&contigs, &order, 3)).unwrap();
        let bam = dir.join(format!("{name}.bam"));
        st.run(&["view", "-b", "--no-PG", "-o", p(&bam), p(&sam)])
            .expect_ok();
        std::fs::remove_file(&sam).unwrap();
        let probe = st.run(&["index", "-o", p(&dir.join("probe.bai")), p(&bam)]);
        if probe.ok() {
            // samtools accepts this order: then sortase must match it exactly.
            eprintln!("unsorted {name}: samtools indexes it; comparing outputs instead");
            std::fs::remove_file(dir.join("probe.bai")).unwrap();
            failures.extend(compare_all(st, &bam, &format!("unsorted {name}"), THREADS).failures);
            continue;
        }
        let _ = std::fs::remove_file(dir.join("probe.bai"));
        let before = dir_listing(dir);
        for &t in THREADS {
            for (kind, flags, ext) in INDEXES {
                let out = dir.join(format!("out.{ext}"));
                for explicit in [false, true] {
                    let mut args = vec!["index", "-@", t];
                    args.extend_from_slice(flags);
                    if explicit {
                        args.extend_from_slice(&["-o", p(&out)]);
                    }
                    args.push(p(&bam));
                    let run = sortase(&args);
                    let lab = format!(
                        "unsorted {name}: index {kind} -@ {t}{}",
                        if explicit { " -o" } else { "" }
                    );
                    if run.ok() {
                        failures.push(format!("{lab}: succeeded on an unsorted BAM"));
                    } else if !run.stderr.to_lowercase().contains("sort") {
                        failures.push(format!(
                            "{lab}: error does not say the input is unsorted: {}",
                            run.stderr.trim()
                        ));
                    } else if !run.stderr.contains(p(&bam))
                        && !run.stderr.contains(&format!("{name}.bam"))
                    {
                        failures.push(format!(
                            "{lab}: error does not name the input: {}",
                            run.stderr.trim()
                        ));
                    }
                    let after = dir_listing(dir);
                    if after != before {
                        failures.push(format!("{lab}: directory changed: {before:?} -> {after:?}"));
                        remove_indexes(&bam);
                        let _ = std::fs::remove_file(&out);
                    }
                }
            }
            // idxstats without an index must fail, like samtools
            let theirs = st.run(&["idxstats", p(&bam)]);
            compare_stdout(
                &mut failures,
                &format!("unsorted {name}: idxstats -@ {t}"),
                &["idxstats", "-@", t, p(&bam)],
                &theirs,
            );
            // samtools' scan only checks that each contig's records are
            // contiguous (positions may go back): these two it must reject.
            let must_fail = ["tid_interleaved", "mapped_after_unplaced"].contains(&name);
            if theirs.ok() && must_fail {
                failures.push(format!(
                    "unsorted {name}: (test input) samtools idxstats accepts it"
                ));
            }
            // flagstat does not care about order
            let theirs = st.run(&["flagstat", p(&bam)]);
            compare_stdout(
                &mut failures,
                &format!("unsorted {name}: flagstat -@ {t}"),
                &["flagstat", "-@", t, p(&bam)],
                &theirs,
            );
        }
    }
    assert_no_failures("unsorted inputs", &failures);
}

/// A BAM cut short (inside a block, inside a record that straddles blocks,
/// inside a block header, inside the BAM header): flagstat, idxstats and
/// index fail with an error naming the file and print no counts.
#[test]
fn truncated_input_fails() {
    let Some(st) = oracle() else { return };
    let tmp = tempdir();
    let dir = tmp.path();
    let order: Vec<(usize, u64)> = (0..4000).map(|i| (0, 1 + i * 50)).collect();
    let sam = dir.join("in.sam");
    std::fs::write(&sam, reads_sam(&[("chr1", 1_000_000)], &order, 9)).unwrap();
    let whole = dir.join("whole.bam");
    st.run(&["view", "-b", "--no-PG", "-o", p(&whole), p(&sam)])
        .expect_ok();
    let reblocked = dir.join("reblocked.bam");
    reblock(&whole, &reblocked, 77);
    let mut failures = Vec::new();
    for src in [&whole, &reblocked] {
        let bytes = std::fs::read(src).unwrap();
        let blocks = crate::bgzf::blocks(&bytes);
        assert!(
            blocks.len() > 6,
            "test BAM has only {} blocks",
            blocks.len()
        );
        let (mid_start, mid_len) = blocks[blocks.len() / 2];
        let mut cuts = vec![
            ("half", bytes.len() / 2),
            ("third", bytes.len() / 3),
            ("in a block header", mid_start + 10),
            ("in the last data block", blocks[blocks.len() - 2].0 + 40),
            ("in the BAM header", 30),
        ];
        if src == &reblocked {
            // At a block boundary: blocks whole, EOF marker gone, the record
            // that straddles the boundary cut.
            cuts.push(("at a block boundary", mid_start + mid_len));
        }
        let stem = src.file_stem().unwrap().to_string_lossy().into_owned();
        for (what, cut) in cuts {
            let cutfile = dir.join(format!("{stem}_cut{cut}.bam"));
            std::fs::write(&cutfile, &bytes[..cut]).unwrap();
            let probe = st.run(&["flagstat", p(&cutfile)]);
            if probe.ok() {
                failures.push(format!(
                    "(test input) {stem} cut {what} at {cut}: samtools flagstat accepts it"
                ));
            }
            for &t in THREADS {
                for cmd in ["flagstat", "idxstats", "index"] {
                    let lab = format!(
                        "{stem} cut {what} (byte {cut} of {}): {cmd} -@ {t}",
                        bytes.len()
                    );
                    let run = sortase(&[cmd, "-@", t, p(&cutfile)]);
                    if run.ok() {
                        failures.push(format!(
                            "{lab}: succeeded; stdout: {}",
                            run.text().lines().take(2).collect::<Vec<_>>().join(" | ")
                        ));
                    } else {
                        if !run.stdout.is_empty() {
                            failures.push(format!(
                                "{lab}: failed but printed {} bytes",
                                run.stdout.len()
                            ));
                        }
                        if !run.stderr.contains(p(&cutfile)) {
                            failures.push(format!(
                                "{lab}: error does not name the file: {}",
                                run.stderr.trim()
                            ));
                        }
                    }
                    if with_ext(&cutfile, "bai").exists() {
                        failures.push(format!("{lab}: left an index behind"));
                        remove_indexes(&cutfile);
                    }
                }
            }
        }
    }
    assert_no_failures("truncated inputs", &failures);
}
