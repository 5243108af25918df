//! Unit tests of the signature rules on small hand-made groups.

use super::*;
use sortase_bam::{sam_parse::parse_record, Header};

fn header() -> Header {
    Header::from_sam_text("@SQ\tSN:a\tLN:1000\n@SQ\tSN:b\tLN:2000\n".into()).unwrap()
}

/// A batch of the SAM records `lines` (QNAME FLAG RNAME POS CIGAR, the rest filled in).
fn batch(lines: &[&str]) -> RecordBatch {
    let h = header();
    let (mut buf, mut offsets) = (Vec::new(), Vec::new());
    for l in lines {
        let f: Vec<&str> = l.split_whitespace().collect();
        let cigar = f[4];
        let n = if cigar == "*" {
            10
        } else {
            let mut len = 0;
            let mut num = 0;
            for c in cigar.bytes() {
                if c.is_ascii_digit() {
                    num = num * 10 + usize::from(c - b'0');
                } else {
                    if b"MIS=X".contains(&c) {
                        len += num;
                    }
                    num = 0;
                }
            }
            len
        };
        let text = format!(
            "{}\t{}\t{}\t{}\t30\t{}\t*\t0\t0\t{}\t*",
            f[0],
            f[1],
            f[2],
            f[3],
            cigar,
            "A".repeat(n)
        );
        offsets.push(buf.len() as u32);
        parse_record(text.as_bytes(), &h, &mut buf).unwrap();
    }
    let end = buf.len();
    RecordBatch::from_parts(buf, offsets, end, 0)
}

fn group(lines: &[&str], opts: &Options) -> Group {
    let b = batch(lines);
    let layout = Layout::new(&[1000, 2000], 500).unwrap();
    analyze(&b, 0..b.len(), &layout, opts)
}

#[test]
fn unclipped_five_prime() {
    let b = batch(&[
        "r 0 a 100 5S45M",
        "r 16 a 100 10M2D40M5S",
        "r 0 a 100 2S3I45M",
        "r 0 a 100 5H2I3S40M",
        "r 16 a 100 5S10M3H",
    ]);
    let got: Vec<i32> = (0..5)
        .map(|i| layout::five_prime(&b.record(i), false))
        .collect();
    assert_eq!(got, vec![95, 156, 98, 92, 112]);
    // An orphan is taken as on the forward strand.
    assert_eq!(layout::five_prime(&b.record(1), true), 100);
}

#[test]
fn pair_order_and_strand() {
    let o = Options::default();
    let fwd = group(&["p 97 a 100 50M", "p 145 a 300 50M"], &o);
    // The same pair with the segments' roles exchanged.
    let swapped = group(&["p 81 a 300 50M", "p 161 a 100 50M"], &o);
    assert_eq!(fwd.verdict, swapped.verdict);
    assert!(matches!(fwd.verdict, Verdict::Sig(_)));
    // A different strand of one end is a different signature.
    let other = group(&["p 65 a 100 50M", "p 129 a 300 50M"], &o);
    assert_ne!(fwd.verdict, other.verdict);
    // Clipping moves the aligned start but not the unclipped 5' end.
    let clipped = group(&["p 97 a 105 5S45M", "p 145 a 300 50M"], &o);
    assert_eq!(fwd.verdict, clipped.verdict);
    assert!(fwd.discordant);
    assert_eq!(fwd.pair, Some((0, 1)));
}

#[test]
fn orphans_and_unmated() {
    let o = Options::default();
    let orphan = group(&["p 73 a 100 50M", "p 133 a 100 *"], &o);
    let orphan_rev = group(&["p 89 a 100 50M", "p 165 a 100 *"], &o);
    // Orphans are compared as if on the forward strand.
    assert_eq!(orphan.verdict, orphan_rev.verdict);
    let single = group(&["s 0 a 100 50M"], &o);
    assert_eq!(single.verdict, orphan.verdict);
    assert_eq!(
        group(&["p 77 * 0 *", "p 141 * 0 *"], &o).verdict,
        Verdict::Pass
    );
    // A paired read alone whose mate is mapped, or an unmapped single read: not grouped.
    assert_eq!(group(&["p 65 a 100 50M"], &o).verdict, Verdict::Broken);
    assert_eq!(group(&["s 4 * 0 *"], &o).verdict, Verdict::Broken);
    assert_eq!(group(&["s 256 a 100 50M"], &o).verdict, Verdict::Broken);
    let ignore = Options {
        ignore_unmated: true,
        ..o
    };
    assert_eq!(group(&["p 65 a 100 50M"], &ignore).verdict, Verdict::Pass);
    // Secondary and supplementary records do not take part.
    let with_supp = group(&["p 97 a 100 50M", "p 2145 b 7 50M", "p 145 a 300 50M"], &o);
    assert_eq!(
        with_supp.verdict,
        group(&["p 97 a 100 50M", "p 145 a 300 50M"], &o).verdict
    );
}

#[test]
fn layout_limits() {
    assert!(Layout::new(&[], 500).is_err());
    assert!(Layout::new(&[(1 << 31) - 1; 3000], 500).is_err());
    assert_eq!(Layout::new(&[1000, 2000], 500).unwrap().bin_count, 0);
}
