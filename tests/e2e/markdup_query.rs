//! `sortase markdup` on query-grouped input against Debian's samblaster 0.1.26: every record (flags,
//! tags from --addMateTags) and the side outputs (-d, -s, --unmappedFile) on generated edge cases
//! (pairs with unmapped ends, reverse strands, soft/hard clips at both ends and near reference
//! starts, insertions before the first M, secondary/supplementary records, two libraries, single-end
//! reads, input already carrying 0x400), as SAM and BAM, from a file and from stdin; plus the
//! refusal of input that is not grouped by read name.

use std::path::{Path, PathBuf};

use crate::common::{
    assert_no_failures, check_same, line, p, query_len, records, run, sortase, tempdir, unmapped,
    Rng,
};

fn samblaster() -> Option<PathBuf> {
    crate::common::tool("SORTASE_SAMBLASTER", "/usr/bin/samblaster")
}

const CIGARS: &[&str] = &[
    "50M",
    "5S45M",
    "45M5S",
    "3H47M",
    "10S30M10S",
    "20M5I25M",
    "2S3I45M",
    "20M100N30M",
    "10M2D40M",
    "4H10S36M2H",
    "47M3H",
    "30M20S",
];

struct Gen {
    rng: Rng,
    out: String,
}

impl Gen {
    fn rec(&mut self, name: &str, flag: u32, rname: &str, pos: u64, cigar: &str, rg: &str) {
        let len = if cigar == "*" { 40 } else { query_len(cigar) };
        let (seq, qual) = (self.rng.bases(len), self.rng.quals(len));
        let mapq = self.rng.below(61).to_string();
        let mut f = vec![
            name.to_string(),
            flag.to_string(),
            rname.to_string(),
            pos.to_string(),
            mapq,
            cigar.to_string(),
            "*".into(),
            "0".into(),
            "0".into(),
            seq,
            qual,
            format!("RG:Z:{rg}"),
        ];
        if self.rng.below(20) == 0 {
            f.push("MC:Z:7M".into());
        }
        let refs: Vec<&str> = f.iter().map(String::as_str).collect();
        self.out += &line(&refs);
    }
    /// A mapped place: reference, position (often near the start, from a small pool so that
    /// duplicates are common), CIGAR.
    fn place(&mut self) -> (&'static str, u64, &'static str) {
        let rname = ["c1", "c2", "c3"][self.rng.below(3) as usize];
        let pos = 1 + self.rng.below(12) * 3;
        (
            rname,
            pos,
            CIGARS[self.rng.below(CIGARS.len() as u64) as usize],
        )
    }
}

/// A query-grouped SAM with `n` templates that samblaster accepts.
pub(crate) fn grouped(n: usize, seed: u64) -> String {
    let mut g = Gen {
        rng: Rng::new(seed),
        out: String::new(),
    };
    g.out += "@HD\tVN:1.6\tSO:unsorted\tGO:query\n@SQ\tSN:c1\tLN:3000\n@SQ\tSN:c2\tLN:800\n";
    g.out += "@SQ\tSN:c3\tLN:5000\n@RG\tID:a\tLB:libA\n@RG\tID:b\tLB:libB\n";
    for t in 0..n {
        let name = format!("t{t}");
        let rg = if g.rng.below(2) == 0 { "a" } else { "b" };
        let rev = |g: &mut Gen| if g.rng.below(2) == 0 { 0 } else { 16 };
        match g.rng.below(10) {
            0..=4 | 9 => {
                let (r1, r2) = (rev(&mut g), rev(&mut g));
                let proper = if g.rng.below(3) == 0 { 0 } else { 2 };
                let dup = if g.rng.below(10) == 9 { 0x400 } else { 0 };
                let m1 = 1 | proper | r1 | if r2 != 0 { 32 } else { 0 } | dup;
                let m2 = 1 | proper | r2 | if r1 != 0 { 32 } else { 0 } | dup;
                let (mut a, b) = (g.place(), g.place());
                // A split read: primary and supplementary cover different halves.
                let split = g.rng.below(3) == 0;
                if split {
                    a.2 = ["25M25S", "20S30M", "26M24H"][g.rng.below(3) as usize];
                }
                let swap = g.rng.below(4) == 0;
                let recs = [(m1 | 64, a), (m2 | 128, b)];
                let order = if swap { [1, 0] } else { [0, 1] };
                for i in order {
                    let (flag, (rn, pos, cig)) = recs[i];
                    g.rec(&name, flag, rn, pos, cig, rg);
                }
                if split {
                    let (rn, mut pos, _) = g.place();
                    pos += g.rng.below(3) * 40;
                    let cig = ["25H25M", "30H20M", "24S26M", "22M28H"][g.rng.below(4) as usize];
                    let flip = g.rng.below(2) as u32 * 16;
                    g.rec(&name, (m1 | 64 | 0x800) ^ flip, rn, pos, cig, rg);
                }
                if g.rng.below(4) == 0 {
                    let (rn, pos, cig) = g.place();
                    g.rec(&name, m2 | 128 | 0x100, rn, pos, cig, rg);
                }
            }
            5 => {
                let (rn, pos, cig) = g.place();
                let r = rev(&mut g);
                let first_mapped = g.rng.below(2) == 0;
                let (fm, fu) = if first_mapped { (64, 128) } else { (128, 64) };
                g.rec(&name, 1 | 8 | r | fm, rn, pos, cig, rg);
                g.rec(
                    &name,
                    1 | 4 | if r != 0 { 32 } else { 0 } | fu,
                    rn,
                    pos,
                    "*",
                    rg,
                );
            }
            6 => {
                g.rec(&name, 1 | 4 | 8 | 64, "*", 0, "*", rg);
                g.rec(&name, 1 | 4 | 8 | 128, "*", 0, "*", rg);
            }
            _ => {
                let (rn, pos, cig) = g.place();
                let r = rev(&mut g);
                g.rec(&name, r, rn, pos, cig, rg);
                if g.rng.below(3) == 0 {
                    let (rn, pos, cig) = g.place();
                    let r = rev(&mut g);
                    g.rec(&name, 0x800 | r, rn, pos, cig, rg);
                }
            }
        }
    }
    g.out
}

