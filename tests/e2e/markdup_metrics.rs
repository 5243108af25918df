//! `sortase markdup --metrics` on query-grouped input (samblaster's duplicates, Picard's
//! DuplicationMetrics per library): the counts against the output's own records and header (edge
//! cases: two libraries, records without RG or with an RG the header lacks, secondary and
//! supplementary records, unmapped mates, input already carrying 0x400, -r); the whole table
//! against Debian's Picard MarkDuplicates (READ_NAME_REGEX=null: no optical duplicates) on a
//! coordinate-sorted copy of pairs whose duplicate sets both algorithms see alike; and, when
//! dupblaster is installed, its per-library counts and flags (`--single-end-strategy
//! samblaster-legacy`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::common::{assert_no_failures, check_same, line, p, records, run, sortase, tempdir, Rng};
use crate::oracle::oracle;

/// The metrics table: LIBRARY -> the other columns, by name.
fn table(path: &Path) -> BTreeMap<String, BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines().skip_while(|l| !l.starts_with("LIBRARY\t"));
    let cols: Vec<&str> = lines
        .next()
        .expect("no metrics table")
        .split('\t')
        .collect();
    lines
        .take_while(|l| !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let row = cols[1..]
                .iter()
                .zip(&f[1..])
                .map(|(c, v)| (c.to_string(), v.to_string()))
                .collect();
            (f[0].to_string(), row)
        })
        .collect()
}

