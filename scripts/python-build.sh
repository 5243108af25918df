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
for module in maturin pyarrow pytest polars duckdb tqdm pysam; do
    "$PYTHON" -c "import $module" 2>/dev/null || missing+=("$module")
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
