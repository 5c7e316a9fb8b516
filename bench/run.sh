#!/usr/bin/env bash
# Benchmarks, in one command: builds, then measures the agent on a simulated node of 8 GPUs and
# 64 processes against nginx serving the identical bytes, the cost of owner attribution on a node
# of 8 GPUs and 500 processes (with and without resolvable owners), and the per-collection parts
# of the ledger; prints three tables. About six minutes with the defaults.
# Environment: BENCH_SECONDS (wrk duration per run, default 10), BENCH_CPU_SECONDS (idle CPU
# sampling window of each of the three agent runs, default 60).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh bench
cmake --preset default -DGPUMETER_BUILD_BENCH=ON >/dev/null
cmake --build --preset default
exec /usr/bin/python3 bench/bench.py --build build "$@"
