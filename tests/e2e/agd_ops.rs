//! `sortase agd sort|markdup|add-column|drop-column` (issue 19): a sorted dataset exports to the
//! records samtools sort writes (in memory and out of core), `agd markdup`'s duplicate group gives
//! the flags of `sortase markdup` (and samblaster) on the exported BAM, `sortase markdup` of a
//! dataset writes what it writes for the BAM, and a failed add-column leaves the dataset as it was.

use std::path::{Path, PathBuf};

use crate::common::{assert_no_failures, check_same, gunzip, p, records, run, sortase, tempdir};
use crate::oracle::oracle;

/// Every file under `dir` with its bytes, sorted by path: a dataset's whole state.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let name = path.strip_prefix(dir).unwrap().display().to_string();
                out.push((name, std::fs::read(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// Imports `input` into `dir/NAME` in chunks of `chunk` records.
fn import(input: &Path, dir: &Path, name: &str, chunk: usize) -> PathBuf {
    let ds = dir.join(name);
    let chunk = chunk.to_string();
    sortase(&[
        "agd",
        "import",
        "--chunk-size",
        &chunk,
        p(input),
        "-o",
        p(&ds),
    ])
    .expect_ok();
    ds
}

/// `agd sort` of a dataset equals `sortase sort` (byte for byte, decompressed, with --no-PG) and
/// samtools sort (records) of the BAM it came from, for every order, in memory and with `-m 1M`
/// (spilling runs); with a @PG line the header is `sortase sort`'s but for the command line. So does
/// `sortase sort DATASET -o out.bam` (the dataset as the sort's source) write that BAM.
#[test]
fn agd_sort_matches_sortase_and_samtools_sort() {
    let Some(st) = oracle() else {
        return crate::common::skip("no samtools oracle");
    };
    let tmp = tempdir();
    let d = tmp.path();
    let bam = crate::sort::random_bam(st, d, 20_000);
    let ds = import(&bam, d, "ds", 3000);
    let mut failures = Vec::new();
    for order in [&[][..], &["-n"], &["-N"], &["-t", "XI"]] {
        let theirs = d.join("theirs.bam");
        let mut args = vec!["sort", "-o", p(&theirs)];
        args.extend_from_slice(order);
        args.push(p(&bam));
        st.run(&args).expect_ok();
        let reference = d.join("sortase.bam");
        let mut args = vec!["sort", "--no-PG", "-o", p(&reference)];
        args.extend_from_slice(order);
        args.push(p(&bam));
        sortase(&args).expect_ok();
        for mem in [&[][..], &["-m", "1M"]] {
            let label = format!("agd sort {order:?} {mem:?}");
            let out = d.join("sorted");
            let _ = std::fs::remove_dir_all(&out);
            let mut args = vec![
                "agd",
                "sort",
                "-@",
                "2",
                "-v",
                "--no-PG",
                "--chunk-size",
                "700",
            ];
            args.extend_from_slice(order);
            args.extend_from_slice(mem);
            args.extend([p(&ds), "-o", p(&out)]);
            let sorted = sortase(&args);
            if !sorted.ok() {
                failures.push(format!("{label}: {}", sorted.failure()));
                continue;
            }
            let spilled = !sorted.stderr.contains(" 0 runs spilled");
            if spilled == mem.is_empty() {
                failures.push(format!(
                    "{label}: runs spilled {spilled}: {}",
                    sorted.stderr
                ));
            }
            let exported = d.join("exported.bam");
            sortase(&["agd", "export", p(&out), "-o", p(&exported)]).expect_ok();
            if gunzip(&exported) != gunzip(&reference) {
                failures.push(format!("{label}: export differs from sortase sort"));
            }
            let ours = st.run(&["view", p(&exported)]).expect_ok().text();
            let want = st.run(&["view", p(&theirs)]).expect_ok().text();
            check_same(&mut failures, &label, &records(&ours), &records(&want));
            // `sortase sort DATASET -o out.bam`: the dataset as the sort's source, written as
            // `sortase sort` writes the BAM the dataset came from.
            let label = format!("sort DATASET {order:?} {mem:?}");
            let direct = d.join("direct.bam");
            let mut args = vec!["sort", "-@", "2", "--no-PG", "-o", p(&direct)];
            args.extend_from_slice(order);
            args.extend_from_slice(mem);
            args.push(p(&ds));
            let sorted = sortase(&args);
            if !sorted.ok() {
                failures.push(format!("{label}: {}", sorted.failure()));
            } else if gunzip(&direct) != gunzip(&reference) {
                failures.push(format!("{label}: differs from sortase sort of the BAM"));
            }
        }
    }
    // The @PG line and SO of `sortase sort`, the command line aside.
    let out = d.join("with_pg");
    sortase(&["agd", "sort", p(&ds), "-o", p(&out)]).expect_ok();
    let exported = d.join("with_pg.bam");
    sortase(&["agd", "export", p(&out), "-o", p(&exported)]).expect_ok();
    let reference = d.join("with_pg_ref.bam");
    sortase(&["sort", "-o", p(&reference), p(&bam)]).expect_ok();
    let header = |f: &Path| {
        let h = st.run(&["view", "--no-PG", "-H", p(f)]).expect_ok().text();
        h.lines()
            .map(|l| match l.find("\tCL:") {
                Some(i) if l.starts_with("@PG\tID:sortase") => l[..i].to_string(),
                _ => l.to_string(),
            })
            .collect::<Vec<_>>()
    };
    let ours = header(&exported);
    assert_eq!(ours, header(&reference));
    assert!(ours[0].contains("SO:coordinate"), "{ours:?}");
    assert!(ours.iter().any(|l| l.starts_with("@PG\tID:sortase")));
    assert_no_failures("agd sort", &failures);
}

/// `sortase sort -O agd` of a BAM (the BAM as the sort's source, a dataset as its sink) writes the
/// dataset `agd import` then `agd sort` write: the same chunk files, and the same records exported
/// (in memory and with `-m 1M`); so does `sortase sort -o DIR` with DIR an existing empty directory.
#[test]
fn sort_of_a_bam_into_a_dataset_is_agd_sort_of_its_import() {
    let Some(st) = oracle() else {
        return crate::common::skip("no samtools oracle");
    };
    let tmp = tempdir();
    let d = tmp.path();
    let bam = crate::sort::random_bam(st, d, 5_000);
    let ds = import(&bam, d, "ds", 1000);
    let chunks = |dir: &Path| {
        snapshot(dir)
            .into_iter()
            .filter(|(n, _)| n != "manifest.json")
            .collect::<Vec<_>>()
    };
    let mut failures = Vec::new();
    for (order, mem) in [(&[][..], &[][..]), (&["-n"][..], &["-m", "1M"][..])] {
        let label = format!("sort -O agd {order:?} {mem:?}");
        let via_import = d.join("via_import");
        let direct = d.join("direct");
        let _ = std::fs::remove_dir_all(&via_import);
        let _ = std::fs::remove_dir_all(&direct);
        let mut agd_sort = vec!["agd", "sort", "-@", "2", "--no-PG", "--chunk-size", "700"];
        agd_sort.extend_from_slice(order);
        agd_sort.extend_from_slice(mem);
        agd_sort.extend([p(&ds), "-o", p(&via_import)]);
        sortase(&agd_sort).expect_ok();
        let mut sort = vec![
            "sort",
            "-@",
            "2",
            "--no-PG",
            "--chunk-size",
            "700",
            "-O",
            "agd",
        ];
        sort.extend_from_slice(order);
        sort.extend_from_slice(mem);
        sort.extend(["-o", p(&direct), p(&bam)]);
        let sorted = sortase(&sort);
        if !sorted.ok() {
            failures.push(format!("{label}: {}", sorted.failure()));
            continue;
        }
        if chunks(&direct) != chunks(&via_import) {
            failures.push(format!("{label}: chunk files differ from agd sort's"));
        }
        let export = |dir: &Path, name: &str| {
            let out = d.join(name);
            sortase(&["agd", "export", p(dir), "-o", p(&out)]).expect_ok();
            gunzip(&out)
        };
        if export(&direct, "direct.bam") != export(&via_import, "via_import.bam") {
            failures.push(format!("{label}: export differs from agd sort's"));
        }
    }
    // An existing empty directory as -o is a dataset without -O.
    let empty = d.join("empty");
    std::fs::create_dir(&empty).unwrap();
    sortase(&["sort", "--no-PG", "-o", p(&empty), p(&bam)]).expect_ok();
    assert!(empty.join("manifest.json").is_file());
    assert_no_failures("sort -O agd", &failures);
}

/// `agd markdup` on a query-grouped dataset (samblaster) and on a coordinate-sorted one (Picard):
/// the export equals `sortase markdup` on the BAM record for record (and samblaster's output, when
/// installed), `agd flagstat` equals samtools flagstat of that BAM, the records' own groups are
/// untouched, and marking again replaces the group.
#[test]
fn agd_markdup_matches_sortase_markdup() {
    let Some(st) = oracle() else {
        return crate::common::skip("no samtools oracle");
    };
    let tmp = tempdir();
    let d = tmp.path();
    let grouped = d.join("grouped.sam");
    std::fs::write(&grouped, crate::markdup_query::grouped(3000, 5)).unwrap();
    let sorted_sam = d.join("templates.sam");
    std::fs::write(&sorted_sam, crate::markdup_coord::templates(3000, 5)).unwrap();
    let sorted = d.join("sorted.bam");
    st.run(&["sort", "-o", p(&sorted), p(&sorted_sam)])
        .expect_ok();
    let mut failures = Vec::new();
    for (label, input, mode) in [
        ("samblaster", &grouped, "query"),
        ("picard", &sorted, "coordinate"),
    ] {
        // Chunks of 250 records: read-name groups straddle chunks.
        let ds = import(input, d, label, 250);
        let core = |ds: &Path| {
            snapshot(ds)
                .into_iter()
                .filter(|(n, _)| !n.starts_with("duplicate") && n != "manifest.json")
                .collect::<Vec<_>>()
        };
        let before = core(&ds);
        let reference = d.join(format!("{label}.sam"));
        sortase(&["markdup", "-q", "--no-PG", "-o", p(&reference), p(input)]).expect_ok();
        let want = records(&std::fs::read_to_string(&reference).unwrap());
        // `markdup` reads a dataset as it reads the BAM the dataset came from (one record source).
        let from_dataset = d.join(format!("{label}.from_dataset.sam"));
        sortase(&["markdup", "-q", "--no-PG", "-o", p(&from_dataset), p(&ds)]).expect_ok();
        check_same(
            &mut failures,
            &format!("{label}: markdup of the dataset"),
            &records(&std::fs::read_to_string(&from_dataset).unwrap()),
            &want,
        );
        for round in 0..2 {
            let marked = sortase(&["agd", "markdup", "-q", "-@", "2", "--mode", mode, p(&ds)]);
            if !marked.ok() {
                failures.push(format!("{label}: {}", marked.failure()));
                continue;
            }
            let out = d.join(format!("{label}.out.sam"));
            sortase(&["agd", "export", p(&ds), "-o", p(&out)]).expect_ok();
            let ours = records(&std::fs::read_to_string(&out).unwrap());
            check_same(
                &mut failures,
                &format!("{label} round {round}"),
                &ours,
                &want,
            );
            let flagstat = sortase(&["agd", "flagstat", p(&ds)]).expect_ok().text();
            let theirs = st.run(&["flagstat", p(&reference)]).expect_ok().text();
            check_same(
                &mut failures,
                &format!("{label} flagstat"),
                &flagstat,
                &theirs,
            );
        }
        assert_eq!(
            core(&ds),
            before,
            "{label}: agd markdup rewrote the records' groups"
        );
        let dirs = crate::common::dir_listing(&ds);
        assert_eq!(
            dirs.iter().filter(|n| n.starts_with("duplicate")).count(),
            1,
            "{label}: the replaced group's directory is left: {dirs:?}"
        );
    }
    if let Some(sb) = crate::common::tool("SORTASE_SAMBLASTER", "/usr/bin/samblaster") {
        let theirs = d.join("sb.sam");
        run(&sb, &[], &["-q", "-i", p(&grouped), "-o", p(&theirs)]).expect_ok();
        let out = d.join("samblaster.out.sam");
        let sb_text = records(&std::fs::read_to_string(&theirs).unwrap());
        let ours = records(&std::fs::read_to_string(out).unwrap());
        check_same(&mut failures, "samblaster itself", &ours, &sb_text);
    }
    assert_no_failures("agd markdup", &failures);

    // The BAM commands' requirements and errors: Picard needs coordinate order, samblaster groups.
    let unsorted = import(&sorted_sam, d, "unsorted", 250);
    let e = sortase(&["agd", "markdup", "--mode", "coordinate", p(&unsorted)]);
    assert!(
        !e.ok() && e.stderr.contains("not coordinate-sorted"),
        "{}",
        e.stderr
    );
    let ds = d.join("picard");
    let e = sortase(&["agd", "markdup", "--mode", "query", p(&ds)]);
    assert!(
        !e.ok() && e.stderr.contains("grouped by read name"),
        "{}",
        e.stderr
    );
    let e = sortase(&["agd", "markdup", "--addMateTags", p(&ds)]);
    assert!(
        !e.ok() && e.stderr.contains("duplicate group only"),
        "{}",
        e.stderr
    );
}

/// `agd add-column`: text, TSV (any order) and Parquet values become a group without touching the
/// others; a `duplicate` group sets and clears 0x400 in export and flagstat; drop-column removes it;
/// and a failed add (count mismatch, bad value, bad ordinal) leaves every file as it was.
#[test]
fn agd_add_column_and_failed_adds_leave_the_dataset() {
    let tmp = tempdir();
    let d = tmp.path();
    let sam = d.join("in.sam");
    std::fs::write(&sam, crate::markdup_query::grouped(300, 9)).unwrap();
    let ds = import(&sam, d, "ds", 100);
    let n = sortase(&["view", "-c", p(&sam)]).expect_ok().text();
    let n: usize = n.trim().parse().unwrap();
    let original = sortase(&["agd", "export", "-O", "sam", p(&ds)])
        .expect_ok()
        .text();
    let before = snapshot(&ds);

    let add = |name: &str, file: &Path, extra: &[&str]| {
        let mut args = vec!["agd", "add-column", "--name", name, "--from", p(file)];
        args.extend_from_slice(extra);
        args.push(p(&ds));
        sortase(&args)
    };
    // Failures: nothing changes, and the error names the file.
    let short = d.join("short.txt");
    std::fs::write(&short, "1\n".repeat(n - 1)).unwrap();
    let bad = d.join("bad.txt");
    let mut text = "1\n".repeat(n);
    text.replace_range(2..3, "x");
    std::fs::write(&bad, &text).unwrap();
    let twice = d.join("twice.tsv");
    let lines: String = (0..n).map(|i| format!("{}\t1\n", i.min(n - 2))).collect();
    std::fs::write(&twice, lines).unwrap();
    for (file, ty, message) in [
        (
            &short,
            "auto",
            format!("{} values, the dataset has {n} records", n - 1),
        ),
        (&bad, "int", "value 2 (\"x\") is not an integer".to_string()),
        (&twice, "auto", format!("ordinal {} appears twice", n - 2)),
    ] {
        let e = add("score", file, &["--type", ty]);
        assert!(!e.ok(), "{} succeeded", e.cmd);
        assert!(
            e.stderr.contains(p(file)) && e.stderr.contains(&message),
            "{}",
            e.stderr
        );
        assert!(
            snapshot(&ds) == before,
            "a failed add-column changed the dataset"
        );
    }
    let e = add("results", &short, &[]);
    assert!(!e.ok() && e.stderr.contains("core group"), "{}", e.stderr);
    assert!(snapshot(&ds) == before);

    // An integer column, then a duplicate column from 0/1 lines, then the same from a shuffled TSV.
    let scores = d.join("scores.txt");
    std::fs::write(
        &scores,
        (0..n).map(|i| format!("{}\n", i * 7)).collect::<String>(),
    )
    .unwrap();
    add("score", &scores, &[]).expect_ok();
    let manifest = std::fs::read_to_string(ds.join("manifest.json")).unwrap();
    assert!(manifest.contains("\"name\": \"score\""), "{manifest}");
    assert_eq!(
        crate::common::dir_listing(&ds.join("score")),
        crate::common::dir_listing(&ds.join("results"))
    );
    let dup = |i: usize| i.is_multiple_of(3);
    let flags = d.join("dups.txt");
    std::fs::write(
        &flags,
        (0..n)
            .map(|i| format!("{}\n", u8::from(dup(i))))
            .collect::<String>(),
    )
    .unwrap();
    add("duplicate", &flags, &[]).expect_ok();
    let expected: String = original
        .split_inclusive('\n')
        .filter(|l| !l.starts_with('@'))
        .enumerate()
        .map(|(i, l)| {
            let mut f: Vec<String> = l.split('\t').map(String::from).collect();
            let flag: u16 = f[1].parse().unwrap();
            f[1] = if dup(i) { flag | 0x400 } else { flag & !0x400 }.to_string();
            f.join("\t")
        })
        .collect();
    let exported = sortase(&["agd", "export", "-O", "sam", p(&ds)])
        .expect_ok()
        .text();
    assert_eq!(records(&exported), expected);
    let flagstat = sortase(&["agd", "flagstat", p(&ds)]).expect_ok().text();
    let dups = (0..n).filter(|&i| dup(i)).count();
    assert!(
        flagstat.contains(&format!("{dups} + 0 duplicates")),
        "{flagstat}"
    );

    let tsv = d.join("dups.tsv");
    let mut order: Vec<usize> = (0..n).collect();
    order.reverse();
    std::fs::write(
        &tsv,
        order
            .iter()
            .map(|&i| format!("{i}\t{}\n", dup(i)))
            .collect::<String>(),
    )
    .unwrap();
    add("duplicate", &tsv, &[]).expect_ok();
    let again = sortase(&["agd", "export", "-O", "sam", p(&ds)])
        .expect_ok()
        .text();
    assert_eq!(records(&again), expected);
    assert!(!ds.join("duplicate").exists() && ds.join("duplicate.1").exists());

    for name in ["duplicate", "score"] {
        sortase(&["agd", "drop-column", "--name", name, p(&ds)]).expect_ok();
    }
    assert!(
        snapshot(&ds) == before,
        "dropping the added groups did not restore the dataset"
    );
    let e = sortase(&["agd", "drop-column", "--name", "score", p(&ds)]);
    assert!(
        !e.ok() && e.stderr.contains("no extra group"),
        "{}",
        e.stderr
    );
}

/// A BAM of `n` records on chr1/chr2 (chr3 has none): mapped reads, unmapped reads placed at a
/// mate's position (counted as unmapped on the reference) and unplaced ones (the `*` line).
fn idxstats_bam(st: &crate::oracle::Oracle, dir: &Path, n: u64) -> PathBuf {
    let mut s = crate::edge_cases::rows(
        "@HD VN:1.6 SO:unsorted
         @SQ SN:chr1 LN:100000
         @SQ SN:chr2 LN:50000
         @SQ SN:chr3 LN:500",
    );
    let mut rng = crate::common::Rng::new(n);
    for i in 0..n {
        let seq = rng.bases(20);
        let (rname, pos, flag, cigar) = match rng.below(10) {
            0 => ("*", 0, 4, "*"),
            1 => ("chr2", 1 + rng.below(49_000), 4, "*"),
            2 | 3 => ("chr2", 1 + rng.below(49_000), 16, "20M"),
            _ => ("chr1", 1 + rng.below(99_000), 0, "20M"),
        };
        s += &crate::common::line(&[
            &format!("r{i}"),
            &flag.to_string(),
            rname,
            &pos.to_string(),
            "60",
            cigar,
            "*",
            "0",
            "0",
            &seq,
            "*",
        ]);
    }
    let sam = dir.join("idxstats.sam");
    std::fs::write(&sam, s).unwrap();
    let bam = dir.join("idxstats.bam");
    st.run(&["view", "-b", "-o", p(&bam), p(&sam)]).expect_ok();
    bam
}

/// `agd idxstats` and `idxstats` of a coordinate-sorted dataset equal samtools idxstats of the
/// exported BAM once indexed, and `sortase idxstats` of it without an index, on 1 and 4 threads; an unsorted dataset
/// fails as `sortase idxstats` of its export does.
#[test]
fn agd_idxstats_matches_samtools_idxstats() {
    let Some(st) = oracle() else {
        return crate::common::skip("no samtools oracle");
    };
    let tmp = tempdir();
    let d = tmp.path();
    let bam = idxstats_bam(st, d, 5000);
    let sorted = d.join("sorted.bam");
    st.run(&["sort", "-o", p(&sorted), p(&bam)]).expect_ok();
    let ds = import(&sorted, d, "ds", 700);
    let exported = d.join("exported.bam");
    sortase(&["agd", "export", p(&ds), "-o", p(&exported)]).expect_ok();
    let scanned = sortase(&["idxstats", p(&exported)]).expect_ok().text();
    st.run(&["index", p(&exported)]).expect_ok();
    let theirs = st.run(&["idxstats", p(&exported)]).expect_ok().text();
    assert!(theirs.starts_with("chr1\t100000\t"), "{theirs}");
    assert!(theirs.contains("\nchr3\t500\t0\t0\n*\t0\t0\t"), "{theirs}");
    let mut failures = Vec::new();
    check_same(&mut failures, "sortase idxstats", &scanned, &theirs);
    for threads in ["1", "4"] {
        let ours = sortase(&["agd", "idxstats", "-@", threads, p(&ds)]).expect_ok();
        check_same(&mut failures, threads, &ours.text(), &theirs);
        // `sortase idxstats DATASET`: the same job.
        let ours = sortase(&["idxstats", "-@", threads, p(&ds)]).expect_ok();
        let what = format!("idxstats DATASET -@ {threads}");
        check_same(&mut failures, &what, &ours.text(), &theirs);
    }
    let unsorted = import(&bam, d, "unsorted", 700);
    for command in ["agd idxstats", "idxstats"] {
        let mut args: Vec<&str> = command.split(' ').collect();
        args.push(p(&unsorted));
        let ours = sortase(&args);
        assert!(
            !ours.ok() && ours.stderr.contains("not position sorted"),
            "{}",
            ours.failure()
        );
    }
    let one = sortase(&["idxstats", p(&bam)]);
    assert!(
        !one.ok() && one.stderr.contains("not position sorted"),
        "{}",
        one.failure()
    );
    assert_no_failures("agd idxstats", &failures);
}
