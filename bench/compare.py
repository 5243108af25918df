#!/usr/bin/env python3
"""Side-by-side benchmark runner: sortase vs. samtools 1.24 (pysam's).

    python3 bench/compare.py CASE [--size small|large] [--data DIR] [--threads 2]
                             [--pairs 3] [--no-record] [--sortase PATH] ...
    python3 bench/compare.py --list

A CASE (see CASES below) has a description, a list of variants (label + shell
command template) and optionally a `floor` variant (a lower bound such as pure
BGZF inflation) and a `check` (do the variants' outputs agree?).  The first
variant is always sortase.

Procedure:
  1. one untimed warm-up read of the input (`cat input > /dev/null`) so every
     variant sees a warm page cache (dropping caches is not possible here);
  2. the variants run in alternation (A B [floor] A B [floor] ...), --pairs
     rounds, each under `/usr/bin/time -v` (user/sys CPU, peak RSS, exit
     status) with the wall time taken around it in Python; an untimed `sync`
     before each run, so no variant competes with the write-back of the
     previous one's output (a tool whose output is still in the page cache
     when it exits is not charged for writing it; one writing with O_DIRECT,
     as sortase does past 64 MiB, is);
  3. per variant: median wall, min-max wall, median CPU% ((user+sys)/wall),
     median user+sys, max peak RSS, and the ratio variant/sortase of the
     median walls (>1 means sortase is faster); with a floor also
     sortase/floor;
  4. optional output check;
  5. unless --no-record: a markdown section appended to bench/RESULTS-archive.md and
     rows appended to bench/results.csv.

Template fields: {input} {sorted} {out} {threads} {tmp} {sortase} {samtools}
  {sorted}   the coordinate-sorted BAM of the same data (DIR/SIZE.sorted.bam)
  {out}      a per-variant output path in the scratch dir (removed afterwards)
  {tmp}      a per-variant scratch directory (e.g. for sort -T)
  {sortase}  --sortase (default /work/main/target/release/sortase)
  {samtools} --samtools (default: `<this python> -S bench/samtools-1.24`,
             i.e. pysam's samtools 1.24; ~0.1 s start-up overhead, measured
             and reported with each result)
Commands without shell syntax are executed directly; others via
`bash -o pipefail -c`.
"""
import argparse
import csv
import datetime
import itertools
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
DEFAULT_SORTASE = os.path.join(REPO, "target", "release", "sortase")
DEFAULT_SAMTOOLS = f"{shlex.quote(sys.executable)} -S {shlex.quote(os.path.join(BENCH_DIR, 'samtools-1.24'))}"
# per-run sections: RESULTS.md is the report bench/report.py writes, runs append to the archive
RESULTS_MD = os.path.join(BENCH_DIR, "RESULTS-archive.md")
RESULTS_CSV = os.path.join(BENCH_DIR, "results.csv")
TIME_BIN = "/usr/bin/time"
# bench/setup-peer.sh --tools installs the Rust peers (mako, dupblaster) under PEER_ROOT/bin and
# polars-bio into PEER_ROOT/venv
PEER_ROOT = os.environ.get("SORTASE_PEER_ROOT") or os.path.join(REPO, "target", "bench-peers")


def peer_binary(root, name):
    """ROOT/bin/NAME if installed there, else NAME from PATH."""
    path = os.path.join(root, "bin", name)
    return path if os.path.exists(path) else name

ZLIB_CAVEAT = (
    "Caveat: pysam 0.24.1's bundled htslib is built WITHOUT libdeflate "
    "(pysam.config.HAVE_LIBDEFLATE = 0), so samtools-1.24 here inflates/deflates "
    "with zlib, roughly 2x slower than a usual samtools build with libdeflate "
    "(Debian's samtools 1.16 has it; add it with --debian-samtools).")

THREADS_CAVEAT = (
    "Caveat: samtools' `-@N` means N *additional* (compression/decompression) "
    "threads besides the main thread, sortase's `-@N` means N threads in total; "
    "both get the same number here, as the issue asks for `-@2` on both.")

# --------------------------------------------------------------------------
# cases
# --------------------------------------------------------------------------
# input: "unsorted" -> DIR/SIZE.bam (aligner order), "sorted" -> DIR/SIZE.sorted.bam
# check: None | "stdout" (stdout of the variants must be identical) |
#        a command template run on each variant's {out}; its stdout must agree.

