#!/usr/bin/env bash
# libdeflate's own speed, system build (what samtools links here) against the sources of the
# libdeflate-sys crate sortase links, on the first 32 MiB of decompressed BAM, levels as htslib maps
# samtools' 1-9 (1 2 3 5 6 7 8 10 12). Usage: bench/libdeflate-versions.sh BAM [ROUNDS]
set -euo pipefail
bam=${1:?usage: $0 BAM [ROUNDS]}; rounds=${2:-2}
here=$(cd "$(dirname "$0")" && pwd)
ver=$(awk '/^name = "libdeflate-sys"/ {getline; gsub(/[^0-9.]/, ""); print}' "$here/../Cargo.lock")
src=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/libdeflate-sys-"$ver"/libdeflate | head -1)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
gcc -O2 "$here/libdeflate_versions.c" -ldeflate -o "$tmp/system"
gcc -O2 -I"$src" "$here/libdeflate_versions.c" "$src"/lib/*.c "$src"/lib/x86/*.c -o "$tmp/crate"
"$here/../target/release/sortase" bgzip -dc "$bam" | head -c 33554432 > "$tmp/raw" || true
printf 'version\tlibdeflate level\tbytes in\tbytes out\tseconds\n'
for _ in $(seq "$rounds"); do
  for b in system crate; do "$tmp/$b" "$tmp/raw" 1 2 3 5 6 7 8 10 12; done
done
