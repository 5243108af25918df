//! Issue 16: a write that fails for lack of space (disk full) ends the command with one clear error
//! naming the file, a non-zero exit, no partial output and no temporary files, and the input intact.
//!
//! The full disk is a 1 MiB tmpfs where the test may mount one (root); elsewhere the same failure
//! comes from `RLIMIT_FSIZE` (`ulimit -f`) with `SIGXFSZ` ignored, so writes fail with `EFBIG`.

use crate::common::{dir_listing, line, sortase_bin, tempdir, Rng};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A 1 MiB tmpfs, unmounted on drop; `None` where mounting is not allowed.
struct SmallDisk {
    path: PathBuf,
}

impl SmallDisk {
    fn mount(at: &Path) -> Option<Self> {
        std::fs::create_dir_all(at).ok()?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
            .arg(at)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Self {
            path: at.to_path_buf(),
        })
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.path).status();
    }
}

/// Incompressible-enough SAM: ~3 MB as BAM, so it cannot fit 1 MiB.
fn big_sam(dir: &Path) -> PathBuf {
    let mut s = String::from("@SQ\tSN:chr1\tLN:2000000\n");
    let mut rng = Rng::new(16);
    for i in 0..20_000 {
        s += &line(&[
            &format!("r{i}"),
            "0",
            "chr1",
            &(1 + rng.below(1_900_000)).to_string(),
            "60",
            "100M",
            "*",
            "0",
            "0",
            &rng.bases(100),
            &rng.quals(100),
        ]);
    }
    let path = dir.join("in.sam");
    std::fs::write(&path, s).unwrap();
    path
}

/// Runs sortase with `args`; where no tmpfs could be mounted, with a 1 MiB file size limit.
fn run_limited(args: &[&str], limited: bool) -> (bool, String) {
    let mut cmd = Command::new(sortase_bin());
    cmd.args(args);
    if limited {
        // SAFETY: only async-signal-safe calls (setrlimit, signal) between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                let lim = libc::rlimit {
                    rlim_cur: 1 << 20,
                    rlim_max: 1 << 20,
                };
                libc::setrlimit(libc::RLIMIT_FSIZE, &lim);
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                Ok(())
            });
        }
    }
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn issue_16_disk_full_leaves_no_output_and_names_the_file() {
    let tmp = tempdir();
    let input = big_sam(tmp.path());
    let before = std::fs::read(&input).unwrap();
    let disk = SmallDisk::mount(&tmp.path().join("disk"));
    let limited = disk.is_none();
    let full = match &disk {
        Some(d) => d.path.clone(),
        None => {
            let d = tmp.path().join("limited");
            std::fs::create_dir(&d).unwrap();
            d
        }
    };
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let out = full.join("out.bam");
    let other_out = elsewhere.join("o.bam");
    let (i, o, t, e, oo) = (
        input.to_str().unwrap(),
        out.to_str().unwrap(),
        full.to_str().unwrap(),
        elsewhere.to_str().unwrap(),
        other_out.to_str().unwrap(),
    );
    let cases: Vec<(&str, Vec<&str>, &str)> = vec![
        // Output on the full disk, temporary files elsewhere.
        ("sort", vec!["sort", "-@", "2", "-T", e, "-o", o, i], o),
        // Output and index on the full disk.
        (
            "sort --write-index",
            vec!["sort", "-@", "2", "-T", e, "--write-index", "-o", o, i],
            o,
        ),
        // Runs on the full disk (a small budget), output elsewhere.
        (
            "sort runs",
            vec![
                "sort",
                "-@",
                "2",
                "--max-memory",
                "1M",
                "-T",
                t,
                "-o",
                oo,
                i,
            ],
            t,
        ),
        ("view", vec!["view", "-b", "-o", o, i], o),
        ("bgzip", vec!["bgzip", "-c", "-o", o, i], o),
    ];
    for (label, args, names) in cases {
        let (ok, stderr) = run_limited(&args, limited);
        assert!(!ok, "{label}: succeeded on a full disk");
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{label}: one error line, got {stderr:?}");
        let problem = if limited {
            "File too large"
        } else {
            "No space left on device"
        };
        assert!(
            lines[0].contains(problem) && lines[0].contains(names),
            "{label}: error should name {names} and say {problem:?}: {}",
            lines[0]
        );
        assert!(
            dir_listing(&full).is_empty(),
            "{label}: left {:?} on the full disk",
            dir_listing(&full)
        );
        assert!(
            dir_listing(&elsewhere).is_empty(),
            "{label}: left {:?}",
            dir_listing(&elsewhere)
        );
        assert!(
            std::fs::read(&input).unwrap() == before,
            "{label}: input changed"
        );
    }
}
