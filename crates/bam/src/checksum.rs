//! Order-independent record checksums, the same sums as `samtools checksum` (samtools 1.24,
//! bam_checksum.c; modelled on biobambam2's bamseqchksum).
//!
//! Each record gives CRC32s of a few field combinations (flag+seq, name+flag+seq, flag+seq+qual,
//! flag+seq+selected aux tags, and optionally chr/pos, mapq/cigar, mate); each is folded into a
//! running product modulo the prime 2^31-1, so the sums do not depend on record order and two
//! partial sums combine by multiplication ([`Sums::merge`]). Jobs compute them over the records they
//! read and the records they wrote, in the workers that already touch each record, and fail when they
//! differ (crates/sortase `proof`).
//!
//! samtools' rules kept here exactly: only the flag bits of `flag_mask` count, and as one byte
//! (`uint8_t flags = flag & mask`); sequences of reverse-strand records are reverse-complemented
//! (qualities reversed) unless `rev_comp` is off; qualities are hashed as `qual + 33` wrapping in a
//! byte (so a missing quality, 0xff, hashes as 0x20); the name includes its NUL; integer aux tags are
//! re-encoded in their smallest type (unsigned when not negative) before hashing; the mate CRC covers
//! RNEXT (4 bytes), PNEXT and TLEN (8 bytes each, sign-extended), as samtools 1.24 prints it; the
//! "combined" column multiplies in flag+seq twice and not +qual, as samtools does.
//!
//! Not replicated: htslib moves a `CG:B:I` long CIGAR into the CIGAR field when it reads a BAM; here
//! the CIGAR as stored is hashed (only `check_cigar` sees it).

use crate::record::FIXED_LEN;
use libdeflater::Crc;

/// The modulus of the products: 2^31 - 1 (samtools' `PRIME`).
pub const PRIME: u64 = (1 << 31) - 1;

/// samtools' `update_hash`: multiplies `hash` by `crc` (0 and PRIME map to 1) modulo [`PRIME`].
#[inline]
pub fn update_hash(hash: u64, crc: u32) -> u64 {
    let mut c = u64::from(crc) & PRIME;
    if c == 0 || c == PRIME {
        c = 1;
    }
    (hash * c) % PRIME
}

/// What is summed: samtools checksum's options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChecksumOptions {
    /// Records with any of these flags are left out (`-F`, samtools: 0x900).
    pub exclude_flags: u16,
    /// Records without all of these flags are left out (`-f`, samtools: 0).
    pub require_flags: u16,
    /// Flag bits that count (`-b`, samtools: 0xc1 = PAIRED,READ1,READ2); only the low 8 bits.
    pub flag_mask: u16,
    /// Reverse-complement reverse-strand sequences (samtools: on; `-c` turns it off).
    pub rev_comp: bool,
    /// Aux tags hashed, in this order (`-t`, samtools: BC,FI,QT,RT,TC).
    pub tags: Vec<[u8; 2]>,
    /// Also hash chr/pos (`-P`).
    pub check_pos: bool,
    /// Also hash mapq/cigar (`-C`).
    pub check_cigar: bool,
    /// Also hash RNEXT/PNEXT/TLEN (`-M`).
    pub check_mate: bool,
}

impl Default for ChecksumOptions {
    /// samtools checksum's defaults.
    fn default() -> Self {
        Self {
            exclude_flags: crate::flags::SECONDARY | crate::flags::SUPPLEMENTARY,
            require_flags: 0,
            flag_mask: crate::flags::PAIRED | crate::flags::READ1 | crate::flags::READ2,
            rev_comp: true,
            tags: DEFAULT_TAGS.to_vec(),
            check_pos: false,
            check_cigar: false,
            check_mate: false,
        }
    }
}

/// samtools checksum's default tags.
pub const DEFAULT_TAGS: [[u8; 2]; 5] = [*b"BC", *b"FI", *b"QT", *b"RT", *b"TC"];

impl ChecksumOptions {
    /// The sums a job that must keep every record and every field checks: all records (`-F 0`),
    /// chr/pos, mapq/cigar and mate too (`-P -C -M`); `samtools checksum -F0 -PCM` prints them.
    pub fn every_record() -> Self {
        Self {
            exclude_flags: 0,
            check_pos: true,
            check_cigar: true,
            check_mate: true,
            ..Self::default()
        }
    }

