#!/usr/bin/env bash
# Installs what sortase's tests, demo and benchmarks need, skipping what is already there:
# Debian's htslib-test corpus, bgzip (tabix), minimap2, ART, GNU time, samblaster, Picard, cmake (hts-sys builds
# zlib-ng with it for the CRAM codec); samtools 1.24 (the oracle) via
# PyPI's pysam 0.24.1. Idempotent; run as root or with sudo available.
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

apt_packages=(htslib-test tabix minimap2 art-nextgen-simulation-tools time samblaster picard-tools cmake)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}" >/dev/null
fi

if ! python3 -c 'import pysam, sys; sys.exit(pysam.__version__ != "0.24.1")' 2>/dev/null; then
  echo "setup: installing pysam 0.24.1 (samtools 1.24)"
  python3 -m pip install -q pysam==0.24.1
fi
echo "setup: $(python3 -c 'import pysam; print("pysam", pysam.__version__)'), htslib-test at /usr/share/htslib-test"
echo "setup: minimap2 CLI of the library's version at $("$(dirname "$0")/build-minimap2-cli.sh")"
