#!/usr/bin/env bash
# The main job. On a fresh Debian 12 machine: installs what is missing, builds, and runs the full
# pipeline on loopback (scripts/pipeline.sh): the gpumeter agent on this machine's GPUs, or, where
# NVML is absent, on the bundled simulated 8x H100 node with its host side (a /proc tree and a
# kubelet) so owners and the usage ledger are live; Prometheus with the cost, budget and alert
# rules; Alertmanager; VictoriaMetrics fed by remote_write. Prints the URLs, then a chargeback
# table from `gpumeter report` every minute. Ctrl-C stops everything. Extra arguments go to
# `gpumeter serve`; the environment variables are listed at the top of scripts/pipeline.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh run
echo "== building (build/)"
cmake --preset default >/dev/null
cmake --build --preset default
exec scripts/pipeline.sh "$@"
