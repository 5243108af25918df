#!/usr/bin/env python3
"""Generate reproducible benchmark BAMs for sortase (synthetic, human-like).

    python3 bench/generate.py --size tiny|small|large [--out /work/bench-data]
    python3 bench/generate.py --size xl --from DIR_OF_LARGE [--copies 4] [--out DIR]
    python3 bench/generate.py --size small16 --from DIR_OF_SMALL [--out DIR]

`xl` (>= 50M records, genome-like scale) is derived from an existing `large` data
set instead of simulated anew (ART and minimap2 at 4x the large coverage would take
most of a day on 2 cores): the large sample N times over on a reference of N copies
(a 1.26 Gbp genome for N = 4: 40% of GRCh38).  Copy k (k >= 2) renames every contig
C to C_k (RNAME, RNEXT, SA tags, @SQ) and the flowcell of every read name
(HSIMFCXX -> HSIMFC0k), so names stay unique and Illumina-like and duplicates stay
inside their copy: markdup finds N times the large data's duplicates.  xl.bam holds
the copies one after the other (aligner order within each); xl.sorted.bam is the
coordinate-sorted copies concatenated, mapped records first and the unplaced ones
(RNAME *) of every copy at the end, which is the order samtools sort gives
(checked with `samtools view -c` and sortase's `sort --verify` in the log).

Pipeline (every step is skipped when its output already exists, so a rerun
resumes where an interrupted one stopped; outputs are written under a temporary
name and renamed when complete):

 1. reference  DIR/ref.fa(+.fai): chr1..chr22, chrX, chrY at 1/10 of the GRCh38
               lengths, chrM (16569 bp) and 40 unplaced chrUn_* contigs
               (20-200 kb).  Random sequence with drifting GC (isochore-like),
               N gaps (telomeres, a centromere gap flanked by alpha-satellite-
               like tandem arrays), interspersed repeats (Alu-/L1-like
               families), microsatellites, segmental duplications (1-8 kb
               segments copied to 2-5 places, 0-4 % divergence, extra weight
               on chrUn) and NUMTs (chrM pieces in the nuclear genome), so
               that secondary/MAPQ-0 alignments occur.
               The `tiny` size uses DIR/ref-tiny.fa: chr21, chr22, chrM and
               three chrUn contigs of the same layout (identical sequence).
 2. donor      DIR/<ref>.donor.fa (+ .donor.chrM.fa): the "sample" genome =
               reference + SNPs (1e-3), small indels (1e-4) and structural
               variants (~1 per 20 kb, mostly local: inversions, tandem
               duplications, short-range transpositions, deletions, novel
               insertions; a few long-range transpositions) -> split reads
               (supplementary), discordant pairs, unmapped mates.  Reads are
               simulated from the donor.
 3. art        art_illumina -ss HS25 -p -l 150 -f COV -m 350 -s 50 -na -rs SEED
               on the donor nuclear genome, and separately on chrM at 100x the
               nuclear coverage (mitochondrial copy number).
 4. fastq      ~8 % extra duplicate pairs (copies of both mates under new
               names, a few base qualities perturbed; ~25 % of them "optical":
               same lane/tile, nearby x/y), 0.3 % contaminant pairs (random
               sequence, unmapped), 0.5 % chimeric R1 (30-100 bp tail from
               another fragment; minimap2 -ax sr soft-clips it and drops the
               distant part, i.e. no supplementary), 0.5 % chimeric
               pairs (R2 from another fragment -> discordant, often
               inter-chromosomal), Illumina-style unique read names
               (HWI-D00360:250:HSIMFCXX:lane:tile:x:y), pair order shuffled
               (external bucket shuffle, bounded memory) -> R1.fq / R2.fq.
 5. index      minimap2 -x sr -d DIR/<ref>.sr.mmi (shared by small and large)
 6. align      minimap2 -ax sr -t T --secondary=yes -N 1 -R @RG... --MD
                   <ref>.sr.mmi R1.fq R2.fq
                 | samtools view -b -@1 -o DIR/SIZE.bam -   (aligner order)
               (the sr preset alone emits no secondary alignments, like bwa;
               -N 1 adds at most one per read, ~3-5 % of records; @RG and MD
               make the records look like a typical bwa-mem BAM)
 7. sort       pysam's samtools 1.24 (bench/samtools-1.24): sort + index
               -> DIR/SIZE.sorted.bam + .bai
 8. stats      samtools flagstat + MAPQ-0 count -> DIR/SIZE.json
 9. cleanup    FASTQ intermediates are deleted unless --keep-fastq.

Only the Python standard library is used; the tools are called as
subprocesses.  Results are reproducible for a given seed with the same tool
versions and the same Python minor version (random.Random is seeded with
strings; randbytes/sample/shuffle are stable across CPython 3.9+).
"""
import argparse
import json
import math
import os
import random
import shutil
import subprocess
import sys
import threading
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
SAMTOOLS_124 = [sys.executable, "-S", os.path.join(BENCH_DIR, "samtools-1.24")]

# GRCh38 primary assembly lengths.
GRCH38 = [
    ("chr1", 248956422), ("chr2", 242193529), ("chr3", 198295559),
    ("chr4", 190214555), ("chr5", 181538259), ("chr6", 170805979),
    ("chr7", 159345973), ("chr8", 145138636), ("chr9", 138394717),
    ("chr10", 133797422), ("chr11", 135086622), ("chr12", 133275309),
    ("chr13", 114364328), ("chr14", 107043718), ("chr15", 101991189),
    ("chr16", 90338345), ("chr17", 83257441), ("chr18", 80373285),
    ("chr19", 58617616), ("chr20", 64444167), ("chr21", 46709983),
    ("chr22", 50818468), ("chrX", 156040895), ("chrY", 57227415),
]
CHRM_LEN = 16569
N_UNPLACED = 40
SCALE = 10  # nuclear chromosomes at 1/SCALE of GRCh38

