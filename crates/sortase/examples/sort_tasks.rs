//! Sorts a BAM through serialisable tasks and proves the result byte-identical to `SortJob::run`.
//!
//! ```sh
//! cargo run --release -p sortase --example sort_tasks -- in.bam out.bam [--write-index] \
//!     [--index-format bai|csi] [-n] [--task-memory 64M] [--seed N]
//! ```
//!
//! Plans the sort, runs every stage's tasks in a shuffled order, each on a fresh one-thread
//! `Runtime` with the task and its output passed through JSON (as a remote worker would), finishes
//! `out.bam`, then sorts again with `SortJob::run` into `out.single.bam` and compares both files
//! (and their indexes) byte for byte.

use sortase::options::parse_size;
use sortase::tasks::{output_of, run_task_json, PlanOptions, SortPlan, SortTask, SortTaskOutput};
use sortase::{Order, OutputSpec, Runtime, SortJob, SortReport};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

struct Args {
    input: String,
    output: PathBuf,
    write_index: bool,
    index_format: Option<String>,
    by_name: bool,
    task_memory: usize,
    seed: u64,
}

fn parse_args() -> Result<Args, String> {
    let usage = "usage: sort_tasks IN.bam OUT.bam [--write-index] [--index-format bai|csi] [-n] \
                 [--task-memory SIZE] [--seed N]";
    let mut args = std::env::args().skip(1);
    let mut files = Vec::new();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    let mut a = Args {
        input: String::new(),
        output: PathBuf::new(),
        write_index: false,
        index_format: None,
        by_name: false,
        task_memory: 64 << 20,
        seed,
    };
    while let Some(arg) = args.next() {
        let mut value = |flag: &str| args.next().ok_or(format!("{flag} needs a value; {usage}"));
        match arg.as_str() {
            "--write-index" => a.write_index = true,
            "-n" => a.by_name = true,
            "--index-format" => a.index_format = Some(value("--index-format")?),
            "--task-memory" => {
                a.task_memory = parse_size(&value("--task-memory")?, "--task-memory")
                    .map_err(|e| e.to_string())?
            }
            "--seed" => {
                a.seed = value("--seed")?
                    .parse()
                    .map_err(|e| format!("--seed: {e}"))?
            }
            f if f.starts_with('-') => return Err(format!("unknown flag {f}; {usage}")),
            f => files.push(f.to_string()),
        }
    }
    let [input, output] = <[String; 2]>::try_from(files).map_err(|_| usage.to_string())?;
    a.input = input;
    a.output = output.into();
    Ok(a)
}

/// xorshift64: a shuffle without dependencies.
fn shuffle<T>(items: &mut [T], state: &mut u64) {
    for i in (1..items.len()).rev() {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        items.swap(i, (*state % (i as u64 + 1)) as usize);
    }
}

/// Runs `tasks` in a shuffled order, each on a fresh one-thread runtime, through JSON.
fn run_stage(
    name: &str,
    mut tasks: Vec<SortTask>,
    rng: &mut u64,
) -> sortase::Result<Vec<SortTaskOutput>> {
    shuffle(&mut tasks, rng);
    let started = Instant::now();
    let mut bytes = 0;
    let mut outputs = Vec::with_capacity(tasks.len());
    for task in tasks {
        let json = serde_json::to_string(&task.into_task()).expect("tasks serialise");
        let worker = Runtime::with_threads(1)?;
        let out = run_task_json(&json, &worker)?;
        bytes += json.len() + out.len();
        outputs.push(output_of::<SortTaskOutput>(&out, "sort")?);
    }
    println!(
        "{name}: {} tasks in {:.2} s ({bytes} bytes of task and output JSON)",
        outputs.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(outputs)
}

fn run(a: &Args) -> sortase::Result<bool> {
    let rt = Runtime::with_threads(2)?;
    let output = OutputSpec {
        path: Some(a.output.clone()),
        write_index: a.write_index,
        index_format: a.index_format.clone(),
        ..OutputSpec::default()
    };
    let job = SortJob {
        order: if a.by_name {
            Order::Name
        } else {
            Order::Coordinate
        },
        ..SortJob::new(a.input.clone(), output.clone())
    };
    let tasks = run_tasks(a, &job, &rt)?;
    println!(
        "tasks: {} records, {} key ranges, {} runs -> {}",
        tasks.records,
        tasks.ranges,
        tasks.final_fan_in,
        list(&tasks.outputs)
    );
    let mut single_path = a.output.clone().into_os_string();
    single_path.push(".single.bam");
    let single_job = SortJob {
        output: OutputSpec {
            path: Some(single_path.into()),
            ..output
        },
        ..job
    };
    let single = single_job.run(&rt)?;
    println!(
        "SortJob::run: {} records, {} key ranges -> {}",
        single.records,
        single.ranges,
        list(&single.outputs)
    );
    let identical = tasks.outputs.len() == single.outputs.len() && tasks.ranges == single.ranges;
    Ok(compare(&tasks.outputs, &single.outputs)? && identical)
}

/// Plans `job` and runs its stages' tasks in a shuffled order (the work directory removed on
/// failure).
fn run_tasks(a: &Args, job: &SortJob, rt: &Runtime) -> sortase::Result<SortReport> {
    let options = PlanOptions {
        task_memory: a.task_memory,
        ..PlanOptions::default()
    };
    let plan = SortPlan::from_json(&job.plan_with(rt, &options)?.to_json())?;
    println!(
        "plan: {} byte ranges of {} (task memory {} bytes), work directory {}, shuffle seed {}",
        plan.ranges().len(),
        a.input,
        a.task_memory,
        plan.work_dir().display(),
        a.seed
    );
    let mut rng = a.seed | 1;
    let result = (|| {
        let counts = run_stage("count", plan.count_tasks(), &mut rng)?;
        let counts: Vec<_> = counts
            .into_iter()
            .filter_map(SortTaskOutput::into_count)
            .collect();
        let maps = run_stage("map", plan.map_tasks(&counts)?, &mut rng)?;
        let maps: Vec<_> = maps
            .into_iter()
            .filter_map(SortTaskOutput::into_map)
            .collect();
        let reduces = run_stage("reduce", plan.reduce_tasks(&maps, rt)?, &mut rng)?;
        let reduces: Vec<_> = reduces
            .into_iter()
            .filter_map(SortTaskOutput::into_reduce)
            .collect();
        plan.finish(&reduces, rt)
    })();
    if result.is_err() {
        plan.abort()?;
    }
    result
}

/// Compares the files of both sorts byte for byte, printing each pair; whether all are equal.
fn compare(tasks: &[PathBuf], single: &[PathBuf]) -> sortase::Result<bool> {
    let mut identical = true;
    for (t, s) in tasks.iter().zip(single) {
        let (tb, sb) = (std::fs::read(t)?, std::fs::read(s)?);
        let same = tb == sb;
        println!(
            "{} ({} bytes) {} {} ({} bytes)",
            t.display(),
            tb.len(),
            if same { "==" } else { "!=" },
            s.display(),
            sb.len()
        );
        identical &= same;
    }
    Ok(identical)
}

fn list(paths: &[PathBuf]) -> String {
    let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    names.join(" + ")
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(true) => {
            println!("byte-identical");
            ExitCode::SUCCESS
        }
        Ok(false) => {
            println!("DIFFERENT");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("sort_tasks: {e}");
            ExitCode::FAILURE
        }
    }
}
