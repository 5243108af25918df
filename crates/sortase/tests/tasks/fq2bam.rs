//! [`Fq2BamJob`] as a library call (issue 20): a run reports its counts and writes the BAM and its
//! index; duplicates are marked; a cancelled run returns `Cancelled` and leaves no file; a budget
//! smaller than the index is an argument error. Record identity with minimap2's CLI is checked by
//! tests/e2e/fq2bam.rs.

use super::fixtures::Rng;
use sortase::markdup::Mode;
use sortase::{DuplicateMarking, ErrorKind, Fq2BamJob, MarkdupJob, OutputSpec, Runtime};
use std::path::Path;

fn revcomp(s: &[u8]) -> Vec<u8> {
    s.iter()
        .rev()
        .map(|&c| match c {
            b'A' => b'T',
            b'C' => b'G',
            b'G' => b'C',
            _ => b'A',
        })
        .collect()
}

/// A 20 kb reference and `n` read pairs from it, every tenth pair a copy of the one before.
fn write_data(dir: &Path, n: usize) {
    let mut rng = Rng(0x5eed);
    let genome = rng.bases(20_000).into_bytes();
    let mut fa = b">chr1\n".to_vec();
    for line in genome.chunks(60) {
        fa.extend_from_slice(line);
        fa.push(b'\n');
    }
    std::fs::write(dir.join("ref.fa"), fa).unwrap();
    let (mut r1, mut r2) = (String::new(), String::new());
    let mut start = 0;
    for i in 0..n {
        if i % 10 != 9 {
            start = (rng.next() % (20_000 - 400)) as usize;
        }
        let frag = &genome[start..start + 400];
        let q = "I".repeat(100);
        let a = String::from_utf8(frag[..100].to_vec()).unwrap();
        let b = String::from_utf8(revcomp(frag)[..100].to_vec()).unwrap();
        r1.push_str(&format!("@p{i}/1\n{a}\n+\n{q}\n"));
        r2.push_str(&format!("@p{i}/2\n{b}\n+\n{q}\n"));
    }
    std::fs::write(dir.join("r1.fq"), r1).unwrap();
    std::fs::write(dir.join("r2.fq"), r2).unwrap();
}

fn job(dir: &Path) -> Fq2BamJob {
    let mut job = Fq2BamJob::new(
        dir.join("ref.fa"),
        dir.join("r1.fq"),
        OutputSpec::to_path(dir.join("out.bam")),
    );
    job.reads2 = Some(dir.join("r2.fq"));
    job.output.write_index = true;
    job
}

#[test]
fn fq2bam_job_writes_marks_and_reports() {
    let dir = tempfile::tempdir().unwrap();
    write_data(dir.path(), 200);
    let rt = Runtime::with_threads(2).unwrap();
    let report = job(dir.path()).run(&rt).unwrap();
    assert_eq!(
        (report.reads, report.fragments, report.records),
        (400, 200, 400)
    );
    assert_eq!(report.duplicate_templates, 20);
    assert_eq!(report.duplicate_records, 40);
    assert_eq!(
        report.outputs,
        [dir.path().join("out.bam"), dir.path().join("out.bam.csi")]
    );
    assert!(report.outputs.iter().all(|p| p.is_file()));
    let mut none = job(dir.path());
    none.markdup = DuplicateMarking::None;
    assert_eq!(none.run(&rt).unwrap().duplicate_records, 0);
}

#[test]
fn fq2bam_job_cancelled_or_over_budget_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    write_data(dir.path(), 50);
    let before = std::fs::read_dir(dir.path()).unwrap().count();
    let rt = Runtime::with_threads(2).unwrap();
    rt.cancel();
    let err = job(dir.path()).run(&rt).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled, "{err}");
    let small = Runtime::builder()
        .threads(1)
        .memory(64 << 10)
        .build()
        .unwrap();
    let err = job(dir.path()).run(&small).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Argument, "{err}");
    assert!(err.to_string().contains("raise -m"), "{err}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), before);
}