    /// The same options as the samtools command line that prints these sums.
    pub fn command_line(&self) -> String {
        let mut s = String::from("samtools checksum");
        let d = Self::default();
        if self.exclude_flags != d.exclude_flags {
            s += &format!(" -F {:#x}", self.exclude_flags);
        }
        if self.require_flags != d.require_flags {
            s += &format!(" -f {:#x}", self.require_flags);
        }
        if self.flag_mask != d.flag_mask {
            s += &format!(" -b {:#x}", self.flag_mask);
        }
        if !self.rev_comp {
            s += " -c";
        }
        if self.tags != d.tags {
            s += " -t ";
            s += &self.tag_string();
        }
        for (on, f) in [
            (self.check_pos, " -P"),
            (self.check_cigar, " -C"),
            (self.check_mate, " -M"),
        ] {
            if on {
                s += f;
            }
        }
        s
    }

    /// The tags as samtools prints them (`BC,FI,QT,RT,TC`).
    pub fn tag_string(&self) -> String {
        let names: Vec<String> = self
            .tags
            .iter()
            .map(|t| String::from_utf8_lossy(t).into_owned())
            .collect();
        names.join(",")
    }

    /// Whether a record with `flag` is summed.
    #[inline]
    pub fn selects(&self, flag: u16) -> bool {
        flag & self.exclude_flags == 0 && flag & self.require_flags == self.require_flags
    }
}

/// One record's CRCs (samtools' `crcs_t`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Crcs {
    /// flag + seq.
    pub seq: u32,
    /// name + flag + seq.
    pub name: u32,
    /// flag + seq + qual.
    pub qual: u32,
    /// flag + seq + aux.
    pub aux: u32,
    /// flag + seq + chr/pos.
    pub pos: u32,
    /// flag + seq + mapq/cigar.
    pub cigar: u32,
    /// flag + seq + rnext/pnext/tlen.
    pub mate: u32,
}

/// The running sums of a set of records (one row of samtools checksum's report). A column the
/// options do not compute stays 1 (the empty product).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Sums {
    /// Records summed.
    pub count: u64,
    /// flag+seq.
    pub seq: u64,
    /// +name.
    pub name: u64,
    /// +qual.
    pub qual: u64,
    /// +aux.
    pub aux: u64,
    /// +chr/pos.
    pub pos: u64,
    /// +cigar.
    pub cigar: u64,
    /// +mate.
    pub mate: u64,
}

impl Default for Sums {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl Sums {
    /// No records: every product 1 (samtools' `sums_init`).
    pub const EMPTY: Sums = Sums {
        count: 0,
        seq: 1,
        name: 1,
        qual: 1,
        aux: 1,
        pos: 1,
        cigar: 1,
        mate: 1,
    };

    /// Adds one record's CRCs.
    #[inline]
    pub fn add(&mut self, c: &Crcs) {
        self.seq = update_hash(self.seq, c.seq);
        self.name = update_hash(self.name, c.name);
        self.qual = update_hash(self.qual, c.qual);
        self.aux = update_hash(self.aux, c.aux);
        self.pos = update_hash(self.pos, c.pos);
        self.cigar = update_hash(self.cigar, c.cigar);
        self.mate = update_hash(self.mate, c.mate);
        self.count += 1;
    }

    /// Adds the records summed in `other` (the sums are products: order does not matter).
    pub fn merge(&mut self, other: &Sums) {
        for (a, b) in [
            (&mut self.seq, other.seq),
            (&mut self.name, other.name),
            (&mut self.qual, other.qual),
            (&mut self.aux, other.aux),
            (&mut self.pos, other.pos),
            (&mut self.cigar, other.cigar),
            (&mut self.mate, other.mate),
        ] {
            *a = (*a * b) % PRIME;
        }
        self.count += other.count;
    }

    /// samtools' "combined" column (with its quirk: flag+seq twice, +qual not at all).
    pub fn combined(&self, opts: &ChecksumOptions) -> u64 {
        let mut hc = 1;
        hc = update_hash(hc, (self.count >> 32) as u32);
        hc = update_hash(hc, self.count as u32);
        for v in [self.seq, self.name, self.seq, self.aux] {
            hc = update_hash(hc, v as u32);
        }
        for v in self.optional(opts) {
            hc = update_hash(hc, v as u32);
        }
        hc
    }

    /// The optional columns that `opts` computes, in samtools' order (+chr/pos, +cigar, +mate).
    pub fn optional(&self, opts: &ChecksumOptions) -> impl Iterator<Item = u64> {
        [
            (opts.check_pos, self.pos),
            (opts.check_cigar, self.cigar),
            (opts.check_mate, self.mate),
        ]
        .into_iter()
        .filter_map(|(on, v)| on.then_some(v))
    }

