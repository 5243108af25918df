//! Bounded memory for the read ends (Picard keeps them in disk-backed `SortingCollection`s too):
//! when the ends of pass 1 outgrow the budget they are sorted and written to a run file; at the end
//! the runs and the ends still in memory are merged back in sort order and the duplicate sets are
//! found window by window (each window cut at a set boundary and processed on all cores). Ends are
//! totally ordered (the file index is part of the key), so the merged order is the order a single
//! sort gives and the results are the same whatever the budget.

use super::chunks::{self, Found, OpticalOptions};
use super::ends::{Fragment, Pair};
use rayon::prelude::*;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// An end with a fixed-size little-endian encoding for run files.
pub trait Spillable: Copy + Ord + Send + Sync {
    /// Encoded size in bytes.
    const SIZE: usize;
    /// Writes `Self::SIZE` bytes.
    fn encode(&self, out: &mut Vec<u8>);
    /// Reads `Self::SIZE` bytes.
    fn decode(b: &[u8]) -> Self;
}

fn take<const N: usize>(b: &[u8], at: &mut usize) -> [u8; N] {
    let v = b[*at..*at + N].try_into().unwrap();
    *at += N;
    v
}

impl Spillable for Fragment {
    const SIZE: usize = 2 + 4 + 4 + 1 + 1 + 2 + 2 + 2 + 8 + 2;
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.library.to_le_bytes());
        out.extend_from_slice(&self.reference.to_le_bytes());
        out.extend_from_slice(&self.coordinate.to_le_bytes());
        out.extend_from_slice(&[self.orientation, u8::from(self.paired)]);
        for v in [self.tile, self.x, self.y] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&self.index.to_le_bytes());
        out.extend_from_slice(&self.score.to_le_bytes());
    }
    fn decode(b: &[u8]) -> Self {
        let at = &mut 0;
        Fragment {
            library: u16::from_le_bytes(take(b, at)),
            reference: i32::from_le_bytes(take(b, at)),
            coordinate: i32::from_le_bytes(take(b, at)),
            orientation: take::<1>(b, at)[0],
            paired: take::<1>(b, at)[0] != 0,
            tile: i16::from_le_bytes(take(b, at)),
            x: i16::from_le_bytes(take(b, at)),
            y: i16::from_le_bytes(take(b, at)),
            index: u64::from_le_bytes(take(b, at)),
            score: i16::from_le_bytes(take(b, at)),
        }
    }
}

impl Spillable for Pair {
    const SIZE: usize = 2 + 4 + 4 + 1 + 4 + 4 + 2 + 2 + 2 + 8 + 8 + 2 + 1 + 2;
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.library.to_le_bytes());
        out.extend_from_slice(&self.ref1.to_le_bytes());
        out.extend_from_slice(&self.coord1.to_le_bytes());
        out.push(self.orientation);
        out.extend_from_slice(&self.ref2.to_le_bytes());
        out.extend_from_slice(&self.coord2.to_le_bytes());
        for v in [self.tile, self.x, self.y] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&self.index1.to_le_bytes());
        out.extend_from_slice(&self.index2.to_le_bytes());
        out.extend_from_slice(&self.score.to_le_bytes());
        out.push(self.optical_orientation);
        out.extend_from_slice(&self.read_group.to_le_bytes());
    }
    fn decode(b: &[u8]) -> Self {
        let at = &mut 0;
        Pair {
            library: u16::from_le_bytes(take(b, at)),
            ref1: i32::from_le_bytes(take(b, at)),
            coord1: i32::from_le_bytes(take(b, at)),
            orientation: take::<1>(b, at)[0],
            ref2: i32::from_le_bytes(take(b, at)),
            coord2: i32::from_le_bytes(take(b, at)),
            tile: i16::from_le_bytes(take(b, at)),
            x: i16::from_le_bytes(take(b, at)),
            y: i16::from_le_bytes(take(b, at)),
            index1: u64::from_le_bytes(take(b, at)),
            index2: u64::from_le_bytes(take(b, at)),
            score: i16::from_le_bytes(take(b, at)),
            optical_orientation: take::<1>(b, at)[0],
            read_group: i16::from_le_bytes(take(b, at)),
        }
    }
}

/// Sorted runs of ends in files named `{dir}/{stem}-{n}.run`.
pub struct Runs<T> {
    dir: PathBuf,
    stem: &'static str,
    files: Vec<PathBuf>,
    bytes: u64,
    _t: std::marker::PhantomData<T>,
}

impl<T: Spillable> Runs<T> {
    /// No runs yet; files will go to `dir`.
    pub fn new(dir: &Path, stem: &'static str) -> Self {
        Runs {
            dir: dir.to_path_buf(),
            stem,
            files: Vec::new(),
            bytes: 0,
            _t: std::marker::PhantomData,
        }
    }

    /// Runs written so far.
    pub fn count(&self) -> usize {
        self.files.len()
    }

