#!/usr/bin/env bash
# The full gpumeter pipeline on this machine, on loopback:
#   the agent       on this machine's GPUs, or on the bundled simulated 8x H100 node
#   Prometheus      scraping it, with the cost rules (`gpumeter rules`), budget and alert rules
#   Alertmanager    with deploy/alertmanager/alertmanager.yml
#   VictoriaMetrics long-term storage, fed by Prometheus' remote_write
# then prints the URLs and, every minute, a chargeback table from `gpumeter report` (since the
# pipeline started) and the alerts that fire. Ctrl-C stops everything, Prometheus first so that
# it flushes to VictoriaMetrics. Data stays in the state directory, so a second run continues.
#
# scripts/run.sh installs the packages, builds, and runs this. Run alone, it needs:
#   GPUMETER_BIN                  the gpumeter binary (default build/bin/gpumeter)
# and takes, all optional:
#   GPUMETER_STATE_DIR            data, logs and generated configs (default ~/.local/state/gpumeter)
#   GPUMETER_LISTEN_ADDRESS       the agent (default :9400)
#   GPUMETER_PROMETHEUS_PORT      default 9490   (the ports of the packaged services, 9090, 9093
#   GPUMETER_ALERTMANAGER_PORT    default 9493    and 8428, are left alone: Debian starts those
#   GPUMETER_VICTORIAMETRICS_PORT default 9428    services when it installs the packages)
#   GPUMETER_PRICING              pricing file (default deploy/pricing/list-prices.yaml; on the
#                                 simulated node, with budgets for its projects added)
#   GPUMETER_REPORT_INTERVAL      seconds between reports (default 60)
#   GPUMETER_SCRAPE_INTERVAL      Prometheus' scrape and rule evaluation interval (default 15s)
#   GPUMETER_SIMULATE=1           use the simulated node even where NVML is present
# Extra arguments go to `gpumeter serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

bin="$(realpath "${GPUMETER_BIN:-build/bin/gpumeter}")"
state_dir="${GPUMETER_STATE_DIR:-${XDG_STATE_HOME:-$HOME/.local/state}/gpumeter}"
agent_listen="${GPUMETER_LISTEN_ADDRESS:-:9400}"
agent_port="${agent_listen##*:}"
prom_port="${GPUMETER_PROMETHEUS_PORT:-9490}"
am_port="${GPUMETER_ALERTMANAGER_PORT:-9493}"
vm_port="${GPUMETER_VICTORIAMETRICS_PORT:-9428}"
report_every="${GPUMETER_REPORT_INTERVAL:-60}"
scrape_every="${GPUMETER_SCRAPE_INTERVAL:-15s}"
alertmanager_bin="$(command -v prometheus-alertmanager || command -v alertmanager || true)"

die() { echo "pipeline: $*" >&2; exit 2; }
[[ -x "$bin" ]] || die "no gpumeter binary at $bin (build it, or set GPUMETER_BIN)"
for tool in prometheus victoria-metrics amtool; do
  command -v "$tool" >/dev/null || die "$tool is not installed (scripts/install-deps.sh run)"
done
[[ -n "$alertmanager_bin" ]] || die "prometheus-alertmanager is not installed (scripts/install-deps.sh run)"
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for p in "$agent_port" "$prom_port" "$am_port" "$vm_port"; do
  port_busy "$p" && die "port $p is in use; stop what listens there, or choose other ports (see the top of $0)"
done

mkdir -p "$state_dir"/{logs,prometheus,alertmanager,victoria-metrics}
state_dir="$(realpath "$state_dir")"
logs="$state_dir/logs"

