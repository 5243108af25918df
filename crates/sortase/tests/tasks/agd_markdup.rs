//! `agd markdup` as tasks (crates/markdup `tasks/agd.rs`) against the one-machine job: the same
//! dataset files, byte for byte, in both modes; a failed or refused plan leaves the dataset as it
//! was. (Integration tests: they import and sort with the facade's jobs.)

use serde_json::Value;
use sortase::markdup::Mode;
use sortase::tasks::agd_markdup::AgdMarkdupTasksJob;
use sortase::tasks::{AnyTask, CutOptions, Plan};
use sortase::{
    AgdImportJob, AgdMarkdupJob, ErrorKind, Order, OutputSpec, Result, Runtime, SortJob,
};
use sortase_agd::extra::DUPLICATE_GROUP;
use sortase_agd::Group;
use std::path::{Path, PathBuf};

fn lcg(seed: &mut u64) -> u64 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *seed >> 33
}

/// A SAM of read-name groups (pairs with a secondary, fragments, unmapped pairs) at few
/// positions, so that many are duplicates; some records already carry 0x400.
fn sam(dir: &Path) -> PathBuf {
    let mut sam = String::from(
        "@HD\tVN:1.6\tSO:unsorted\n@SQ\tSN:c1\tLN:100000\n@SQ\tSN:c2\tLN:50000\n\
         @RG\tID:a\tLB:la\n@RG\tID:b\tLB:lb\n",
    );
    let mut seed = 7;
    let seq: String = (0..60).map(|i| b"ACGT"[i % 4] as char).collect();
    let qual: String = "I".repeat(60);
    for i in 0..900 {
        let r = if lcg(&mut seed).is_multiple_of(3) {
            "c2"
        } else {
            "c1"
        };
        let pos = 1 + lcg(&mut seed) % 60;
        let mpos = pos + 20 + lcg(&mut seed) % 10;
        let rg = if lcg(&mut seed).is_multiple_of(2) {
            "a"
        } else {
            "b"
        };
        let dup = if lcg(&mut seed).is_multiple_of(17) {
            1024
        } else {
            0
        };
        let name = format!("x:1:2:{}:{}:{}", i % 5, 100 + i % 37, 200 + i % 41);
        let t = format!("RG:Z:{rg}");
        match lcg(&mut seed) % 8 {
            0 => {
                sam += &format!("{name}\t{}\t*\t0\t0\t*\t*\t0\t0\t{seq}\t{qual}\t{t}\n", 77);
                sam += &format!("{name}\t141\t*\t0\t0\t*\t*\t0\t0\t{seq}\t{qual}\t{t}\n");
            }
            1 => {
                sam += &format!(
                    "{name}\t{}\t{r}\t{pos}\t60\t60M\t*\t0\t0\t{seq}\t{qual}\t{t}\n",
                    dup
                );
            }
            _ => {
                sam += &format!(
                    "{name}\t{}\t{r}\t{pos}\t60\t60M\t=\t{mpos}\t90\t{seq}\t{qual}\t{t}\n",
                    99 | dup
                );
                if i % 3 == 0 {
                    sam += &format!(
                        "{name}\t355\t{r}\t{mpos}\t0\t5S55M\t=\t{pos}\t0\t{seq}\t{qual}\t{t}\n"
                    );
                }
                sam += &format!(
                    "{name}\t147\t{r}\t{mpos}\t60\t60M\t=\t{pos}\t-90\t{seq}\t{qual}\t{t}\n"
                );
            }
        }
    }
    let path = dir.join("in.sam");
    std::fs::write(&path, sam).unwrap();
    path
}

/// Every file under `dir` (relative path, bytes), sorted.
fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_path_buf();
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// Plans, runs every stage's tasks (through their JSON, in reverse order) and finishes.
fn run_tasks(job: &AgdMarkdupJob, memory: usize, rt: &Runtime) -> Result<Value> {
    let spec = serde_json::to_string(&AgdMarkdupTasksJob {
        job: job.clone(),
        remote: false,
    })
    .unwrap();
    let cut = CutOptions {
        task_memory: Some(memory),
        ..CutOptions::default()
    };
    let plan = Plan::new("agd_markdup", &spec, &cut, rt)?;
    let plan: Plan = serde_json::from_str(&serde_json::to_string(&plan).unwrap()).unwrap();
    let mut outputs: Vec<Value> = Vec::new();
    let run = (|| {
        for stage in plan.stages() {
            let tasks = plan.stage_tasks(stage, &outputs, rt)?;
            for t in tasks.iter().rev() {
                let t = AnyTask::parse(&serde_json::to_string(t).unwrap())?;
                outputs.push(t.run(rt)?);
            }
        }
        plan.finish(&outputs, rt)
    })();
    match run {
        Ok(text) => Ok(serde_json::from_str(&text).unwrap()),
        Err(e) => {
            plan.abort()?;
            Err(e)
        }
    }
}