CASES = {
    "view-bam": {
        "description": (
            "BAM -> BAM re-encode (`view -b -o`): inflate + parse + deflate, "
            "both at their default compression level (samtools: BGZF level 6 "
            "via htslib's default). Dominated by deflate. " + THREADS_CAVEAT),
        "input": "unsorted",
        "variants": [
            ("sortase", "{sortase} view -b -@{threads} -o {out} {input}"),
            ("samtools-1.24", "{samtools} view -b -@{threads} -o {out} {input}"),
        ],
        "floor": None,
        # Debian samtools (libdeflate) only to hash the records: faster on large
        "check": "samtools view -@{threads} {out} | md5sum",
    },
    "view-u": {
        "description": (
            "BAM -> uncompressed BAM to /dev/null (`view -u`): inflate + "
            "record parse/serialise, no deflate. Floor: `bgzip -@{threads} -dc` "
            "(htslib inflate only, Debian bgzip 1.16). " + THREADS_CAVEAT),
        "input": "unsorted",
        "variants": [
            ("sortase", "{sortase} view -u -@{threads} -o /dev/null {input}"),
            ("samtools-1.24", "{samtools} view -u -@{threads} -o /dev/null {input}"),
        ],
        "floor": ("bgzip-dc", "bgzip -@{threads} -dc {input} > /dev/null"),
        "check": None,
    },
    "view-count": {
        "description": (
            "Count records (`view -c`): inflate + minimal record walk, prints "
            "one number. " + THREADS_CAVEAT),
        "input": "unsorted",
        "variants": [
            ("sortase", "{sortase} view -c -@{threads} {input}"),
            ("samtools-1.24", "{samtools} view -c -@{threads} {input}"),
        ],
        "floor": None,
        "check": "stdout",
    },
    "flagstat": {
        "description": (
            "Flag statistics (`flagstat`): sortase splits the BAM into byte ranges "
            "counted on all threads; samtools reads it sequentially with -@ "
            "decompression threads. Floor: `bgzip -@{threads} -dc` (inflate only). "
            + THREADS_CAVEAT),
        "input": "unsorted",
        "variants": [
            ("sortase", "{sortase} flagstat -@{threads} {input}"),
            ("samtools-1.24", "{samtools} flagstat -@{threads} {input}"),
            ("sambamba", "sambamba flagstat -t {threads} {input}"),
        ],
        "floor": ("bgzip-dc", "bgzip -@{threads} -dc {input} > /dev/null"),
        "check": "stdout",
        # sambamba prints the older flagstat layout (no primary lines): timed, not compared
        "check_skip": ("sambamba",),
    },
    "index-bai": {
        "description": (
            "BAI index of a coordinate-sorted BAM (`index`): sortase builds per-range "
            "summaries on all threads and replays them through htslib's index state "
            "machine; the files must be byte-identical. Floor: `bgzip -@{threads} -dc`. "
            + THREADS_CAVEAT),
        "input": "sorted",
        "variants": [
            ("sortase", "{sortase} index -@{threads} -o {out} {input}"),
            ("samtools-1.24", "{samtools} index -@{threads} -o {out} {input}"),
        ],
        "floor": ("bgzip-dc", "bgzip -@{threads} -dc {input} > /dev/null"),
        "check": "md5sum < {out}",
    },
    "index-csi": {
        "description": (
            "CSI index (`index -c`), as index-bai. The check compares the index's decompressed "
            "bytes: a CSI is BGZF-compressed by the build's deflate (samtools with libdeflate "
            "writes other compressed bytes than pysam's zlib build, which sortase's e2e tests "
            "match byte for byte). " + THREADS_CAVEAT),
        "input": "sorted",
        "variants": [
            ("sortase", "{sortase} index -c -@{threads} -o {out} {input}"),
            ("samtools-1.24", "{samtools} index -c -@{threads} -o {out} {input}"),
        ],
        "floor": ("bgzip-dc", "bgzip -@{threads} -dc {input} > /dev/null"),
        "check": "bgzip -dc < {out} | md5sum",
    },
    # ---- issue 5: bgzipped FASTA (data: bench/generate_fasta.py) ----
    "fetch-3000": {
        "description": (
            "Retrieve 3000 random whole records (names in proteins.names.txt, seeded) from the "
            "~1M-record bgzipped protein FASTA. sortase fetch looks the names up in the .loc "
            "(pre-built, as the .gzi/.fai of the peers) and inflates each needed block once on "
            "all threads; the peers are a shell loop of htslib `bgzip -b OFFSET -s SIZE` (one "
            "process per record: how users do it today) and `samtools faidx -r` in one process "
            "(whose output is reformatted: `>name` only, so it is timed, not compared)."),
        "input": "fasta-gz",
        "prepare": ["{sortase} loc {input}", "{samtools} faidx {input}"],
        "variants": [
            ("sortase", "{sortase} fetch -@{threads} -n {data}/proteins.names.txt {input} > {out}"),
            ("bgzip-b-s-loop", "while read o s; do bgzip -b $o -s $s {input}; done "
                               "< {data}/proteins.pairs.txt > {out}"),
            ("samtools-1.24", "{samtools} faidx -@{threads} -r {data}/proteins.names.txt {input} > {out}"),
        ],
        "floor": None,
        "check": "md5sum < {out}",
        "check_skip": ("samtools-1.24",),
    },
    "faidx-3000": {
        "description": (
            "`faidx -r names.txt`: the same 3000 random records as fetch-3000, as samtools faidx "
            "regions (output must be identical). Indexes pre-built."),
        "input": "fasta-gz",
        "prepare": ["{samtools} faidx {input}"],
        "variants": [
            ("sortase", "{sortase} faidx -@{threads} -r {data}/proteins.names.txt {input} > {out}"),
            ("samtools-1.24", "{samtools} faidx -@{threads} -r {data}/proteins.names.txt {input} > {out}"),
        ],
        "floor": None,
        "check": "md5sum < {out}",
    },
    "faidx-build": {
        "description": (
            "Build .fai + .gzi of the ~1M-record bgzipped FASTA (`faidx FILE`, written to scratch "
            "names with --fai-idx/--gzi-idx); sortase inflates and scans blocks on all threads, "
            "samtools reads one byte at a time (its -@ does not apply to indexing). "
            "Floor: `bgzip -@{threads} -dc` (inflate only)."),
        "input": "fasta-gz",
        "variants": [
            ("sortase", "{sortase} faidx -@{threads} --fai-idx {out} --gzi-idx {tmp}/x.gzi {input}"),
            ("samtools-1.24", "{samtools} faidx -@{threads} --fai-idx {out} --gzi-idx {tmp}/x.gzi {input}"),
        ],
        "floor": ("bgzip-dc", "bgzip -@{threads} -dc {input} > /dev/null"),
        "check": "md5sum < {out}; md5sum < {tmp}/x.gzi",
    },
    "loc-build": {
        "description": (
            "Build the .loc (name, offset, size of every record) of the bgzipped FASTA, against "
            "samtools faidx building its .fai on the same file (the nearest peer: no tool builds "
            ".loc). Floor: `bgzip -@{threads} -dc`."),
        "input": "fasta-gz",
        "variants": [
            ("sortase", "{sortase} loc -@{threads} -o {out} {input}"),
            ("samtools-1.24", "{samtools} faidx --fai-idx {out} --gzi-idx {tmp}/x.gzi {input}"),
        ],
        "floor": ("bgzip-dc", "bgzip -@{threads} -dc {input} > /dev/null"),
        "check": None,
    },
    "bgzip-compress": {
        "description": (
            "Compress the plain ~0.85 GB FASTA at the default level (`bgzip -@N -c`): sortase "
            "against htslib's bgzip 1.16 (Debian, libdeflate 1.14); the outputs are byte-identical."),
        "input": "fasta",
        "variants": [
            ("sortase", "{sortase} bgzip -@{threads} -c {input} > {out}"),
            ("bgzip-1.16", "bgzip -@{threads} -c {input} > {out}"),
        ],
        "floor": None,
        "check": "md5sum < {out}",
    },
    "bgzip-decompress": {
        "description": "Decompress the bgzipped FASTA (`bgzip -@N -dc`), sortase against htslib's bgzip 1.16.",
        "input": "fasta-gz",
        "variants": [
            ("sortase", "{sortase} bgzip -@{threads} -dc {input} > {out}"),
            ("bgzip-1.16", "bgzip -@{threads} -dc {input} > {out}"),
        ],
        "floor": None,
        "check": "md5sum < {out}",
    },
}

SORT_CHECK = "samtools view -@{threads} {out} | md5sum"
SORT_NOTE = (
    "sortase -m is per thread like samtools'; --max-memory is the total. Records must be identical "
    "(md5 of `samtools view` of every output). The floor recompresses the sorted BAM at the same "
    "level with all threads (`sortase view -b`), which is the least any BAM sort must do besides "
    "inflating its input. ")

CASES.update({
    "sort-mem": {
        "description": (
            "Coordinate sort in memory at samtools' default level (`-l 6` = libdeflate 7), "
            "-m large enough for no temporary files (3G per thread). " + SORT_NOTE + THREADS_CAVEAT),
        "input": "unsorted",
        "variants": [
            ("sortase", "{sortase} sort -l 6 -@{threads} -m 3G -T {tmp} -o {out} {input}"),
            ("samtools-1.24", "{samtools} sort -l 6 -@{threads} -m 3G -T {tmp}/st -o {out} {input}"),
            ("sambamba", "sambamba sort -l 6 -t {threads} -m 6GB --tmpdir {tmp} -o {out} {input}"),
            ("bamsort", "bamsort level=6 inputthreads={threads} outputthreads={threads} "
                        "sortthreads={threads} blockmb=6144 tmpfile={tmp}/bs I={input} O={out}"),
        ],
        "floor": ("recompress", "{sortase} view -O bam,level=6 -@{threads} -o {out} {sorted}"),
        "check": SORT_CHECK,
        # sambamba and bamsort order ties differently from samtools (not stable): timed, not compared
        "check_skip": ("sambamba", "bamsort"),
    },
    "sort-default": {
        "description": (
            "Coordinate sort in memory, each tool at its default level (sortase: libdeflate 6, "
            "samtools: zlib/libdeflate level 6). Floor: recompress at sortase's level. "
            + SORT_NOTE + THREADS_CAVEAT),
        "input": "unsorted",
        "variants": [
            ("sortase", "{sortase} sort -@{threads} -m 3G -T {tmp} -o {out} {input}"),
            ("samtools-1.24", "{samtools} sort -@{threads} -m 3G -T {tmp}/st -o {out} {input}"),
        ],
        "floor": ("recompress", "{sortase} view -O bam,level=5 -@{threads} -o {out} {sorted}"),
        "check": SORT_CHECK,
        "report": "stat -c %s {out}",
    },
    "sort-u": {
        "description": (
            "Coordinate sort in memory, uncompressed BAM output (`-u`, as piped into the next "
            "tool). Floor: `sortase view -u` of the sorted BAM (inflate + write). "
            + SORT_NOTE + THREADS_CAVEAT),
        "input": "unsorted",
        "variants": [
            ("sortase", "{sortase} sort -u -@{threads} -m 3G -T {tmp} -o {out} {input}"),
            ("samtools-1.24", "{samtools} sort -u -@{threads} -m 3G -T {tmp}/st -o {out} {input}"),
        ],
        "floor": ("view-u", "{sortase} view -u -@{threads} -o {out} {sorted}"),
        "check": SORT_CHECK,
    },
    "sort-ooc": {
        "description": (
            "Coordinate sort out of core at samtools' default level (`-l 6`), total memory 1/20 "
            "of the uncompressed data (large: 4569 MiB / 20 = 228 MiB; sortase --max-memory 228M, "
            "samtools -m 114M per thread). " + SORT_NOTE + THREADS_CAVEAT),
        "input": "unsorted",
        "variants": [
            ("sortase", "{sortase} sort -l 6 -@{threads} --max-memory {ooc_total}M -T {tmp} -o {out} {input}"),
            ("samtools-1.24", "{samtools} sort -l 6 -@{threads} -m {ooc_per_thread}M -T {tmp}/st -o {out} {input}"),
        ],
        "floor": ("recompress", "{sortase} view -O bam,level=6 -@{threads} -o {out} {sorted}"),
        "check": SORT_CHECK,
    },
    "sort-ooc-u": {
        "description": (
            "Out-of-core sort (1/20 of the data in memory, as sort-ooc) with uncompressed output. "
            + SORT_NOTE + THREADS_CAVEAT),
        "input": "unsorted",
        "variants": [
            ("sortase", "{sortase} sort -u -@{threads} --max-memory {ooc_total}M -T {tmp} -o {out} {input}"),
            ("samtools-1.24", "{samtools} sort -u -@{threads} -m {ooc_per_thread}M -T {tmp}/st -o {out} {input}"),
        ],
        "floor": ("view-u", "{sortase} view -u -@{threads} -o {out} {sorted}"),
        "check": SORT_CHECK,
    },
})


