//! Raw BAM record → SAM text line, as htslib's `sam_format1` writes it.

use crate::cigar::{op_code, op_len, OP_CHARS};
use crate::{Header, RecordRef};

/// 4-bit base code → character (SAM spec §4.2.3).
pub const SEQ_CHARS: &[u8; 16] = b"=ACMGRSVTWYHKDBN";

fn push_int<I: itoa::Integer>(out: &mut Vec<u8>, v: I) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

fn push_ref_name(out: &mut Vec<u8>, header: &Header, id: i32) {
    match header.references().get(id as usize) {
        Some(r) if id >= 0 => out.extend_from_slice(&r.name),
        _ => out.push(b'*'),
    }
}

/// Appends `value` formatted as C's `printf("%g")` (6 significant digits, as htslib writes `f` tags).
///
/// ```
/// let mut s = Vec::new();
/// sortase_bam::sam_format::push_g(&mut s, 0.0001234567);
/// assert_eq!(s, b"0.000123457");
/// s.clear();
/// sortase_bam::sam_format::push_g(&mut s, 1e20);
/// assert_eq!(s, b"1e+20");
/// ```
pub fn push_g(out: &mut Vec<u8>, value: f64) {
    if value.is_nan() {
        out.extend_from_slice(if value.is_sign_negative() {
            b"-nan"
        } else {
            b"nan"
        });
        return;
    }
    if value.is_infinite() {
        out.extend_from_slice(if value < 0.0 { b"-inf" } else { b"inf" });
        return;
    }
    if value == 0.0 {
        out.extend_from_slice(if value.is_sign_negative() {
            b"-0"
        } else {
            b"0"
        });
        return;
    }
    const P: i32 = 6;
    let sci = format!("{:.*e}", (P - 1) as usize, value);
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("integer exponent");
    if (-4..P).contains(&exp) {
        let fixed = format!("{:.*}", (P - 1 - exp) as usize, value);
        out.extend_from_slice(strip_zeros(&fixed).as_bytes());
    } else {
        out.extend_from_slice(strip_zeros(mantissa).as_bytes());
        out.push(b'e');
        out.push(if exp < 0 { b'-' } else { b'+' });
        let e = exp.unsigned_abs();
        if e < 10 {
            out.push(b'0');
        }
        push_int(out, e);
    }
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// Appends the SAM line of `record` (with a trailing newline) to `out`.
pub fn format_record(record: &RecordRef<'_>, header: &Header, out: &mut Vec<u8>) {
    let name = record.read_name();
    out.extend_from_slice(if name.is_empty() { b"*" } else { name });
    out.push(b'\t');
    push_int(out, record.flag());
    out.push(b'\t');
    let tid = record.reference_sequence_id();
    push_ref_name(out, header, tid);
    out.push(b'\t');
    push_int(out, i64::from(record.position()) + 1);
    out.push(b'\t');
    push_int(out, record.mapping_quality());
    out.push(b'\t');
    let long = record.long_cigar();
    let cigar = long.unwrap_or_else(|| record.raw_cigar());
    if cigar.is_empty() {
        out.push(b'*');
    } else {
        for op in cigar.iter() {
            push_int(out, op_len(op));
            out.push(*OP_CHARS.get(op_code(op) as usize).unwrap_or(&b'?'));
        }
    }
    out.push(b'\t');
    let mtid = record.mate_reference_sequence_id();
    if mtid < 0 {
        out.push(b'*');
    } else if mtid == tid {
        out.push(b'=');
    } else {
        push_ref_name(out, header, mtid);
    }
    out.push(b'\t');
    push_int(out, i64::from(record.mate_position()) + 1);
    out.push(b'\t');
    push_int(out, record.template_length());
    out.push(b'\t');
    let l_seq = record.l_seq() as usize;
    if l_seq == 0 {
        out.push(b'*');
    } else {
        let packed = record.sequence_packed();
        out.reserve(l_seq);
        for i in 0..l_seq {
            let code = (packed[i / 2] >> (4 * (1 - i % 2))) & 0xf;
            out.push(SEQ_CHARS[code as usize]);
        }
    }
    out.push(b'\t');
    let qual = record.quality_scores();
    if l_seq == 0 || qual[0] == 0xff {
        out.push(b'*');
    } else {
        out.extend(qual.iter().map(|&q| q.wrapping_add(33)));
    }
    for field in record.aux() {
        if long.is_some() && field.tag() == *b"CG" {
            continue;
        }
        out.push(b'\t');
        format_aux(field.raw, out);
    }
    out.push(b'\n');
}

/// Appends one aux field (`raw`: tag, type, value, as stored) as SAM text `TG:T:VALUE`, as htslib's
/// `sam_format1` writes it.
///
/// ```
/// let mut s = Vec::new();
/// sortase_bam::sam_format::format_aux(b"NMC\x05", &mut s);
/// assert_eq!(s, b"NM:i:5");
/// ```
pub fn format_aux(raw: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&raw[..2]);
    out.push(b':');
    let v = &raw[3..];
    match raw[2] {
        b'A' => {
            out.extend_from_slice(b"A:");
            out.push(v[0]);
        }
        b'c' | b'C' | b's' | b'S' | b'i' | b'I' => {
            out.extend_from_slice(b"i:");
            let field = crate::aux::AuxField { raw };
            push_int(out, field.integer().expect("integer type"));
        }
        b'f' => {
            out.extend_from_slice(b"f:");
            push_g(out, f64::from(f32::from_le_bytes([v[0], v[1], v[2], v[3]])));
        }
        b'd' => {
            out.extend_from_slice(b"d:");
            push_g(out, f64::from_le_bytes(v[..8].try_into().expect("8 bytes")));
        }
        t @ (b'Z' | b'H') => {
            out.push(t);
            out.push(b':');
            out.extend_from_slice(&v[..v.len() - 1]);
        }
        b'B' => {
            let sub = v[0];
            out.extend_from_slice(b"B:");
            out.push(sub);
            let size = crate::aux::type_size(sub).expect("validated subtype");
            for e in v[5..].chunks_exact(size) {
                out.push(b',');
                match sub {
                    b'c' => push_int(out, e[0] as i8),
                    b'C' => push_int(out, e[0]),
                    b's' => push_int(out, i16::from_le_bytes([e[0], e[1]])),
                    b'S' => push_int(out, u16::from_le_bytes([e[0], e[1]])),
                    b'i' => push_int(out, i32::from_le_bytes([e[0], e[1], e[2], e[3]])),
                    b'I' => push_int(out, u32::from_le_bytes([e[0], e[1], e[2], e[3]])),
                    _ => push_g(out, f64::from(f32::from_le_bytes([e[0], e[1], e[2], e[3]]))),
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(v: f64) -> String {
        let mut s = Vec::new();
        push_g(&mut s, v);
        String::from_utf8(s).unwrap()
    }

    #[test]
    fn g_matches_printf() {
        for (v, want) in [
            (1.0, "1"),
            (0.5, "0.5"),
            (100000.0, "100000"),
            (1000000.0, "1e+06"),
            (123456789.0, "1.23457e+08"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-2.5, "-2.5"),
            (1.234567891, "1.23457"),
            (f64::from(1.1f32), "1.1"),
            (999999.5, "1e+06"),
        ] {
            assert_eq!(g(v), want, "{v}");
        }
    }
}
