#![no_main]
//! Arbitrary bytes as the JSON a distributed driver passes around: a task (`sortase::tasks::Task`),
//! a plan (`Plan`) and the outputs of a stage (`Vec<TaskOutput>`), split at the first two NUL bytes.
//! A plan that parses is asked for the tasks of each of its stages from those outputs
//! (`Plan::stage_tasks`: the validation a driver relies on when outputs come back from workers),
//! and `input_spans_json` is asked of the task.
//!
//! Nothing is run and no file is written: tasks are never run, plans never finished or aborted.
//! Must hold: errors, never panics; what parses serialises back to JSON that parses.

use libfuzzer_sys::fuzz_target;
use sortase::tasks::{input_spans_json, Plan, Task, TaskOutput};
use sortase::Runtime;
use std::sync::OnceLock;

fn runtime() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| Runtime::with_threads(1).expect("a runtime"))
}

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(3, |&c| c == 0);
    let task = std::str::from_utf8(parts.next().unwrap_or_default()).unwrap_or("");
    let plan = std::str::from_utf8(parts.next().unwrap_or_default()).unwrap_or("");
    let outputs = std::str::from_utf8(parts.next().unwrap_or_default()).unwrap_or("");

    if let Ok(t) = serde_json::from_str::<Task>(task) {
        let json = serde_json::to_string(&t).expect("a task serialises");
        serde_json::from_str::<Task>(&json).expect("a written task reads back");
        let _ = input_spans_json(task);
    }
    let outputs: Vec<TaskOutput> = serde_json::from_str(outputs).unwrap_or_default();
    if let Ok(p) = serde_json::from_str::<Plan>(plan) {
        let json = serde_json::to_string(&p).expect("a plan serialises");
        serde_json::from_str::<Plan>(&json).expect("a written plan reads back");
        for stage in p.stages() {
            let _ = p.stage_tasks(stage, outputs.clone(), runtime());
        }
        let _ = p.stage_tasks("no such stage", Vec::new(), runtime());
    }
});