# --------------------------------------------------------------------------
# issue 3: merge of sorted BAMs
PARTS = " ".join("{data}/part%d.bam" % i for i in range(1, 5))
MERGE_PREPARE = [
    # four interleaved coordinate-sorted inputs: 30% subsamples of the sorted BAM (seeds 1-4)
    "for s in 1 2 3 4; do test -s {data}/part$s.bam || /usr/bin/samtools view -@{threads} -b "
    "--subsample 0.3 --subsample-seed $s -o {data}/part$s.bam {sorted}; done",
    # the merged records, for the floor (recompressing the output)
    "test -s {data}/parts.merged.bam || {sortase} merge -c -p -l 1 -@{threads} -o "
    "{data}/parts.merged.bam " + PARTS,
]
CASES.update({
    "merge": {
        "description": (
            "`merge -c -p` of four coordinate-sorted BAMs (30% subsamples of the sorted BAM with "
            "seeds 1-4: interleaved, 1.2x its records) at samtools' default level (`-l 6`). sortase "
            "merges key ranges on all threads; samtools merges on one thread, its -@ threads "
            "(de)compress. Floor: recompress the merged records at the same level. " + THREADS_CAVEAT),
        "input": "sorted",
        "prepare": MERGE_PREPARE,
        "variants": [
            ("sortase", "{sortase} merge -c -p -f -l 6 -@{threads} -o {out} " + PARTS),
            ("samtools-1.24", "{samtools} merge -c -p -f -l 6 -@{threads} -o {out} " + PARTS),
        ],
        "floor": ("recompress", "{sortase} view -O bam,level=6 -@{threads} -o {out} {data}/parts.merged.bam"),
        "check": SORT_CHECK,
    },
    "merge-u": {
        "description": (
            "`merge -c -p -u` (uncompressed output) of the same four inputs as `merge`. Floor: "
            "`sortase view -u` of the merged records (inflate + write). " + THREADS_CAVEAT),
        "input": "sorted",
        "prepare": MERGE_PREPARE,
        "variants": [
            ("sortase", "{sortase} merge -c -p -f -u -@{threads} -o {out} " + PARTS),
            ("samtools-1.24", "{samtools} merge -c -p -f -u -@{threads} -o {out} " + PARTS),
        ],
        "floor": ("view-u", "{sortase} view -u -@{threads} -o {out} {data}/parts.merged.bam"),
        "check": SORT_CHECK,
    },
})

# --------------------------------------------------------------------------
# issue 6: markdup on query-grouped input (samblaster's algorithm)
# --------------------------------------------------------------------------
# The peer is samblaster 0.1.26 (Debian) in its usual pipeline, SAM in and out, with Debian's
# samtools 1.16 (libdeflate) for the BAM<->SAM parts, -@{threads} on each samtools.
SAMBLASTER_PIPE = ("/usr/bin/samtools view -h -@{threads} {input} | samblaster -q 2>/dev/null | "
                   "/usr/bin/samtools view -@{threads} %s -o {out} -")
MARKDUP_CHECK = "/usr/bin/samtools view -@{threads} {out} | md5sum"
MARKDUP_NOTE = (
    "Input in aligner order (query-grouped). Records must be identical (md5 of `samtools view` "
    "of every output: flags, and everything else). ")
CASES.update({
    "markdup-query-u": {
        "description": (
            "markdup on query-grouped input, uncompressed BAM output (-u, as piped into a sort) "
            "against `samtools view -h | samblaster | samtools view -u`. Floor: `sortase view -u` "
            "of the same input (inflate + write). " + MARKDUP_NOTE),
        "input": "unsorted",
        "variants": [
            ("sortase", "{sortase} markdup -q -u -@{threads} -o {out} {input}"),
            ("samblaster", SAMBLASTER_PIPE % "-u"),
        ],
        "floor": ("view-u", "{sortase} view -u -@{threads} -o {out} {input}"),
        "check": MARKDUP_CHECK,
    },
    "markdup-query": {
        "description": (
            "markdup on query-grouped input, BAM output at samtools' default level (-l 6) "
            "against `samtools view -h | samblaster | samtools view -O bam,level=6`. Floor: recompress "
            "the input at the same level (`sortase view -O bam,level=6`). " + MARKDUP_NOTE),
        "input": "unsorted",
        "variants": [
            ("sortase", "{sortase} markdup -q -l 6 -@{threads} -o {out} {input}"),
            # (samtools view's -l is a library filter; the level goes in -O)
            ("samblaster", SAMBLASTER_PIPE % "-O bam,level=6"),
        ],
        "floor": ("recompress", "{sortase} view -O bam,level=6 -@{threads} -o {out} {input}"),
        "check": MARKDUP_CHECK,
    },
})

# --------------------------------------------------------------------------
# issue 6: markdup on coordinate-sorted input (Picard MarkDuplicates' algorithm)
# --------------------------------------------------------------------------
# Peers: Picard MarkDuplicates 2.27.5 (Debian; its default COMPRESSION_LEVEL=5, Java zlib), and the
# samtools pipeline a user runs today on a sorted BAM (Debian samtools 1.16, libdeflate): name sort,
# fixmate -m, coordinate sort, markdup, uncompressed in between, -@{threads} everywhere.
SAMTOOLS_MARKDUP_PIPE = (
    "/usr/bin/samtools sort -n -u -@{threads} -T {tmp}/n {input} | "
    "/usr/bin/samtools fixmate -m -u -@{threads} - - | "
    "/usr/bin/samtools sort -u -@{threads} -T {tmp}/c - | "
    "/usr/bin/samtools markdup -@{threads} -T {tmp}/m - {out}")
CASES.update({
    "markdup-coord": {
        "description": (
            "markdup on a coordinate-sorted BAM, BAM output at samtools' default level (-l 6), with "
            "Picard's metrics file, against Picard MarkDuplicates and against `samtools sort -n | "
            "fixmate -m | sort | markdup -@N`. sortase-u writes uncompressed BAM (the marking "
            "itself). Floor: recompress the input at the same level (`sortase view -O bam,level=6`). "
            "Check: QNAME, FLAG, RNAME, POS of every record (Picard's and sortase's must be equal; "
            "samtools markdup is a different algorithm and is timed, not compared)."),
        "input": "sorted",
        "variants": [
            ("sortase", "{sortase} markdup -l 6 -@{threads} --metrics {out}.metrics -o {out} {input}"),
            ("sortase-u", "{sortase} markdup -u -@{threads} --metrics {out}.metrics -o {out} {input}"),
            ("picard", "PicardCommandLine MarkDuplicates I={input} O={out} M={out}.metrics "
                       "VALIDATION_STRINGENCY=SILENT TMP_DIR={tmp} 2>/dev/null"),
            ("samtools-pipeline", SAMTOOLS_MARKDUP_PIPE),
        ],
        "floor": ("recompress", "{sortase} view -O bam,level=6 -@{threads} -o {out} {input}"),
        "check": "/usr/bin/samtools view -@{threads} {out} | cut -f1-4 | md5sum",
        "check_skip": ("samtools-pipeline",),
    },
})

