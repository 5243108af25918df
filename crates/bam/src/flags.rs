//! SAM flag bits (SAM spec §1.4, column 2).

/// Template has multiple segments.
pub const PAIRED: u16 = 0x1;
/// Each segment properly aligned.
pub const PROPER_PAIR: u16 = 0x2;
/// Segment unmapped.
pub const UNMAPPED: u16 = 0x4;
/// Next segment unmapped.
pub const MATE_UNMAPPED: u16 = 0x8;
/// Reverse complemented.
pub const REVERSE: u16 = 0x10;
/// Next segment reverse complemented.
pub const MATE_REVERSE: u16 = 0x20;
/// First segment.
pub const READ1: u16 = 0x40;
/// Last segment.
pub const READ2: u16 = 0x80;
/// Secondary alignment.
pub const SECONDARY: u16 = 0x100;
/// Not passing quality controls.
pub const QC_FAIL: u16 = 0x200;
/// PCR or optical duplicate.
pub const DUPLICATE: u16 = 0x400;
/// Supplementary alignment.
pub const SUPPLEMENTARY: u16 = 0x800;

/// Parses a flag as samtools does: decimal, `0x` hex, `0` octal, or comma-separated names (`UNMAP`,
/// `SECONDARY`, ...). Also the value parser of the `-f`/`-F` flags the job specs declare.
pub fn parse(s: &str) -> Result<u16, String> {
    let parsed = if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u16::from_str_radix(hex, 16).ok()
    } else if s.len() > 1 && s.starts_with('0') {
        u16::from_str_radix(&s[1..], 8).ok()
    } else {
        s.parse().ok()
    };
    if let Some(v) = parsed {
        return Ok(v);
    }
    let mut v = 0;
    for name in s.split(',') {
        v |= match name {
            "PAIRED" => PAIRED,
            "PROPER_PAIR" => PROPER_PAIR,
            "UNMAP" => UNMAPPED,
            "MUNMAP" => MATE_UNMAPPED,
            "REVERSE" => REVERSE,
            "MREVERSE" => MATE_REVERSE,
            "READ1" => READ1,
            "READ2" => READ2,
            "SECONDARY" => SECONDARY,
            "QCFAIL" => QC_FAIL,
            "DUP" => DUPLICATE,
            "SUPPLEMENTARY" => SUPPLEMENTARY,
            _ => {
                return Err(format!(
                    "invalid flag {s:?}: use a number or names such as UNMAP,SECONDARY"
                ))
            }
        };
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    #[test]
    fn flags_parse_as_samtools_reads_them() {
        assert_eq!(super::parse("0x904").unwrap(), 0x904);
        assert_eq!(super::parse("010").unwrap(), 8);
        assert_eq!(super::parse("2308").unwrap(), 0x904);
        assert_eq!(super::parse("UNMAP,SECONDARY").unwrap(), 0x104);
        assert!(super::parse("UNMAPPED").is_err());
    }
}
