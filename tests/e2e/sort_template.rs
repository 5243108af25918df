//! `sortase sort --template-coordinate` against `samtools sort --template-coordinate` (1.24): the
//! htslib corpus after `samtools sort -n | samtools fixmate -m` (MC tags), and generated pairs with
//! soft and hard clips, both strands, unmapped mates, supplementary records, libraries,
//! cell barcodes and molecular identifiers; in memory (`-@ 4`), single-threaded and out of core (tiny
//! memory, fan-in 3). Records without the MC tag they need fail as samtools fails, leaving nothing.

use std::path::{Path, PathBuf};

use crate::checks::oracle_text;
use crate::common::{assert_no_failures, check_same, dir_listing, line, p, sortase, tempdir, Rng};
use crate::oracle::{oracle, Oracle};
use crate::view_corpus::{corpus_dir, find_sams, par_map};

/// In memory on 4 threads, on one thread, and out of core with many runs and compaction.
const BUDGETS: &[&[&str]] = &[
    &["-@", "4"],
    &["-@", "1"],
    &["-@", "2", "--max-memory", "1", "--max-fan-in", "3"],
];

/// `samtools sort -n` then `samtools fixmate -m`: the input template-coordinate sorting expects.
fn fixmated(st: &Oracle, input: &Path, dir: &Path) -> Result<PathBuf, String> {
    let by_name = dir.join("by_name.bam");
    let r = st.run(&["sort", "-n", "--no-PG", "-o", p(&by_name), p(input)]);
    if !r.ok() {
        return Err(r.failure());
    }
    let fixed = dir.join("fixmate.bam");
    let r = st.run(&["fixmate", "-m", "--no-PG", p(&by_name), p(&fixed)]);
    if !r.ok() {
        return Err(r.failure());
    }
    Ok(fixed)
}

/// Sorts `input` with both tools and compares the decoded outputs (header included) for every
/// budget; when samtools refuses the input, sortase must refuse it too and write nothing.
fn compare(st: &Oracle, input: &Path, dir: &Path, label: &str) -> Vec<String> {
    let mut failures = Vec::new();
    let theirs = dir.join("theirs.bam");
    let r = st.run(&[
        "sort",
        "--template-coordinate",
        "--no-PG",
        "-o",
        p(&theirs),
        p(input),
    ]);
    let expected = if r.ok() {
        match oracle_text(st, &theirs, &[]) {
            Ok(t) => Some(t),
            Err(e) => return vec![format!("{label}: oracle cannot read its output: {e}")],
        }
    } else {
        None
    };
    for (b, budget) in BUDGETS.iter().enumerate() {
        let ours = dir.join(format!("ours{b}.bam"));
        let mut args = vec!["sort", "--template-coordinate", "--no-PG", "-o", p(&ours)];
        args.extend_from_slice(budget);
        args.push(p(input));
        let what = format!("{label}: sort {}", args[1..].join(" "));
        let r = sortase(&args);
        match (&expected, r.ok()) {
            (Some(_), false) => failures.push(format!("{what}: {}", r.failure())),
            (None, true) => failures.push(format!("{what}: accepted what samtools refuses")),
            (None, false) => {
                if r.stderr.trim().lines().count() != 1 || ours.exists() {
                    failures.push(format!("{what}: not a one-line error, or output left"));
                }
            }
            (Some(expected), true) => match oracle_text(st, &ours, &[]) {
                Ok(got) => check_same(&mut failures, &what, &got, expected),
                Err(e) => failures.push(format!("{what}: oracle cannot read our output: {e}")),
            },
        }
    }
    failures
}

#[test]
fn template_coordinate_corpus_matches_samtools() {
    let (Some(st), Some(dir)) = (oracle(), corpus_dir()) else {
        return;
    };
    let mut sams = Vec::new();
    find_sams(&dir, &mut sams);
    sams.sort();
    let results = par_map(&sams, |sam| {
        let tmp = tempdir();
        let name = sam.strip_prefix(&dir).unwrap().display().to_string();
        let r = fixmated(st, sam, tmp.path()).map(|f| {
            let failures = compare(st, &f, tmp.path(), &name);
            (failures, tmp.path().join("theirs.bam").exists())
        });
        (name, r)
    });
    let (mut compared, mut sorted, mut failures) = (0, 0, Vec::new());
    for (name, r) in results {
        match r {
            Ok((f, samtools_sorted)) => {
                compared += 1;
                sorted += usize::from(samtools_sorted);
                failures.extend(f);
            }
            Err(why) => eprintln!("template sort corpus: samtools cannot prepare {name}: {why}"),
        }
    }
    eprintln!(
        "template sort corpus: compared {compared} of {} files, {sorted} sorted by samtools (the \
         others refused by both tools)",
        sams.len()
    );
    assert!(compared > 60, "only {compared} corpus files compared");
    assert!(sorted > 40, "only {sorted} corpus files sorted by samtools");
    assert_no_failures("template-coordinate sort on the htslib corpus", &failures);
}

