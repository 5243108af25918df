//! The `.crai` index: building it ([`build_index`]) and region queries through it ([`IndexedCram`]).

use crate::handles::*;
use crate::{bam1_to_raw, missing, ReadOptions};
use sortase_bam::{BamError, Header, RecordBatch};
use sortase_htslib as hts;
use std::path::{Path, PathBuf};

/// Builds the `.crai` index of a CRAM file with htslib (`samtools index`), next to it or at `index`.
pub fn build_index(path: &Path, index: Option<&Path>, threads: usize) -> Result<(), BamError> {
    quiet_htslib();
    let cpath = c_path(path)?;
    let cindex = index.map(c_path).transpose()?;
    // SAFETY: valid NUL-terminated paths (or NULL for the default name).
    let r = unsafe {
        hts::sam_index_build3(
            cpath.as_ptr(),
            cindex.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
            0,
            threads.max(1) as i32,
        )
    };
    if r != 0 {
        return Err(cram_err(format!(
            "{}: cannot build the .crai index",
            path.display()
        )));
    }
    Ok(())
}

/// A CRAM file open for region queries through its `.crai` index (as `samtools view FILE REGION`).
pub struct IndexedCram {
    file: HtsFile,
    header: HtsHeader,
    index: *mut hts::hts_idx_t,
    record: Bam1,
    reference: Option<PathBuf>,
}

// SAFETY: used by one thread at a time; the index is only read.
unsafe impl Send for IndexedCram {}

impl IndexedCram {
    /// Opens `path` and its index (`path.crai`).
    pub fn open(path: &Path, options: &ReadOptions) -> Result<Self, BamError> {
        quiet_htslib();
        let cpath = c_path(path)?;
        let mut file = HtsFile::open_c(&cpath, path)?;
        let header = file.read_header(options)?;
        // SAFETY: valid file and path; NULL when there is no index.
        let index = unsafe { hts::sam_index_load(file.fp, cpath.as_ptr()) };
        if index.is_null() {
            return Err(cram_err(
                "no index (.crai) found; create one with `samtools index`",
            ));
        }
        Ok(Self {
            file,
            header,
            index,
            record: Bam1::new(),
            reference: options.reference.clone(),
        })
    }

    /// The file's header.
    pub fn header(&self) -> Result<Header, BamError> {
        self.header.to_header()
    }

    /// The records overlapping `[beg, end)` of reference `tid` (0-based), in file order; `tid` `None`:
    /// the unplaced records (samtools region `*`).
    pub fn query(
        &mut self,
        tid: Option<usize>,
        beg: i64,
        end: i64,
    ) -> Result<RecordBatch, BamError> {
        let tid = tid.map_or(hts::HTS_IDX_NOCOOR, |t| t as i32);
        // SAFETY: valid index; the iterator is destroyed below.
        let itr = unsafe { hts::sam_itr_queryi(self.index, tid, beg, end) };
        if itr.is_null() {
            return Err(cram_err("cannot query the .crai index"));
        }
        let (mut buf, mut offsets) = (Vec::new(), Vec::new());
        let result = loop {
            // SAFETY: valid iterator, record and file (sam_itr_next for a CRAM file).
            let r = unsafe {
                hts::hts_itr_next(
                    std::ptr::null_mut(),
                    itr,
                    self.record.0.cast(),
                    self.file.fp.cast(),
                )
            };
            if r == -1 {
                break Ok(());
            }
            if r < -1 {
                let missing = self.header.to_header().ok().and_then(|h| {
                    missing::diagnose(&h, self.reference.as_deref(), tid.max(0), false)
                });
                break Err(cram_err(missing.unwrap_or_else(|| {
                    "htslib cannot decode the CRAM container of the region (corrupt file, or a \
                     reference that does not match the @SQ M5)"
                        .to_string()
                })));
            }
            offsets.push(buf.len() as u32);
            // SAFETY: the iterator filled the record.
            if let Err(e) = bam1_to_raw(unsafe { &*self.record.0 }, &mut buf) {
                break Err(e);
            }
        };
        // SAFETY: the iterator is ours and not used again.
        unsafe { hts::hts_itr_destroy(itr) };
        result?;
        let end = buf.len();
        Ok(RecordBatch::from_parts(buf, offsets, end, 0))
    }
}

impl Drop for IndexedCram {
    fn drop(&mut self) {
        // SAFETY: the index is ours and not used again (the file closes in its own Drop).
        unsafe { hts::hts_idx_destroy(self.index) };
    }
}
