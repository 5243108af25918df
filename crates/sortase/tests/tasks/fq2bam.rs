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

/// The distributed fq2bam (`sortase::tasks::fq2bam`: crates/align `plan.rs` and `tasks.rs`):
/// its stages driven through the JSON protocol write the bytes of one machine.
mod distributed {
    use super::revcomp;
    use serde_json::Value;
    use sortase::tasks::fq2bam::{index_loads, Fq2BamTask, Fq2BamTasksJob};
    use sortase::tasks::{plan_json, run_task_json, stage_tasks_json, PlanOptions, Task};
    use sortase::{DuplicateMarking, ErrorKind, Fq2BamJob, OutputSpec, Result, Runtime};
    use std::io::Write;
    use std::path::{Path, PathBuf};
    use std::sync::{Mutex, MutexGuard};

    /// The tests here run align tasks, which share this process's index cache and its load count
    /// (`index_loads`): one at a time, so that a test's count is its own.
    fn one_at_a_time() -> MutexGuard<'static, ()> {
        static ALIGN_TASKS: Mutex<()> = Mutex::new(());
        ALIGN_TASKS.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *seed >> 33
    }

    fn bases(seed: &mut u64, n: usize) -> Vec<u8> {
        (0..n).map(|_| b"ACGT"[(lcg(seed) % 4) as usize]).collect()
    }

    /// ref.fa of two contigs and `pairs` FR pairs of 100 bases, a tenth exact copies of the pair
    /// before (duplicates), as r1.fq and r2.fq.
    fn simulate(dir: &Path, pairs: usize) -> (PathBuf, PathBuf, PathBuf) {
        let mut seed = 29;
        let contigs = [bases(&mut seed, 30_000), bases(&mut seed, 12_000)];
        let mut fa = String::new();
        for (i, c) in contigs.iter().enumerate() {
            fa += &format!(">c{}\n{}\n", i + 1, String::from_utf8_lossy(c));
        }
        let (mut r1, mut r2) = (String::new(), String::new());
        let mut last: Option<(Vec<u8>, Vec<u8>)> = None;
        for i in 0..pairs {
            let (a, b) = match last.take() {
                Some(prev) if lcg(&mut seed).is_multiple_of(10) => prev,
                _ => {
                    let c = &contigs[(lcg(&mut seed) % 2) as usize];
                    let ins = 200 + (lcg(&mut seed) % 300) as usize;
                    let s = (lcg(&mut seed) as usize) % (c.len() - ins);
                    let frag = &c[s..s + ins];
                    let mut a = frag[..100].to_vec();
                    if lcg(&mut seed).is_multiple_of(7) {
                        a[50] = b"ACGT"[(lcg(&mut seed) % 4) as usize];
                    }
                    (a, revcomp(frag)[..100].to_vec())
                }
            };
            let q = "I".repeat(100);
            r1 += &format!("@p{i}/1\n{}\n+\n{q}\n", String::from_utf8_lossy(&a));
            r2 += &format!("@p{i}/2\n{}\n+\n{q}\n", String::from_utf8_lossy(&b));
            last = Some((a, b));
        }
        let paths = (dir.join("ref.fa"), dir.join("r1.fq"), dir.join("r2.fq"));
        std::fs::write(&paths.0, fa).unwrap();
        std::fs::write(&paths.1, r1).unwrap();
        std::fs::write(&paths.2, r2).unwrap();
        paths
    }

    /// Runs every task of a stage (in reverse order: any order goes), through JSON.
    fn stage(plan: &str, name: &str, inputs: &[Value], rt: &Runtime) -> Vec<Value> {
        let inputs = serde_json::to_string(inputs).unwrap();
        let tasks: Vec<Value> =
            serde_json::from_str(&stage_tasks_json(plan, name, &inputs, rt).unwrap()).unwrap();
        tasks
            .iter()
            .rev()
            .map(|t| {
                let out = run_task_json(&t.to_string(), rt).unwrap();
                serde_json::from_str(&out).unwrap()
            })
            .collect()
    }

    #[test]
    fn tasks_write_the_bytes_of_one_machine_and_load_the_index_once() {
        let _serial = one_at_a_time();
        let dir = tempfile::tempdir().unwrap();
        let (fa, r1, r2) = simulate(dir.path(), 2_000);
        let rt = Runtime::with_threads(2).unwrap();
        let one = dir.path().join("one.bam");
        let mut output = OutputSpec::to_path(&one);
        output.write_index = true;
        let mut job = Fq2BamJob::new(&fa, &r1, output);
        job.reads2 = Some(r2.clone());
        let report = job.run(&rt).unwrap();
        assert!(report.duplicate_templates > 100, "{report:?}");
        let loads = index_loads();
        for markdup in [DuplicateMarking::Samblaster, DuplicateMarking::None] {
            let many = dir.path().join("many.bam");
            job.output.path = Some(many.clone());
            job.markdup = markdup;
            let mut reference = job.clone();
            reference.output.path = Some(one.clone());
            reference.run(&rt).unwrap();
            let spec = Fq2BamTasksJob {
                job: job.clone(),
                chunk_templates: Some(450),
                scan_bytes: None,
                names: None,
            };
            let plan = plan_json(
                "fq2bam",
                &serde_json::to_string(&spec).unwrap(),
                r#"{"reduce_tasks": 3}"#,
                &rt,
            )
            .unwrap();
            let scans = stage(&plan, "scan", &[], &rt);
            assert!(scans.is_empty(), "plain FASTQ: no scans");
            let splits = stage(&plan, "split", &scans, &rt);
            let aligns = stage(&plan, "align", &splits, &rt);
            assert_eq!(aligns.len(), 5);
            let dedups = stage(&plan, "dedup", &aligns, &rt);
            assert_eq!(
                dedups.len(),
                if markdup == DuplicateMarking::None {
                    0
                } else {
                    3
                }
            );
            let maps = stage(
                &plan,
                "map",
                &[aligns.clone(), dedups.clone()].concat(),
                &rt,
            );
            let reduces = stage(&plan, "reduce", &[aligns.clone(), maps].concat(), &rt);
            let all = [aligns, dedups, reduces].concat();
            let p: sortase::tasks::Plan = serde_json::from_str(&plan).unwrap();
            let sortase::tasks::Plan::Fq2Bam(fq) = &p else {
                panic!("not an fq2bam plan")
            };
            let work_dir = fq.work_dir().to_path_buf();
            let layout = p.layout(&all, true, &rt).unwrap();
            for t in layout.place_tasks() {
                t.run(&rt).unwrap();
            }
            let value = layout.commit().unwrap();
            assert_eq!(value["fragments"], 2_000);
            assert!(
                std::fs::read(&one).unwrap() == std::fs::read(&many).unwrap(),
                "{markdup:?}: the bytes differ"
            );
            // The index, as --write-index names it (CSI by default, as samtools).
            let index = |p: &Path| std::fs::read(format!("{}.csi", p.display())).unwrap();
            assert_eq!(index(&one), index(&many));
            assert!(!work_dir.exists());
        }
        // The same index and options: loaded by the first align task of this process only.
        assert_eq!(index_loads(), loads + 1);
    }

    /// `text` as BGZF with a block every `every` bytes, so that records straddle blocks.
    fn bgzf(text: &[u8], path: &Path, every: usize) {
        let mut w = sortase_bgzf::ParallelWriter::new(
            std::fs::File::create(path).unwrap(),
            sortase_bgzf::WriterOptions::new(1, sortase_bgzf::CompressionLevel::samtools(1)),
        );
        for piece in text.chunks(every) {
            w.write_all(piece).unwrap();
            w.end_block().unwrap();
        }
        w.finish().unwrap();
    }

    /// Runs a planned job's stages as a driver does (from its stage graph, each stage's tasks in
    /// reverse order) and assembles the output; the tasks per stage, or the first error (the
    /// plan aborted).
    fn drive(plan: &str, rt: &Runtime) -> std::result::Result<Vec<(String, usize)>, String> {
        let p: sortase::tasks::Plan = serde_json::from_str(plan).unwrap();
        let graph = p.stage_graph();
        let run = || -> Result<Vec<(String, usize)>> {
            let mut done = std::collections::HashMap::<String, Vec<Value>>::new();
            let mut counts = Vec::new();
            for st in &graph.stages {
                let taken: Vec<Value> = st.takes.iter().flat_map(|n| done[n].clone()).collect();
                let mut outputs = Vec::new();
                for t in p.stage_tasks(&st.name, &taken, rt)?.iter().rev() {
                    outputs.push(t.run(rt)?);
                }
                counts.push((st.name.clone(), outputs.len()));
                done.insert(st.name.clone(), outputs);
            }
            let all: Vec<Value> = graph.finish.iter().flat_map(|n| done[n].clone()).collect();
            let layout = p.layout(&all, true, rt)?;
            for t in layout.place_tasks() {
                t.run(rt)?;
            }
            layout.commit()?;
            Ok(counts)
        };
        run().map_err(|e| {
            p.abort().unwrap();
            e.to_string()
        })
    }

    #[test]
    fn bgzf_reads_are_cut_by_blocks_with_the_bytes_of_one_machine() {
        let _serial = one_at_a_time();
        let dir = tempfile::tempdir().unwrap();
        let (fa, r1, r2) = simulate(dir.path(), 1_500);
        let (z1, z2) = (dir.path().join("r1.fq.gz"), dir.path().join("r2.fq.gz"));
        bgzf(&std::fs::read(&r1).unwrap(), &z1, 3000);
        bgzf(&std::fs::read(&r2).unwrap(), &z2, 4100);
        let rt = Runtime::with_threads(2).unwrap();
        let one = dir.path().join("one.bam");
        let many = dir.path().join("many.bam");
        // One machine reads the same files (their names are in the header's @PG).
        let mut job = Fq2BamJob::new(&fa, &z1, OutputSpec::to_path(&one));
        job.reads2 = Some(z2.clone());
        job.run(&rt).unwrap();
        job.output.path = Some(many.clone());
        let spec = |job: &Fq2BamJob| {
            serde_json::to_string(&Fq2BamTasksJob {
                job: job.clone(),
                chunk_templates: Some(400),
                scan_bytes: Some(10_000),
                names: None,
            })
            .unwrap()
        };
        let plan = plan_json("fq2bam", &spec(&job), r#"{"reduce_tasks": 2}"#, &rt).unwrap();
        let counts = drive(&plan, &rt).unwrap();
        let count = |name: &str| counts.iter().find(|c| c.0 == name).unwrap().1;
        let scans = std::fs::metadata(&z1).unwrap().len().div_ceil(10_000)
            + std::fs::metadata(&z2).unwrap().len().div_ceil(10_000);
        assert_eq!(count("scan") as u64, scans);
        assert_eq!((count("split"), count("align")), (0, 4), "{counts:?}");
        assert!(
            std::fs::read(&one).unwrap() == std::fs::read(&many).unwrap(),
            "the bytes differ from one machine's"
        );

        // A name that differs in the middle of R2: the chunk's align task fails with the one
        // machine's message, records numbered from the file's start.
        let text = std::fs::read_to_string(&r2).unwrap();
        let bad = text.replacen("@p1000/2", "@x1000/2", 1);
        assert_ne!(bad, text);
        bgzf(bad.as_bytes(), &z2, 4100);
        job.output.path = Some(dir.path().join("bad.bam"));
        let want = job.run(&rt).unwrap_err().to_string();
        let plan = plan_json("fq2bam", &spec(&job), "{}", &rt).unwrap();
        assert_eq!(drive(&plan, &rt).unwrap_err(), want);
        // R2 shorter than R1: the scans disagree, the split task reads the files and fails as
        // one machine does.
        let short: String = text
            .lines()
            .take(4 * 1_200)
            .map(|l| format!("{l}\n"))
            .collect();
        bgzf(short.as_bytes(), &z2, 4100);
        let want = job.run(&rt).unwrap_err().to_string();
        let plan = plan_json("fq2bam", &spec(&job), "{}", &rt).unwrap();
        assert_eq!(drive(&plan, &rt).unwrap_err(), want);
        assert!(!dir.path().join("bad.bam").exists());
    }

    /// An AGD dataset of the reads (`agd import -1 -2`, chunks of an odd number of records, so
    /// pairs straddle chunks and the align tasks' runs of chunks): no scan or split task, and
    /// the bytes of one-machine `fq2bam` of the dataset, with either marking.
    #[test]
    fn a_dataset_of_reads_aligns_in_runs_of_chunks_with_the_bytes_of_one_machine() {
        let _serial = one_at_a_time();
        let dir = tempfile::tempdir().unwrap();
        let (fa, r1, r2) = simulate(dir.path(), 1_500);
        let ds = dir.path().join("reads.agd");
        let fastq = sortase::agd::FastqInput {
            read1: Some(r1.display().to_string()),
            read2: Some(r2.display().to_string()),
            ..Default::default()
        };
        let rt = Runtime::with_threads(2).unwrap();
        let mut import = sortase::AgdImportJob::from_fastq(fastq, &ds);
        import.chunk_size = 333;
        import.run(&rt).unwrap();
        for markdup in [DuplicateMarking::Samblaster, DuplicateMarking::None] {
            let (one, many) = (dir.path().join("one.bam"), dir.path().join("many.bam"));
            let mut job = Fq2BamJob::new(&fa, &ds, OutputSpec::to_path(&one));
            job.markdup = markdup;
            let report = job.run(&rt).unwrap();
            assert_eq!(report.fragments, 1_500);
            job.output.path = Some(many.clone());
            let spec = Fq2BamTasksJob {
                job: job.clone(),
                chunk_templates: Some(400),
                scan_bytes: None,
                names: None,
            };
            let spec = serde_json::to_string(&spec).unwrap();
            let plan = plan_json("fq2bam", &spec, r#"{"reduce_tasks": 2}"#, &rt).unwrap();
            let counts = drive(&plan, &rt).unwrap();
            let count = |name: &str| counts.iter().find(|c| c.0 == name).unwrap().1;
            // 3,000 records in 10 chunks of 333 (the last of 3), runs of >= 800 records: 4 runs,
            // each ending inside a pair.
            assert_eq!((count("scan"), count("split"), count("align")), (0, 0, 4));
            assert!(
                std::fs::read(&one).unwrap() == std::fs::read(&many).unwrap(),
                "{markdup:?}: the bytes differ from one machine's"
            );
        }
        // With R2 too: refused at plan time, as on one machine.
        let mut job = Fq2BamJob::new(&fa, &ds, OutputSpec::to_path(dir.path().join("x.bam")));
        job.reads2 = Some(r2);
        let spec = Fq2BamTasksJob {
            job: job.clone(),
            chunk_templates: None,
            scan_bytes: None,
            names: None,
        };
        let e = plan_json("fq2bam", &serde_json::to_string(&spec).unwrap(), "{}", &rt);
        assert!(e.unwrap_err().to_string().contains("give it alone"));
    }

    #[test]
    fn one_machine_checksums_prove_reads_and_records_with_either_marking() {
        let _serial = one_at_a_time();
        let dir = tempfile::tempdir().unwrap();
        let (fa, r1, r2) = simulate(dir.path(), 300);
        let rt = Runtime::with_threads(2).unwrap();
        let out = dir.path().join("c.bam");
        let mut job = Fq2BamJob::new(&fa, &r1, OutputSpec::to_path(&out));
        job.reads2 = Some(r2);
        job.checksums = true;
        for markdup in [DuplicateMarking::Samblaster, DuplicateMarking::Picard] {
            job.markdup = markdup;
            let report = job.run(&rt).unwrap();
            let c = report.checksums.expect("fq2bam reports its sums");
            assert_eq!((c.read, c.read.count), (c.written, 600), "{markdup:?}");
            assert!(report.duplicate_records > 0, "{markdup:?}");
            assert!(
                c.command.starts_with("samtools import -1 ")
                    && c.command
                        .ends_with(&format!("; samtools checksum {}", out.display())),
                "{}",
                c.command
            );
        }
        job.checksums = false;
        assert!(job.run(&rt).unwrap().checksums.is_none());
    }

    #[test]
    fn bad_input_fails_as_on_one_machine() {
        let _serial = one_at_a_time();
        let dir = tempfile::tempdir().unwrap();
        let (fa, r1, r2) = simulate(dir.path(), 50);
        let short = dir.path().join("short.fq");
        let text = std::fs::read_to_string(&r2).unwrap();
        std::fs::write(
            &short,
            text.lines().take(4 * 30).collect::<Vec<_>>().join("\n") + "\n",
        )
        .unwrap();
        let rt = Runtime::with_threads(1).unwrap();
        let mut job = Fq2BamJob::new(&fa, &r1, OutputSpec::to_path(dir.path().join("o.bam")));
        job.reads2 = Some(short);
        let want = job.run(&rt).unwrap_err().to_string();
        let plan = Fq2BamTasksJob {
            job: job.clone(),
            chunk_templates: Some(10),
            scan_bytes: None,
            names: None,
        }
        .plan(&rt, &PlanOptions::default())
        .unwrap();
        let Fq2BamTask::Split(split) = plan.split_tasks(&[]).remove(0) else {
            unreachable!()
        };
        let got = Task::run(&split, &rt).unwrap_err().to_string();
        assert_eq!(got, want);
        plan.abort().unwrap();
        assert!(!plan.work_dir().exists());
        job.reads2 = Some(r2);
        job.markdup = DuplicateMarking::Picard;
        let e = Fq2BamTasksJob {
            job: job.clone(),
            chunk_templates: None,
            scan_bytes: None,
            names: None,
        }
        .plan(&rt, &PlanOptions::default())
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Argument);
        job.markdup = DuplicateMarking::Samblaster;
        job.checksums = true;
        let e = Fq2BamTasksJob {
            job,
            chunk_templates: None,
            scan_bytes: None,
            names: None,
        }
        .plan(&rt, &PlanOptions::default())
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Argument);
        assert!(e.to_string().contains("checksums"), "{e}");
    }
}
