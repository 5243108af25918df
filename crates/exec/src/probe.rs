//! What a plan learns of its input before cutting it into byte ranges: its path and size (a local
//! file or a remote object), its format from the first bytes, and its uncompressed size estimated
//! from a sample of BGZF blocks.

use anyhow::Context;
use sortase_bgzf::scanner;
use sortase_io::Source;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// The input's path as a plan keeps it (canonical for a local file; as given for an object read
/// remotely, see [`sortase_io::is_remote`]) and its size.
pub fn input_path_and_len(input: &str) -> anyhow::Result<(PathBuf, u64)> {
    if sortase_io::is_remote(input) {
        return Ok((PathBuf::from(input), sortase_io::size(input)?));
    }
    let path = std::fs::canonicalize(input)?;
    let len = std::fs::metadata(&path)?.len();
    Ok((path, len))
}

/// "BAM", "CRAM", "SAM" or "bgzipped SAM", from the first bytes.
pub fn input_format(path: &Path) -> anyhow::Result<&'static str> {
    let mut file = Source::open_path(path).context("cannot open")?;
    let mut head = Vec::new();
    file.by_ref().take(18).read_to_end(&mut head)?;
    if head.starts_with(b"CRAM") {
        return Ok("CRAM");
    }
    if !sortase_bgzf::is_bgzf(&head) {
        return Ok("SAM");
    }
    file.seek(SeekFrom::Start(0))?;
    let mut magic = Vec::new();
    sortase_bgzf::SeekReader::new(BufReader::new(file))
        .take(4)
        .read_to_end(&mut magic)?;
    Ok(if magic == b"BAM\x01" {
        "BAM"
    } else {
        "bgzipped SAM"
    })
}

/// The file's uncompressed size, estimated from the compression ratio of up to 16 BGZF blocks at
/// evenly spaced offsets (a whole scan of block headers would read the whole file).
pub fn estimate_record_bytes(path: &Path, file_len: u64) -> anyhow::Result<u64> {
    const SAMPLES: u64 = 16;
    let mut file = Source::open_path(path)?;
    let (mut compressed, mut uncompressed) = (0u64, 0u64);
    let mut seen = Vec::new();
    for k in 0..SAMPLES {
        let Some(block) = scanner::find_block_start_in(&mut file, file_len * k / SAMPLES)? else {
            break;
        };
        if seen.contains(&block) {
            continue;
        }
        seen.push(block);
        let mut head = [0u8; 18];
        file.seek(SeekFrom::Start(block))?;
        file.read_exact(&mut head)?;
        let size = sortase_bgzf::parse_header(&head)
            .map_err(|reason| sortase_bgzf::BgzfError::BadHeader {
                offset: block,
                reason,
            })?
            .block_size as u64;
        let mut isize = [0u8; 4];
        file.seek(SeekFrom::Start(block + size - 4))?;
        file.read_exact(&mut isize)?;
        compressed += size;
        uncompressed += u64::from(u32::from_le_bytes(isize));
    }
    Ok(match compressed {
        0 => file_len,
        c => (u128::from(file_len) * u128::from(uncompressed) / u128::from(c)) as u64,
    })
}
