//! Markdup tasks of query-grouped input (samblaster's mode, `sortase::tasks::markdup`) against
//! `MarkdupJob::run`: on a name-sorted BAM (built with `SortJob`) cut into byte ranges, every
//! stage's tasks run in reverse order; the assembled output must be byte-identical to the one
//! machine's, and a refused or aborted plan leaves nothing behind.

use super::fixtures::{lcg, sam_to_bam};
use sortase::markdup::Mode;
use sortase::tasks::markdup::{MarkdupPlan, MarkdupTask, MarkdupTaskOutput};
use sortase::tasks::{Layout, MarkdupTasks};
use sortase::{ErrorKind, MarkdupJob, Order, OutputSpec, Program, Runtime};
use std::path::{Path, PathBuf};

fn name_grouped_bam(dir: &Path) -> PathBuf {
    name_grouped_bam_with(dir, 0)
}

/// The test data, with a read name of `giant` secondary alignments (plus its pair) among them:
/// a group longer than several ranges.
fn name_grouped_bam_with(dir: &Path, giant: usize) -> PathBuf {
    let mut sam =
        String::from("@HD\tVN:1.6\tSO:unsorted\n@SQ\tSN:c1\tLN:100000\n@SQ\tSN:c2\tLN:50000\n");
    let mut seed = 11;
    let seq: String = (0..120).map(|i| b"ACGT"[i % 4] as char).collect();
    let qual: String = "I".repeat(120);
    for i in 0..3000 {
        if i == 1500 && giant > 0 {
            let name = "q01500g";
            sam += &format!("{name}\t99\tc1\t100\t60\t120M\t=\t200\t220\t{seq}\t{qual}\n");
            for k in 0..giant {
                let pos = 1 + k % 900;
                sam += &format!("{name}\t355\tc1\t{pos}\t0\t120M\t=\t100\t0\t{seq}\t{qual}\n");
            }
            sam += &format!("{name}\t147\tc1\t200\t60\t120M\t=\t100\t-220\t{seq}\t{qual}\n");
        }
        let ref1 = if lcg(&mut seed).is_multiple_of(3) {
            "c2"
        } else {
            "c1"
        };
        let pos = 1 + lcg(&mut seed) % 400;
        let mpos = pos + 50 + lcg(&mut seed) % 40;
        let name = format!("q{i:05}");
        match lcg(&mut seed) % 10 {
            0 => {
                // Unmapped pair, and a secondary of a pair.
                sam += &format!("{name}\t77\t*\t0\t0\t*\t*\t0\t0\t{seq}\t{qual}\n");
                sam += &format!("{name}\t141\t*\t0\t0\t*\t*\t0\t0\t{seq}\t{qual}\n");
            }
            1 => {
                sam += &format!("{name}\t0\t{ref1}\t{pos}\t60\t120M\t*\t0\t0\t{seq}\t{qual}\n");
            }
            _ => {
                sam += &format!(
                    "{name}\t99\t{ref1}\t{pos}\t60\t120M\t=\t{mpos}\t170\t{seq}\t{qual}\n"
                );
                sam += &format!(
                    "{name}\t355\t{ref1}\t{mpos}\t0\t5S115M\t=\t{pos}\t0\t{seq}\t{qual}\n"
                );
                sam += &format!(
                    "{name}\t147\t{ref1}\t{mpos}\t60\t10S110M\t=\t{pos}\t-170\t{seq}\t{qual}\n"
                );
            }
        }
    }
    sam_to_bam(dir, sam, Order::Name)
}

/// Ranges whose first read name continues the last one of the range before (their head
/// group is that range's): the case the driver must leave to the range before.
fn continued(maps: &[sortase::tasks::markdup::MdMapOutput]) -> usize {
    let mut last: &[u8] = &[];
    let mut n = 0;
    for m in maps {
        if m.in_range > 0 {
            n += usize::from(!last.is_empty() && m.first_name == last);
            last = &m.last_name;
        }
    }
    n
}

fn run_tasks(plan: &MarkdupPlan, rt: &Runtime) -> Layout {
    run_tasks_counting(plan, rt).0
}

fn run_tasks_counting(plan: &MarkdupPlan, rt: &Runtime) -> (Layout, usize) {
    let run = |tasks: Vec<MarkdupTask>| -> Vec<MarkdupTaskOutput> {
        tasks.iter().rev().map(|t| t.run(rt).unwrap()).collect()
    };
    let maps: Vec<_> = run(plan.map_tasks())
        .into_iter()
        .filter_map(|o| match o {
            MarkdupTaskOutput::Map(m) => Some(*m),
            _ => None,
        })
        .collect();
    let reduces: Vec<_> = run(plan.reduce_tasks(&maps).unwrap())
        .into_iter()
        .filter_map(|o| match o {
            MarkdupTaskOutput::Reduce(r) => Some(r),
            _ => None,
        })
        .collect();
    let encodes: Vec<_> = run(plan.encode_tasks(&maps, &reduces).unwrap())
        .into_iter()
        .filter_map(|o| match o {
            MarkdupTaskOutput::Encode(e) => Some(e),
            _ => None,
        })
        .collect();
    let mut sorted = maps.clone();
    sorted.sort_by_key(|m| m.part);
    let layout = plan.layout(&maps, &reduces, &encodes, true, rt).unwrap();
    (layout, continued(&sorted))
}

