//! Overlapping mates, as htslib 1.16's pileup handles them (`sam.c`: `tweak_overlap_quality`,
//! `cigar_iref2iseq_set`, `cigar_iref2iseq_next`): where both mates of a template align a base to the
//! same reference position, one of them keeps the base (with the summed quality, capped at 200, when
//! the bases agree; with 80 % of its quality when they disagree) and the other one's quality becomes 0,
//! so the fragment is counted once. Which mate keeps a matching base is chosen by a hash of the read
//! name, so the port reproduces khash's `__ac_X31_hash_string` and `__ac_Wang_hash` exactly.

use sortase_bam::cigar::op_code;

const MATCH: u32 = 0; // BAM_CMATCH
const INS: u32 = 1; // BAM_CINS
const DEL: u32 = 2; // BAM_CDEL
const REF_SKIP: u32 = 3; // BAM_CREF_SKIP
const SOFT_CLIP: u32 = 4; // BAM_CSOFT_CLIP
const HARD_CLIP: u32 = 5; // BAM_CHARD_CLIP
const PAD: u32 = 6; // BAM_CPAD
const EQUAL: u32 = 7; // BAM_CEQUAL
const DIFF: u32 = 8; // BAM_CDIFF

/// Returned by the CIGAR walkers: a matching base was reached.
const AT_MATCH: i32 = 0;

/// khash `__ac_X31_hash_string` (on `char`, which is signed on the platforms htslib is built for).
fn x31_hash(name: &[u8]) -> u32 {
    let mut it = name.iter().map(|&c| c as i8 as i32 as u32);
    let Some(mut h) = it.next() else { return 0 };
    for c in it {
        h = (h << 5).wrapping_sub(h).wrapping_add(c);
    }
    h
}

/// khash `__ac_Wang_hash`.
fn wang_hash(mut key: u32) -> u32 {
    key = key.wrapping_add(!(key << 15));
    key ^= key >> 10;
    key = key.wrapping_add(key << 3);
    key ^= key >> 6;
    key = key.wrapping_add(!(key << 11));
    key ^= key >> 16;
    key
}

/// A position inside a CIGAR walk: `cig` is the index of the current op (`cigar` pointer in C).
struct Walk<'a> {
    ops: &'a [u32],
    cig: usize,
    icig: i64,
    iseq: i64,
    iref: i64,
}

impl<'a> Walk<'a> {
    fn new(ops: &'a [u32], iref: i64) -> Self {
        Walk {
            ops,
            cig: 0,
            icig: 0,
            iseq: 0,
            iref,
        }
    }

    /// `cigar_iref2iseq_set`: moves to the matching base at `iref` (relative to the read start).
    fn set(&mut self) -> i32 {
        let mut pos = self.iref;
        if pos < 0 {
            return -1;
        }
        self.icig = 0;
        self.iseq = 0;
        self.iref = 0;
        while self.cig < self.ops.len() {
            let op = self.ops[self.cig];
            let (cig, ncig) = (op_code(op), i64::from(op >> 4));
            match cig {
                SOFT_CLIP | INS => {
                    self.cig += 1;
                    self.iseq += ncig;
                    self.icig = 0;
                }
                HARD_CLIP | PAD => {
                    self.cig += 1;
                    self.icig = 0;
                }
                MATCH | EQUAL | DIFF => {
                    pos -= ncig;
                    if pos < 0 {
                        self.icig = ncig + pos;
                        self.iseq += self.icig;
                        self.iref += self.icig;
                        return AT_MATCH;
                    }
                    self.cig += 1;
                    self.iseq += ncig;
                    self.icig = 0;
                    self.iref += ncig;
                }
                DEL | REF_SKIP => {
                    pos = (pos - ncig).max(0);
                    self.cig += 1;
                    self.icig = 0;
                    self.iref += ncig;
                }
                _ => return -2,
            }
        }
        self.iseq = -1;
        -1
    }

