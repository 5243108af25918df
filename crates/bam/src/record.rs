//! A zero-copy view of one raw BAM record (SAM spec §4.2).
//!
//! Field map used below (offsets after `block_size`):
//! `0 refID i32 | 4 pos i32 | 8 l_read_name u8 | 9 mapq u8 | 10 bin u16 | 12 n_cigar_op u16 |
//!  14 flag u16 | 16 l_seq u32 | 20 next_refID i32 | 24 next_pos i32 | 28 tlen i32 | 32 read_name …`,
//! then `cigar u32 × n_cigar_op`, `seq (l_seq+1)/2`, `qual l_seq`, aux fields.
//!
//! Changes go through [`RecordMut`] (fields rewritten in place, e.g. the flag) and [`RecordBuf`] (an
//! owned copy whose length may change: aux fields appended, the read name replaced), so no caller
//! writes into record bytes by offset.

use crate::aux::AuxIter;
use crate::cigar::{self, CigarOps};

/// Fixed-size part of a record, in bytes.
pub const FIXED_LEN: usize = 32;

/// A borrowed, validated raw BAM record without its 4-byte `block_size` prefix.
#[derive(Clone, Copy)]
pub struct RecordRef<'a> {
    bytes: &'a [u8],
}

#[inline]
fn i32_at(b: &[u8], i: usize) -> i32 {
    i32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}
#[inline]
fn u16_at(b: &[u8], i: usize) -> u16 {
    u16::from_le_bytes([b[i], b[i + 1]])
}
#[inline]
fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

impl<'a> RecordRef<'a> {
    /// Checks that the variable-length fields fit in `bytes` and returns a view.
    ///
    /// ```
    /// let mut rec = vec![0xff; 8];                 // refID = -1, pos = -1
    /// rec.extend_from_slice(&[2, 0, 0x48, 0x12]);  // l_read_name = 2, mapq 0, bin 4680
    /// rec.extend_from_slice(&[0, 0, 4, 0]);        // n_cigar_op = 0, flag = 4
    /// rec.extend_from_slice(&[0; 4]);              // l_seq = 0
    /// rec.extend_from_slice(&[0xff; 8]);           // next_refID, next_pos = -1
    /// rec.extend_from_slice(&[0; 4]);              // tlen
    /// rec.extend_from_slice(b"r\0");
    /// let r = sortase_bam::RecordRef::new(&rec).unwrap();
    /// assert_eq!(r.read_name(), b"r");
    /// assert_eq!(r.flag(), 4);
    /// ```
    pub fn new(bytes: &'a [u8]) -> Result<Self, String> {
        if bytes.len() < FIXED_LEN {
            return Err(format!("block_size {} < 32", bytes.len()));
        }
        let r = Self { bytes };
        let l_name = usize::from(bytes[8]);
        if l_name == 0 {
            return Err("l_read_name is 0".into());
        }
        let need = FIXED_LEN as u64
            + l_name as u64
            + 4 * u64::from(u16_at(bytes, 12))
            + u64::from(r.l_seq()).div_ceil(2)
            + u64::from(r.l_seq());
        if need > bytes.len() as u64 {
            return Err(format!(
                "fields need {need} bytes but block_size is {}",
                bytes.len()
            ));
        }
        if bytes[FIXED_LEN + l_name - 1] != 0 {
            return Err("read name is not NUL-terminated".into());
        }
        Ok(r)
    }

    /// A view of bytes already validated by [`RecordRef::new`] (for example by the splitter).
    pub fn new_unchecked(bytes: &'a [u8]) -> Self {
        debug_assert!(Self::new(bytes).is_ok());
        Self { bytes }
    }

