//! Builds htslib (with its bundled htscodecs) from source for the CRAM codec.
//!
//! The sources: the directory or sdist named by `SORTASE_HTSLIB_SRC` if set, else the htslib tree
//! inside the pysam 0.24.1 source distribution, downloaded from PyPI into `OUT_DIR` and checked
//! against its SHA-256 (the newest htslib a package registry carries; nothing is committed). No
//! configure step: `config.h` and `version.h` are written here, as htslib's own Makefile writes
//! them when configure was not run, for zlib, libdeflate, bzip2 and xz (from their `-sys` crates),
//! without libcurl or plugins, with the x86-64 SIMD codecs of htscodecs chosen at run time.
//!
//! The Rust declarations in `src/lib.rs` are hand-written; the [`LAYOUT`] table states the size
//! and offsets of every struct field and the value of every constant they rely on. From it this
//! script writes a C file of `_Static_assert`s compiled against htslib's headers and a Rust file of
//! `const` assertions compiled into the crate, so a declaration that disagrees with the headers
//! fails the build on one side or the other. The C file also checks each function's prototype.

use sha2::{Digest, Sha256};
use std::fmt::Write as _;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The pysam 0.24.1 source distribution on PyPI, which carries htslib 1.24 under `htslib/`.
const SDIST_URL: &str = "https://files.pythonhosted.org/packages/01/d0/e9271669f97ce454d1aa97f9ce0d3e84376295f352ad6c5d2c3998e38f66/pysam-0.24.1.tar.gz";
const SDIST_SHA256: &str = "90f612afccdb454d2447ecb5229266c6e7f991093deed4ed0a791db01f7fc994";
const SDIST_NAME: &str = "pysam-0.24.1.tar.gz";
/// The htslib tree inside the sdist.
const SDIST_HTSLIB: &str = "pysam-0.24.1/htslib";
/// The oldest htslib with the CRAM decoder fixes of March 2026 (docs/security.md).
const MIN_VERSION: (u32, u32, u32) = (1, 23, 1);

/// htslib 1.24's `LIBHTS_OBJS` (Makefile) and `HTSCODECS_SOURCES` (htscodecs_bundled.mk), without
/// `hfile_libcurl.c` (no network) and without the SIMD codec files, built apart below.
const FILES: &[&str] = &[
    "kfunc.c",
    "kstring.c",
    "bcf_sr_sort.c",
    "bgzf.c",
    "errmod.c",
    "faidx.c",
    "header.c",
    "hfile.c",
    "hts.c",
    "hts_expr.c",
    "hts_os.c",
    "md5.c",
    "multipart.c",
    "probaln.c",
    "realn.c",
    "regidx.c",
    "region.c",
    "sam.c",
    "sam_mods.c",
    "simd.c",
    "synced_bcf_reader.c",
    "vcf_sweep.c",
    "tbx.c",
    "textutils.c",
    "thread_pool.c",
    "vcf.c",
    "vcfutils.c",
    "cram/cram_codecs.c",
    "cram/cram_decode.c",
    "cram/cram_encode.c",
    "cram/cram_external.c",
    "cram/cram_index.c",
    "cram/cram_io.c",
    "cram/cram_stats.c",
    "cram/mFILE.c",
    "cram/open_trace_file.c",
    "cram/pooled_alloc.c",
    "cram/string_alloc.c",
    "htscodecs/htscodecs/arith_dynamic.c",
    "htscodecs/htscodecs/fqzcomp_qual.c",
    "htscodecs/htscodecs/htscodecs.c",
    "htscodecs/htscodecs/pack.c",
    "htscodecs/htscodecs/rANS_static4x16pr.c",
    "htscodecs/htscodecs/rANS_static32x16pr_neon.c",
    "htscodecs/htscodecs/rANS_static32x16pr.c",
    "htscodecs/htscodecs/rANS_static.c",
    "htscodecs/htscodecs/rle.c",
    "htscodecs/htscodecs/tokenise_name3.c",
    "htscodecs/htscodecs/utils.c",
];

/// The x86-64 SIMD codec files, each with the flags htslib's configure gives it and the `config.h`
/// line that tells htscodecs to dispatch to it (after checking the CPU at run time).
const SIMD_FILES: &[(&str, &[&str], &[&str])] = &[
    (
        "htscodecs/htscodecs/rANS_static32x16pr_sse4.c",
        &["-msse4.1", "-mssse3", "-mpopcnt"],
        &["HAVE_POPCNT", "HAVE_SSE4_1", "HAVE_SSSE3"],
    ),
    (
        "htscodecs/htscodecs/rANS_static32x16pr_avx2.c",
        &["-mavx2", "-mpopcnt"],
        &["HAVE_AVX2"],
    ),
    (
        "htscodecs/htscodecs/rANS_static32x16pr_avx512.c",
        &["-mavx512f", "-mpopcnt"],
        &["HAVE_AVX512"],
    ),
];

