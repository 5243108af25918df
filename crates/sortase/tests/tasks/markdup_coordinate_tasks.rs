//! Markdup tasks of coordinate-sorted input (Picard's mode, `sortase::tasks::pmarkdup`) against
//! `MarkdupJob::run`: on a coordinate-sorted BAM (built with `SortJob`) cut into byte ranges,
//! every stage's tasks run; the assembled output and the metrics must be byte-identical to the
//! one machine's, and inputs the tasks refuse (out of order, a name of three primary records
//! across ranges) fail as the one machine does and leave nothing behind.

use super::fixtures::{lcg, sam_to_bam, sort_to_bam};
use sortase::markdup::Mode;
use sortase::tasks::markdup::MdEncodeOutput;
use sortase::tasks::pmarkdup::{PicardPlan, PicardTask, PmJoinOutput, PmMapOutput, PmReduceOutput};
use sortase::tasks::{Layout, MarkdupTasks};
use sortase::{ErrorKind, MarkdupJob, Order, OutputSpec, Program, Runtime, ViewJob};
use std::path::{Path, PathBuf};

/// Coordinate-sorted pairs (many duplicates, mates far apart so that they fall in other
/// ranges, Illumina names with tile:x:y close together for optical duplicates), fragments,
/// unmapped pairs, secondary and supplementary records, two libraries and a record without a
/// read group.
fn coordinate_bam(dir: &Path) -> PathBuf {
    coordinate_bam_with(dir, "")
}

/// [`coordinate_bam`] with the SAM lines `extra` added.
fn coordinate_bam_with(dir: &Path, extra: &str) -> PathBuf {
    let mut sam = String::from(
        "@HD\tVN:1.6\tSO:unsorted\n@SQ\tSN:c1\tLN:100000\n@SQ\tSN:c2\tLN:50000\n\
         @RG\tID:a\tLB:libA\n@RG\tID:b\tLB:libB\n",
    );
    let mut seed = 29;
    let seq: String = (0..100)
        .map(|i| b"ACGT"[(i * 7 + i / 3) % 4] as char)
        .collect();
    for i in 0..4000 {
        let q = (b'5' + (lcg(&mut seed) % 10) as u8) as char;
        let qual: String = std::iter::repeat_n(q, 100).collect();
        let tile = 1101 + lcg(&mut seed) % 2;
        let (x, y) = (1000 + lcg(&mut seed) % 300, 2000 + lcg(&mut seed) % 300);
        let name = format!("M1:{i}:FC:1:{tile}:{x}:{y}");
        let rg = match lcg(&mut seed) % 9 {
            0 => String::new(),
            1..=3 => "\tRG:Z:b".into(),
            _ => "\tRG:Z:a".into(),
        };
        let r1 = if lcg(&mut seed).is_multiple_of(3) {
            "c2"
        } else {
            "c1"
        };
        let pos = 1 + (lcg(&mut seed) % 60) * 13;
        let far = lcg(&mut seed).is_multiple_of(2);
        let (r2, mpos) = if far {
            ("c1", 20_000 + (lcg(&mut seed) % 40) * 11)
        } else {
            (r1, pos + 100 + (lcg(&mut seed) % 5) * 20)
        };
        let same = if r1 == r2 { "=" } else { r2 };
        let back = if r1 == r2 { "=" } else { r1 };
        let clip = if lcg(&mut seed).is_multiple_of(4) {
            "5S95M"
        } else {
            "100M"
        };
        match lcg(&mut seed) % 12 {
            0 => {
                sam += &format!("{name}\t77\t*\t0\t0\t*\t*\t0\t0\t{seq}\t{qual}{rg}\n");
                sam += &format!("{name}\t141\t*\t0\t0\t*\t*\t0\t0\t{seq}\t{qual}{rg}\n");
            }
            1 => {
                let f = if lcg(&mut seed).is_multiple_of(2) {
                    0
                } else {
                    16
                };
                sam +=
                    &format!("{name}\t{f}\t{r1}\t{pos}\t60\t{clip}\t*\t0\t0\t{seq}\t{qual}{rg}\n");
            }
            2 => {
                // Mate unmapped: placed at the read's position.
                sam +=
                    &format!("{name}\t73\t{r1}\t{pos}\t60\t100M\t=\t{pos}\t0\t{seq}\t{qual}{rg}\n");
                sam += &format!("{name}\t133\t{r1}\t{pos}\t0\t*\t=\t{pos}\t0\t{seq}\t{qual}{rg}\n");
            }
            _ => {
                let dup = if lcg(&mut seed).is_multiple_of(7) {
                    1024
                } else {
                    0
                };
                sam += &format!(
                    "{name}\t{}\t{r1}\t{pos}\t60\t{clip}\t{same}\t{mpos}\t0\t{seq}\t{qual}{rg}\n",
                    99 | dup
                );
                sam += &format!(
                    "{name}\t147\t{r2}\t{mpos}\t60\t100M\t{back}\t{pos}\t0\t{seq}\t{qual}{rg}\n"
                );
                match lcg(&mut seed) % 10 {
                    0 => {
                        sam += &format!(
                            "{name}\t2145\tc2\t{}\t30\t40S60M\t{r2}\t{mpos}\t0\t{seq}\t{qual}{rg}\n",
                            5_000 + pos
                        );
                    }
                    1 => {
                        sam += &format!(
                            "{name}\t355\t{r1}\t{}\t0\t100M\t{same}\t{mpos}\t0\t{seq}\t{qual}{rg}\n",
                            pos + 7
                        );
                    }
                    _ => {}
                }
            }
        }
    }
    sam += extra;
    sam_to_bam(dir, sam, Order::Coordinate)
}

