#!/usr/bin/env bash
# Every test sortase has: formatting, clippy, unit and property tests, end-to-end tests against
# samtools 1.24 (pysam) on the htslib-test corpus and generated edge cases, benchmark compilation, and
# the Python package's pytest suite (with FUZZ_SECONDS=N also a short fuzz run of each target).
# `.ci/run` runs exactly this.
# Python (pysam for the oracle, the wheel, pytest) runs from the clone's .venv (scripts/venv.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s); t=$t0
stage() {   # prints the seconds the stage before took, so a slow CI run shows where its time went
  local now; now=$(date +%s)
  [ -n "${stage_name:-}" ] && echo "== ${stage_name}: $((now - t)) s (total $((now - t0)) s)"
  stage_name="$1"; t=$now
  [ -n "$1" ] && echo "== $1"
  return 0
}
stage "setup"
bash scripts/setup.sh
source scripts/venv.sh   # exports SORTASE_PYTHON=.venv/bin/python (the e2e oracle's interpreter)
export SORTASE_REQUIRE_SAMTOOLS=1
# A clean clone builds everything once: incremental compilation's bookkeeping is only cost there
# (~11% of the workspace crates' compile time, measured with `cargo test --no-run --timings`).
[ "${CI:-}" = true ] && export CARGO_INCREMENTAL=0
stage "cargo fmt"; cargo fmt --all --check
# Function-size p99 at most 70 lines workspace-wide (issue 28): long functions are split into named
# phases, not added to.
stage "function sizes"; "$PY" scripts/function-sizes.py . --max-p99 70
stage "cargo clippy"; cargo clippy --workspace --all-targets -- -D warnings
# Four test threads: the e2e tests wait on the CLI and the pysam oracle's processes, and with the
# default two they kept 1.45 of the 2 cores busy.
stage "cargo test"; cargo test --workspace -- --test-threads 4
# The wheel in the dev profile: it reuses cargo test's build (the release wheel is demo.sh's), as
# long as both resolve the shared dependencies with the same features (check-wheel-reuse.sh).
stage "python package (dev wheel)"; bash scripts/check-wheel-reuse.sh; bash scripts/python-build.sh --dev
# Two pytest workers, a test module each (module fixtures are built once): serially the suite kept
# one core busy (199.7 s; 138.3 s with -n 2). --durations names the slow tests in CI's log.
stage "pytest"; "$PY" -m pytest python/tests -q -p no:cacheprovider -n 2 --dist loadfile --durations=15
# The ASan fuzz smoke is opt-in (FUZZ_SECONDS=10 scripts/test-all.sh, or bash fuzz/smoke.sh): it is a
# second full build of the tree on nightly (~9.5 of ~34 minutes on 2 cores), and CI must stay under 25.
if [ -d fuzz ] && [ "${FUZZ_SECONDS:-0}" != 0 ]; then
  stage "fuzz smoke"; bash fuzz/smoke.sh
fi
stage ""
echo "== all tests passed"
