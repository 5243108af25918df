//! The records of a read-name group that continues past the end of a batch: query-grouped marking
//! cuts each batch into whole groups and carries the last one into the next batch.

use sortase_bam::{RecordBatch, RecordRef};

/// Records of a group that continues past the end of a batch.
#[derive(Default)]
pub struct Carry {
    buf: Vec<u8>,
    offsets: Vec<u32>,
    name: Vec<u8>,
}

impl Carry {
    /// Whether no group is carried.
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// Whether a record named `name` belongs to the carried group.
    pub fn continues(&self, name: &[u8]) -> bool {
        self.name == name
    }

    /// Adds record `raw` (with its `block_size`) to the carried group.
    pub fn push(&mut self, raw: &[u8]) {
        if self.offsets.is_empty() {
            self.name.clear();
            let r = RecordRef::new_unchecked(&raw[4..]);
            self.name.extend_from_slice(r.read_name());
        }
        self.offsets.push(self.buf.len() as u32);
        self.buf.extend_from_slice(raw);
    }

    /// Moves the records of `batch` from `start` on that continue the carried group into it.
    /// `None` when they run to the batch's end (the group goes on); else where the batch's own
    /// records start and the carried group, now complete (`None` if nothing was carried), to
    /// process before them.
    pub fn continue_from(
        &mut self,
        batch: &RecordBatch,
        mut start: usize,
    ) -> Option<(usize, Option<RecordBatch>)> {
        if self.is_empty() {
            return Some((start, None));
        }
        while start < batch.len() && self.continues(batch.record(start).read_name()) {
            self.push(batch.raw(start));
            start += 1;
        }
        (start < batch.len()).then(|| (start, Some(self.take())))
    }

    /// The carried group as a batch; the carry is empty after.
    pub fn take(&mut self) -> RecordBatch {
        let buf = std::mem::take(&mut self.buf);
        let end = buf.len();
        RecordBatch::from_parts(buf, std::mem::take(&mut self.offsets), end, 0)
    }
}