    /// Bytes written so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Sorts `v`, writes it as a run and empties it (keeping its capacity).
    pub fn spill(&mut self, v: &mut Vec<T>) -> io::Result<()> {
        if v.is_empty() {
            return Ok(());
        }
        v.par_sort_unstable();
        let path = self
            .dir
            .join(format!("{}-{}.run", self.stem, self.files.len()));
        let mut w = BufWriter::with_capacity(1 << 20, {
            use std::os::unix::fs::OpenOptionsExt;
            // Scratch file: O_EXCL|O_NOFOLLOW, mode 0600 (never follows a planted symlink).
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&path)?
        });
        let mut buf = Vec::with_capacity(T::SIZE * 4096);
        for chunk in v.chunks(4096) {
            buf.clear();
            chunk.iter().for_each(|e| e.encode(&mut buf));
            w.write_all(&buf)?;
        }
        w.flush()?;
        self.bytes += (v.len() * T::SIZE) as u64;
        self.files.push(path);
        v.clear();
        Ok(())
    }

    /// The ends of every run and of `last` (unsorted), merged in sort order.
    pub fn merge(self, mut last: Vec<T>) -> io::Result<Merged<T>> {
        last.par_sort_unstable();
        let mut sources = Vec::with_capacity(self.files.len() + 1);
        for f in &self.files {
            sources.push(Source::File(BufReader::with_capacity(
                1 << 20,
                File::open(f)?,
            )));
        }
        sources.push(Source::Memory(last.into_iter()));
        let mut m = Merged {
            sources,
            heap: BinaryHeap::new(),
            buf: vec![0; T::SIZE],
        };
        for i in 0..m.sources.len() {
            m.refill(i)?;
        }
        Ok(m)
    }
}

enum Source<T> {
    File(BufReader<File>),
    Memory(std::vec::IntoIter<T>),
}

/// k-way merge of sorted sources.
pub struct Merged<T> {
    sources: Vec<Source<T>>,
    heap: BinaryHeap<Reverse<(T, usize)>>,
    buf: Vec<u8>,
}

impl<T: Spillable> Merged<T> {
    fn refill(&mut self, i: usize) -> io::Result<()> {
        let next = match &mut self.sources[i] {
            Source::Memory(it) => it.next(),
            Source::File(r) => match r.read_exact(&mut self.buf) {
                Ok(()) => Some(T::decode(&self.buf)),
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => None,
                Err(e) => return Err(e),
            },
        };
        if let Some(e) = next {
            self.heap.push(Reverse((e, i)));
        }
        Ok(())
    }

    /// The next end in sort order.
    pub fn next_end(&mut self) -> io::Result<Option<T>> {
        let Some(Reverse((e, i))) = self.heap.pop() else {
            return Ok(None);
        };
        self.refill(i)?;
        Ok(Some(e))
    }
}

/// Runs `find` on windows of about `window` merged ends, each cut where `same` is false (so no
/// duplicate set is split), and adds up what they found.
fn windows<T: Spillable>(
    mut merged: Merged<T>,
    window: usize,
    same: fn(&T, &T) -> bool,
    find: impl Fn(&[T]) -> Found,
) -> io::Result<Found> {
    let mut found = Found::default();
    let mut buf: Vec<T> = Vec::with_capacity(window + 1);
    while let Some(e) = merged.next_end()? {
        if buf.len() >= window && !same(buf.last().unwrap(), &e) {
            found = found.merge(find(&buf));
            buf.clear();
        }
        buf.push(e);
    }
    Ok(found.merge(find(&buf)))
}

/// The duplicate sets of spilled and in-memory ends, `window` ends in memory at a time.
pub fn find_spilled(
    pairs: (Runs<Pair>, Vec<Pair>),
    fragments: (Runs<Fragment>, Vec<Fragment>),
    opt: OpticalOptions,
    parts: usize,
    window: usize,
) -> io::Result<Found> {
    let p = windows(
        pairs.0.merge(pairs.1)?,
        window,
        chunks::same_pair_set,
        |w| chunks::find(w, &[], opt, parts),
    )?;
    let f = windows(
        fragments.0.merge(fragments.1)?,
        window,
        chunks::same_fragment_set,
        |w| chunks::find(&[], w, opt, parts),
    )?;
    Ok(p.merge(f).finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fragment(i: u64) -> Fragment {
        Fragment {
            library: (i % 3) as u16,
            reference: (i % 5) as i32 - 1,
            coordinate: (i * 7919 % 1000) as i32 - 20,
            orientation: (i % 2) as u8,
            paired: i.is_multiple_of(4),
            tile: (i % 2) as i16 + 1101,
            x: (i * 31 % 70000) as i16,
            y: -(i as i16),
            index: i * 13 % 100_003,
            score: (i * 101 % 30000) as i16 - 1000,
        }
    }

    #[test]
    fn ends_survive_encoding() {
        for i in 0..1000 {
            let f = fragment(i);
            let mut b = Vec::new();
            f.encode(&mut b);
            assert_eq!(b.len(), Fragment::SIZE);
            assert_eq!(Fragment::decode(&b), f);
        }
        let a = super::super::ends::RecordEnd {
            library: 2,
            reference: 3,
            coordinate: -5,
            reverse: true,
            mate_reference: 4,
            score: -300,
            location: super::super::name::Location::NONE,
            read_group: 7,
            first_of_pair: false,
        };
        let b = super::super::ends::RecordEnd {
            coordinate: 900,
            reverse: false,
            first_of_pair: true,
            ..a
        };
        let p = Pair::new(&a, 1 << 40, &b, 77);
        let mut buf = Vec::new();
        p.encode(&mut buf);
        assert_eq!(buf.len(), Pair::SIZE);
        assert_eq!(Pair::decode(&buf), p);
    }

    #[test]
    fn merged_runs_come_back_in_sort_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut runs = Runs::new(dir.path(), "f");
        let mut all: Vec<Fragment> = (0..20_000).map(fragment).collect();
        let mut v = Vec::new();
        for (i, f) in all.iter().enumerate() {
            v.push(*f);
            if i % 3000 == 2999 {
                runs.spill(&mut v).unwrap();
            }
        }
        assert_eq!(runs.count(), 6);
        let mut merged = runs.merge(v).unwrap();
        let mut out = Vec::new();
        while let Some(f) = merged.next_end().unwrap() {
            out.push(f);
        }
        all.sort_unstable();
        assert!(out == all, "merge differs from a single sort");
    }
}
