#!/usr/bin/env bash
# The full gpumeter pipeline on this machine, on loopback:
#   the agents      on this machine's GPUs, or, without NVML, a simulated fleet (`fleet` below):
#                   an agent per node on consecutive ports, each with its own /proc tree and
#                   kubelet, named by its `instance` in Prometheus
#   Prometheus      scraping them, with the cost rules (`gpumeter rules`), budget and alert rules
#   Alertmanager    with deploy/alertmanager/alertmanager.yml
#   VictoriaMetrics long-term storage, fed by Prometheus' remote_write
# On the simulated fleet, the first run of a state directory backfills the fleet's last days
# before Prometheus starts (scripts/history.py: each node's scenario played back to back, from the
# simulator's truth), and then the alerts those days fired (scripts/alert_history.py). It prints
# the URLs, a chargeback table from `gpumeter report` (the history's days on the simulated fleet,
# else since the pipeline started) and the HTML report's path at once, then a table and the
# alerts that fire every minute, and the HTML report again every few minutes. Ctrl-C stops
# everything, Prometheus first so that it flushes to VictoriaMetrics. Data stays in the state
# directory, so a second run continues (without backfilling again).
#
# scripts/run.sh installs the packages, builds, and runs this. Run alone, it needs:
#   GPUMETER_BIN                  the gpumeter binary (default build/bin/gpumeter)
# and takes, all optional:
#   GPUMETER_STATE_DIR            data, logs and generated configs (default ~/.local/state/gpumeter)
#   GPUMETER_LISTEN_ADDRESS       the agent (default :9400); the simulated fleet's nodes take this
#                                 port and the ones after it
#   GPUMETER_PROMETHEUS_PORT      default 9490   (the ports of the packaged services, 9090, 9093
#   GPUMETER_ALERTMANAGER_PORT    default 9493    and 8428, are left alone: Debian starts those
#   GPUMETER_VICTORIAMETRICS_PORT default 9428    services when it installs the packages)
#   GPUMETER_PRICING              pricing file (default deploy/pricing/list-prices.yaml; on the
#                                 simulated node, with budgets for its projects added)
#   GPUMETER_REPORT_INTERVAL      seconds between chargeback tables (default 60)
#   GPUMETER_HTML_INTERVAL        seconds between rewrites of the HTML report, <state>/report.html
#                                 (default 300)
#   GPUMETER_COLLECT_INTERVAL     the simulated nodes' --collect.interval (default 5s)
#   GPUMETER_HISTORY_DAYS         days of history backfilled for the simulated fleet (default 30)
#   GPUMETER_HISTORY_INTERVAL     seconds between the history's samples (default 600)
#   GPUMETER_SCRAPE_INTERVAL      Prometheus' scrape and rule evaluation interval (default 15s)
#   GPUMETER_SIMULATE=1           use the simulated fleet even where NVML is present
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
html_every="${GPUMETER_HTML_INTERVAL:-300}"
collect_every="${GPUMETER_COLLECT_INTERVAL:-5s}"
history_days="${GPUMETER_HISTORY_DAYS:-30}"
history_every="${GPUMETER_HISTORY_INTERVAL:-600}"
scrape_every="${GPUMETER_SCRAPE_INTERVAL:-15s}"
alertmanager_bin="$(command -v prometheus-alertmanager || command -v alertmanager || true)"

die() { echo "pipeline: $*" >&2; exit 2; }
[[ -x "$bin" ]] || die "no gpumeter binary at $bin (build it, or set GPUMETER_BIN)"
for tool in prometheus victoria-metrics amtool; do
  command -v "$tool" >/dev/null || die "$tool is not installed (scripts/install-deps.sh run)"
done
[[ -n "$alertmanager_bin" ]] || die "prometheus-alertmanager is not installed (scripts/install-deps.sh run)"
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
agent_host="${agent_listen%:*}"