    /// The first of the columns that differ between `self` and `other`, by samtools' column name
    /// (`None`: equal). Only the columns `opts` computes are compared.
    pub fn first_difference(&self, other: &Sums, opts: &ChecksumOptions) -> Option<&'static str> {
        if self.count != other.count {
            return Some("count");
        }
        let cols = [
            (true, "flag+seq", self.seq, other.seq),
            (true, "+name", self.name, other.name),
            (true, "+qual", self.qual, other.qual),
            (true, "+aux", self.aux, other.aux),
            (opts.check_pos, "+chr/pos", self.pos, other.pos),
            (opts.check_cigar, "+cigar", self.cigar, other.cigar),
            (opts.check_mate, "+mate", self.mate, other.mate),
        ];
        cols.iter()
            .find(|(on, _, a, b)| *on && a != b)
            .map(|(_, n, _, _)| *n)
    }

    /// The row as samtools checksum prints it without `-T`: count, the columns `opts` computes, and
    /// the combined value.
    pub fn columns(&self, opts: &ChecksumOptions) -> String {
        let mut s = format!(
            "{:12}  {:08x}  {:08x}  {:08x}  {:08x}",
            self.count, self.seq, self.name, self.qual, self.aux
        );
        for v in self.optional(opts) {
            s += &format!("  {v:08x}");
        }
        s + &format!("  {:08x}", self.combined(opts))
    }
}

/// The environment variable of the test fault: a read name. While it is set, a job checking its
/// sums changes the first base of every record of that name it writes (after the record was summed
/// as read, before it is summed and written as written), so tests can see the job fail. Read once
/// per job; with `--checksums` off it is never read.
pub const FAULT_ENV: &str = "SORTASE_TEST_CORRUPT_READ";

/// The test fault of one job ([`FAULT_ENV`]).
#[derive(Debug, Clone, Default)]
pub struct Fault(Option<std::sync::Arc<[u8]>>);

impl Fault {
    /// The fault [`FAULT_ENV`] asks for (usually none).
    pub fn from_env() -> Self {
        Self(
            std::env::var_os(FAULT_ENV)
                .filter(|v| !v.is_empty())
                .map(|v| v.as_encoded_bytes().into()),
        )
    }

    /// The fault for records named `name` (tests).
    pub fn named(name: &[u8]) -> Self {
        Self(Some(name.into()))
    }

    /// Whether the fault names a read (a job's test run).
    pub fn is_set(&self) -> bool {
        self.0.is_some()
    }

    /// `raw` (a record with its `block_size`), or a copy in `scratch` with the first base changed
    /// when the fault names the record.
    #[inline]
    pub fn apply<'a>(&self, raw: &'a [u8], scratch: &'a mut Vec<u8>) -> &'a [u8] {
        match &self.0 {
            None => raw,
            Some(name) => corrupt(raw, 4, name, scratch),
        }
    }

    /// [`Fault::apply`] for a record without its `block_size`.
    #[inline]
    pub fn apply_record<'a>(&self, rec: &'a [u8], scratch: &'a mut Vec<u8>) -> &'a [u8] {
        match &self.0 {
            None => rec,
            Some(name) => corrupt(rec, 0, name, scratch),
        }
    }
}

/// `raw` (a record after `skip` bytes of `block_size`), or its copy with the first base changed when
/// it is named `name`.
#[cold]
fn corrupt<'a>(raw: &'a [u8], skip: usize, name: &[u8], scratch: &'a mut Vec<u8>) -> &'a [u8] {
    let r = crate::RecordRef::new_unchecked(&raw[skip..]);
    if r.read_name() != name || r.l_seq() == 0 {
        return raw;
    }
    scratch.clear();
    scratch.extend_from_slice(raw);
    let l_seq = r.l_seq() as usize;
    let at = raw.len() - r.aux_bytes().len() - l_seq - l_seq.div_ceil(2);
    scratch[at] ^= 0x30; // the first base's 4-bit code, changed
    scratch
}

/// The records one thread of a job writes, summed (after the test [`Fault`], if any).
#[derive(Debug, Clone)]
pub struct Tally {
    sums: Checksummer,
    fault: Fault,
    scratch: Vec<u8>,
}

impl Tally {
    /// A tally with empty sums.
    pub fn new(opts: &ChecksumOptions, fault: &Fault) -> Self {
        Self {
            sums: Checksummer::new(opts.clone()),
            fault: fault.clone(),
            scratch: Vec::new(),
        }
    }

