//! Broken inputs: sortase must exit non-zero with a one-line error naming the
//! input, create no output file (nor leave temp files), and leave an existing
//! output file untouched. Each input is first checked to be rejected by
//! samtools too, so the test inputs are known to be really broken.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::bgzf;
use crate::common::{
    assert_no_failures, dir_listing, gunzip, line, p, sortase, sortase_bin, tempdir, Rng,
};
use crate::oracle::{oracle, Oracle};

/// A valid BAM of a few thousand 150 bp reads, spanning several BGZF blocks.
fn valid_bam(st: &Oracle, dir: &Path) -> PathBuf {
    let mut rng = Rng::new(99);
    let mut sam =
        line(&["@HD", "VN:1.6", "SO:unsorted"]) + &line(&["@SQ", "SN:chr1", "LN:1000000"]);
    for i in 0..3000 {
        let pos = (1 + rng.below(900_000)).to_string();
        sam += &line(&[
            &format!("r{i}"),
            "0",
            "chr1",
            &pos,
            "60",
            "150M",
            "*",
            "0",
            "0",
            &rng.bases(150),
            &rng.quals(150),
        ]);
    }
    let (sam_path, bam) = (dir.join("valid.sam"), dir.join("valid.bam"));
    std::fs::write(&sam_path, sam).unwrap();
    st.run(&["view", "-b", "--no-PG", "-o", p(&bam), p(&sam_path)])
        .expect_ok();
    std::fs::remove_file(&sam_path).unwrap();
    bam
}

/// Write `bytes` as `name` in a fresh subdirectory and check sortase on it.
fn broken(name: &str, make: impl FnOnce(&Oracle, &Path) -> Option<Vec<u8>>) {
    let Some(st) = oracle() else { return };
    let tmp = tempdir();
    let src = tmp.path().join("src");
    let dir = tmp.path().join("case");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join(name);
    if let Some(bytes) = make(st, &src) {
        std::fs::write(&input, bytes).unwrap();
    }
    let probe = st.run(&["view", "-b", "-o", p(&src.join("oracle.bam")), p(&input)]);
    assert!(
        !probe.ok(),
        "test input {name} is accepted by samtools; it is not broken"
    );
    assert_no_failures(name, &check_rejected(&input, &dir));
}

/// One-line stderr that names the input file.
fn check_message(failures: &mut Vec<String>, how: &str, input: &Path, stderr: &str) {
    let name = input.file_name().unwrap().to_string_lossy();
    let lines = stderr.trim_end().lines().count();
    if lines != 1 || !stderr.contains(name.as_ref()) {
        failures.push(format!(
            "{how}: want one error line naming {name}, got {lines} line(s): {stderr:?}"
        ));
    }
}

fn check_rejected(input: &Path, dir: &Path) -> Vec<String> {
    let mut failures = Vec::new();
    let before = dir_listing(dir);
    let out = dir.join("out.bam");
    let run = sortase(&["view", "-b", "-o", p(&out), p(input)]);
    if run.ok() {
        failures.push("view -b -o out.bam: exited 0".into());
    }
    check_message(&mut failures, "view -b -o out.bam", input, &run.stderr);
    if dir_listing(dir) != before {
        failures.push(format!(
            "view -b -o out.bam left files behind: {:?}",
            dir_listing(dir)
        ));
    }

    std::fs::write(&out, "precious\n").unwrap();
    let before = dir_listing(dir);
    let run = sortase(&["view", "-b", "-@", "2", "-o", p(&out), p(input)]);
    if run.ok() {
        failures.push("view -b -@ 2 -o existing.bam: exited 0".into());
    }
    if std::fs::read(&out).ok().as_deref() != Some(b"precious\n".as_slice()) {
        failures.push("an existing output file was modified by a failed run".into());
    }
    if dir_listing(dir) != before {
        failures.push(format!(
            "failed run over an existing output left files: {:?}",
            dir_listing(dir)
        ));
    }
    std::fs::remove_file(&out).unwrap();

    let run = sortase(&["view", p(input)]);
    if run.ok() {
        failures.push("view (SAM to stdout): exited 0".into());
    }
    check_message(&mut failures, "view (SAM to stdout)", input, &run.stderr);
    failures
}

