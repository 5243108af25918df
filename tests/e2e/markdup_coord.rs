//! `sortase markdup` on coordinate-sorted input against Debian's Picard MarkDuplicates (2.27.5):
//! the flags of every record and the metrics file (its table and histogram) on generated edge cases
//! (several read groups and libraries, records without RG, mates on other references, unmapped
//! mates, pairs with both ends unmapped, reverse strands, soft/hard clips at both ends,
//! secondary/supplementary records, QC-failed pairs, fragments at pair positions, equal scores,
//! names with and without flow-cell coordinates so optical duplicates occur, input already carrying
//! 0x400), with Picard's options; plus -r, SAM and standard input, --write-index against
//! `samtools index`, and the refusal of input that is not coordinate-sorted.

use std::path::{Path, PathBuf};

use crate::common::{
    assert_no_failures, check_same, line, p, query_len, records, run, sortase, tempdir, Rng,
};
use crate::oracle::{oracle, Oracle};

fn picard() -> Option<PathBuf> {
    crate::common::tool("SORTASE_PICARD", "/usr/bin/PicardCommandLine")
}

const CIGARS: &[&str] = &[
    "50M",
    "5S45M",
    "45M5S",
    "3H47M",
    "10S30M10S",
    "20M5I25M",
    "20M100N30M",
    "10M2D40M",
    "4H10S36M2H",
    "30M20S",
];

/// One alignment: reference, 1-based position, CIGAR, reverse.
#[derive(Clone, Copy)]
struct Place {
    rname: &'static str,
    pos: u64,
    cigar: &'static str,
    reverse: bool,
}

struct Gen {
    rng: Rng,
    out: String,
}

impl Gen {
    fn place(&mut self) -> Place {
        Place {
            rname: ["c1", "c2", "c3"][self.rng.below(3) as usize],
            pos: 100 + self.rng.below(8) * 7,
            cigar: CIGARS[self.rng.below(CIGARS.len() as u64) as usize],
            reverse: self.rng.below(2) == 1,
        }
    }

