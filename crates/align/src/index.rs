//! The minimap2 index and mapping options: [`Aligner`] loads a prebuilt `.mmi` or builds the index
//! from a FASTA file, with a preset's options exactly as `minimap2 -ax PRESET` sets them (the
//! `minimap2` crate's presets, then `-a`'s `MM_F_OUT_SAM | MM_F_CIGAR`), and writes minimap2's SAM
//! header.
//!
//! The index is loaded through `minimap2-sys` rather than the crate's `Aligner::with_index`: that
//! keeps minimap2's multi-part indexes out (minimap2's CLI writes no @SQ lines for them), gives
//! errors that name the file, and checks a prebuilt index's layout first (minimap2's
//! `mm_idx_load` does not check its reads, so a truncated `.mmi` would be read as garbage).

use crate::error::AlignError;
use minimap2_sys as ffi;
use std::ffi::CString;
use std::io::{Read, Seek};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;

/// minimap2's version string, as its `@PG VN:` says (`MM_VERSION` of the linked library).
pub fn minimap2_version() -> &'static str {
    ffi::MM_VERSION.to_str().unwrap_or("unknown")
}

/// How to align.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlignerOptions {
    /// minimap2's preset (`-x`): `sr`, `map-ont`, `map-hifi`, `map-pb`, `lr:hq`, `splice`, `asm5`, ...
    pub preset: String,
    /// Write the MD tag (`--MD`).
    pub md: bool,
    /// Write the cs tag in its short form (`--cs`); MD wins when both are asked for, as in minimap2.
    pub cs: bool,
    /// The read group line (`-R`), with `\t` for tabs as minimap2 takes it.
    pub read_group: Option<String>,
    /// Threads to build an index from FASTA with.
    pub index_threads: usize,
}

impl Default for AlignerOptions {
    fn default() -> Self {
        Self {
            preset: "sr".into(),
            md: false,
            cs: false,
            read_group: None,
            index_threads: 1,
        }
    }
}

/// One reference sequence of the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// The name (`@SQ SN`).
    pub name: Vec<u8>,
    /// The length (`@SQ LN`).
    pub length: u32,
}

/// A loaded index with its mapping options; shared by all mapping threads (read-only).
pub struct Aligner {
    idx: NonNull<ffi::mm_idx_t>,
    pub(crate) mapopt: ffi::mm_mapopt_t,
    references: Vec<Reference>,
    read_group: Option<(String, Vec<u8>)>,
    options: AlignerOptions,
    path: PathBuf,
    prebuilt: bool,
    memory: usize,
}

// SAFETY: minimap2 only reads the index while mapping (its CLI shares one index among all mapping
// threads); the options are plain data.
unsafe impl Send for Aligner {}
// SAFETY: as above.
unsafe impl Sync for Aligner {}

impl Drop for Aligner {
    fn drop(&mut self) {
        // SAFETY: the index was returned by mm_idx_reader_read and is freed once.
        unsafe { ffi::mm_idx_destroy(self.idx.as_ptr()) }
    }
}

/// The `minimap2` crate's preset for minimap2's name of it.
fn preset(name: &str) -> Option<minimap2::Preset> {
    use minimap2::Preset as P;
    Some(match name {
        "sr" => P::Sr,
        "short" => P::Short,
        // minimap2's `lr` and `map-ont` are its defaults; `map-ccs` is set as `map-hifi`.
        "map-ont" | "lr" => P::MapOnt,
        "map-hifi" | "map-ccs" => P::MapHifi,
        "map-pb" => P::MapPb,
        "lr:hq" => P::LrHq,
        "lr:hqae" => P::LrHqae,
        "splice" => P::Splice,
        "splice:hq" => P::SpliceHq,
        "splice:sr" => P::SpliceSr,
        "cdna" => P::Cdna,
        "asm5" => P::Asm5,
        "asm10" => P::Asm10,
        "asm20" => P::Asm20,
        "map10k" => P::Map10k,
        "ava-pb" => P::AvaPb,
        "ava-ont" => P::AvaOnt,
        _ => return None,
    })
}

/// Whether preset `name` maps the reads of a template together (minimap2's fragment mode, as
/// [`Aligner::fragment_mode`] of an index loaded with it), without loading an index.
pub fn preset_fragment_mode(name: &str) -> Result<bool, AlignError> {
    let p = preset(name).ok_or_else(|| unknown_preset(name))?;
    let mapopt = minimap2::Aligner::builder().preset(p).mapopt;
    Ok(mapopt.flag & ffi::MM_F_FRAG_MODE as i64 != 0)
}

