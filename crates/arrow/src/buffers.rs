//! The growable buffers Arrow columns are built in, batch after batch: strings ([`StrBuf`], for
//! the string columns and string tags) and the capacity each buffer takes into its next batch.

use arrow_array::StringArray;
use arrow_buffer::{Buffer, NullBufferBuilder, OffsetBuffer, ScalarBuffer};

/// Strings of one column: values back to back, `offsets` (Arrow's, starting with 0), validity.
pub(crate) struct StrBuf {
    pub values: Vec<u8>,
    pub offsets: Vec<i32>,
    pub nulls: NullBufferBuilder,
}

impl StrBuf {
    pub fn new() -> Self {
        Self {
            values: Vec::new(),
            offsets: vec![0],
            nulls: NullBufferBuilder::new(0),
        }
    }

    /// Ends the current value (appended to `values` by the caller).
    #[inline]
    pub fn end_value(&mut self) {
        self.offsets.push(self.values.len() as i32);
        self.nulls.append_non_null();
    }

    #[inline]
    pub fn push_null(&mut self) {
        self.offsets.push(self.values.len() as i32);
        self.nulls.append_null();
    }

    /// The array, checking that the bytes are UTF-8. All-ASCII bytes (every read name and
    /// quality string in practice) are checked in one word-at-a-time pass instead of `try_new`'s UTF-8 pass
    /// plus a check of every offset (`from_utf8` + `validate`: 1.1% of the projection's profile).
    pub fn finish(&mut self) -> Result<StringArray, String> {
        if self.values.is_ascii() {
            return Ok(self.finish_ascii());
        }
        let (offsets, values, nulls) = self.take();
        StringArray::try_new(offsets, values, nulls).map_err(|e| e.to_string())
    }

    /// The array of bytes known to be ASCII.
    pub fn finish_ascii(&mut self) -> StringArray {
        let (offsets, values, nulls) = self.take();
        debug_assert!(values.is_ascii());
        // SAFETY: the offsets grow monotonically from 0 to values.len() (end_value/push_null) and
        // every byte is ASCII (callers write only table characters), so every slice is valid UTF-8.
        unsafe { StringArray::new_unchecked(offsets, values, nulls) }
    }

    fn take(&mut self) -> (OffsetBuffer<i32>, Buffer, Option<arrow_buffer::NullBuffer>) {
        let mut next_offsets = Vec::with_capacity(next_capacity(self.offsets.len()));
        next_offsets.push(0);
        let offsets = std::mem::replace(&mut self.offsets, next_offsets);
        let values = take_vec(&mut self.values);
        let nulls = self.nulls.finish();
        // SAFETY: offsets start at 0 and never decrease (end_value/push_null push values.len()).
        let offsets = unsafe { OffsetBuffer::new_unchecked(ScalarBuffer::from(offsets)) };
        (offsets, Buffer::from_vec(values), nulls)
    }
}

/// The capacity to give a column for the next batch, `n` being what the last batch held: the next
/// batch of a worker is about as long (its ranges are equal compressed sizes), so one allocation
/// holds it instead of a doubling series of reallocations, each copying the column and faulting in
/// fresh pages (~11% of the projection's page faults, `perf record -e page-faults`). Capacity
/// never written is never faulted in.
pub(crate) fn next_capacity(n: usize) -> usize {
    n + n / 8
}

/// Takes `v`'s values, leaving it empty with room for as many and an eighth more.
pub(crate) fn take_vec<T>(v: &mut Vec<T>) -> Vec<T> {
    std::mem::replace(v, Vec::with_capacity(next_capacity(v.len())))
}
