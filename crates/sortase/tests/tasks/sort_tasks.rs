//! Sort tasks (`sortase::tasks`) against `SortJob::run`: on generated BAMs cut into several byte
//! ranges and key ranges, with unmapped reads and long runs of equal keys, every stage's tasks run
//! in a shuffled order, each on a fresh one-thread runtime and through JSON; the finished output
//! (and index) must be byte-identical to the single-machine sort's.

use super::fixtures::Rng;
use sortase::tasks::{
    output_of, run_task_json, AnyTask, CountOutput, PlanOptions, ReduceOutput, SortPlan, SortTask,
    SortTaskOutput,
};
use sortase::{Order, OutputSpec, Runtime, SortJob};
use sortase_bgzf::{BlockEncoder, CompressionLevel, EOF_MARKER};
use std::path::{Path, PathBuf};

const REFERENCES: [(&str, u32); 3] = [("chr1", 100_000), ("chr2", 50_000), ("chr3", 200_000)];

/// One raw record (with `block_size`): placed reads on few positions (long runs of equal keys),
/// placed unmapped mates, unplaced unmapped reads; names shared by pairs; an RG tag on most.
fn record(rng: &mut Rng, i: u64) -> Vec<u8> {
    let kind = rng.below(20);
    let (tid, pos, flag) = match kind {
        0..=2 => (-1i32, -1i32, 4u16 | 1 | 64), // unplaced, unmapped
        3 => (rng.below(3) as i32, 7 + rng.below(3) as i32, 4 | 1 | 128), // placed, unmapped
        _ => (
            rng.below(3) as i32,
            rng.below(400) as i32 * 50,
            [0u16, 16, 1 | 64 | 32, 1 | 128 | 16, 256, 2048][rng.below(6) as usize],
        ),
    };
    let l_seq = 100 + rng.below(60) as usize;
    let name = format!("read{}:{}", rng.below(8), i / 2);
    let mapped = flag & 4 == 0;
    let mut r = Vec::with_capacity(64 + 2 * l_seq);
    r.extend_from_slice(&tid.to_le_bytes());
    r.extend_from_slice(&pos.to_le_bytes());
    r.push(name.len() as u8 + 1); // l_read_name
    r.push(if mapped { 60 } else { 0 }); // mapq
    r.extend_from_slice(&4680u16.to_le_bytes()); // bin
    r.extend_from_slice(&u16::from(mapped).to_le_bytes()); // n_cigar_op
    r.extend_from_slice(&flag.to_le_bytes());
    r.extend_from_slice(&(l_seq as u32).to_le_bytes());
    r.extend_from_slice(&(-1i32).to_le_bytes()); // next refID
    r.extend_from_slice(&(-1i32).to_le_bytes()); // next pos
    r.extend_from_slice(&0i32.to_le_bytes()); // tlen
    r.extend_from_slice(name.as_bytes());
    r.push(0);
    if mapped {
        r.extend_from_slice(&((l_seq as u32) << 4).to_le_bytes()); // {l_seq}M
    }
    r.extend(
        (0..l_seq.div_ceil(2))
            .map(|_| [0x12u8, 0x14, 0x18, 0x21, 0x42, 0x84][rng.below(6) as usize]),
    );
    r.extend((0..l_seq).map(|_| 20 + rng.below(20) as u8));
    if rng.below(4) != 0 {
        r.extend_from_slice(b"RGZ");
        r.extend_from_slice(format!("g{}", rng.below(3)).as_bytes());
        r.push(0);
    }
    let mut out = (r.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(&r);
    out
}

/// Writes an unsorted BAM of `n` records.
fn write_bam(path: &Path, n: u64, seed: u64) {
    let mut text = String::from("@HD\tVN:1.6\tSO:unsorted\n");
    let mut refs = Vec::new();
    for (name, len) in REFERENCES {
        text.push_str(&format!("@SQ\tSN:{name}\tLN:{len}\n"));
        refs.push(sortase_bam::Reference {
            name: name.as_bytes().to_vec(),
            length: len,
        });
    }
    let header = sortase_bam::Header::new(text, refs);
    let mut enc = BlockEncoder::new(CompressionLevel::from_libdeflate(1));
    enc.write_all(&header.to_bam_bytes()).unwrap();
    let mut rng = Rng::new(seed);
    for i in 0..n {
        enc.write_all(&record(&mut rng, i)).unwrap();
    }
    let mut bytes = enc.finish().unwrap().bytes;
    bytes.extend_from_slice(&EOF_MARKER);
    std::fs::write(path, bytes).unwrap();
}

/// Runs `tasks` shuffled, each through JSON on a fresh one-thread runtime.
fn run_stage(mut tasks: Vec<SortTask>, rng: &mut Rng) -> Vec<SortTaskOutput> {
    for i in (1..tasks.len()).rev() {
        tasks.swap(i, rng.below(i as u64 + 1) as usize);
    }
    tasks
        .into_iter()
        .map(|t| {
            let json = serde_json::to_string(&t.into_task()).unwrap();
            let worker = Runtime::with_threads(1).unwrap();
            let out = run_task_json(&json, &worker).unwrap_or_else(|e| panic!("{e}"));
            output_of::<SortTaskOutput>(&out, "sort").expect("a sort task returns a sort output")
        })
        .collect()
}

struct Case {
    name: &'static str,
    order: Order,
    write_index: bool,
    index_format: Option<&'static str>,
    reduce_tasks: Option<usize>,
    /// Finish with layout, place tasks and commit instead of `SortPlan::finish`.
    parallel_finish: bool,
}

/// Sorts `input` through tasks and with `SortJob::run`; returns (files of the tasks' output, of
/// the single sort's) after checking the shape of the plan.
fn sort_both(input: &Path, dir: &Path, case: &Case) -> Vec<(Vec<u8>, Vec<u8>)> {
    let output = |name: &str| OutputSpec {
        path: Some(dir.join(format!("{}.{name}.bam", case.name))),
        write_index: case.write_index,
        index_format: case.index_format.map(String::from),
        ..OutputSpec::default()
    };
    let job = SortJob {
        order: case.order.clone(),
        ..SortJob::new(input.to_str().unwrap(), output("tasks"))
    };
    let rt = Runtime::with_threads(2).unwrap();
    let tasks = sort_tasks(&job, dir, case, &rt);
    let single = SortJob {
        output: output("single"),
        ..job
    }
    .run(&rt)
    .unwrap();
    assert!(
        single.ranges > 3,
        "{}: {} key ranges",
        case.name,
        single.ranges
    );
    assert_eq!(
        (tasks.records, tasks.record_bytes, tasks.ranges),
        (single.records, single.record_bytes, single.ranges)
    );
    assert_eq!(tasks.outputs.len(), 1 + usize::from(case.write_index));
    assert_eq!(tasks.outputs.len(), single.outputs.len());
    tasks
        .outputs
        .iter()
        .zip(&single.outputs)
        .map(|(t, s)| (std::fs::read(t).unwrap(), std::fs::read(s).unwrap()))
        .collect()
}

/// Plans `job` as tasks and runs its stages (shuffled, through JSON), then finishes it.
fn sort_tasks(job: &SortJob, dir: &Path, case: &Case, rt: &Runtime) -> sortase::SortReport {
    let options = PlanOptions {
        task_memory: 1 << 20,
        reduce_tasks: case.reduce_tasks,
    };
    let plan = job.plan_with(rt, &options).unwrap();
    assert!(
        plan.ranges().len() > 3,
        "{}: {:?}",
        case.name,
        plan.ranges()
    );
    assert!(plan.work_dir().is_dir());
    let mut rng = Rng(0x5eed ^ case.name.len() as u64);
    let counts: Vec<_> = run_stage(plan.count_tasks(), &mut rng)
        .into_iter()
        .filter_map(SortTaskOutput::into_count)
        .collect();
    let maps: Vec<_> = run_stage(plan.map_tasks(&counts).unwrap(), &mut rng)
        .into_iter()
        .filter_map(SortTaskOutput::into_map)
        .collect();
    let mut reduce = plan.reduce_tasks(&maps, rt).unwrap();
    if let Some(n) = case.reduce_tasks {
        assert_eq!(reduce.len(), n);
    }
    cut_runs(&mut reduce, dir, case);
    let reduces: Vec<_> = run_stage(reduce, &mut rng)
        .into_iter()
        .filter_map(SortTaskOutput::into_reduce)
        .collect();
    let tasks = if case.parallel_finish {
        parallel_finish(&plan, &reduces, &mut rng, rt)
    } else {
        plan.finish(&reduces, rt).unwrap()
    };
    assert!(
        !plan.work_dir().exists(),
        "finish leaves the work directory"
    );
    tasks
}

/// Each reduce task reads copies of its runs cut at its `end` offsets: a reader that needed more
/// would see the run end early, and the finish's record count would fail.
fn cut_runs(reduce: &mut [SortTask], dir: &Path, case: &Case) {
    let mut cut = 0;
    for (k, task) in reduce.iter_mut().enumerate() {
        let SortTask::Reduce(t) = task else {
            panic!("a reduce stage has reduce tasks")
        };
        let copies = dir.join(format!("{}.runs{k}", case.name));
        std::fs::create_dir(&copies).unwrap();
        for run in &mut t.runs {
            let data = std::fs::read(&run.path).unwrap();
            let end = run.end.map_or(data.len(), |e| e as usize);
            cut += usize::from(end < data.len());
            let copy = copies.join(run.path.file_name().unwrap());
            std::fs::write(&copy, &data[..end]).unwrap();
            run.path = copy;
        }
    }
    assert!(cut > 0, "{}: no run was cut", case.name);
}

/// The finish with no serial data path: layout (index from the sidecars), place tasks (shuffled,
/// through JSON, each part at its offset of the preallocated file), commit.
fn parallel_finish(
    plan: &SortPlan,
    reduces: &[ReduceOutput],
    rng: &mut Rng,
    rt: &Runtime,
) -> sortase::SortReport {
    let layout = plan.layout(reduces, true, rt).unwrap();
    assert!(layout.temp.is_file() && !layout.data.exists());
    let mut places = layout.place_tasks();
    assert_eq!(places.len(), reduces.len());
    for i in (1..places.len()).rev() {
        places.swap(i, rng.below(i as u64 + 1) as usize);
    }
    for t in places {
        let json = serde_json::to_string(&AnyTask::from(t)).unwrap();
        let out = run_task_json(&json, &Runtime::with_threads(1).unwrap()).unwrap();
        output_of::<sortase::tasks::PlaceOutput>(&out, "place")
            .expect("a place task returns a place output");
    }
    let report: sortase::SortReport = serde_json::from_value(layout.commit().unwrap()).unwrap();
    assert!(!layout.temp.exists());
    report
}

#[test]
fn tasks_give_the_bytes_of_sort_job_run() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.bam");
    write_bam(&input, 24_000, 7);
    let cases = [
        Case {
            name: "coordinate-csi",
            order: Order::Coordinate,
            write_index: true,
            index_format: None,
            reduce_tasks: Some(2), // several key ranges per reduce task
            parallel_finish: true,
        },
        Case {
            name: "coordinate-bai",
            order: Order::Coordinate,
            write_index: true,
            index_format: Some("bai"),
            reduce_tasks: None,
            parallel_finish: false,
        },
        Case {
            name: "name",
            order: Order::Name,
            write_index: false,
            index_format: None,
            reduce_tasks: None,
            parallel_finish: true,
        },
        Case {
            name: "tag",
            order: Order::Tag {
                tag: "RG".into(),
                by_name: None,
            },
            write_index: false,
            index_format: None,
            reduce_tasks: Some(3),
            parallel_finish: false,
        },
    ];
    for case in &cases {
        for (i, (tasks, single)) in sort_both(&input, dir.path(), case).iter().enumerate() {
            let first_diff = tasks.iter().zip(single).position(|(a, b)| a != b);
            assert!(
                tasks == single,
                "{} file {i}: {} bytes against {}, first difference at byte {first_diff:?}",
                case.name,
                tasks.len(),
                single.len()
            );
        }
    }
}