fn unknown_preset(name: &str) -> AlignError {
    AlignError::Option(format!(
        "unknown preset {name:?}: use one of minimap2's, e.g. sr, map-ont, map-hifi, map-pb, lr:hq, splice, asm5"
    ))
}

/// minimap2's `sam_write_rg_line`: the read group line with `\t` and `\\` unescaped, and its ID.
pub fn parse_read_group(line: &str) -> Result<(String, Vec<u8>), AlignError> {
    let err = |m: &str| AlignError::Option(format!("-R {line:?}: {m}"));
    if !line.starts_with("@RG") {
        return Err(err("the read group line must start with @RG"));
    }
    if line.contains('\t') {
        return Err(err(
            "the read group line contains literal tabs: write them as \\t",
        ));
    }
    let mut text = Vec::with_capacity(line.len());
    let mut bytes = line.bytes();
    while let Some(c) = bytes.next() {
        if c == b'\\' {
            match bytes.next() {
                Some(b't') => text.push(b'\t'),
                Some(b'\\') => text.push(b'\\'),
                _ => {}
            }
        } else {
            text.push(c);
        }
    }
    let at = text
        .windows(4)
        .position(|w| w == b"\tID:")
        .ok_or_else(|| err("no ID in the read group line (e.g. -R '@RG\\tID:lane1\\tSM:x')"))?;
    let id: Vec<u8> = text[at + 4..]
        .iter()
        .take_while(|&&c| c != b'\t' && c != b'\n')
        .copied()
        .collect();
    if id.len() + 1 > 256 {
        return Err(err("the read group ID is longer than 255 characters"));
    }
    Ok((String::from_utf8_lossy(&text).into_owned(), id))
}

/// Checks that `path` holds exactly one complete minimap2 index part (see `mm_idx_load`).
fn check_prebuilt(path: &Path) -> Result<(), AlignError> {
    let bad = |what: String| AlignError::Index {
        path: path.to_path_buf(),
        what,
    };
    let io = |e: std::io::Error| AlignError::io(path, e);
    let file = std::fs::File::open(path).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    let mut f = std::io::BufReader::new(file);
    let truncated =
        || bad("truncated minimap2 index (.mmi); build it again with minimap2 -d".into());
    let u32_at = |f: &mut std::io::BufReader<std::fs::File>| -> Result<u32, AlignError> {
        let mut b = [0u8; 4];
        f.read_exact(&mut b).map_err(|_| truncated())?;
        Ok(u32::from_le_bytes(b))
    };
    let mut head = [0u8; 4];
    f.read_exact(&mut head).map_err(|_| truncated())?;
    let x: Vec<u32> = (0..5).map(|_| u32_at(&mut f)).collect::<Result<_, _>>()?;
    let (bucket_bits, n_seq, flag) = (x[2], x[3], x[4]);
    if bucket_bits > 32 {
        return Err(bad(format!(
            "not a minimap2 index: {bucket_bits} bucket bits"
        )));
    }
    let mut sum_len = 0u64;
    for _ in 0..n_seq {
        let mut l = [0u8; 1];
        f.read_exact(&mut l).map_err(|_| truncated())?;
        f.seek_relative(i64::from(l[0])).map_err(io)?;
        sum_len += u64::from(u32_at(&mut f)?);
    }
    for _ in 0..1u64 << bucket_bits {
        let n = u32_at(&mut f)?;
        f.seek_relative(i64::from(n) * 8).map_err(io)?;
        let h = u32_at(&mut f)?;
        f.seek_relative(i64::from(h) * 16).map_err(io)?;
    }
    if flag & ffi::MM_I_NO_SEQ == 0 {
        f.seek_relative(sum_len.div_ceil(8) as i64 * 4)
            .map_err(io)?;
    } else {
        return Err(bad(
            "the index holds no reference sequence (built with --idx-no-seq); SAM output needs it"
                .into(),
        ));
    }
    let end = f.stream_position().map_err(io)?;
    if end > size {
        return Err(truncated());
    }
    if end < size {
        return Err(bad(
            "a multi-part minimap2 index: sortase fq2bam needs a single-part index (minimap2 -I larger than the reference) or the FASTA".into(),
        ));
    }
    Ok(())
}

/// The metadata of a non-empty regular file at `path`, and the path for C.
fn check_path(path: &Path) -> Result<(std::fs::Metadata, CString), AlignError> {
    let meta = std::fs::metadata(path).map_err(|e| AlignError::io(path, e))?;
    if !meta.is_file() || meta.len() == 0 {
        return Err(AlignError::Index {
            path: path.to_path_buf(),
            what: "not a minimap2 index or FASTA file (empty, or not a regular file)".into(),
        });
    }
    let cpath = CString::new(path.as_os_str().as_bytes()).map_err(|_| AlignError::Index {
        path: path.to_path_buf(),
        what: "the path contains a NUL byte".into(),
    })?;
    Ok((meta, cpath))
}

