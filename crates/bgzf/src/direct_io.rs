//! A writer for large output files that bypasses the page cache (`O_DIRECT`) once the file is big.
//!
//! Why: a buffered `write` copies every byte into the page cache on the writing thread, and on ext4 the
//! copies into one file are serialised on its inode lock. On this project's 2-core VM that copy ran at
//! 0.40-1.0 GB/s (`dd bs=4M`, 4.2 GB; fresh page-cache pages come cold from the host), against 2.9 GB/s
//! with `oflag=direct`, which hands our own (warm) buffers to the disk and costs almost no CPU. With
//! `sort -u` (4.6 GB of output for the large bench BAM) the copy was a third of all CPU (perf; see
//! bench/RESULTS.md). At 64 cores the single locked copy would cap any uncompressed output at a few
//! GB/s.
//!
//! How: bytes are gathered in 4 MiB buffers aligned to 4 KiB; a thread of its own writes each full buffer
//! at its offset (`pwrite`), so the caller goes on filling the next one. The first
//! [`DIRECT_AFTER`] bytes are written through the page cache as usual (small outputs, the common case in
//! pipelines and tests, stay cached for the next tool); later aligned buffers are written with
//! `O_DIRECT`. Unaligned tails (at `flush`) are written through the page cache and kept in the buffer,
//! so a later buffer rewrites them with the bytes that follow. A file system that refuses `O_DIRECT`
//! (`EINVAL`: tmpfs on older kernels, some FUSE mounts) is written through the page cache throughout.
//! [`set_direct_writes`] turns direct writes off for the process (the `sortase` binary does so when
//! `SORTASE_DIRECT_IO=0`; this library reads no environment).
//!
//! Not used for the sort's temporary runs: they are read back within seconds, from the page cache
//! when written through it. Direct runs made the out-of-core `sort -u` bench 6% faster here
//! (12.6-12.9 s against 13.4-13.7 s), only because this VM's disk reads at ~3 GB/s; on slower
//! storage re-reading every run from disk would cost more than the copy saves.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::thread::JoinHandle;

/// Alignment of buffers, offsets and lengths for `O_DIRECT` (the largest logical block size in use).
const ALIGN: usize = 4096;
/// Bytes per write.
const CHUNK: usize = 4 << 20;
/// Buffers in use: one being filled, up to two queued or being written.
const BUFFERS: usize = 3;
/// Memory held by a writer's buffers.
pub const BUFFER_BYTES: usize = BUFFERS * (CHUNK + ALIGN);
/// Bytes written through the page cache before direct writes start.
pub const DIRECT_AFTER: u64 = 64 << 20;

/// A `CHUNK`-byte buffer whose first byte is aligned to `ALIGN`.
struct Buf {
    vec: Vec<u8>,
    start: usize,
    len: usize,
}

impl Buf {
    fn new() -> Self {
        let vec = vec![0u8; CHUNK + ALIGN];
        let start = vec.as_ptr().align_offset(ALIGN);
        Self { vec, start, len: 0 }
    }

    fn data(&self) -> &[u8] {
        &self.vec[self.start..self.start + self.len]
    }

    /// Copies as much of `bytes` as fits; returns how much.
    fn fill(&mut self, bytes: &[u8]) -> usize {
        let n = bytes.len().min(CHUNK - self.len);
        let at = self.start + self.len;
        self.vec[at..at + n].copy_from_slice(&bytes[..n]);
        self.len += n;
        n
    }
}

fn stopped() -> io::Error {
    io::Error::other("output writer thread stopped")
}

enum Job {
    /// Write the buffer's bytes at this file offset, then hand the buffer back.
    Write(Buf, u64),
    /// Reply with the first error so far, or the bytes written directly (every earlier job is done).
    Sync(SyncSender<io::Result<u64>>),
}

