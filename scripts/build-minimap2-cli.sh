#!/usr/bin/env bash
# Builds minimap2's own command-line program from the C sources that the `minimap2-sys` crate vendors
# (the library `sortase fq2bam` links), so that the identity oracle of the fq2bam tests and benchmark
# is the same minimap2 version as the library (Debian's minimap2 is older: 2.24).
# Copies the vendored directory out of cargo's registry into a cache directory and runs `make` there.
# Idempotent: an existing build is kept. Prints the binary's path on stdout.
#   scripts/build-minimap2-cli.sh            # -> ~/.cache/sortase/minimap2-<crate version>/minimap2
#   SORTASE_MINIMAP2_CACHE=DIR scripts/build-minimap2-cli.sh
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
version="$(grep -A1 '^name = "minimap2-sys"$' "$repo/Cargo.lock" | sed -n 's/^version = "\(.*\)"$/\1/p')"
if [ -z "$version" ]; then
  echo "build-minimap2-cli: minimap2-sys not in Cargo.lock" >&2
  exit 1
fi
cache="${SORTASE_MINIMAP2_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sortase}/minimap2-$version"
if [ -x "$cache/minimap2" ]; then
  echo "$cache/minimap2"
  exit 0
fi
registry="${CARGO_HOME:-$HOME/.cargo}/registry/src"
src="$(ls -d "$registry"/*/"minimap2-sys-$version"/minimap2 2>/dev/null | head -n1 || true)"
if [ -z "$src" ]; then
  (cd "$repo" && cargo fetch -q) >&2
  src="$(ls -d "$registry"/*/"minimap2-sys-$version"/minimap2 | head -n1)"
fi
mkdir -p "$(dirname "$cache")"
tmp="$(mktemp -d "$cache.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
cp -r "$src"/. "$tmp"
make -s -C "$tmp" -j"$(nproc)" minimap2 >&2
rm -rf "$cache"
mv "$tmp" "$cache"
trap - EXIT
echo "$cache/minimap2"