#[test]
fn tasks_leave_the_dataset_of_one_machine_in_both_modes() {
    let dir = tempfile::tempdir().unwrap();
    let rt = Runtime::with_threads(2).unwrap();
    let sam = sam(dir.path());
    let coord = dir.path().join("coord.bam");
    SortJob::new(sam.to_str().unwrap(), OutputSpec::to_path(&coord))
        .run(&rt)
        .unwrap();
    let named = dir.path().join("named.bam");
    let by_name = SortJob {
        order: Order::Name,
        ..SortJob::new(sam.to_str().unwrap(), OutputSpec::to_path(&named))
    };
    by_name.run(&rt).unwrap();
    for (input, mode) in [(&named, Mode::Query), (&coord, Mode::Coordinate)] {
        let (one, many) = (dir.path().join("one"), dir.path().join("many"));
        for ds in [&one, &many] {
            let _ = std::fs::remove_dir_all(ds);
            let import = AgdImportJob {
                chunk_size: 7,
                ..AgdImportJob::new(input.to_str().unwrap(), ds)
            };
            import.run(&rt).unwrap();
        }
        // Twice: the second run replaces the group (and reads its marks in samblaster's mode).
        for round in 0..2 {
            let job = |ds: &Path| AgdMarkdupJob {
                command_line: format!("sortase agd markdup r{round}"),
                ..AgdMarkdupJob::new(ds)
            };
            let expected = job(&one).run(&rt).unwrap();
            assert_eq!(expected.mode, mode);
            let got = run_tasks(&job(&many), 16 << 10, &rt).unwrap();
            assert!(expected.duplicate_records > 0);
            assert_eq!(got["duplicate_records"], expected.duplicate_records);
            assert_eq!(got["read_names"], expected.read_names);
            assert_eq!(got["duplicate_groups"], expected.duplicate_groups);
            assert_eq!(got["pairs"], expected.pairs);
            let (a, b) = (files(&one), files(&many));
            assert_eq!(
                a.iter().map(|f| &f.0).collect::<Vec<_>>(),
                b.iter().map(|f| &f.0).collect::<Vec<_>>(),
                "{mode:?} round {round}"
            );
            for (x, y) in a.iter().zip(&b) {
                assert!(
                    x.1 == y.1,
                    "{mode:?} round {round}: {} differs",
                    x.0.display()
                );
            }
        }
    }
}

#[test]
fn a_dataset_without_records_gets_an_empty_group() {
    let dir = tempfile::tempdir().unwrap();
    let rt = Runtime::with_threads(1).unwrap();
    let sam = dir.path().join("empty.sam");
    std::fs::write(&sam, "@HD\tVN:1.6\tSO:coordinate\n@SQ\tSN:c\tLN:100\n").unwrap();
    for mode in [Mode::Query, Mode::Coordinate] {
        let (one, many) = (dir.path().join("one"), dir.path().join("many"));
        for ds in [&one, &many] {
            let _ = std::fs::remove_dir_all(ds);
            AgdImportJob::new(sam.to_str().unwrap(), ds)
                .run(&rt)
                .unwrap();
        }
        let job = |ds: &Path| AgdMarkdupJob {
            mode,
            ..AgdMarkdupJob::new(ds)
        };
        job(&one).run(&rt).unwrap();
        let got = run_tasks(&job(&many), 16 << 10, &rt).unwrap();
        assert_eq!(got["records"], 0);
        assert_eq!(files(&one), files(&many), "{mode:?}");
        assert!(many.join(DUPLICATE_GROUP).is_dir());
    }
}

#[test]
fn a_failed_or_refused_job_leaves_the_dataset_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let rt = Runtime::with_threads(1).unwrap();
    let ds = dir.path().join("ds");
    let sam = sam(dir.path());
    let import = AgdImportJob {
        chunk_size: 50,
        ..AgdImportJob::new(sam.to_str().unwrap(), &ds)
    };
    import.run(&rt).unwrap();
    let before = files(&ds);
    let mut job = AgdMarkdupJob::new(&ds);
    job.picard.metrics = Some(dir.path().join("m.txt"));
    let e = run_tasks(&job, 16 << 10, &rt).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Argument, "{e}");
    // A chunk file damaged after planning: a map task fails, the plan is aborted.
    let job = AgdMarkdupJob::new(&ds);
    let chunk = sortase_agd::chunk_path(&ds, Group::Bases, 3);
    let good = std::fs::read(&chunk).unwrap();
    std::fs::write(&chunk, b"not parquet").unwrap();
    assert!(run_tasks(&job, 16 << 10, &rt).is_err());
    std::fs::write(&chunk, good).unwrap();
    assert_eq!(files(&ds), before);
    let left: Vec<_> = std::fs::read_dir(&ds)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with('.'))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
