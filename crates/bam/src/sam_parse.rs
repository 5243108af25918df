//! SAM text line → raw BAM record, following htslib's `sam_parse1` (so records match samtools'):
//! an unknown or `*` RNAME, a zero POS or a `*` CIGAR mark the read unmapped; `bin` is computed from POS
//! and the CIGAR's reference length; integer tags take the smallest BAM type that holds them.

use crate::cigar::{code_of, consumes_query, consumes_reference};
use crate::Header;

/// htslib `seq_nt16_table`, which SAM text is parsed with.
static NT16: [u8; 256] = nt16_table(true);

/// htslib `seq_nt16_table`: text base → 4-bit code (`=` 0, A 1, C 2, G 4, T/U 8, IUPAC codes, else
/// N); with `digits` also htslib's `0`-`3` as A, C, G, T (else N, as minimap2's output and FASTQ
/// import have them).
pub const fn nt16_table(digits: bool) -> [u8; 256] {
    let mut t = [15u8; 256];
    let codes: &[u8; 16] = b"=ACMGRSVTWYHKDBN";
    let mut i = 0;
    while i < 16 {
        t[codes[i] as usize] = i as u8;
        t[codes[i].to_ascii_lowercase() as usize] = i as u8;
        i += 1;
    }
    t[b'U' as usize] = 8;
    t[b'u' as usize] = 8;
    if digits {
        t[b'0' as usize] = 1;
        t[b'1' as usize] = 2;
        t[b'2' as usize] = 4;
        t[b'3' as usize] = 8;
    }
    t
}

/// Why a SAM line could not be parsed.
pub type ParseError = String;

fn parse_u64(s: &[u8], what: &str) -> Result<u64, ParseError> {
    if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
        return Err(format!("invalid {what} {:?}", String::from_utf8_lossy(s)));
    }
    std::str::from_utf8(s)
        .expect("digits")
        .parse()
        .map_err(|_| format!("{what} out of range"))
}

fn parse_i64(s: &[u8], what: &str) -> Result<i64, ParseError> {
    let range = || format!("{what} out of range");
    match s.strip_prefix(b"-") {
        Some(rest) => {
            let v = parse_u64(rest, what)?;
            if v == 1 << 63 {
                return Ok(i64::MIN);
            }
            i64::try_from(v).map(|v| -v).map_err(|_| range())
        }
        None => {
            i64::try_from(parse_u64(s.strip_prefix(b"+").unwrap_or(s), what)?).map_err(|_| range())
        }
    }
}

/// POS and PNEXT: unsigned with a 62-bit limit, as htslib's `hts_str2uint(p, &p, 62, …)`, then 0-based.
fn parse_pos(s: &[u8], what: &str) -> Result<i64, ParseError> {
    let v = parse_u64(s, what)?;
    if v >= 1 << 62 {
        return Err(format!("{what} out of range"));
    }
    Ok(v as i64 - 1)
}

fn parse_flag(s: &[u8]) -> Result<u16, ParseError> {
    let v = if s.len() > 1 && s[0] == b'0' {
        let text = std::str::from_utf8(s).map_err(|_| "invalid FLAG".to_string())?;
        match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => u64::from_str_radix(&text[1..], 8),
        }
        .map_err(|_| format!("invalid FLAG {text:?}"))?
    } else {
        parse_u64(s, "FLAG")?
    };
    u16::try_from(v).map_err(|_| "FLAG out of range".to_string())
}

fn parse_f64(s: &[u8]) -> Result<f64, ParseError> {
    std::str::from_utf8(s)
        .ok()
        .and_then(|t| t.trim().parse::<f64>().ok())
        .ok_or_else(|| format!("invalid number {:?}", String::from_utf8_lossy(s)))
}

/// Parses one SAM line (without its newline) and appends the record, with its `block_size` prefix, to
/// `out`. On error `out` is left as it was.
pub fn parse_record(line: &[u8], header: &Header, out: &mut Vec<u8>) -> Result<(), ParseError> {
    let start = out.len();
    let r = parse_into(line, header, out);
    if r.is_err() {
        out.truncate(start);
    }
    r
}

