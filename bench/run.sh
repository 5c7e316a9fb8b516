#!/usr/bin/env bash
# Benchmarks, in one command: builds, then measures the agent on a simulated node of 8 GPUs and
# 64 processes against nginx serving the identical bytes, and prints a table.
# Environment: BENCH_SECONDS (wrk duration per run, default 10), BENCH_CPU_SECONDS (idle CPU
# sampling window, default 60).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh bench
cmake --preset default -DGPUMETER_BUILD_BENCH=ON >/dev/null
cmake --build --preset default
exec /usr/bin/python3 bench/bench.py --build build "$@"
