//! One mapping thread's state and the mapping of a fragment, as minimap2's `worker_for` (map.c):
//! for a read pair the segment the preset's `pe_ori` names is reverse complemented before mapping
//! (`sr`: the second, for FR pairs) and its hits are flipped back after; the fragment is mapped by
//! `mm_map_frag` with the first read's name (minimap2 hashes it into its tie-breaking), and the
//! records of each segment follow in minimap2's output order (`worker_pipeline` step 2).

use crate::encode::{self, Context, Segment, TagBuffer, COMPLEMENT};
use crate::error::AlignError;
use crate::index::Aligner;
use crate::reads::{ReadChunk, MAX_SEGMENTS};
use minimap2_sys as ffi;
use sortase_bam::RecordBatch;

/// The records of one chunk of reads, in minimap2's output order.
#[derive(Debug, Default)]
pub struct AlignedBatch {
    /// The records (raw BAM, `block_size` prefixed).
    pub records: RecordBatch,
    /// Index of each fragment's first record (every read has at least one record).
    pub fragments: Vec<u32>,
    /// Reads mapped.
    pub reads: usize,
    /// Bases of those reads.
    pub bases: usize,
}

impl AlignedBatch {
    /// The records of fragment `f` (one read name: samblaster's group).
    pub fn fragment(&self, f: usize) -> std::ops::Range<usize> {
        let start = self.fragments[f] as usize;
        let end = self
            .fragments
            .get(f + 1)
            .map_or(self.records.len(), |&e| e as usize);
        start..end
    }
}

/// Frees minimap2's hits of one fragment (also when writing a record fails).
struct Hits {
    n_regs: [i32; MAX_SEGMENTS],
    regs: [*mut ffi::mm_reg1_t; MAX_SEGMENTS],
    n_seg: usize,
}

impl Hits {
    fn segment(&self, i: usize) -> &[ffi::mm_reg1_t] {
        if self.regs[i].is_null() || self.n_regs[i] <= 0 {
            return &[];
        }
        // SAFETY: minimap2 returned `n_regs[i]` hits at `regs[i]`.
        unsafe { std::slice::from_raw_parts(self.regs[i], self.n_regs[i] as usize) }
    }

    fn segment_mut(&mut self, i: usize) -> &mut [ffi::mm_reg1_t] {
        if self.regs[i].is_null() || self.n_regs[i] <= 0 {
            return &mut [];
        }
        // SAFETY: as above; no other reference to the hits exists.
        unsafe { std::slice::from_raw_parts_mut(self.regs[i], self.n_regs[i] as usize) }
    }
}

impl Drop for Hits {
    fn drop(&mut self) {
        for i in 0..self.n_seg {
            for r in self.segment_mut(i) {
                // SAFETY: each hit's alignment and the hit array are malloc'ed by minimap2.
                unsafe { libc::free(r.p.cast()) };
            }
            // SAFETY: as above.
            unsafe { libc::free(self.regs[i].cast()) };
        }
    }
}

/// A mapping thread: minimap2's thread-local buffer and reused scratch space.
pub struct Mapper<'a> {
    aligner: &'a Aligner,
    tbuf: *mut ffi::mm_tbuf_t,
    /// Reverse complemented segments.
    scratch: Vec<u8>,
    tags: TagBuffer,
}

impl Drop for Mapper<'_> {
    fn drop(&mut self) {
        // SAFETY: created by mm_tbuf_init, destroyed once.
        unsafe { ffi::mm_tbuf_destroy(self.tbuf) }
    }
}

impl<'a> Mapper<'a> {
    /// A mapper over `aligner`'s index (one per thread).
    pub fn new(aligner: &'a Aligner) -> Self {
        Self {
            aligner,
            // SAFETY: allocates a fresh buffer.
            tbuf: unsafe { ffi::mm_tbuf_init() },
            scratch: Vec::new(),
            tags: TagBuffer::default(),
        }
    }

    /// Maps every fragment of `chunk` and writes its records.
    pub fn map_chunk(&mut self, chunk: &ReadChunk) -> Result<AlignedBatch, AlignError> {
        let mut buf = Vec::with_capacity(chunk.bases() * 3 + chunk.reads() * 160);
        let mut offsets = Vec::with_capacity(chunk.reads() + chunk.reads() / 8);
        let mut fragments = Vec::with_capacity(chunk.fragments());
        for f in 0..chunk.fragments() {
            fragments.push(offsets.len() as u32);
            self.map_fragment(chunk, chunk.fragment(f), &mut buf, &mut offsets)?;
        }
        // The records go on to the sorter, which charges their capacity to the memory budget;
        // shrinking a heap block gives its tail back in place (glibc).
        buf.shrink_to_fit();
        offsets.shrink_to_fit();
        let end = buf.len();
        Ok(AlignedBatch {
            records: RecordBatch::from_parts(buf, offsets, end, 0),
            fragments,
            reads: chunk.reads(),
            bases: chunk.bases(),
        })
    }