# Children in start order; stopped in reverse, so Prometheus stops before VictoriaMetrics.
children=()
names=()
start() {  # start NAME LOG COMMAND...
  local name=$1 log=$2
  shift 2
  # A session of its own, so that Ctrl-C reaches this script only and it stops the children
  # in order (Go programs would otherwise catch the terminal's SIGINT all at once).
  setsid "$@" >>"$log" 2>&1 </dev/null &
  children+=($!)
  names+=("$name")
}
stop_all() {
  trap '' INT TERM
  local i pid
  for ((i = ${#children[@]} - 1; i >= 0; i--)); do
    pid=${children[i]}
    kill -TERM "$pid" 2>/dev/null || continue
    for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "pipeline: ${names[i]} did not stop within 15 s; killing it" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
  done
  echo "== stopped; data and logs are in $state_dir"
}
trap stop_all EXIT
trap 'exit 130' INT TERM

wait_listening() {  # wait_listening NAME PORT LOG
  for _ in $(seq 300); do
    port_busy "$2" && return 0
    kill -0 "${children[-1]}" 2>/dev/null || { tail -n 20 "$3" >&2; die "$1 exited; its log is $3"; }
    sleep 0.1
  done
  tail -n 20 "$3" >&2
  die "$1 did not start listening within 30 s; its log is $3"
}

# --- the agent ---------------------------------------------------------------------------
agent_args=(serve --ledger.state-file "$state_dir/ledger.json" --web.listen-address "$agent_listen")
pricing="${GPUMETER_PRICING:-$root/deploy/pricing/list-prices.yaml}"
if [[ "${GPUMETER_SIMULATE:-0}" != 1 ]] && ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml\.so\.1'; then
  echo "== NVML found: monitoring this machine's GPUs"
  if [[ -f "$state_dir/gpumeter.yaml" ]]; then agent_args+=(--config.file "$state_dir/gpumeter.yaml"); fi
else
  scenario="$root/deploy/scenarios/h100-8x-three-teams.yaml"
  node="$state_dir/simulated-node"
  rm -rf "$node" && mkdir -p "$node"
  # One scenario clock for the library, the /proc tree and the kubelet; a fresh node each run,
  # so its ledger starts again (the report reads the restart as a counter reset).
  export GPUMETER_SIM_EPOCH="$(date +%s.%N)"
  rm -f "$state_dir/ledger.json"
  echo "== no NVML on this machine: running on the simulated node ${scenario#"$root"/}"
  start sim-procfs "$logs/sim-procfs.log" "$bin" sim procfs --scenario "$scenario" --out "$node/host" --follow
  start sim-kubelet "$logs/sim-kubelet.log" "$bin" sim kubelet --scenario "$scenario" --socket "$node/kubelet.sock"
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
  agent_args+=(--sim.scenario "$scenario" --path.procfs "$node/host/proc" --path.rootfs "$node/host"
               --config.file "$node/gpumeter.yaml")
  if [[ -z "${GPUMETER_PRICING:-}" ]]; then
    # The list prices, with monthly budgets for the simulated node's projects so that the budget
    # rules, alerts and dashboard panels have something to show.
    pricing="$state_dir/pricing.yaml"
    cat "$root/deploy/pricing/list-prices.yaml" - >"$pricing" <<'YAML'

budgets:
  nlp-pretraining: 25000
  nlp-evaluation: 1500
  vision-serving: 6000
  vision-research: 200
  climate-downscaling: 4000
YAML
  fi
fi
start gpumeter "$logs/gpumeter.log" "$bin" "${agent_args[@]}" "$@"
wait_listening gpumeter "$agent_port" "$logs/gpumeter.log"

# --- rules and configs -------------------------------------------------------------------
conf="$state_dir/prometheus"
"$bin" rules --pricing "$pricing" --output "$conf/gpumeter-cost.yml"
cp "$root/deploy/prometheus/gpumeter-budget.yml" "$root/deploy/prometheus/gpumeter-alerts.yml" "$conf/"
cat >"$conf/prometheus.yml" <<YAML
# Written by scripts/pipeline.sh from deploy/prometheus/prometheus.yml's layout.
global:
  scrape_interval: $scrape_every
  evaluation_interval: $scrape_every
  external_labels:
    cluster: local
rule_files: [gpumeter-cost.yml, gpumeter-budget.yml, gpumeter-alerts.yml]
alerting:
  alertmanagers:
    - static_configs:
        - targets: ["127.0.0.1:$am_port"]
remote_write:
  - url: http://127.0.0.1:$vm_port/api/v1/write
scrape_configs:
  - job_name: gpumeter
    static_configs:
      - targets: ["127.0.0.1:$agent_port"]
YAML
promtool check config "$conf/prometheus.yml" >"$logs/promtool.log" 2>&1 ||
  { cat "$logs/promtool.log" >&2; die "promtool check config failed"; }
amtool check-config "$root/deploy/alertmanager/alertmanager.yml" >"$logs/amtool.log" 2>&1 ||
  { cat "$logs/amtool.log" >&2; die "amtool check-config failed"; }

# --- VictoriaMetrics, Alertmanager, Prometheus --------------------------------------------
start victoria-metrics "$logs/victoria-metrics.log" victoria-metrics \
  -httpListenAddr="127.0.0.1:$vm_port" -storageDataPath="$state_dir/victoria-metrics" \
  -retentionPeriod=1y -loggerLevel=WARN
wait_listening victoria-metrics "$vm_port" "$logs/victoria-metrics.log"
start alertmanager "$logs/alertmanager.log" "$alertmanager_bin" \
  --config.file="$root/deploy/alertmanager/alertmanager.yml" --storage.path="$state_dir/alertmanager" \
  --web.listen-address="127.0.0.1:$am_port" --cluster.listen-address= --log.level=warn
wait_listening alertmanager "$am_port" "$logs/alertmanager.log"
start prometheus "$logs/prometheus.log" prometheus \
  --config.file="$conf/prometheus.yml" --storage.tsdb.path="$state_dir/prometheus/data" \
  --web.listen-address="127.0.0.1:$prom_port" --storage.remote.flush-deadline=10s --log.level=warn
wait_listening prometheus "$prom_port" "$logs/prometheus.log"

started=$(date +%s)
cat <<EOF
== running
   agent             http://localhost:$agent_port/            (metrics: /metrics)
   Prometheus        http://127.0.0.1:$prom_port/            (alerts: /alerts)
   Alertmanager      http://127.0.0.1:$am_port/
   VictoriaMetrics   http://127.0.0.1:$vm_port/vmui/
   pricing           $pricing
   state and logs    $state_dir
== a chargeback table every ${report_every} s from \`gpumeter report\`; Ctrl-C stops everything
EOF

while true; do
  sleep "$report_every" &
  wait $! || true
  echo
  echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ)  chargeback since $(date -u -d "@$started" +%H:%M:%SZ), by project"
  "$bin" report --url "http://127.0.0.1:$prom_port" --from "$started" --to now --by project \
    --pricing "$pricing" --progress never || echo "(no report yet: $?)"
  echo "-- firing alerts (Alertmanager)"
  amtool alert query --alertmanager.url="http://127.0.0.1:$am_port" || true
done
