#!/usr/bin/python3
"""A live simulated fleet scraped by a real Prometheus with the cost, budget and alert rules loaded:
what it costs the Prometheus, and the series budget per GPU and per owner.

tests/tools/fleet_server.py serves --nodes simulated nodes (default 200 x 8 GPUs = 1600 GPUs,
H100, A100 and L40S nodes in turn) from one process, each node a target of its own (file_sd,
`instance` = node-N:9400), with owners that churn at --pod-rate pods per node and hour. A
Prometheus from Debian scrapes them every --scrape-interval with the rules of a production
setup: `gpumeter rules --pricing deploy/pricing/list-prices.yaml`,
deploy/prometheus/gpumeter-budget.yml and deploy/prometheus/gpumeter-alerts.yml, evaluated at
the scrape interval. After --seconds of that it prints one table:

- the fleet, the scrape interval, samples appended per second (the increase of
  prometheus_tsdb_head_samples_appended_total over the run after the first two intervals, over
  that time; scraped samples and rule results), the head series, and the fleet's series by
  kind: per GPU, per owner on a GPU, per process, per node;
- churn: new series per hour at the pod rate, from the model over its 24 h horizon and as
  measured (prometheus_tsdb_head_series_created_total over the run);
- each rule group's evaluation time: the mean over the last quarter of the run and the largest,
  from /api/v1/rules `evaluationTime` polled each interval, and
  prometheus_rule_group_last_duration_seconds. The alert rules' longest range windows are 10
  minutes, and a range function's cost grows with the samples in its window: run --seconds 660
  or more for the steady state;
- Prometheus' peak RSS (VmHWM), its CPU, and the fleet server's CPU and render time per scrape;
- `gpumeter report --by project` over the run: wall time, requests, peak RSS, and its largest
  deviation from the model's exact truth at the edge samples' times;
- with --remote-write, a VictoriaMetrics fed by Prometheus' remote_write: its peak RSS and rows;
- dcgm-exporter's default counters (tests/fixtures/dcgm-exporter/default-counters.csv: one
  series per GPU each) beside the agent's series per GPU.

Every process listens on 127.0.0.1 on a free port, writes only to a temporary directory, and is
stopped at the end. About --seconds plus half a minute.

Usage: bench/fleet_bench.py --build build [--nodes 200] [--seconds 300] [--remote-write]
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "tools"))
import fleet_server  # noqa: E402
from bench import free_port, print_table, status_kib  # noqa: E402

LEDGER = fleet_server.LEDGER
PROCESS = ("gpu_process_memory_used_bytes", "gpu_process_utilization_ratio")
OWNER = ("project", "user", "namespace", "pod", "container", "hpc_job")
FIELDS = ("allocated_seconds", "busy_seconds", "memory_byte_seconds", "energy_joules")


def get(url, timeout=60):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


def query(base, expr, at=None):
    params = {"query": expr}
    if at is not None:
        params["time"] = repr(at)
    doc = json.loads(get(base + "/api/v1/query?" + urllib.parse.urlencode(params)))
    if doc.get("status") != "success":
        raise SystemExit("fleet_bench: query %r failed: %r" % (expr, doc))
    return doc["data"]["result"]


def scalar(base, expr, at=None):
    r = query(base, expr, at)
    return float(r[0]["value"][1]) if r else 0.0


def own_metrics(base):
    """Prometheus' /metrics as {(name, labels text): value}."""
    out = {}
    for line in get(base + "/metrics").decode().splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def metric(m, name):
    return sum(v for k, v in m.items() if k == name or k.startswith(name + "{"))


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start(args, log_dir, name, env=None):
    log = open(os.path.join(log_dir, name + ".log"), "wb")
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            env=dict(os.environ, **(env or {})))


