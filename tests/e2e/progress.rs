//! Progress bars of `index`, `agd import/export/sort/markdup` and `fq2bam`: drawn on a terminal
//! (a pseudo-terminal from `script`), nothing on stderr when it is not one.

use std::path::Path;

use crate::common::{p, run, sortase, sortase_bin, tempdir};
use crate::oracle::oracle;

/// The commands, as argument lists run in `dir` (inputs made by [`inputs`]), each with the text
/// its bar shows.
const COMMANDS: &[(&[&str], &str)] = &[
    (&["index", "in.bam"], "index"),
    (&["agd", "import", "in.bam", "-o", "ds"], "agd import"),
    (&["agd", "export", "ds", "-o", "out.bam"], "agd export"),
    (&["agd", "sort", "-n", "ds", "-o", "by_name"], "agd sort"),
    (&["agd", "markdup", "-q", "ds"], "agd markdup"),
    (
        &[
            "fq2bam",
            "-x",
            "ref.fa",
            "-o",
            "mapped.bam",
            "r1.fq",
            "r2.fq",
        ],
        "fq2bam",
    ),
];

/// A coordinate-sorted in.bam, a reference and read pairs in `dir`.
fn inputs(dir: &Path) {
    std::fs::write(dir.join("in.sam"), crate::markdup_query::grouped(20_000, 2)).unwrap();
    sortase(&["sort", "-o", p(&dir.join("in.bam")), p(&dir.join("in.sam"))]).expect_ok();
    crate::fq2bam::dataset(dir, 3000);
}

/// Runs `args` in `dir`, removing what the previous run of the same command wrote.
fn in_dir(dir: &Path, args: &[&str]) -> String {
    let bin = sortase_bin();
    let args: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    format!("cd {} && {} {}", p(dir), p(&bin), args.join(" "))
}

fn reset(dir: &Path) {
    for name in ["in.bam.bai", "out.bam", "mapped.bam"] {
        let _ = std::fs::remove_file(dir.join(name));
    }
    for name in ["ds", "by_name"] {
        let _ = std::fs::remove_dir_all(dir.join(name));
    }
}

#[test]
fn progress_bars_only_on_a_terminal() {
    if oracle().is_none() {
        return;
    }
    let dir = tempdir();
    let d = dir.path();
    inputs(d);
    let sh = Path::new("/bin/sh");
    // stderr a pipe: nothing drawn, nothing printed.
    reset(d);
    for (args, _) in COMMANDS {
        let r = run(sh, &[], &["-c", &in_dir(d, args)]).expect_ok();
        assert_eq!(
            r.stderr, "",
            "{args:?}: stderr not a terminal, yet: {}",
            r.stderr
        );
    }
    // A pseudo-terminal (util-linux `script`): each command draws its bar there.
    let script = Path::new("/usr/bin/script");
    if !script.is_file() {
        return crate::common::skip("no /usr/bin/script for a pseudo-terminal");
    }
    reset(d);
    for (args, label) in COMMANDS {
        let r = run(script, &[], &["-qec", &in_dir(d, args), "/dev/null"]).expect_ok();
        let shown = String::from_utf8_lossy(&r.stdout).into_owned();
        assert!(
            shown.contains(label),
            "{args:?}: no bar on a terminal: {shown:?}"
        );
    }
}
