//! A batch of raw records in one contiguous buffer, with the offset of each record.

use crate::RecordRef;
use sortase_bgzf::ChunkBuffers;
use std::sync::Arc;

/// Whole raw records (each with its 4-byte `block_size` prefix) stored back to back in one buffer.
///
/// A batch cut from a reader's chunk buffer can carry that reader's [`ChunkBuffers`] pool
/// ([`RecordBatch::recycled_into`]); dropping it then gives the buffer back for a later chunk.
#[derive(Debug, Default)]
pub struct RecordBatch {
    buf: Vec<u8>,
    /// Offset of each record's `block_size` field in `buf`.
    offsets: Vec<u32>,
    /// End of the last record in `buf`.
    end: usize,
    /// Uncompressed stream offset of the first record (0 when unknown).
    stream_offset: u64,
    /// Where the buffer goes when the batch is dropped.
    recycle: Option<Arc<ChunkBuffers>>,
}

impl Drop for RecordBatch {
    fn drop(&mut self) {
        if let Some(pool) = self.recycle.take() {
            pool.put(std::mem::take(&mut self.buf));
        }
    }
}

impl RecordBatch {
    /// A batch over `buf`, whose records (already validated) start at `offsets` and end at `end`.
    pub fn from_parts(buf: Vec<u8>, offsets: Vec<u32>, end: usize, stream_offset: u64) -> Self {
        Self {
            buf,
            offsets,
            end,
            stream_offset,
            recycle: None,
        }
    }

    /// The same batch, whose buffer goes back to `pool` when it is dropped. `view -C` of the
    /// large bench BAM spent 1.3% of its CPU zeroing a fresh ~1 MiB buffer per chunk in
    /// `inflate_batch` (perf, `__memset_avx512_unaligned_erms`) before batches went back.
    pub fn recycled_into(mut self, pool: Arc<ChunkBuffers>) -> Self {
        self.recycle = Some(pool);
        self
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    /// Whether the batch holds no record.
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// The `i`-th record (without its `block_size`).
    pub fn record(&self, i: usize) -> RecordRef<'_> {
        RecordRef::new_unchecked(&self.raw(i)[4..])
    }

    /// The `i`-th record with its `block_size` prefix, as written in BAM.
    pub fn raw(&self, i: usize) -> &[u8] {
        let start = self.offsets[i] as usize;
        let next = self.offsets.get(i + 1).map_or(self.end, |&o| o as usize);
        &self.buf[start..next]
    }

    /// The `i`-th record with its `block_size` prefix, writable in place (e.g. a flag bit; the
    /// record's length must not change).
    pub fn raw_mut(&mut self, i: usize) -> &mut [u8] {
        let start = self.offsets[i] as usize;
        let next = self.offsets.get(i + 1).map_or(self.end, |&o| o as usize);
        &mut self.buf[start..next]
    }

    /// Iterates the records.
    pub fn iter(&self) -> impl Iterator<Item = RecordRef<'_>> + '_ {
        (0..self.len()).map(|i| self.record(i))
    }

    /// Iterates the records with their `block_size` prefixes.
    pub fn iter_raw(&self) -> impl Iterator<Item = &[u8]> + '_ {
        (0..self.len()).map(|i| self.raw(i))
    }

    /// All records' bytes, back to back, exactly as in a BAM stream.
    pub fn bytes(&self) -> &[u8] {
        match self.offsets.first() {
            Some(&first) => &self.buf[first as usize..self.end],
            None => &[],
        }
    }

    /// Keeps only the first `n` records.
    pub fn truncated(mut self, n: usize) -> Self {
        if n < self.offsets.len() {
            self.end = self.offsets[n] as usize;
            self.offsets.truncate(n);
        }
        self
    }

    /// Keeps only the records for which `keep` is true, in order, moving them to the front of the
    /// buffer (no allocation); stops at `keep`'s first error.
    pub fn retain<E>(
        &mut self,
        mut keep: impl FnMut(RecordRef<'_>) -> Result<bool, E>,
    ) -> Result<(), E> {
        let (mut kept, mut write) = (0, self.offsets.first().map_or(0, |&o| o as usize));
        for i in 0..self.offsets.len() {
            let start = self.offsets[i] as usize;
            let next = self.offsets.get(i + 1).map_or(self.end, |&o| o as usize);
            if !keep(RecordRef::new_unchecked(&self.buf[start + 4..next]))? {
                continue;
            }
            self.buf.copy_within(start..next, write);
            self.offsets[kept] = write as u32;
            kept += 1;
            write += next - start;
        }
        self.offsets.truncate(kept);
        self.end = write;
        Ok(())
    }

    /// Heap bytes the batch holds (buffer and offsets), for memory budgets.
    pub fn allocated(&self) -> usize {
        self.buf.capacity() + self.offsets.capacity() * 4
    }

    /// The buffer, for reuse by the next batch.
    pub fn into_buffer(mut self) -> Vec<u8> {
        self.recycle = None;
        std::mem::take(&mut self.buf)
    }

    /// Uncompressed stream offset of the first record.
    pub fn stream_offset(&self) -> u64 {
        self.stream_offset
    }
}

#[cfg(test)]
mod tests {
    use crate::sam_read::SamReader;

    #[test]
    fn retain_keeps_the_chosen_records_in_order() {
        let mut sam = String::from("@SQ\tSN:c\tLN:1000\n");
        for i in 0..10 {
            sam += &format!("r{i}\t0\tc\t{}\t{i}\t2M\t*\t0\t0\tAC\tII\n", i + 1);
        }
        let (header, mut reader) = SamReader::new(sam.as_bytes()).unwrap();
        let mut batch = reader.next_batch(&header, 1 << 20).unwrap().unwrap();
        let whole: Vec<Vec<u8>> = batch.iter_raw().map(<[u8]>::to_vec).collect();
        batch
            .retain(|r| Ok::<_, ()>(r.mapping_quality() % 3 == 1))
            .unwrap();
        let kept: Vec<&[u8]> = batch.iter_raw().collect();
        let expected: Vec<&[u8]> = [1, 4, 7].iter().map(|&i| &whole[i][..]).collect();
        assert_eq!(kept, expected);
        assert_eq!(batch.bytes(), expected.concat());
        assert_eq!(batch.retain(|_| Err("stop")), Err("stop"));
        batch.retain(|_| Ok::<_, ()>(false)).unwrap();
        assert!(batch.is_empty() && batch.bytes().is_empty());
    }
}