    /// The raw bytes (without `block_size`).
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// `refID`: reference sequence index, -1 for none.
    pub fn reference_sequence_id(&self) -> i32 {
        i32_at(self.bytes, 0)
    }
    /// `pos`: 0-based leftmost position, -1 for none.
    pub fn position(&self) -> i32 {
        i32_at(self.bytes, 4)
    }
    /// `mapq`.
    pub fn mapping_quality(&self) -> u8 {
        self.bytes[9]
    }
    /// `bin` as stored.
    pub fn bin(&self) -> u16 {
        u16_at(self.bytes, 10)
    }
    /// `flag`.
    pub fn flag(&self) -> u16 {
        u16_at(self.bytes, 14)
    }
    /// `l_seq`.
    pub fn l_seq(&self) -> u32 {
        u32_at(self.bytes, 16)
    }
    /// `next_refID`.
    pub fn mate_reference_sequence_id(&self) -> i32 {
        i32_at(self.bytes, 20)
    }
    /// `next_pos`.
    pub fn mate_position(&self) -> i32 {
        i32_at(self.bytes, 24)
    }
    /// `tlen`.
    pub fn template_length(&self) -> i32 {
        i32_at(self.bytes, 28)
    }
    fn l_read_name(&self) -> usize {
        usize::from(self.bytes[8])
    }
    /// The read name without its NUL terminator(s).
    pub fn read_name(&self) -> &'a [u8] {
        let name = &self.bytes[FIXED_LEN..FIXED_LEN + self.l_read_name()];
        let end = name.iter().position(|&c| c == 0).unwrap_or(name.len());
        &name[..end]
    }
    fn cigar_start(&self) -> usize {
        FIXED_LEN + self.l_read_name()
    }
    /// `n_cigar_op` as stored (2 placeholder ops when the real CIGAR is in a `CG` tag).
    pub fn n_cigar_op(&self) -> usize {
        usize::from(u16_at(self.bytes, 12))
    }
    /// The CIGAR as stored in the CIGAR field.
    pub fn raw_cigar(&self) -> CigarOps<'a> {
        let s = self.cigar_start();
        CigarOps::new(&self.bytes[s..s + 4 * self.n_cigar_op()])
    }
    /// The real CIGAR: the `CG:B:I` tag when the stored CIGAR is its placeholder (`<l_seq>S<rlen>N`,
    /// SAM spec §4.2.2, for more than 65535 operations), otherwise the CIGAR field.
    pub fn cigar(&self) -> CigarOps<'a> {
        self.long_cigar().unwrap_or_else(|| self.raw_cigar())
    }
    /// The `CG` tag's CIGAR if the stored CIGAR is the long-CIGAR placeholder.
    pub fn long_cigar(&self) -> Option<CigarOps<'a>> {
        let raw = self.raw_cigar();
        if raw.len() != 2 || self.reference_sequence_id() < 0 || self.position() < 0 {
            return None;
        }
        let first = raw.get(0);
        if cigar::op_code(first) != cigar::SOFT_CLIP || cigar::op_len(first) != self.l_seq() {
            return None;
        }
        let tag = self.aux().find(|t| t.tag() == *b"CG")?;
        tag.u32_array_bytes().map(CigarOps::new)
    }
    fn seq_start(&self) -> usize {
        self.cigar_start() + 4 * self.n_cigar_op()
    }
    /// Packed 4-bit sequence, `(l_seq + 1) / 2` bytes.
    pub fn sequence_packed(&self) -> &'a [u8] {
        let s = self.seq_start();
        &self.bytes[s..s + (self.l_seq() as usize).div_ceil(2)]
    }
    /// Base qualities (Phred, not +33); all 0xff when absent.
    pub fn quality_scores(&self) -> &'a [u8] {
        let s = self.seq_start() + (self.l_seq() as usize).div_ceil(2);
        &self.bytes[s..s + self.l_seq() as usize]
    }
    /// The aux fields' raw bytes.
    pub fn aux_bytes(&self) -> &'a [u8] {
        let s = self.seq_start() + (self.l_seq() as usize).div_ceil(2) + self.l_seq() as usize;
        &self.bytes[s..]
    }
    /// Iterates the aux fields (stops at the first malformed one; see [`AuxIter::error`]).
    pub fn aux(&self) -> AuxIter<'a> {
        AuxIter::new(self.aux_bytes())
    }
    /// Reference bases covered: the CIGAR's M/D/N/=/X lengths (0 when there is no CIGAR).
    pub fn reference_length(&self) -> u64 {
        self.cigar().reference_length()
    }
    /// 0-based exclusive end as htslib's `bam_endpos`: `pos + reference_length`, or `pos + 1` when the
    /// read is unmapped or has no reference-consuming operation.
    pub fn end_position(&self) -> i64 {
        let pos = i64::from(self.position());
        let rlen = if self.flag() & crate::flags::UNMAPPED != 0 {
            0
        } else {
            self.reference_length()
        };
        pos + if rlen == 0 { 1 } else { rlen as i64 }
    }
}