CASES.update({
    "fq2bam": {
        "description": (
            "FASTQ pairs to a sorted, duplicate-marked, indexed BAM (issue 20): `sortase fq2bam` "
            "(minimap2 2.29 as a library, samblaster's marking, sort, on-the-fly CSI) against the "
            "pipelines users run today with the SAME minimap2 version (scripts/build-minimap2-cli.sh): "
            "`minimap2 | samblaster | samtools sort --write-index`, and `minimap2 | bamsormadup` "
            "(Debian biobambam2: `apt-get install biobambam2`; sorts and marks in one streamed pass); "
            "`minimap2-alone` is the aligner writing SAM to /dev/null. Floor: recompress a sorted BAM "
            "of the same reads at sortase's default level (generate.py's SIZE.sorted.bam, which also "
            "holds -N 1 secondaries and MD/RG tags, so slightly more than fq2bam writes). Goals of the "
            "issue: sortase >= 1.5x faster than the samblaster pipeline, faster than bamsormadup, and "
            "<= 1.1x (minimap2-alone + floor). Needs `generate.py --size SIZE --keep-fastq`. Check: "
            "every record (`samtools view`, no header) of sortase and the samblaster pipeline equal, "
            "duplicate flags included (sortase-picard and bamsormadup mark with Picard's rules: timed, not "
            "compared)."),
        "input": "fastq",
        "variants": [
            ("sortase", "{sortase} fq2bam -@{threads} -x {mmi} --write-index -o {out} {input} {r2}"),
            ("sortase-picard",
             "{sortase} fq2bam -@{threads} --markdup picard -x {mmi} --write-index -o {out} {input} {r2}"),
            ("mm2-samblaster-sort",
             "{minimap2} -t{threads} -ax sr {mmi} {input} {r2} 2>/dev/null | samblaster -q "
             "--ignoreUnmated | {samtools} sort -@{threads} --write-index -T {tmp}/sort -o {out} -"),
            ("mm2-bamsormadup",
             "{minimap2} -t{threads} -ax sr {mmi} {input} {r2} 2>/dev/null | bamsormadup "
             "inputformat=sam threads={threads} tmpfile={tmp}/bsm indexfilename={out}.bai > {out}"),
            ("minimap2-alone", "{minimap2} -t{threads} -ax sr {mmi} {input} {r2} 2>/dev/null > /dev/null"),
        ],
        "floor": ("recompress", "{sortase} view -b -@{threads} -o {out} {sorted}"),
        "check": "/usr/bin/samtools view {out} | md5sum",
        "check_skip": ("sortase-picard", "mm2-bamsormadup", "minimap2-alone"),
    },
})

CASES.update({
    "agd-import-fastq": {
        "description": (
            "FASTQ.gz pairs (plain gzip, as sequencers write them) into unaligned records (issue 19): "
            "`sortase agd import R1.fq.gz R2.fq.gz -o DIR` (an AGD dataset: Parquet column chunks, "
            "zstd level 3) against `samtools import -1 R1.fq.gz -2 R2.fq.gz -o x.bam` (BAM, level "
            "6). Both inflate the gzip input on one thread per file (zlib-compatible single "
            "streams cannot be split); sortase encodes chunks on all threads. Input: "
            "bench/generate.py --keep-fastq's R1.fq/R2.fq, gzipped once into the scratch directory "
            "(untimed). Check: the records (`agd export -O sam` / `samtools view`, @PG lines "
            "dropped: samtools import adds one; @CO too: Debian's 1.16 ends its `Reverse with` "
            "comment with a space) are identical."),
        "input": "fastq-gz",
        "prepare": [
            "test -s {r1gz} || gzip -c {input} > {r1gz}",
            "test -s {r2gz} || gzip -c {r2} > {r2gz}",
        ],
        "variants": [
            ("sortase", "{sortase} agd import -@{threads} -o {out} {r1gz} {r2gz}"),
            ("samtools-1.24", "{samtools} import -@{threads} -1 {r1gz} -2 {r2gz} -o {out}"),
        ],
        "floor": ("gzip-d", "gzip -dc {r1gz} {r2gz} > /dev/null"),
        "check": ("if [ -d {out} ]; then {sortase} agd export -O sam {out}; "
                  "else /usr/bin/samtools view -h --no-PG {out}; fi | grep -v '^@PG\\|^@CO' | md5sum"),
    },
})

CRAM_PREPARE = [
    # the sorted BAM as CRAM 3.1 (samtools 1.24's default), written by the peer itself
    "test -s {cram} || {samtools} view -C -T {ref} -@{threads} -o {cram} {sorted}",
    "test -s {cram}.crai || {samtools} index {cram}",
]
CRAM_CAVEAT = ("CRAM 3.1 as samtools 1.24 writes it by default (`view -C -T ref.fa` of the sorted "
               "BAM). sortase decodes and encodes CRAM with htslib 1.19.1's codec (crates/cram); "
               "the peer is htslib 1.24's. ")
CASES.update({
    "cram-view-count": {
        "description": "Count the records of a CRAM (`view -c`): " + CRAM_CAVEAT
                       + "Both decode only the fields counting needs.",
        "input": "sorted", "prepare": CRAM_PREPARE,
        "variants": [
            ("sortase", "{sortase} view -c -@{threads} -T {ref} {cram}"),
            ("samtools-1.24", "{samtools} view -c -@{threads} -T {ref} {cram}"),
        ],
        "floor": None, "check": "stdout",
    },
    "cram-flagstat": {
        "description": "`flagstat` of a CRAM: " + CRAM_CAVEAT,
        "input": "sorted", "prepare": CRAM_PREPARE,
        "variants": [
            ("sortase", "{sortase} flagstat -@{threads} {cram}"),
            ("samtools-1.24", "{samtools} flagstat -@{threads} {cram}"),
        ],
        "floor": None, "check": "stdout",
    },
    "cram-idxstats": {
        "description": "`idxstats` of a CRAM (samtools counts the records: it reads no `.crai` for "
                       "idxstats): " + CRAM_CAVEAT,
        "input": "sorted", "prepare": CRAM_PREPARE,
        "variants": [
            ("sortase", "{sortase} idxstats -@{threads} {cram}"),
            ("samtools-1.24", "{samtools} idxstats -@{threads} {cram}"),
        ],
        "floor": None, "check": "stdout",
    },
    "cram-encode": {
        "description": "BAM -> CRAM 3.1 (`view -C -T ref.fa` of the sorted BAM): " + CRAM_CAVEAT
                       + "Check: the decoded records (`samtools view`) equal.",
        "input": "sorted", "prepare": CRAM_PREPARE,
        "variants": [
            ("sortase", "{sortase} view -C -T {ref} -@{threads} -o {out} {input}"),
            ("samtools-1.24", "{samtools} view -C -T {ref} -@{threads} -o {out} {input}"),
        ],
        "floor": None,
        "check": "/usr/bin/samtools view -T {ref} {out} | md5sum",
    },
    "cram-decode": {
        "description": "CRAM 3.1 -> BAM (`view -b` at the default level): " + CRAM_CAVEAT
                       + "Check: records equal.",
        "input": "sorted", "prepare": CRAM_PREPARE,
        "variants": [
            ("sortase", "{sortase} view -b -T {ref} -@{threads} -o {out} {cram}"),
            ("samtools-1.24", "{samtools} view -b -T {ref} -@{threads} -o {out} {cram}"),
        ],
        "floor": None,
        "check": "/usr/bin/samtools view {out} | md5sum",
    },
    "cram-sort": {
        "description": "Coordinate sort of the unsorted BAM into CRAM 3.1 (`sort -O cram "
                       "--reference ref.fa`), in memory: " + CRAM_CAVEAT + "Check: records equal.",
        "input": "unsorted", "prepare": CRAM_PREPARE,
        "variants": [
            ("sortase", "{sortase} sort -O cram --reference {ref} -@{threads} -m 3G -T {tmp} "
                        "-o {out} {input}"),
            ("samtools-1.24", "{samtools} sort -O cram --reference {ref} -@{threads} -m 3G "
                              "-T {tmp}/st -o {out} {input}"),
        ],
        "floor": None,
        "check": "/usr/bin/samtools view -T {ref} {out} | md5sum",
    },
})

# --------------------------------------------------------------------------
# issue 33: Rust peers installed by bench/setup-peer.sh --tools into their own root
# (SORTASE_PEER_ROOT/bin): mako (fg-mako, the fgumi sort engine) and dupblaster
# --------------------------------------------------------------------------
MAKO_NOTE = (
    "mako (fg-mako, `cargo install`, bench/setup-peer.sh --tools) with the same number of threads, "
    "its -m per thread (sortase's --max-memory is the total: -m 3G x threads) and its "
    "--compression-level the libdeflate level sortase's -l maps to (samtools' -l 6 = libdeflate 7; "
    "mako and dupblaster take libdeflate's 0-12 scale). Output sizes are reported. ")
