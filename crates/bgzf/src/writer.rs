//! The parallel BGZF writer: the caller's bytes are cut into blocks of at most [`BLOCK_DATA_MAX`]
//! bytes, batches of blocks are deflated on N threads, and one thread writes them in order, followed by
//! the EOF marker.
//!
//! Block boundaries depend only on what the caller writes (never on timing or thread count), so the
//! output is byte-identical for any number of threads. A caller that writes records can keep each record
//! inside one block, as htslib does, with [`ParallelWriter::write_record`].

use crate::block::{compressor_for, BLOCK_DATA_MAX, EOF_MARKER};
use crate::cutter::{deflate_blocks, BlockCutter};
use crate::pool::{ordered_pool, Submitter};
use crate::{BgzfError, CompressionLevel};
use std::io::{self, Write};
use std::thread::{self, JoinHandle};

/// How a [`ParallelWriter`] compresses.
#[derive(Debug, Clone)]
pub struct WriterOptions {
    /// Deflate threads (at least 1).
    pub threads: usize,
    /// Compression level.
    pub level: CompressionLevel,
    /// Blocks handed to one deflate thread at a time.
    pub blocks_per_job: usize,
    /// Append the EOF marker block when finishing.
    pub eof_marker: bool,
}

impl WriterOptions {
    /// `threads` deflate threads at `level`.
    pub fn new(threads: usize, level: CompressionLevel) -> Self {
        Self {
            threads: threads.max(1),
            level,
            blocks_per_job: 16,
            eof_marker: true,
        }
    }
}

/// Compressed and uncompressed size of every block written, in order (EOF marker excluded): enough to
/// turn "block number + offset in block" positions into virtual offsets and to write a `.gzi`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct BlockLog {
    /// `(compressed size, uncompressed size)` per block.
    pub blocks: Vec<(u32, u32)>,
}

impl BlockLog {
    /// Compressed start offset of every block (one more entry: the end of the last block).
    pub fn compressed_offsets(&self) -> Vec<u64> {
        let mut out = Vec::with_capacity(self.blocks.len() + 1);
        let mut at = 0u64;
        out.push(0);
        for &(c, _) in &self.blocks {
            at += u64::from(c);
            out.push(at);
        }
        out
    }
}

struct Job {
    data: Vec<u8>,
    /// End offset of each block in `data`.
    cuts: Vec<u32>,
}

type Compressed = Result<(Vec<u8>, Vec<(u32, u32)>), BgzfError>;

/// Writes BGZF on many threads. Call [`ParallelWriter::finish`] to complete the file.
pub struct ParallelWriter<W: Write + Send + 'static> {
    submitter: Option<Submitter<Job, Compressed>>,
    writer_thread: Option<JoinHandle<io::Result<(W, BlockLog)>>>,
    cutter: BlockCutter,
    blocks_per_job: usize,
    /// Blocks completed and submitted in earlier jobs.
    blocks_before: u64,
}