#[test]
fn error_truncated_bgzf() {
    broken("truncated.bam", |st, src| {
        let bam = std::fs::read(valid_bam(st, src)).unwrap();
        let blocks = bgzf::blocks(&bam);
        assert!(
            blocks.len() > 4,
            "valid BAM has only {} blocks",
            blocks.len()
        );
        let (at, len) = blocks[2];
        Some(bam[..at + len / 2].to_vec())
    });
}

#[test]
fn error_bad_crc_field() {
    broken("bad_crc.bam", |st, src| {
        let mut bam = std::fs::read(valid_bam(st, src)).unwrap();
        let (at, len) = bgzf::blocks(&bam)[1];
        bam[at + len - 8] ^= 0x55; // first byte of the CRC32 field
        Some(bam)
    });
}

#[test]
fn error_corrupt_deflate_data() {
    broken("corrupt_data.bam", |st, src| {
        let mut bam = std::fs::read(valid_bam(st, src)).unwrap();
        let (at, len) = bgzf::blocks(&bam)[1];
        let mid = at + 18 + (len - 26) / 2;
        for b in &mut bam[mid..mid + 16] {
            *b ^= 0xff;
        }
        Some(bam)
    });
}

#[test]
fn error_bad_magic() {
    broken("bad_magic.bam", |st, src| {
        let mut raw = gunzip(&valid_bam(st, src));
        raw[..4].copy_from_slice(b"BAX\x01");
        Some(bgzf::compress(&raw))
    });
}

/// Valid header, then a record whose block_size runs past the data.
#[test]
fn error_record_overruns_data() {
    broken("overrun.bam", |st, src| {
        let raw = gunzip(&valid_bam(st, src));
        let mut data = raw[..bgzf::bam_header_len(&raw)].to_vec();
        data.extend_from_slice(&500u32.to_le_bytes());
        data.extend_from_slice(&raw[data.len()..data.len() + 100]);
        Some(bgzf::compress(&data))
    });
}

/// Valid header, then a record too short for its fixed fields.
#[test]
fn error_record_too_short() {
    broken("short_record.bam", |st, src| {
        let raw = gunzip(&valid_bam(st, src));
        let mut data = raw[..bgzf::bam_header_len(&raw)].to_vec();
        data.extend_from_slice(&8u32.to_le_bytes());
        data.extend_from_slice(&[0; 8]);
        Some(bgzf::compress(&data))
    });
}

#[test]
fn error_text_named_bam() {
    broken("text.bam", |_, _| {
        Some(b"this is not a BAM file\njust some text\n".to_vec())
    });
}

#[test]
fn error_random_bytes() {
    broken("random.bam", |_, _| {
        let mut rng = Rng::new(5);
        Some((0..4096).map(|_| (rng.next() >> 24) as u8 | 0x80).collect())
    });
}

#[test]
fn error_empty_bam() {
    broken("empty.bam", |_, _| Some(Vec::new()));
}

#[test]
fn error_missing_input() {
    broken("missing.bam", |_, _| None);
}

/// `sortase view big.bam | head -1`: closing stdout early is not an error
/// (exit 0 or death by SIGPIPE, and nothing on stderr).
#[test]
fn closed_stdout_is_quiet() {
    let Some(st) = oracle() else { return };
    let tmp = tempdir();
    let bam = valid_bam(st, tmp.path());
    let mut child = Command::new(sortase_bin())
        .args(["view", p(&bam)])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sortase");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(first.starts_with("r0\t"), "unexpected first line {first:?}");
    use std::os::unix::process::ExitStatusExt;
    let sigpipe = out.status.signal() == Some(13);
    assert!(
        out.status.success() || sigpipe,
        "exit status {} after stdout closed",
        out.status
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.trim().is_empty(),
        "stderr after stdout closed: {stderr}"
    );
}
