//! One pass over a plain or bgzipped FASTA/FASTQ file on many threads: BGZF blocks are inflated by
//! the BGZF engine's [`ParallelReader`], each inflated chunk is cut into lines by [`scan_chunk`] on a
//! second ordered pool, and the calling thread only stitches the lines that cross chunk boundaries and
//! runs the (cheap, per-line) index state machine. The `.gzi` falls out of the block metadata.

use crate::lines::{scan_chunk, ChunkLines, LineSink, Stitcher};
use crate::FastaError;
use sortase_bgzf::gzi::{GziEntry, GziIndex};
use sortase_bgzf::pool::{ordered_pool, Submitter};
use sortase_bgzf::{BlockMeta, ParallelReader, ReaderOptions};
use std::io::{Cursor, Read};
use std::thread;

/// Bytes of plain text handed to one scan job.
const PLAIN_CHUNK: usize = 4 << 20;

/// How the data is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Plain text.
    None,
    /// BGZF (bgzip).
    Bgzf,
    /// gzip that is not BGZF (no random access, no parallel inflate).
    Gzip,
}

/// What a scan learned besides the lines.
#[derive(Debug, Clone)]
pub struct ScanSummary {
    /// Plain text or BGZF.
    pub compression: Compression,
    /// Uncompressed length.
    pub total: u64,
    /// The `.gzi` (BGZF only), as htslib builds it while reading.
    pub gzi: GziIndex,
}

/// Error for gzip input that is not BGZF, worded as samtools words it.
pub fn plain_gzip_error() -> FastaError {
    FastaError::BadIndex(
        "compressed with plain gzip, not BGZF: cannot index files compressed with gzip, please use bgzip"
            .into(),
    )
}

/// Reads the first bytes of `input` to tell plain text, BGZF and plain gzip apart; returns the
/// compression and a reader that yields the whole stream again.
pub fn sniff<R: Read + Send + 'static>(
    mut input: R,
) -> Result<(Compression, Box<dyn Read + Send>), FastaError> {
    let mut head = Vec::with_capacity(18);
    input.by_ref().take(18).read_to_end(&mut head)?;
    let compression = if head.starts_with(&[0x1f, 0x8b]) {
        if sortase_bgzf::is_bgzf(&head) {
            Compression::Bgzf
        } else {
            Compression::Gzip
        }
    } else {
        Compression::None
    };
    Ok((compression, Box::new(Cursor::new(head).chain(input))))
}

type Job = (Vec<u8>, usize, u64, Vec<BlockMeta>);
type Scanned = Result<(ChunkLines, Vec<BlockMeta>), FastaError>;

/// Cuts `input` into chunks (BGZF: its blocks, inflated on `threads` threads; otherwise
/// `PLAIN_CHUNK` bytes) and submits them in order, each with its uncompressed offset.
fn feed(
    input: impl Read + Send + 'static,
    compression: Compression,
    threads: usize,
    submitter: &Submitter<Job, Scanned>,
) -> Result<(), FastaError> {
    let mut offset = 0u64;
    match compression {
        Compression::Bgzf => {
            let reader = ParallelReader::new(input, ReaderOptions::with_threads(threads));
            for chunk in reader {
                let chunk = chunk?;
                let len = chunk.data().len() as u64;
                let job = (chunk.buf, chunk.head, offset, chunk.blocks);
                offset += len;
                if submitter.submit(job).is_err() {
                    break;
                }
            }
        }
        Compression::None | Compression::Gzip => {
            let mut input = input;
            loop {
                let mut buf = Vec::with_capacity(PLAIN_CHUNK);
                input
                    .by_ref()
                    .take(PLAIN_CHUNK as u64)
                    .read_to_end(&mut buf)?;
                if buf.is_empty() {
                    break;
                }
                let len = buf.len() as u64;
                if submitter.submit((buf, 0, offset, Vec::new())).is_err() {
                    break;
                }
                offset += len;
            }
        }
    }
    Ok(())
}