impl<W: Write + Send + 'static> ParallelWriter<W> {
    /// Starts the deflate threads and the writing thread.
    pub fn new(inner: W, options: WriterOptions) -> Self {
        let threads = options.threads.max(1);
        let level = options.level;
        let (submitter, collector) = ordered_pool(threads, 2 * threads + 2, || {
            let mut compressor = compressor_for(level);
            move |job: Job| compress_job(compressor.as_mut(), job)
        });
        let eof_marker = options.eof_marker;
        let writer_thread = thread::spawn(move || {
            let mut inner = inner;
            let mut log = BlockLog::default();
            for result in collector {
                let (bytes, sizes) = result?;
                inner.write_all(&bytes)?;
                log.blocks.extend_from_slice(&sizes);
            }
            if eof_marker {
                inner.write_all(&EOF_MARKER)?;
            }
            inner.flush()?;
            Ok((inner, log))
        });
        let blocks_per_job = options.blocks_per_job.max(1);
        Self {
            submitter: Some(submitter),
            writer_thread: Some(writer_thread),
            cutter: BlockCutter {
                data: Vec::with_capacity(blocks_per_job * BLOCK_DATA_MAX),
                cuts: Vec::with_capacity(blocks_per_job),
                open: 0,
            },
            blocks_per_job,
            blocks_before: 0,
        }
    }

    /// Ends the open block if `len` more bytes would not fit in it (htslib `bgzf_flush_try`).
    pub fn reserve(&mut self, len: usize) -> io::Result<()> {
        if self.cutter.must_end_before(len) {
            self.end_block()?;
        }
        Ok(())
    }

    /// Writes one record, starting a new block first if the record would not fit in the open one.
    pub fn write_record(&mut self, record: &[u8]) -> io::Result<()> {
        self.reserve(record.len())?;
        self.write_all(record)
    }

    /// Ends the open block (if it holds any data), as htslib does after a header.
    pub fn end_block(&mut self) -> io::Result<()> {
        if self.cutter.end_block() {
            self.submit_if_full()?;
        }
        Ok(())
    }

    fn submit_if_full(&mut self) -> io::Result<()> {
        if self.cutter.cuts.len() >= self.blocks_per_job {
            self.submit()?;
        }
        Ok(())
    }

    /// Where the next byte will go: (index of its block, offset inside the block). The block's compressed
    /// offset is known once written: see [`BlockLog::compressed_offsets`].
    pub fn position(&self) -> (u64, u16) {
        (
            self.blocks_before + self.cutter.cuts.len() as u64,
            self.cutter.open_len() as u16,
        )
    }

    fn submit(&mut self) -> io::Result<()> {
        let c = &mut self.cutter;
        let tail = c.data.split_off(c.open);
        let data = std::mem::replace(&mut c.data, tail);
        c.data
            .reserve(self.blocks_per_job * BLOCK_DATA_MAX - c.data.len());
        let cuts = std::mem::take(&mut c.cuts);
        self.blocks_before += cuts.len() as u64;
        c.open = 0;
        let submitter = self.submitter.as_ref().expect("writer used after finish");
        if submitter.submit(Job { data, cuts }).is_err() {
            // The writing thread stopped: report its error.
            return Err(self.join_writer().err().unwrap_or_else(|| {
                io::Error::new(io::ErrorKind::BrokenPipe, "BGZF writer thread stopped")
            }));
        }
        Ok(())
    }

    fn join_writer(&mut self) -> io::Result<(W, BlockLog)> {
        self.submitter = None;
        match self.writer_thread.take() {
            Some(t) => t
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("BGZF writer thread panicked"))),
            None => Err(io::Error::other("BGZF writer already finished")),
        }
    }

    /// Writes the remaining data and the EOF marker; returns the inner writer and the block log.
    pub fn finish(mut self) -> io::Result<(W, BlockLog)> {
        self.end_block()?;
        if !self.cutter.cuts.is_empty() {
            self.submit()?;
        }
        self.join_writer()
    }
}

impl<W: Write + Send + 'static> Write for ParallelWriter<W> {
    fn write(&mut self, mut buf: &[u8]) -> io::Result<usize> {
        let n = buf.len();
        while !buf.is_empty() {
            buf = self.cutter.fill(buf);
            self.submit_if_full()?;
        }
        Ok(n)
    }

    /// Does not end a block (that would change block boundaries); data is written by `finish`.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<W: Write + Send + 'static> Drop for ParallelWriter<W> {
    fn drop(&mut self) {
        // Unfinished writer (error path): stop the threads without writing an EOF marker worth trusting.
        self.submitter = None;
        if let Some(t) = self.writer_thread.take() {
            let _ = t.join();
        }
    }
}

fn compress_job(compressor: Option<&mut crate::deflate::Deflater>, job: Job) -> Compressed {
    let mut out = Vec::with_capacity(job.data.len() / 2 + 1024);
    let mut sizes = Vec::with_capacity(job.cuts.len());
    deflate_blocks(compressor, &job.data, &job.cuts, &mut out, &mut sizes)?;
    Ok((out, sizes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(threads: usize, pieces: &[&[u8]], records: bool) -> (Vec<u8>, BlockLog) {
        let mut w = ParallelWriter::new(
            Vec::new(),
            WriterOptions::new(threads, CompressionLevel::default()),
        );
        for p in pieces {
            if records {
                w.write_record(p).unwrap();
            } else {
                w.write_all(p).unwrap();
            }
        }
        w.finish().unwrap()
    }

    #[test]
    fn output_is_identical_for_any_thread_count() {
        let big = vec![b'A'; 300_000];
        let pieces: Vec<&[u8]> = vec![b"header", &big, b"tail"];
        let one = write(1, &pieces, false);
        assert_eq!(one, write(4, &pieces, false));
        assert!(one.0.ends_with(&EOF_MARKER));
        assert_eq!(
            one.1.blocks.iter().map(|b| b.1 as usize).sum::<usize>(),
            300_010
        );
    }

    #[test]
    fn records_stay_inside_one_block() {
        let rec = vec![1u8; 40_000];
        let (_, log) = write(2, &[&rec, &rec, &rec], true);
        assert_eq!(log.blocks.len(), 3);
        assert!(log.blocks.iter().all(|b| b.1 == 40_000));
    }

    #[test]
    fn empty_output_is_just_the_eof_marker() {
        assert_eq!(write(2, &[], false).0, EOF_MARKER);
    }
}
