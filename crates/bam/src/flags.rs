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