/// Runs every stage; the layout and the pairs the join tasks formed.
fn run_all(plan: &PicardPlan, rt: &Runtime) -> (Layout, u64) {
    fn run<O: serde::de::DeserializeOwned>(tasks: Vec<PicardTask>, rt: &Runtime) -> Vec<O> {
        // Last first: the order of the tasks does not matter.
        tasks
            .into_iter()
            .rev()
            .map(|t| {
                let out = t.into_task().run(rt).unwrap();
                let body = out
                    .as_object()
                    .and_then(|o| o.values().next())
                    .and_then(|v| v.as_object())
                    .and_then(|o| o.values().next())
                    .unwrap()
                    .clone();
                serde_json::from_value(body).unwrap()
            })
            .collect()
    }
    let maps: Vec<PmMapOutput> = run(plan.map_tasks(), rt);
    let joins: Vec<PmJoinOutput> = run(plan.join_tasks(&maps).unwrap(), rt);
    let reduces: Vec<PmReduceOutput> = run(plan.reduce_tasks(&maps, &joins).unwrap(), rt);
    let encodes: Vec<MdEncodeOutput> = run(plan.encode_tasks(&maps, &reduces).unwrap(), rt);
    let joined = joins.iter().map(|j| j.pairs_formed).sum();
    let layout = plan
        .layout(&maps, &joins, &reduces, &encodes, true, rt)
        .unwrap();
    (layout, joined)
}

/// Runs the map tasks in order; their outputs.
fn run_maps(plan: &PicardPlan, rt: &Runtime) -> Vec<PmMapOutput> {
    plan.map_tasks()
        .into_iter()
        .map(|t| match t {
            PicardTask::Map(m) => m.run(rt).unwrap(),
            _ => unreachable!(),
        })
        .collect()
}

#[test]
fn tasks_write_the_bytes_and_metrics_of_one_machine() {
    let dir = tempfile::tempdir().unwrap();
    let bam = coordinate_bam(dir.path());
    let rt = Runtime::with_threads(2).unwrap();
    for (level, memory, reduce, regex) in [
        (None, 150_000, None, None),
        (Some(0), 64 << 10, Some(3), None),
        (Some(6), 1 << 30, None, Some("null")),
    ] {
        let (one, many) = (dir.path().join("one.bam"), dir.path().join("many.bam"));
        let (m1, m2) = (dir.path().join("one.txt"), dir.path().join("many.txt"));
        let mut job = MarkdupJob::new(bam.to_str().unwrap(), OutputSpec::to_path(&one));
        job.output.level = level;
        job.program = Some(Program {
            command_line: "sortase markdup in.bam".into(),
        });
        job.picard.metrics = Some(m1.clone());
        job.picard.read_name_regex = regex.map(String::from);
        job.mode = Mode::Coordinate;
        let report = job.run(&rt).unwrap();
        assert!(report.duplicate_records > 500, "{report:?}");
        job.output.path = Some(many.clone());
        job.picard.metrics = Some(m2.clone());
        job.mode = Mode::Auto;
        // Auto: the plan of the sorted BAM (SO:coordinate) is Picard's.
        let e = job.plan_tasks(&rt, memory, reduce).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Argument, "{e}");
        let plan = job.plan_coordinate_tasks(&rt, memory, reduce).unwrap();
        let (layout, joined) = run_all(&plan, &rt);
        if memory < 1 << 20 {
            assert!(plan.ranges().len() > 3, "{}", plan.ranges().len());
            // Pairs whose mates are in other ranges.
            assert!(joined > 50, "{joined}");
        }
        for t in layout.place_tasks() {
            t.run(&rt).unwrap();
        }
        let value = layout.commit().unwrap();
        assert_eq!(value["records"], report.records);
        assert_eq!(value["duplicate_records"], report.duplicate_records);
        assert_eq!(value["pairs"], report.pairs);
        assert!(
            std::fs::read(&one).unwrap() == std::fs::read(&many).unwrap(),
            "level {level:?}, memory {memory}: the bytes differ"
        );
        let (a, b) = (
            std::fs::read_to_string(&m1).unwrap(),
            std::fs::read_to_string(&m2).unwrap(),
        );
        assert_eq!(a, b, "memory {memory}: the metrics differ");
        if regex.is_none() {
            let optical: u64 = a
                .lines()
                .filter(|l| l.starts_with("lib"))
                .map(|l| l.split('\t').nth(7).unwrap().parse::<u64>().unwrap())
                .sum();
            assert!(optical > 10, "{a}");
        }
        assert!(!plan.work_dir().exists());
    }
}