/// Groups samblaster rejects unless --ignoreUnmated: a paired read alone whose mate is mapped, an
/// unmapped single-end read, a group of secondary records only.
fn unmated() -> String {
    let mut s = grouped(200, 7);
    s += &line(&[
        "u1",
        "65",
        "c1",
        "10",
        "9",
        "10M",
        "*",
        "0",
        "0",
        "ACGTACGTAC",
        "*",
    ]);
    s += &unmapped("u2", "ACGTACGTAC");
    s += &line(&["u3", "256", "c1", "10", "9", "10M", "*", "0", "0", "*", "*"]);
    s + &grouped(200, 8)
        .lines()
        .filter(|l| !l.starts_with('@'))
        .map(|l| format!("x{l}\n"))
        .collect::<String>()
}

fn read(path: &Path) -> String {
    String::from_utf8_lossy(&std::fs::read(path).unwrap_or_default()).into_owned()
}

/// Runs samblaster and sortase with `opts` (plus side outputs) on `sam`, comparing all outputs.
/// Returns samblaster's (duplicate records, discordant, split, unmapped/clipped lines).
fn compare(
    failures: &mut Vec<String>,
    sb: &Path,
    label: &str,
    sam: &str,
    opts: &[&str],
) -> [usize; 4] {
    let dir = tempdir();
    let input = dir.path().join("in.sam");
    std::fs::write(&input, sam).unwrap();
    let bam = dir.path().join("in.bam");
    sortase(&["view", "-b", "-o", p(&bam), p(&input)]).expect_ok();
    let f = |n: &str| dir.path().join(n);
    let n = |x: &str| p(&f(x)).to_string();
    let mut sb_args: Vec<String> = vec!["-q".into(), "-i".into(), p(&input).into()];
    for (o, x) in [
        ("-o", "sb.sam"),
        ("-d", "sb.d"),
        ("-s", "sb.s"),
        ("-u", "sb.u"),
    ] {
        sb_args.extend([o.to_string(), n(x)]);
    }
    sb_args.extend(opts.iter().map(|s| s.to_string()));
    let sb_args: Vec<&str> = sb_args.iter().map(String::as_str).collect();
    let theirs = run(sb, &[], &sb_args);
    for (what, src) in [("sam", &input), ("bam", &bam)] {
        let mut args: Vec<String> = ["markdup", "-q", "-O", "sam"].map(String::from).to_vec();
        for (o, x) in [
            ("-o", "me.sam"),
            ("-d", "me.d"),
            ("-s", "me.s"),
            ("--unmappedFile", "me.u"),
        ] {
            args.extend([o.to_string(), n(x)]);
        }
        args.extend(opts.iter().map(|s| s.to_string()));
        args.push(p(src).to_string());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let ours = sortase(&args);
        let l = format!("{label} ({what} input)");
        if ours.ok() != theirs.ok() {
            failures.push(format!(
                "{l}: exit {} vs samblaster {}: {}",
                ours.status, theirs.status, ours.stderr
            ));
            continue;
        }
        if !ours.ok() {
            continue;
        }
        for (a, b) in [("me.sam", "sb.sam"), ("me.d", "sb.d"), ("me.s", "sb.s")] {
            check_same(
                failures,
                &format!("{l} {a}"),
                &records(&read(&f(a))),
                &records(&read(&f(b))),
            );
        }
        check_same(
            failures,
            &format!("{l} me.u"),
            &read(&f("me.u")),
            &read(&f("sb.u")),
        );
    }
    let flag = |l: &str| l.split('\t').nth(1).and_then(|x| x.parse::<u32>().ok());
    let dups = records(&read(&f("sb.sam")))
        .lines()
        .filter(|l| flag(l).is_some_and(|x| x & 0x400 != 0))
        .count();
    let lines = |x: &str| records(&read(&f(x))).lines().count();
    [dups, lines("sb.d"), lines("sb.s"), lines("sb.u")]
}