    /// Sums `raw` (a record with its `block_size`) and gives the bytes to write.
    #[inline]
    pub fn pass<'a>(&'a mut self, raw: &'a [u8]) -> &'a [u8] {
        let r = self.fault.apply(raw, &mut self.scratch);
        self.sums.add(r);
        r
    }

    /// The sums so far.
    pub fn sums(&self) -> Sums {
        self.sums.sums
    }
}

/// Nibble pairs to ASCII pairs, forward (samtools' `code2fwdbase`, built from `seq_nt16_str`).
const NT16: &[u8; 16] = b"=ACMGRSVTWYHKDBN";
/// The complement of each nibble's base.
const NT16_COMP: &[u8; 16] = b"=TGKCYSBAWRDMHVN";

const fn pair_table(reverse: bool) -> [[u8; 2]; 256] {
    let mut t = [[0u8; 2]; 256];
    let mut b = 0;
    while b < 256 {
        let (hi, lo) = (b >> 4, b & 15);
        t[b] = if reverse {
            [NT16_COMP[lo], NT16_COMP[hi]]
        } else {
            [NT16[hi], NT16[lo]]
        };
        b += 1;
    }
    t
}
/// A base letter as htslib stores it and samtools checksum decodes it (`seq_nt16_table`, then
/// `seq_nt16_str`): upper case, `U` as `T`, any byte that is no IUPAC code as `N`.
static STORED_BASE: [u8; 256] = {
    let mut t = [b'N'; 256];
    let mut i = 0;
    while i < 16 {
        t[NT16[i] as usize] = NT16[i];
        t[NT16[i].to_ascii_lowercase() as usize] = NT16[i];
        i += 1;
    }
    t[b'U' as usize] = b'T';
    t[b'u' as usize] = b'T';
    t
};
static FWD_PAIRS: [[u8; 2]; 256] = pair_table(false);
static REV_PAIRS: [[u8; 2]; 256] = pair_table(true);

#[inline]
fn crc(start: u32, data: &[u8]) -> u32 {
    let mut c = Crc::with_initial(start);
    c.update(data);
    c.sum()
}

/// Computes records' CRCs with reused buffers (no allocation per record once they have grown).
#[derive(Debug, Clone)]
pub struct Checksummer {
    opts: ChecksumOptions,
    aux: Vec<u8>,
    found: Vec<(u32, u32)>,
    /// The sums of the records added with [`Checksummer::add`].
    pub sums: Sums,
}

impl Checksummer {
    /// A checksummer for `opts` with empty sums.
    pub fn new(opts: ChecksumOptions) -> Self {
        let n = opts.tags.len();
        Self {
            opts,
            aux: Vec::new(),
            found: vec![(0, 0); n],
            sums: Sums::EMPTY,
        }
    }

    /// The options.
    pub fn options(&self) -> &ChecksumOptions {
        &self.opts
    }

    /// Adds a raw record (with its 4-byte `block_size`, as in a [`crate::RecordBatch`]) to
    /// [`Checksummer::sums`] if the options select it.
    #[inline]
    pub fn add(&mut self, raw: &[u8]) {
        if let Some(c) = self.crcs(&raw[4..]) {
            self.sums.add(&c);
        }
    }

    /// Adds a read that is not yet a record, as the record `samtools import` makes of it: `name`
    /// (without its NUL), `flag`, the bases as read (summed as htslib stores them: upper case, IUPAC
    /// codes kept, any other byte `N`), the qualities as read (FASTQ's phred+33 text; `None`: none,
    /// summed as BAM's 0xff) and the record's aux fields `aux` (BAM bytes). No reverse complement:
    /// such a record is never on the reverse strand.
    // HOT: once per read in `fq2bam --checksums`; the same stack pieces as [`Checksummer::crcs`].
    pub fn add_read(
        &mut self,
        name: &[u8],
        flag: u16,
        bases: &[u8],
        quals: Option<&[u8]>,
        aux: &[u8],
    ) {
        if !self.opts.selects(flag) {
            return;
        }
        let flags = [(flag & self.opts.flag_mask) as u8];
        let mut seq_crc = Crc::new();
        seq_crc.update(&flags);
        let mut name_crc = Crc::new();
        name_crc.update(name);
        name_crc.update(&[0]);
        name_crc.update(&flags);
        let mut buf = [0u8; PIECE];
        for piece in bases.chunks(PIECE) {
            let out = &mut buf[..piece.len()];
            for (o, &b) in out.iter_mut().zip(piece) {
                *o = STORED_BASE[usize::from(b)];
            }
            seq_crc.update(out);
            name_crc.update(out);
        }
        let mut c = Crcs {
            seq: seq_crc.sum(),
            name: name_crc.sum(),
            ..Crcs::default()
        };
        let mut qual_crc = Crc::with_initial(c.seq);
        match quals {
            // (q - 33) + 33, wrapping: the text itself.
            Some(q) => qual_crc.update(q),
            None => {
                let blank = [0xffu8.wrapping_add(33); PIECE];
                let mut left = bases.len();
                while left > 0 {
                    let n = left.min(PIECE);
                    qual_crc.update(&blank[..n]);
                    left -= n;
                }
            }
        }
        c.qual = qual_crc.sum();
        c.aux = self.hash_aux(aux, c.seq);
        self.sums.add(&c);
    }

