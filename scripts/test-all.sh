#!/usr/bin/env bash
# Every test sortase has: formatting, clippy, unit and property tests, end-to-end tests against
# samtools 1.24 (pysam) on the htslib-test corpus and generated edge cases, benchmark compilation and a
# short fuzz run of each target, and the Python package's pytest suite. `.ci/run` runs exactly this.
# Python (pysam for the oracle, the wheel, pytest) runs from the clone's .venv (scripts/venv.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/venv.sh   # exports SORTASE_PYTHON=.venv/bin/python (the e2e oracle's interpreter)
export SORTASE_REQUIRE_SAMTOOLS=1
echo "== cargo fmt"; cargo fmt --all --check
echo "== cargo clippy"; cargo clippy --workspace --all-targets -- -D warnings
echo "== cargo test"; cargo test --workspace
echo "== python package (wheel) and pytest"
bash scripts/python-build.sh
"$PY" -m pytest python/tests -q -p no:cacheprovider
if [ -d fuzz ]; then
  echo "== fuzz smoke"; FUZZ_SECONDS="${FUZZ_SECONDS:-20}" bash fuzz/smoke.sh
fi
echo "== all tests passed"