#[test]
fn a_group_longer_than_several_ranges_is_marked_by_the_range_it_starts_in() {
    let dir = tempfile::tempdir().unwrap();
    let bam = name_grouped_bam_with(dir.path(), 1500);
    let rt = Runtime::with_threads(1).unwrap();
    let one = dir.path().join("one.bam");
    let many = dir.path().join("many.bam");
    let mut job = MarkdupJob::new(bam.to_str().unwrap(), OutputSpec::to_path(&one));
    job.program = None;
    let report = job.run(&rt).unwrap();
    job.output.path = Some(many.clone());
    let plan = job.plan_tasks(&rt, 64 << 10, Some(3)).unwrap();
    let (layout, continued) = run_tasks_counting(&plan, &rt);
    // The giant group (~0.5 MB) covers several 64 KiB ranges; groups cut by ranges are common.
    assert!(continued >= 8, "{continued} ranges continue a group");
    finish_as_one_machine(&layout, &report, &rt, &one, &many, "a giant group");
}

/// Places and commits the tasks' output; its report and bytes must be the one machine's.
fn finish_as_one_machine(
    layout: &Layout,
    report: &sortase::markdup::MarkdupReport,
    rt: &Runtime,
    one: &Path,
    many: &Path,
    case: &str,
) {
    for t in layout.place_tasks() {
        t.run(rt).unwrap();
    }
    let value = layout.commit().unwrap();
    assert_eq!(value["records"], report.records);
    assert_eq!(value["duplicate_records"], report.duplicate_records);
    assert_eq!(value["duplicate_groups"], report.duplicate_groups);
    assert_eq!(value["read_names"], report.read_names);
    assert!(
        std::fs::read(one).unwrap() == std::fs::read(many).unwrap(),
        "{case}: the bytes differ"
    );
}

#[test]
fn tasks_write_the_bytes_of_one_machine() {
    let dir = tempfile::tempdir().unwrap();
    let bam = name_grouped_bam(dir.path());
    let rt = Runtime::with_threads(1).unwrap();
    for (level, memory, reduce) in [
        (None, 200_000, None),
        (Some(0), 64 << 10, Some(3)),
        (Some(6), 1 << 30, None),
    ] {
        let one = dir.path().join("one.bam");
        let many = dir.path().join("many.bam");
        let mut job = MarkdupJob::new(bam.to_str().unwrap(), OutputSpec::to_path(&one));
        job.output.level = level;
        job.program = Some(Program {
            command_line: "sortase markdup in.bam".into(),
        });
        let report = job.run(&rt).unwrap();
        assert!(report.duplicate_groups > 100, "{report:?}");
        job.output.path = Some(many.clone());
        let plan = job.plan_tasks(&rt, memory, reduce).unwrap();
        if memory < 1 << 20 {
            assert!(plan.ranges().len() > 2, "{}", plan.ranges().len());
        }
        let layout = run_tasks(&plan, &rt);
        let case = format!("level {level:?}, memory {memory}");
        finish_as_one_machine(&layout, &report, &rt, &one, &many, &case);
        assert!(!plan.work_dir().exists());
    }
}

#[test]
fn refused_options_and_an_aborted_plan_leave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let bam = name_grouped_bam(dir.path());
    let rt = Runtime::with_threads(1).unwrap();
    let out = dir.path().join("out.bam");
    let mut job = MarkdupJob::new(bam.to_str().unwrap(), OutputSpec::to_path(&out));
    job.remove_duplicates = true;
    let e = job.plan_tasks(&rt, 1 << 20, None).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Argument, "{e}");
    job.remove_duplicates = false;
    job.mode = Mode::Coordinate;
    assert!(job.plan_tasks(&rt, 1 << 20, None).is_err());
    job.mode = Mode::Auto;
    let plan = job.plan_tasks(&rt, 100_000, None).unwrap();
    let maps: Vec<_> = plan
        .map_tasks()
        .iter()
        .map(|t| t.run(&rt).unwrap())
        .collect();
    assert!(plan.work_dir().exists());
    drop(maps);
    plan.abort().unwrap();
    assert!(!plan.work_dir().exists());
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}"); // in.sam, in.bam
}
