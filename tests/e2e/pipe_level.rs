//! The uncompressed-into-a-pipe default of `sort` and `markdup`: BAM to standard output that is a
//! pipe is written uncompressed (every BGZF block stored, as `-u`) unless a level is given; to a
//! file (also through stdout redirected to it) at the default level. The records are the same
//! either way.

use std::path::Path;

use crate::common::{p, run, sortase_bin, tempdir};
use crate::oracle::oracle;

/// Whether every BGZF block of `bam` with data holds a stored (uncompressed) DEFLATE block (the
/// empty EOF marker block is a fixed one in every BAM); panics on a file that is not BGZF.
fn all_stored(bam: &[u8]) -> bool {
    let mut at = 0;
    let mut stored = true;
    while at < bam.len() {
        let b = &bam[at..];
        assert!(
            b.len() >= 18 && b[..4] == [31, 139, 8, 4],
            "not BGZF at byte {at}"
        );
        let size = u16::from_le_bytes([b[16], b[17]]) as usize + 1;
        // BTYPE (bits 1-2 of the first DEFLATE byte) 00: stored; ISIZE (the last 4 bytes) 0: EOF.
        let isize = u32::from_le_bytes(b[size - 4..size].try_into().unwrap());
        stored &= isize == 0 || b[18] & 0b110 == 0;
        at += size;
    }
    stored
}

/// Runs `sh -c script` in `dir`.
fn sh(dir: &Path, script: &str) {
    let script = format!("cd {} && {script}", p(dir));
    run(Path::new("/bin/sh"), &[], &["-c", &script]).expect_ok();
}

#[test]
fn sort_and_markdup_write_uncompressed_into_a_pipe_only() {
    let Some(st) = oracle() else { return };
    let dir = tempdir();
    let d = dir.path();
    std::fs::write(d.join("in.sam"), crate::markdup_query::grouped(2000, 4)).unwrap();
    let bin = sortase_bin();
    let s = p(&bin);
    for cmd in ["sort", "markdup -q"] {
        // stdout a pipe: uncompressed; -l 6 or --output-fmt-option level=6: compressed; -O sam: SAM.
        sh(d, &format!("{s} {cmd} in.sam | cat > pipe.bam"));
        sh(d, &format!("{s} {cmd} -l 6 in.sam | cat > pipe-l6.bam"));
        sh(
            d,
            &format!("{s} {cmd} --output-fmt-option level=6 in.sam | cat > pipe-opt.bam"),
        );
        sh(d, &format!("{s} {cmd} -O sam in.sam | cat > pipe.sam"));
        // stdout a file, and -o FILE: compressed; -u into a file: uncompressed.
        sh(d, &format!("{s} {cmd} in.sam > redirected.bam"));
        sh(d, &format!("{s} {cmd} -o file.bam in.sam"));
        sh(d, &format!("{s} {cmd} -u -o file-u.bam in.sam"));
        let read = |n: &str| std::fs::read(d.join(n)).unwrap();
        for (name, stored) in [
            ("pipe.bam", true),
            ("pipe-l6.bam", false),
            ("pipe-opt.bam", false),
            ("redirected.bam", false),
            ("file.bam", false),
            ("file-u.bam", true),
        ] {
            assert_eq!(all_stored(&read(name)), stored, "{cmd}: {name}");
        }
        assert!(read("pipe.sam").starts_with(b"@HD"), "{cmd}: -O sam");
        // Random bases and qualities: deflate saves about a third.
        let (piped, filed) = (read("pipe.bam").len(), read("file.bam").len());
        assert!(piped * 4 > filed * 5, "{cmd}: {piped} vs {filed} bytes");
        let records = |n: &str| {
            let v = st.run(&["view", p(&d.join(n))]).expect_ok().text();
            assert!(v.lines().count() > 4000);
            v
        };
        let want = records("file.bam");
        for name in ["pipe.bam", "pipe-l6.bam", "redirected.bam", "file-u.bam"] {
            assert!(records(name) == want, "{cmd}: {name}: records differ");
        }
    }
    // The choice is in --help.
    let help = crate::common::sortase(&["sort", "--help"])
        .expect_ok()
        .text();
    assert!(help.contains("uncompressed (level 0, as -u)"), "{help}");
}