    /// The CRCs of one record (bytes after `block_size`, whole and valid), or `None` when the
    /// options leave it out.
    // HOT: once per record in every job that checks its sums. Cost: the sequence is decoded to
    // ASCII once, a stack buffer at a time (a table of byte pairs, as samtools' code2base), and
    // each piece fed to the flag+seq and name+flag+seq CRCs; qualities +33 likewise into +qual;
    // libdeflate's CRC32 (PCLMUL) does the hashing. No heap buffer but the aux one (selected tags
    // only). The aux walk stops at the record's end.
    // INVARIANT: `rec` was validated by the record splitter (field lengths fit `rec`).
    pub fn crcs(&mut self, rec: &[u8]) -> Option<Crcs> {
        let flag = u16::from_le_bytes([rec[14], rec[15]]);
        if !self.opts.selects(flag) {
            return None;
        }
        let flags = [(flag & self.opts.flag_mask) as u8];
        let l_read_name = usize::from(rec[8]);
        let n_cigar = usize::from(u16::from_le_bytes([rec[12], rec[13]]));
        let l_seq = u32::from_le_bytes([rec[16], rec[17], rec[18], rec[19]]) as usize;
        let name = &rec[FIXED_LEN..FIXED_LEN + l_read_name];
        let cigar_start = FIXED_LEN + l_read_name;
        let seq_start = cigar_start + 4 * n_cigar;
        let packed = &rec[seq_start..seq_start + l_seq.div_ceil(2)];
        let qual_start = seq_start + l_seq.div_ceil(2);
        let quals = &rec[qual_start..qual_start + l_seq];
        let aux = &rec[qual_start + l_seq..];
        let reverse = flag & crate::flags::REVERSE != 0 && self.opts.rev_comp;

        let mut seq_crc = Crc::new();
        seq_crc.update(&flags);
        let mut name_crc = Crc::new();
        name_crc.update(name);
        name_crc.update(&flags);
        seq_pieces(packed, l_seq, reverse, |piece| {
            seq_crc.update(piece);
            name_crc.update(piece);
        });
        let mut c = Crcs {
            seq: seq_crc.sum(),
            name: name_crc.sum(),
            ..Crcs::default()
        };
        let mut qual_crc = Crc::with_initial(c.seq);
        qual_pieces(quals, reverse, |piece| qual_crc.update(piece));
        c.qual = qual_crc.sum();
        c.aux = self.hash_aux(aux, c.seq);
        if self.opts.check_pos {
            let mut b = [0u8; 12];
            b[..4].copy_from_slice(&rec[0..4]);
            let pos = i64::from(i32::from_le_bytes([rec[4], rec[5], rec[6], rec[7]]));
            b[4..].copy_from_slice(&pos.to_le_bytes());
            c.pos = crc(c.seq, &b);
        }
        if self.opts.check_mate {
            let mut b = [0u8; 20];
            b[..4].copy_from_slice(&rec[20..24]);
            let mpos = i64::from(i32::from_le_bytes([rec[24], rec[25], rec[26], rec[27]]));
            b[4..12].copy_from_slice(&mpos.to_le_bytes());
            let tlen = i64::from(i32::from_le_bytes([rec[28], rec[29], rec[30], rec[31]]));
            b[12..].copy_from_slice(&tlen.to_le_bytes());
            c.mate = crc(c.seq, &b);
        }
        if self.opts.check_cigar {
            let mapq = u32::from(rec[9]).to_le_bytes();
            c.cigar = crc(crc(c.seq, &mapq), &rec[cigar_start..seq_start]);
        }
        Some(c)
    }

