//! Building an index for a whole BAM stream (sequential over records; inflation is parallel).

use crate::{IndexBuilder, IndexFormat, PushError};
use sortase_bam::{virtual_offset, BamError, ChunkStream, RecordRef};

/// An error building an index.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// The BAM could not be read.
    #[error(transparent)]
    Bam(#[from] BamError),
    /// A record could not be indexed.
    #[error("record {name}: {source}")]
    Push {
        /// Read name of the record.
        name: String,
        /// Why.
        source: PushError,
    },
}

struct Pending {
    tid: i32,
    beg: i64,
    end: i64,
    end_u: u64,
    mapped: bool,
    name: String,
}

/// Reads all records of `stream` (header not yet read) and returns the index file's bytes.
pub fn index_stream(
    mut stream: ChunkStream,
    format: impl Fn(u64) -> IndexFormat,
) -> Result<Vec<u8>, IndexError> {
    stream.enable_block_table();
    let header = stream.read_header()?;
    let header_end = stream.position();
    let longest = header
        .references()
        .iter()
        .map(|r| u64::from(r.length))
        .max()
        .unwrap_or(0);
    let format = format(longest);
    let n_ref = header.references().len();
    let mut builder: Option<IndexBuilder> = None;
    let mut cursor = 0usize;
    let mut pending: Option<Pending> = None;
    loop {
        let batch = stream.next_batch()?;
        let table = stream.block_table();
        let b = builder.get_or_insert_with(|| {
            let mut c = 0;
            IndexBuilder::new(format, n_ref, virtual_offset(table, &mut c, header_end))
        });
        if let Some(p) = pending.take() {
            let off = virtual_offset(table, &mut cursor, p.end_u);
            b.push(p.tid, p.beg, p.end, off, p.mapped)
                .map_err(|source| IndexError::Push {
                    name: p.name,
                    source,
                })?;
        }
        let Some(batch) = batch else { break };
        let mut u = batch.stream_offset();
        let last = batch.len().saturating_sub(1);
        for (i, raw) in batch.iter_raw().enumerate() {
            // HOT: once per record; decodes only refID, pos, flag and the CIGAR's reference length.
            let r = RecordRef::new_unchecked(&raw[4..]);
            let end_u = u + raw.len() as u64;
            let (tid, beg, end) = (
                r.reference_sequence_id(),
                i64::from(r.position()),
                r.end_position(),
            );
            let mapped = r.flag() & sortase_bam::flags::UNMAPPED == 0;
            if i == last {
                // Its end may be a block boundary whose next block is not in the table yet.
                let name = String::from_utf8_lossy(r.read_name()).into_owned();
                pending = Some(Pending {
                    tid,
                    beg,
                    end,
                    end_u,
                    mapped,
                    name,
                });
            } else {
                let off = virtual_offset(table, &mut cursor, end_u);
                b.push(tid, beg, end, off, mapped)
                    .map_err(|source| IndexError::Push {
                        name: String::from_utf8_lossy(r.read_name()).into_owned(),
                        source,
                    })?;
            }
            u = end_u;
        }
    }
    let table = stream.block_table();
    let total = table.last().map_or(0, |b| b.ustart + u64::from(b.usize));
    let final_offset = virtual_offset(table, &mut cursor, total);
    let b = builder.expect("created on the first pass");
    Ok(b.finish(final_offset))
}