fn parse_into(line: &[u8], header: &Header, out: &mut Vec<u8>) -> Result<(), ParseError> {
    let mut fields = line.split(|&c| c == b'\t');
    let rec = SamRecord::parse(&mut fields, header)?;
    let long_cigar = rec.cigar.len() > 0xffff;
    // Fixed part (SAM spec §4.2); block_size is patched in at the end.
    let start = out.len();
    rec.write_fixed(long_cigar, out);
    if long_cigar {
        // htslib `bam_write1`: placeholder `<l_seq>S<rlen>N`, real CIGAR in a trailing CG:B:I tag.
        let cig_rlen = ref_len(&rec.cigar);
        if cig_rlen >= 1 << 28 {
            return Err("long CIGAR covers too much reference for BAM".into());
        }
        let l_seq = rec.seq.len() as u32;
        out.extend_from_slice(&(l_seq << 4 | crate::cigar::SOFT_CLIP).to_le_bytes());
        out.extend_from_slice(&((cig_rlen as u32) << 4 | crate::cigar::SKIP).to_le_bytes());
    } else {
        for op in &rec.cigar {
            out.extend_from_slice(&op.to_le_bytes());
        }
    }
    rec.write_seq_qual(out)?;
    for field in fields {
        parse_aux(field, out)?;
    }
    if long_cigar {
        out.extend_from_slice(b"CGBI");
        out.extend_from_slice(&(rec.cigar.len() as u32).to_le_bytes());
        for op in &rec.cigar {
            out.extend_from_slice(&op.to_le_bytes());
        }
    }
    let block_size = (out.len() - start - 4) as u32;
    out[start..start + 4].copy_from_slice(&block_size.to_le_bytes());
    Ok(())
}

/// The eleven mandatory columns of a SAM line, checked and converted.
struct SamRecord<'a> {
    qname: &'a [u8],
    flag: u16,
    tid: i32,
    pos: i64,
    mapq: u8,
    bin: u16,
    cigar: Vec<u32>,
    mtid: i32,
    mpos: i64,
    tlen: i32,
    /// Empty for `*`.
    seq: &'a [u8],
    /// `*` when absent.
    qual: &'a [u8],
}

impl<'a> SamRecord<'a> {
    /// Reads the mandatory columns from `fields` (the optional ones are left in it).
    #[inline]
    fn parse(
        fields: &mut impl Iterator<Item = &'a [u8]>,
        header: &Header,
    ) -> Result<Self, ParseError> {
        let qname = column(fields, "QNAME")?;
        if qname.len() > 254 {
            return Err("query name too long".into());
        }
        let mut flag = parse_flag(column(fields, "FLAG")?)?;
        let rname = column(fields, "RNAME")?;
        let mut tid = if rname == b"*" {
            -1
        } else {
            ref_id(header, rname)?
        };
        let pos = parse_pos(column(fields, "POS")?, "POS")?;
        if pos < 0 && tid >= 0 {
            tid = -1;
        }
        if tid < 0 {
            flag |= crate::flags::UNMAPPED;
        }
        let mapq = parse_u64(column(fields, "MAPQ")?, "MAPQ")?;
        let mapq = u8::try_from(mapq).map_err(|_| "MAPQ out of range".to_string())?;
        let cigar_text = column(fields, "CIGAR")?;
        let cigar = if cigar_text.first() != Some(&b'*') {
            parse_cigar(cigar_text)?
        } else {
            flag |= crate::flags::UNMAPPED;
            Vec::new()
        };
        let rlen = if flag & crate::flags::UNMAPPED == 0 {
            ref_len(&cigar)
        } else {
            1
        };
        if pos > i32::MAX as i64 {
            return Err("Positional data is too large for BAM format".into());
        }
        let mut rec = Self {
            qname,
            flag,
            tid,
            pos,
            mapq,
            bin: crate::bin::reg2bin(pos, pos + rlen.max(1) as i64),
            cigar,
            mtid: -1,
            mpos: -1,
            tlen: 0,
            seq: b"",
            qual: b"",
        };
        rec.parse_rest(fields, header)?;
        Ok(rec)
    }

    /// The columns from RNEXT to QUAL.
    #[inline]
    fn parse_rest(
        &mut self,
        fields: &mut impl Iterator<Item = &'a [u8]>,
        header: &Header,
    ) -> Result<(), ParseError> {
        let mut mtid = match column(fields, "RNEXT")? {
            b"=" => self.tid,
            b"*" => -1,
            name => ref_id(header, name)?,
        };
        let mpos = parse_pos(column(fields, "PNEXT")?, "PNEXT")?;
        if mpos < 0 && mtid >= 0 {
            mtid = -1;
        }
        let tlen = parse_i64(column(fields, "TLEN")?, "TLEN")?;
        self.tlen = i32::try_from(tlen).map_err(|_| "TLEN out of range".to_string())?;
        let seq = column(fields, "SEQ")?;
        let seq: &[u8] = if seq == b"*" { b"" } else { seq };
        let cigar = &self.cigar;
        if !cigar.is_empty() && !seq.is_empty() && query_len(cigar) != seq.len() as u64 {
            return Err("CIGAR and query sequence are of different length".into());
        }
        let qual = column(fields, "QUAL")?;
        if qual != b"*" && qual.len() != seq.len() {
            return Err("SEQ and QUAL are of different length".into());
        }
        if mpos > i32::MAX as i64 {
            return Err("Positional data is too large for BAM format".into());
        }
        (self.mtid, self.mpos, self.seq, self.qual) = (mtid, mpos, seq, qual);
        Ok(())
    }

