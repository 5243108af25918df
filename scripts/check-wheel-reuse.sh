#!/usr/bin/env bash
# Fails when the dev wheel (scripts/python-build.sh --dev) would not reuse `cargo test --workspace`'s
# build of a dependency. Cargo resolves features for the packages it builds: `cargo test
# --workspace` unifies them over every member and its dev-dependencies, maturin over sortase-py
# alone. A crate both builds use but with other features gets another hash, and so does everything
# above it: bitflags without "std" once made the wheel compile arrow, parquet, noodles, object_store
# and every sortase crate a second time (~2 of the dev wheel's ~3 minutes in CI). Crates only the
# wheel uses (pyo3 and its build helpers) are compiled for it in any case and are not compared.
# The fix for a reported crate: name it in crates/py/Cargo.toml with the workspace's features.
set -euo pipefail
cd "$(dirname "$0")/.."
features() {   # "name version|feature,feature" lines, one per distinct resolution
  cargo tree --prefix none -f '{p}|{f}' "$@" | sed 's/ (\*)$//; s/ (proc-macro)//' | sort -u
}
workspace=$(features --workspace -e normal,build,dev)
wheel=$(features -p sortase-py -e normal,build)
drift=()
while IFS= read -r line; do
  pkg=${line%%|*}
  grep -qxF -- "$line" <<<"$workspace" && continue
  # A package the test build does not have at all is the wheel's own (pyo3 and its helpers).
  grep -qF -- "$pkg|" <<<"$workspace" || continue
  drift+=("$pkg: wheel [${line#*|}], cargo test [$(grep -F -- "$pkg|" <<<"$workspace" | cut -d'|' -f2 | paste -sd' ' -)]")
done <<<"$wheel"
if ((${#drift[@]})); then
  echo "check-wheel-reuse: the dev wheel resolves these crates with other features than cargo test," >&2
  echo "so it would compile them and every crate above them again:" >&2
  printf '  %s\n' "${drift[@]}" >&2
  echo "name each in crates/py/Cargo.toml with cargo test's features" >&2
  exit 1
fi
echo "check-wheel-reuse: the dev wheel's $(wc -l <<<"$wheel") crate resolutions reuse cargo test's build"