/// `--markdup picard` writes `sortase markdup --no-PG` of its own unmarked output byte for byte
/// (BAM and index): the distributed fq2bam marks with Picard's algorithm that way. 15 000 pairs:
/// ~10 MB of records, more than one of the writer's batches.
#[test]
fn fq2bam_picard_equals_markdup_of_the_unmarked_output() {
    let dir = tempfile::tempdir().unwrap();
    write_data(dir.path(), 15_000);
    let rt = Runtime::with_threads(2).unwrap();
    let mut picard = job(dir.path());
    picard.markdup = DuplicateMarking::Picard;
    picard.output = OutputSpec::to_path(dir.path().join("picard.bam"));
    picard.output.write_index = true;
    let report = picard.run(&rt).unwrap();
    assert!(report.duplicate_records >= 3000, "{report:?}");

    let mut none = job(dir.path());
    none.markdup = DuplicateMarking::None;
    none.output = OutputSpec::to_path(dir.path().join("none.bam"));
    none.output.write_index = false;
    none.run(&rt).unwrap();
    let mut output = OutputSpec::to_path(dir.path().join("marked.bam"));
    output.write_index = true;
    let mut markdup = MarkdupJob::new(dir.path().join("none.bam").to_str().unwrap(), output);
    markdup.mode = Mode::Coordinate;
    let marked = markdup.run(&rt).unwrap();
    assert_eq!(marked.duplicate_records, report.duplicate_records);

    let read = |name: &str| std::fs::read(dir.path().join(name)).unwrap();
    assert!(read("picard.bam") == read("marked.bam"), "BAM bytes differ");
    assert!(
        read("picard.bam.csi") == read("marked.bam.csi"),
        "index bytes differ"
    );
}

/// The records of `bam` without its header (minimap2's `@PG CL:` names the reads' paths).
fn records(bam: &Path) -> String {
    let sam = bam.with_extension("records.sam");
    let mut view = sortase::ViewJob::new(bam.to_str().unwrap(), OutputSpec::to_path(&sam));
    view.program = None;
    view.run(&Runtime::with_threads(1).unwrap()).unwrap();
    std::fs::read_to_string(&sam).unwrap()
}

/// An AGD dataset imported from R1 and R2 (`agd import -1 -2`) aligns to the records the FASTQ
/// files give, duplicates marked alike (Persona's pipeline: import, then align the dataset), in
/// chunks smaller than the aligner's so that pairs straddle chunks; a dataset given with R2 is
/// refused.
#[test]
fn fq2bam_of_a_dataset_equals_fq2bam_of_its_fastq() {
    let dir = tempfile::tempdir().unwrap();
    write_data(dir.path(), 3_000);
    let rt = Runtime::with_threads(2).unwrap();
    let ds = dir.path().join("reads.agd");
    let fastq = sortase::agd::FastqInput {
        read1: Some(dir.path().join("r1.fq").display().to_string()),
        read2: Some(dir.path().join("r2.fq").display().to_string()),
        ..Default::default()
    };
    let mut import = sortase::AgdImportJob::from_fastq(fastq, &ds);
    import.chunk_size = 777;
    assert_eq!(import.run(&rt).unwrap().records, 6_000);
    for markdup in [DuplicateMarking::Samblaster, DuplicateMarking::Picard] {
        let mut from_fastq = job(dir.path());
        from_fastq.markdup = markdup;
        from_fastq.output = OutputSpec::to_path(dir.path().join("fastq.bam"));
        let a = from_fastq.run(&rt).unwrap();
        let mut from_ds = from_fastq.clone();
        from_ds.reads1 = ds.clone();
        from_ds.reads2 = None;
        from_ds.output = OutputSpec::to_path(dir.path().join("ds.bam"));
        let b = from_ds.run(&rt).unwrap();
        assert_eq!(
            (a.reads, a.fragments, a.records, a.duplicate_records),
            (b.reads, b.fragments, b.records, b.duplicate_records)
        );
        assert!(a.duplicate_records > 100, "{a:?}");
        let (ra, rb) = (
            records(&dir.path().join("fastq.bam")),
            records(&dir.path().join("ds.bam")),
        );
        assert_eq!(ra.lines().count(), 6_000);
        assert!(ra == rb, "{markdup:?}: the records differ");
    }
    let mut both = job(dir.path());
    both.reads1 = ds.clone();
    let e = both.run(&rt).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Argument, "{e}");
    assert!(e.to_string().contains("give it alone"), "{e}");
}