/// Paired reads (some with a placed unmapped mate, some fully unmapped), supplementary records,
/// clips on both ends (soft and hard), both strands, many ties on position, three read
/// groups over two libraries (one group without LB), CB and MI tags (MI with `/A` `/B` suffixes).
pub(crate) fn templates(n: usize, seed: u64) -> String {
    let mut s = crate::edge_cases::rows(
        "@HD VN:1.6 SO:unsorted
         @SQ SN:chr1 LN:100000
         @SQ SN:chr2 LN:100000
         @RG ID:g1 LB:libB
         @RG ID:g2 LB:libA
         @RG ID:g3",
    );
    let mut rng = Rng::new(seed);
    let cigars = [
        "20M", "5S15M", "15M5S", "3H20M", "2S16M2S", "20M3H", "8M2I10M", "10M5D10M",
    ];
    for i in 0..n {
        let name = format!("t{}", (i as u64 * 7919) % n as u64);
        let (r1, r2) = (rng.below(3), rng.below(3));
        let place = |rng: &mut Rng| (["chr1", "chr2"][rng.below(2) as usize], 100 + rng.below(40));
        let (c1, p1) = place(&mut rng);
        let (c2, p2) = place(&mut rng);
        let g1 = cigars[rng.below(cigars.len() as u64) as usize];
        let g2 = cigars[rng.below(cigars.len() as u64) as usize];
        let mut tags = Vec::new();
        match rng.below(4) {
            0 => {}
            k => tags.push(format!("RG:Z:g{k}")),
        }
        if rng.below(3) == 0 {
            tags.push(format!("CB:Z:C{}", rng.below(3)));
        }
        if rng.below(3) == 0 {
            tags.push(format!(
                "MI:Z:{}{}",
                rng.below(3),
                ["", "/A", "/B"][rng.below(3) as usize]
            ));
        }
        let supp = rng.below(6) == 0;
        let (f1, f2, c2, p2, g2) = match (r1, r2) {
            (0, 0) => (77u32, 141u32, "*", 0, "*"),
            (0, _) | (_, 0) => (73, 133, c1, p1, "*"),
            _ => {
                let rev1 = if rng.below(2) == 0 { 16 } else { 0 };
                let rev2 = if rng.below(2) == 0 { 16 } else { 0 };
                (65 + rev1 + rev2 * 2, 129 + rev2 + rev1 * 2, c2, p2, g2)
            }
        };
        let (c1, p1, g1) = if f1 == 77 {
            ("*", 0, "*")
        } else {
            (c1, p1, g1)
        };
        let mut ends = vec![(f1, c1, p1, g1, 0), (f2, c2, p2, g2, 0)];
        if supp && f1 & 4 == 0 {
            ends.push((f1, c1, p1 + 7, "8M12S", 2048)); // a supplementary record of read 1
        }
        for (flag, chr, pos, cigar, extra) in ends {
            let len = crate::common::query_len(cigar).max(20);
            let seq = rng.bases(if cigar == "*" { 20 } else { len });
            let qual = "I".repeat(seq.len());
            let mut fields = vec![
                name.clone(),
                (flag | extra).to_string(),
                chr.to_string(),
                pos.to_string(),
                "60".to_string(),
                cigar.to_string(),
                "*".to_string(),
                "0".to_string(),
                "0".to_string(),
                seq,
                qual,
            ];
            fields.extend(tags.iter().cloned());
            let refs: Vec<&str> = fields.iter().map(String::as_str).collect();
            s += &line(&refs);
        }
    }
    s
}

