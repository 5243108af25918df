# Sourced by the other scripts: the clone's own Python environment, `.venv` at the top of the clone,
# created with the standard `python3 -m venv` if it is missing. Everything Python that sortase's
# scripts install (pysam for the samtools oracle, maturin, pyarrow, pytest, Dask, ...) goes into it;
# the user's own python3 and its site-packages are never written to.
#
# Sets ROOT (the clone), VENV (its .venv), PY (.venv/bin/python) and exports SORTASE_PYTHON=$PY, which
# the end-to-end tests use to run the samtools oracle (tests/e2e/oracle.rs).
# PYTHON=python3.12 picks the interpreter the venv is created from (first creation only).
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV="$ROOT/.venv"
PY="$VENV/bin/python"
if [ ! -x "$PY" ]; then
  echo "venv: creating $VENV with ${PYTHON:-python3} -m venv" >&2
  "${PYTHON:-python3}" -m venv "$VENV" || {
    echo "venv: '${PYTHON:-python3} -m venv' failed; on Debian/Ubuntu install python3-venv (scripts/setup.sh does)" >&2
    exit 1
  }
fi
export SORTASE_PYTHON="$PY"

# What the tests, the demo and the wheel build need in .venv, as module:pip-requirement pairs: pysam's
# bundled samtools 1.24 is the oracle; maturin builds the wheel; the Dask driver's tests need a local
# S3 server (moto + flask); DuckDB reads AGD datasets in an end-to-end test.
dev_requirements=(pysam:pysam==0.24.1 maturin:maturin pyarrow:pyarrow pytest:pytest xdist:pytest-xdist polars:polars
                  duckdb:duckdb tqdm:tqdm distributed:dask[distributed] s3fs:s3fs moto:moto[s3]
                  flask:flask flask_cors:flask-cors mypy:mypy)

# venv_require MODULE:REQUIREMENT...: pip-install into the venv the requirements whose module does
# not import yet (one pip call; nothing when all are there).
venv_require() {
  local missing=() pair
  for pair in "$@"; do
    "$PY" -c "import ${pair%%:*}" 2>/dev/null || missing+=("${pair#*:}")
  done
  if ((${#missing[@]})); then
    echo "venv: installing into .venv: ${missing[*]}" >&2
    "$PY" -m pip install --quiet "${missing[@]}"
  fi
}