    /// The selected tags, in the options' order (the last of a repeated tag), integers in their
    /// canonical type, CRC'd after `start`.
    fn hash_aux(&mut self, aux: &[u8], start: u32) -> u32 {
        if self.opts.tags.is_empty() {
            return crc(start, &[]);
        }
        self.found.iter_mut().for_each(|f| *f = (0, 0));
        let mut at = 0;
        while at + 3 <= aux.len() {
            let Some(len) = crate::aux::field_len(&aux[at..]) else {
                break;
            };
            let tag = [aux[at], aux[at + 1]];
            if let Some(i) = self.opts.tags.iter().position(|t| *t == tag) {
                self.found[i] = (at as u32, len as u32);
            }
            at += len;
        }
        self.aux.clear();
        for &(at, len) in &self.found {
            if len == 0 {
                continue;
            }
            let field = &aux[at as usize..(at + len) as usize];
            push_canonical(&mut self.aux, field);
        }
        crc(start, &self.aux)
    }
}

/// Bytes decoded per piece: a stack buffer that stays in L1.
const PIECE: usize = 256;

/// Calls `f` with a record's sequence as samtools hashes it: ASCII, reverse-complemented when
/// `reverse` (an odd length's padding nibble left out), a piece at a time.
#[inline]
fn seq_pieces(packed: &[u8], l_seq: usize, reverse: bool, mut f: impl FnMut(&[u8])) {
    let mut buf = [0u8; PIECE];
    let full = l_seq / 2;
    if reverse {
        // The last base first: an odd length's last base is the high nibble of the last byte.
        if l_seq % 2 == 1 {
            f(&[NT16_COMP[usize::from(packed[full] >> 4)]]);
        }
        for bytes in packed[..full].rchunks(PIECE / 2) {
            let out = &mut buf[..bytes.len() * 2];
            for (o, &b) in out.chunks_exact_mut(2).zip(bytes.iter().rev()) {
                o.copy_from_slice(&REV_PAIRS[usize::from(b)]);
            }
            f(out);
        }
    } else {
        for bytes in packed[..full].chunks(PIECE / 2) {
            let out = &mut buf[..bytes.len() * 2];
            for (o, &b) in out.chunks_exact_mut(2).zip(bytes) {
                o.copy_from_slice(&FWD_PAIRS[usize::from(b)]);
            }
            f(out);
        }
        if l_seq % 2 == 1 {
            f(&[NT16[usize::from(packed[full] >> 4)]]);
        }
    }
}

/// Calls `f` with a record's qualities as samtools hashes them (`qual + 33`, wrapping; reversed
/// when `reverse`), a piece at a time.
#[inline]
fn qual_pieces(quals: &[u8], reverse: bool, mut f: impl FnMut(&[u8])) {
    let mut buf = [0u8; PIECE];
    if reverse {
        for q in quals.rchunks(PIECE) {
            let out = &mut buf[..q.len()];
            for (o, &v) in out.iter_mut().zip(q.iter().rev()) {
                *o = v.wrapping_add(33);
            }
            f(out);
        }
    } else {
        for q in quals.chunks(PIECE) {
            let out = &mut buf[..q.len()];
            for (o, &v) in out.iter_mut().zip(q) {
                *o = v.wrapping_add(33);
            }
            f(out);
        }
    }
}