/// The layout facts `src/lib.rs` relies on, for LP64 targets: `(C expression, Rust expression,
/// value)`. Each is asserted on both sides (see the module comment).
const LAYOUT: &[(&str, &str, usize)] = &[
    ("sizeof(bam1_core_t)", "size_of::<bam1_core_t>()", 48),
    (
        "offsetof(bam1_core_t, pos)",
        "offset_of!(bam1_core_t, pos)",
        0,
    ),
    (
        "offsetof(bam1_core_t, tid)",
        "offset_of!(bam1_core_t, tid)",
        8,
    ),
    (
        "offsetof(bam1_core_t, bin)",
        "offset_of!(bam1_core_t, bin)",
        12,
    ),
    (
        "offsetof(bam1_core_t, qual)",
        "offset_of!(bam1_core_t, qual)",
        14,
    ),
    (
        "offsetof(bam1_core_t, l_extranul)",
        "offset_of!(bam1_core_t, l_extranul)",
        15,
    ),
    (
        "offsetof(bam1_core_t, flag)",
        "offset_of!(bam1_core_t, flag)",
        16,
    ),
    (
        "offsetof(bam1_core_t, l_qname)",
        "offset_of!(bam1_core_t, l_qname)",
        18,
    ),
    (
        "offsetof(bam1_core_t, n_cigar)",
        "offset_of!(bam1_core_t, n_cigar)",
        20,
    ),
    (
        "offsetof(bam1_core_t, l_qseq)",
        "offset_of!(bam1_core_t, l_qseq)",
        24,
    ),
    (
        "offsetof(bam1_core_t, mtid)",
        "offset_of!(bam1_core_t, mtid)",
        28,
    ),
    (
        "offsetof(bam1_core_t, mpos)",
        "offset_of!(bam1_core_t, mpos)",
        32,
    ),
    (
        "offsetof(bam1_core_t, isize)",
        "offset_of!(bam1_core_t, isize_)",
        40,
    ),
    ("sizeof(bam1_t)", "size_of::<bam1_t>()", 80),
    ("offsetof(bam1_t, core)", "offset_of!(bam1_t, core)", 0),
    ("offsetof(bam1_t, id)", "offset_of!(bam1_t, id)", 48),
    ("offsetof(bam1_t, data)", "offset_of!(bam1_t, data)", 56),
    ("offsetof(bam1_t, l_data)", "offset_of!(bam1_t, l_data)", 64),
    ("offsetof(bam1_t, m_data)", "offset_of!(bam1_t, m_data)", 68),
    ("sizeof(htsFormat)", "size_of::<htsFormat>()", 32),
    (
        "offsetof(htsFormat, category)",
        "offset_of!(htsFormat, category)",
        0,
    ),
    (
        "offsetof(htsFormat, format)",
        "offset_of!(htsFormat, format)",
        4,
    ),
    (
        "offsetof(htsFormat, version)",
        "offset_of!(htsFormat, version)",
        8,
    ),
    (
        "offsetof(htsFormat, compression)",
        "offset_of!(htsFormat, compression)",
        12,
    ),
    (
        "offsetof(htsFormat, compression_level)",
        "offset_of!(htsFormat, compression_level)",
        16,
    ),
    (
        "offsetof(htsFormat, specific)",
        "offset_of!(htsFormat, specific)",
        24,
    ),
    ("sizeof(hts_pos_t)", "size_of::<hts_pos_t>()", 8),
    (
        "sizeof(enum htsExactFormat)",
        "size_of::<htsExactFormat>()",
        4,
    ),
    (
        "sizeof(enum hts_fmt_option)",
        "size_of::<hts_fmt_option>()",
        4,
    ),
    ("sizeof(enum htsLogLevel)", "size_of::<htsLogLevel>()", 4),
    ("sizeof(off_t)", "size_of::<libc::off_t>()", 8),
    ("cram", "HTS_FORMAT_CRAM as usize", 6),
    (
        "CRAM_OPT_REQUIRED_FIELDS",
        "CRAM_OPT_REQUIRED_FIELDS as usize",
        18,
    ),
    ("HTS_LOG_OFF", "HTS_LOG_OFF as usize", 0),
    ("SAM_FLAG", "SAM_FLAG as usize", 0x2),
    ("SAM_RNAME", "SAM_RNAME as usize", 0x4),
    ("SAM_POS", "SAM_POS as usize", 0x8),
    ("SAM_MAPQ", "SAM_MAPQ as usize", 0x10),
    ("SAM_RNEXT", "SAM_RNEXT as usize", 0x40),
    ("SAM_PNEXT", "SAM_PNEXT as usize", 0x80),
    ("-HTS_IDX_NOCOOR", "-HTS_IDX_NOCOOR as usize", 2),
];