    /// `cigar_iref2iseq_next`: the next matching base.
    fn next(&mut self) -> i32 {
        while self.cig < self.ops.len() {
            let op = self.ops[self.cig];
            let (cig, ncig) = (op_code(op), i64::from(op >> 4));
            match cig {
                MATCH | EQUAL | DIFF => {
                    if self.icig >= ncig - 1 {
                        self.icig = -1;
                        self.cig += 1;
                        continue;
                    }
                    self.iseq += 1;
                    self.icig += 1;
                    self.iref += 1;
                    return AT_MATCH;
                }
                DEL | REF_SKIP => {
                    self.cig += 1;
                    self.iref += ncig;
                    self.icig = -1;
                }
                INS | SOFT_CLIP => {
                    self.cig += 1;
                    self.iseq += ncig;
                    self.icig = -1;
                }
                HARD_CLIP | PAD => {
                    self.cig += 1;
                    self.icig = -1;
                }
                _ => return -2,
            }
        }
        self.iseq = -1;
        self.iref = -1;
        -1
    }
}

/// One mate as the tweak sees it: position, CIGAR ops, packed sequence and (mutable) qualities.
pub struct Mate<'a> {
    /// 0-based alignment start.
    pub pos: i64,
    /// Packed CIGAR ops.
    pub cigar: &'a [u32],
    /// Packed 4-bit sequence.
    pub seq: &'a [u8],
    /// Base qualities, modified in place.
    pub qual: &'a mut [u8],
}

fn base(seq: &[u8], i: i64) -> u8 {
    let b = seq[(i >> 1) as usize];
    if i & 1 == 0 {
        b >> 4
    } else {
        b & 0xf
    }
}

/// `tweak_overlap_quality(a, b)`: `a` is the mate pushed first (leftmost), `b` the one just pushed;
/// `name` is their read name. Returns `Err(())` on a CIGAR htslib rejects (pileup error).
#[allow(clippy::result_unit_err)]
pub fn tweak_overlap_quality(a: Mate<'_>, b: Mate<'_>, name: &[u8]) -> Result<(), ()> {
    let (a_len, b_len) = (a.qual.len() as i64, b.qual.len() as i64);
    let mut iref = b.pos;
    let mut aw = Walk::new(a.cigar, iref - a.pos);
    let mut bw = Walk::new(b.cigar, iref - b.pos);
    let mut a_ret = aw.set();
    if a_ret < 0 {
        return stopped(a_ret);
    }
    let mut b_ret = bw.set();
    if b_ret < 0 {
        return stopped(b_ret);
    }
    let (amul, bmul): (u8, u8) = if wang_hash(x31_hash(name)) & 1 != 0 {
        (1, 0)
    } else {
        (0, 1)
    };
    let (aq, bq) = (a.qual, b.qual);
    loop {
        while a_ret >= 0 && aw.iref >= 0 && aw.iref < iref - a.pos {
            a_ret = aw.next();
        }
        if a_ret < 0 {
            return stopped(a_ret);
        }
        iref = iref.max(aw.iref + a.pos);
        while b_ret >= 0 && bw.iref >= 0 && bw.iref < iref - b.pos {
            b_ret = bw.next();
        }
        if b_ret < 0 {
            return stopped(b_ret);
        }
        iref = iref.max(bw.iref + b.pos);
        iref += 1;
        if aw.iref + a.pos != bw.iref + b.pos {
            continue;
        }
        if aw.iseq > a_len || bw.iseq > b_len {
            return Err(());
        }
        let (ai, bi) = (aw.iseq as usize, bw.iseq as usize);
        // htslib indexes qual[l_qseq] here when iseq == l_qseq (one byte past the qualities, in the
        // aux data); such a CIGAR is malformed, so treat it as the error it nearly is.
        if ai >= aq.len() || bi >= bq.len() {
            return Err(());
        }
        let same = base(a.seq, aw.iseq) == base(b.seq, bw.iseq);
        adjust(&mut aq[ai], &mut bq[bi], same, amul, bmul);
    }
}

/// How a walk's stop ends the tweak: -1 (the read ended) is no error, less is htslib's error.
fn stopped(ret: i32) -> Result<(), ()> {
    if ret < -1 {
        Err(())
    } else {
        Ok(())
    }
}

