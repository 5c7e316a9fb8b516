#!/usr/bin/env bash
# The main job. On a fresh Debian 12 machine: installs what is missing, builds, and runs the
# gpumeter agent on this machine's GPUs, or, where NVML is absent, on the bundled simulated
# 8x H100 node. Extra arguments go to `gpumeter serve`. Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh build
echo "== building (build/)"
cmake --preset default >/dev/null
cmake --build --preset default

args=(serve)
if ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml\.so\.1'; then
  echo "== NVML found: monitoring this machine's GPUs"
else
  scenario=deploy/scenarios/h100-8x-three-teams.yaml
  echo "== no NVML on this machine: running on the simulated node $scenario"
  args+=(--sim.scenario "$scenario")
fi
listen="${GPUMETER_LISTEN_ADDRESS:-:9400}"
port="${listen##*:}"
echo "== gpumeter on http://localhost:${port}/  (metrics: http://localhost:${port}/metrics)"
exec build/bin/gpumeter "${args[@]}" --web.listen-address "$listen" "$@"
