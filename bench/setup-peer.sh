#!/usr/bin/env bash
# The speed peer (issue 22): samtools 1.24 as users build it, with libdeflate. pysam 0.24.1's source
# distribution runs htslib's own configure, which links libdeflate when libdeflate-dev is installed.
# Installs into its own virtualenv (default /work/bench-venv) and checks pysam.config.HAVE_LIBDEFLATE.
# Idempotent; ~10-15 min of one core the first time. bench/samtools-1.24-libdeflate wraps it.
set -euo pipefail
VENV="${SORTASE_PEER_VENV:-/work/bench-venv}"
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
if ! dpkg -s libdeflate-dev >/dev/null 2>&1; then
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q libdeflate-dev zlib1g-dev libbz2-dev liblzma-dev >/dev/null
fi
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import pysam, sys; sys.exit(not (pysam.__version__ == "0.24.1" and pysam.config.HAVE_LIBDEFLATE))' 2>/dev/null; then
  echo "setup-peer: $VENV has pysam 0.24.1 with libdeflate"
  exit 0
fi
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
HTSLIB_CONFIGURE_OPTIONS="--with-libdeflate --disable-libcurl --disable-gcs --disable-s3" \
  "$VENV/bin/pip" install -q --no-binary pysam pysam==0.24.1
"$VENV/bin/python" -c 'import pysam, sys; print("pysam", pysam.__version__, "HAVE_LIBDEFLATE", pysam.config.HAVE_LIBDEFLATE); sys.exit(not pysam.config.HAVE_LIBDEFLATE)'