#[test]
fn markdup_query_matches_samblaster() {
    let Some(sb) = samblaster() else {
        return crate::common::skip("samblaster not installed (/usr/bin/samblaster)");
    };
    let mut failures = Vec::new();
    let sam = grouped(3000, 1);
    for opts in [
        &[][..],
        &["--addMateTags"],
        &["-r"],
        &["-e", "--addMateTags"],
        &["-M", "--maxSplitCount", "3"],
        &[
            "--minNonOverlap",
            "5",
            "--minIndelSize",
            "10",
            "--maxUnmappedBases",
            "5",
        ],
        &["--minClipSize", "4"],
        &["-a"],
        &["--maxReadLength", "30"],
    ] {
        let seen = compare(&mut failures, &sb, &format!("opts {opts:?}"), &sam, opts);
        if opts.is_empty() {
            assert!(
                seen.iter().all(|&n| n > 20),
                "too few cases exercised: {seen:?}"
            );
        }
    }
    let un = unmated();
    compare(
        &mut failures,
        &sb,
        "unmated, --ignoreUnmated",
        &un,
        &["--ignoreUnmated"],
    );
    compare(&mut failures, &sb, "unmated (both fail)", &un, &[]);
    assert_no_failures("markdup query vs samblaster", &failures);
}

/// Large enough (about 15 MB of SAM) for several input batches, so groups straddle batches.
#[test]
fn markdup_query_stdin_stream() {
    let Some(sb) = samblaster() else {
        return crate::common::skip("samblaster not installed (/usr/bin/samblaster)");
    };
    let dir = tempdir();
    let input = dir.path().join("in.sam");
    std::fs::write(&input, grouped(40_000, 3)).unwrap();
    let theirs = run(&sb, &[], &["-q", "-i", p(&input)]).expect_ok();
    let sh = format!(
        "{} markdup -q -O sam - < {}",
        crate::common::sortase_bin().display(),
        p(&input)
    );
    let ours = run(Path::new("/bin/sh"), &[], &["-c", &sh]).expect_ok();
    let mut failures = Vec::new();
    check_same(
        &mut failures,
        "stdin",
        &records(&ours.text()),
        &records(&theirs.text()),
    );
    assert_no_failures("markdup query from stdin", &failures);
}

#[test]
fn markdup_query_refuses_ungrouped_input() {
    let dir = tempdir();
    let input = dir.path().join("in.sam");
    let mut sam = "@HD\tVN:1.6\tSO:coordinate\n@SQ\tSN:c1\tLN:3000\n".to_string();
    sam += &line(&[
        "r1",
        "99",
        "c1",
        "10",
        "9",
        "10M",
        "=",
        "50",
        "50",
        "ACGTACGTAC",
        "*",
    ]);
    sam += &line(&[
        "r2",
        "99",
        "c1",
        "20",
        "9",
        "10M",
        "=",
        "60",
        "50",
        "ACGTACGTAC",
        "*",
    ]);
    sam += &line(&[
        "r1",
        "147",
        "c1",
        "50",
        "9",
        "10M",
        "=",
        "10",
        "-50",
        "ACGTACGTAC",
        "*",
    ]);
    sam += &line(&[
        "r2",
        "147",
        "c1",
        "60",
        "9",
        "10M",
        "=",
        "20",
        "-50",
        "ACGTACGTAC",
        "*",
    ]);
    std::fs::write(&input, sam).unwrap();
    let out = dir.path().join("out.bam");
    let r = sortase(&["markdup", "--mode", "query", "-o", p(&out), p(&input)]);
    assert!(!r.ok(), "ungrouped input was accepted");
    let msg = r.stderr.trim();
    assert_eq!(msg.lines().count(), 1, "not one line: {msg}");
    assert!(msg.contains(p(&input)) && msg.contains("r1"), "{msg}");
    assert!(!out.exists(), "output left behind");
    assert_eq!(
        crate::common::dir_listing(dir.path()),
        vec!["in.sam".to_string()]
    );
}
