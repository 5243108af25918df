#![no_main]
//! Arbitrary bytes as a BGZF file.
//!
//! `ParallelReader` (whole stream and stopped at an `end` offset), `SeekReader` (sequential reads and
//! `seek_virtual` to the blocks found) and the block scanner must return errors on bad input, never
//! panic or hang, and must agree with each other on good input.

use libfuzzer_sys::fuzz_target;
use sortase_bgzf::{
    parse_header, scanner, BlockMeta, ParallelReader, ReaderOptions, SeekReader, BLOCK_MAX,
};
use std::io::{Cursor, Read};

/// Reads `data` with a `ParallelReader`; `Ok` with the inflated bytes and blocks if the whole stream
/// (up to `end`) is good, `Err` with the blocks delivered before the error otherwise.
fn read_parallel(
    data: &[u8],
    end: Option<u64>,
) -> Result<(Vec<u8>, Vec<BlockMeta>), Vec<BlockMeta>> {
    let options = ReaderOptions {
        threads: 2,
        start: 0,
        end,
        batch_bytes: 1,
        buffers: None,
    };
    let mut reader = ParallelReader::new(Cursor::new(data.to_vec()), options);
    let mut out = Vec::new();
    let mut blocks: Vec<BlockMeta> = Vec::new();
    let mut failed = false;
    for chunk in &mut reader {
        let chunk = match chunk {
            Ok(chunk) => chunk,
            Err(_) => {
                failed = true;
                continue; // the reader must end by itself after an error
            }
        };
        assert!(!failed, "ParallelReader yielded a chunk after an error");
        let inflated = chunk.data();
        let mut ustart = 0usize;
        for b in &chunk.blocks {
            assert_eq!(
                b.ustart as usize, ustart,
                "block data not contiguous in chunk"
            );
            assert!(b.usize as usize <= BLOCK_MAX);
            let expected_coffset = blocks.last().map_or(0, |p| p.coffset + u64::from(p.csize));
            assert_eq!(
                b.coffset, expected_coffset,
                "blocks not contiguous in the file"
            );
            assert!(
                end.map_or(true, |e| b.coffset < e),
                "block at or past `end`"
            );
            ustart += b.usize as usize;
            blocks.push(*b);
        }
        assert_eq!(
            ustart,
            inflated.len(),
            "chunk data length != sum of block sizes"
        );
        out.extend_from_slice(inflated);
    }
    if failed {
        return Err(blocks);
    }
    assert_eq!(reader.blocks_seen(), blocks.len() as u64);
    Ok((out, blocks))
}

fuzz_target!(|data: &[u8]| {
    let whole = read_parallel(data, None);

    // The single-threaded reader must agree with the parallel one.
    let mut seek_out = Vec::new();
    let seek = SeekReader::new(Cursor::new(data)).read_to_end(&mut seek_out);
    match (&whole, &seek) {
        (Ok((out, blocks)), Ok(_)) => {
            assert_eq!(
                &seek_out, out,
                "SeekReader and ParallelReader inflate differently"
            );
            let csize: u64 = blocks.iter().map(|b| u64::from(b.csize)).sum();
            assert_eq!(
                csize,
                data.len() as u64,
                "good stream not consumed to its end"
            );
        }
        (Err(_), Err(_)) => {}
        (Ok(_), Err(e)) => panic!("ParallelReader accepts what SeekReader rejects: {e}"),
        (Err(_), Ok(_)) => panic!("SeekReader accepts what ParallelReader rejects"),
    }

    // Blocks the parallel reader delivered are valid: seeking to any of them must work.
    let (good_blocks, inflated) = match &whole {
        Ok((out, blocks)) => (blocks.clone(), Some(out)),
        Err(blocks) => (blocks.clone(), None),
    };
    if !good_blocks.is_empty() {
        let mut r = SeekReader::new(Cursor::new(data));
        let mut ustart = 0u64;
        let starts: Vec<u64> = good_blocks
            .iter()
            .map(|b| {
                let s = ustart;
                ustart += u64::from(b.usize);
                s
            })
            .collect();
        for (k, b) in good_blocks.iter().enumerate().take(8) {
            let within = u64::from(data.len() as u8 % 7).min(u64::from(b.usize));
            r.seek_virtual(sortase_bgzf::virtual_position(b.coffset, within as u16))
                .expect("seek to a block the parallel reader inflated");
            let vpos = r.virtual_position();
            if within < u64::from(b.usize) {
                assert_eq!(vpos, (b.coffset << 16) | within);
            } else {
                assert_eq!(vpos, (b.coffset + u64::from(b.csize)) << 16);
            }
            if let Some(out) = inflated {
                let from = (starts[k] + within) as usize;
                let want = &out[from..(from + 300).min(out.len())];
                let mut got = vec![0u8; want.len()];
                r.read_exact(&mut got).expect("read after seek");
                assert_eq!(got, want, "SeekReader data after seek_virtual differs");
            }
        }
    }

    // Stopping at `end` delivers exactly the blocks that start before it.
    if let Ok((_, blocks)) = &whole {
        let end = data.len() as u64 / 2;
        let (_, part) = read_parallel(data, Some(end)).expect("prefix of a good stream");
        let want: Vec<BlockMeta> = blocks.iter().copied().filter(|b| b.coffset < end).collect();
        assert_eq!(part, want, "blocks delivered with end={end}");
    }

    // Scanner: any hit is a parsable header; a good stream's first block is found at 0.
    let hit = scanner::find_block_start(data, 0, true);
    if let Some(i) = hit {
        assert!(parse_header(&data[i..]).is_ok());
    }
    if matches!(&whole, Ok((_, blocks)) if !blocks.is_empty()) {
        assert_eq!(
            hit,
            Some(0),
            "scanner misses the first block of a good stream"
        );
    }
    let from = data.first().map_or(0, |&b| usize::from(b)) % (data.len() + 1);
    if let Some(i) = scanner::find_block_start(data, from, false) {
        assert!(i >= from && parse_header(&data[i..]).is_ok());
    }
    let offset = data.len() as u64 / 3;
    if let Some(i) = scanner::find_block_start_in(&mut Cursor::new(data), offset).unwrap() {
        assert!(i >= offset && parse_header(&data[i as usize..]).is_ok());
    }
});
