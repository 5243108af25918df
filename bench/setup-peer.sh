#!/usr/bin/env bash
# The speed peer (issue 22): samtools 1.24 as users build it, with libdeflate. pysam 0.24.1's source
# distribution runs htslib's own configure, which links libdeflate when libdeflate-dev is installed.
# Installs into its own virtualenv (default /work/bench-venv) and checks pysam.config.HAVE_LIBDEFLATE.
# Idempotent; ~10-15 min of one core the first time. bench/samtools-1.24-libdeflate wraps it.
#
# `--libdeflate-crate`: link the libdeflate that sortase itself links (the libdeflate-sys crate's
# sources in the cargo registry, built here into the venv) instead of the system's, so a ratio
# measures sortase's code, not the libdeflate version: Debian's 1.14 compresses the same bytes as
# 1.26 but 1.20x slower at samtools' default level and 1.48x slower at -l 7 (bench/RESULTS.md).
# Default venv for it: /work/bench-venv-ld-crate; bench/samtools-1.24-libdeflate-crate wraps it.
#
# `--tools`: the peers of issue 33 instead (mako, dupblaster, polars-bio in their own root:
# bench/setup-peer-tools.sh says where and which versions).
set -euo pipefail
if [ "${1:-}" = "--tools" ]; then
  exec bash "$(dirname "$0")/setup-peer-tools.sh"
fi
CRATE=0; [ "${1:-}" = "--libdeflate-crate" ] && CRATE=1
if [ "$CRATE" = 1 ]; then
  VENV="${SORTASE_PEER_VENV:-/work/bench-venv-ld-crate}"
else
  VENV="${SORTASE_PEER_VENV:-/work/bench-venv}"
fi
# libdeflate-dev and the other build packages: scripts/setup.sh's one list of system packages
bash "$(dirname "$0")/../scripts/setup.sh" --bench
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import pysam, sys; sys.exit(not (pysam.__version__ == "0.24.1" and pysam.config.HAVE_LIBDEFLATE))' 2>/dev/null; then
  echo "setup-peer: $VENV has pysam 0.24.1 with libdeflate"
  exit 0
fi
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
if [ "$CRATE" = 1 ]; then
  # The version Cargo.lock pins, from the registry cargo has already filled (a build of sortase).
  ver=$(awk '/^name = "libdeflate-sys"/ {getline; gsub(/[^0-9.]/, ""); print}' "$(dirname "$0")/../Cargo.lock")
  src=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/libdeflate-sys-"$ver"/libdeflate | head -1)
  [ -d "$src" ] || { echo "setup-peer: libdeflate-sys $ver sources not found (build sortase first)" >&2; exit 1; }
  cmake -S "$src" -B "$VENV/libdeflate-build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$VENV/libdeflate" -DCMAKE_INSTALL_LIBDIR=lib >/dev/null
  cmake --build "$VENV/libdeflate-build" --target install -j2 >/dev/null
  export CFLAGS="-I$VENV/libdeflate/include" \
    LDFLAGS="-L$VENV/libdeflate/lib -Wl,-rpath,$VENV/libdeflate/lib"
fi
HTSLIB_CONFIGURE_OPTIONS="--with-libdeflate --disable-libcurl --disable-gcs --disable-s3" \
  "$VENV/bin/pip" install -q --no-binary pysam --no-cache-dir pysam==0.24.1
"$VENV/bin/python" -c 'import pysam, sys; print("pysam", pysam.__version__, "HAVE_LIBDEFLATE", pysam.config.HAVE_LIBDEFLATE); sys.exit(not pysam.config.HAVE_LIBDEFLATE)'
