//! Output-format options (`-b -u -O -o -@`, `-O bam,level=N`, BAM on stdout), the read-group and
//! library filters (`-r -l`, which samtools spells as sortase does) and the `@PG` line sortase
//! appends (or not, with `--no-PG`).

use std::path::Path;

use crate::checks::{oracle_text, reference};
use crate::common::{assert_no_failures, check_same, line, p, records, sortase, tempdir};
use crate::oracle::{oracle, Oracle};
use crate::view_query::region_sam;

const BGZF_MAGIC: &[u8] = &[0x1f, 0x8b, 0x08, 0x04];

/// Run sortase with `opts` writing to `out`, decode `out` with the oracle.
fn decoded(st: &Oracle, opts: &[&str], input: &Path, out: &Path) -> Result<String, String> {
    let mut args = vec!["view"];
    args.extend_from_slice(opts);
    args.extend_from_slice(&["-o", p(out), p(input)]);
    let run = sortase(&args);
    if !run.ok() {
        return Err(run.failure());
    }
    let bytes = std::fs::read(out).map_err(|e| format!("no output file: {e}"))?;
    if !bytes.starts_with(BGZF_MAGIC) {
        return Err("output is not BGZF".into());
    }
    oracle_text(st, out, &[]).map_err(|e| format!("samtools cannot read it: {e}"))
}

#[test]
fn bam_output_options() {
    let Some(st) = oracle() else { return };
    let tmp = tempdir();
    let sam = tmp.path().join("in.sam");
    std::fs::write(&sam, region_sam()).unwrap();
    let expected = reference(st, &sam, tmp.path()).unwrap().text;
    let variants: &[&[&str]] = &[
        &["-b"],
        &["-u"],
        &["-O", "bam"],
        &["-O", "BAM"],
        &["-O", "bam,level=0"],
        &["-b", "--output-fmt-option", "level=1"],
        &["-O", "bam,level=9"],
        &["-b", "-@", "2"],
        &["-u", "-@", "4"],
        &[], // format inferred from the .bam extension, like samtools
    ];
    let mut failures = Vec::new();
    for (i, opts) in variants.iter().enumerate() {
        let label = format!("view {} -o out.bam", opts.join(" "));
        match decoded(st, opts, &sam, &tmp.path().join(format!("out{i}.bam"))) {
            Ok(text) => check_same(&mut failures, &label, &text, &expected),
            Err(e) => failures.push(format!("{label}: {e}")),
        }
    }
    let size = |i: usize| {
        std::fs::metadata(tmp.path().join(format!("out{i}.bam")))
            .map(|m| m.len())
            .unwrap_or(0)
    };
    if size(1) <= size(0) {
        failures.push(format!(
            "-u output ({} bytes) is not larger than -b output ({} bytes)",
            size(1),
            size(0)
        ));
    }
    assert_no_failures("BAM output options", &failures);
}

/// `-b` without `-o` writes BAM to stdout; `-O sam -o` writes headerless SAM.
#[test]
fn stdout_and_sam_file_output() {
    let Some(st) = oracle() else { return };
    let tmp = tempdir();
    let sam = tmp.path().join("in.sam");
    std::fs::write(&sam, region_sam()).unwrap();
    let expected = reference(st, &sam, tmp.path()).unwrap().text;
    let mut failures = Vec::new();
    let run = sortase(&["view", "-b", p(&sam)]);
    let piped = tmp.path().join("piped.bam");
    std::fs::write(&piped, &run.stdout).unwrap();
    match (run.ok(), oracle_text(st, &piped, &[])) {
        (false, _) => failures.push(run.failure()),
        (true, Err(e)) => failures.push(format!("BAM on stdout unreadable: {e}")),
        (true, Ok(text)) => check_same(&mut failures, "view -b (stdout)", &text, &expected),
    }
    let out = tmp.path().join("out.sam");
    let run = sortase(&["view", "-O", "sam", "-o", p(&out), p(&sam)]);
    let theirs = st.run(&["view", p(&sam)]).expect_ok().text();
    match (run.ok(), std::fs::read_to_string(&out)) {
        (false, _) => failures.push(run.failure()),
        (true, Err(e)) => failures.push(format!("view -O sam -o: no output: {e}")),
        (true, Ok(ours)) => check_same(&mut failures, "view -O sam -o out.sam", &ours, &theirs),
    }
    assert_no_failures("stdout/SAM output", &failures);
}