# The simulated fleet: name, scenario, and "amd" for a node read through ROCm SMI. Each node is
# an agent of its own on the next port after the previous one's, with its own /proc tree and
# kubelet; Prometheus names it by its `instance`. The AMD node needs root (a mount namespace,
# docs/rocm-behaviour.md) and Debian's librocm-smi64-1; without them the fleet runs without it.
fleet=(
  "gpu-node-01 deploy/scenarios/h100-8x-three-teams.yaml"
  "gpu-node-02 deploy/scenarios/faults-demo.yaml"
  "gpu-node-03 deploy/scenarios/mig-h100.yaml"
)
amd_missing=""
if [[ $(id -u) != 0 ]]; then amd_missing="it needs root (a mount namespace)"
elif ! command -v unshare >/dev/null; then amd_missing="unshare is not installed"
elif ! ldconfig -p 2>/dev/null | grep -q 'librocm_smi64\.so'; then amd_missing="librocm-smi64-1 is not installed"
fi
if [[ -z "$amd_missing" ]]; then
  fleet+=("gpu-node-04 deploy/scenarios/mi300x-8x-three-teams.yaml amd")
fi
agent_ports=("$agent_port")
for ((i = 1; i < ${#fleet[@]}; i++)); do agent_ports+=($((agent_port + i))); done
for p in "${agent_ports[@]}" "$prom_port" "$am_port" "$vm_port"; do
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

wait_listening() {  # wait_listening NAME PORT LOG [PID]
  local pid=${4:-${children[-1]}}
  for _ in $(seq 300); do
    port_busy "$2" && return 0
    kill -0 "$pid" 2>/dev/null || { tail -n 20 "$3" >&2; die "$1 exited; its log is $3"; }
    sleep 0.1
  done
  tail -n 20 "$3" >&2
  die "$1 did not start listening within 30 s; its log is $3"
}

# --- the agents ----------------------------------------------------------------------------
targets=()   # "address instance" per agent, for the scrape config
pricing="${GPUMETER_PRICING:-$root/deploy/pricing/list-prices.yaml}"
if [[ "${GPUMETER_SIMULATE:-0}" != 1 ]] && ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml\.so\.1'; then
  echo "== NVML found: monitoring this machine's GPUs"
  agent_args=(serve --ledger.state-file "$state_dir/ledger.json" --web.listen-address "$agent_listen")
  if [[ -f "$state_dir/gpumeter.yaml" ]]; then agent_args+=(--config.file "$state_dir/gpumeter.yaml"); fi
  start gpumeter "$logs/gpumeter.log" "$bin" "${agent_args[@]}" "$@"
  wait_listening gpumeter "$agent_port" "$logs/gpumeter.log"
  targets+=("127.0.0.1:$agent_port 127.0.0.1:$agent_port")
  simulated=0
else
  simulated=1
  # A fresh fleet each run, on one scenario clock that starts now; the history ends here.
  fleet_start=$(date +%s)
  export GPUMETER_SIM_EPOCH="$fleet_start"
  echo "== no NVML on this machine: a simulated fleet of ${#fleet[@]} nodes"
  [[ -z "$amd_missing" ]] || echo "   (without the AMD node: $amd_missing)"
  fleet_pids=()
  i=0
  for entry in "${fleet[@]}"; do
    read -r name scenario kind <<<"$entry"
    port=$((agent_port + i))
    i=$((i + 1))
    node="$state_dir/fleet/$name"
    rm -rf "$node" && mkdir -p "$node"
    start "$name-procfs" "$logs/$name-procfs.log" "$bin" sim procfs --scenario "$root/$scenario" --out "$node/host" --follow
    start "$name-kubelet" "$logs/$name-kubelet.log" "$bin" sim kubelet --scenario "$root/$scenario" --socket "$node/kubelet.sock"
    cat >"$node/gpumeter.yaml" <<YAML
attribution:
  environment: [GPUMETER_PROJECT, SLURM_JOB_ACCOUNT]
  kubelet: {socket: $node/kubelet.sock}
project:
  default: unknown
  rules:
    - {source: env.GPUMETER_PROJECT}
    - {source: slurm_account}
    - {source: namespace, match: 'team-(.*)', project: '\$1'}
ledger:
  # Each process's owner is billed (scripts/history.py derives the month before from the same rule).
  allocation: process
  idle_power_watts: {"NVIDIA H100 80GB HBM3": 70, "AMD Instinct MI300X": 140}
YAML
    for _ in $(seq 100); do [[ -S "$node/kubelet.sock" && -f "$node/host/etc/passwd" ]] && break; sleep 0.1; done
    node_args=(serve --sim.scenario "$root/$scenario" --path.procfs "$node/host/proc" --path.rootfs "$node/host"
               --config.file "$node/gpumeter.yaml" --ledger.state-file "$node/ledger.json"
               --web.listen-address "$agent_host:$port" --collect.interval "$collect_every")
    if [[ "$kind" == amd ]]; then
      # ROCm SMI reads /sys: the simulated amdgpu tree over it, in a mount namespace of the
      # agent's own (docs/rocm-behaviour.md); NVML is not loaded.
      start "$name-sysfs" "$logs/$name-sysfs.log" "$bin" sim sysfs "$node/sysfs" --scenario "$root/$scenario" --follow --interval 1s
      for _ in $(seq 100); do [[ -f "$node/sysfs/module/amdgpu/initstate" ]] && break; sleep 0.1; done
      start "$name" "$logs/$name.log" unshare -m --propagation private sh -c \
        'mount --bind "$0/class" /sys/class && mount --bind "$0/module" /sys/module && mount -t tmpfs tmpfs /dev/shm && exec "$@"' \
        "$node/sysfs" "$bin" "${node_args[@]}" --nvml.library "$node/no-libnvidia-ml.so.1" "$@"
    else
      start "$name" "$logs/$name.log" "$bin" "${node_args[@]}" "$@"
    fi
    targets+=("127.0.0.1:$port $name")
    fleet_pids+=("${children[-1]}")
  done
  i=0
  for entry in "${fleet[@]}"; do
    read -r name _ <<<"$entry"
    wait_listening "$name" "$((agent_port + i))" "$logs/$name.log" "${fleet_pids[i]}"
    i=$((i + 1))
  done
  if [[ -z "${GPUMETER_PRICING:-}" ]]; then
    # The list prices, with monthly budgets for the simulated fleet's projects so that the
    # budget rules, alerts and dashboard panels have something to show.
    pricing="$state_dir/pricing.yaml"
    cat "$root/deploy/pricing/list-prices.yaml" - >"$pricing" <<'YAML'

budgets:
  nlp-pretraining: 100000
  nlp-evaluation: 5000
  vision-serving: 20000
  vision-research: 3000
  climate-downscaling: 15000
  fault-demo: 20000
YAML
  fi
fi

# --- the month before (simulated fleet, first run of a state directory) ---------------------
tsdb="$state_dir/prometheus/data"
if [[ "$simulated" == 1 ]]; then
  if [[ -f "$state_dir/history.json" ]]; then
    echo "== history: already backfilled in an earlier run ($state_dir/history.json)"
  else
    echo "== history: the last $history_days days of the fleet, from the simulator's truth"
    node_specs=()
    for entry in "${fleet[@]}"; do
      read -r name scenario _ <<<"$entry"
      node_specs+=(--node "$name=$root/$scenario")
    done
    work="$state_dir/history-work"
    rm -rf "$work" && mkdir -p "$work" "$tsdb"
    python3 "$root/scripts/history.py" --gpumeter "$bin" --end "$fleet_start" --days "$history_days" \
      --interval "$history_every" --out "$work/history.om" --describe "$work/history.json" "${node_specs[@]}"
    echo "history: promtool tsdb create-blocks-from openmetrics"
    promtool tsdb create-blocks-from openmetrics "$work/history.om" "$tsdb" --max-block-duration=720h -q \
      >"$logs/backfill.log" 2>&1 || { cat "$logs/backfill.log" >&2; die "backfilling the history failed"; }
    rm -f "$work/history.om"
    mv "$work/history.json" "$state_dir/history.json"
    echo "history: backfilled into $tsdb"
  fi
fi

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
YAML
for t in "${targets[@]}"; do
  read -r address instance <<<"$t"
  printf '      - targets: ["%s"]\n        labels: {instance: "%s"}\n' "$address" "$instance" >>"$conf/prometheus.yml"
done
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
# A retention past the default 15 days, which would delete the backfilled month's older half.
start prometheus "$logs/prometheus.log" prometheus \
  --config.file="$conf/prometheus.yml" --storage.tsdb.path="$state_dir/prometheus/data" \
  --web.listen-address="127.0.0.1:$prom_port" --storage.remote.flush-deadline=10s --log.level=warn \
  --storage.tsdb.retention.time=90d
wait_listening prometheus "$prom_port" "$logs/prometheus.log"

started=$(date +%s)
prom_url="http://127.0.0.1:$prom_port"
html="$state_dir/report.html"
if [[ "$simulated" == 1 ]]; then
  period=(--from "-${history_days}d" --to now)
  period_text="the last $history_days days"
else
  period=(--from "$started" --to now)
  period_text="since $(date -u -d "@$started" +%H:%M:%SZ)"
fi
echo "== running"
for t in "${targets[@]}"; do
  read -r address instance <<<"$t"
  printf '   %-17s http://%s/   (metrics: /metrics)\n' "$instance" "${address/127.0.0.1/localhost}"
done
cat <<EOF
   Prometheus        http://127.0.0.1:$prom_port/            (alerts: /alerts)
   Alertmanager      http://127.0.0.1:$am_port/
   VictoriaMetrics   http://127.0.0.1:$vm_port/vmui/
   pricing           $pricing
   state and logs    $state_dir
EOF

report_table() {
  echo
  echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ)  chargeback over $period_text, by project"
  "$bin" report --url "$prom_url" "${period[@]}" --by project --pricing "$pricing" --progress never ||
    echo "(no report yet: $?)"
}
report_html() {
  if "$bin" report --url "$prom_url" "${period[@]}" --by project --pricing "$pricing" --progress never \
      --format html --output "$html.tmp" >"$logs/report-html.log" 2>&1; then
    mv "$html.tmp" "$html"
    echo "== HTML report: $html (written again every ${html_every} s)"
  else
    echo "(no HTML report: see $logs/report-html.log)"
  fi
}

report_table
report_html

# The alerts the month would have fired: the alert rules evaluated over the history (one range
# query each), backfilled as ALERTS; Prometheus loads the new block within a minute.
if [[ "$simulated" == 1 && ! -f "$state_dir/history-alerts.done" ]]; then
  work="$state_dir/history-work"
  read -r history_start history_end < <(python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(d["start"], d["end"])' "$state_dir/history.json")
  echo "== history: the alerts of those $history_days days (the alert rules over the history)"
  rm -rf "$work/alert-blocks"
  if python3 "$root/scripts/alert_history.py" --url "$prom_url" --start "$history_start" --end "$history_end" \
       --step "$history_every" --out "$work/alerts.om" "$conf/gpumeter-alerts.yml" &&
     promtool tsdb create-blocks-from openmetrics "$work/alerts.om" "$work/alert-blocks" --max-block-duration=720h -q \
       >>"$logs/backfill.log" 2>&1; then
    mv "$work/alert-blocks"/* "$tsdb"/
    rm -rf "$work"
    touch "$state_dir/history-alerts.done"
    echo "history: alerts backfilled; Prometheus shows them within a minute ($prom_url/graph?g0.expr=ALERTS)"
  else
    echo "(the history's alerts were not backfilled: see $logs/backfill.log)"
  fi
fi
echo "== a chargeback table every ${report_every} s, the HTML report every ${html_every} s; Ctrl-C stops everything"

last_html=$(date +%s)
while true; do
  sleep "$report_every" &
  wait $! || true
  report_table
  echo "-- firing alerts (Alertmanager)"
  amtool alert query --alertmanager.url="http://127.0.0.1:$am_port" || true
  if (($(date +%s) - last_html >= html_every)); then
    report_html
    last_html=$(date +%s)
  fi
done