/// The references of a minimap2 index.
///
/// # Safety
/// `idx` must be a valid index: `n_seq` entries of `seq`, each with a NUL-terminated name.
unsafe fn index_references(idx: NonNull<ffi::mm_idx_t>) -> Vec<Reference> {
    // SAFETY: as the caller promises.
    unsafe {
        let mi = idx.as_ref();
        (0..mi.n_seq as usize)
            .map(|i| {
                let s = &*mi.seq.add(i);
                Reference {
                    name: std::ffi::CStr::from_ptr(s.name).to_bytes().to_vec(),
                    length: s.len,
                }
            })
            .collect()
    }
}

impl Aligner {
    /// Loads a prebuilt index (`.mmi`) or builds one from a FASTA (plain or gzip) file.
    pub fn load(path: &Path, options: &AlignerOptions) -> Result<Self, AlignError> {
        let p = preset(&options.preset).ok_or_else(|| unknown_preset(&options.preset))?;
        let read_group = options
            .read_group
            .as_deref()
            .map(parse_read_group)
            .transpose()?;
        let builder = minimap2::Aligner::builder().preset(p);
        let idxopt = builder.idxopt;
        let mut mapopt = builder.mapopt;
        mapopt.flag |= i64::from(ffi::MM_F_OUT_SAM | ffi::MM_F_CIGAR);
        if options.md {
            mapopt.flag |= ffi::MM_F_OUT_MD as i64;
        }
        if options.cs {
            mapopt.flag |= i64::from(ffi::MM_F_OUT_CS | ffi::MM_F_CIGAR);
        }
        // SAFETY: both are plain option structs.
        if unsafe { ffi::mm_check_opt(&idxopt, &mapopt) } < 0 {
            return Err(AlignError::Option(format!(
                "minimap2 rejects the options of preset {}",
                options.preset
            )));
        }
        let (meta, cpath) = check_path(path)?;
        // SAFETY: a NUL-terminated path; returns the file size for an index, 0 otherwise.
        let prebuilt = unsafe { ffi::mm_idx_is_idx(cpath.as_ptr()) } > 0;
        if prebuilt {
            check_prebuilt(path)?;
        }
        // SAFETY: minimap2's global message level; 0 keeps the C library from printing.
        unsafe { ffi::mm_verbose = 0 };
        let idx = Self::read_index(path, &cpath, &idxopt, options.index_threads)?;
        // SAFETY: `idx` is a valid index; this is what minimap2's main() does before mapping.
        unsafe { ffi::mm_mapopt_update(&mut mapopt, idx.as_ptr()) };
        // SAFETY: `idx` is the valid index just read.
        let references = unsafe { index_references(idx) };
        let bases: u64 = references.iter().map(|r| u64::from(r.length)).sum();
        let memory = if prebuilt {
            meta.len() as usize
        } else {
            // Packed sequence (4 bits a base) plus ~2/(w+1) minimizers a base at ~12 bytes each
            // (position array and hash table entry): an estimate, minimap2 does not report it.
            let w = u64::from(idxopt.w.max(1) as u16);
            (bases / 2 + bases * 2 * 12 / (w + 1)) as usize
        };
        Ok(Self {
            idx,
            mapopt,
            references,
            read_group,
            options: options.clone(),
            path: path.to_path_buf(),
            prebuilt,
            memory,
        })
    }

    fn read_index(
        path: &Path,
        cpath: &CString,
        idxopt: &ffi::mm_idxopt_t,
        threads: usize,
    ) -> Result<NonNull<ffi::mm_idx_t>, AlignError> {
        let bad = |what: &str| AlignError::Index {
            path: path.to_path_buf(),
            what: what.into(),
        };
        // SAFETY: valid path and options; a NULL output file name (no index is written).
        let reader = unsafe { ffi::mm_idx_reader_open(cpath.as_ptr(), idxopt, std::ptr::null()) };
        if reader.is_null() {
            return Err(bad("cannot open"));
        }
        // SAFETY: `reader` is open; read one part, then ask whether another follows.
        let (idx, eof) = unsafe {
            let idx = ffi::mm_idx_reader_read(reader, threads.max(1) as i32);
            let eof = idx.is_null() || ffi::mm_idx_reader_eof(reader) != 0;
            ffi::mm_idx_reader_close(reader);
            (idx, eof)
        };
        let Some(idx) = NonNull::new(idx) else {
            return Err(bad(
                "no reference sequence read: not a minimap2 index (.mmi) or FASTA file",
            ));
        };
        // SAFETY: a valid index returned above.
        let n_seq = unsafe { idx.as_ref().n_seq };
        if !eof || n_seq == 0 {
            // SAFETY: freed once, not used after.
            unsafe { ffi::mm_idx_destroy(idx.as_ptr()) };
            return Err(bad(if n_seq == 0 {
                "no reference sequence read: not a minimap2 index (.mmi) or FASTA file"
            } else {
                "the reference is larger than one minimap2 index part; sortase fq2bam needs a single-part index"
            }));
        }
        Ok(idx)
    }

