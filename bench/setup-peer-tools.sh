#!/usr/bin/env bash
# The peers of issue 33, each in bench's own root (never the user's Python or ~/.cargo/bin):
#   ROOT/bin/mako        fg-mako (`cargo install`): the fgumi sort engine       bench/compare.py sort-mako, sort-n-mako
#   ROOT/bin/dupblaster  dupblaster (`cargo install`): samblaster-style marking  bench/compare.py markdup-dupblaster*
#   ROOT/venv            a virtualenv with polars-bio (and pyarrow)             bench/python_read.py pb-* variants
# ROOT: $SORTASE_PEER_ROOT, default target/bench-peers of this clone (compare.py and python_read.py
# look there by default too). Versions are pinned below; the crates build with their own
# Cargo.lock (--locked). Idempotent: what is installed at the pinned version is kept. The two cargo
# builds take ~15-25 min of two cores the first time. bench/setup-peer.sh --tools runs this.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
ROOT="${SORTASE_PEER_ROOT:-$REPO/target/bench-peers}"
MAKO_VERSION=0.1.8
DUPBLASTER_VERSION=0.3.0
POLARS_BIO_VERSION=0.36.2
mkdir -p "$ROOT"

# cargo_peer CRATE VERSION BINARY: `cargo install` into ROOT unless BINARY is there at VERSION.
cargo_peer() {
  local crate=$1 version=$2 binary=$3
  if [ -x "$ROOT/bin/$binary" ] && grep -q "^\"$crate $version " "$ROOT/.crates.toml" 2>/dev/null; then
    echo "setup-peer-tools: $crate $version in $ROOT/bin/$binary"
    return
  fi
  echo "setup-peer-tools: cargo install $crate $version into $ROOT" >&2
  cargo install --locked --root "$ROOT" --version "=$version" "$crate"
}
cargo_peer fg-mako "$MAKO_VERSION" mako
cargo_peer dupblaster "$DUPBLASTER_VERSION" dupblaster

VENV="$ROOT/venv"
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "
import importlib.metadata as m, sys
sys.exit(m.version('polars-bio') != '$POLARS_BIO_VERSION')" 2>/dev/null; then
  echo "setup-peer-tools: polars-bio $POLARS_BIO_VERSION in $VENV"
else
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q "polars-bio==$POLARS_BIO_VERSION" pyarrow
fi
"$ROOT/bin/mako" --version | head -1
"$ROOT/bin/dupblaster" --version | head -1
"$VENV/bin/python" -c 'import polars_bio, polars; print("polars-bio", polars_bio.__version__, "polars", polars.__version__)'
