#!/usr/bin/env bash
# Installs what sortase's tests, demo and benchmarks need, skipping what is already there.
#
# System packages (Debian/Ubuntu; the ONE list of them, used only where a tool has no other source):
#   htslib-test   htslib's test corpus (the end-to-end tests run every file against samtools)
#   tabix         htslib's bgzip, the oracle of `sortase bgzip`
#   minimap2, art-nextgen-simulation-tools   the demo's and benchmarks' simulated, aligned reads
#   samtools      Debian's 1.16: bench/generate.py's SAM -> BAM, faidx and checks (the oracle is 1.24)
#   time          GNU time (peak RSS in the benchmarks)
#   samblaster, picard-tools   the oracles of `sortase markdup`
#   cmake         libz-sys builds zlib-ng with it for the CRAM codec (crates/htslib)
#   nasm, autoconf, automake, libtool   isal-sys builds ISA-L (crates/bgzf's DEFLATE at levels 1-2)
#   curl          crates/htslib's build.rs downloads the htslib 1.24 sources with it (the pysam 0.24.1
#                 sdist from PyPI) unless SORTASE_HTSLIB_SRC names a local copy
#   python3-venv  `python3 -m venv` with pip (Debian splits it from python3)
#   with --bench also the benchmarks' peers and tools (bench/report.py, bench/setup-peer.sh):
#   sambamba, biobambam2 (bamsort, bamsormadup), linux-perf (profiles), libdeflate-dev
#   zlib1g-dev libbz2-dev liblzma-dev to build samtools 1.24 with libdeflate from source
#
# Python packages go into the clone's own virtual environment `.venv` (scripts/venv.sh, which lists
# them), never into the user's python3: pysam 0.24.1, whose bundled samtools 1.24 is the test oracle
# (tests/samtools), maturin for the wheel, pytest, pyarrow, DuckDB, Dask, ...
# Idempotent; installing Debian packages needs root or sudo.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

apt_packages=(htslib-test tabix minimap2 art-nextgen-simulation-tools samtools time samblaster picard-tools
              cmake curl nasm autoconf automake libtool python3-venv)
bench_packages=(sambamba biobambam2 linux-perf libdeflate-dev zlib1g-dev libbz2-dev liblzma-dev)
[ "${1:-}" = "--bench" ] && apt_packages+=("${bench_packages[@]}")
missing=()
for p in "${apt_packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}" >/dev/null
fi

source scripts/venv.sh
venv_require "${dev_requirements[@]}"
if ! "$PY" -c 'import pysam, sys; sys.exit(pysam.__version__ != "0.24.1")' 2>/dev/null; then
  echo "setup: installing pysam 0.24.1 (samtools 1.24) into .venv"
  "$PY" -m pip install -q pysam==0.24.1
fi
echo "setup: .venv has $("$PY" -c 'import pysam; print("pysam", pysam.__version__)'), htslib-test at /usr/share/htslib-test"
echo "setup: minimap2 CLI of the library's version at $(bash scripts/build-minimap2-cli.sh)"
