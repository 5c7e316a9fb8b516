#!/usr/bin/env bash
# Benchmarks, in one command: builds, then measures the agent on a simulated node of 8 GPUs and
# 64 processes against nginx serving the identical bytes, the cost of owner attribution on a node
# of 8 GPUs and 500 processes (with and without resolvable owners), and the per-collection parts
# of the ledger; prints three tables. About six minutes with the defaults. Then counts the series
# the agent exports, by kind, on three simulated nodes (bench/sizing.py, under a minute), for
# sizing Prometheus. Then times good scrapes of the agent and of nginx under idle, slowloris and
# wrong-password clients (bench/attack.py, about four minutes). Then times `gpumeter report` over
# 30 days of a 1000-GPU fleet backfilled into
# a local Prometheus (bench/report_bench.py, about eight more minutes) and prints its table.
# Then serves a simulated fleet of 200 nodes (1600 GPUs) from one process to a real Prometheus
# scraping it every 15 s with the cost, budget and alert rules, and prints the samples, series,
# churn and rule evaluation times it measured (bench/fleet_bench.py, about six minutes).
# Then measures the agent beside the exporter users write (bench/peer_bench.py: Python, ctypes
# over NVML, prometheus_client) on the 64-process node, two alternating runs of each, and prints
# the ratios (about ten more minutes). Then measures what --compat adds: the body in each compat
# set and the per-snapshot render (bench/compat_bench.py, about half a minute). Then measures what
# profiling (GPM), NVLink and MIG cost the agent on 8 simulated H100 (bench/profiling_bench.py,
# about four minutes). Then measures what the PCIe throughput fallback of drivers before R555
# costs: the agent's CPU and collection latency with and without it (bench/pcie_bench.py, about
# two minutes). Then measures the
# agent on 8 simulated MI300X through the real ROCm SMI beside the same agent on 8 simulated H100
# (bench/rocm_bench.py, as root, about a minute and a half). Then builds the amd64 release bundle
# (scripts/release.sh) and measures its agent's memory beside this build's (bench/release_bench.py,
# about a minute once the bundle is built). Not run here: the CPU profile
# (bench/cpu_profile.py, where the agent's CPU goes) and the soak (scripts/soak.sh).
# Environment: BENCH_SECONDS (wrk duration per run, default 10), BENCH_CPU_SECONDS (idle CPU
# sampling window of each of the three agent runs, default 60), BENCH_PEER_SECONDS (each CPU
# window of the peer comparison, default 60), BENCH_PEER_REPEAT (its runs of each, default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh bench test
cmake --preset default -DGPUMETER_BUILD_BENCH=ON >/dev/null
cmake --build --preset default
/usr/bin/python3 bench/bench.py --build build "$@"
/usr/bin/python3 bench/sizing.py --build build
/usr/bin/python3 bench/attack.py --build build
/usr/bin/python3 bench/report_bench.py --build build
/usr/bin/python3 bench/fleet_bench.py --build build
/usr/bin/python3 bench/peer_bench.py --build build
/usr/bin/python3 bench/compat_bench.py --build build
/usr/bin/python3 bench/profiling_bench.py --build build
/usr/bin/python3 bench/pcie_bench.py --build build
/usr/bin/python3 bench/rocm_bench.py --build build
scripts/release.sh --arch amd64 --skip deb,rpm,image >/dev/null
exec /usr/bin/python3 bench/release_bench.py --build build
