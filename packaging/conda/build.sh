#!/usr/bin/env bash
# conda-build's build script (run from the top of the source, i.e. the clone). The same two steps
# install sortase anywhere: the binary with cargo, the Python package with pip through maturin.
set -euxo pipefail
# The `sortase` binary (release profile: no debug info), into the environment's bin/.
cargo install --locked --no-track --path . --root "$PREFIX"
# The Python package `sortase` (abi3 wheel built by maturin, pyproject.toml) into site-packages.
"$PYTHON" -m pip install . --no-deps --no-build-isolation -vv
