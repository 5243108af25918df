//! The JSON face of jobs as tasks (`sortase::tasks::plans`, what the Dask driver calls): a sort,
//! a flagstat and an index planned, run stage by stage and finished through JSON text only give
//! the single-machine jobs' results; a bad kind or stage is an argument error; abort removes the
//! sort's work directory.

use sortase::tasks::{abort_json, finish_json, plan_json, run_task_json, stage_tasks_json};
use sortase::{
    ErrorKind, FlagstatJob, FlagstatReport, IndexJob, Order, OutputSpec, Runtime, SortJob,
};
use std::path::Path;

/// A BAM of `n` records in name order (so unsorted by coordinate), written by `SortJob`.
fn bam(dir: &Path, n: usize) -> String {
    let mut sam = String::from("@SQ\tSN:chr1\tLN:100000\n@SQ\tSN:chr2\tLN:100000\n");
    for i in 0..n {
        let (chr, pos, flag) = (
            (i * 7919) % 2 + 1,
            (i * 104_729) % 99_000 + 1,
            [0, 16, 1024][i % 3],
        );
        sam.push_str(&format!(
            "r{i}\t{flag}\tchr{chr}\t{pos}\t60\t8M\t*\t0\t0\tACGTACGT\tIIIIIIII\n"
        ));
    }
    let sam_path = dir.join("in.sam");
    std::fs::write(&sam_path, sam).unwrap();
    let out = dir.join("in.bam");
    let job = SortJob {
        order: Order::Name,
        program: None,
        ..SortJob::new(sam_path.to_str().unwrap(), OutputSpec::to_path(&out))
    };
    job.run(&Runtime::with_threads(1).unwrap()).unwrap();
    out.to_str().unwrap().to_owned()
}

/// Runs a job through the JSON face: plan, every stage's tasks one by one, finish.
fn run_json(kind: &str, job: &str, cut: &str, stages: &[&str], rt: &Runtime) -> String {
    let plan = plan_json(kind, job, cut, rt).unwrap();
    let mut outputs = "[]".to_owned();
    for stage in stages {
        let tasks: Vec<serde_json::Value> =
            serde_json::from_str(&stage_tasks_json(&plan, stage, &outputs, rt).unwrap()).unwrap();
        let done: Vec<serde_json::Value> = tasks
            .iter()
            .rev()
            .map(|t| serde_json::from_str(&run_task_json(&t.to_string(), rt).unwrap()).unwrap())
            .collect();
        outputs = serde_json::to_string(&done).unwrap();
    }
    finish_json(&plan, &outputs, rt).unwrap()
}

#[test]
fn sort_flagstat_and_index_through_json_match_the_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let input = bam(dir.path(), 3000);
    let rt = Runtime::with_threads(1).unwrap();

    let one = dir.path().join("one.bam");
    let mut job = SortJob::new(&input, OutputSpec::to_path(&one));
    job.output.write_index = true;
    job.program = None;
    job.run(&rt).unwrap();
    let json = dir.path().join("json.bam");
    job.output.path = Some(json.clone());
    let report = run_json(
        "sort",
        &serde_json::to_string(&job).unwrap(),
        r#"{"task_memory": 65536, "reduce_tasks": 2}"#,
        &["count", "map", "reduce"],
        &rt,
    );
    assert!(report.contains("\"records\":3000"), "{report}");
    assert_eq!(std::fs::read(&json).unwrap(), std::fs::read(&one).unwrap());
    let csi = |p: &Path| std::fs::read(format!("{}.csi", p.display())).unwrap();
    assert_eq!(csi(&json), csi(&one));

    let sorted = one.to_str().unwrap();
    let flagstat = FlagstatJob::new(sorted);
    let text = run_json(
        "flagstat",
        &serde_json::to_string(&flagstat).unwrap(),
        r#"{"tasks": 3}"#,
        &["tasks"],
        &rt,
    );
    let parts: FlagstatReport = serde_json::from_str(&text).unwrap();
    assert_eq!(parts.to_text(), flagstat.run(&rt).unwrap().to_text());

    let mut index = IndexJob::new(sorted);
    index.output = Some(dir.path().join("one.bai"));
    index.run(&rt).unwrap();
    index.output = Some(dir.path().join("json.bai"));
    run_json(
        "index",
        &serde_json::to_string(&index).unwrap(),
        "{}",
        &["tasks"],
        &rt,
    );
    assert_eq!(
        std::fs::read(dir.path().join("json.bai")).unwrap(),
        std::fs::read(dir.path().join("one.bai")).unwrap()
    );
}

#[test]
fn bad_requests_are_argument_errors_and_abort_cleans_up() {
    let dir = tempfile::tempdir().unwrap();
    let input = bam(dir.path(), 10);
    let rt = Runtime::with_threads(1).unwrap();
    let job = serde_json::to_string(&FlagstatJob::new(&input)).unwrap();
    let err = plan_json("markdup", &job, "{}", &rt).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Argument);
    let plan = plan_json("flagstat", &job, "{}", &rt).unwrap();
    let err = stage_tasks_json(&plan, "map", "[]", &rt).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Argument);

    let sort = SortJob::new(&input, OutputSpec::to_path(dir.path().join("out.bam")));
    let plan = plan_json("sort", &serde_json::to_string(&sort).unwrap(), "{}", &rt).unwrap();
    let work: serde_json::Value = serde_json::from_str(&plan).unwrap();
    let work_dir = work["sort"]["work_dir"].as_str().unwrap().to_owned();
    assert!(Path::new(&work_dir).is_dir());
    abort_json(&plan).unwrap();
    assert!(!Path::new(&work_dir).exists());
    assert!(!dir.path().join("out.bam").exists());
}