#[test]
fn template_coordinate_generated_matches_samtools_and_bytes_hold() {
    let Some(st) = oracle() else { return };
    let tmp = tempdir();
    let mut failures = Vec::new();
    for (n, seed) in [(40usize, 1u64), (3000, 2)] {
        let dir = tmp.path().join(format!("g{n}"));
        std::fs::create_dir(&dir).unwrap();
        let sam = dir.join("in.sam");
        std::fs::write(&sam, templates(n, seed)).unwrap();
        let fixed = fixmated(st, &sam, &dir).expect("samtools fixmate");
        failures.extend(compare(st, &fixed, &dir, &format!("generated {n}")));
        // The same bytes for any thread count and budget.
        let outputs: Vec<Vec<u8>> = (0..BUDGETS.len())
            .map(|b| std::fs::read(dir.join(format!("ours{b}.bam"))).unwrap_or_default())
            .collect();
        assert!(!outputs[0].is_empty());
        for (b, bytes) in outputs.iter().enumerate().skip(1) {
            assert!(
                bytes == &outputs[0],
                "generated {n}: {:?} bytes differ",
                BUDGETS[b]
            );
        }
    }
    assert_no_failures("template-coordinate sort of generated templates", &failures);
}

#[test]
fn template_coordinate_header_sam_output_and_index() {
    let Some(st) = oracle() else { return };
    let tmp = tempdir();
    let d = tmp.path();
    let sam = d.join("in.sam");
    // @HD with SS before SO and no GO: tags keep their place, GO is appended.
    let text = crate::edge_cases::rows("@HD VN:1.4 SS:foo\n@SQ SN:chr1 LN:1000")
        + &templates(30, 9)
            .split_inclusive('\n')
            .filter(|l| !l.starts_with('@'))
            .collect::<String>()
            .replace("chr2", "chr1");
    std::fs::write(&sam, text).unwrap();
    let fixed = fixmated(st, &sam, d).expect("fixmate");
    for out in ["o.sam", "o.bam"] {
        let theirs = d.join(format!("theirs-{out}"));
        let ours = d.join(out);
        let args = |o: &Path| {
            vec!["sort", "--template-coordinate", "-o", p(o), p(&fixed)]
                .into_iter()
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        let ta = args(&theirs);
        st.run(&ta.iter().map(String::as_str).collect::<Vec<_>>())
            .expect_ok();
        let mut oa = args(&ours);
        oa.insert(1, "--write-index".into());
        let r = sortase(&oa.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(r.ok(), "{}", r.failure());
        assert!(
            r.stderr
                .contains("Ignoring --write-index as it only works for position sorted files"),
            "{}",
            r.stderr
        );
        let listing = dir_listing(d);
        assert!(
            !listing
                .iter()
                .any(|n| n.starts_with("o.") && (n.ends_with("csi") || n.ends_with("bai"))),
            "{listing:?}"
        );
        let (got, want) = (
            oracle_text(st, &ours, &[]).unwrap(),
            oracle_text(st, &theirs, &[]).unwrap(),
        );
        assert!(
            got.starts_with(
                "@HD\tVN:1.4\tSS:unsorted:template-coordinate\tSO:unsorted\tGO:query\n"
            ),
            "{got}"
        );
        assert_eq!(got, want, "{out}");
    }
}

#[test]
fn template_coordinate_without_mc_fails_as_samtools_leaving_nothing() {
    let Some(st) = oracle() else { return };
    let tmp = tempdir();
    let d = tmp.path();
    let sam = d.join("in.sam");
    std::fs::write(&sam, templates(200, 5)).unwrap();
    let out_dir = d.join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let theirs = d.join("theirs.bam");
    let r = st.run(&["sort", "--template-coordinate", "-o", p(&theirs), p(&sam)]);
    assert!(
        !r.ok() && r.stderr.contains("no MC tag"),
        "samtools: {}",
        r.stderr
    );
    for extra in [&[][..], &["--max-memory", "1", "--max-fan-in", "2"]] {
        let ours = out_dir.join("o.bam");
        let mut args = vec![
            "sort",
            "--template-coordinate",
            "-T",
            p(&out_dir),
            "-o",
            p(&ours),
        ];
        args.extend_from_slice(extra);
        args.push(p(&sam));
        let r = sortase(&args);
        assert!(!r.ok(), "accepted records without MC");
        let msg = r.stderr.trim();
        assert_eq!(msg.lines().count(), 1, "not one line: {msg}");
        assert!(msg.contains(p(&sam)) && msg.contains("no MC tag"), "{msg}");
        assert!(
            dir_listing(&out_dir).is_empty(),
            "left: {:?}",
            dir_listing(&out_dir)
        );
    }
    let r = sortase(&["sort", "--template-coordinate", "-n", p(&sam)]);
    assert!(!r.ok(), "--template-coordinate -n accepted");
}