/// The prototype of every function `src/lib.rs` declares, as C: a pointer of this type initialised
/// with the function fails to compile (`-Werror=incompatible-pointer-types`) if htslib's header
/// declares it otherwise.
const PROTOTYPES: &[(&str, &str)] = &[
    ("hts_version", "const char *(*)(void)"),
    ("hts_set_log_level", "void (*)(enum htsLogLevel)"),
    ("hts_open", "htsFile *(*)(const char *, const char *)"),
    ("hdopen", "hFILE *(*)(int, const char *)"),
    (
        "hts_hopen",
        "htsFile *(*)(hFILE *, const char *, const char *)",
    ),
    ("hclose_abruptly", "void (*)(hFILE *)"),
    ("hts_close", "int (*)(htsFile *)"),
    ("hts_get_format", "const htsFormat *(*)(htsFile *)"),
    ("hts_set_fai_filename", "int (*)(htsFile *, const char *)"),
    (
        "hts_set_opt",
        "int (*)(htsFile *, enum hts_fmt_option, ...)",
    ),
    ("hts_set_threads", "int (*)(htsFile *, int)"),
    ("hts_opt_add", "int (*)(hts_opt **, const char *)"),
    ("hts_opt_apply", "int (*)(htsFile *, hts_opt *)"),
    ("hts_opt_free", "void (*)(hts_opt *)"),
    ("sam_hdr_read", "sam_hdr_t *(*)(htsFile *)"),
    ("sam_hdr_write", "int (*)(htsFile *, const sam_hdr_t *)"),
    ("sam_hdr_parse", "sam_hdr_t *(*)(size_t, const char *)"),
    ("sam_hdr_str", "const char *(*)(sam_hdr_t *)"),
    ("sam_hdr_nref", "int (*)(const sam_hdr_t *)"),
    (
        "sam_hdr_tid2name",
        "const char *(*)(const sam_hdr_t *, int)",
    ),
    ("sam_hdr_tid2len", "hts_pos_t (*)(const sam_hdr_t *, int)"),
    ("sam_hdr_destroy", "void (*)(sam_hdr_t *)"),
    ("sam_read1", "int (*)(htsFile *, sam_hdr_t *, bam1_t *)"),
    (
        "sam_write1",
        "int (*)(htsFile *, const sam_hdr_t *, const bam1_t *)",
    ),
    ("bam_init1", "bam1_t *(*)(void)"),
    ("bam_destroy1", "void (*)(bam1_t *)"),
    (
        "sam_index_build3",
        "int (*)(const char *, const char *, int, int)",
    ),
    ("sam_index_load", "hts_idx_t *(*)(htsFile *, const char *)"),
    ("hts_idx_destroy", "void (*)(hts_idx_t *)"),
    (
        "sam_itr_queryi",
        "hts_itr_t *(*)(const hts_idx_t *, int, hts_pos_t, hts_pos_t)",
    ),
    (
        "hts_itr_next",
        "int (*)(BGZF *, hts_itr_t *, void *, void *)",
    ),
    ("hts_itr_destroy", "void (*)(hts_itr_t *)"),
    ("cram_seek", "int (*)(cram_fd *, off_t, int)"),
];

/// Fails the build with one line.
fn fail(msg: impl std::fmt::Display) -> ! {
    eprintln!("error: sortase-htslib: {msg}");
    std::process::exit(1);
}

fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data).iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Unpacks the `pysam-0.24.1/htslib/` part of the sdist into `dest`.
fn extract_sdist(sdist: &[u8], dest: &Path) -> std::io::Result<()> {
    if dest.exists() {
        fs::remove_dir_all(dest)?;
    }
    fs::create_dir_all(dest)?;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(sdist));
    for entry in archive.entries()? {
        let mut entry = entry?;
        let path = entry.path()?.into_owned();
        let Ok(rel) = path.strip_prefix(SDIST_HTSLIB) else {
            continue;
        };
        if rel.as_os_str().is_empty() || !entry.header().entry_type().is_file() {
            continue;
        }
        let target = dest.join(rel);
        fs::create_dir_all(target.parent().expect("a file has a parent"))?;
        entry.unpack(&target)?;
    }
    Ok(())
}

/// The sdist's bytes, if `data` is the pinned file.
fn checked_sdist(data: Vec<u8>, from: &str) -> Vec<u8> {
    let got = sha256_hex(&data);
    if got != SDIST_SHA256 {
        fail(format!(
            "{from}: SHA-256 {got}, expected {SDIST_SHA256} (the pysam 0.24.1 sdist)"
        ));
    }
    data
}

/// Downloads the sdist into `out` (kept there, so a rerun of this script does not download again).
fn download_sdist(out: &Path) -> Vec<u8> {
    let cached = out.join(SDIST_NAME);
    if let Ok(data) = fs::read(&cached) {
        if sha256_hex(&data) == SDIST_SHA256 {
            return data;
        }
    }
    let no_source =
        "set SORTASE_HTSLIB_SRC to an htslib 1.24 source directory or to pysam-0.24.1.tar.gz";
    if std::env::var_os("CARGO_NET_OFFLINE").is_some_and(|v| v == "true") {
        fail(format!(
            "no htslib sources: offline build (CARGO_NET_OFFLINE), so {SDIST_URL} was not downloaded; {no_source}"
        ));
    }
    let partial = out.join(format!("{SDIST_NAME}.part"));
    let run = Command::new("curl")
        .args(["--fail", "--silent", "--show-error", "--location"])
        .args([
            "--retry",
            "2",
            "--connect-timeout",
            "20",
            "--max-time",
            "300",
        ])
        .arg("--output")
        .arg(&partial)
        .arg(SDIST_URL)
        .output();
    let why = match run {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .last()
                .unwrap_or("curl failed")
                .trim()
                .to_string(),
        ),
        Err(e) => Some(format!("cannot run curl: {e}")),
    };
    if let Some(why) = why {
        let _ = fs::remove_file(&partial);
        fail(format!(
            "no htslib sources: downloading {SDIST_URL} failed ({why}); {no_source}"
        ));
    }
    let data = fs::read(&partial).unwrap_or_else(|e| fail(format!("{}: {e}", partial.display())));
    let data = checked_sdist(data, SDIST_URL);
    fs::rename(&partial, &cached).unwrap_or_else(|e| fail(format!("{}: {e}", cached.display())));
    data
}

/// Copies the files of an htslib source tree the build reads (C sources and headers, the version
/// script) into `dest`, leaving out a `config.h` or `version.h` a configure run may have left.
fn copy_tree(from: &Path, dest: &Path) -> std::io::Result<()> {
    if dest.exists() {
        fs::remove_dir_all(dest)?;
    }
    for sub in ["", "cram", "htslib", "os", "htscodecs/htscodecs"] {
        let dir = from.join(sub);
        fs::create_dir_all(dest.join(sub))?;
        for entry in fs::read_dir(&dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let wanted = name.ends_with(".c") || name.ends_with(".h") || name == "version.sh";
            let generated = sub.is_empty() && (name == "config.h" || name == "version.h");
            if wanted && !generated && entry.file_type()?.is_file() {
                fs::copy(entry.path(), dest.join(sub).join(&*name))?;
            }
        }
    }
    Ok(())
}