CASES.update({
    "sort-mako": {
        "description": (
            "Coordinate sort in memory at samtools' default level (sortase -l 6) against mako "
            "`--order coordinate`. " + MAKO_NOTE + "Records must be identical (md5 of `samtools "
            "view` of every output)."),
        "input": "unsorted",
        "variants": [
            ("sortase", "{sortase} sort -l 6 -@{threads} --max-memory {mem_total}M -T {tmp} -o {out} {input}"),
            ("mako", "{mako} -i {input} -o {out} --order coordinate --threads {threads} "
                     "--max-memory {mem_per_thread}M --compression-level 7 --tmp-dir {tmp}"),
            ("samtools-1.24", "{samtools} sort -l 6 -@{threads} -m {mem_per_thread}M -T {tmp}/st -o {out} {input}"),
        ],
        "floor": ("recompress", "{sortase} view -O bam,level=6 -@{threads} -o {out} {sorted}"),
        "check": SORT_CHECK,
        "report": "stat -c %s {out}",
    },
    "sort-mako-ooc": {
        "description": (
            "Coordinate sort out of core at -l 6 against mako: memory per thread --ooc-mem-per-thread "
            "(default 40 MiB: ~1/20 of the m4 data's 1.4 GB of records over 2 threads; sortase's "
            "--max-memory is the total). " + MAKO_NOTE + "Records must be identical (md5 of `samtools view`)."),
        "input": "unsorted",
        "variants": [
            ("sortase", "{sortase} sort -l 6 -@{threads} --max-memory {ooc_total}M -T {tmp} -o {out} {input}"),
            ("mako", "{mako} -i {input} -o {out} --order coordinate --threads {threads} "
                     "--max-memory {ooc_per_thread}M --compression-level 7 --tmp-dir {tmp}"),
            ("samtools-1.24", "{samtools} sort -l 6 -@{threads} -m {ooc_per_thread}M -T {tmp}/st -o {out} {input}"),
        ],
        "floor": ("recompress", "{sortase} view -O bam,level=6 -@{threads} -o {out} {sorted}"),
        "check": SORT_CHECK,
        "report": "stat -c %s {out}",
    },
    "sort-mako-l1": {
        "description": (
            "Coordinate sort in memory at the fastest level (sortase -l 1 deflates with ISA-L's "
            "level 1, files ~3% larger than libdeflate 1's, crates/bgzf `deflate`; mako "
            "--compression-level 1, its default, is libdeflate 1: compare the output sizes in the "
            "report column) against mako. " + MAKO_NOTE + "Records must be identical (md5 of "
            "`samtools view`)."),
        "input": "unsorted",
        "variants": [
            ("sortase", "{sortase} sort -l 1 -@{threads} --max-memory {mem_total}M -T {tmp} -o {out} {input}"),
            ("mako", "{mako} -i {input} -o {out} --order coordinate --threads {threads} "
                     "--max-memory {mem_per_thread}M --compression-level 1 --tmp-dir {tmp}"),
            ("samtools-1.24", "{samtools} sort -l 1 -@{threads} -m {mem_per_thread}M -T {tmp}/st -o {out} {input}"),
        ],
        "floor": ("recompress-l1", "{sortase} view -O bam,level=1 -@{threads} -o {out} {sorted}"),
        "check": SORT_CHECK,
        "report": "stat -c %s {out}",
    },
    "sort-n-mako": {
        "description": (
            "Name sort in memory (sortase -n: samtools' natural order) at -l 6 against mako "
            "`--order queryname::natural`. " + MAKO_NOTE + "Records must be identical (md5 of "
            "`samtools view`)."),
        "input": "unsorted",
        "variants": [
            ("sortase", "{sortase} sort -n -l 6 -@{threads} --max-memory {mem_total}M -T {tmp} -o {out} {input}"),
            ("mako", "{mako} -i {input} -o {out} --order queryname::natural --threads {threads} "
                     "--max-memory {mem_per_thread}M --compression-level 7 --tmp-dir {tmp}"),
            ("samtools-1.24", "{samtools} sort -n -l 6 -@{threads} -m {mem_per_thread}M -T {tmp}/st -o {out} {input}"),
        ],
        "floor": None,
        "check": SORT_CHECK,
        "report": "stat -c %s {out}",
    },
    "sort-tc-mako": {
        "description": (
            "Template-coordinate sort in memory at -l 6 (samtools `sort --template-coordinate`, "
            "which needs MC tags: the input is the aligner-order BAM's primary records through "
            "`samtools fixmate -m`, made once, untimed) against mako `--order template-coordinate`. "
            + MAKO_NOTE + "sortase's records must equal samtools' (QNAME, FLAG, RNAME, POS of every "
            "record, line by line); mako's order is its own where samtools' keys tie, so its "
            "differing records are counted, not failed."),
        "input": "unsorted",
        "prepare": ["test -s {mc} || ({samtools} view -u -F 0x900 {input} | "
                    "{samtools} fixmate -m -@{threads} - {mc})"],
        "variants": [
            ("sortase", "{sortase} sort --template-coordinate -l 6 -@{threads} --max-memory {mem_total}M "
                        "-T {tmp} -o {out} {mc}"),
            ("mako", "{mako} -i {mc} -o {out} --order template-coordinate --threads {threads} "
                     "--max-memory {mem_per_thread}M --compression-level 7 --tmp-dir {tmp}"),
            ("samtools-1.24", "{samtools} sort --template-coordinate -l 6 -@{threads} "
                              "-m {mem_per_thread}M -T {tmp}/st -o {out} {mc}"),
        ],
        "floor": None,
        "check": "samtools view -@{threads} {out} | cut -f1-4",
        "check_diff": True,
        "differ_ok": ("mako",),
        "report": "stat -c %s {out}",
    },
})

DUPBLASTER = ("{dupblaster} -i {input} -o {out} --metrics-prefix {tmp}/m -q "
              "--single-end-strategy samblaster-legacy --library-aware off "
              "--sequencing-duplicate-detection off")
DUPBLASTER_NOTE = (
    "dupblaster (`cargo install`, bench/setup-peer.sh --tools) with samblaster's keying of "
    "single-end reads (`--single-end-strategy samblaster-legacy`), one pool for all libraries "
    "(`--library-aware off`, as samblaster and sortase) and no optical classification (sortase's "
    "samblaster mode does none; dupblaster: 5-10% less CPU, same output); it has no thread option. "
    "Check: QNAME, FLAG, RNAME, POS of every record against sortase's, the differing records "
    "counted (0 expected). ")
CASES.update({
    "markdup-dupblaster-u": {
        "description": (
            "markdup on query-grouped input, uncompressed BAM out (sortase -u; dupblaster's "
            "default) against dupblaster. " + DUPBLASTER_NOTE + "Input in aligner order (query-grouped)."),
        "input": "unsorted",
        "variants": [
            ("sortase", "{sortase} markdup -q -u -@{threads} -o {out} {input}"),
            ("dupblaster", DUPBLASTER),
        ],
        "floor": ("view-u", "{sortase} view -u -@{threads} -o {out} {input}"),
        "check": "/usr/bin/samtools view -@{threads} {out} | cut -f1-4",
        "check_diff": True,
    },
    "markdup-dupblaster": {
        "description": (
            "markdup on query-grouped input, BAM at samtools' default level (sortase -l 6 = "
            "libdeflate 7; dupblaster -l 7) against dupblaster. " + DUPBLASTER_NOTE),
        "input": "unsorted",
        "variants": [
            ("sortase", "{sortase} markdup -q -l 6 -@{threads} -o {out} {input}"),
            ("dupblaster", DUPBLASTER + " -l 7"),
        ],
        "floor": ("recompress", "{sortase} view -O bam,level=6 -@{threads} -o {out} {input}"),
        "check": "/usr/bin/samtools view -@{threads} {out} | cut -f1-4",
        "check_diff": True,
        "report": "stat -c %s {out}",
    },
})

# The columns of bench/results.csv (also written by python_read.py --record).
CSV_COLUMNS = ["date_utc", "commit", "case", "input", "input_bytes", "records", "threads",
               "label", "role", "runs", "wall_median_s", "wall_min_s", "wall_max_s",
               "cpu_pct_median", "cpu_s_median", "rss_max_mib", "ratio_vs_sortase",
               "sortase_over_floor", "check", "command"]

# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------

SHELL_CHARS = re.compile(r"[|&;<>()$`*?~{}\[\]\n]")


def needs_shell(cmd):
    return bool(SHELL_CHARS.search(cmd))


def render(template, fields):
    return template.format(**fields)


def parse_time_v(path):
    """Parse GNU time -v output."""
    out = {}
    with open(path, errors="replace") as f:
        for line in f:
            line = line.strip()
            if ": " not in line:
                continue
            val = line.rsplit(": ", 1)[1].strip()
            if line.startswith("User time"):
                out["user"] = float(val)
            elif line.startswith("System time"):
                out["sys"] = float(val)
            elif line.startswith("Maximum resident set size"):
                out["rss_kb"] = int(val)
            elif line.startswith("Exit status"):
                out["exit"] = int(val)
            elif line.startswith("Percent of CPU"):
                out["cpu_pct_time"] = val
            elif line.startswith("Command terminated by signal"):
                out["signal"] = line
    return out


