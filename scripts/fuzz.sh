#!/usr/bin/env bash
# A fuzzing campaign over every parser of untrusted input (docs/fuzzing.md).
# Usage: scripts/fuzz.sh [RUNS | SECONDSs] [TARGET...]
#   RUNS      executions per target (default 1000000); "600s" runs each target for 600 seconds
#   TARGET    fuzz_config, fuzz_pricing, ... (default: every target in tests/fuzz)
# Builds the fuzz preset, runs the targets in parallel on every core, each from its corpus in
# tests/fuzz/corpus, and prints per target: executions, crashes, new corpus entries, time.
# Everything a run makes is under build-fuzz/campaign/<UTC time>/<target>/: log, corpus (new
# inputs, never written into the source tree) and crashes. Exits 1 when anything crashed.
set -euo pipefail
cd "$(dirname "$0")/.."

budget=${1:-1000000}
if [[ $budget =~ ^[0-9]+s$ ]]; then
  limit="-max_total_time=${budget%s}"
elif [[ $budget =~ ^[0-9]+$ ]]; then
  limit="-runs=$budget"
else
  echo "fuzz.sh: '$budget' is neither a number of runs (1000000) nor of seconds (600s)" >&2
  exit 2
fi
shift || true
if (($# > 0)); then
  targets=("$@")
else
  mapfile -t targets < <(cd tests/fuzz && ls fuzz_*.cpp | sed 's/\.cpp$//')
fi
for t in "${targets[@]}"; do
  if [[ ! -f tests/fuzz/$t.cpp ]]; then
    echo "fuzz.sh: no target '$t' (tests/fuzz/$t.cpp)" >&2
    exit 2
  fi
done

echo "== build (preset fuzz)"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$(nproc)"

run_dir=build-fuzz/campaign/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$run_dir"
echo "== campaign $limit per target, ${#targets[@]} targets on $(nproc) cores, in $run_dir"

run_one() {
  local t=$1 dir=$run_dir/$1
  mkdir -p "$dir/corpus" "$dir/crashes"
  local dict=()
  [[ -f tests/fuzz/dict/$t.dict ]] && dict=("-dict=tests/fuzz/dict/$t.dict")
  local start=$SECONDS
  # A crash stops the target: its input is in crashes/, and the executions show how far it got.
  build-fuzz/bin/"$t" "$limit" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$dir/crashes/" "${dict[@]}" "$dir/corpus" "tests/fuzz/corpus/$t" >"$dir/log" 2>&1 || true
  echo $((SECONDS - start)) >"$dir/seconds"
  echo "   $t done"
}
export -f run_one
export run_dir limit
printf '%s\n' "${targets[@]}" | xargs -P "$(nproc)" -I{} bash -c 'run_one {}'

status=0
printf '\n%-20s %12s %8s %12s %8s\n' target executions crashes new-corpus seconds
for t in "${targets[@]}"; do
  dir=$run_dir/$t
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
  crashes=$(find "$dir/crashes" -type f | wc -l)
  new=$(find "$dir/corpus" -type f | wc -l)
  printf '%-20s %12s %8s %12s %8s\n' "$t" "${execs:-?}" "$crashes" "$new" "$(cat "$dir/seconds")"
  if ((crashes > 0)) || [[ -z $execs ]]; then status=1; fi
done
if ((status != 0)); then
  echo
  echo "Crashes (reproduce with build-fuzz/bin/<target> <file>; the log shows the stack):"
  find "$run_dir" -path '*/crashes/*' -type f | sed 's/^/  /'
fi
echo
echo "To keep the new inputs: build-fuzz/bin/<target> -merge=1 tests/fuzz/corpus/<target> $run_dir/<target>/corpus"
exit $status
