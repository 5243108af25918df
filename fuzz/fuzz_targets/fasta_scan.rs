#![no_main]
//! Arbitrary bytes as a FASTA/FASTQ file through the chunked line scanner, the `.fai` builder and the
//! `.loc` builder.
//!
//! The first byte picks the chunk size (1..=256) the text is cut into before scanning, so lines and
//! headers straddle chunk boundaries everywhere. Checked:
//! - the `.fai` equals the one from a literal byte-at-a-time port of htslib's `fai_build_core`
//!   (below), success and failure alike, and the one from scanning the text as a single chunk;
//! - the `.loc` is the same for both chunkings, and its records tile the file from the first header
//!   to the end.

use libfuzzer_sys::fuzz_target;
use sortase_fasta::fai::{Fai, FaiBuilder, FaiRecord, Format};
use sortase_fasta::lines::{scan_chunk, LineSink, Stitcher};
use sortase_fasta::loc::{LocBuilder, LocRecord};

fn scan<S: LineSink>(text: &[u8], chunk: usize, sink: &mut S) -> bool {
    let mut st = Stitcher::new();
    let mut off = 0;
    for c in text.chunks(chunk) {
        if st.push(&scan_chunk(c, off as u64), sink).is_err() {
            return false;
        }
        off += c.len();
    }
    st.finish(sink).is_ok()
}

fn fai(text: &[u8], chunk: usize) -> Option<Fai> {
    let mut b = FaiBuilder::new();
    if !scan(text, chunk, &mut b) {
        return None;
    }
    b.finish().ok()
}