    /// The reference sequences, in index order (the @SQ lines and refIDs).
    pub fn references(&self) -> &[Reference] {
        &self.references
    }

    /// The read group ID (`RG:Z:` on every record), from `-R`.
    pub fn read_group_id(&self) -> Option<&[u8]> {
        self.read_group.as_ref().map(|(_, id)| id.as_slice())
    }

    /// Whether reads of one template are mapped together (the `sr` preset's fragment mode).
    pub fn fragment_mode(&self) -> bool {
        self.mapopt.flag & ffi::MM_F_FRAG_MODE as i64 != 0
    }

    /// Bytes the index takes in memory (the `.mmi` size, or an estimate for a FASTA).
    pub fn memory(&self) -> usize {
        self.memory
    }

    /// Whether the index was a prebuilt `.mmi`.
    pub fn prebuilt(&self) -> bool {
        self.prebuilt
    }

    /// The options it was loaded with.
    pub fn options(&self) -> &AlignerOptions {
        &self.options
    }

    pub(crate) fn index_ptr(&self) -> *const ffi::mm_idx_t {
        self.idx.as_ptr()
    }

    /// The command line of the `minimap2` run that writes the same records, for `@PG CL:`.
    pub fn command_line(&self, threads: usize, reads: &[&Path]) -> String {
        let reads: Vec<String> = reads.iter().map(|r| r.display().to_string()).collect();
        self.command_line_naming(threads, &self.path.display().to_string(), &reads)
    }

    /// [`Self::command_line`] with the index and the reads named `index` and `reads` (as the user
    /// gave them, where the job reads local copies of remote objects).
    pub fn command_line_naming(&self, threads: usize, index: &str, reads: &[String]) -> String {
        let mut cl = format!("minimap2 -ax {} -t {threads}", self.options.preset);
        if let Some(rg) = &self.options.read_group {
            cl.push_str(&format!(" -R {rg}"));
        }
        if self.options.md {
            cl.push_str(" --MD");
        }
        if self.options.cs {
            cl.push_str(" --cs");
        }
        cl.push_str(&format!(" {index}"));
        for r in reads {
            cl.push_str(&format!(" {r}"));
        }
        cl
    }

    /// minimap2's SAM header (`mm_write_sam_hdr`): `@HD VN:1.6 SO:unsorted GO:query`, the @SQ
    /// lines, the read group line, and `@PG ID:minimap2 PN:minimap2 VN:... CL:command_line`.
    pub fn sam_header(&self, command_line: &str) -> String {
        let mut h = String::from("@HD\tVN:1.6\tSO:unsorted\tGO:query\n");
        for r in &self.references {
            h.push_str(&format!(
                "@SQ\tSN:{}\tLN:{}\n",
                String::from_utf8_lossy(&r.name),
                r.length
            ));
        }
        if let Some((line, _)) = &self.read_group {
            h.push_str(line);
            h.push('\n');
        }
        h.push_str(&format!(
            "@PG\tID:minimap2\tPN:minimap2\tVN:{}\tCL:{command_line}\n",
            minimap2_version()
        ));
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_group_lines_unescape_as_minimap2() {
        let (line, id) = parse_read_group("@RG\\tID:lane1\\tSM:x\\\\y").unwrap();
        assert_eq!(line, "@RG\tID:lane1\tSM:x\\y");
        assert_eq!(id, b"lane1");
        assert!(parse_read_group("@RG\\tSM:x").is_err());
        assert!(parse_read_group("RG\\tID:x").is_err());
        assert!(parse_read_group("@RG\tID:x").is_err());
    }

    #[test]
    fn presets_and_version() {
        assert!(preset("sr").is_some() && preset("map-ont").is_some());
        assert!(preset("bwa").is_none());
        assert!(preset_fragment_mode("sr").unwrap());
        assert!(!preset_fragment_mode("map-ont").unwrap());
        assert!(preset_fragment_mode("bwa").is_err());
        assert_eq!(minimap2_version(), "2.29-r1283");
    }
}
