#!/usr/bin/env bash
# The README's first command: installs what is needed, builds sortase, generates a small paired-end
# example (synthetic reference, ART reads, minimap2 alignments; ~7 MB BAM, outside the repository) and
# runs sortase on it next to samtools 1.24, checking that every output agrees.
# Python packages (pysam, the `sortase` wheel, ...) go into the clone's .venv, not the user's python3:
# afterwards `. .venv/bin/activate` gives a shell where `python -c 'import sortase'` works.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh          # system tools (one list, in setup.sh) and .venv with pysam
source scripts/venv.sh         # PY=.venv/bin/python
cargo build --release
bash scripts/python-build.sh   # the Python package `sortase` (abi3 wheel, installed into .venv)
data="${SORTASE_DEMO_DIR:-${TMPDIR:-/tmp}/sortase-demo}"
"$PY" bench/generate.py --size tiny --out "$data"
S=target/release/sortase
ST="$PY -S bench/samtools-1.24"
in="$data/tiny.bam"
sorted="$data/tiny.sorted.bam"
out="$data/demo"
mkdir -p "$out"

step() { printf '\n== %s\n' "$*"; }
TIMEFORMAT='   (%R s)'
timed() { time "$@"; }
same() { if cmp -s "$1" "$2"; then echo "   identical to samtools: $3"; else echo "   DIFFERENT from samtools: $3"; diff <(head -5 "$1") <(head -5 "$2") || true; exit 1; fi; }

step "sortase sort --write-index (aligner order -> coordinate order + CSI, on all cores)"
timed $S sort --write-index -o "$out/sorted.bam" "$in"
timed $ST sort -o "$out/st-sorted.bam" "$in"
$ST view --no-PG -h "$out/sorted.bam" | grep -v '^@PG' > "$out/a.sam"
$ST view --no-PG -h "$out/st-sorted.bam" | grep -v '^@PG' > "$out/b.sam"
same "$out/a.sam" "$out/b.sam" "sorted records and header"
$ST index -c -o "$out/ref-sorted.csi" "$out/sorted.bam"
same "$out/sorted.bam.csi" "$out/ref-sorted.csi" "on-the-fly CSI bytes"

step "sortase sort -n with a tiny memory budget (LZ4 runs, background compaction, merge)"
timed $S sort -n -v --max-memory 1M --max-fan-in 4 -o "$out/byname.bam" "$in"
$ST sort -n -o "$out/st-byname.bam" "$in"
$ST view --no-PG "$out/byname.bam" > "$out/a.sam"; $ST view --no-PG "$out/st-byname.bam" > "$out/b.sam"
same "$out/a.sam" "$out/b.sam" "name-sorted records"

step "sortase view -b (BAM -> BAM, all cores)"
timed $S view -b -o "$out/copy.bam" "$in"
$ST view --no-PG "$out/copy.bam" > "$out/a.sam"; $ST view --no-PG "$in" > "$out/b.sam"
same "$out/a.sam" "$out/b.sam" "records of the re-encoded BAM"

step "sortase view -h (BAM -> SAM)"
timed $S view --no-PG -h -o "$out/ours.sam" "$in"
$ST view --no-PG -h -o "$out/theirs.sam" "$in"
same "$out/ours.sam" "$out/theirs.sam" "SAM text"

step "sortase index (BAI and CSI, on all cores)"
cp "$sorted" "$out/s.bam"
timed $S index "$out/s.bam"
$ST index -o "$out/ref.bai" "$out/s.bam"
same "$out/s.bam.bai" "$out/ref.bai" "BAI bytes"
$S index -c "$out/s.bam"; $ST index -c -o "$out/ref.csi" "$out/s.bam"
same "$out/s.bam.csi" "$out/ref.csi" "CSI bytes"

step "sortase flagstat"
timed $S flagstat "$in" > "$out/fs.ours"
$ST flagstat "$in" > "$out/fs.theirs"
same "$out/fs.ours" "$out/fs.theirs" "flagstat"
cat "$out/fs.ours"

step "sortase view -c with a region on the indexed BAM"
region=$(head -1 "$data/ref-tiny.fa.fai" | cut -f1):1-200000
echo "   region $region: $($S view -c "$out/s.bam" "$region") records (samtools: $($ST view -c "$out/s.bam" "$region"))"
step "Python: sortase.read_bam into Arrow (projection) and flagstat, against pysam"
"$PY" - "$out/s.bam" <<'PY'
import sys, pysam, sortase
path = sys.argv[1]
t = sortase.read_bam(path, columns=["qname", "flag", "rname", "pos", "mapq"])
with pysam.AlignmentFile(path) as f:
    ref = [(r.query_name, r.flag, r.reference_start + 1 if r.reference_id >= 0 else 0, r.mapping_quality) for r in f]
ours = list(zip(t["qname"].to_pylist(), t["flag"].to_pylist(), t["pos"].to_pylist(), t["mapq"].to_pylist()))
assert ours == ref, "read_bam differs from pysam"
print(f"   read_bam: {t.num_rows} rows, qname/flag/pos/mapq identical to pysam")
print("   flagstat:", {k: v for k, v in sortase.flagstat(path)["QC-passed reads"].items() if k in ("total", "mapped", "duplicates")} if hasattr(sortase, "flagstat") else "(not in this build)")
PY
printf '\nAll outputs agree with samtools 1.24. Data and outputs: %s\n' "$data"
printf 'The Python package is in .venv: . .venv/bin/activate; python -c "import sortase"\n'
