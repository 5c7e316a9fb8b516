#!/bin/sh
# The fuzz smoke test of one target: runs every seed of its corpus, then a few thousand
# mutations with a fixed seed. New inputs go to a scratch folder of the build tree, never into
# the corpus in the source tree; a crash fails the test and leaves its input there.
# Usage: smoke.sh TARGET CORPUS SCRATCH [libFuzzer flags...]
set -eu
target=$1 corpus=$2 scratch=$3
shift 3
rm -rf "$scratch"
mkdir -p "$scratch/new" "$scratch/crashes"
"$target" -seed=1 -runs="${GPUMETER_FUZZ_SMOKE_RUNS:-4000}" -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$scratch/crashes/" -print_final_stats=1 "$@" "$scratch/new" "$corpus"
rm -rf "$scratch/new"