fn pg_lines(text: &str) -> Vec<&str> {
    text.lines().filter(|l| l.starts_with("@PG\t")).collect()
}

fn pg_id(pg: &str) -> &str {
    pg.split('\t')
        .find_map(|f| f.strip_prefix("ID:"))
        .unwrap_or("")
}

fn header_sam() -> String {
    let mut s = line(&["@HD", "VN:1.6", "SO:unsorted"]);
    s += &line(&["@SQ", "SN:chr1", "LN:1000"]);
    s += &line(&[
        "@PG",
        "ID:bwa",
        "PN:bwa",
        "VN:0.7.17",
        "CL:bwa mem ref.fa r.fq",
    ]);
    s += &line(&["@CO", "kept verbatim"]);
    s += &line(&[
        "r1", "0", "chr1", "5", "60", "4M", "*", "0", "0", "ACGT", "*",
    ]);
    s
}

/// The input header is kept, a `@PG ID:sortase` line is appended last and
/// chained to the previous program (`PP:bwa`, as samtools does); a second
/// pass gets a unique ID; `--no-PG` adds nothing.
#[test]
fn pg_line_appended() {
    let Some(st) = oracle() else { return };
    let tmp = tempdir();
    let sam = tmp.path().join("in.sam");
    std::fs::write(&sam, header_sam()).unwrap();
    let input_header: String = header_sam()
        .lines()
        .filter(|l| l.starts_with('@'))
        .map(|l| format!("{l}\n"))
        .collect();
    let mut failures = Vec::new();

    let out = sortase(&["view", "-h", p(&sam)]).expect_ok().text();
    let (hdr, pgs) = (
        out.lines()
            .filter(|l| l.starts_with('@'))
            .collect::<Vec<_>>(),
        pg_lines(&out),
    );
    let last = hdr.last().copied().unwrap_or("");
    if !last.starts_with("@PG\tID:sortase") {
        failures.push(format!("last header line is not @PG ID:sortase: {last}"));
    }
    if !last.split('\t').any(|f| f == "PP:bwa") {
        failures.push(format!("sortase @PG is not chained with PP:bwa: {last}"));
    }
    if pgs.len() != 2 {
        failures.push(format!("expected 2 @PG lines, got {pgs:?}"));
    }
    check_same(
        &mut failures,
        "input header kept",
        &hdr[..hdr.len().saturating_sub(1)]
            .iter()
            .map(|l| format!("{l}\n"))
            .collect::<String>(),
        &input_header,
    );

    // Twice through sortase (via BAM): IDs must stay unique.
    let bam = tmp.path().join("once.bam");
    sortase(&["view", "-b", "-o", p(&bam), p(&sam)]).expect_ok();
    let twice = sortase(&["view", "-h", p(&bam)]).expect_ok().text();
    let ids: Vec<&str> = pg_lines(&twice).into_iter().map(pg_id).collect();
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    if unique.len() != ids.len() || ids.len() != 3 {
        failures.push(format!("@PG IDs after two sortase passes: {ids:?}"));
    }

    // --no-PG: the header is exactly samtools' --no-PG header.
    let ours = sortase(&["view", "-h", "--no-PG", p(&sam)])
        .expect_ok()
        .text();
    let theirs = st
        .run(&["view", "-h", "--no-PG", p(&sam)])
        .expect_ok()
        .text();
    check_same(&mut failures, "view -h --no-PG", &ours, &theirs);
    let nopg = tmp.path().join("nopg.bam");
    sortase(&["view", "-b", "--no-PG", "-o", p(&nopg), p(&sam)]).expect_ok();
    let decoded = st
        .run(&["view", "-h", "--no-PG", p(&nopg)])
        .expect_ok()
        .text();
    check_same(&mut failures, "view -b --no-PG", &decoded, &theirs);
    check_same(
        &mut failures,
        "records",
        &records(&decoded),
        &records(&header_sam()),
    );
    assert_no_failures("@PG handling", &failures);
}