/// A planned boundary that is not a record start: the count task ends its range at the next
/// planned start that is one, and the driver skips the range it absorbed.
#[test]
fn a_false_boundary_is_absorbed_by_the_range_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.bam");
    write_bam(&input, 6_000, 11);
    let rt = Runtime::with_threads(1).unwrap();
    let job = SortJob::new(
        input.to_str().unwrap(),
        OutputSpec::to_path(dir.path().join("out.bam")),
    );
    let options = PlanOptions {
        task_memory: 256 << 10,
        reduce_tasks: None,
    };
    let plan = job.plan_with(&rt, &options).unwrap();
    assert!(plan.ranges().len() >= 3, "{:?}", plan.ranges());
    let count = |t: &SortTask| t.run(&rt).unwrap().into_count().unwrap();
    let tasks = plan.count_tasks();
    let counts: Vec<CountOutput> = tasks.iter().map(count).collect();
    let SortTask::Count(mut first) = tasks[0].clone() else {
        panic!("stage 1 has count tasks only")
    };
    // One byte into range 1's first record: not a record start.
    first.later_starts.insert(0, plan.ranges()[1].start + 1);
    let absorbed = count(&SortTask::Count(first));
    assert_eq!(absorbed.end, Some(plan.ranges()[2].start));
    assert_eq!(absorbed.records, counts[0].records + counts[1].records);
    // The driver walks from range 0 past range 1 (whose count it never asks for).
    let mut reported = vec![absorbed];
    reported.extend(counts[2..].iter().cloned());
    let maps = plan.map_tasks(&reported).unwrap();
    assert_eq!(maps.len(), counts.len() - 1);
    let SortTask::Map(second) = &maps[1] else {
        panic!("stage 2 has map tasks only")
    };
    assert_eq!(second.first_seq, counts[0].records + counts[1].records);
    assert!(plan.map_tasks(&counts[1..]).is_err(), "range 0 is missing");
    // A map task whose range does not fit the runtime's memory pool says so (and does not wait).
    let small = Runtime::builder()
        .threads(1)
        .memory(64 << 10)
        .build()
        .unwrap();
    let err = maps[0].run(&small).unwrap_err();
    assert_eq!(err.kind(), sortase::ErrorKind::Argument, "{err}");
    assert!(err.to_string().contains("task_memory"), "{err}");
    // Cancelled tasks stop, and leave no file in the work directory.
    let cancelled = Runtime::with_threads(1).unwrap();
    cancelled.cancel();
    for task in [&tasks[0], &maps[0]] {
        let err = task.run(&cancelled).unwrap_err();
        assert_eq!(err.kind(), sortase::ErrorKind::Cancelled, "{err}");
    }
    assert_eq!(std::fs::read_dir(plan.work_dir()).unwrap().count(), 0);
    plan.abort().unwrap();
    assert!(!plan.work_dir().exists());
}

