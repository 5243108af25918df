//! An AGD dataset's sort tasks (`SortJob::plan_dataset`, crates/sortjobs `sort_tasks/agd_map.rs`)
//! against `SortJob::run` of the dataset's export: the same bytes. (A unit test of agd_map.rs until
//! the sort moved below the facade, whose AGD import and export jobs it needs.)

use super::test_data;
use sortase::agd::{AgdExportJob, AgdImportJob};
use sortase::tasks::{CountOutput, PlanOptions, SortTask, SortTaskOutput};
use sortase::{Order, OutputSpec, Runtime, SortJob};
use std::path::Path;

/// Runs every task of `tasks` on `rt`, in reverse order (tasks of a stage run in any order).
fn run(tasks: Vec<SortTask>, rt: &Runtime) -> Vec<SortTaskOutput> {
    tasks.iter().rev().map(|t| t.run(rt).unwrap()).collect()
}

/// Sorts dataset `ds` into `out` through its tasks (`maps` map tasks; 0: several).
fn sort_dataset(
    ds: &Path,
    out: &Path,
    order: &Order,
    task_memory: usize,
    maps: usize,
    rt: &Runtime,
) {
    let mut job = SortJob::new(ds.to_str().unwrap(), OutputSpec::to_path(out));
    job.order = order.clone();
    job.program = None;
    let options = PlanOptions {
        task_memory,
        reduce_tasks: Some(3),
    };
    let plan = job.plan_dataset_with(rt, &options).unwrap();
    assert!(plan.count_tasks().is_empty());
    let map_tasks = plan.map_tasks(&[]).unwrap();
    let n = map_tasks.len();
    // One task of all chunks, one per chunk, or (about 1 MB of records) several runs.
    if maps > 0 {
        assert_eq!(n, maps, "{order:?} {task_memory}");
    } else {
        assert!(n > 1 && n < 12, "{n} map tasks");
    }
    let maps: Vec<_> = run(map_tasks, rt)
        .into_iter()
        .filter_map(SortTaskOutput::into_map)
        .collect();
    let parts: Vec<_> = run(plan.reduce_tasks(&maps, rt).unwrap(), rt)
        .into_iter()
        .filter_map(SortTaskOutput::into_reduce)
        .collect();
    assert_eq!(plan.finish(&parts, rt).unwrap().records, 3000);
    assert!(!plan.work_dir().exists());
}

#[test]
fn dataset_sort_tasks_write_the_sort_of_the_export() {
    let dir = tempfile::tempdir().unwrap();
    let rt = Runtime::with_threads(2).unwrap();
    let bam = test_data::sorted_bam(dir.path(), 3000);
    let ds = dir.path().join("ds");
    AgdImportJob {
        chunk_size: 250,
        ..AgdImportJob::new(bam.to_str().unwrap(), &ds)
    }
    .run(&rt)
    .unwrap();
    let exported = dir.path().join("exported.bam");
    AgdExportJob::new(&ds, OutputSpec::to_path(&exported))
        .run(&rt)
        .unwrap();
    for (order, task_memory, maps) in [
        (Order::Name, 1 << 30, 1),
        (Order::Name, 1, 12),
        (Order::Coordinate, 200_000, 0),
    ] {
        let out = dir.path().join("out.bam");
        sort_dataset(&ds, &out, &order, task_memory, maps, &rt);
        let one = dir.path().join("one.bam");
        let mut reference = SortJob::new(exported.to_str().unwrap(), OutputSpec::to_path(&one));
        reference.order = order.clone();
        reference.program = None;
        reference.run(&rt).unwrap();
        assert_eq!(
            std::fs::read(&out).unwrap(),
            std::fs::read(&one).unwrap(),
            "{order:?} {task_memory}"
        );
    }
    // The count stage has no outputs to give.
    let job = SortJob::new(
        ds.to_str().unwrap(),
        OutputSpec::to_path(dir.path().join("x.bam")),
    );
    let plan = job.plan_dataset(&rt).unwrap();
    let bogus = CountOutput {
        range: 0,
        start: 0,
        end: None,
        records: 1,
        record_bytes: 1,
        error: None,
    };
    assert!(plan.map_tasks(&[bogus]).is_err());
    plan.abort().unwrap();
}