def stop(p):
    if p is not None and p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def wait_for(pred, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            v = pred()
            if v:
                return v
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit("fleet_bench: timed out waiting for %s" % what)


def group_key(path, name):
    """A rule group as the table names it: two files have a group "gpumeter.cost"."""
    return "%s (%s)" % (name, os.path.basename(path))


def dcgm_default_series():
    """Series per GPU of dcgm-exporter's default counters file (a 'label' field is no series)."""
    n = 0
    with open(os.path.join(ROOT, "tests", "fixtures", "dcgm-exporter", "default-counters.csv")) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#") and line.split(",")[1].strip() != "label":
                n += 1
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--pod-rate", type=float, default=2.0, help="pods started per node per hour")
    ap.add_argument("--scrape-interval", type=int, default=15, help="seconds; also the rules' evaluation interval")
    ap.add_argument("--seconds", type=int, default=300, help="how long Prometheus scrapes the fleet")
    ap.add_argument("--seed", default="bench")
    ap.add_argument("--remote-write", action="store_true", help="also remote_write to a VictoriaMetrics")
    ap.add_argument("--pricing", default=os.path.join(ROOT, "deploy", "pricing", "list-prices.yaml"))
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args()
    exe = os.path.join(os.path.abspath(args.build), "bin", "gpumeter")
    for tool in ("prometheus",) + (("victoria-metrics",) if args.remote_write else ()):
        if shutil.which(tool) is None:
            raise SystemExit("fleet_bench: %s not found (scripts/install-deps.sh test installs it)" % tool)
    S = args.scrape_interval
    gpus = args.nodes * args.gpus_per_node
    work = tempfile.mkdtemp(prefix="gpumeter-fleet-bench-")
    fleet_proc = prom = vm = None
    res = {}
    try:
        cost = os.path.join(work, "gpumeter-cost.yml")
        with open(cost, "w") as f:
            subprocess.run([exe, "rules", "--pricing", args.pricing], stdout=f, check=True)
        rules = [cost] + [os.path.join(ROOT, "deploy", "prometheus", n) for n in ("gpumeter-budget.yml",
                                                                                   "gpumeter-alerts.yml")]
        ready, sd = os.path.join(work, "ready.json"), os.path.join(work, "targets.json")
        print("fleet_bench: building the model of %d nodes ..." % args.nodes, file=sys.stderr)
        fleet_proc = start([sys.executable, os.path.join(ROOT, "tests", "tools", "fleet_server.py"),
                            "--nodes", str(args.nodes), "--gpus-per-node", str(args.gpus_per_node),
                            "--pod-rate", str(args.pod_rate), "--seed", args.seed, "--ready-file", ready,
                            "--file-sd", sd, "--scrape-interval", "%ds" % S, "--report-every", "60"], work, "fleet")
        wait_for(lambda: os.path.exists(ready) or fleet_proc.poll() is not None, 600, "the fleet server")
        if fleet_proc.poll() is not None:
            raise SystemExit("fleet_bench: the fleet server exited; see %s/fleet.log" % work)
        with open(ready) as f:
            info = json.load(f)

        cfg = {"global": {"scrape_interval": "%ds" % S, "evaluation_interval": "%ds" % S},
               "rule_files": rules,
               "scrape_configs": [{"job_name": "gpumeter", "file_sd_configs": [{"files": [sd]}]}]}
        if args.remote_write:
            vm_port = free_port()
            vm_url = "http://127.0.0.1:%d" % vm_port
            vm = start(["victoria-metrics", "-storageDataPath=" + os.path.join(work, "vm"), "-retentionPeriod=1y",
                        "-httpListenAddr=127.0.0.1:%d" % vm_port, "-loggerLevel=WARN"], work, "victoria-metrics")
            wait_for(lambda: get(vm_url + "/health", 2), 60, "victoria-metrics")
            cfg["remote_write"] = [{"url": vm_url + "/api/v1/write"}]
        with open(os.path.join(work, "prometheus.yml"), "w") as f:
            json.dump(cfg, f)
        port = free_port()
        base = "http://127.0.0.1:%d" % port
        prom = start(["prometheus", "--config.file=" + os.path.join(work, "prometheus.yml"),
                      "--storage.tsdb.path=" + os.path.join(work, "data"), "--web.listen-address=127.0.0.1:%d" % port,
                      "--log.level=warn"], work, "prometheus")
        wait_for(lambda: get(base + "/-/ready", 2), 120, "prometheus ready")

        def all_up():
            t = json.loads(get(base + "/api/v1/targets"))["data"]["activeTargets"]
            return len(t) == args.nodes and all(x["health"] == "up" for x in t)
        print("fleet_bench: Prometheus scraping %d targets every %d s for %d s ..." % (args.nodes, S, args.seconds),
              file=sys.stderr)
        wait_for(all_up, 3 * S + 60, "every target up")
        t_up = time.time()
        fleet_cpu0, prom_cpu0 = cpu_seconds(fleet_proc.pid), cpu_seconds(prom.pid)
        stats0 = json.loads(get(info["url"] + "/stats"))
        groups = {}   # name -> [evaluationTime, ...]
        durations = {}
        m0 = None
        end = t_up + args.seconds
        while time.time() < end:
            time.sleep(min(S, max(0.0, end - time.time())))
            for g in json.loads(get(base + "/api/v1/rules"))["data"]["groups"]:
                if not g["lastEvaluation"].startswith("0001"):
                    groups.setdefault(group_key(g["file"], g["name"]), []).append((time.time(), g["evaluationTime"]))
            m = own_metrics(base)
            for k, v in m.items():
                if k.startswith("prometheus_rule_group_last_duration_seconds{"):
                    path, name = re.search(r'rule_group="([^;]*);([^"]*)"', k).groups()
                    durations.setdefault(group_key(path, name), []).append((time.time(), v))
            if m0 is None and time.time() - t_up >= 2 * S:
                m0, t0 = m, time.time()
        m1, t1 = own_metrics(base), time.time()
        if m0 is None:
            raise SystemExit("fleet_bench: --seconds must be over two scrape intervals")
        fleet_cpu = cpu_seconds(fleet_proc.pid) - fleet_cpu0
        prom_cpu = cpu_seconds(prom.pid) - prom_cpu0
        stats1 = json.loads(get(info["url"] + "/stats"))
        res["samples_per_second"] = (metric(m1, "prometheus_tsdb_head_samples_appended_total")
                                     - metric(m0, "prometheus_tsdb_head_samples_appended_total")) / (t1 - t0)
        res["series_created_per_hour"] = (metric(m1, "prometheus_tsdb_head_series_created_total")
                                          - metric(m0, "prometheus_tsdb_head_series_created_total")) / (t1 - t0) * 3600
        res["head_series"] = metric(m1, "prometheus_tsdb_head_series")
        res["prometheus_peak_rss_kib"] = status_kib(prom.pid, "VmHWM")
        res["prometheus_cpu_share"] = prom_cpu / (t1 - t_up)
        res["fleet_cpu_share"] = fleet_cpu / (t1 - t_up)
        n = stats1["renders"] - stats0["renders"]
        res["renders"] = n
        res["render_ms_per_node"] = 1000 * (stats1["render_cpu_seconds"] - stats0["render_cpu_seconds"]) / max(n, 1)
        at = time.time() - 1

        def count(expr):
            return scalar(base, "count(%s)" % expr, at)
        res["fleet_series"] = count('{job="gpumeter"}') - 5 * args.nodes  # less up and the scrape_* series
        res["ledger_series"] = count('{__name__=~"%s", job="gpumeter"}' % "|".join(LEDGER))
        res["process_series"] = count('{__name__=~"%s", job="gpumeter"}' % "|".join(PROCESS))
        res["owner_gpu_pairs"] = count("gpu_allocated_seconds_total")
        res["owners"] = count("count by (%s) (gpu_allocated_seconds_total)" % ", ".join(OWNER))
        res["owners_real"] = count('count by (%s) (gpu_allocated_seconds_total{project!~"__idle__|__unattributed__"})'
                                   % ", ".join(OWNER))
        res["owner_nodes"] = count("count by (instance, %s) (gpu_allocated_seconds_total)" % ", ".join(OWNER))
        res["processes"] = count("gpu_process_utilization_ratio")
        res["device_series"] = count('{__name__=~"gpu_.*", __name__!~"%s|gpu_info", job="gpumeter"}'
                                     % "|".join(LEDGER + PROCESS))
        res["agent_series"] = count('{__name__=~"gpumeter_.*", job="gpumeter"}')
        res["rule_series"] = count('{__name__=~"gpumeter:.*"}')
        res["cost_owner_series"] = count("gpumeter:cost_per_hour:by_instance_owner")
        res["alerts"] = count("ALERTS")
        # The alert rules' longest windows are 10 minutes: their cost grows until the run has
        # filled them. The table gives the mean of the last quarter of the run.
        late = t_up + 0.75 * args.seconds

        def summary(v):
            tail = [x for t, x in v if t >= late] or [v[-1][1]]
            return {"max": max(x for _, x in v), "mean": sum(tail) / len(tail), "n": len(tail)}
        res["groups"] = {k: summary(v) for k, v in groups.items()}
        res["last_duration"] = {k: summary(v) for k, v in durations.items()}

        # gpumeter report over the run, against the model's truth at the edge samples' times.
        a, b = t_up + S, at
        fleet = fleet_server.LiveFleet(args.nodes, args.gpus_per_node, info["start"], info["hours"],
                                       info["warmup_hours"], info["seed"], info["pod_rate"], info["pod_hours"])
        out = os.path.join(work, "report.json")
        r0 = time.monotonic()
        p = subprocess.Popen([exe, "report", "--url", base, "--from", "%.3f" % a, "--to", "%.3f" % b, "--by",
                              "project", "--pricing", args.pricing, "--format", "json", "--output", out,
                              "--progress", "never"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(p.pid, 0)
        res["report_wall_seconds"] = time.monotonic() - r0
        err = p.stderr.read().decode("utf-8", "replace")
        p.stderr.close()
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit("fleet_bench: gpumeter report failed:\n" + err[-3000:])
        res["report_peak_rss_kib"] = usage.ru_maxrss
        with open(out) as f:
            doc = json.load(f)
        res["report_queries"] = doc.get("queries")
        asof = {}
        for r in query(base, 'gpumeter_ledger_checkpoint_timestamp_seconds{job="gpumeter"}[%ds]'
                       % (int(b - a) + 2 * S), b):
            number = int(r["metric"]["instance"].split("-")[1].split(":")[0])
            edges = [max((float(v) for ts, v in r["values"] if ts <= x), default=None) for x in (a, b)]
            if None not in edges:
                asof[number] = tuple(edges)
        truth = fleet.truth_by_project(asof)
        worst = 0.0
        for row in doc["rows"]:
            want = truth.get(row["key"]["project"], {})
            for f in FIELDS:
                w = want.get(f, 0.0)
                worst = max(worst, abs(row[f] - w) / max(abs(w), 1e-9))
        res["report_worst_deviation"] = worst
        res["report_nodes_compared"] = len(asof)
        if vm is not None:
            time.sleep(2)
            vmm = {}
            for line in get(vm_url + "/metrics").decode().splitlines():
                if line and not line.startswith("#"):
                    k, v = line.rsplit(" ", 1)
                    vmm[k] = float(v)
            res["vm_peak_rss_kib"] = status_kib(vm.pid, "VmHWM")
            res["vm_rows_inserted"] = metric(vmm, "vm_rows_inserted_total")
            res["remote_write_failed"] = metric(m1, "prometheus_remote_storage_samples_failed_total")
    finally:
        stop(prom)
        stop(vm)
        stop(fleet_proc)
        if os.environ.get("FLEET_BENCH_KEEP") != "1":
            shutil.rmtree(work, ignore_errors=True)
        else:
            print("fleet_bench: kept %s" % work, file=sys.stderr)

    dcgm = dcgm_default_series()
    node_series = res["fleet_series"] / args.nodes
    ch = info["churn"]
    rows = [
        ("fleet", "%d nodes x %d GPUs = %d GPUs" % (args.nodes, args.gpus_per_node, gpus),
         "H100, A100, L40S nodes in turn; tests/tools/fleet_server.py, one process"),
        ("scrape and evaluation interval", "%d s" % S, "run %d s after every target was up" % args.seconds),
        ("samples appended per second", "{:,.0f}".format(res["samples_per_second"]),
         "prometheus_tsdb_head_samples_appended_total; scrapes and rule results"),
        ("head series", "{:,.0f}".format(res["head_series"]),
         "fleet {:,.0f}, rule results {:,.0f}".format(res["fleet_series"], res["rule_series"])),
        ("series per GPU, all", "%.1f" % (res["fleet_series"] / gpus), "%.0f per node" % node_series),
        ("series per GPU, device", "%.1f" % (res["device_series"] / gpus), "gpu_* gauges and counters, not gpu_info"),
        ("series per owner on a GPU (ledger)", "%.1f" % (res["ledger_series"] / max(res["owner_gpu_pairs"], 1)),
         "{:,.0f} owner-GPU pairs, {:.1f} per GPU, owners kept 24 h".format(
             res["owner_gpu_pairs"], res["owner_gpu_pairs"] / gpus)),
        ("series per owner", "%.1f" % ((res["ledger_series"] + res["process_series"]) / max(res["owners"], 1)),
         "ledger + process series / {:,.0f} owners ({:,.0f} not idle or unattributed)".format(
             res["owners"], res["owners_real"])),
        ("series per process", "%.1f" % (res["process_series"] / max(res["processes"], 1)),
         "{:,.0f} processes".format(res["processes"])),
        ("agent's own series per node", "%.0f" % (res["agent_series"] / args.nodes), "gpumeter_*"),
        ("cost rule series per owner on a node", "%.1f" % (res["cost_owner_series"] / max(res["owner_nodes"], 1)),
         "{:,.0f} gpumeter:cost_per_hour:by_instance_owner, {:,.0f} owner-node pairs".format(
             res["cost_owner_series"], res["owner_nodes"])),
        ("churn at %.1f pods per node-hour" % args.pod_rate,
         "{:,.0f} new series/h (model)".format(ch["new_series_per_hour"]),
         "{:,.0f} pods/h, {:,.0f} owner-GPU lives/h, {:,.0f} processes/h; head: {:,.0f} series/h created, "
         "rule results and ALERTS included".format(
             ch["pods_per_hour"], ch["owner_gpu_lives_per_hour"], ch["processes_per_hour"],
             res["series_created_per_hour"])),
    ]
    for name in sorted(res["groups"]):
        g = res["groups"][name]
        d = res["last_duration"].get(name, {"max": 0, "mean": 0})
        rows.append(("rule group %s" % name, "%.1f ms mean, %.1f ms max" % (1000 * g["mean"], 1000 * g["max"]),
                     "evaluationTime, %d polls; last_duration %.1f ms mean" % (g["n"], 1000 * d["mean"])))
    total = sum(g["mean"] for g in res["groups"].values())
    rows += [
        ("all rule groups, per evaluation", "%.1f ms" % (1000 * total),
         "%.1f%% of the %d s interval; %.0f ALERTS series; means of the run's last quarter, 10m windows %.0f%% full"
         % (100 * total / S, S, res["alerts"], min(100.0, 100 * args.seconds / 600.0))),
        ("Prometheus peak RSS", "%.0f MiB" % (res["prometheus_peak_rss_kib"] / 1024), "VmHWM"),
        ("Prometheus CPU", "%.0f%% of a core" % (100 * res["prometheus_cpu_share"]), "scrapes, rules, TSDB"),
        ("fleet server CPU", "%.0f%% of a core" % (100 * res["fleet_cpu_share"]),
         "render %.2f ms per node-scrape, %d scrapes" % (res["render_ms_per_node"], res["renders"])),
        ("gpumeter report --by project over the run", "%.2f s, %s requests, %.0f MiB" % (
            res["report_wall_seconds"], res["report_queries"], res["report_peak_rss_kib"] / 1024),
         "largest deviation from the exact truth %.2g (%d nodes)" % (res["report_worst_deviation"],
                                                                     res["report_nodes_compared"])),
    ]
    if "vm_peak_rss_kib" in res:
        rows.append(("VictoriaMetrics via remote_write", "%.0f MiB peak RSS" % (res["vm_peak_rss_kib"] / 1024),
                     "{:,.0f} rows inserted, {:,.0f} samples failed".format(res["vm_rows_inserted"],
                                                                             res["remote_write_failed"])))
    rows.append(("dcgm-exporter default counters", "%d series per GPU" % dcgm,
                 "gpumeter: %.1f device + %.1f ledger per GPU here" % (res["device_series"] / gpus,
                                                                      res["ledger_series"] / gpus)))
    print()
    print("Fleet: %d simulated GPUs scraped live by Prometheus every %d s" % (gpus, S))
    print()
    print_table(("measure", "value", "note"), [list(r) for r in rows])
    if args.json:
        res.update(info=info, dcgm_series_per_gpu=dcgm)
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