/// Puts the htslib tree into `OUT_DIR/htslib`; returns where it came from, for `--version`.
fn sources(out: &Path) -> (PathBuf, String) {
    let tree = out.join("htslib");
    println!("cargo:rerun-if-env-changed=SORTASE_HTSLIB_SRC");
    println!("cargo:rerun-if-env-changed=CARGO_NET_OFFLINE");
    match std::env::var_os("SORTASE_HTSLIB_SRC").map(PathBuf::from) {
        Some(dir) if dir.is_dir() => {
            if !dir.join("htslib/sam.h").is_file() || !dir.join("cram/cram_decode.c").is_file() {
                fail(format!(
                    "SORTASE_HTSLIB_SRC={}: not an htslib source tree (no htslib/sam.h or cram/cram_decode.c)",
                    dir.display()
                ));
            }
            println!("cargo:rerun-if-changed={}", dir.display());
            copy_tree(&dir, &tree).unwrap_or_else(|e| fail(format!("{}: {e}", dir.display())));
            (tree, "a local source tree".to_string())
        }
        Some(file) if file.is_file() => {
            println!("cargo:rerun-if-changed={}", file.display());
            let mut data = Vec::new();
            fs::File::open(&file)
                .and_then(|mut f| f.read_to_end(&mut data))
                .unwrap_or_else(|e| fail(format!("SORTASE_HTSLIB_SRC={}: {e}", file.display())));
            let data = checked_sdist(data, &format!("SORTASE_HTSLIB_SRC={}", file.display()));
            extract_sdist(&data, &tree)
                .unwrap_or_else(|e| fail(format!("{}: {e}", file.display())));
            (tree, "the pysam 0.24.1 sdist".to_string())
        }
        Some(other) => fail(format!(
            "SORTASE_HTSLIB_SRC={}: no such directory or file",
            other.display()
        )),
        None => {
            let data = download_sdist(out);
            extract_sdist(&data, &tree).unwrap_or_else(|e| fail(format!("{SDIST_NAME}: {e}")));
            (tree, "the pysam 0.24.1 sdist".to_string())
        }
    }
}

/// `VERSION=` of htslib's version.sh.
fn version(tree: &Path) -> String {
    let script = fs::read_to_string(tree.join("version.sh"))
        .unwrap_or_else(|e| fail(format!("htslib version.sh: {e}")));
    let version = script
        .lines()
        .find_map(|l| l.trim().strip_prefix("VERSION="))
        .unwrap_or_else(|| fail("htslib version.sh: no VERSION= line"))
        .trim()
        .to_string();
    let mut parts = version
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let numeric = (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    );
    if numeric < MIN_VERSION {
        fail(format!(
            "htslib {version} is older than 1.23.1, the first with the CRAM decoder security fixes"
        ));
    }
    if version != "1.24" {
        println!(
            "cargo:warning=building htslib {version}; the file list and checks were written for 1.24"
        );
    }
    version
}

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/shim.c");
    let (tree, origin) = sources(&out);
    let version = version(&tree);
    let mut base = cc::Build::new();
    base.include(&tree).warnings(false).pic(true);
    let (config, simd) = configure(&mut base, &tree);
    write_headers(&tree, config, &version, &base);
    let check_path = write_checks(&out);

    let mut lib = base.clone();
    for f in FILES {
        lib.file(tree.join(f));
    }
    for (b, file) in &simd {
        for o in b.clone().file(file).compile_intermediates() {
            lib.object(o);
        }
    }
    let checks = base
        .clone()
        .file(&check_path)
        .file(manifest.join("src/shim.c"))
        .flag("-Werror=incompatible-pointer-types")
        .compile_intermediates();
    for o in checks {
        lib.object(o);
    }
    lib.compile("hts");

    println!("cargo:rustc-env=SORTASE_HTSLIB_ORIGIN={origin}");
    println!("cargo:rustc-env=SORTASE_HTSLIB_SOURCE_VERSION={version}");
    println!("cargo:root={}", out.display());
    println!("cargo:include={}", tree.display());
}