    /// The fixed part with a zero `block_size` and the read name (`long_cigar`: two placeholder
    /// operations).
    #[inline]
    fn write_fixed(&self, long_cigar: bool, out: &mut Vec<u8>) {
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&self.tid.to_le_bytes());
        out.extend_from_slice(&(self.pos as i32).to_le_bytes());
        out.push(self.qname.len() as u8 + 1);
        out.push(self.mapq);
        out.extend_from_slice(&self.bin.to_le_bytes());
        let n_cigar_op = if long_cigar {
            2
        } else {
            self.cigar.len() as u16
        };
        out.extend_from_slice(&n_cigar_op.to_le_bytes());
        out.extend_from_slice(&self.flag.to_le_bytes());
        out.extend_from_slice(&(self.seq.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.mtid.to_le_bytes());
        out.extend_from_slice(&(self.mpos as i32).to_le_bytes());
        out.extend_from_slice(&self.tlen.to_le_bytes());
        out.extend_from_slice(self.qname);
        out.push(0);
    }

    /// The sequence (4-bit codes) and the qualities (`0xff` each when absent).
    #[inline]
    fn write_seq_qual(&self, out: &mut Vec<u8>) -> Result<(), ParseError> {
        for pair in self.seq.chunks(2) {
            let hi = NT16[pair[0] as usize] << 4;
            let lo = pair.get(1).map_or(0, |&c| NT16[c as usize]);
            out.push(hi | lo);
        }
        if self.qual == b"*" {
            out.resize(out.len() + self.seq.len(), 0xff);
        } else {
            for &q in self.qual {
                if q < 33 {
                    return Err("invalid QUAL character".into());
                }
                out.push(q - 33);
            }
        }
        Ok(())
    }
}

/// The next column of a SAM line.
#[inline]
fn column<'a>(
    fields: &mut impl Iterator<Item = &'a [u8]>,
    what: &str,
) -> Result<&'a [u8], ParseError> {
    fields
        .next()
        .ok_or_else(|| format!("missing {what} column"))
}

/// The id of reference `name` (-1: not in the header; an error when the header has none).
fn ref_id(header: &Header, name: &[u8]) -> Result<i32, ParseError> {
    if header.references().is_empty() {
        return Err("no SQ lines present in the header".into());
    }
    Ok(header.reference_id(name).map_or(-1, |i| i as i32))
}

/// A CIGAR string (not `*`) as BAM operations.
fn parse_cigar(text: &[u8]) -> Result<Vec<u32>, ParseError> {
    let mut cigar: Vec<u32> = Vec::new();
    let mut len: u64 = 0;
    let mut have_digit = false;
    for &c in text {
        if c.is_ascii_digit() {
            len = len * 10 + u64::from(c - b'0');
            have_digit = true;
            if len >= 1 << 28 {
                return Err("CIGAR length too long".into());
            }
        } else {
            let code = code_of(c).ok_or("unrecognized CIGAR operator")?;
            if !have_digit {
                return Err("CIGAR length invalid".into());
            }
            cigar.push((len as u32) << 4 | code);
            len = 0;
            have_digit = false;
        }
    }
    if have_digit || cigar.is_empty() {
        return Err("invalid CIGAR".into());
    }
    Ok(cigar)
}

/// Reference bases the operations cover.
fn ref_len(cigar: &[u32]) -> u64 {
    cigar
        .iter()
        .filter(|&&op| consumes_reference(op & 0xf))
        .map(|&op| u64::from(op >> 4))
        .sum()
}

/// Query bases the operations cover.
fn query_len(cigar: &[u32]) -> u64 {
    cigar
        .iter()
        .filter(|&&op| consumes_query(op & 0xf))
        .map(|&op| u64::from(op >> 4))
        .sum()
}