    /// Qualities: random, or (for ties) all the same.
    fn quals(&mut self, len: usize, tie: bool) -> String {
        if tie {
            "I".repeat(len)
        } else {
            self.rng.quals(len)
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn rec(
        &mut self,
        name: &str,
        flag: u32,
        at: Option<Place>,
        mate: Option<Place>,
        rg: &str,
        tie: bool,
    ) {
        let (rname, pos, cigar) = match at {
            Some(a) => (a.rname, a.pos.to_string(), a.cigar),
            None => match mate {
                Some(m) => (m.rname, m.pos.to_string(), "*"),
                None => ("*", "0".to_string(), "*"),
            },
        };
        let (rnext, pnext) = match (mate, at) {
            (Some(m), _) if m.rname == rname => ("=", m.pos.to_string()),
            (Some(m), _) => (m.rname, m.pos.to_string()),
            (None, Some(a)) if flag & 1 != 0 => ("=", a.pos.to_string()),
            (None, _) => ("*", "0".to_string()),
        };
        let len = if cigar == "*" { 50 } else { query_len(cigar) };
        let (seq, qual) = (self.rng.bases(len), self.quals(len, tie));
        let mapq = if at.is_some() { self.rng.below(61) } else { 0 }.to_string();
        let mut f = vec![
            name,
            &flag.to_string(),
            rname,
            &pos,
            &mapq,
            cigar,
            rnext,
            &pnext,
            "0",
            &seq,
            &qual,
        ]
        .into_iter()
        .map(str::to_string)
        .collect::<Vec<_>>();
        if !rg.is_empty() {
            f.push(format!("RG:Z:{rg}"));
        }
        let refs: Vec<&str> = f.iter().map(String::as_str).collect();
        self.out += &line(&refs);
    }
}

/// An unsorted SAM of `n` templates covering the cases in the module comment.
pub(crate) fn templates(n: usize, seed: u64) -> String {
    let mut g = Gen {
        rng: Rng::new(seed),
        out: String::new(),
    };
    g.out += "@HD\tVN:1.6\tSO:unsorted\n@SQ\tSN:c1\tLN:3000\n@SQ\tSN:c2\tLN:800\n";
    g.out += "@SQ\tSN:c3\tLN:5000\n@RG\tID:a\tLB:libA\n@RG\tID:b\tLB:libB\n@RG\tID:c\tLB:libA\n";
    for t in 0..n {
        // Flow-cell names (tile:x:y close enough for optical duplicates) or names without them.
        let name = if g.rng.below(5) == 0 {
            format!("frag{t}")
        } else {
            let tile = 1101 + g.rng.below(2);
            let (x, y) = (g.rng.below(400), g.rng.below(400));
            format!("A00:{t}:FC:1:{tile}:{x}:{y}")
        };
        let rg = ["a", "b", "c", ""][g.rng.below(4) as usize];
        let tie = g.rng.below(4) == 0;
        let dup = if g.rng.below(10) == 0 { 0x400 } else { 0 };
        let qc = if g.rng.below(25) == 0 { 0x200 } else { 0 };
        let strand = |p: &Place, bit: u32| if p.reverse { bit } else { 0 };
        match g.rng.below(10) {
            0..=5 => {
                let a = g.place();
                let mut b = g.place();
                if g.rng.below(4) != 0 {
                    b.rname = a.rname;
                }
                let base = 1 | dup | qc | if g.rng.below(3) == 0 { 0 } else { 2 };
                let f1 = base | 64 | strand(&a, 16) | strand(&b, 32);
                let f2 = base | 128 | strand(&b, 16) | strand(&a, 32);
                g.rec(&name, f1, Some(a), Some(b), rg, tie);
                g.rec(&name, f2, Some(b), Some(a), rg, tie);
                if g.rng.below(5) == 0 {
                    let mut s = g.place();
                    s.cigar = ["25H25M", "20M30H"][g.rng.below(2) as usize];
                    g.rec(
                        &name,
                        (f1 | 0x800) & !16 | strand(&s, 16),
                        Some(s),
                        Some(b),
                        rg,
                        tie,
                    );
                }
                if g.rng.below(6) == 0 {
                    let s = g.place();
                    g.rec(&name, f2 | 0x100, Some(s), Some(a), rg, tie);
                }
            }
            6 => {
                // The mate is unmapped (placed at the mapped end, as aligners do).
                let a = g.place();
                g.rec(
                    &name,
                    1 | 8 | 64 | dup | strand(&a, 16),
                    Some(a),
                    None,
                    rg,
                    tie,
                );
                g.rec(&name, 1 | 4 | 128 | strand(&a, 32), None, Some(a), rg, tie);
            }
            7 => {
                g.rec(&name, 1 | 4 | 8 | 64, None, None, rg, tie);
                g.rec(&name, 1 | 4 | 8 | 128, None, None, rg, tie);
            }
            _ => {
                let a = g.place();
                g.rec(&name, dup | qc | strand(&a, 16), Some(a), None, rg, tie);
                if g.rng.below(4) == 0 {
                    let s = g.place();
                    g.rec(&name, 0x800 | strand(&s, 16), Some(s), None, rg, tie);
                }
            }
        }
    }
    g.out
}

/// QNAME, FLAG, RNAME and POS of every record.
fn flags(sam: &str) -> String {
    records(sam)
        .lines()
        .map(|l| l.split('\t').take(4).collect::<Vec<_>>().join("\t") + "\n")
        .collect()
}

/// The metrics file without its '#' header lines (they hold dates and command lines).
fn metrics(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// The two tools and a scratch directory.
struct Tools<'a> {
    st: &'a Oracle,
    picard: &'a Path,
    dir: &'a Path,
}

/// Picard with `picard_opts` and sortase with `opts` on `input`: flags and metrics must match.
/// Returns the number of records Picard flagged.
fn compare(
    failures: &mut Vec<String>,
    t: &Tools,
    label: &str,
    input: &Path,
    opts: &[&str],
    picard_opts: &[&str],
) -> usize {
    let (st, dir) = (t.st, t.dir);
    let (pb, pm) = (dir.join("picard.bam"), dir.join("picard.metrics"));
    let (sb, sm) = (dir.join("sortase.bam"), dir.join("sortase.metrics"));
    let i = format!("I={}", p(input));
    let o = format!("O={}", p(&pb));
    let m = format!("M={}", p(&pm));
    let mut args = vec!["MarkDuplicates", &i, &o, &m, "VALIDATION_STRINGENCY=SILENT"];
    args.extend_from_slice(picard_opts);
    run(t.picard, &[], &args).expect_ok();
    let mut args = vec!["markdup", "-@3", "--metrics", p(&sm), "-o", p(&sb)];
    args.extend_from_slice(opts);
    args.push(p(input));
    sortase(&args).expect_ok();
    let view = |b: &Path| st.run(&["view", p(b)]).expect_ok().text();
    let (ours, theirs) = (flags(&view(&sb)), flags(&view(&pb)));
    check_same(failures, &format!("{label}: flags"), &ours, &theirs);
    check_same(
        failures,
        &format!("{label}: metrics"),
        &metrics(&sm),
        &metrics(&pm),
    );
    theirs
        .lines()
        .filter(|l| {
            l.split('\t')
                .nth(1)
                .and_then(|f| f.parse::<u32>().ok())
                .is_some_and(|f| f & 0x400 != 0)
        })
        .count()
}

/// The generated templates sorted by the oracle into `dir/in.bam`.
pub fn sorted_input(st: &Oracle, dir: &Path, n: usize, seed: u64) -> PathBuf {
    let sam = dir.join("in.sam");
    std::fs::write(&sam, templates(n, seed)).unwrap();
    let bam = dir.join("in.bam");
    st.run(&["sort", "-o", p(&bam), p(&sam)]).expect_ok();
    bam
}

#[test]
fn markdup_coord_matches_picard() {
    let Some(picard) = picard() else {
        return crate::common::skip("Picard not installed (/usr/bin/PicardCommandLine)");
    };
    let Some(st) = oracle() else { return };
    let dir = tempdir();
    let d = dir.path();
    let input = sorted_input(st, d, 3000, 11);
    let mut failures = Vec::new();
    let tools = Tools {
        st,
        picard: &picard,
        dir: d,
    };
    let dups = compare(&mut failures, &tools, "defaults", &input, &[], &[]);
    assert!(dups > 200, "too few duplicates exercised: {dups}");
    let regex = "[A-Z0-9]+:[0-9]+:[A-Z]+:[0-9]+:([0-9]+):([0-9]+):([0-9]+)";
    for (label, opts, popts) in [
        (
            "optical distance 30",
            vec!["--optical-distance", "30"],
            vec!["OPTICAL_DUPLICATE_PIXEL_DISTANCE=30".to_string()],
        ),
        (
            "read ends spilled to runs (--max-memory 20K)",
            vec!["--max-memory", "20K"],
            vec![],
        ),
        (
            "no optical detection",
            vec!["--read-name-regex", "null"],
            vec!["READ_NAME_REGEX=null".to_string()],
        ),
        (
            "explicit regex",
            vec!["--read-name-regex", regex],
            vec![format!("READ_NAME_REGEX={regex}")],
        ),
    ] {
        let popts: Vec<&str> = popts.iter().map(String::as_str).collect();
        compare(&mut failures, &tools, label, &input, &opts, &popts);
    }
    // A deep stack: 4000 pairs on three positions.
    let deep = sorted_input_deep(st, d);
    compare(&mut failures, &tools, "deep", &deep, &[], &[]);
    assert_no_failures("markdup coordinate vs Picard", &failures);
}

/// 4000 pairs whose ends fall on a handful of positions (most are duplicates, many optical).
fn sorted_input_deep(st: &Oracle, d: &Path) -> PathBuf {
    let mut g = Gen {
        rng: Rng::new(5),
        out: "@HD\tVN:1.6\tSO:unsorted\n@SQ\tSN:c1\tLN:3000\n".into(),
    };
    for t in 0..4000 {
        let name = format!(
            "A00:{t}:FC:1:1101:{}:{}",
            g.rng.below(2000),
            g.rng.below(2000)
        );
        let a = Place {
            rname: "c1",
            pos: 100 + g.rng.below(3),
            cigar: "50M",
            reverse: false,
        };
        let b = Place {
            rname: "c1",
            pos: 400,
            cigar: "50M",
            reverse: true,
        };
        g.rec(&name, 1 | 2 | 64 | 32, Some(a), Some(b), "", false);
        g.rec(&name, 1 | 2 | 128 | 16, Some(b), Some(a), "", false);
    }
    let sam = d.join("deep.sam");
    std::fs::write(&sam, g.out).unwrap();
    let bam = d.join("deep.bam");
    st.run(&["sort", "-o", p(&bam), p(&sam)]).expect_ok();
    bam
}

#[test]
fn markdup_coord_remove_sam_stdin_and_index() {
    let Some(st) = oracle() else { return };
    let dir = tempdir();
    let d = dir.path();
    let input = sorted_input(st, d, 2000, 12);
    let marked = d.join("marked.sam");
    sortase(&[
        "markdup",
        "--no-PG",
        "-O",
        "sam",
        "-o",
        p(&marked),
        p(&input),
    ])
    .expect_ok();
    let marked = std::fs::read_to_string(&marked).unwrap();
    let mut failures = Vec::new();
    // -r drops exactly the flagged records.
    let removed = sortase(&["markdup", "--no-PG", "-r", "-O", "sam", p(&input)]).expect_ok();
    let kept: String = records(&marked)
        .lines()
        .filter(|l| l.split('\t').nth(1).unwrap().parse::<u32>().unwrap() & 0x400 == 0)
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(kept.len() < records(&marked).len(), "nothing was marked");
    check_same(&mut failures, "-r", &records(&removed.text()), &kept);
    // SAM input and standard input give the same records.
    let sam = d.join("in.sorted.sam");
    st.run(&["view", "-h", "-o", p(&sam), p(&input)])
        .expect_ok();
    let from_sam = sortase(&["markdup", "--no-PG", "-O", "sam", p(&sam)]).expect_ok();
    check_same(
        &mut failures,
        "SAM input",
        &records(&from_sam.text()),
        &records(&marked),
    );
    let sh = format!(
        "{} markdup --no-PG -O sam - < {}",
        crate::common::sortase_bin().display(),
        p(&input)
    );
    let piped = run(Path::new("/bin/sh"), &[], &["-c", &sh]).expect_ok();
    check_same(
        &mut failures,
        "stdin",
        &records(&piped.text()),
        &records(&marked),
    );
    // --write-index: the same bytes as samtools index of the output.
    for (name, ext, flag) in [("out.bam", "csi", "-c"), ("out2.bam", "bai", "-b")] {
        let bam = d.join(name);
        let index = format!("{}.{ext}", p(&bam));
        let target = match ext {
            "bai" => format!("{}##idx##{index}", p(&bam)),
            _ => p(&bam).to_string(),
        };
        sortase(&["markdup", "--write-index", "-o", &target, p(&input)]).expect_ok();
        let reference = d.join(format!("ref.{ext}"));
        st.run(&["index", flag, "-o", p(&reference), p(&bam)])
            .expect_ok();
        assert!(
            std::fs::read(&index).unwrap() == std::fs::read(&reference).unwrap(),
            "{name}: {ext} index differs from samtools index"
        );
    }
    assert_no_failures("markdup coordinate: -r, SAM, stdin", &failures);
}

#[test]
fn markdup_coord_refuses_unsorted_input() {
    let dir = tempdir();
    let d = dir.path();
    let input = d.join("in.sam");
    let mut sam = "@HD\tVN:1.6\tSO:coordinate\n@SQ\tSN:c1\tLN:3000\n".to_string();
    for (name, flag, pos, mpos) in [("r1", "99", "50", "80"), ("r2", "99", "10", "90")] {
        sam += &line(&[
            name,
            flag,
            "c1",
            pos,
            "9",
            "10M",
            "=",
            mpos,
            "0",
            "ACGTACGTAC",
            "*",
        ]);
    }
    std::fs::write(&input, sam).unwrap();
    let out = d.join("out.bam");
    let r = sortase(&["markdup", "-o", p(&out), p(&input)]);
    assert!(!r.ok(), "unsorted input was accepted");
    let msg = r.stderr.trim();
    assert_eq!(msg.lines().count(), 1, "not one line: {msg}");
    assert!(
        msg.contains(p(&input)) && msg.contains("not coordinate-sorted"),
        "{msg}"
    );
    assert!(!out.exists(), "output left behind");
    assert_eq!(crate::common::dir_listing(d), vec!["in.sam".to_string()]);
}