/// Adds the data blocks of a chunk to the `.gzi` (`uoffset`: the uncompressed offset so far).
fn add_blocks(gzi: &mut GziIndex, uoffset: &mut u64, blocks: Vec<BlockMeta>) {
    for b in blocks {
        if b.usize > 0 {
            gzi.data_blocks.push(GziEntry {
                compressed: b.coffset,
                uncompressed: *uoffset,
            });
        }
        *uoffset += u64::from(b.usize);
    }
}

/// Scans the whole of `input` on `threads` threads, feeding every line to `sink` in order.
pub fn scan<R: Read + Send + 'static>(
    input: R,
    threads: usize,
    sink: &mut impl LineSink,
) -> Result<ScanSummary, FastaError> {
    let threads = threads.max(1);
    let (compression, input) = sniff(input)?;
    if compression == Compression::Gzip {
        return Err(plain_gzip_error());
    }
    let (submitter, collector) = ordered_pool(threads, 2 * threads + 2, || {
        |(buf, head, offset, blocks): Job| -> Scanned {
            Ok((scan_chunk(&buf[head..], offset), blocks))
        }
    });
    let feeder = thread::spawn(move || feed(input, compression, threads, &submitter));
    let mut stitcher = Stitcher::new();
    let mut gzi = GziIndex::default();
    let mut uoffset = 0u64;
    let mut failure = None;
    for scanned in collector {
        let (lines, blocks) = match scanned {
            Ok(x) => x,
            Err(e) => {
                failure = Some(e);
                break;
            }
        };
        if let Err(e) = stitcher.push(&lines, sink) {
            failure = Some(e);
            break;
        }
        add_blocks(&mut gzi, &mut uoffset, blocks);
    }
    // The feeder's error (a corrupt block) comes first: it explains any failure downstream.
    match feeder.join() {
        Ok(Err(e)) => return Err(e),
        Err(_) => {
            return Err(FastaError::Io(std::io::Error::other(
                "scan thread panicked",
            )))
        }
        Ok(Ok(())) => {}
    }
    if let Some(e) = failure {
        return Err(e);
    }
    stitcher.finish(sink)?;
    Ok(ScanSummary {
        compression,
        total: stitcher.total,
        gzi,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fai::FaiBuilder;
    use sortase_bgzf::{CompressionLevel, ParallelWriter, WriterOptions};
    use std::io::Write;

    fn text() -> Vec<u8> {
        let mut t = Vec::new();
        for i in 0..5000 {
            writeln!(t, ">s{i} d").unwrap();
            for _ in 0..(i % 7) {
                t.extend_from_slice(b"ACGTACGTAC\n");
            }
            t.extend_from_slice(b"ACG\n");
        }
        t
    }

    #[test]
    fn plain_and_bgzf_give_the_same_index() {
        let t = text();
        let mut plain = FaiBuilder::new();
        scan(Cursor::new(t.clone()), 2, &mut plain).unwrap();
        let mut w = ParallelWriter::new(
            Vec::new(),
            WriterOptions::new(2, CompressionLevel::samtools(1)),
        );
        w.write_all(&t).unwrap();
        let (gz, log) = w.finish().unwrap();
        let mut zipped = FaiBuilder::new();
        let summary = scan(Cursor::new(gz), 3, &mut zipped).unwrap();
        assert_eq!(plain.finish().unwrap(), zipped.finish().unwrap());
        assert_eq!(summary.gzi, GziIndex::from_block_log(&log));
        assert_eq!(summary.total, t.len() as u64);
    }

    #[test]
    fn plain_gzip_is_refused() {
        let gz = [
            0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        let err = scan(Cursor::new(gz.to_vec()), 1, &mut FaiBuilder::new()).unwrap_err();
        assert!(err.to_string().contains("plain gzip"));
    }
}