#[test]
fn plans_refuse_what_tasks_cannot_do() {
    let dir = tempfile::tempdir().unwrap();
    let sam = dir.path().join("in.sam");
    std::fs::write(&sam, "@SQ\tSN:c\tLN:9\nr\t4\t*\t0\t0\t*\t*\t0\t0\tA\tI\n").unwrap();
    let bam: PathBuf = dir.path().join("in.bam");
    write_bam(&bam, 10, 1);
    let rt = Runtime::with_threads(1).unwrap();
    let to = |name: &str| OutputSpec::to_path(dir.path().join(name));
    let kind = |job: SortJob| job.plan(&rt).unwrap_err().kind();
    assert_eq!(
        kind(SortJob::new(sam.to_str().unwrap(), to("o.bam"))),
        sortase::ErrorKind::Argument
    );
    assert_eq!(
        kind(SortJob::new(bam.to_str().unwrap(), to("o.sam"))),
        sortase::ErrorKind::Argument
    );
    assert_eq!(
        kind(SortJob::new("-", to("o.bam"))),
        sortase::ErrorKind::Argument
    );
    let stdout = OutputSpec::default();
    assert_eq!(
        kind(SortJob::new(bam.to_str().unwrap(), stdout)),
        sortase::ErrorKind::Argument
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        2,
        "no work directory left"
    );
}
