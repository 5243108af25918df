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

    /// The carried group as a batch; the carry is empty after.
    pub fn take(&mut self) -> RecordBatch {
        let buf = std::mem::take(&mut self.buf);
        let end = buf.len();
        RecordBatch::from_parts(buf, std::mem::take(&mut self.offsets), end, 0)
    }
}