/// Regression (found when `-o /dev/null` replaced /dev/null with a regular file): an output path that
/// exists and is not a regular file is written in place, never renamed over. Tested on a FIFO so a
/// failure cannot damage the machine's /dev/null.
#[test]
fn output_to_a_special_file_is_written_in_place() {
    use std::os::unix::fs::FileTypeExt;
    let tmp = tempdir();
    let sam = tmp.path().join("in.sam");
    std::fs::write(&sam, region_sam()).unwrap();
    let fifo = tmp.path().join("out.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo failed");
    let copy = tmp.path().join("copy.sam");
    let reader = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("cat '{}' > '{}'", fifo.display(), copy.display()))
        .spawn()
        .unwrap();
    let run = sortase(&["view", "-o", p(&fifo), p(&sam)]);
    let mut reader = reader;
    reader.wait().unwrap();
    assert!(run.ok(), "{}", run.failure());
    let kind = std::fs::symlink_metadata(&fifo).unwrap().file_type();
    assert!(kind.is_fifo(), "the FIFO was replaced by a regular file");
    let text = std::fs::read_to_string(&copy).unwrap();
    assert_eq!(
        text.lines().count(),
        region_sam().lines().filter(|l| !l.starts_with('@')).count()
    );
}

/// `-r STR` keeps the records whose `RG` is STR (declared or not) and those without `RG`; `-l STR`
/// those whose read group's `@RG` has `LB:STR` (records without `RG` never pass). Counted and written, SAM and BAM input,
/// against samtools.
#[test]
fn read_group_and_library_filters() {
    let Some(st) = oracle() else { return };
    let tmp = tempdir();
    let sam = tmp.path().join("rg.sam");
    let mut text = String::from(
        "@HD\tVN:1.6\tSO:coordinate\n@SQ\tSN:c1\tLN:1000\n\
         @RG\tID:a\tLB:lib1\tSM:s\n@RG\tID:b\tLB:lib2\tSM:s\n@RG\tID:c\tLB:lib1\tSM:s\n",
    );
    for (i, rg) in ["a", "b", "c", "", "x", "a", "b"].iter().enumerate() {
        let tag = if rg.is_empty() {
            String::new()
        } else {
            format!("\tRG:Z:{rg}")
        };
        text += &format!(
            "r{i}\t0\tc1\t{}\t60\t4M\t*\t0\t0\tACGT\tIIII{tag}\n",
            10 + i
        );
    }
    std::fs::write(&sam, text).unwrap();
    let bam = tmp.path().join("rg.bam");
    assert!(st.run(&["view", "-b", "-o", p(&bam), p(&sam)]).ok());
    let mut failures = Vec::new();
    for input in [&sam, &bam] {
        for filter in [
            &["-r", "a"][..],
            &["-r", "x"],
            &["-l", "lib1"],
            &["-l", "lib2", "-r", "b"],
            &["-l", "none"],
        ] {
            for count in [true, false] {
                let mut args = vec!["view"];
                args.extend_from_slice(filter);
                if count {
                    args.push("-c");
                }
                args.push(p(input));
                let ours = sortase(&args);
                let theirs = st.run(&args);
                let label = args.join(" ");
                if !ours.ok() {
                    failures.push(format!("{label}: {}", ours.failure()));
                } else {
                    check_same(&mut failures, &label, &ours.text(), &theirs.text());
                }
            }
        }
    }
    assert_no_failures("read group and library filters", &failures);
}
