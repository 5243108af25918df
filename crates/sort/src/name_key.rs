//! 8-byte sort keys for the read-name orders, so that most comparisons of a name sort are one
//! `u64` compare instead of a walk over two records' names.
//!
//! Illumina names share a long prefix (`HWI-D00360:250:HSIMFCXX:` before the lane) and their
//! fields are numbers, so the first 8 bytes of a name tell nothing apart and samtools' natural
//! order (`strnum_cmp`) has no byte prefix to use at all. Instead each name is mapped to an
//! *image*: a byte string whose lexicographic order is the order's name comparison (for `strcmp`
//! order the name itself; for natural order every run of digits becomes a length byte and its
//! value in binary, see [`image`]). A sort call then keeps, of the first [`IMAGE`] image bytes,
//! the first 8 positions where its names' images are not all equal ([`NameKeys::plan`]), and the
//! key of a record is its image at those positions. Keys that differ order their records exactly
//! as the full comparison would; equal keys fall back to it (and to the flag rank and input order).
//!
//! Why that is exact: images are compared zero-padded to [`IMAGE`] bytes; an image that is a
//! prefix of another orders before it both ways (padding only turns "less" into "equal"), and
//! leaving out positions where every image has the same byte changes no comparison. Keys are only
//! meaningful within the sort call that planned them (they are never written to runs).

use crate::order::read_name;
use rayon::iter::ParallelIterator;

/// Bytes of a name's image that keys are chosen from.
pub const IMAGE: usize = 48;

/// Bytes a digit run of `L < 9` significant digits takes in binary (`10^L - 1` fits).
const WIDTH: [usize; 9] = [0, 1, 1, 2, 2, 3, 3, 3, 4];

/// Writes the image of `name` (without its NUL) into `out`, zero padded; longer images are cut.
///
/// Natural order (`strnum_cmp`): a byte that is not a digit stands for itself; a run of digits
/// becomes `b'0' + L` for its `L < 9` significant digits (leading zeros dropped) followed by its
/// value in `WIDTH[L]` big-endian bytes, or `b'9'`, `L - 9` and the digits for longer runs. The
/// header byte is a digit, so a run compares with a non-digit byte as its first digit does in
/// `strnum_cmp`; between runs, more significant digits win, then the value; equal values
/// (`007` and `7`) go on to the next byte, as in `strnum_cmp`.
pub fn image(name: &[u8], natural: bool, out: &mut [u8; IMAGE]) {
    *out = [0; IMAGE];
    if !natural {
        let n = name.len().min(IMAGE);
        out[..n].copy_from_slice(&name[..n]);
        return;
    }
    let mut o = 0;
    let mut put = |b: u8, o: &mut usize| {
        if *o < IMAGE {
            out[*o] = b;
        }
        *o += 1;
    };
    let mut i = 0;
    while i < name.len() && o < IMAGE {
        let c = name[i];
        if !c.is_ascii_digit() {
            put(c, &mut o);
            i += 1;
            continue;
        }
        while i < name.len() && name[i] == b'0' {
            i += 1;
        }
        let start = i;
        while i < name.len() && name[i].is_ascii_digit() {
            i += 1;
        }
        let digits = &name[start..i];
        if digits.len() < 9 {
            put(b'0' + digits.len() as u8, &mut o);
            let value = digits
                .iter()
                .fold(0u32, |v, &d| v * 10 + u32::from(d - b'0'));
            let width = WIDTH[digits.len()];
            for &b in &value.to_be_bytes()[4 - width..] {
                put(b, &mut o);
            }
        } else {
            // A name is at most 254 bytes, so L - 9 fits a byte.
            put(b'9', &mut o);
            put((digits.len() - 9) as u8, &mut o);
            for &d in digits {
                put(d, &mut o);
            }
        }
    }
}

/// The key positions of one sort call (see the module documentation).
#[derive(Debug, Clone, Copy)]
pub struct NameKeys {
    natural: bool,
    positions: [u8; 8],
    len: usize,
}

impl NameKeys {
    /// Chooses the key positions for the records `records` (without `block_size` prefixes): the
    /// first 8 image positions where not every record's image has the same byte.
    pub fn plan<'a, I>(natural: bool, records: I) -> NameKeys
    where
        I: ParallelIterator<Item = &'a [u8]>,
    {
        let images = records.map(|rec| {
            let mut img = [0u8; IMAGE];
            image(read_name(rec), natural, &mut img);
            img
        });
        // Per image position: the AND and the OR of every image's byte there; a position whose
        // AND equals its OR holds one byte in every image.
        let (and, or) = images
            .fold(
                || ([0xffu8; IMAGE], [0u8; IMAGE]),
                |(mut and, mut or), img| {
                    for p in 0..IMAGE {
                        and[p] &= img[p];
                        or[p] |= img[p];
                    }
                    (and, or)
                },
            )
            .reduce(
                || ([0xffu8; IMAGE], [0u8; IMAGE]),
                |(mut a1, mut o1), (a2, o2)| {
                    for p in 0..IMAGE {
                        a1[p] &= a2[p];
                        o1[p] |= o2[p];
                    }
                    (a1, o1)
                },
            );
        let mut keys = NameKeys {
            natural,
            positions: [0; 8],
            len: 0,
        };
        for p in 0..IMAGE {
            if and[p] != or[p] && keys.len < 8 {
                keys.positions[keys.len] = p as u8;
                keys.len += 1;
            }
        }
        keys
    }

