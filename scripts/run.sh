#!/usr/bin/env bash
# The main job. On a fresh Debian 12 machine: installs what is missing, builds, and runs the
# gpumeter agent on this machine's GPUs, or, where NVML is absent, on the bundled simulated
# 8x H100 node, with the simulated node's host side (its /proc tree and its kubelet) so owners,
# per-process series and the usage ledger are live. Extra arguments go to `gpumeter serve`.
# Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh build
echo "== building (build/)"
cmake --preset default >/dev/null
cmake --build --preset default

bin=build/bin/gpumeter
state_dir="${GPUMETER_STATE_DIR:-${XDG_STATE_HOME:-$HOME/.local/state}/gpumeter}"
mkdir -p "$state_dir"
args=(serve --ledger.state-file "$state_dir/ledger.json")
children=()
cleanup() {
  for pid in "${children[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml\.so\.1'; then
  echo "== NVML found: monitoring this machine's GPUs"
  if [[ -f "$state_dir/gpumeter.yaml" ]]; then args+=(--config.file "$state_dir/gpumeter.yaml"); fi
else
  scenario=deploy/scenarios/h100-8x-three-teams.yaml
  node="$state_dir/simulated-node"
  rm -rf "$node" && mkdir -p "$node"
  # One scenario clock for the library, the /proc tree and the kubelet; a fresh node each run.
  export GPUMETER_SIM_EPOCH="$(date +%s.%N)"
  rm -f "$state_dir/ledger.json"
  echo "== no NVML on this machine: running on the simulated node $scenario"
  "$bin" sim procfs --scenario "$scenario" --out "$node/host" --follow >"$node/procfs.log" 2>&1 &
  children+=($!)
  "$bin" sim kubelet --scenario "$scenario" --socket "$node/kubelet.sock" >"$node/kubelet.log" 2>&1 &
  children+=($!)
  cat >"$node/gpumeter.yaml" <<YAML
attribution:
  environment: [GPUMETER_PROJECT, SLURM_JOB_ACCOUNT]
  kubelet: {socket: $node/kubelet.sock}
project:
  default: unknown
  rules:
    - {source: env.GPUMETER_PROJECT}
    - {source: slurm_account}
ledger:
  idle_power_watts: {"NVIDIA H100 80GB HBM3": 70}
YAML
  for _ in $(seq 100); do [[ -S "$node/kubelet.sock" && -f "$node/host/etc/passwd" ]] && break; sleep 0.1; done
  args+=(--sim.scenario "$scenario" --path.procfs "$node/host/proc" --path.rootfs "$node/host"
         --config.file "$node/gpumeter.yaml")
fi
listen="${GPUMETER_LISTEN_ADDRESS:-:9400}"
port="${listen##*:}"
echo "== gpumeter on http://localhost:${port}/  (metrics: http://localhost:${port}/metrics)"
echo "== ledger state: $state_dir/ledger.json"
"$bin" "${args[@]}" --web.listen-address "$listen" "$@" &
children+=($!)
wait "${children[-1]}"
