#!/usr/bin/env bash
# Longer fuzzing with a report: runs every cargo-fuzz target (or the named ones) for FUZZ_MINUTES
# (default 5) each, one after the other, with AddressSanitizer (cargo fuzz's default `-s address`),
# starting from fuzz/seeds/<target> plus the corpus earlier runs left in fuzz/corpus/<target>, and
# writes bench/FUZZ.md: per target the seconds run, executions per second, coverage (libFuzzer's
# `cov:` edges and `ft:` features at the end), corpus size and findings (crash/leak/timeout/oom
# artifacts, left in fuzz/artifacts/<target>/).
#
#   bash bench/fuzz.sh                        # every target, 5 minutes each
#   FUZZ_MINUTES=30 bash bench/fuzz.sh cram_decode bam_header
#
# Needs a nightly toolchain and cargo-fuzz, as fuzz/smoke.sh (which CI runs for 15 s per target).
set -uo pipefail
cd "$(dirname "$0")/.."

minutes="${FUZZ_MINUTES:-5}"
seconds=$((minutes * 60))
all_targets=(bgzf_reader record_splitter sam_parse range_planner fasta_scan bam_header cram_decode
  vcf_sites fastq_read agd_manifest task_json)
targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=("${all_targets[@]}")
report="${FUZZ_REPORT:-bench/FUZZ.md}"

# As in fuzz/smoke.sh: libdeflate's duplicate static table trips the ODR check; the readers'
# detached worker threads are reported as leaks at exit.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_odr_violation=0:detect_leaks=0"

if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "fuzz: needs a nightly toolchain and cargo-fuzz (rustup toolchain install nightly; cargo install cargo-fuzz)" >&2
  exit 1
fi
start=$(date +%s)
cargo +nightly fuzz build -s address || { echo "fuzz: build failed" >&2; exit 1; }
build_seconds=$(($(date +%s) - start))

rows=()
total_findings=0
for t in "${targets[@]}"; do
  corpus="fuzz/corpus/$t"
  artifacts="fuzz/artifacts/$t"
  mkdir -p "$corpus" "$artifacts" fuzz/target/fuzz-logs
  [ -d "fuzz/seeds/$t" ] && cp -n fuzz/seeds/"$t"/* "$corpus"/ 2>/dev/null
  before=$(find "$artifacts" -type f | wc -l)
  args=(-max_total_time="$seconds" -max_len=200000 -timeout=20 -rss_limit_mb=2048 -malloc_limit_mb=1024
    -detect_leaks=0 -print_final_stats=1)
  [ -f "fuzz/dicts/$t.dict" ] && args+=(-dict="fuzz/dicts/$t.dict")
  log="fuzz/target/fuzz-logs/$t.log"
  echo "fuzz: $t for ${minutes} min (log: $log)"
  t0=$(date +%s)
  # A crash stops libFuzzer; -fork would go on, but one finding at a time keeps the log readable:
  # rerun after fixing.
  cargo +nightly fuzz run -s address "$t" "$corpus" -- "${args[@]}" >"$log" 2>&1
  status=$?
  ran=$(($(date +%s) - t0))
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*')
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*')
  found=$(( $(find "$artifacts" -type f | wc -l) - before ))
  total_findings=$((total_findings + found))
  what="none"
  if [ "$status" -ne 0 ] || [ "$found" -gt 0 ]; then
    what=$(grep -m1 -E "panicked at|ERROR: (libFuzzer|AddressSanitizer)" "$log" | cut -c1-120 | tr '|' '/')
    what="exit $status: ${what:-see log}"
  fi
  rows+=("| \`$t\` | $ran | ${execs:-?} | ${rate:-?} | ${cov:-?} | ${ft:-?} | $(find "$corpus" -type f | wc -l) | $found: $what |")
  echo "fuzz: $t: ${ran} s, ${execs:-?} runs, ${rate:-?}/s, cov ${cov:-?}, findings $found"
done

{
  echo "# Fuzzing report"
  echo
  echo "\`bench/fuzz.sh\` (FUZZ_MINUTES=$minutes), $(date -u +%Y-%m-%d), $(cargo +nightly --version | cut -d' ' -f1-2),"
  echo "AddressSanitizer, \`-malloc_limit_mb=1024 -rss_limit_mb=2048\`, $(nproc) cores shared with other work;"
  echo "fuzz crate built in ${build_seconds} s (incremental on an earlier build when short)."
  echo "Coverage is libFuzzer's count of covered edges (\`cov\`) and features (\`ft\`) at the end of the run."
  echo
  echo "| target | seconds | executions | execs/s | cov | ft | corpus | findings |"
  echo "|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} >"$report.new"
# Keep the notes below the table (findings fixed, regression tests) from the previous report.
if [ -f "$report" ] && grep -q '^## ' "$report"; then
  echo >>"$report.new"
  sed -n '/^## /,$p' "$report" >>"$report.new"
fi
mv "$report.new" "$report"
echo "fuzz: report in $report"
[ "$total_findings" -eq 0 ]