def run_timed(cmd, cwd, stdout_path, stderr_path, time_path):
    """Run one command under /usr/bin/time -v; return a result dict."""
    if needs_shell(cmd):
        argv = ["bash", "-o", "pipefail", "-c", cmd]
    else:
        argv = shlex.split(cmd)
    full = [TIME_BIN, "-v", "-o", time_path] + argv
    with open(stdout_path, "wb") as so, open(stderr_path, "wb") as se:
        t0 = time.perf_counter()
        p = subprocess.run(full, cwd=cwd, stdout=so, stderr=se, stdin=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
    res = parse_time_v(time_path) if os.path.exists(time_path) else {}
    res["wall"] = wall
    res["rc"] = p.returncode
    res.setdefault("user", float("nan"))
    res.setdefault("sys", float("nan"))
    res.setdefault("rss_kb", 0)
    res["cpu"] = res["user"] + res["sys"]
    res["cpu_pct"] = 100.0 * res["cpu"] / wall if wall > 0 else float("nan")
    return res


def tail(path, n=20):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def git_commit():
    try:
        h = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        if h.returncode != 0 or not h.stdout.strip():
            return "none"
        commit = h.stdout.strip()
        d = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        if d.returncode == 0 and d.stdout.strip():
            commit += " (+uncommitted changes)"
        return commit
    except OSError:
        return "none"


def machine_info():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    ram = "unknown"
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    ram = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                    break
    except OSError:
        pass
    try:
        nproc = len(os.sched_getaffinity(0))
    except AttributeError:
        nproc = os.cpu_count()
    return {"nproc": nproc, "cpu": cpu, "ram": ram, "kernel": os.uname().release}


def first_line(cmd):
    try:
        p = subprocess.run(cmd, shell=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, errors="replace", timeout=60)
        for line in p.stdout.splitlines():
            if line.strip():
                return line.strip()
    except Exception:
        pass
    return "unknown"


def bgzf_uncompressed_bytes(path):
    """Sum of the ISIZE fields of a BGZF file's blocks (the uncompressed size), read from the block
    headers alone (BSIZE at byte 16 of each header, ISIZE in the last 4 bytes of each block)."""
    total = 0
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        pos = 0
        while pos + 18 <= size:
            f.seek(pos)
            head = f.read(18)
            if head[:4] != b"\x1f\x8b\x08\x04":
                raise ValueError(f"{path}: not BGZF at byte {pos}")
            bsize = int.from_bytes(head[16:18], "little") + 1
            f.seek(pos + bsize - 4)
            total += int.from_bytes(f.read(4), "little")
            pos += bsize
    return total


def human_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024.0


def fmt_ratio(x):
    return "n/a" if x is None else f"{x:.2f}x"


# --------------------------------------------------------------------------
# main work
# --------------------------------------------------------------------------

def summarise(label, role, cmd, results):
    walls = [r["wall"] for r in results]
    return {
        "label": label, "role": role, "command": cmd, "runs": len(results),
        "wall_median": statistics.median(walls), "wall_min": min(walls), "wall_max": max(walls),
        "cpu_pct_median": statistics.median(r["cpu_pct"] for r in results),
        "cpu_s_median": statistics.median(r["cpu"] for r in results),
        "rss_max_mb": max(r["rss_kb"] for r in results) / 1024.0,
        "walls": walls,
    }


def check_diff(case, runs_meta, fields_base, scratch):
    """Each variant's check output (one line per record) against sortase's, line by line: the
    number of differing lines (ok when none; a different number of lines is a failure)."""
    outs = {}
    for label, meta in runs_meta.items():
        if meta["role"] == "floor" or label in case.get("check_skip", ()):
            continue
        path = os.path.join(meta["dir"], "check.txt")
        cmd = render(case["check"], dict(fields_base, out=meta["out"], tmp=meta["tmp"]))
        p = subprocess.run(["bash", "-o", "pipefail", "-c", f"{cmd} > {shlex.quote(path)}"],
                           cwd=scratch, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            return False, f"check command failed for {label}: {cmd}\n{p.stderr.strip()}"
        outs[label] = path
    base_label = next(iter(outs))
    parts, ok = [], True
    for label, path in outs.items():
        if label == base_label:
            continue
        lines = differ = 0
        example = None
        with open(outs[base_label], "rb") as a, open(path, "rb") as b:
            for x, y in itertools.zip_longest(a, b):
                lines += 1
                if x != y:
                    differ += 1
                    if example is None:
                        example = (x or b"<none>").decode(errors="replace").strip(), \
                            (y or b"<none>").decode(errors="replace").strip()
        # a peer whose order is its own (mako's template-coordinate ties) is counted, not failed
        ok = ok and (differ == 0 or label in case.get("differ_ok", ()))
        text = f"{label}: {differ} of {lines} records differ"
        if example:
            text += f" (first: sortase `{example[0]}` vs `{example[1]}`)"
        parts.append(text)
    shown = "; ".join(parts)
    report = case.get("report")
    if report:
        sizes = []
        for label, meta in runs_meta.items():
            if meta["role"] == "floor":
                continue
            cmd = render(report, dict(fields_base, out=meta["out"], tmp=meta["tmp"]))
            p = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=scratch,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            sizes.append(f"{label}: {p.stdout.strip()}")
        shown += f"; {report}: " + ", ".join(sizes)
    desc = f"{case['check']}, line by line against sortase"
    return ok, (f"outputs agree ({desc}) -- {shown}" if ok else f"OUTPUTS DIFFER ({desc}) -- {shown}")


def run_check(case, runs_meta, fields_base, scratch):
    """Return (ok, text)."""
    check = case.get("check")
    if not check:
        return None, "no check defined"
    if case.get("check_diff"):
        return check_diff(case, runs_meta, fields_base, scratch)
    digests = {}
    for label, meta in runs_meta.items():
        if meta["role"] == "floor" or label in case.get("check_skip", ()):
            continue
        if check == "stdout":
            with open(meta["stdout"], "rb") as f:
                digests[label] = f.read().decode(errors="replace").strip()
        else:
            cmd = render(check, dict(fields_base, out=meta["out"], tmp=meta["tmp"]))
            p = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=scratch,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if p.returncode != 0:
                return False, f"check command failed for {label}: {cmd}\n{p.stderr.strip()}"
            digests[label] = p.stdout.strip()
    vals = set(digests.values())
    desc = check if check != "stdout" else "stdout identical"
    shown = "; ".join(f"{k}: `{v[:60]}`" for k, v in digests.items())
    report = case.get("report")
    if report:
        # shown, not compared (e.g. output sizes at different compression levels)
        parts = []
        for label, meta in runs_meta.items():
            if meta["role"] == "floor":
                continue
            cmd = render(report, dict(fields_base, out=meta["out"], tmp=meta["tmp"]))
            p = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=scratch,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            parts.append(f"{label}: {p.stdout.strip()}")
        shown += f"; {report}: " + ", ".join(parts)
    if len(vals) == 1:
        return True, f"outputs agree ({desc}) -- {shown}"
    return False, f"OUTPUTS DIFFER ({desc}) -- {shown}"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("case", nargs="?", help="case name (see --list)")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--data", default="/work/bench-data", help="data dir of bench/generate.py")
    ap.add_argument("--size", default="small", help="data size: tiny|small|large (default small)")
    ap.add_argument("--input", help="explicit input file (overrides --data/--size)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pairs", type=int, default=3, help="alternation rounds (default 3)")
    ap.add_argument("--sortase", default=DEFAULT_SORTASE, help="sortase command")
    ap.add_argument("--samtools", default=DEFAULT_SAMTOOLS, help="samtools command")
    ap.add_argument("--debian-samtools", nargs="?", const="/usr/bin/samtools", default=None,
                    metavar="PATH",
                    help="add a third variant: the samtools-1.24 command line run with this "
                         "samtools instead (default /usr/bin/samtools = Debian 1.16, built "
                         "with libdeflate)")
    ap.add_argument("--peer-root", default=PEER_ROOT, metavar="DIR",
                    help="where bench/setup-peer.sh --tools installed mako and dupblaster "
                         "(DIR/bin; default $SORTASE_PEER_ROOT or target/bench-peers)")
    ap.add_argument("--mem-per-thread", type=int, default=3072, metavar="MIB",
                    help="sort-mako cases: memory per thread in MiB (mako -m; sortase gets "
                         "the total, times --threads) [3072]")
    ap.add_argument("--ooc-mem-per-thread", type=int, default=40, metavar="MIB",
                    help="sort-mako-ooc: memory per thread in MiB (sortase gets the total) [40]")
    ap.add_argument("--scratch", help="scratch dir for outputs (default: DATA/compare-tmp)")
    ap.add_argument("--no-record", action="store_true",
                    help="do not append to bench/RESULTS.md / results.csv")
    ap.add_argument("--no-check", action="store_true", help="skip the output check")
    ap.add_argument("--note", default="", help="free text added to the RESULTS.md section")
    ap.add_argument("--no-floor", action="store_true", help="do not run the case's floor variant")
    ap.add_argument("--json", default=None, metavar="PATH",
                    help="also write the run's summary (every variant, the floor, the check, the "
                         "sortase stderr of the first round) as JSON to PATH (bench/report.py reads it)")
    ap.add_argument("--results-md", default=RESULTS_MD, metavar="PATH",
                    help="markdown file the run's section is appended to [bench/RESULTS.md]")
    ap.add_argument("--results-csv", default=RESULTS_CSV, metavar="PATH",
                    help="CSV file the run's rows are appended to [bench/results.csv]")
    ap.add_argument("--only", default=None, metavar="LABELS",
                    help="comma-separated variant labels to run (sortase and the floor always run)")
    ap.add_argument("--regress", default=None, metavar="BASE",
                    help="time the regression jobs with BASE's sortase against this checkout's "
                         "(bench/regress.py; --pairs rounds)")
    args = ap.parse_args()

    if args.regress:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import regress
        return regress.main([args.regress, "--data", args.data, "--size", args.size,
                             "--threads", str(args.threads), "--rounds", str(max(args.pairs, 3)),
                             "--new", args.sortase])
    if args.list or not args.case:
        for name, c in CASES.items():
            print(f"{name}: {c['description']}")
            for label, tpl in c["variants"]:
                print(f"    {label}: {tpl}")
            if c.get("floor"):
                print(f"    floor {c['floor'][0]}: {c['floor'][1]}")
        return 0 if args.list else 2
    if args.case not in CASES:
        sys.exit(f"unknown case {args.case!r}; known: {', '.join(CASES)}")
    case = CASES[args.case]

    # input + metadata
    meta_json = None
    if args.input:
        inp = os.path.abspath(args.input)
    elif case.get("input") in ("fastq", "fastq-gz"):
        # bench/generate.py --keep-fastq's read pairs (aligner input)
        inp = os.path.join(os.path.abspath(args.data), f"work-{args.size}", "R1.fq")
    elif case.get("input", "").startswith("fasta"):
        # bench/generate_fasta.py's data; --size does not apply
        name = "proteins.fa.gz" if case["input"] == "fasta-gz" else "proteins.fa"
        inp = os.path.join(os.path.abspath(args.data), name)
    else:
        suffix = ".sorted.bam" if case.get("input") == "sorted" else ".bam"
        inp = os.path.join(os.path.abspath(args.data), args.size + suffix)
        jp = os.path.join(os.path.abspath(args.data), args.size + ".json")
        if os.path.exists(jp):
            with open(jp) as f:
                meta_json = json.load(f)
    if not os.path.exists(inp):
        sys.exit(f"input not found: {inp} (generate it with bench/generate.py --size {args.size})")
    in_bytes = os.path.getsize(inp)
    records = meta_json.get("records") if meta_json else None

    sortase_exe = shlex.split(args.sortase)[0]
    if shutil.which(sortase_exe) is None:
        sys.exit(f"sortase not found/executable: {sortase_exe} (build it, or pass --sortase)")
    if not os.path.exists(TIME_BIN):
        sys.exit(f"{TIME_BIN} (GNU time) is required")

    scratch_root = os.path.abspath(args.scratch or os.path.join(os.path.dirname(inp), "compare-tmp"))
    os.makedirs(scratch_root, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix=f"{args.case}.", dir=scratch_root)

    sorted_inp = os.path.join(os.path.dirname(inp), os.path.basename(inp).replace(".bam", ".sorted.bam")) \
        if not inp.endswith(".sorted.bam") else inp
    fields_base = {"input": shlex.quote(inp), "threads": args.threads, "sorted": shlex.quote(sorted_inp),
                   "sortase": args.sortase, "samtools": args.samtools,
                   "data": shlex.quote(os.path.dirname(inp))}
    fields_base.update({name: shlex.quote(peer_binary(args.peer_root, name))
                        for name in ("mako", "dupblaster")})
    fields_base.update({"mem_per_thread": args.mem_per_thread,
                        "mem_total": args.mem_per_thread * args.threads,
                        "ooc_per_thread": args.ooc_mem_per_thread,
                        "ooc_total": args.ooc_mem_per_thread * args.threads})
    fields_base.update({"ref": shlex.quote(os.path.join(os.path.abspath(args.data), "ref.fa")),
                        "cram": shlex.quote(sorted_inp[:-len(".bam")] + ".cram"),
                        # the primary records with MC tags (samtools fixmate -m) for template-coordinate
                        "mc": shlex.quote(inp[:-len(".bam")] + ".mc.bam")})
    if inp.endswith(".bam"):
        # out-of-core sorts get 1/20 of the uncompressed data (large: 4569 MiB -> 228M in total,
        # 114M per thread for samtools, whose -m is per thread)
        total = max(8, bgzf_uncompressed_bytes(inp) // (20 << 20))
        fields_base.update({"ooc_total": total, "ooc_per_thread": max(4, total // args.threads)})
    if case.get("input") == "fastq":
        data = os.path.abspath(args.data)
        minimap2 = os.environ.get("SORTASE_MINIMAP2") or subprocess.run(
            ["bash", os.path.join(REPO, "scripts", "build-minimap2-cli.sh")], check=True,
            stdout=subprocess.PIPE, text=True).stdout.strip().splitlines()[-1]
        fields_base.update({
            "r2": shlex.quote(os.path.join(os.path.dirname(inp), "R2.fq")),
            "mmi": shlex.quote(os.path.join(data, "ref.sr.mmi")),
            "sorted": shlex.quote(os.path.join(data, args.size + ".sorted.bam")),
            "minimap2": shlex.quote(minimap2),
        })
    if case.get("input") == "fastq-gz":
        # the pairs gzipped once into the scratch root (by the case's prepare commands)
        fields_base.update({
            "r2": shlex.quote(os.path.join(os.path.dirname(inp), "R2.fq")),
            "r1gz": shlex.quote(os.path.join(scratch_root, f"{args.size}.R1.fq.gz")),
            "r2gz": shlex.quote(os.path.join(scratch_root, f"{args.size}.R2.fq.gz")),
        })
    for tpl in case.get("prepare", []):
        # untimed set-up (indexes the variants expect to exist)
        cmd = render(tpl, fields_base)
        print(f"prepare: {cmd}")
        subprocess.run(cmd, shell=True, check=True, executable="/bin/bash")
    plan = [(label, "variant", tpl) for label, tpl in case["variants"]]
    if args.debian_samtools:
        ver = first_line(f"{shlex.quote(args.debian_samtools)} --version").split()
        dlabel = "samtools-" + (ver[1] if len(ver) > 1 else "other")
        if dlabel == "samtools-1.24":
            dlabel += "-native"
        # cases whose variants do not run samtools (markdup: samblaster, Picard) get no Debian column
        tpl = next((t for _, t in case["variants"] if "{samtools}" in t), None)
        if tpl:
            plan.append((dlabel, "variant",
                         tpl.replace("{samtools}", shlex.quote(args.debian_samtools))))
    if case.get("floor") and not args.no_floor:
        plan.append((case["floor"][0], "floor", case["floor"][1]))
    if args.only:
        keep = set(args.only.split(",")) | {"sortase"}
        plan = [x for x in plan if x[0] in keep or x[1] == "floor"]
    runs_meta = {}
    for label, role, tpl in plan:
        vdir = os.path.join(scratch, label)
        os.makedirs(os.path.join(vdir, "tmp"), exist_ok=True)
        out = os.path.join(vdir, "out.bam")
        fields = dict(fields_base, out=shlex.quote(out), tmp=shlex.quote(os.path.join(vdir, "tmp")))
        runs_meta[label] = {"role": role, "cmd": render(tpl, fields), "dir": vdir,
                            "out": shlex.quote(out), "tmp": shlex.quote(os.path.join(vdir, "tmp")),
                            "stdout": os.path.join(vdir, "stdout"), "results": []}

    started = datetime.datetime.now(datetime.timezone.utc)
    load_before = os.getloadavg()
    print(f"case {args.case}: input {inp} ({human_bytes(in_bytes)}"
          + (f", {records:,} records" if records else "") + f"), threads {args.threads}, "
          f"{args.pairs} rounds; load average {load_before[0]:.2f}")
    for label, m in runs_meta.items():
        print(f"  {label:>14}: {m['cmd']}")

    # fixed start-up cost of the samtools command (the pysam wrapper starts a
    # Python interpreter and loads the library): reported, not subtracted
    startup = None
    if any("{samtools}" in tpl for _, _, tpl in plan):
        ts = []
        for _ in range(3):
            t0 = time.perf_counter()
            subprocess.run(shlex.split(args.samtools) + ["version"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            ts.append(time.perf_counter() - t0)
        startup = statistics.median(ts)
        print(f"samtools start-up (`{args.samtools} version`, median of 3): {startup:.3f} s")

    # warm-up read of the input
    t0 = time.perf_counter()
    subprocess.run(["cat", inp], stdout=subprocess.DEVNULL, check=True)
    print(f"warm-up read: {time.perf_counter() - t0:.2f} s")

    failed = None
    try:
        for rnd in range(1, args.pairs + 1):
            for label, m in runs_meta.items():
                n = len(m["results"])
                # A dataset output (agd import) is a directory the next round may not overwrite.
                out_dir = os.path.join(m["dir"], "out.bam")
                if os.path.isdir(out_dir):
                    shutil.rmtree(out_dir)
                subprocess.run(["sync"], check=True)
                r = run_timed(m["cmd"], m["dir"], m["stdout"], os.path.join(m["dir"], f"stderr.{n}"),
                              os.path.join(m["dir"], f"time.{n}"))
                m["results"].append(r)
                print(f"  round {rnd} {label:>14}: wall {r['wall']:7.2f} s  cpu {r['cpu_pct']:5.0f} %  "
                      f"rss {r['rss_kb'] / 1024:7.1f} MB  rc {r['rc']}", flush=True)
                if r["rc"] != 0:
                    failed = (label, m["cmd"], tail(os.path.join(m["dir"], f"stderr.{n}")))
                    raise RuntimeError
        ok, check_text = (None, "skipped (--no-check)") if args.no_check else \
            run_check(case, runs_meta, fields_base, scratch)
    except RuntimeError:
        ok, check_text = None, ""
    finally:
        finished = datetime.datetime.now(datetime.timezone.utc)
        load_after = os.getloadavg()

    if failed:
        label, cmd, err = failed
        print(f"\nFAILED: {label} exited non-zero\n  {cmd}\n{err}", file=sys.stderr)
        print(f"(scratch kept: {scratch})", file=sys.stderr)
        return 1

    first_stderr = {}
    for label, m in runs_meta.items():
        try:
            with open(os.path.join(m["dir"], "stderr.0"), errors="replace") as f:
                first_stderr[label] = f.read()[-20000:]
        except OSError:
            first_stderr[label] = ""
    shutil.rmtree(scratch, ignore_errors=True)
    try:
        os.rmdir(scratch_root)  # only if empty
    except OSError:
        pass

    sums = [summarise(label, m["role"], m["cmd"], m["results"]) for label, m in runs_meta.items()]
    base = sums[0]
    for s in sums:
        if s["role"] == "variant" and s is not base:
            s["ratio"] = s["wall_median"] / base["wall_median"]
        else:
            s["ratio"] = None
    floor = next((s for s in sums if s["role"] == "floor"), None)
    sortase_over_floor = base["wall_median"] / floor["wall_median"] if floor else None

    # ---------------------------------------------------------- report
    header = ("| variant | runs | wall median (s) | wall min-max (s) | CPU % (median) "
              "| user+sys median (s) | peak RSS max (MiB) | ratio vs sortase |")
    sep = "|---|---:|---:|---:|---:|---:|---:|---:|"
    rows = []
    for s in sums:
        name = s["label"] + (" (floor)" if s["role"] == "floor" else "")
        ratio = "1.00 (base)" if s is base else ("-" if s["role"] == "floor" else fmt_ratio(s["ratio"]))
        rows.append(f"| {name} | {s['runs']} | {s['wall_median']:.3f} | {s['wall_min']:.3f}-{s['wall_max']:.3f} "
                    f"| {s['cpu_pct_median']:.0f} | {s['cpu_s_median']:.2f} | {s['rss_max_mb']:.1f} | {ratio} |")
    table = "\n".join([header, sep] + rows)
    notes = ["ratio = median wall(variant) / median wall(sortase); > 1 means sortase is faster."]
    if any("{samtools}" in tpl for _, _, tpl in plan) and args.samtools == DEFAULT_SAMTOOLS:
        notes.append(ZLIB_CAVEAT)
    if startup is not None:
        notes.append(f"samtools command start-up cost (`samtools version` through the same "
                     f"command, median of 3): {startup:.3f} s -- included in its wall times.")
    if floor:
        notes.append(f"sortase / floor ({floor['label']}) = {sortase_over_floor:.2f}x "
                     "(1.00 would mean sortase runs at the floor's speed).")
    print()
    print(table)
    for n in notes:
        print(n)
    if check_text:
        print("check: " + check_text)

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"case": args.case, "description": case["description"], "input": inp,
                       "input_bytes": in_bytes, "records": records, "threads": args.threads,
                       "pairs": args.pairs, "started": started.isoformat(), "commit": git_commit(),
                       "load_before": load_before[0], "load_after": load_after[0],
                       "variants": sums, "sortase_over_floor": sortase_over_floor,
                       "check_ok": ok, "check": check_text, "stderr_round1": first_stderr,
                       "samtools_startup_s": startup}, f, indent=1)
    if args.no_record:
        print("\n(--no-record: nothing written to RESULTS.md / results.csv)")
        return 0 if ok in (None, True) else 3

    mi = machine_info()
    commit = git_commit()
    sortase_ver = first_line(f"{args.sortase} --version")
    samtools_ver = first_line(f"{args.samtools} --version")
    date = started.strftime("%Y-%m-%d %H:%M UTC")
    size_label = os.path.basename(inp)
    lines = [
        "", f"## {args.case} -- {size_label} -- {date}", "",
        f"- What: {case['description'].replace('{threads}', str(args.threads))}",
        f"- Commit: {commit}; sortase: `{sortase_ver}`; samtools: `{samtools_ver}`",
        f"- Machine: {mi['nproc']} CPUs ({mi['cpu']}), {mi['ram']} RAM, Linux {mi['kernel']}; "
        f"load average before/after: {load_before[0]:.2f} / {load_after[0]:.2f}",
        f"- Data: `{inp}`, {in_bytes:,} bytes ({human_bytes(in_bytes)})"
        + (f", {records:,} records" if records else "")
        + (f" ({meta_json.get('description')})" if meta_json else ""),
        f"- Threads: {args.threads}; {args.pairs} alternating rounds "
        f"({' / '.join(runs_meta)}); warm page cache (one untimed `cat` of the input first)",
        "- Commands:",
    ]
    for label, m in runs_meta.items():
        lines.append(f"  - {label}{' (floor)' if m['role'] == 'floor' else ''}: `{m['cmd']}`")
    lines += ["", table, ""] + [f"{n}  " for n in notes]
    if check_text:
        lines.append(f"Check: {check_text}  ")
    if args.note:
        lines.append(f"Note: {args.note}  ")
    if not os.path.exists(args.results_md):
        with open(args.results_md, "w") as f:
            f.write("# sortase benchmark results\n\nAppended by `bench/compare.py` "
                    "(see bench/README.md).\n")
    with open(args.results_md, "a") as f:
        f.write("\n".join(lines) + "\n")

    new_csv = not os.path.exists(args.results_csv)
    with open(args.results_csv, "a", newline="") as f:
        w = csv.writer(f)
        if new_csv:
            w.writerow(CSV_COLUMNS)
        for s in sums:
            w.writerow([started.strftime("%Y-%m-%dT%H:%M:%SZ"), commit, args.case, inp, in_bytes,
                        records or "", args.threads, s["label"], s["role"], s["runs"],
                        f"{s['wall_median']:.4f}", f"{s['wall_min']:.4f}", f"{s['wall_max']:.4f}",
                        f"{s['cpu_pct_median']:.1f}", f"{s['cpu_s_median']:.3f}",
                        f"{s['rss_max_mb']:.1f}",
                        "" if s["ratio"] is None else f"{s['ratio']:.4f}",
                        "" if not (floor and s is base) else f"{sortase_over_floor:.4f}",
                        "" if ok is None else ("agree" if ok else "DIFFER"), s["command"]])
    print(f"\nrecorded: {args.results_md}, {args.results_csv}")
    return 0 if ok in (None, True) else 3


if __name__ == "__main__":
    sys.exit(main())