READ_LEN = 150
DUP_FRACTION = 0.08        # fraction of final pairs that are duplicates
OPTICAL_SHARE = 0.25       # of the duplicates
CONTAMINANT_FRACTION = 0.003  # random-sequence pairs (both mates unmapped)
CHIMERA_SPLIT = 0.005         # R1 tail (30-100 bp) from elsewhere -> soft clip
CHIMERA_MATE = 0.005          # R2 from elsewhere -> discordant / inter-chromosomal
MT_BOOST = 100             # chrM coverage relative to nuclear coverage
READ_GROUP = r"@RG\tID:SIM.1\tSM:SIM\tLB:SIMLIB1\tPL:ILLUMINA\tPU:HSIMFCXX.1"

# Per size: reference, contig subset (None = all), nuclear coverage, ART seed.
# Coverage of `large` is calibrated from `small` so that large.bam >= 1.5 GB.
SIZES = {
    "tiny": dict(ref="ref-tiny", contigs=["chr21", "chr22", "chrM", 3],
                 coverage=0.6, art_seed=1001),
    "small": dict(ref="ref", contigs=None, coverage=0.33, art_seed=2002),
    "large": dict(ref="ref", contigs=None, coverage=5.4, art_seed=3003),
    # A second sample of the same donor (other ART seed): the "normal" of a
    # tumour/normal pair for snp-pileup (bench/snp_pileup.py).
    "normal": dict(ref="ref", contigs=None, coverage=1.0, art_seed=4004),
    # Derived from `large` (see the module docstring): no simulation of its own.
    "xl": dict(derived_from="large", copies=4),
    # The small data 16 times over: the large data's record count (12.9M) in minutes, for the
    # benchmarks that need a large input but not ART and minimap2's hour on 2 cores (Dask's).
    "small16": dict(derived_from="small", copies=16),
}

BASES = b"ACGT"
COMP = bytes.maketrans(b"ACGTNacgtn", b"TGCANtgcan")


# --------------------------------------------------------------------------
# utilities
# --------------------------------------------------------------------------

T0 = time.time()


def log(msg):
    stamp = time.strftime("%H:%M:%S")
    print(f"[{stamp} +{time.time() - T0:7.0f}s] {msg}", flush=True)


def human(n):
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024.0


def exists(*paths):
    return all(os.path.exists(p) for p in paths)


def tmp_name(path):
    """Temporary name next to `path`, keeping the extension (tools sniff it)."""
    d, b = os.path.split(path)
    return os.path.join(d, ".tmp." + b)


def run(cmd, **kw):
    """Run a command (list), raise on failure."""
    log("$ " + " ".join(cmd))
    subprocess.run(cmd, check=True, **kw)


def tool_version(cmd):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, errors="replace", timeout=60)
        for line in p.stdout.splitlines():
            if line.strip():
                return line.strip()
    except Exception as e:  # pragma: no cover - best effort only
        return f"unknown ({e})"
    return "unknown"


def art_version():
    try:
        p = subprocess.run(["art_illumina"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, errors="replace", timeout=60)
        for line in p.stdout.splitlines():
            if "Version" in line:
                return "art_illumina " + line.strip()
    except Exception:
        pass
    return "art_illumina unknown"


class State:
    """Small JSON file in the work dir remembering step timings and counts,
    so that a resumed run can still write a complete SIZE.json."""

    def __init__(self, path):
        self.path = path
        self.data = {}
        if os.path.exists(path):
            with open(path) as f:
                self.data = json.load(f)

    def set(self, key, value):
        self.data[key] = value
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.data, f, indent=1, sort_keys=True)
        os.replace(tmp, self.path)

    def get(self, key, default=None):
        return self.data.get(key, default)


# --------------------------------------------------------------------------
# step 1: reference
# --------------------------------------------------------------------------

def gc_table(gc):
    """256-entry translate table mapping uniform random bytes to bases with
    G+C fraction ~gc."""
    n_gc = int(round(256 * gc))
    n_g = n_gc // 2
    n_c = n_gc - n_g
    n_a = (256 - n_gc) // 2
    n_t = 256 - n_gc - n_a
    out = b"G" * n_g + b"C" * n_c + b"A" * n_a + b"T" * n_t
    assert len(out) == 256
    return bytes(out)


GC_TABLES = {g: gc_table(g / 100.0) for g in range(25, 66)}


def random_dna(rng, n, gc=0.41):
    return rng.randbytes(n).translate(GC_TABLES[int(round(gc * 100))])


def mutate(seq, div, rng):
    """Substitutions at rate div plus a few 1-3 bp indels (about div/10)."""
    b = bytearray(seq)
    n = len(b)
    if n == 0 or div <= 0:
        return bytes(b)
    k = min(n, int(n * div + rng.random()))
    for p in rng.sample(range(n), k):
        old = b[p]
        new = BASES[rng.randrange(4)]
        if new == old:
            new = BASES[(BASES.index(new) + 1 + rng.randrange(3)) % 4] if old in BASES else new
        b[p] = new
    n_indel = int(n * div / 10 + rng.random())
    for _ in range(n_indel):
        p = rng.randrange(len(b))
        ln = rng.randint(1, 3)
        if rng.random() < 0.5:
            del b[p:p + ln]
        else:
            b[p:p] = random_dna(rng, ln)
    return bytes(b)


def revcomp(seq):
    return seq.translate(COMP)[::-1]