/// Writes through a background thread, directly to disk once the file is large (see the module doc).
pub struct DirectWriter {
    buf: Buf,
    /// File offset of `buf`'s first byte (a multiple of `ALIGN`).
    offset: u64,
    jobs: Option<SyncSender<Job>>,
    free: Receiver<Buf>,
    /// Buffers not allocated yet.
    unallocated: usize,
    thread: Option<JoinHandle<()>>,
    /// Bytes written with `O_DIRECT`, as of the last `flush`.
    direct_bytes: u64,
}

/// Whether new [`DirectWriter`]s may use `O_DIRECT` (default: yes).
static DIRECT_WRITES: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Allows or forbids `O_DIRECT` for every [`DirectWriter`] created from now on in this process.
pub fn set_direct_writes(allowed: bool) {
    DIRECT_WRITES.store(allowed, std::sync::atomic::Ordering::Relaxed);
}

impl DirectWriter {
    /// Takes over `file` (opened for writing at offset 0, normally, without `O_DIRECT`).
    pub fn new(file: File) -> Self {
        let direct = DIRECT_WRITES.load(std::sync::atomic::Ordering::Relaxed);
        let (jobs, job_rx) = mpsc::sync_channel(BUFFERS);
        let (free_tx, free) = mpsc::sync_channel(BUFFERS);
        let thread = std::thread::spawn(move || run(file, direct, job_rx, free_tx));
        Self {
            buf: Buf::new(),
            offset: 0,
            jobs: Some(jobs),
            free,
            unallocated: BUFFERS - 1,
            thread: Some(thread),
            direct_bytes: 0,
        }
    }

    fn send(&self, job: Job) -> io::Result<()> {
        self.jobs
            .as_ref()
            .ok_or_else(stopped)?
            .send(job)
            .map_err(|_| stopped())
    }

    fn next_buffer(&mut self) -> io::Result<Buf> {
        if self.unallocated > 0 {
            self.unallocated -= 1;
            return Ok(Buf::new());
        }
        let mut b = self.free.recv().map_err(|_| stopped())?;
        b.len = 0;
        Ok(b)
    }

    /// Queues the current buffer; the new one starts with the old one's unaligned tail (after a
    /// flush; empty after a full buffer), so the next write of that region is aligned again.
    fn submit(&mut self) -> io::Result<()> {
        let mut next = self.next_buffer()?;
        let aligned = self.buf.len - self.buf.len % ALIGN;
        next.fill(&self.buf.data()[aligned..]);
        let full = std::mem::replace(&mut self.buf, next);
        let at = self.offset;
        self.offset += aligned as u64;
        self.send(Job::Write(full, at))
    }

    /// Waits until every queued write is done; returns the first error.
    fn sync(&mut self) -> io::Result<()> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.send(Job::Sync(tx))?;
        self.direct_bytes = rx.recv().map_err(|_| stopped())??;
        Ok(())
    }

    /// Bytes written with `O_DIRECT` so far (as of the last `flush`).
    #[cfg(test)]
    fn direct_bytes(&self) -> u64 {
        self.direct_bytes
    }
}

impl Write for DirectWriter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let n = self.buf.fill(bytes);
        if self.buf.len == CHUNK {
            self.submit()?;
        }
        Ok(n)
    }

    /// Writes everything so far (the unaligned tail through the page cache) and waits for it.
    fn flush(&mut self) -> io::Result<()> {
        if self.buf.len > 0 {
            self.submit()?;
        }
        self.sync()
    }
}

impl Drop for DirectWriter {
    /// Like `BufWriter`: writes what is left, ignoring errors (callers that care call `flush`).
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.flush();
        }
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The writer thread: performs jobs in order; after an error it only hands buffers back.
fn run(file: File, direct: bool, jobs: Receiver<Job>, free: SyncSender<Buf>) {
    let mut mode = Mode {
        file,
        allowed: direct,
        on: false,
        direct_bytes: 0,
    };
    let mut error: Option<io::Error> = None;
    for job in jobs {
        match job {
            Job::Write(buf, at) => {
                if error.is_none() {
                    error = mode.write_at(buf.data(), at).err();
                }
                let _ = free.try_send(buf);
            }
            Job::Sync(reply) => {
                let result = match &error {
                    Some(e) => Err(io::Error::new(e.kind(), e.to_string())),
                    None => Ok(mode.direct_bytes),
                };
                let _ = reply.send(result);
            }
        }
    }
}