    /// The segments' lengths and sequences as minimap2 takes them: the `flipped` ones reverse
    /// complemented into `scratch` (the pointers are valid until it changes).
    #[allow(clippy::type_complexity)]
    fn segment_seqs(
        &mut self,
        chunk: &ReadChunk,
        reads: std::ops::Range<usize>,
        flipped: impl Fn(usize) -> bool,
    ) -> (
        [i32; MAX_SEGMENTS],
        [*const std::os::raw::c_char; MAX_SEGMENTS],
    ) {
        let mut qlens = [0i32; MAX_SEGMENTS];
        let mut seqs = [std::ptr::null::<std::os::raw::c_char>(); MAX_SEGMENTS];
        self.scratch.clear();
        let mut starts = [usize::MAX; MAX_SEGMENTS];
        for (j, i) in reads.clone().enumerate() {
            let seq = chunk.read(i).seq;
            qlens[j] = seq.len() as i32;
            if flipped(j) {
                starts[j] = self.scratch.len();
                self.scratch
                    .extend(seq.iter().rev().map(|&c| COMPLEMENT[c as usize]));
            }
        }
        for (j, i) in reads.enumerate() {
            seqs[j] = if starts[j] == usize::MAX {
                chunk.read(i).seq.as_ptr().cast()
            } else {
                self.scratch[starts[j]..].as_ptr().cast()
            };
        }
        (qlens, seqs)
    }

    fn map_fragment(
        &mut self,
        chunk: &ReadChunk,
        reads: std::ops::Range<usize>,
        out: &mut Vec<u8>,
        offsets: &mut Vec<u32>,
    ) -> Result<(), AlignError> {
        let aligner = self.aligner;
        let opt = &aligner.mapopt;
        let n_seg = reads.len();
        let pe_ori = opt.pe_ori;
        let flipped =
            |j: usize| n_seg == 2 && (j == 0 && pe_ori >> 1 & 1 != 0 || j == 1 && pe_ori & 1 != 0);
        let (qlens, mut seqs) = self.segment_seqs(chunk, reads.clone(), flipped);
        let mut hits = Hits {
            n_regs: [0; MAX_SEGMENTS],
            regs: [std::ptr::null_mut(); MAX_SEGMENTS],
            n_seg,
        };
        let qname = chunk.read(reads.start).name_nul.as_ptr().cast();
        // SAFETY: a valid index and options, `n_seg` sequences of `qlens` bases, room for
        // `n_seg` hit arrays, this thread's buffer, a NUL-terminated name.
        let rep_len = unsafe {
            ffi::mm_map_frag(
                aligner.index_ptr(),
                n_seg as i32,
                qlens.as_ptr(),
                seqs.as_mut_ptr(),
                hits.n_regs.as_mut_ptr(),
                hits.regs.as_mut_ptr(),
                self.tbuf,
                opt,
                qname,
            );
            (*self.tbuf).rep_len
        };
        for j in (0..n_seg).filter(|&j| flipped(j)) {
            for r in hits.segment_mut(j) {
                flip_back(r, qlens[j]);
            }
        }
        // No allocation for single reads and pairs; longer fragments (rare) take a Vec.
        let segment = |(j, i): (usize, usize)| Segment {
            read: chunk.read(i),
            regs: hits.segment(j),
        };
        let mut pair = [Segment::EMPTY, Segment::EMPTY];
        let many: Vec<Segment<'_>>;
        let segs: &[Segment<'_>] = if n_seg <= 2 {
            for (slot, s) in pair.iter_mut().zip(reads.clone().enumerate().map(segment)) {
                *slot = s;
            }
            &pair[..n_seg]
        } else {
            many = reads.clone().enumerate().map(segment).collect();
            &many
        };
        let ctx = Context {
            references: aligner.references(),
            read_group: aligner.read_group_id(),
            opt_flag: opt.flag,
            index: aligner.index_ptr(),
        };
        // SAFETY: this thread's buffer; its allocator is valid until the next mapping.
        let km = unsafe { ffi::mm_tbuf_get_km(self.tbuf) };
        write_records(&ctx, segs, rep_len, km, &mut self.tags, out, offsets)
    }
}

/// A hit of a segment mapped reverse complemented (`qlen` bases) turned back to the read's strand.
fn flip_back(r: &mut ffi::mm_reg1_t, qlen: i32) {
    let qs = r.qs;
    r.qs = qlen - r.qe;
    r.qe = qlen - qs;
    r.set_rev(u32::from(r.rev() == 0));
    // SAFETY: the hit's alignment, if any, belongs to this thread.
    if let Some(p) = unsafe { r.p.as_mut() } {
        match p.trans_strand() {
            1 => p.set_trans_strand(2),
            2 => p.set_trans_strand(1),
            _ => {}
        }
    }
}

/// Writes the records of a fragment's segments (an unmapped record for a segment without hits
/// unless `--sam-hit-only`; secondary hits unless `--secondary=no`), each offset onto `offsets`.
fn write_records(
    ctx: &Context<'_>,
    segs: &[Segment<'_>],
    rep_len: i32,
    km: *mut std::os::raw::c_void,
    tags: &mut TagBuffer,
    out: &mut Vec<u8>,
    offsets: &mut Vec<u32>,
) -> Result<(), AlignError> {
    let no_secondary = ctx.opt_flag & ffi::MM_F_NO_PRINT_2ND as i64 != 0;
    let hits_only = ctx.opt_flag & ffi::MM_F_SAM_HIT_ONLY as i64 != 0;
    for (j, seg) in segs.iter().enumerate() {
        if seg.regs.is_empty() {
            if !hits_only {
                offsets.push(out.len() as u32);
                encode::write_record(ctx, segs, j, None, rep_len, km, tags, out)?;
            }
            continue;
        }
        for (k, r) in seg.regs.iter().enumerate() {
            if no_secondary && r.id != r.parent {
                continue;
            }
            offsets.push(out.len() as u32);
            encode::write_record(ctx, segs, j, Some(k), rep_len, km, tags, out)?;
        }
    }
    Ok(())
}