    /// The key of a record (without its `block_size` prefix).
    // HOT: once per record per sort call.
    #[inline]
    pub fn key(&self, rec: &[u8]) -> u64 {
        let mut img = [0u8; IMAGE];
        image(read_name(rec), self.natural, &mut img);
        let mut key = [0u8; 8];
        for (k, &p) in key.iter_mut().zip(&self.positions[..self.len]) {
            *k = img[usize::from(p)];
        }
        u64::from_be_bytes(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::order::compare_names;
    use rayon::prelude::*;
    use std::cmp::Ordering;

    /// A record with only what name comparisons read: fixed fields (flag 0) and the name.
    fn record(name: &[u8]) -> Vec<u8> {
        let mut rec = vec![0u8; 32];
        rec[8] = (name.len() + 1) as u8;
        rec.extend_from_slice(name);
        rec.push(0);
        rec
    }

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    /// Names made to stress the image: shared prefixes, digit runs with leading zeros, runs of 8
    /// to 12 digits, digits next to letters and separators, bytes above ASCII.
    fn name(rng: &mut Rng) -> Vec<u8> {
        let mut n = b"HWI-D00360:250:".to_vec();
        if rng.next().is_multiple_of(4) {
            n.clear();
        }
        for _ in 0..(1 + rng.next() % 6) {
            match rng.next() % 7 {
                0 => n.push(b':'),
                1 => n.push(b"ab_Z\xe9"[(rng.next() % 5) as usize]),
                2 => n.extend(std::iter::repeat_n(b'0', (rng.next() % 3) as usize)),
                3 => {
                    let len = 8 + rng.next() % 5;
                    n.extend((0..len).map(|_| b'0' + (rng.next() % 10) as u8));
                }
                _ => n.extend((rng.next() % 20000).to_string().bytes()),
            }
        }
        if n.is_empty() {
            n.push(b'x');
        }
        n
    }

    fn check(names: &[Vec<u8>], natural: bool) -> usize {
        let recs: Vec<Vec<u8>> = names.iter().map(|n| record(n)).collect();
        let keys = NameKeys::plan(natural, recs.par_iter().map(|r| r.as_slice()));
        let k: Vec<u64> = recs.iter().map(|r| keys.key(r)).collect();
        let mut decided = 0;
        for i in 0..recs.len() {
            for j in 0..recs.len() {
                let by_key = k[i].cmp(&k[j]);
                if by_key != Ordering::Equal {
                    decided += 1;
                    let full = compare_names(&recs[i], &recs[j], natural);
                    assert_eq!(
                        by_key,
                        full,
                        "{:?} vs {:?} (natural {natural})",
                        String::from_utf8_lossy(&names[i]),
                        String::from_utf8_lossy(&names[j])
                    );
                }
            }
        }
        decided
    }

    #[test]
    fn keys_never_contradict_the_name_comparison() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..40 {
            let names: Vec<Vec<u8>> = (0..120).map(|_| name(&mut rng)).collect();
            for natural in [true, false] {
                // A quarter of the names lack the common prefix, so key positions go to it and
                // the others tie on it; still, many pairs must be decided by the key alone, or the
                // test proves nothing.
                let d = check(&names, natural);
                assert!(d > names.len() * names.len() / 4, "{d} decided");
            }
        }
    }

    #[test]
    fn samtools_examples_keep_their_order() {
        let names: Vec<Vec<u8>> = [
            "a1",
            "a01",
            "a2",
            "a10",
            "a010b",
            "a10a",
            "007",
            "7",
            "0",
            "",
            "x9",
            "x",
            "x0",
            "x00",
            "x123456789",
            "x1234567890",
            "x0999999999",
            "b",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
        check(&names, true);
        check(&names, false);
    }

    #[test]
    fn illumina_names_are_told_apart_by_lane_tile_and_x() {
        let names: Vec<Vec<u8>> = [
            "HWI-D00360:250:HSIMFCXX:4:2206:20012:2026",
            "HWI-D00360:250:HSIMFCXX:1:1116:4408:1204",
            "HWI-D00360:250:HSIMFCXX:1:1116:4409:1204",
            "HWI-D00360:250:HSIMFCXX:8:1202:5348:3710",
            "HWI-D00360:250:HSIMFCXX:2:1211:17954:2966",
            "HWI-D00360:250:HSIMFCXX:2:1211:17954:2967",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
        // Every pair but the last (equal lane, tile and x) is decided by the key alone.
        assert_eq!(check(&names, true), 6 * 5 - 2);
    }
}