/// The file and whether its descriptor has `O_DIRECT` set.
struct Mode {
    file: File,
    /// Direct writes wanted and not refused so far.
    allowed: bool,
    on: bool,
    /// Bytes written with `O_DIRECT`.
    direct_bytes: u64,
}

impl Mode {
    /// Writes `bytes` at `at` (`at` is aligned): the aligned part directly when the file is large
    /// enough, the rest through the page cache.
    fn write_at(&mut self, bytes: &[u8], at: u64) -> io::Result<()> {
        let aligned = if self.allowed && at >= DIRECT_AFTER {
            bytes.len() - bytes.len() % ALIGN
        } else {
            0
        };
        if aligned > 0 {
            self.set_direct(true);
            match self.file.write_all_at(&bytes[..aligned], at) {
                Ok(()) => self.direct_bytes += aligned as u64,
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) && self.on => {
                    // Refused by the file system: write through the page cache from now on.
                    self.allowed = false;
                    self.set_direct(false);
                    return self.file.write_all_at(bytes, at);
                }
                Err(e) => return Err(e),
            }
        }
        if aligned < bytes.len() {
            self.set_direct(false);
            self.file
                .write_all_at(&bytes[aligned..], at + aligned as u64)?;
        }
        Ok(())
    }

    /// Sets or clears `O_DIRECT` on the descriptor; a refusal turns direct writes off.
    fn set_direct(&mut self, on: bool) {
        if self.on == on {
            return;
        }
        let fd = self.file.as_raw_fd();
        // SAFETY: fcntl with F_GETFL/F_SETFL on a descriptor this struct owns; no memory is passed.
        let ok = unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            let flags = if on {
                flags | libc::O_DIRECT
            } else {
                flags & !libc::O_DIRECT
            };
            flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags) == 0
        };
        if ok {
            self.on = on;
        } else if on {
            self.allowed = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::OpenOptionsExt;

    /// Whether files in `dir` can be opened with `O_DIRECT` (not on tmpfs of older kernels).
    fn direct_supported(dir: &std::path::Path) -> bool {
        let p = dir.join("probe");
        let ok = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_DIRECT)
            .open(&p)
            .is_ok();
        let _ = std::fs::remove_file(p);
        ok
    }

    /// Bytes in odd-sized writes with flushes in between, past the point where direct writes start:
    /// the file holds exactly the bytes written, whichever way each part went to disk.
    #[test]
    fn file_holds_every_byte_across_flushes_and_direct_writes() {
        let dir = std::env::temp_dir().join(format!("sortase-direct-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out.bin");
        let total = DIRECT_AFTER as usize + 3 * CHUNK + 12_345;
        let data: Vec<u8> = (0..total).map(|i| (i * 7 + i / 4093) as u8).collect();
        {
            let mut w = DirectWriter::new(File::create(&path).unwrap());
            let mut at = 0;
            let mut step = 1;
            while at < total {
                let n = step.min(total - at);
                w.write_all(&data[at..at + n]).unwrap();
                at += n;
                step = (step * 3 + 17) % 1_500_000 + 1;
                if at % 7 == 0 || (at > total / 2 && at < total / 2 + 2_000_000) {
                    w.flush().unwrap();
                }
            }
            w.flush().unwrap();
            if direct_supported(&dir) {
                assert!(
                    w.direct_bytes() >= 2 * CHUNK as u64,
                    "{} direct bytes",
                    w.direct_bytes()
                );
            }
        }
        let back = std::fs::read(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(back.len(), data.len());
        assert!(back == data, "file differs from the bytes written");
    }
}