impl std::fmt::Debug for RecordRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordRef")
            .field("name", &String::from_utf8_lossy(self.read_name()))
            .field("refid", &self.reference_sequence_id())
            .field("pos", &self.position())
            .field("flag", &self.flag())
            .finish()
    }
}

/// A mutable view of one raw BAM record without its `block_size` prefix: the fixed-size fields that
/// can be rewritten in place.
pub struct RecordMut<'a> {
    bytes: &'a mut [u8],
}

impl<'a> RecordMut<'a> {
    /// A view of bytes already validated by [`RecordRef::new`].
    pub fn new_unchecked(bytes: &'a mut [u8]) -> Self {
        debug_assert!(RecordRef::new(bytes).is_ok());
        Self { bytes }
    }

    /// The record as a read-only view.
    pub fn as_ref(&self) -> RecordRef<'_> {
        RecordRef { bytes: self.bytes }
    }

    /// Sets `flag`.
    ///
    /// ```
    /// # let mut rec = vec![0xff; 8];
    /// # rec.extend_from_slice(&[2, 0, 0x48, 0x12, 0, 0, 4, 0]);
    /// # rec.extend_from_slice(&[0; 4]);
    /// # rec.extend_from_slice(&[0xff; 8]);
    /// # rec.extend_from_slice(&[0; 4]);
    /// # rec.extend_from_slice(b"r\0");
    /// let mut r = sortase_bam::RecordMut::new_unchecked(&mut rec);
    /// r.set_flag(r.as_ref().flag() | sortase_bam::flags::DUPLICATE);
    /// assert_eq!(r.as_ref().flag(), 0x404);
    /// ```
    pub fn set_flag(&mut self, flag: u16) {
        self.bytes[14..16].copy_from_slice(&flag.to_le_bytes());
    }
}

/// An owned raw BAM record with its 4-byte `block_size` prefix, kept as a reusable buffer: copy a
/// record in, change it, write [`RecordBuf::as_raw`]. `block_size` follows every change of length.
#[derive(Default, Clone)]
pub struct RecordBuf {
    raw: Vec<u8>,
}

impl RecordBuf {
    /// Replaces the content with `raw`, a validated record with its `block_size` prefix.
    pub fn copy_from(&mut self, raw: &[u8]) {
        debug_assert!(raw.len() >= 4 + FIXED_LEN);
        self.raw.clear();
        self.raw.extend_from_slice(raw);
    }

    /// The record with its `block_size` prefix (what record writers take).
    pub fn as_raw(&self) -> &[u8] {
        &self.raw
    }

    /// The record as a read-only view.
    pub fn record(&self) -> RecordRef<'_> {
        RecordRef::new_unchecked(&self.raw[4..])
    }

    /// The record as a mutable view.
    pub fn as_mut(&mut self) -> RecordMut<'_> {
        RecordMut::new_unchecked(&mut self.raw[4..])
    }

    /// Sets `flag`.
    pub fn set_flag(&mut self, flag: u16) {
        self.as_mut().set_flag(flag);
    }

    fn update_block_size(&mut self) {
        let size = (self.raw.len() - 4) as u32;
        self.raw[..4].copy_from_slice(&size.to_le_bytes());
    }

    /// Appends the aux field `tag` of `value_type` (SAM spec §4.2.4: `A c C s S i I f Z H B`) whose
    /// value `value` writes as stored (a `Z` string with its NUL).
    pub fn push_aux_with(
        &mut self,
        tag: [u8; 2],
        value_type: u8,
        value: impl FnOnce(&mut Vec<u8>),
    ) {
        self.raw.extend_from_slice(&tag);
        self.raw.push(value_type);
        value(&mut self.raw);
        self.update_block_size();
    }

    /// Appends the aux field `tag` with a value already encoded as stored.
    pub fn push_aux(&mut self, tag: [u8; 2], value_type: u8, value: &[u8]) {
        self.push_aux_with(tag, value_type, |out| out.extend_from_slice(value));
    }

    /// Replaces the read name (without NUL); refused (`false`, record unchanged) when it is empty or
    /// longer than 254 bytes, as `l_read_name` is one byte including the NUL.
    pub fn set_read_name(&mut self, name: &[u8]) -> bool {
        let l_new = name.len() + 1;
        if name.is_empty() || l_new > usize::from(u8::MAX) {
            return false;
        }
        let start = 4 + FIXED_LEN;
        let l_old = usize::from(self.raw[4 + 8]);
        self.raw
            .splice(start..start + l_old, name.iter().copied().chain([0]));
        self.raw[4 + 8] = l_new as u8;
        self.update_block_size();
        true
    }
}