fn parse_aux(field: &[u8], out: &mut Vec<u8>) -> Result<(), ParseError> {
    if field.len() < 5 || field[2] != b':' || field[4] != b':' {
        if field.len() < 5 {
            return Err("incomplete aux field".into());
        }
        return Err(format!(
            "malformed aux field {:?}",
            String::from_utf8_lossy(field)
        ));
    }
    if field[0] < b'!' || field[1] < b'!' {
        return Err("invalid aux tag id".into());
    }
    let value = &field[5..];
    let ty = field[3];
    if !matches!(ty, b'Z' | b'H') && value.is_empty() {
        return Err("incomplete aux field".into());
    }
    out.extend_from_slice(&field[..2]);
    match ty {
        b'A' | b'a' | b'c' | b'C' => {
            out.push(b'A');
            out.push(value[0]);
        }
        b'i' | b'I' => push_smallest_int(parse_i64(value, "integer tag")?, out)?,
        b'f' => {
            out.push(b'f');
            out.extend_from_slice(&(parse_f64(value)? as f32).to_le_bytes());
        }
        b'd' => {
            out.push(b'd');
            out.extend_from_slice(&parse_f64(value)?.to_le_bytes());
        }
        b'Z' | b'H' => {
            if ty == b'H' && !value.len().is_multiple_of(2) {
                return Err("hex field does not have an even number of digits".into());
            }
            out.push(ty);
            out.extend_from_slice(value);
            out.push(0);
        }
        b'B' => parse_b_array(value, out)?,
        t => return Err(format!("unrecognized aux type '{}'", t as char)),
    }
    Ok(())
}

/// Appends the type and bytes of integer `x` in htslib's smallest type (`c C s S i I`); an error,
/// and nothing appended, out of those types' range.
pub fn push_smallest_int(x: i64, out: &mut Vec<u8>) -> Result<(), ParseError> {
    if x < 0 {
        if x >= i64::from(i8::MIN) {
            out.push(b'c');
            out.push(x as i8 as u8);
        } else if x >= i64::from(i16::MIN) {
            out.push(b's');
            out.extend_from_slice(&(x as i16).to_le_bytes());
        } else if x >= i64::from(i32::MIN) {
            out.push(b'i');
            out.extend_from_slice(&(x as i32).to_le_bytes());
        } else {
            return Err("numeric value out of allowed range".into());
        }
    } else if x <= i64::from(u8::MAX) {
        out.push(b'C');
        out.push(x as u8);
    } else if x <= i64::from(u16::MAX) {
        out.push(b'S');
        out.extend_from_slice(&(x as u16).to_le_bytes());
    } else if x <= i64::from(u32::MAX) {
        out.push(b'I');
        out.extend_from_slice(&(x as u32).to_le_bytes());
    } else {
        return Err("numeric value out of allowed range".into());
    }
    Ok(())
}