#[test]
fn out_of_order_input_fails_as_one_machine_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let sorted = coordinate_bam(dir.path());
    // The records of the sorted BAM in name order, under an SO:coordinate header.
    let named = dir.path().join("named.bam");
    sort_to_bam(&sorted, Order::Name, &named);
    let rt = Runtime::with_threads(1).unwrap();
    let out = dir.path().join("out.bam");
    let mut job = MarkdupJob::new(named.to_str().unwrap(), OutputSpec::to_path(&out));
    job.mode = Mode::Coordinate;
    let one = job.run(&rt).unwrap_err();
    let plan = job.plan_coordinate_tasks(&rt, 64 << 10, None).unwrap();
    let maps = run_maps(&plan, &rt);
    let e = plan.join_tasks(&maps).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Format);
    assert_eq!(e.to_string(), one.to_string());
    plan.abort().unwrap();
    assert!(!plan.work_dir().exists());
    assert!(!out.exists());
}

#[test]
fn a_name_of_three_primary_records_across_ranges_fails_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // X's first end waits in the first range; its second and third ends, far away in a later
    // range, pair with each other there, where the one machine pairs the first two.
    let seq = "ACGT".repeat(25);
    let qual = "I".repeat(100);
    let extra = format!(
        "X\t97\tc1\t10\t60\t100M\t=\t30000\t0\t{seq}\t{qual}\n\
         X\t145\tc1\t30000\t60\t100M\t=\t10\t0\t{seq}\t{qual}\n\
         X\t145\tc1\t30050\t60\t100M\t=\t10\t0\t{seq}\t{qual}\n"
    );
    let bam = coordinate_bam_with(dir.path(), &extra);
    let rt = Runtime::with_threads(1).unwrap();
    let (one, many) = (dir.path().join("one.bam"), dir.path().join("many.bam"));
    let metrics = dir.path().join("many.txt");
    let mut job = MarkdupJob::new(bam.to_str().unwrap(), OutputSpec::to_path(&one));
    job.mode = Mode::Coordinate;
    job.run(&rt).unwrap();
    job.output.path = Some(many.clone());
    job.picard.metrics = Some(metrics.clone());
    let plan = job.plan_coordinate_tasks(&rt, 64 << 10, None).unwrap();
    assert!(plan.ranges().len() > 2, "{}", plan.ranges().len());
    let maps = run_maps(&plan, &rt);
    let joins: Vec<PmJoinOutput> = plan
        .join_tasks(&maps)
        .unwrap()
        .into_iter()
        .map(|t| match t {
            PicardTask::Join(j) => j.run(&rt).unwrap(),
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(
        joins
            .iter()
            .filter_map(|j| j.ambiguous.as_deref())
            .collect::<Vec<_>>(),
        ["X"]
    );
    let e = plan.reduce_tasks(&maps, &joins).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Format);
    assert_eq!(
        e.to_string(),
        format!(
            "{}: has more than two primary mapped records named X; run `sortase markdup` on \
             one machine",
            bam.display()
        )
    );
    plan.abort().unwrap();
    assert!(!plan.work_dir().exists());
    assert!(!many.exists() && !metrics.exists());
}

/// The records of `bam` as SAM text (its header first).
fn sam_text(bam: &Path, dir: &Path) -> String {
    let sam = dir.join("text.sam");
    let mut view = ViewJob::new(bam.to_str().unwrap(), OutputSpec::to_path(&sam));
    view.with_header = true;
    view.program = None;
    view.run(&Runtime::with_threads(1).unwrap()).unwrap();
    std::fs::read_to_string(&sam).unwrap()
}

/// A BAM of `sam` as it stands (no sorting).
fn bam_of(sam: &str, dir: &Path, name: &str) -> PathBuf {
    let (text, bam) = (
        dir.join(format!("{name}.sam")),
        dir.join(format!("{name}.bam")),
    );
    std::fs::write(&text, sam).unwrap();
    let mut out = OutputSpec::to_path(&bam);
    out.format = Some("bam".into());
    out.uncompressed = true;
    let mut view = ViewJob::new(text.to_str().unwrap(), out);
    view.program = None;
    view.run(&Runtime::with_threads(1).unwrap()).unwrap();
    bam
}

