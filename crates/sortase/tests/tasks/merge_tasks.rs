//! Merge tasks (`MergeJob::plan`) against `MergeJob::run_with`: three generated coordinate-sorted
//! BAMs (made by `SortJob` from SAM text, with colliding @RG and @PG IDs), cut into many key ranges
//! by small `MergeRangeOptions`; the tasks run in reversed order, each through JSON on a fresh
//! one-thread runtime; the finished output and its CSI must be byte-identical to the merge's.

use super::fixtures::Rng;
use sortase::merge::MergeTaskOutput;
use sortase::tasks::{output_of, run_task_json, AnyTask};
use sortase::{ErrorKind, MergeJob, MergeRangeOptions, OutputSpec, Runtime, SortJob};
use std::path::{Path, PathBuf};

/// SAM text of `n` records in random order: placed reads on two references (runs of equal
/// positions), some unmapped; RG tags g0/g1; @RG and @PG lines that collide between inputs.
fn sam(input: u64, n: u64) -> String {
    let mut rng = Rng::new(input + 1);
    let mut text = format!(
        "@HD\tVN:1.6\tSO:unsorted\n@SQ\tSN:chr1\tLN:100000\n@SQ\tSN:chr2\tLN:50000\n\
         @RG\tID:g0\tSM:s{input}\n@RG\tID:g1\tSM:shared\n@PG\tID:aligner\tPN:bwa\tVN:0.{input}\n"
    );
    for i in 0..n {
        let len = 80 + rng.below(40) as usize;
        let seq: String = (0..len)
            .map(|_| b"ACGT"[rng.below(4) as usize] as char)
            .collect();
        let qual: String = (0..len)
            .map(|_| (b'#' + rng.below(30) as u8) as char)
            .collect();
        let rg = rng.below(2);
        if rng.below(15) == 0 {
            text.push_str(&format!(
                "u{input}_{i}\t4\t*\t0\t0\t*\t*\t0\t0\t{seq}\t{qual}\tRG:Z:g{rg}\n"
            ));
        } else {
            let (chr, pos) = (1 + rng.below(2), 1 + rng.below(2000) * 20);
            text.push_str(&format!(
                "r{input}_{i}\t0\tchr{chr}\t{pos}\t60\t{len}M\t*\t0\t0\t{seq}\t{qual}\tRG:Z:g{rg}\n"
            ));
        }
    }
    text
}

/// Three sorted BAM inputs in `dir`.
fn inputs(dir: &Path) -> Vec<String> {
    let rt = Runtime::with_threads(2).unwrap();
    (0..3)
        .map(|i| {
            let sam_path = dir.join(format!("in{i}.sam"));
            std::fs::write(&sam_path, sam(i, 3000 + 500 * i)).unwrap();
            let bam = dir.join(format!("in{i}.bam"));
            SortJob::new(sam_path.to_str().unwrap(), OutputSpec::to_path(&bam))
                .run(&rt)
                .unwrap();
            bam.display().to_string()
        })
        .collect()
}

const OPTIONS: MergeRangeOptions = MergeRangeOptions {
    sample_every: 16 << 10,
    min_range_bytes: 16 << 10,
};

/// Merges through tasks and with `MergeJob::run_with`; returns the pairs of files (data, index).
fn merge_both(job: &MergeJob, dir: &Path, name: &str) -> Vec<(PathBuf, PathBuf)> {
    let output = |what: &str| OutputSpec {
        path: Some(dir.join(format!("{name}.{what}.bam"))),
        write_index: true,
        ..OutputSpec::default()
    };
    let rt = Runtime::with_threads(2).unwrap();
    let tasks_job = MergeJob {
        output: output("tasks"),
        ..job.clone()
    };
    let plan = tasks_job.plan_with(&rt, &OPTIONS).unwrap();
    assert!(plan.ranges() > 6, "{name}: {} key ranges", plan.ranges());
    let plan: sortase::MergeTaskPlan =
        serde_json::from_str(&serde_json::to_string(&plan).unwrap()).unwrap();
    let mut tasks = plan.tasks(5);
    assert_eq!(tasks.len(), 5);
    tasks.reverse();
    let outputs: Vec<_> = tasks
        .into_iter()
        .map(|t| {
            let json = serde_json::to_string(&AnyTask::from(t)).unwrap();
            let worker = Runtime::with_threads(1).unwrap();
            let out = run_task_json(&json, &worker).unwrap_or_else(|e| panic!("{e}"));
            output_of::<MergeTaskOutput>(&out, "merge")
                .expect("a merge task returns a merge output")
        })
        .collect();
    let report = if name == "combined" {
        // The finish with no serial data path, through the plan's JSON face: layout (index from
        // the sidecars), the place tasks in reverse order, commit.
        let plan_json = serde_json::to_string(&sortase::tasks::Plan::Merge {
            plan: Box::new(plan.clone()),
            tasks: 5,
        })
        .unwrap();
        let outputs_json = serde_json::to_string(
            &outputs
                .iter()
                .map(|o| serde_json::json!({ "merge": o }))
                .collect::<Vec<_>>(),
        )
        .unwrap();
        let layout = sortase::tasks::layout_json(&plan_json, &outputs_json, true, &rt).unwrap();
        let places: Vec<serde_json::Value> =
            serde_json::from_str(&sortase::tasks::place_tasks_json(&layout).unwrap()).unwrap();
        assert_eq!(places.len(), 5);
        for t in places.iter().rev() {
            run_task_json(&t.to_string(), &Runtime::with_threads(1).unwrap()).unwrap();
        }
        serde_json::from_str(&sortase::tasks::commit_json(&layout).unwrap()).unwrap()
    } else {
        plan.finish(&outputs, &rt).unwrap()
    };
    assert!(
        !plan.work_dir().exists(),
        "finish leaves the work directory"
    );
    let single = MergeJob {
        output: output("single"),
        ..job.clone()
    }
    .run_with(&rt, &OPTIONS)
    .unwrap();
    assert_eq!(single.method, sortase::MergeMethod::KeyRanges);
    assert_eq!(report.ranges, single.ranges);
    assert_eq!(report.warnings, single.warnings);
    assert_eq!(report.outputs.len(), 2);
    report.outputs.into_iter().zip(single.outputs).collect()
}