/// Appends an aux field with an integer value re-encoded in its smallest type (samtools'
/// `canonical_tag`); other fields unchanged.
fn push_canonical(out: &mut Vec<u8>, field: &[u8]) {
    let f = crate::aux::AuxField { raw: field };
    let Some(v) = f.integer() else {
        out.extend_from_slice(field);
        return;
    };
    let code = if v >= 0 {
        if v <= 255 {
            b'C'
        } else if v <= 65535 {
            b'S'
        } else {
            b'I'
        }
    } else if v >= -128 {
        b'c'
    } else if v >= -32768 {
        b's'
    } else {
        b'i'
    };
    out.extend_from_slice(&field[..2]);
    out.push(code);
    match code {
        b'C' | b'c' => out.push(v as u8),
        b'S' | b's' => out.extend_from_slice(&(v as u16).to_le_bytes()),
        _ => out.extend_from_slice(&(v as u32).to_le_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A raw record (with block_size) from its fields.
    fn record(name: &[u8], flag: u16, seq: &[u8], qual: &[u8], aux: &[u8]) -> Vec<u8> {
        let code = |c: u8| NT16.iter().position(|&x| x == c).unwrap() as u8;
        let mut r = Vec::new();
        r.extend_from_slice(&0i32.to_le_bytes()); // refID
        r.extend_from_slice(&99i32.to_le_bytes()); // pos
        r.push(name.len() as u8 + 1); // l_read_name
        r.push(60); // mapq
        r.extend_from_slice(&0u16.to_le_bytes()); // bin
        r.extend_from_slice(&1u16.to_le_bytes()); // n_cigar_op
        r.extend_from_slice(&flag.to_le_bytes());
        r.extend_from_slice(&(seq.len() as u32).to_le_bytes());
        r.extend_from_slice(&(-1i32).to_le_bytes()); // next refID
        r.extend_from_slice(&(-1i32).to_le_bytes()); // next pos
        r.extend_from_slice(&0i32.to_le_bytes()); // tlen
        r.extend_from_slice(name);
        r.push(0);
        r.extend_from_slice(&((seq.len() as u32) << 4).to_le_bytes()); // nM
        for pair in seq.chunks(2) {
            r.push(code(pair[0]) << 4 | pair.get(1).map_or(0, |&c| code(c)));
        }
        r.extend_from_slice(qual);
        r.extend_from_slice(aux);
        let mut out = (r.len() as u32).to_le_bytes().to_vec();
        out.extend_from_slice(&r);
        out
    }

    #[test]
    fn reverse_complement_of_odd_and_even_lengths() {
        let mut c = Checksummer::new(ChecksumOptions::default());
        for (seq, rc) in [
            (&b"ACGTN"[..], &b"NACGT"[..]),
            (b"AACG", b"CGTT"),
            (b"", b""),
        ] {
            let rec = record(b"r", 0x10, seq, &vec![30; seq.len()], &[]);
            let fwd = record(b"r", 0, rc, &vec![30; seq.len()], &[]);
            assert_eq!(c.crcs(&rec[4..]), c.crcs(&fwd[4..]), "{seq:?}");
        }
    }

    #[test]
    fn pieces_match_a_plain_decoding_at_every_length() {
        // Lengths around the piece size, both strands: the CRCs equal those of the sequence and
        // qualities decoded whole.
        let mut c = Checksummer::new(ChecksumOptions::default());
        for len in [0usize, 1, 2, 3, 255, 256, 257, 258, 511, 512, 513, 1001] {
            let seq: Vec<u8> = (0..len).map(|i| NT16[1 + (i * 7) % 15]).collect();
            let qual: Vec<u8> = (0..len).map(|i| (i * 13 % 94) as u8).collect();
            for flag in [0u16, 0x10] {
                let rec = record(b"name", flag, &seq, &qual, &[]);
                let got = c.crcs(&rec[4..]).unwrap();
                let (mut s, mut q) = (seq.clone(), qual.clone());
                if flag == 0x10 {
                    let comp = |b: u8| NT16_COMP[NT16.iter().position(|&x| x == b).unwrap()];
                    s = s.iter().rev().map(|&b| comp(b)).collect();
                    q.reverse();
                }
                let q: Vec<u8> = q.iter().map(|v| v + 33).collect();
                let want_seq = crc(crc(0, &[0]), &s);
                assert_eq!(got.seq, want_seq, "len {len} flag {flag}");
                assert_eq!(got.name, crc(crc(crc(0, b"name\0"), &[0]), &s));
                assert_eq!(got.qual, crc(want_seq, &q), "len {len} flag {flag}");
            }
        }
    }

    #[test]
    fn sums_do_not_depend_on_order_and_merge() {
        let opts = ChecksumOptions::every_record();
        let recs = [
            record(b"a", 0x41, b"ACGT", b"IIII", b"BCZAC\0"),
            record(b"b", 0x81, b"TTG", &[0xff; 3], b"RTc\x05"),
            record(b"c", 0x4, b"", b"", b""),
        ];
        let mut fwd = Checksummer::new(opts.clone());
        recs.iter().for_each(|r| fwd.add(r));
        let mut rev = Checksummer::new(opts.clone());
        recs.iter().rev().for_each(|r| rev.add(r));
        assert_eq!(fwd.sums, rev.sums);
        let mut parts = Checksummer::new(opts.clone());
        parts.add(&recs[0]);
        let mut other = Checksummer::new(opts.clone());
        other.add(&recs[1]);
        other.add(&recs[2]);
        parts.sums.merge(&other.sums);
        assert_eq!(parts.sums, fwd.sums);
        assert_eq!(fwd.sums.count, 3);
        assert_eq!(fwd.sums.first_difference(&rev.sums, &opts), None);
    }

    #[test]
    fn integer_tags_hash_in_canonical_type() {
        let mut c = Checksummer::new(ChecksumOptions::default());
        let small_i = record(b"a", 0, b"AC", b"II", b"RTi\x05\0\0\0");
        let small_c = record(b"a", 0, b"AC", b"II", b"RTC\x05");
        assert_eq!(c.crcs(&small_i[4..]), c.crcs(&small_c[4..]));
        let neg = record(b"a", 0, b"AC", b"II", b"RTi\xfe\xff\xff\xff");
        let neg_c = record(b"a", 0, b"AC", b"II", b"RTc\xfe");
        assert_eq!(c.crcs(&neg[4..]), c.crcs(&neg_c[4..]));
        assert_ne!(c.crcs(&neg[4..]), c.crcs(&small_c[4..]));
    }

    #[test]
    fn one_changed_base_or_quality_changes_the_sums() {
        let mut c = Checksummer::new(ChecksumOptions::default());
        let a = c
            .crcs(&record(b"a", 0, b"ACGT", b"IIII", b"")[4..])
            .unwrap();
        let base = c
            .crcs(&record(b"a", 0, b"ACGA", b"IIII", b"")[4..])
            .unwrap();
        let qual = c
            .crcs(&record(b"a", 0, b"ACGT", b"IIIJ", b"")[4..])
            .unwrap();
        assert_ne!(a.seq, base.seq);
        assert_eq!(a.seq, qual.seq);
        assert_ne!(a.qual, qual.qual);
    }

    #[test]
    fn a_read_sums_as_the_record_made_of_it() {
        // Lower case, IUPAC, U and a stray byte are stored as htslib stores them; no qualities
        // are 0xff; the FI tag canonical.
        let opts = ChecksumOptions::default();
        let mut as_read = Checksummer::new(opts.clone());
        let mut as_record = Checksummer::new(opts.clone());
        let bases = b"ACgtRyuN.x=acgtacgtacgt";
        let stored = b"ACGTRYTNNN=ACGTACGTACGT";
        let quals: Vec<u8> = (0..bases.len()).map(|i| b'!' + i as u8).collect();
        let raw_quals: Vec<u8> = quals.iter().map(|q| q - 33).collect();
        as_read.add_read(b"p1", 0x41 | 0x4, bases, Some(&quals), b"FIC\x02");
        as_record.add(&record(b"p1", 0x41 | 0x4, stored, &raw_quals, b"FIc\x02"));
        as_read.add_read(b"s", 0, b"ACG", None, b"");
        as_record.add(&record(b"s", 0, b"ACG", &[0xff; 3], b""));
        assert_eq!(as_read.sums, as_record.sums);
        as_read.add_read(b"x", 0x100, b"A", None, b"");
        assert_eq!(as_read.sums.count, 2, "secondary left out");
        let long: Vec<u8> = (0..1000).map(|i| b"acgtn"[i % 5]).collect();
        let upper = long.to_ascii_uppercase();
        let (mut a, mut b) = (Checksummer::new(opts.clone()), Checksummer::new(opts));
        a.add_read(b"l", 0, &long, None, b"");
        b.add(&record(b"l", 0, &upper, &vec![0xff; 1000], b""));
        assert_eq!(a.sums, b.sums);
    }

    #[test]
    fn the_fault_changes_records_with_or_without_block_size() {
        let rec = record(b"bad", 0, b"ACGT", b"IIII", b"");
        let fault = Fault::named(b"bad");
        let mut scratch = Vec::new();
        let with = fault.apply(&rec, &mut scratch).to_vec();
        let mut scratch2 = Vec::new();
        let without = fault.apply_record(&rec[4..], &mut scratch2).to_vec();
        assert_ne!(with, rec);
        assert_eq!(&with[4..], &without[..]);
        assert!(fault.is_set() && !Fault::default().is_set());
        let other = record(b"good", 0, b"ACGT", b"IIII", b"");
        assert_eq!(fault.apply_record(&other[4..], &mut scratch2), &other[4..]);
    }

    #[test]
    fn secondary_records_are_left_out_by_default() {
        let mut c = Checksummer::new(ChecksumOptions::default());
        assert!(c.crcs(&record(b"a", 0x100, b"A", b"I", b"")[4..]).is_none());
        assert!(c.crcs(&record(b"a", 0x800, b"A", b"I", b"")[4..]).is_none());
        let mut all = Checksummer::new(ChecksumOptions::every_record());
        assert!(all
            .crcs(&record(b"a", 0x900, b"A", b"I", b"")[4..])
            .is_some());
    }
}