fn parse_b_array(value: &[u8], out: &mut Vec<u8>) -> Result<(), ParseError> {
    let sub = value[0];
    let rest = &value[1..];
    if !rest.is_empty() && rest[0] != b',' {
        return Err("B aux field type not followed by ','".into());
    }
    out.push(b'B');
    out.push(sub);
    let count_at = out.len();
    out.extend_from_slice(&[0; 4]);
    let items = if rest.is_empty() { &[][..] } else { &rest[1..] };
    let mut n: u32 = 0;
    if !items.is_empty() {
        for item in items.split(|&c| c == b',') {
            n += 1;
            let range_err = || format!("numeric value out of range in B:{} array", sub as char);
            match sub {
                b'f' => out.extend_from_slice(&(parse_f64(item)? as f32).to_le_bytes()),
                b'c' => out.push(
                    i8::try_from(parse_i64(item, "B array value")?).map_err(|_| range_err())? as u8,
                ),
                b'C' => out.push(
                    u8::try_from(parse_i64(item, "B array value")?).map_err(|_| range_err())?,
                ),
                b's' => out.extend_from_slice(
                    &i16::try_from(parse_i64(item, "B array value")?)
                        .map_err(|_| range_err())?
                        .to_le_bytes(),
                ),
                b'S' => out.extend_from_slice(
                    &u16::try_from(parse_i64(item, "B array value")?)
                        .map_err(|_| range_err())?
                        .to_le_bytes(),
                ),
                b'i' => out.extend_from_slice(
                    &i32::try_from(parse_i64(item, "B array value")?)
                        .map_err(|_| range_err())?
                        .to_le_bytes(),
                ),
                b'I' => out.extend_from_slice(
                    &u32::try_from(parse_i64(item, "B array value")?)
                        .map_err(|_| range_err())?
                        .to_le_bytes(),
                ),
                t => return Err(format!("unrecognized type B:{}", t as char)),
            }
        }
    } else if !matches!(sub, b'c' | b'C' | b's' | b'S' | b'i' | b'I' | b'f') {
        return Err(format!("unrecognized type B:{}", sub as char));
    }
    out[count_at..count_at + 4].copy_from_slice(&n.to_le_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{sam_format::format_record, RecordRef};

    fn header() -> Header {
        Header::from_sam_text("@SQ\tSN:chr1\tLN:1000\n@SQ\tSN:chr2\tLN:500\n".into()).unwrap()
    }

    fn roundtrip(line: &str) -> String {
        let h = header();
        let mut bam = Vec::new();
        parse_record(line.as_bytes(), &h, &mut bam).unwrap();
        let rec = RecordRef::new(&bam[4..]).unwrap();
        let mut out = Vec::new();
        format_record(&rec, &h, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn text_survives_the_roundtrip() {
        for line in [
            "r1\t99\tchr1\t10\t60\t5M1I4M\t=\t100\t150\tACGTNACGTN\tIIIIIIIIII\tNM:i:1\tXA:A:x\tXF:f:1.5\tXZ:Z:hello\tXB:B:s,-1,2,300",
            "r2\t4\t*\t0\t0\t*\t*\t0\t0\t*\t*",
            "r3\t73\tchr2\t5\t0\t3M\t=\t5\t0\tACG\t*\tXI:i:-2147483648\tXU:i:4294967295",
        ] {
            assert_eq!(roundtrip(line), format!("{line}\n"));
        }
    }

    #[test]
    fn unknown_reference_is_unmapped_like_htslib() {
        assert_eq!(
            roundtrip("r\t0\tchrZ\t10\t0\t3M\t*\t0\t0\tACG\t*"),
            "r\t4\t*\t10\t0\t3M\t*\t0\t0\tACG\t*\n"
        );
    }

    #[test]
    fn integer_tags_take_the_smallest_type() {
        let h = header();
        for (v, t) in [
            ("-128", b'c'),
            ("127", b'C'),
            ("255", b'C'),
            ("256", b'S'),
            ("-32768", b's'),
            ("65536", b'I'),
            ("-32769", b'i'),
        ] {
            let mut bam = Vec::new();
            parse_record(
                format!("r\t4\t*\t0\t0\t*\t*\t0\t0\t*\t*\tXX:i:{v}").as_bytes(),
                &h,
                &mut bam,
            )
            .unwrap();
            let rec = RecordRef::new(&bam[4..]).unwrap();
            let f = rec.aux().next().unwrap();
            assert_eq!(f.value_type(), t, "{v}");
            assert_eq!(f.integer().unwrap().to_string(), v);
        }
    }

    /// Found by `fuzz/fuzz_targets/sam_parse.rs` (overflow panics before the fix).
    #[test]
    fn fuzz_regressions_out_of_range_numbers_are_errors() {
        let h = header();
        for line in [
            &b"\t0\t\t9223372036854775808"[..],
            b"r\t0\tchr1\t-9223372036854775808\t0\t*\t*\t0\t0\t*\t*",
            b"r\t0\tchr1\t9223372036854775807\t0\t2M\t*\t0\t0\t*\t*",
            b"r\t0\t*\t0\t0\t*\t*\t0\t0\t*\t*\tXX:i:18446744073709551615",
        ] {
            assert!(
                parse_record(line, &h, &mut Vec::new()).is_err(),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
    }

    /// Found by the fuzzer: 17 ops of 2^28-1 overflow a 32-bit reference length.
    #[test]
    fn fuzz_regression_long_cigar_sums_in_64_bits() {
        let h = header();
        let cigar = "268435455M".repeat(17);
        let mut bam = Vec::new();
        let line = format!("r\t0\tchr1\t1\t0\t{cigar}\t*\t0\t0\t*\t*");
        parse_record(line.as_bytes(), &h, &mut bam).unwrap();
        let rec = RecordRef::new(&bam[4..]).unwrap();
        assert_eq!(rec.reference_length(), 17 * 268_435_455);
        assert_eq!(rec.end_position(), 17 * 268_435_455);
    }

    #[test]
    fn errors_leave_the_buffer_unchanged() {
        let mut bam = vec![1, 2, 3];
        let err = parse_record(
            b"r\t0\tchr1\t1\t0\t4M\t*\t0\t0\tACG\t*",
            &header(),
            &mut bam,
        );
        assert!(err.unwrap_err().contains("different length"));
        assert_eq!(bam, [1, 2, 3]);
    }
}