#[test]
fn merge_tasks_write_the_bytes_of_the_merge() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = inputs(dir.path());
    let base = MergeJob {
        seed: Some(7),
        ..MergeJob::new(inputs.clone(), OutputSpec::default())
    };
    let combined = MergeJob {
        combine_rg: true,
        combine_pg: true,
        attach_rg: true,
        ..base.clone()
    };
    for (name, job) in [("plain", base), ("combined", combined)] {
        let files = merge_both(&job, dir.path(), name);
        assert!(files[1].0.extension().unwrap() == "csi", "{:?}", files[1]);
        for (t, s) in files {
            let (t_bytes, s_bytes) = (std::fs::read(&t).unwrap(), std::fs::read(&s).unwrap());
            assert!(t_bytes.len() > 100, "{}", t.display());
            assert!(
                t_bytes == s_bytes,
                "{name}: {} differs from {}",
                t.display(),
                s.display()
            );
        }
    }

    // SAM input: only the one-thread merge applies, which has no tasks.
    let sam_input = dir.path().join("in0.sam").display().to_string();
    let job = MergeJob::new(
        vec![sam_input, inputs[1].clone()],
        OutputSpec::to_path(dir.path().join("x.bam")),
    );
    let e = job.plan(&Runtime::with_threads(1).unwrap()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Argument);
    assert!(
        e.to_string().contains("one-thread merge has no tasks"),
        "{e}"
    );
}

/// Each task runs on copies of the inputs that hold only their first 64 KiB (the header) and the
/// task's `input_spans` (plus two blocks past a span's end, where its last record may start and
/// end), zeros elsewhere: the finished output is still the merge's, so the spans cover every byte
/// a task reads (a read of the zeros fails: they are no BGZF block).
#[test]
fn merge_tasks_read_only_their_input_spans() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = inputs(dir.path());
    let job = MergeJob {
        seed: Some(3),
        ..MergeJob::new(
            inputs.clone(),
            OutputSpec::to_path(dir.path().join("spans.bam")),
        )
    };
    let rt = Runtime::with_threads(2).unwrap();
    let plan = job.plan_with(&rt, &OPTIONS).unwrap();
    let tasks = plan.tasks(4);
    assert_eq!(tasks.len(), 4);
    let mut outputs = Vec::new();
    let mut kept_total = 0;
    let input_bytes: u64 = inputs
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    for (n, task) in tasks.into_iter().enumerate() {
        let spans = task.input_spans().unwrap();
        assert!(!spans.is_empty());
        let copies = dir.path().join(format!("copies{n}"));
        std::fs::create_dir(&copies).unwrap();
        for input in &inputs {
            let data = std::fs::read(input).unwrap();
            let mut sparse = vec![0u8; data.len()];
            let mut keep = |a: usize, b: usize| {
                let b = b.min(data.len());
                sparse[a..b].copy_from_slice(&data[a..b]);
            };
            keep(0, 1 << 16);
            for s in spans.iter().filter(|s| s.path.to_str() == Some(input)) {
                let end = s.end.map_or(data.len(), |e| e as usize + (2 << 16));
                keep(s.start as usize, end);
                kept_total += end.min(data.len()) - s.start as usize;
            }
            let name = Path::new(input).file_name().unwrap();
            std::fs::write(copies.join(name), sparse).unwrap();
        }
        let json = serde_json::to_string(&AnyTask::from(task)).unwrap();
        let here = serde_json::to_string(dir.path().to_str().unwrap()).unwrap();
        let there = serde_json::to_string(copies.to_str().unwrap()).unwrap();
        // Input paths only: the part files stay in the plan's work directory.
        let json = json.replace(
            &format!("{}/in", &here[1..here.len() - 1]),
            &format!("{}/in", &there[1..there.len() - 1]),
        );
        let out = run_task_json(&json, &Runtime::with_threads(1).unwrap())
            .unwrap_or_else(|e| panic!("task {n}: {e}"));
        outputs.push(output_of::<MergeTaskOutput>(&out, "merge").expect("a merge output"));
    }
    // The spans are a fraction of the inputs per task, not whole inputs.
    assert!(
        (kept_total as u64) < input_bytes * 3,
        "{kept_total} bytes kept for 4 tasks of {input_bytes}"
    );
    plan.finish(&outputs, &rt).unwrap();
    let single = dir.path().join("single.bam");
    MergeJob {
        output: OutputSpec::to_path(&single),
        ..job.clone()
    }
    .run_with(&rt, &OPTIONS)
    .unwrap();
    assert!(
        std::fs::read(dir.path().join("spans.bam")).unwrap() == std::fs::read(&single).unwrap()
    );
}