def full_layout(seed):
    """[(name, length, kind)] for the full human-like reference."""
    rng = random.Random(f"{seed}:layout")
    layout = [(n, ln // SCALE, "chr") for n, ln in GRCH38]
    layout.append(("chrM", CHRM_LEN, "mt"))
    used = set()
    for _ in range(N_UNPLACED):
        while True:
            num = rng.randrange(300, 1000)
            if num not in used:
                used.add(num)
                break
        layout.append((f"chrUn_KI270{num:03d}v1", rng.randint(20_000, 200_000), "un"))
    return layout


def repeat_plan(seed, layout):
    """Global, deterministic repeat content shared by all contigs.

    Returns dict with consensus sequences and, per contig, a list of
    segmental-duplication / NUMT placements (pos, family_index, div, strand).
    """
    rng = random.Random(f"{seed}:repeats")
    plan = {"alu": random_dna(rng, 300, 0.52),
            "line": random_dna(rng, 6000, 0.40),
            "alpha": random_dna(rng, 171, 0.38),
            "families": [], "placements": {n: [] for n, _, _ in layout}}
    # chrM sequence is needed for NUMTs, so it is part of the plan.
    plan["chrM"] = random_dna(random.Random(f"{seed}:ref:chrM"), CHRM_LEN, 0.44)
    nuclear = [(n, ln, k) for n, ln, k in layout if k != "mt"]
    weights = [ln * (20 if k == "un" else 1) for n, ln, k in nuclear]
    total = sum(ln for _, ln, _ in nuclear)
    n_fam = max(4, total // 400_000)
    for i in range(n_fam):
        ln = rng.randint(1000, 8000)
        plan["families"].append(random_dna(rng, ln, rng.uniform(0.36, 0.5)))
        copies = rng.choice([2, 2, 2, 3, 3, 4, 5])
        for _ in range(copies):
            name, clen, _ = rng.choices(nuclear, weights)[0]
            if clen <= ln + 2000:
                continue
            pos = rng.randrange(1000, clen - ln - 1000)
            div = rng.choice([0.0, 0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.04])
            plan["placements"][name].append((pos, i, div, rng.random() < 0.5))
    # NUMTs: 1-5 kb pieces of chrM, 1-3 % divergence
    for _ in range(max(2, total // 30_000_000)):
        ln = rng.randint(1000, 5000)
        start = rng.randrange(0, CHRM_LEN - ln)
        plan["families"].append(plan["chrM"][start:start + ln])
        i = len(plan["families"]) - 1
        name, clen, _ = rng.choices(nuclear, [ln for _, ln, _ in nuclear])[0]
        pos = rng.randrange(1000, clen - ln - 1000)
        plan["placements"][name].append((pos, i, rng.uniform(0.01, 0.03), rng.random() < 0.5))
    return plan


def make_contig(seed, name, length, kind, plan):
    """Deterministic reference sequence of one contig (bytes, upper case)."""
    if kind == "mt":
        return plan["chrM"]
    rng = random.Random(f"{seed}:ref:{name}")
    # background with drifting GC in 50 kb blocks
    parts = []
    gc = 0.41
    block = 50_000
    for start in range(0, length, block):
        gc = 0.41 + 0.8 * (gc - 0.41) + rng.gauss(0, 0.025)
        gc = min(0.60, max(0.32, gc))
        parts.append(random_dna(rng, min(block, length - start), gc))
    seq = bytearray(b"".join(parts))

    def put(pos, piece):
        if pos < 0 or pos >= length:
            return
        piece = piece[:length - pos]
        seq[pos:pos + len(piece)] = piece

    # microsatellites
    for _ in range(length // 40_000):
        unit = random_dna(rng, rng.randint(1, 6), 0.4)
        rep = (unit * 100)[:rng.randint(20, 80)]
        put(rng.randrange(length), rep)
    # Alu-like SINEs (300 bp + poly-A), 2-18 % divergence
    for _ in range(length // 8_000):
        s = mutate(plan["alu"], rng.uniform(0.02, 0.18), rng) + b"A" * rng.randint(8, 30)
        put(rng.randrange(length), revcomp(s) if rng.random() < 0.5 else s)
    # L1-like LINEs: 5'-truncated fragments, 3-20 % divergence
    for _ in range(length // 60_000):
        ln = rng.randint(500, 6000)
        s = mutate(plan["line"][-ln:], rng.uniform(0.03, 0.2), rng)
        put(rng.randrange(length), revcomp(s) if rng.random() < 0.5 else s)
    # segmental duplications and NUMTs from the global plan
    for pos, fam, div, rev in plan["placements"][name]:
        s = mutate(plan["families"][fam], div, rng)
        put(pos, revcomp(s) if rev else s)
    if kind == "chr":
        # centromere: N gap flanked by alpha-satellite-like arrays
        gap = rng.randint(50_000, 150_000)
        cpos = int(length * rng.uniform(0.25, 0.5))
        for side_start in (cpos - 60_000, cpos + gap):
            arr = b"".join(mutate(plan["alpha"], rng.uniform(0.01, 0.05), rng)
                           for _ in range(60_000 // 171 + 1))
            put(side_start, arr[:60_000])
        put(cpos, b"N" * gap)
        # telomere gaps (1/10 of GRCh38's 10 kb)
        put(0, b"N" * 1000)
        put(length - 1000, b"N" * 1000)
    assert len(seq) == length
    return bytes(seq)


def make_donor(seed, name, ref):
    """Donor ("sample") sequence: ref + SNPs, small indels and SVs."""
    rng = random.Random(f"{seed}:donor:{name}")
    n = len(ref)
    seq = bytearray(ref)
    # SNPs
    for p in rng.sample(range(n), int(n * 0.001)):
        if seq[p] in BASES:
            seq[p] = BASES[(BASES.index(seq[p]) + rng.randint(1, 3)) % 4]
    # events (non-overlapping, processed left to right):
    #   small indels 1e-4 /bp;
    #   local SVs ~1 per 20 kb: minimap2's paired-end mode only reports a
    #   supplementary alignment when the split part lies near the mate
    #   (same contig, within a few kb) -- so local inversions, tandem
    #   duplications and short-range transpositions are what produce the
    #   supplementary records; deletions/novel insertions add soft clips and
    #   unmapped mates; plus a few long-range transpositions.
    events = []
    for _ in range(int(n * 1e-4)):
        p = rng.randrange(n)
        ln = min(10, 1 + int(rng.expovariate(0.5)))
        events.append((p, "del" if rng.random() < 0.5 else "ins", ln))
    for _ in range(n // 20_000):
        p = rng.randrange(n)
        t = rng.choice(["INV", "INV", "DUP", "DUP", "TRL", "DEL", "INS"])
        ln = rng.randint(100, 1000) if t == "INS" else rng.randint(300, 5000)
        events.append((p, t, ln))
    for _ in range(max(1 if n > 100_000 else 0, n // 2_000_000)):
        events.append((rng.randrange(n), "TRA", rng.randint(1000, 4000)))
    events.sort()
    out = []
    cur = 0
    for p, t, ln in events:
        if p < cur + 10 or p + ln >= n:
            continue
        out.append(bytes(seq[cur:p]))
        if t == "del" or t == "DEL":
            cur = p + ln
        elif t == "ins" or t == "INS":
            out.append(random_dna(rng, ln))
            cur = p
        elif t == "INV":
            out.append(revcomp(bytes(seq[p:p + ln])))
            cur = p + ln
        elif t == "DUP":  # tandem duplication
            out.append(bytes(seq[p:p + ln]) * 2)
            cur = p + ln
        elif t in ("TRA", "TRL"):  # insert a copy of a (distant / nearby) segment
            if t == "TRA":
                src = rng.randrange(0, n - ln)
            else:
                src = min(n - ln, max(0, p + rng.choice((-1, 1)) * rng.randint(2000, 20000)))
            piece = bytes(seq[src:src + ln])
            out.append(revcomp(piece) if rng.random() < 0.5 else piece)
            cur = p
    out.append(bytes(seq[cur:]))
    return b"".join(out)


def write_fasta(f, name, seq, width=60):
    f.write(b">" + name.encode() + b"\n")
    f.write(b"\n".join(seq[i:i + width] for i in range(0, len(seq), width)))
    f.write(b"\n")


def select_layout(layout, subset):
    if subset is None:
        return layout
    names = [x for x in subset if isinstance(x, str)]
    n_un = sum(x for x in subset if isinstance(x, int))
    sel = [c for c in layout if c[0] in names]
    sel += [c for c in layout if c[2] == "un"][:n_un]
    return sel


def step_reference(args, cfg, paths, state):
    ref, fai = paths["ref"], paths["ref"] + ".fai"
    donor, donor_mt = paths["donor"], paths["donor_mt"]
    if exists(ref, fai, donor, donor_mt):
        log(f"reference: exists ({paths['ref']})")
        return
    t = time.time()
    layout = full_layout(args.seed)
    plan = repeat_plan(args.seed, layout)
    sel = select_layout(layout, cfg["contigs"])
    total = sum(ln for _, ln, _ in sel)
    log(f"reference: {len(sel)} contigs, {total / 1e6:.1f} Mbp -> {ref} (+ donor)")
    tr, td, tm = tmp_name(ref), tmp_name(donor), tmp_name(donor_mt)
    with open(tr, "wb") as fr, open(td, "wb") as fd, open(tm, "wb") as fm:
        done = 0
        for name, ln, kind in sel:
            seq = make_contig(args.seed, name, ln, kind, plan)
            write_fasta(fr, name, seq)
            dseq = make_donor(args.seed, name, seq)
            write_fasta(fm if kind == "mt" else fd, name, dseq)
            done += ln
            if ln > 5_000_000 or name == sel[-1][0]:
                log(f"  reference: {name} done ({done / 1e6:.0f}/{total / 1e6:.0f} Mbp)")
    os.replace(tr, ref)
    os.replace(td, donor)
    os.replace(tm, donor_mt)
    for stale in (fai, paths["mmi"]):  # derived from an older reference
        if os.path.exists(stale):
            os.remove(stale)
    run(["samtools", "faidx", ref])
    state.set("time_reference_s", round(time.time() - t, 1))
    state.set("reference_contigs", len(sel))
    state.set("reference_bp", total)


# --------------------------------------------------------------------------
# step 3: ART
# --------------------------------------------------------------------------

def step_art(args, cfg, paths, state):
    work = paths["work"]
    outs = [os.path.join(work, f"art_{p}{i}.fq") for p in ("nuc", "mt") for i in (1, 2)]
    if exists(*outs) or exists(paths["r1"], paths["r2"]) or exists(paths["bam"]):
        log("art: done already")
        return
    t = time.time()
    cov = args.coverage if args.coverage is not None else cfg["coverage"]
    seed = cfg["art_seed"]
    logf = os.path.join(work, "art.log")
    for part, fa, c, s in (("nuc", paths["donor"], cov, seed),
                           ("mt", paths["donor_mt"], cov * MT_BOOST, seed + 1)):
        prefix = os.path.join(work, f".tmp.art_{part}")
        cmd = ["art_illumina", "-ss", "HS25", "-p", "-l", str(READ_LEN),
               "-f", f"{c:g}", "-m", "350", "-s", "50", "-na", "-rs", str(s),
               "-i", fa, "-o", prefix]
        log("$ " + " ".join(cmd) + f"  (log: {logf})")
        with open(logf, "a") as lf:
            subprocess.run(cmd, check=True, stdout=lf, stderr=subprocess.STDOUT)
        for i in (1, 2):
            os.replace(f"{prefix}{i}.fq", os.path.join(work, f"art_{part}{i}.fq"))
    state.set("art_coverage", cov)
    state.set("art_cmd", "art_illumina -ss HS25 -p -l 150 -f COV -m 350 -s 50 -na "
                         f"-rs {seed} (chrM: -f COV*{MT_BOOST} -rs {seed + 1})")
    state.set("time_art_s", round(time.time() - t, 1))


# --------------------------------------------------------------------------
# step 4: duplicates, names, shuffle -> R1.fq / R2.fq
# --------------------------------------------------------------------------

HISEQ_TILES = [s * 1000 + w * 100 + t for s in (1, 2) for w in (1, 2) for t in range(1, 17)]
NAME_PREFIX = b"HWI-D00360:250:HSIMFCXX:"


class Namer:
    """Unique Illumina-style names.  Normal reads: even x and a per-tile
    counter in y (unique by construction).  Optical duplicates: odd x near the
    original, uniqueness checked in a (small) set."""

    def __init__(self, rng):
        self.rng = rng
        self.count = {}
        self.optical = set()

    def new(self):
        lane = self.rng.randint(1, 8)
        tile = HISEQ_TILES[self.rng.randrange(len(HISEQ_TILES))]
        c = self.count.get((lane, tile), 0)
        self.count[(lane, tile)] = c + 1
        x = 2 * self.rng.randrange(500, 10_500)
        y = 1000 + 4 * c + self.rng.randrange(4)
        return (lane, tile, x, y)

    def near(self, key):
        lane, tile, x, y = key
        while True:
            nx = x + 2 * self.rng.randint(-30, 29) + 1
            ny = max(1, y + self.rng.randint(-60, 60))
            k = (lane, tile, nx, ny)
            if nx > 0 and k not in self.optical:
                self.optical.add(k)
                return k

    @staticmethod
    def fmt(key):
        return NAME_PREFIX + b"%d:%d:%d:%d" % key


def read_pairs(f1, f2):
    """Yield (seq1, qual1, seq2, qual2) from two ART FASTQ files in lockstep."""
    while True:
        h1 = f1.readline()
        h2 = f2.readline()
        if not h1 or not h2:
            if h1 or h2:
                raise RuntimeError("R1/R2 have different lengths")
            return
        s1 = f1.readline().rstrip(b"\n"); f1.readline(); q1 = f1.readline().rstrip(b"\n")
        s2 = f2.readline().rstrip(b"\n"); f2.readline(); q2 = f2.readline().rstrip(b"\n")
        if h1[:-3] != h2[:-3]:
            raise RuntimeError(f"mate names differ: {h1!r} {h2!r}")
        yield s1, q1, s2, q2


def perturb_quals(q, rng):
    b = bytearray(q)
    hi = max(b)
    for _ in range(rng.randint(0, 3)):
        p = rng.randrange(len(b))
        b[p] = max(35, min(hi, b[p] + rng.choice((-7, -5, -3, 3, 5, 7))))
    return bytes(b)


def step_fastq(args, cfg, paths, state):
    r1, r2 = paths["r1"], paths["r2"]
    if exists(r1, r2) or exists(paths["bam"]):
        log("fastq: done already")
        return
    t = time.time()
    work = paths["work"]
    arts = [(os.path.join(work, f"art_{p}1.fq"), os.path.join(work, f"art_{p}2.fq"))
            for p in ("nuc", "mt")]
    in_bytes = sum(os.path.getsize(a) + os.path.getsize(b) for a, b in arts)
    # ~256 MB of raw FASTQ per bucket keeps the in-memory shuffle small
    n_buckets = max(1, math.ceil(in_bytes / (256 << 20)))
    rng = random.Random(f"{args.seed}:fastq:{cfg['art_seed']}")
    namer = Namer(rng)
    # P(original gets duplicates) so that ~DUP_FRACTION of all pairs are dups;
    # number of copies: 1 (85 %), 2 (10 %), 3 (5 %) -> mean 1.2
    p_dup = DUP_FRACTION / (1 - DUP_FRACTION) / 1.2
    bucket_paths = [os.path.join(work, f".bucket{i:03d}") for i in range(n_buckets)]
    buckets = [open(p, "wb", buffering=1 << 20) for p in bucket_paths]
    n_orig = n_dup = n_opt = n_cont = n_chim = n_disc = 0
    # uniform sample of the pairs seen so far (ART emits them contig by
    # contig), used as partners for chimeric pairs
    reservoir, res_n, seen = [], 20_000, 0
    log(f"fastq: duplicates/names/shuffle via {n_buckets} bucket(s)")
    for a1, a2 in arts:
        with open(a1, "rb", buffering=1 << 20) as f1, open(a2, "rb", buffering=1 << 20) as f2:
            for s1, q1, s2, q2 in read_pairs(f1, f2):
                seen += 1
                if len(reservoir) < res_n:
                    reservoir.append((s1, s2, q2))
                elif rng.random() * seen < res_n:
                    reservoir[rng.randrange(res_n)] = (s1, s2, q2)
                u = rng.random()
                if u < CONTAMINANT_FRACTION:
                    s1 = random_dna(rng, len(s1), 0.5)
                    s2 = random_dna(rng, len(s2), 0.5)
                    n_cont += 1
                elif u < CONTAMINANT_FRACTION + CHIMERA_SPLIT:
                    o = reservoir[rng.randrange(len(reservoir))]
                    k = rng.randint(30, 100)
                    s1 = s1[:-k] + o[0][-k:]
                    n_chim += 1
                elif u < CONTAMINANT_FRACTION + CHIMERA_SPLIT + CHIMERA_MATE:
                    o = reservoir[rng.randrange(len(reservoir))]
                    s2, q2 = o[1], o[2]
                    n_disc += 1
                key = namer.new()
                buckets[rng.randrange(n_buckets)].write(
                    b"\t".join((Namer.fmt(key), s1, q1, s2, q2)) + b"\n")
                n_orig += 1
                if rng.random() < p_dup:
                    u = rng.random()
                    copies = 1 if u < 0.85 else (2 if u < 0.95 else 3)
                    for _ in range(copies):
                        if rng.random() < OPTICAL_SHARE:
                            dkey = namer.near(key)
                            n_opt += 1
                        else:
                            dkey = namer.new()
                        buckets[rng.randrange(n_buckets)].write(b"\t".join((
                            Namer.fmt(dkey), s1, perturb_quals(q1, rng),
                            s2, perturb_quals(q2, rng))) + b"\n")
                        n_dup += 1
                if n_orig % 1_000_000 == 0:
                    log(f"  fastq: {n_orig:,} pairs read")
    for b in buckets:
        b.close()
    t1, t2 = tmp_name(r1), tmp_name(r2)
    with open(t1, "wb", buffering=1 << 20) as o1, open(t2, "wb", buffering=1 << 20) as o2:
        for i, bp in enumerate(bucket_paths):
            with open(bp, "rb") as f:
                lines = f.read().split(b"\n")
            if lines and lines[-1] == b"":
                lines.pop()
            rng.shuffle(lines)
            for line in lines:
                name, s1, q1, s2, q2 = line.split(b"\t")
                o1.write(b"@%s 1:N:0:1\n%s\n+\n%s\n" % (name, s1, q1))
                o2.write(b"@%s 2:N:0:1\n%s\n+\n%s\n" % (name, s2, q2))
            del lines
            os.remove(bp)
            log(f"  fastq: bucket {i + 1}/{n_buckets} written")
    os.replace(t1, r1)
    os.replace(t2, r2)
    for a, b in arts:
        os.remove(a)
        os.remove(b)
    total = n_orig + n_dup
    state.set("pairs_simulated", n_orig)
    state.set("pairs_duplicate", n_dup)
    state.set("pairs_duplicate_optical", n_opt)
    state.set("pairs_contaminant", n_cont)
    state.set("pairs_chimeric_split", n_chim)
    state.set("pairs_chimeric_mate", n_disc)
    state.set("pairs_total", total)
    state.set("time_fastq_s", round(time.time() - t, 1))
    log(f"fastq: {total:,} pairs ({n_dup:,} duplicates = {100 * n_dup / max(1, total):.1f} %, "
        f"{n_opt:,} optical; {n_cont:,} contaminant, {n_chim:,} split-chimeric, "
        f"{n_disc:,} mate-chimeric)")


# --------------------------------------------------------------------------
# steps 5-6: index + align
# --------------------------------------------------------------------------

def step_index(args, cfg, paths, state):
    mmi = paths["mmi"]
    if exists(mmi) or exists(paths["bam"]):
        log(f"index: exists ({mmi})")
        return
    t = time.time()
    tmp = tmp_name(mmi)
    run(["minimap2", "-x", "sr", "-t", str(args.threads), "-d", tmp, paths["ref"]],
        stderr=open(os.path.join(paths["work"], "minimap2-index.log"), "w"))
    os.replace(tmp, mmi)
    state.set("time_index_s", round(time.time() - t, 1))


def _pump_stderr(stream, logpath):
    """Copy minimap2's stderr to a log file; echo its progress lines."""
    with open(logpath, "ab") as lf:
        for line in iter(stream.readline, b""):
            lf.write(line)
            lf.flush()
            if b"mapped" in line and b"worker_pipeline" in line:
                log("  minimap2: " + line.decode(errors="replace").strip())


def step_align(args, cfg, paths, state):
    bam = paths["bam"]
    if exists(bam):
        log(f"align: exists ({bam})")
        return
    t = time.time()
    tmp = tmp_name(bam)
    mm = ["minimap2", "-ax", "sr", "-t", str(args.threads), "--secondary=yes", "-N", "1",
          "-R", READ_GROUP, "--MD",
          paths["mmi"], paths["r1"], paths["r2"]]
    sv = ["samtools", "view", "-b", "-@1", "-o", tmp, "-"]
    log("$ " + " ".join(mm).replace(READ_GROUP, f"'{READ_GROUP}'") + " | " + " ".join(sv))
    mlog = os.path.join(paths["work"], "minimap2.log")
    p1 = subprocess.Popen(mm, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    pump = threading.Thread(target=_pump_stderr, args=(p1.stderr, mlog), daemon=True)
    pump.start()
    p2 = subprocess.Popen(sv, stdin=p1.stdout)
    p1.stdout.close()
    while True:  # heartbeat: the size of the growing BAM, once a minute
        try:
            rc2 = p2.wait(timeout=60)
            break
        except subprocess.TimeoutExpired:
            size = os.path.getsize(tmp) if os.path.exists(tmp) else 0
            log(f"  align: {human(size)} of BAM written so far")
    rc1 = p1.wait()
    pump.join()
    if rc1 != 0 or rc2 != 0:
        raise RuntimeError(f"alignment failed: minimap2 rc={rc1}, samtools rc={rc2} (see {mlog})")
    os.replace(tmp, bam)
    state.set("align_cmd", " ".join(mm).replace(READ_GROUP, f"'{READ_GROUP}'")
              .replace(paths["out"] + "/", "DIR/") + " | " + " ".join(sv).replace(tmp, bam)
              .replace(paths["out"] + "/", "DIR/"))
    state.set("time_align_s", round(time.time() - t, 1))
    log(f"align: {bam} {human(os.path.getsize(bam))}")


# --------------------------------------------------------------------------
# step 7: sort + index (samtools 1.24 from pysam)
# --------------------------------------------------------------------------

def step_sort(args, cfg, paths, state):
    sbam = paths["sorted"]
    bai = sbam + ".bai"
    if exists(sbam, bai):
        log(f"sort: exists ({sbam})")
        return
    t = time.time()
    if not exists(sbam):
        tmp = tmp_name(sbam)
        for f in os.listdir(paths["work"]):  # leftovers of an interrupted sort
            if f.startswith("sorttmp."):
                os.remove(os.path.join(paths["work"], f))
        run(SAMTOOLS_124 + ["sort", "-@", str(args.threads), "-m", "1G", "-O", "bam",
                            "-T", os.path.join(paths["work"], "sorttmp"),
                            "-o", tmp, paths["bam"]])
        os.replace(tmp, sbam)
    tmp_bai = tmp_name(bai)
    run(SAMTOOLS_124 + ["index", "-@", str(args.threads), "-o", tmp_bai, sbam])
    os.replace(tmp_bai, bai)
    state.set("time_sort_index_s", round(time.time() - t, 1))


# --------------------------------------------------------------------------
# step 8: stats -> SIZE.json
# --------------------------------------------------------------------------

def step_stats(args, cfg, paths, state):
    out = paths["json"]
    if exists(out):
        log(f"stats: exists ({out})")
        return
    t = time.time()
    bam = paths["bam"]
    log("stats: samtools flagstat + MAPQ-0 count")
    fs = subprocess.run(["samtools", "flagstat", "-@", str(args.threads), "-O", "json", bam],
                        check=True, stdout=subprocess.PIPE, text=True).stdout
    flagstat = json.loads(fs)["QC-passed reads"]
    q1 = int(subprocess.run(["samtools", "view", "-c", "-@", str(args.threads),
                             "-F", "0x904", "-q", "1", bam],
                            check=True, stdout=subprocess.PIPE, text=True).stdout)
    mapq0 = flagstat["primary mapped"] - q1
    records = flagstat["total"]
    size_b = os.path.getsize(bam)
    with open(paths["ref"] + ".fai") as f:
        fai = [line.split("\t") for line in f if line.strip()]
    info = {
        "size": args.size,
        "description": "synthetic human-like (1/10 GRCh38 layout) 2x150 Illumina HS25 reads, "
                       "minimap2 -ax sr, unsorted (aligner order)",
        "created": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "generator": "bench/generate.py",
        "seed": args.seed,
        "files": {
            "bam": {"path": bam, "bytes": size_b, "records": records, "order": "aligner (unsorted)"},
            "sorted_bam": {"path": paths["sorted"], "bytes": os.path.getsize(paths["sorted"]),
                           "records": records, "order": "coordinate (samtools 1.24 sort)"},
            "bai": {"path": paths["sorted"] + ".bai"},
            "reference": {"path": paths["ref"], "bytes": os.path.getsize(paths["ref"]),
                          "contigs": len(fai), "bp": sum(int(x[1]) for x in fai)},
        },
        "records": records,
        "bytes": size_b,
        "bytes_per_record": round(size_b / max(1, records), 1),
        "read_pairs": state.get("pairs_total"),
        "simulation": {
            "art_coverage_nuclear": state.get("art_coverage"),
            "chrM_coverage_factor": MT_BOOST,
            "pairs_simulated": state.get("pairs_simulated"),
            "pairs_duplicate": state.get("pairs_duplicate"),
            "pairs_duplicate_optical": state.get("pairs_duplicate_optical"),
            "pairs_contaminant": state.get("pairs_contaminant"),
            "pairs_chimeric_split": state.get("pairs_chimeric_split"),
            "pairs_chimeric_mate": state.get("pairs_chimeric_mate"),
        },
        "flagstat": flagstat,
        "primary_mapped_mapq0": mapq0,
        "commands": {"art": state.get("art_cmd"), "align": state.get("align_cmd"),
                     "sort": "samtools-1.24 sort -@T -m 1G; samtools-1.24 index"},
        "tools": {
            "art": art_version(),
            "minimap2": "minimap2 " + tool_version(["minimap2", "--version"]),
            "samtools_convert": tool_version(["samtools", "--version"]),
            "samtools_sort": tool_version(SAMTOOLS_124 + ["--version"]),
            "python": sys.version.split()[0],
        },
        "timings_s": {k[5:-2]: v for k, v in sorted(state.data.items())
                      if k.startswith("time_") and k.endswith("_s")},
    }
    state.set("time_stats_s", round(time.time() - t, 1))
    info["timings_s"]["stats"] = state.get("time_stats_s")
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(info, f, indent=2)
        f.write("\n")
    os.replace(tmp, out)
    log(f"stats: {records:,} records, {human(size_b)} "
        f"({info['bytes_per_record']} B/record), secondary {flagstat['secondary']:,}, "
        f"supplementary {flagstat['supplementary']:,}, primary MAPQ0 {mapq0:,}, "
        f"unmapped {flagstat['primary'] - flagstat['primary mapped']:,}")


def step_cleanup(args, cfg, paths, state):
    if args.keep_fastq:
        return
    for p in (paths["r1"], paths["r2"]):
        if os.path.exists(p):
            os.remove(p)
            log(f"cleanup: removed {p}")


# --------------------------------------------------------------------------

# --------------------------------------------------------------------------
# xl: the large data N times over (derived, not simulated)
# --------------------------------------------------------------------------

def tile_header(header, copies):
    """The header of N copies: every @SQ N times (copy k >= 2 as NAME_k), the rest once."""
    sq = [line for line in header if line.startswith(b"@SQ")]
    out = []
    for line in header:
        out.append(line)
        if sq and line is sq[-1]:
            for k in range(2, copies + 1):
                for q in sq:
                    f = q.rstrip(b"\n").split(b"\t")
                    f = [x + b"_%d" % k if x.startswith(b"SN:") else x for x in f]
                    out.append(b"\t".join(f) + b"\n")
    out.append(b"@CO\tbench/generate.py: the data %d times over "
               b"(copy k >= 2: contigs NAME_k, flowcell HSIMFC0k)\n" % copies)
    return out


def tile_record(line, k):
    """SAM line of copy k (k >= 2): contigs and flowcell renamed, SA tags included."""
    f = line.split(b"\t", 9)
    suffix = b"_%d" % k
    f[0] = f[0].replace(b":HSIMFCXX:", b":HSIMFC%02d:" % k, 1)
    if f[2] != b"*":
        f[2] += suffix
    if f[6] not in (b"=", b"*"):
        f[6] += suffix
    rest = f[9]
    i = rest.find(b"\tSA:Z:")
    if i >= 0:
        j = rest.find(b"\t", i + 1)
        j = len(rest) - 1 if j < 0 else j  # the tag ends the line (before its newline)
        entries = rest[i + 6:j].split(b";")
        entries = [e.replace(b",", suffix + b",", 1) if e else e for e in entries]
        rest = rest[:i + 6] + b";".join(entries) + rest[j:]
        f[9] = rest
    return b"\t".join(f)


def write_tiled(src, dst, copies, threads, unplaced_last):
    """dst = `copies` copies of src (SAM text through samtools); with unplaced_last (a sorted
    src) the RNAME-* records of every copy go after all the placed ones."""
    tmp = tmp_name(dst)
    header = subprocess.run(["samtools", "view", "-H", "--no-PG", src], check=True,
                            stdout=subprocess.PIPE).stdout.splitlines(keepends=True)
    w = subprocess.Popen(["samtools", "view", "-b", "--no-PG", "-@", str(threads), "-o", tmp, "-"],
                         stdin=subprocess.PIPE)
    n = 0

    def copy(k, region):
        nonlocal n
        r = subprocess.Popen(["samtools", "view", src] + region, stdout=subprocess.PIPE,
                             bufsize=1 << 20)
        out = w.stdin
        for line in r.stdout:
            if unplaced_last and not region and line.split(b"\t", 3)[2] == b"*":
                r.kill()  # the unplaced tail of a sorted copy: written at the end
                break
            out.write(line if k == 1 else tile_record(line, k))
            n += 1
        r.stdout.close()
        r.wait()

    w.stdin.writelines(tile_header(header, copies))
    for k in range(1, copies + 1):
        log(f"xl: copy {k} of {copies} of {os.path.basename(src)}")
        copy(k, [])
    if unplaced_last:
        for k in range(1, copies + 1):
            copy(k, ["*"])
    w.stdin.close()
    if w.wait() != 0:
        sys.exit(f"samtools view -b failed writing {tmp}")
    os.replace(tmp, dst)
    return n


def derive_xl(args, cfg, out):
    src_dir = os.path.abspath(args.source)
    base = cfg["derived_from"]
    copies = args.copies or cfg["copies"]
    with open(os.path.join(src_dir, f"{base}.json")) as f:
        src_info = json.load(f)
    src_bam = os.path.join(src_dir, f"{base}.bam")
    src_sorted = os.path.join(src_dir, f"{base}.sorted.bam")
    name = args.size  # xl, or small16: the same derivation from another base
    bam = os.path.join(out, f"{name}.bam")
    sbam = os.path.join(out, f"{name}.sorted.bam")
    os.makedirs(out, exist_ok=True)
    t = time.time()
    records = {}
    for src, dst, last in ((src_bam, bam, False), (src_sorted, sbam, True)):
        if exists(dst):
            log(f"xl: exists ({dst})")
            continue
        records[dst] = write_tiled(src, dst, copies, args.threads, last)
    if not exists(sbam + ".bai"):
        run(["samtools", "index", "-@", str(args.threads), sbam])
    want = src_info["records"] * copies
    for f in (bam, sbam):
        got = records.get(f)
        if got is None:
            got = int(subprocess.run(["samtools", "view", "-c", "-@", str(args.threads), f],
                                     check=True, stdout=subprocess.PIPE, text=True).stdout)
        if got != want:
            sys.exit(f"{f}: {got} records, expected {want}")
    sortase = os.path.join(os.path.dirname(BENCH_DIR), "target", "release", "sortase")
    if os.path.exists(sortase):
        run([sortase, "sort", "--verify", sbam])
    info = {
        "size": name,
        "description": f"the {base} data {copies} times over on a reference of {copies} copies "
                       f"(bench/generate.py --size {name}; {src_info['description']})",
        "created": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "generator": f"bench/generate.py --size {name}",
        "derived_from": os.path.join(src_dir, f"{base}.json"),
        "copies": copies,
        "files": {
            "bam": {"path": bam, "bytes": os.path.getsize(bam), "records": want,
                    "order": "aligner within each copy, copies one after the other"},
            "sorted_bam": {"path": sbam, "bytes": os.path.getsize(sbam), "records": want,
                           "order": f"coordinate (copies of the samtools-sorted {base} data)"},
            "bai": {"path": sbam + ".bai"},
        },
        "records": want,
        "bytes": os.path.getsize(bam),
        "bytes_per_record": round(os.path.getsize(bam) / want, 1),
        "timings_s": {"derive": round(time.time() - t, 1)},
    }
    with open(os.path.join(out, f"{name}.json.tmp"), "w") as f:
        json.dump(info, f, indent=2)
        f.write("\n")
    os.replace(os.path.join(out, f"{name}.json.tmp"), os.path.join(out, f"{name}.json"))
    log(f"{name}: {want:,} records, {human(info['bytes'])} -> {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", choices=sorted(SIZES), required=True)
    ap.add_argument("--out", default="/work/bench-data", help="data directory (outside the repo)")
    ap.add_argument("--threads", type=int, default=2, help="threads for minimap2/sort (default 2)")
    ap.add_argument("--seed", type=int, default=20240,
                    help="seed for reference/donor/duplicates (ART seeds are per size)")
    ap.add_argument("--coverage", type=float, default=None,
                    help="override the nuclear ART coverage of the size")
    ap.add_argument("--keep-fastq", action="store_true", help="keep DIR/work-SIZE/R1.fq, R2.fq")
    ap.add_argument("--from", dest="source", metavar="DIR",
                    help="xl, small16: the directory of the data it is derived from")
    ap.add_argument("--copies", type=int, default=None, help="xl: copies of the large data (4)")
    args = ap.parse_args()

    out = os.path.abspath(args.out)
    repo = os.path.dirname(BENCH_DIR)
    if out == repo or out.startswith(repo + os.sep):
        sys.exit(f"--out {out} is inside the repository; use a directory outside it")
    if "derived_from" in SIZES[args.size]:
        if not args.source:
            sys.exit(f"--size {args.size} needs --from DIR (the {SIZES[args.size]['derived_from']} data)")
        if shutil.which("samtools") is None:
            sys.exit("required tool not found: samtools")
        return derive_xl(args, SIZES[args.size], out)
    for tool in ("art_illumina", "minimap2", "samtools"):
        if shutil.which(tool) is None:
            sys.exit(f"required tool not found: {tool}")
    cfg = SIZES[args.size]
    work = os.path.join(out, f"work-{args.size}")
    os.makedirs(work, exist_ok=True)
    ref = os.path.join(out, cfg["ref"] + ".fa")
    paths = {
        "out": out, "work": work, "ref": ref,
        "donor": os.path.join(out, cfg["ref"] + ".donor.fa"),
        "donor_mt": os.path.join(out, cfg["ref"] + ".donor.chrM.fa"),
        "mmi": os.path.join(out, cfg["ref"] + ".sr.mmi"),
        "r1": os.path.join(work, "R1.fq"), "r2": os.path.join(work, "R2.fq"),
        "bam": os.path.join(out, f"{args.size}.bam"),
        "sorted": os.path.join(out, f"{args.size}.sorted.bam"),
        "json": os.path.join(out, f"{args.size}.json"),
    }
    state = State(os.path.join(work, "state.json"))
    log(f"generate {args.size} -> {out} (seed {args.seed}, threads {args.threads})")
    for step in (step_reference, step_art, step_fastq, step_index, step_align,
                 step_sort, step_stats, step_cleanup):
        step(args, cfg, paths, state)
    log(f"done: {paths['bam']}, {paths['sorted']}, {paths['json']}")


if __name__ == "__main__":
    main()
