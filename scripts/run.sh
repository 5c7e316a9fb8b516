#!/usr/bin/env bash
# The main job. On a fresh Debian 12 machine: installs what is missing, builds, and runs the full
# pipeline on loopback (scripts/pipeline.sh): the gpumeter agent on this machine's GPUs, or, where
# NVML is absent, a simulated fleet (H100s with time-slicing, a node with faults, a MIG node, an
# AMD node), each node with its host side (a /proc tree and a kubelet) so owners and the usage
# ledger are live, and the fleet's last 30 days backfilled from the simulator's truth; Prometheus
# with the cost, budget and alert rules; Alertmanager; VictoriaMetrics fed by remote_write. Prints
# the URLs, a month's chargeback table and the HTML report's path at once, then a table every
# minute. Ctrl-C stops everything. Extra arguments go to
# `gpumeter serve`; the environment variables are listed at the top of scripts/pipeline.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh run
# Only what the pipeline runs: the gpumeter binary and the simulated libnvidia-ml.so.1 it loads
# on a node without GPUs (160 of the tree's 288 build steps; scripts/test.sh builds the rest).
echo "== building gpumeter and the simulator (build/)"
cmake --preset default >/dev/null
cmake --build --preset default --target gpumeter
exec scripts/pipeline.sh "$@"
