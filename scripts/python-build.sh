#!/usr/bin/env bash
# Builds the Python package `sortase` (crates/py + python/sortase) as one abi3 wheel with maturin and
# installs it into the clone's .venv (scripts/venv.sh), first installing maturin and the test
# dependencies there if they are missing. The user's own python3 is left alone. Idempotent: run it
# again after a change; cargo rebuilds only what changed.
#
#   scripts/python-build.sh                          # release wheel (what users get) into .venv
#   scripts/python-build.sh --dev                    # dev-profile wheel: reuses most of what
#                                                    # `cargo test` built (scripts/test-all.sh uses it)
#   PYTHON=python3.12 scripts/python-build.sh        # base interpreter, if .venv does not exist yet
#   . .venv/bin/activate; python -c 'import sortase' # use it
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh

venv_require "${dev_requirements[@]}"   # maturin, pyarrow, pytest, ... (listed in scripts/venv.sh)

# --dev: the test suite's wheel. A release wheel rebuilds the whole dependency tree with thin LTO
# (minutes on 2 cores); the dev profile (opt-level 1, dependencies at 2) shares target/debug with
# `cargo test`, so only the crates whose build inputs maturin changes (pyo3, and what feature or
# environment differences reach) are compiled again.
profile=(--release)
[ "${1:-}" = "--dev" ] && profile=(--profile dev)
rm -f target/wheels/sortase-*.whl
start=$(date +%s)
"$PY" -m maturin build "${profile[@]}" --quiet --interpreter "$PY" --out target/wheels
echo "python-build: wheel (${profile[*]}) built in $(($(date +%s) - start)) s" >&2
"$PY" -m pip install --quiet --force-reinstall --no-deps target/wheels/sortase-*.whl
"$PY" -c 'import sortase; print("python-build: sortase", sortase.__version__, "installed from", sortase.__file__)'
