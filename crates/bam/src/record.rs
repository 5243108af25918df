//! A zero-copy view of one raw BAM record (SAM spec §4.2).
//!
//! Field map used below (offsets after `block_size`):
//! `0 refID i32 | 4 pos i32 | 8 l_read_name u8 | 9 mapq u8 | 10 bin u16 | 12 n_cigar_op u16 |
//!  14 flag u16 | 16 l_seq u32 | 20 next_refID i32 | 24 next_pos i32 | 28 tlen i32 | 32 read_name …`,
//! then `cigar u32 × n_cigar_op`, `seq (l_seq+1)/2`, `qual l_seq`, aux fields.

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