impl std::fmt::Debug for RecordBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.record().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Record `r`: unmapped, flag 4, one base `A` with quality 30, aux `NM:i:0` (as `NMC\0`).
    fn raw() -> Vec<u8> {
        let mut rec = vec![
            0xff, 0xff, 0xff, 0xff, // refID = -1
            0xff, 0xff, 0xff, 0xff, // pos = -1
            0x02, // l_read_name = 2
            0x00, // mapq = 0
            0x48, 0x12, // bin = 4680
            0x00, 0x00, // n_cigar_op = 0
            0x04, 0x00, // flag = 4
            0x01, 0x00, 0x00, 0x00, // l_seq = 1
            0xff, 0xff, 0xff, 0xff, // next_refID = -1
            0xff, 0xff, 0xff, 0xff, // next_pos = -1
            0x00, 0x00, 0x00, 0x00, // tlen = 0
            b'r', 0x00, // read_name
            0x10, // seq = A
            30,   // qual
            b'N', b'M', b'C', 0x00, // NM:C:0
        ];
        let mut out = (rec.len() as u32).to_le_bytes().to_vec();
        out.append(&mut rec);
        out
    }

    fn block_size(buf: &RecordBuf) -> usize {
        u32::from_le_bytes(buf.as_raw()[..4].try_into().unwrap()) as usize
    }

    #[test]
    fn set_flag_changes_only_the_flag() {
        let mut bytes = raw();
        let before = bytes.clone();
        let mut r = RecordMut::new_unchecked(&mut bytes[4..]);
        r.set_flag(0x404);
        assert_eq!(r.as_ref().flag(), 0x404);
        assert_eq!(&bytes[4 + 14..4 + 16], &[0x04, 0x04]);
        assert_eq!(bytes[..18], before[..18]);
        assert_eq!(bytes[20..], before[20..]);
    }

    #[test]
    fn pushed_aux_fields_follow_the_old_ones_and_block_size_follows() {
        let mut buf = RecordBuf::default();
        buf.copy_from(&raw());
        buf.push_aux_with(*b"MC", b'Z', |v| v.extend_from_slice(b"10M\0"));
        buf.push_aux(*b"MQ", b'C', &[60]);
        buf.set_flag(0x400);
        assert_eq!(block_size(&buf), buf.as_raw().len() - 4);
        let r = RecordRef::new(&buf.as_raw()[4..]).unwrap();
        let tags: Vec<_> = r.aux().map(|t| (t.tag(), t.value().to_vec())).collect();
        assert_eq!(
            tags,
            vec![
                (*b"NM", vec![0]),
                (*b"MC", b"10M".to_vec()), // value() leaves out the NUL
                (*b"MQ", vec![60])
            ]
        );
        assert!(r.aux_bytes().ends_with(b"MCZ10M\0MQC\x3c"));
        assert_eq!((r.flag(), r.quality_scores()), (0x400, &[30][..]));
    }

    #[test]
    fn read_names_are_replaced_within_the_one_byte_length() {
        let mut buf = RecordBuf::default();
        buf.copy_from(&raw());
        assert!(buf.set_read_name(b"read_1"));
        let r = RecordRef::new(&buf.as_raw()[4..]).unwrap();
        assert_eq!(
            (r.read_name(), r.sequence_packed()),
            (&b"read_1"[..], &[0x10][..])
        );
        assert_eq!(r.aux().next().map(|t| t.tag()), Some(*b"NM"));
        assert_eq!(block_size(&buf), buf.as_raw().len() - 4);
        let before = buf.as_raw().to_vec();
        assert!(!buf.set_read_name(&[b'x'; 255]));
        assert!(!buf.set_read_name(b""));
        assert_eq!(buf.as_raw(), &before[..]);
        assert!(buf.set_read_name(&[b'x'; 254]));
        assert_eq!(buf.record().read_name().len(), 254);
    }
}
