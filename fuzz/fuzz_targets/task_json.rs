#![no_main]
//! Arbitrary bytes as the JSON a distributed driver passes around: a task (`sortase::tasks::AnyTask`,
//! decoded through the registry), a plan (`Plan`) and the outputs of a stage (JSON values), split at
//! the first two NUL bytes.
//! A plan that parses is asked for the tasks of each of its stages from those outputs
//! (`Plan::stage_tasks`: the validation a driver relies on when outputs come back from workers),
//! and `task_io_json` is asked of the task.
//!
//! Nothing is run and no file is written: tasks are never run, plans never finished or aborted.
//! Must hold: errors, never panics; what parses serialises back to JSON that parses.

use libfuzzer_sys::fuzz_target;
use sortase::tasks::{task_io_json, AnyTask, Plan};
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

    if let Ok(t) = serde_json::from_str::<AnyTask>(task) {
        let json = serde_json::to_string(&t).expect("a task serialises");
        serde_json::from_str::<AnyTask>(&json).expect("a written task reads back");
        let _ = task_io_json(task);
    }
    let outputs: Vec<serde_json::Value> = serde_json::from_str(outputs).unwrap_or_default();
    if let Ok(p) = serde_json::from_str::<Plan>(plan) {
        let json = serde_json::to_string(&p).expect("a plan serialises");
        serde_json::from_str::<Plan>(&json).expect("a written plan reads back");
        for stage in p.stages() {
            let _ = p.stage_tasks(stage, &outputs, runtime());
        }
        let _ = p.stage_tasks("no such stage", &[], runtime());
    }
});