/// htslib's `config.h` for the target (htslib's Makefile default, no configure, no libcurl), with
/// the compression libraries' include directories added to `base`; the builds of htscodecs' SIMD
/// rANS codecs the compiler supports (compiled with their own flags, chosen by CPU at run time).
fn configure(base: &mut cc::Build, tree: &Path) -> (String, Vec<(cc::Build, PathBuf)>) {
    let target_arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let mut config = String::from(
        "/* config.h for sortase-htslib: htslib's Makefile default (no configure), without libcurl */\n\
         #ifndef _XOPEN_SOURCE\n#define _XOPEN_SOURCE 600\n#endif\n\
         #define HAVE_DRAND48 1\n",
    );
    for (var, define) in [
        ("DEP_Z_INCLUDE", None),
        ("DEP_LIBDEFLATE_INCLUDE", Some("HAVE_LIBDEFLATE")),
        ("DEP_BZIP2_INCLUDE", Some("HAVE_LIBBZ2")),
        ("DEP_LZMA_INCLUDE", Some("HAVE_LIBLZMA")),
    ] {
        match std::env::var_os(var) {
            Some(inc) => {
                base.include(inc);
            }
            // libz-sys names no include directory when it uses the system's zlib.
            None if var == "DEP_Z_INCLUDE" => {}
            None => fail(format!("{var} not set by its -sys crate")),
        }
        if let Some(define) = define {
            writeln!(config, "#define {define} 1").expect("string");
        }
    }
    config.push_str("#ifndef __APPLE__\n#define HAVE_LZMA_H 1\n#endif\n");

    // htscodecs' SIMD rANS codecs: compiled with their own flags, chosen by CPU at run time.
    let mut simd = Vec::new();
    if target_arch == "x86_64" {
        config.push_str("#define HAVE_DECL___CPUID_COUNT 1\n#define HAVE_DECL___GET_CPUID_MAX 1\n");
        for (file, flags, defines) in SIMD_FILES {
            let mut b = base.clone();
            let supported = flags
                .iter()
                .all(|f| b.is_flag_supported(f).unwrap_or(false));
            if !supported {
                continue;
            }
            for f in *flags {
                b.flag(f);
            }
            for d in *defines {
                writeln!(config, "#define {d} 1").expect("string");
            }
            simd.push((b, tree.join(file)));
        }
        config.push_str(
            "#define HAVE_X86INTRIN_H 1\n#define HAVE_ATTRIBUTE_TARGET_SSSE3 1\n\
             #define HAVE_BUILTIN_CPU_SUPPORT_SSSE3 1\n",
        );
    }
    if matches!(target_arch.as_str(), "x86_64" | "aarch64" | "arm") {
        config.push_str("#define HAVE_ATTRIBUTE_CONSTRUCTOR 1\n");
    }
    if target_os == "linux" {
        config.push_str("#define HAVE_GETAUXVAL 1\n");
    }
    (config, simd)
}

fn write(path: PathBuf, text: String) {
    fs::write(&path, text).unwrap_or_else(|e| fail(format!("{}: {e}", path.display())));
}

/// The generated headers of the tree: `config.h`, `version.h` (and htscodecs' if missing), and
/// `config_vars.h` with `base`'s compiler and flags.
fn write_headers(tree: &Path, config: String, version: &str, base: &cc::Build) {
    write(tree.join("config.h"), config);
    write(
        tree.join("version.h"),
        format!("#define HTS_VERSION_TEXT \"{version}\"\n"),
    );
    let codecs_version = tree.join("htscodecs/htscodecs/version.h");
    if !codecs_version.is_file() {
        write(
            codecs_version,
            "#define HTSCODECS_VERSION_TEXT \"bundled with htslib\"\n".to_string(),
        );
    }
    let tool = base.get_compiler();
    write(
        tree.join("config_vars.h"),
        format!(
            "#define HTS_CC {:?}\n#define HTS_CPPFLAGS \"\"\n#define HTS_CFLAGS {:?}\n\
             #define HTS_LDFLAGS \"\"\n#define HTS_LIBS \"-lz -ldeflate -lbz2 -llzma\"\n",
            tool.path().display().to_string(),
            tool.cflags_env().to_string_lossy()
        ),
    );
}

/// The layout and prototype checks: C (`layout_check.c`, compiled with the shim; its path) and
/// Rust (`layout_check.rs`, included by src/lib.rs), both in `out`.
fn write_checks(out: &Path) -> PathBuf {
    let mut check = String::from(
        "/* Generated by sortase-htslib's build.rs: the Rust declarations' view of htslib. */\n\
         #include <stddef.h>\n#include <sys/types.h>\n#include \"htslib/sam.h\"\n\
         #include \"htslib/hts_log.h\"\n#include \"htslib/hfile.h\"\n#include \"htslib/cram.h\"\n",
    );
    for (c, _, value) in LAYOUT {
        writeln!(
            check,
            "_Static_assert(({c}) == {value}, \"sortase-htslib: {c} is not {value}: src/lib.rs disagrees with htslib's headers\");"
        )
        .expect("string");
    }
    for (i, (name, ty)) in PROTOTYPES.iter().enumerate() {
        let ptr = ty.replacen("(*)", &format!("(*sortase_proto_{i})"), 1);
        writeln!(check, "static {ptr} __attribute__((unused)) = {name};").expect("string");
    }
    let check_path = out.join("layout_check.c");
    write(check_path.clone(), check);
    let mut rust = String::from("// Generated by build.rs from its LAYOUT table.\n");
    for (c, r, value) in LAYOUT {
        writeln!(
            rust,
            "const _: () = assert!({r} == {value}, \"{c} is not {value}: the declaration disagrees with htslib's headers\");"
        )
        .expect("string");
    }
    write(out.join("layout_check.rs"), rust);
    check_path
}
