//! Temporary files and outputs on shared machines: a symlink planted at the predictable temporary
//! name of an output or of a scratch directory is never followed (the victim stays unchanged), and a
//! `-T` directory that every user may write to without the sticky bit is refused.
//!
//! The predictable names contain the process id; `sh -c '…; exec sortase …'` plants them for the
//! shell's pid, which `exec` hands on to sortase.

use crate::common::{p, run, sortase, sortase_bin, tempdir};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const SAM: &str = "@HD\tVN:1.6\tSO:unsorted\n@SQ\tSN:chr1\tLN:1000\n\
r2\t0\tchr1\t500\t60\t4M\t*\t0\t0\tACGT\tIIII\n\
r1\t0\tchr1\t100\t60\t4M\t*\t0\t0\tACGT\tIIII\n\
r3\t4\t*\t0\t0\t*\t*\t0\t0\tACGT\tIIII\n";

/// Runs `script` (with `$SORTASE` set) under `sh -c` in `dir`.
fn sh(dir: &Path, script: &str) -> crate::common::Run {
    let script = format!(
        "cd '{}' && SORTASE='{}' && {script}",
        p(dir),
        p(&sortase_bin())
    );
    run(Path::new("/bin/sh"), &[], &["-c", &script])
}

#[test]
fn planted_symlinks_at_temporary_names_are_not_followed() {
    let dir = tempdir();
    std::fs::write(dir.path().join("in.sam"), SAM).unwrap();
    std::fs::write(dir.path().join("victim"), "precious").unwrap();
    std::fs::create_dir(dir.path().join("victim_dir")).unwrap();
    // The output's first temporary name and the first name of sort's scratch directory (default
    // prefix: OUTPUT.tmp), both for the pid sortase will have.
    let r = sh(
        dir.path(),
        "ln -s victim .out.bam.sortase-$$.tmp && ln -s victim_dir out.bam.tmp.sortase-$$-0.tmp && \
         exec \"$SORTASE\" sort -o out.bam in.sam",
    );
    assert!(r.ok(), "{}", r.failure());
    assert_eq!(
        std::fs::read(dir.path().join("victim")).unwrap(),
        b"precious"
    );
    assert_eq!(
        std::fs::read_dir(dir.path().join("victim_dir"))
            .unwrap()
            .count(),
        0
    );
    let sam = sortase(&["view", p(&dir.path().join("out.bam"))])
        .expect_ok()
        .text();
    let names: Vec<&str> = sam.lines().map(|l| l.split('\t').next().unwrap()).collect();
    assert_eq!(names, ["r1", "r2", "r3"]);

    // The same for an index written next to its BAM (sortase index).
    let r = sh(
        dir.path(),
        "ln -s victim .out.bam.csi.sortase-$$.tmp && exec \"$SORTASE\" index -c out.bam",
    );
    assert!(r.ok(), "{}", r.failure());
    assert_eq!(
        std::fs::read(dir.path().join("victim")).unwrap(),
        b"precious"
    );
    assert!(dir.path().join("out.bam.csi").is_file());
}

#[test]
fn a_temporary_directory_writable_by_all_without_sticky_bit_is_refused() {
    let dir = tempdir();
    let input = dir.path().join("in.sam");
    std::fs::write(&input, SAM).unwrap();
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = dir.path().join("out.bam");
    let r = sortase(&["sort", "-T", p(&shared), "-o", p(&out), p(&input)]);
    assert!(!r.ok(), "sort with a shared -T directory succeeded");
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("writable by all users without the sticky bit")
            && r.stderr.contains(p(&shared)),
        "{}",
        r.stderr
    );
    assert!(!out.exists());
    assert_eq!(std::fs::read_dir(&shared).unwrap().count(), 0);
    // With the sticky bit (as /tmp has) the directory is used, through a private subdirectory.
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    sortase(&["sort", "-T", p(&shared), "-o", p(&out), p(&input)]).expect_ok();
    assert!(out.is_file());
    assert_eq!(std::fs::read_dir(&shared).unwrap().count(), 0);
}