#[test]
fn a_record_out_of_order_in_a_later_range_is_named_by_its_number_in_the_file() {
    // The map tasks number their records within their range; the message counts from the file's
    // first record, as the one machine's does.
    let dir = tempfile::tempdir().unwrap();
    let text = sam_text(&coordinate_bam(dir.path()), dir.path());
    let (header, body): (Vec<&str>, Vec<&str>) = text.lines().partition(|l| l.starts_with('@'));
    let mut body = body;
    // An early record (low coordinate on c1) moved to 80% of the file.
    let early = body.remove(5);
    let at = body.len() * 4 / 5;
    body.insert(at, early);
    let sam: String = header
        .iter()
        .chain(&body)
        .flat_map(|l| [*l, "\n"])
        .collect();
    let bad = bam_of(&sam, dir.path(), "late");
    let rt = Runtime::with_threads(1).unwrap();
    let out = dir.path().join("out.bam");
    let mut job = MarkdupJob::new(bad.to_str().unwrap(), OutputSpec::to_path(&out));
    job.mode = Mode::Coordinate;
    let one = job.run(&rt).unwrap_err();
    assert!(
        one.to_string().contains(&format!("record {} (", at + 1)),
        "{one}"
    );
    let plan = job.plan_coordinate_tasks(&rt, 64 << 10, None).unwrap();
    assert!(plan.ranges().len() > 3, "{}", plan.ranges().len());
    let maps = run_maps(&plan, &rt);
    let e = plan.join_tasks(&maps).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Format);
    assert_eq!(e.to_string(), one.to_string());
    plan.abort().unwrap();
    assert!(!out.exists());
}

#[test]
fn a_planned_start_that_is_no_record_start_is_read_past() {
    // A start one byte past a record's is added to the plan: the range before proves its end at
    // the next planned start that is a record's, the false one is off the chain, and the bytes
    // are the one machine's.
    let dir = tempfile::tempdir().unwrap();
    let bam = coordinate_bam(dir.path());
    let rt = Runtime::with_threads(2).unwrap();
    let (one, many) = (dir.path().join("one.bam"), dir.path().join("many.bam"));
    let mut job = MarkdupJob::new(bam.to_str().unwrap(), OutputSpec::to_path(&one));
    job.mode = Mode::Coordinate;
    job.program = None;
    job.run(&rt).unwrap();
    job.output.path = Some(many.clone());
    let plan = job.plan_coordinate_tasks(&rt, 64 << 10, None).unwrap();
    let mut value = serde_json::to_value(&plan).unwrap();
    let ranges = value["ranges"].as_array_mut().unwrap();
    assert!(ranges.len() > 3, "{}", ranges.len());
    let start = ranges[1]["start"].as_u64().unwrap();
    assert_ne!(start & 0xffff, 0xffff);
    let false_start = start + 1;
    let next = ranges[1]["end"].clone();
    ranges[1]["end"] = false_start.into();
    ranges.insert(2, serde_json::json!({"start": false_start, "end": next}));
    let plan: PicardPlan = serde_json::from_value(value).unwrap();
    let maps = run_maps(&plan, &rt);
    // Range 1 ran on to range 3's start.
    assert_eq!(maps[1].end, Some(plan.ranges()[3].start));
    let (layout, _) = run_all(&plan, &rt);
    for t in layout.place_tasks() {
        t.run(&rt).unwrap();
    }
    layout.commit().unwrap();
    assert!(std::fs::read(&one).unwrap() == std::fs::read(&many).unwrap());
    assert!(!plan.work_dir().exists());
}

#[test]
fn map_outputs_made_for_another_plan_are_refused() {
    // An output of a plan with another number of ranges, or of a range starting elsewhere, is
    // no proof for this plan's chain (the check both modes share in `walk_proved`).
    let dir = tempfile::tempdir().unwrap();
    let bam = coordinate_bam(dir.path());
    let rt = Runtime::with_threads(1).unwrap();
    let mut job = MarkdupJob::new(
        bam.to_str().unwrap(),
        OutputSpec::to_path(dir.path().join("out.bam")),
    );
    job.mode = Mode::Coordinate;
    let plan = job.plan_coordinate_tasks(&rt, 64 << 10, None).unwrap();
    let maps = run_maps(&plan, &rt);
    assert!(plan.join_tasks(&maps).is_ok());
    for (i, change) in [(1, "parts"), (2, "start")] {
        let mut foreign = maps.clone();
        match change {
            "parts" => foreign[i].parts += 1,
            _ => foreign[i].start += 1,
        }
        let e = plan.join_tasks(&foreign).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Argument, "{change}");
        assert_eq!(
            e.to_string(),
            format!("map output for range {i} does not belong to this plan")
        );
    }
    plan.abort().unwrap();
    assert!(!plan.work_dir().exists());
}