/// The metrics file's table lines (column names and rows), as written.
fn table_lines(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .skip_while(|l| !l.starts_with("LIBRARY\t"))
        .take_while(|l| !l.is_empty())
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Picard's counts per library of `sam` (with its final flags), as the test reckons them:
/// [unpaired, pairs, secondary/supplementary, unmapped, unpaired dups, pair dups].
fn expected(sam: &str) -> BTreeMap<String, [u64; 6]> {
    let mut lb = BTreeMap::new();
    for l in sam.lines().filter(|l| l.starts_with("@RG\t")) {
        let field = |k: &str| l.split('\t').find_map(|f| f.strip_prefix(k));
        lb.insert(field("ID:").unwrap(), field("LB:").unwrap());
    }
    let mut out: BTreeMap<String, [u64; 6]> = BTreeMap::new();
    for l in records(sam).lines() {
        let f: Vec<&str> = l.split('\t').collect();
        let flag: u32 = f[1].parse().unwrap();
        let rg = f[11..].iter().find_map(|t| t.strip_prefix("RG:Z:"));
        let lib = rg
            .and_then(|r| lb.get(r))
            .copied()
            .unwrap_or("Unknown Library");
        let c = out.entry(lib.to_string()).or_default();
        let paired = flag & 1 != 0 && flag & 8 == 0;
        let dup = flag & 0x400 != 0;
        if flag & 4 != 0 {
            c[3] += 1;
        } else if flag & 0x900 != 0 {
            c[2] += 1;
        } else if paired {
            c[1] += 1;
            c[5] += u64::from(dup);
        } else {
            c[0] += 1;
            c[4] += u64::from(dup);
        }
    }
    for c in out.values_mut() {
        c[1] /= 2;
        c[5] /= 2;
    }
    out
}

/// `grouped`'s templates with some records' RG tags removed or pointing to a read group the
/// header lacks (both Picard's "Unknown Library").
fn with_unknown_libraries(sam: &str) -> String {
    let mut out = String::new();
    let mut group = 0;
    let mut prev = "";
    for l in sam.lines() {
        if !l.starts_with('@') {
            let name = l.split('\t').next().unwrap();
            if name != prev {
                group += 1;
                prev = name;
            }
            match group % 7 {
                0 => {
                    out += &l.replace("\tRG:Z:a", "").replace("\tRG:Z:b", "");
                    out.push('\n');
                    continue;
                }
                3 => {
                    out += &l.replace("\tRG:Z:a", "\tRG:Z:zz");
                    out.push('\n');
                    continue;
                }
                _ => {}
            }
        }
        out += l;
        out.push('\n');
    }
    out
}

#[test]
fn markdup_query_metrics_count_per_library() {
    let dir = tempdir();
    let d = dir.path();
    let input = d.join("in.sam");
    std::fs::write(
        &input,
        with_unknown_libraries(&crate::markdup_query::grouped(3000, 21)),
    )
    .unwrap();
    let mut failures = Vec::new();
    for opts in [&[][..], &["-r"], &["--addMateTags", "-@", "1"]] {
        let (out, m) = (d.join("out.sam"), d.join("out.metrics"));
        let mut args = vec!["markdup", "-q", "--metrics", p(&m), "-o", p(&out)];
        args.extend_from_slice(opts);
        args.push(p(&input));
        sortase(&args).expect_ok();
        // With -r the duplicates are not in the output: count them from a run that keeps them.
        let kept = if opts.contains(&"-r") {
            let k = d.join("kept.sam");
            sortase(&["markdup", "-q", "-o", p(&k), p(&input)]).expect_ok();
            k
        } else {
            out.clone()
        };
        let want = expected(&std::fs::read_to_string(&kept).unwrap());
        let got = table(&m);
        let names: Vec<&String> = got.keys().collect();
        assert_eq!(
            names,
            ["Unknown Library", "libA", "libB"]
                .iter()
                .collect::<Vec<_>>(),
            "{opts:?}"
        );
        for (lib, c) in &want {
            let row = &got[lib];
            let cols = [
                "UNPAIRED_READS_EXAMINED",
                "READ_PAIRS_EXAMINED",
                "SECONDARY_OR_SUPPLEMENTARY_RDS",
                "UNMAPPED_READS",
                "UNPAIRED_READ_DUPLICATES",
                "READ_PAIR_DUPLICATES",
            ];
            let ours: Vec<String> = cols.iter().map(|k| row[*k].clone()).collect();
            let theirs: Vec<String> = c.iter().map(u64::to_string).collect();
            check_same(
                &mut failures,
                &format!("{opts:?} {lib}"),
                &ours.join(" "),
                &theirs.join(" "),
            );
            assert_eq!(row["READ_PAIR_OPTICAL_DUPLICATES"], "0");
            let pct: f64 = row["PERCENT_DUPLICATION"].parse().unwrap();
            let want_pct = (c[4] + 2 * c[5]) as f64 / (c[0] + 2 * c[1]) as f64;
            assert!((pct - want_pct).abs() < 1e-6, "{lib}: {pct} vs {want_pct}");
            assert!(c[4] > 3 && c[5] > 20, "{lib}: too few duplicates: {c:?}");
        }
    }
    assert_no_failures("markdup --metrics on query-grouped input", &failures);
}

/// A fragment of [`pairs`]: reference, both ends' positions, whether each end is reverse, their
/// CIGARs, the read group.
type Fragment = (
    &'static str,
    u64,
    u64,
    bool,
    bool,
    &'static str,
    &'static str,
    &'static str,
);

/// Query-grouped pairs (both ends mapped; mates of unmapped ends and secondary records too) drawn
/// from a pool of fragments, each in one library, so that samblaster's duplicate sets (across
/// libraries) are Picard's (per library); orphans at positions of their own (samblaster and Picard
/// key them differently).
fn pairs(n: usize, seed: u64) -> String {
    const CIGARS: &[&str] = &["50M", "5S45M", "45M5S", "10S40M", "20M5I25M"];
    let mut rng = Rng::new(seed);
    let mut out = "@HD\tVN:1.6\tSO:unsorted\tGO:query\n@SQ\tSN:c1\tLN:1000000\n".to_string();
    out += "@SQ\tSN:c2\tLN:1000000\n@RG\tID:a\tSM:s\tLB:libA\n@RG\tID:b\tSM:s\tLB:libB\n";
    // A fragment: reference, two positions 1000 apart or more, strands, CIGARs, read group.
    let pool: Vec<Fragment> = (0..n as u64 / 3)
        .map(|i| {
            let c = |r: &mut Rng| CIGARS[r.below(CIGARS.len() as u64) as usize];
            let (c1, c2) = (c(&mut rng), c(&mut rng));
            (
                ["c1", "c2"][rng.below(2) as usize],
                100 + i * 97,
                1100 + i * 97 + rng.below(300),
                rng.below(2) == 0,
                rng.below(2) == 0,
                c1,
                c2,
                ["a", "b"][rng.below(2) as usize],
            )
        })
        .collect();
    let mut rec = |rng: &mut Rng, f: &[&str]| {
        let len = crate::common::query_len(f[5]);
        let (seq, qual) = (rng.bases(len), rng.quals(len));
        let mut all: Vec<&str> = f[..9].to_vec();
        all.extend([seq.as_str(), qual.as_str(), f[9]]);
        out += &line(&all);
    };
    for t in 0..n {
        let name = format!("A00:1:FC:1:{}:{}:{}", 1101 + t % 3, rng.below(30000), t);
        let name = name.as_str();
        match rng.below(12) {
            0 => {
                // A mapped end and its unmapped mate, at a position of its own.
                let pos = (200_000 + t as u64 * 13).to_string();
                let pos = &pos[..];
                let rg = if t % 2 == 0 { "RG:Z:a" } else { "RG:Z:b" };
                rec(
                    &mut rng,
                    &[name, "73", "c1", pos, "60", "50M", "=", pos, "0", rg],
                );
                rec(
                    &mut rng,
                    &[name, "133", "c1", pos, "0", "*", "=", pos, "0", rg],
                );
            }
            1 => {
                let rg = if t % 2 == 0 { "RG:Z:a" } else { "RG:Z:b" };
                rec(
                    &mut rng,
                    &[name, "77", "*", "0", "0", "*", "*", "0", "0", rg],
                );
                rec(
                    &mut rng,
                    &[name, "141", "*", "0", "0", "*", "*", "0", "0", rg],
                );
            }
            _ => {
                let (rn, p1, p2, r1, r2, c1, c2, rg) = pool[rng.below(pool.len() as u64) as usize];
                let rg = format!("RG:Z:{rg}");
                let (s1, s2) = (p1.to_string(), p2.to_string());
                let f1 = 1 | 2 | 64 | if r1 { 16 } else { 0 } | if r2 { 32 } else { 0 };
                let f2 = 1 | 2 | 128 | if r2 { 16 } else { 0 } | if r1 { 32 } else { 0 };
                let (f1, f2) = (f1.to_string(), f2.to_string());
                let first = [name, &f1, rn, &s1, "60", c1, "=", &s2, "0", &rg];
                let second = [name, &f2, rn, &s2, "60", c2, "=", &s1, "0", &rg];
                if rng.below(2) == 0 {
                    rec(&mut rng, &first);
                    rec(&mut rng, &second);
                } else {
                    rec(&mut rng, &second);
                    rec(&mut rng, &first);
                }
                if rng.below(8) == 0 {
                    let f = (f1.parse::<u32>().unwrap() | 0x100).to_string();
                    let s = (p1 + 5000).to_string();
                    rec(
                        &mut rng,
                        &[name, &f, rn, &s, "0", "50M", "=", &s2, "0", &rg],
                    );
                }
            }
        }
    }
    out
}

#[test]
fn markdup_query_metrics_match_picard() {
    let Some(picard) = crate::common::tool("SORTASE_PICARD", "/usr/bin/PicardCommandLine") else {
        return crate::common::skip("Picard not installed (/usr/bin/PicardCommandLine)");
    };
    let Some(st) = oracle() else { return };
    let dir = tempdir();
    let d = dir.path();
    let input = d.join("in.sam");
    std::fs::write(&input, pairs(4000, 5)).unwrap();
    let (sm, sb) = (d.join("sortase.metrics"), d.join("sortase.bam"));
    sortase(&[
        "markdup",
        "-q",
        "--metrics",
        p(&sm),
        "-o",
        p(&sb),
        p(&input),
    ])
    .expect_ok();
    let sorted = d.join("sorted.bam");
    st.run(&["sort", "-o", p(&sorted), p(&input)]).expect_ok();
    let pm = d.join("picard.metrics");
    let (i, o, m) = (
        format!("I={}", p(&sorted)),
        format!("O={}", p(&d.join("picard.bam"))),
        format!("M={}", p(&pm)),
    );
    let args = [
        "MarkDuplicates",
        &i,
        &o,
        &m,
        "READ_NAME_REGEX=null",
        "VALIDATION_STRINGENCY=SILENT",
    ];
    run(&picard, &[], &args).expect_ok();
    let mut failures = Vec::new();
    check_same(
        &mut failures,
        "metrics table",
        &table_lines(&sm),
        &table_lines(&pm),
    );
    assert_no_failures("markdup --metrics (query) vs Picard", &failures);
    let t = table(&sm);
    for lib in ["libA", "libB"] {
        let dups: u64 = t[lib]["READ_PAIR_DUPLICATES"].parse().unwrap();
        assert!(dups > 300, "{lib}: too few duplicates: {dups}");
        assert!(!t[lib]["ESTIMATED_LIBRARY_SIZE"].is_empty());
    }
}

fn dupblaster() -> Option<PathBuf> {
    let default = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/target/bench-peers/bin/dupblaster"
    );
    crate::common::tool("SORTASE_DUPBLASTER", default)
}