/// htslib's quality change at one overlapping base: equal bases sum their qualities (capped at 200)
/// into one mate (`amul`/`bmul` choose which), different ones keep 80% of the higher and zero the
/// other (equal qualities: 80% into the chosen mate).
fn adjust(aq: &mut u8, bq: &mut u8, same: bool, amul: u8, bmul: u8) {
    if same {
        let q = (u32::from(*aq) + u32::from(*bq)).min(200) as u8;
        *aq = amul * q;
        *bq = bmul * q;
    } else if *aq > *bq {
        *aq = (0.8 * f64::from(*aq)) as u8;
        *bq = 0;
    } else if *aq < *bq {
        *bq = (0.8 * f64::from(*bq)) as u8;
        *aq = 0;
    } else {
        *aq = (f64::from(amul) * 0.8 * f64::from(*aq)) as u8;
        *bq = (f64::from(bmul) * 0.8 * f64::from(*bq)) as u8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(len: u32) -> u32 {
        len << 4
    }

    /// Two 10M mates, `a` at `pos_a` with bases `seq_a` (packed) and qualities 30, `b` at
    /// `pos_b` with `seq_b` and qualities 20, through [`tweak_overlap_quality`]: their
    /// qualities after (`name` is the read name, whose hash picks the mate that keeps the
    /// quality of agreeing bases).
    fn tweak_10m(
        pos_a: i64,
        seq_a: &[u8],
        pos_b: i64,
        seq_b: &[u8],
        name: &[u8],
    ) -> ([u8; 10], [u8; 10]) {
        let (mut qa, mut qb) = ([30u8; 10], [20u8; 10]);
        let cigar = [m(10)];
        let a = Mate {
            pos: pos_a,
            cigar: &cigar,
            seq: seq_a,
            qual: &mut qa,
        };
        let b = Mate {
            pos: pos_b,
            cigar: &cigar,
            seq: seq_b,
            qual: &mut qb,
        };
        tweak_overlap_quality(a, b, name).unwrap();
        (qa, qb)
    }

    #[test]
    fn hashes_match_khash() {
        // Expected values printed by a C program using htslib 1.16's khash.h.
        let name = b"HWI-D00360:250:HSIMFCXX:1:1101:1000:2000";
        assert_eq!(x31_hash(b"a"), 97);
        assert_eq!(wang_hash(97), 2911584822);
        assert_eq!(x31_hash(b"r1"), 3583);
        assert_eq!(wang_hash(3583), 4042836173);
        assert_eq!(x31_hash(name), 2279005996);
        assert_eq!(wang_hash(2279005996), 863873439);
    }

    #[test]
    fn agreeing_overlap_moves_quality_to_one_mate() {
        // a: 10M at 100, b: 10M at 105 -> 5 overlapping bases, all 'A' (code 1) in both.
        let seq = [0x11u8; 5];
        let (qa, qb) = tweak_10m(100, &seq, 105, &seq, b"r1");
        for i in 0..5 {
            assert_eq!(qa[i], 30, "non-overlapping part of a untouched");
            assert_eq!(
                u32::from(qa[5 + i]) + u32::from(qb[i]),
                50,
                "sum kept by one mate"
            );
            assert!(qa[5 + i] == 0 || qb[i] == 0);
        }
        assert_eq!(&qb[5..], &[20; 5]);
    }

    #[test]
    fn disagreeing_bases_keep_the_better_one_at_80_percent() {
        let sa = [0x11u8; 5]; // A
        let sb = [0x22u8; 5]; // C
        let (qa, qb) = tweak_10m(0, &sa, 5, &sb, b"x");
        assert_eq!(&qa[5..], &[24; 5]);
        assert_eq!(&qb[..5], &[0; 5]);
    }

    #[test]
    fn no_overlap_changes_nothing() {
        let s = [0x11u8; 5];
        let (qa, qb) = tweak_10m(0, &s, 10, &s, b"x");
        assert_eq!(qa, [30; 10]);
        assert_eq!(qb, [20; 10]);
    }
}