fn loc(text: &[u8], chunk: usize) -> Option<Vec<LocRecord>> {
    let mut b = LocBuilder::new();
    if !scan(text, chunk, &mut b) {
        return None;
    }
    b.finish(text.len() as u64).ok()
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// htslib `fai_build_core`, one byte at a time (htslib 1.24 faidx.c), as the reference.
fn reference(text: &[u8]) -> Option<Fai> {
    #[derive(PartialEq, Clone, Copy)]
    enum S {
        Out,
        Name,
        Seq,
        SeqEnd,
        Qual,
    }
    let mut pos = 0usize;
    let getc = |pos: &mut usize| -> Option<u8> {
        let c = text.get(*pos).copied();
        if c.is_some() {
            *pos += 1;
        }
        c
    };
    let (mut state, mut read_done, mut format) = (S::Out, false, None);
    let mut name: Vec<u8> = Vec::new();
    let (mut seq_offset, mut qual_offset, mut seq_len, mut qual_len) = (0u64, 0u64, 0u64, 0u64);
    let (mut char_len, mut line_len) = (0u64, 0u64);
    let mut records: Vec<FaiRecord> = Vec::new();
    let insert = |records: &mut Vec<FaiRecord>, name: &[u8], f: Option<Format>, v: [u64; 5]| {
        if records.iter().any(|r| r.name == name) {
            return;
        }
        records.push(FaiRecord {
            name: name.to_vec(),
            length: v[0],
            offset: v[1],
            line_bases: v[2],
            line_width: v[3],
            qual_offset: (f == Some(Format::Fastq)).then_some(v[4]),
        });
    };
    let mut c = getc(&mut pos);
    while let Some(ch) = c {
        match state {
            S::Out => match ch {
                b'>' => {
                    if format == Some(Format::Fastq) {
                        return None;
                    }
                    format = Some(Format::Fasta);
                    state = S::Name;
                }
                b'@' => {
                    if format == Some(Format::Fasta) {
                        return None;
                    }
                    format = Some(Format::Fastq);
                    state = S::Name;
                }
                b'\r' => {
                    if getc(&mut pos) != Some(b'\n') {
                        return None;
                    }
                }
                b'\n' => {}
                _ => return None,
            },
            S::Name => {
                if read_done {
                    insert(
                        &mut records,
                        &name,
                        format,
                        [seq_len, seq_offset, char_len, line_len, qual_offset],
                    );
                    read_done = false;
                }
                name.clear();
                let mut cur = Some(ch);
                while let Some(x) = cur {
                    if !is_space(x) {
                        name.push(x);
                    } else if !name.is_empty() || x == b'\n' {
                        break;
                    }
                    cur = getc(&mut pos);
                }
                let x = cur?;
                let mut x = Some(x);
                while x.is_some_and(|v| v != b'\n') {
                    x = getc(&mut pos);
                }
                state = S::Seq;
                seq_len = 0;
                qual_len = 0;
                char_len = 0;
                line_len = 0;
                seq_offset = pos as u64;
            }
            S::Seq | S::Qual | S::SeqEnd => {
                let fasta = format == Some(Format::Fasta);
                if state == S::SeqEnd {
                    if ch != b'+' {
                        return None;
                    }
                    state = S::Qual;
                    let mut x = getc(&mut pos);
                    while x.is_some_and(|v| v != b'\n') {
                        x = getc(&mut pos);
                    }
                    qual_offset = pos as u64;
                    c = getc(&mut pos);
                    continue;
                }
                if state == S::Seq {
                    if fasta {
                        if ch == b'\n' {
                            state = S::Out;
                            c = getc(&mut pos);
                            continue;
                        } else if ch == b'>' {
                            state = S::Name;
                            c = getc(&mut pos);
                            continue;
                        }
                    } else if ch == b'+' {
                        state = S::Qual;
                        let mut x = getc(&mut pos);
                        while x.is_some_and(|v| v != b'\n') {
                            x = getc(&mut pos);
                        }
                        qual_offset = pos as u64;
                        c = getc(&mut pos);
                        continue;
                    } else if ch == b'\n' {
                        return None;
                    }
                } else if ch == b'\n' {
                    if !read_done {
                        return None;
                    }
                    state = S::Out;
                    c = getc(&mut pos);
                    continue;
                } else if ch == b'@' && read_done {
                    state = S::Name;
                    c = getc(&mut pos);
                    continue;
                }
                if state == S::Seq && fasta {
                    read_done = true;
                }
                let (mut ll, mut cl) = (0u64, 0u64);
                let mut x = Some(ch);
                while let Some(v) = x {
                    if v == b'\n' {
                        break;
                    }
                    ll += 1;
                    if v.is_ascii_graphic() {
                        cl += 1;
                    }
                    x = getc(&mut pos);
                }
                ll += 1;
                if state == S::Seq {
                    seq_len += cl;
                    if line_len == 0 {
                        line_len = ll;
                        char_len = cl;
                    } else if line_len > ll {
                        state = if fasta { S::Out } else { S::SeqEnd };
                    } else if line_len < ll {
                        return None;
                    }
                } else {
                    qual_len += cl;
                    if line_len < ll {
                        return None;
                    } else if qual_len == seq_len {
                        read_done = true;
                    } else if qual_len > seq_len || line_len > ll {
                        return None;
                    }
                }
            }
        }
        c = getc(&mut pos);
    }
    if !read_done {
        return None;
    }
    insert(
        &mut records,
        &name,
        format,
        [seq_len, seq_offset, char_len, line_len, qual_offset],
    );
    Some(Fai {
        format: format.unwrap_or(Format::Fasta),
        records,
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&control, text)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(control) + 1;
    let whole = fai(text, text.len().max(1));
    assert_eq!(fai(text, chunk), whole, "chunking changed the .fai");
    assert_eq!(
        reference(text),
        whole,
        "line-level .fai differs from htslib's byte state machine"
    );
    let l = loc(text, text.len().max(1));
    assert_eq!(loc(text, chunk), l, "chunking changed the .loc");
    if let Some(records) = l {
        let mut at = records.first().map_or(0, |r| r.offset);
        for r in &records {
            assert_eq!(r.offset, at);
            at += r.size;
        }
        if !records.is_empty() {
            assert_eq!(at, text.len() as u64);
        }
    }
});