/// dupblaster 0.3 (library-aware, `--single-end-strategy samblaster-legacy`): equal flags, and
/// per library its mapped_pairs, duplicate_pairs, mapped_orphans and duplicate_orphans are
/// READ_PAIRS_EXAMINED, READ_PAIR_DUPLICATES, UNPAIRED_READS_EXAMINED and
/// UNPAIRED_READ_DUPLICATES; 2 x unmapped_pairs + mapped_orphans is UNMAPPED_READS (dupblaster
/// counts templates, Picard records).
#[test]
fn markdup_query_metrics_match_dupblaster() {
    let Some(db) = dupblaster() else {
        return crate::common::skip_peer(
            "dupblaster not installed (bash bench/setup-peer.sh --tools)",
        );
    };
    let Some(st) = oracle() else { return };
    let dir = tempdir();
    let d = dir.path();
    let input = d.join("in.sam");
    // Fragments of one library each: dupblaster's library-aware sets are samblaster's.
    std::fs::write(&input, pairs(4000, 9)).unwrap();
    let clear = d.join("in.bam");
    st.run(&["view", "-b", "-o", p(&clear), p(&input)])
        .expect_ok();
    let (sm, sb) = (d.join("sortase.metrics"), d.join("sortase.bam"));
    sortase(&[
        "markdup",
        "-q",
        "--metrics",
        p(&sm),
        "-o",
        p(&sb),
        p(&clear),
    ])
    .expect_ok();
    let (dbb, prefix) = (d.join("db.bam"), d.join("db"));
    let args = [
        "-q",
        "-i",
        p(&clear),
        "-o",
        p(&dbb),
        "--metrics-prefix",
        p(&prefix),
        "--single-end-strategy",
        "samblaster-legacy",
    ];
    run(&db, &[], &args).expect_ok();
    let view = |b: &Path| records(&st.run(&["view", p(b)]).expect_ok().text());
    let flags = |s: String| -> String {
        s.lines()
            .map(|l| l.split('\t').take(4).collect::<Vec<_>>().join("\t") + "\n")
            .collect()
    };
    let mut failures = Vec::new();
    check_same(
        &mut failures,
        "flags",
        &flags(view(&sb)),
        &flags(view(&dbb)),
    );
    let tsv = std::fs::read_to_string(d.join("db.duplicate-metrics.tsv")).unwrap();
    let mut lines = tsv.lines();
    let cols: Vec<&str> = lines.next().unwrap().split('\t').collect();
    let ours = table(&sm);
    let mut seen = 0;
    for l in lines {
        let f: BTreeMap<&str, &str> = cols.iter().copied().zip(l.split('\t')).collect();
        let row = &ours[f["library"]];
        let n = |k: &str| f[k].parse::<u64>().unwrap();
        let theirs = [
            n("mapped_pairs"),
            n("duplicate_pairs"),
            n("mapped_orphans"),
            n("duplicate_orphans"),
            2 * n("unmapped_pairs") + n("mapped_orphans"),
        ];
        let cols = [
            "READ_PAIRS_EXAMINED",
            "READ_PAIR_DUPLICATES",
            "UNPAIRED_READS_EXAMINED",
            "UNPAIRED_READ_DUPLICATES",
            "UNMAPPED_READS",
        ];
        let ours: Vec<u64> = cols.iter().map(|k| row[*k].parse().unwrap()).collect();
        check_same(
            &mut failures,
            &format!("{} counts", f["library"]),
            &format!("{ours:?}"),
            &format!("{theirs:?}"),
        );
        seen += 1;
    }
    assert_eq!(seen, 2, "dupblaster's libraries");
    assert_no_failures("markdup --metrics (query) vs dupblaster", &failures);
}
