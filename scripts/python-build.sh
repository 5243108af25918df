#!/usr/bin/env bash
# Builds the Python package `sortase` (crates/py + python/sortase) as one abi3 wheel with maturin and
# installs it, first installing maturin and the test dependencies if they are missing. Idempotent:
# run it again after a change; cargo rebuilds only what changed.
#
#   scripts/python-build.sh            # release wheel (what users get)
#   PYTHON=python3.12 scripts/python-build.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

missing=()
# module:pip-requirement pairs (the Dask driver's tests need a local S3 server: moto + flask)
for pair in maturin:maturin pyarrow:pyarrow pytest:pytest polars:polars duckdb:duckdb tqdm:tqdm \
        pysam:pysam==0.24.1 distributed:dask[distributed] s3fs:s3fs moto:moto[s3] flask:flask \
        flask_cors:flask-cors; do
    "$PYTHON" -c "import ${pair%%:*}" 2>/dev/null || missing+=("${pair#*:}")
done
if ((${#missing[@]})); then
    echo "python-build: installing ${missing[*]}" >&2
    "$PYTHON" -m pip install --quiet "${missing[@]}"
fi

rm -f target/wheels/sortase-*.whl
start=$(date +%s)
"$PYTHON" -m maturin build --release --quiet --interpreter "$PYTHON" --out target/wheels
echo "python-build: wheel built in $(($(date +%s) - start)) s" >&2
"$PYTHON" -m pip install --quiet --force-reinstall --no-deps target/wheels/sortase-*.whl
"$PYTHON" -c 'import sortase; print("python-build: sortase", sortase.__version__, "installed from", sortase.__file__)'
