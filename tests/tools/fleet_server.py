#!/usr/bin/python3
"""One process serving many simulated gpumeter nodes' /metrics, live, for a real Prometheus to
scrape a realistic fleet (bench/fleet_bench.py, tests/integration/test_fleet.py).

Every node is its own scrape target: one HTTP port, one path per node,
`/nodes/<i>/metrics`, and a Prometheus file_sd file (--file-sd) that gives each target its
`__metrics_path__` and its `instance` label ("node-<i>:9400", as a relabeled agent's). One
port rather than one per node because nothing downstream reads the address: the rules, the
alerts, the dashboards and `gpumeter report` read `job` and `instance`, and Prometheus still
keeps each target apart (its own `up`, scrape duration, sample limit and staleness), while a
test or a benchmark needs one free port instead of hundreds that another run may be holding.

What a node serves is a real agent's exposition: the families, their HELP and TYPE lines,
their label names and order, and the label values of the fixed series (clock domains,
sensors, clock event reasons, collectors, the agent's own families) come from a body captured
from `gpumeter serve` on a simulated 8x H100 node with owners from a simulated /proc and no
kubelet (the process policy), kept in tests/tools/fleet_template.prom and written again by
--capture-template. Nodes are H100, A100 and L40S in turn (tests/tools/backfill.py's
models); the GPM families (HELP ending "(GPM).") are left out on models without GPM, as the
agent leaves them out. The agent's scheduler-policy families (gpu_idle_allocated_seconds_total,
gpumeter_ledger_foreign_seconds_total) and the kubelet's are not served, as on such a node.

Values come from a truth model, not noise: tests/tools/backfill.py's fleet (piecewise-constant
loads, the ledger's rules, owners kept for ledger.owner_retention = 24 h after their last
charge), with its own schedule of pods here: on each node, pods (and Slurm jobs and plain
users' jobs, as in backfill.py) arrive at --pod-rate per hour, each on 1 to 8 GPUs held for an
exponential time (mean --pod-hours), queued until their GPUs are free; on every other node one
GPU is time-sliced among up to three small pods. Every counter is the exact integral of the
loads up to the node's last collection (the current time rounded down to --collect-interval),
so at any scrape the ledger counters are what the agent would have exported, and the usage
over any period is known exactly (GET /truth). The time the served ledger is as of is the
node's gpumeter_ledger_checkpoint_timestamp_seconds, as on an agent that checkpoints at every
collection: a reader of the samples can tell the exact period two of them span. The model starts --warmup-hours before --start
(so that the 24 h of retained owners are in steady state) and ends --hours after it, when the
server exits.

Endpoints: /nodes/<i>/metrics (i = 1..N); /truth?from=UNIX&to=UNIX (the usage by project, and
in total, that the ledger counted over the period, as JSON); /stats (renders, their wall and
CPU time, series per node, as JSON); / (a list of the nodes).

The render cost is measured and printed: once at start for every node, then every
--report-every seconds for the scrapes served.

Usage:
  fleet_server.py --nodes 200 --port 9700 --file-sd fleet.json --prometheus-config prom.yml \\
      --scrape-interval 15s --rule-file cost.yml --rule-file deploy/prometheus/gpumeter-alerts.yml
  fleet_server.py --capture-template tests/tools/fleet_template.prom --gpumeter build/bin/gpumeter
"""
import argparse
import bisect
import http.server
import json
import math
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import backfill  # noqa: E402

TEMPLATE = os.path.join(HERE, "fleet_template.prom")
TEMPLATE_SCENARIO = os.path.join("deploy", "scenarios", "h100-8x-three-teams.yaml")
GIB = backfill.GIB
LEDGER = ("gpu_allocated_seconds_total", "gpu_busy_seconds_total", "gpu_memory_byte_seconds_total",
          "gpu_attributed_energy_joules_total")
DEVICE_LEDGER = ("gpumeter_ledger_covered_seconds_total", "gpumeter_ledger_gap_seconds_total")
SIZES = [1, 1, 1, 1, 2, 2, 4, 8]
KINDS = {"k8s": 0.5, "slurm": 0.35, "plain": 0.15}
OCCUPANCY = 0.75  # the default --pod-hours: this share of a node's GPUs asked for (about half end up held)

# What the agent reads for each model beyond backfill.MODELS (name, idle W, max W, memory).
MODEL_INFO = {
    "NVIDIA H100 80GB HBM3": dict(gpm=True, pcie_gen=5, vbios="96.00.74.00.0B", temp=(31, 72),
                                  clocks={"graphics": (345, 1980), "sm": (345, 1980), "memory": (2619, 2619),
                                          "video": (765, 1545)}),
    "NVIDIA A100-SXM4-80GB": dict(gpm=False, pcie_gen=4, vbios="92.00.36.00.02", temp=(30, 68),
                                  clocks={"graphics": (210, 1410), "sm": (210, 1410), "memory": (1593, 1593),
                                          "video": (585, 1275)}),
    "NVIDIA L40S": dict(gpm=False, pcie_gen=4, vbios="95.02.5D.00.01", temp=(28, 75),
                        clocks={"graphics": (210, 2520), "sm": (210, 2520), "memory": (405, 9001),
                                "video": (765, 1965)}),
}
DRIVER = "570.86.15"
MEMORY = {m[0]: m[3] for m in backfill.MODELS}
PCIE_TX, PCIE_RX = 2.0e9, 4.0e9  # bytes/s at full utilization

AGENT_CONFIG = """\
attribution:
  environment: [GPUMETER_PROJECT, SLURM_JOB_ACCOUNT]
  hpc_job_mapping_dir: ""
  kubelet: {socket: off}
project:
  default: unknown
  rules:
    - {source: env.GPUMETER_PROJECT}
"""


# ---------------------------------------------------------------------------------------------
# The exposition template: a real agent's body


LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_sample(line):
    """'name{a="x",b="y"} 1.5' -> (name, [(a, x), (b, y)], "1.5")."""
    if "{" in line:
        name, rest = line.split("{", 1)
        labels_text, value = rest.rsplit("} ", 1)
        labels = [(k, v.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\"))
                  for k, v in LABEL.findall(labels_text)]
    else:
        name, value = line.split(" ", 1)
        labels = []
    return name, labels, value.split(" ")[0]


def parse_families(text):
    """A Prometheus text body -> [{name, type, help, samples: [(name, labels, value)]}] in order."""
    fams, by_name = [], {}
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            _, kind, name, *rest = line.split(" ", 3)
            fam = by_name.get(name)
            if fam is None:
                fam = by_name[name] = {"name": name, "type": None, "help": None, "samples": []}
                fams.append(fam)
            fam["help" if kind == "HELP" else "type"] = rest[0] if rest else ""
        elif line and not line.startswith("#"):
            s = parse_sample(line)
            fam = by_name.get(s[0])
            if fam is None:
                fam = by_name[s[0]] = {"name": s[0], "type": "untyped", "help": "", "samples": []}
                fams.append(fam)
            fam["samples"].append(s)
    return fams


def load_template(path=TEMPLATE):
    with open(path) as f:
        return parse_families(f.read())


def is_gpm(fam):
    return fam["help"].rstrip(".").endswith("(GPM)")


def capture_template(gpumeter, out, scenario=None, settle=20.0):
    """Runs `gpumeter serve` on a simulated node and writes its body, cut to GPU 0 and the
    agent's own series, as the template."""
    scenario = scenario or os.path.join(ROOT, TEMPLATE_SCENARIO)
    work = tempfile.mkdtemp(prefix="fleet-capture-")
    procs = []
    try:
        root = os.path.join(work, "root")
        env = dict(os.environ, GPUMETER_SIM_EPOCH="%.6f" % time.time())
        cfg = os.path.join(work, "gpumeter.yaml")
        with open(cfg, "w") as f:
            f.write(AGENT_CONFIG)
        procs.append(subprocess.Popen([gpumeter, "sim", "procfs", "--scenario", scenario, "--out", root, "--follow"],
                                      env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        deadline = time.time() + 30
        while not os.path.exists(os.path.join(root, "etc", "passwd")):
            if time.time() > deadline:
                raise SystemExit("fleet_server: gpumeter sim procfs wrote nothing")
            time.sleep(0.1)
        procs.append(subprocess.Popen([gpumeter, "serve", "--sim.scenario", scenario, "--web.listen-address",
                                       "127.0.0.1:%d" % port, "--collect.interval", "1s", "--config.file", cfg,
                                       "--path.procfs", os.path.join(root, "proc"), "--path.rootfs", root,
                                       "--ledger.state-file", os.path.join(work, "ledger.json"), "--log.level", "warn"],
                                      env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(settle)
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
            body = r.read().decode()
    finally:
        for p in reversed(procs):
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(work, ignore_errors=True)
    keep = ["# A real agent's exposition, cut to GPU 0 and the agent's own series: the template of",
            "# tests/tools/fleet_server.py. Written by fleet_server.py --capture-template from",
            "# `gpumeter serve` on %s (process policy, no kubelet, a state file)." % os.path.relpath(scenario, ROOT)]
    for line in body.splitlines():
        if line.startswith("#"):
            keep.append(line)
            continue
        labels = dict(parse_sample(line)[1])
        if labels.get("gpu", "0") in ("0", ""):
            keep.append(line)
    with open(out, "w") as f:
        f.write("\n".join(keep) + "\n")
    return body


# ---------------------------------------------------------------------------------------------
# The model: backfill.py's fleet with a live pod schedule


class LiveFleet(backfill.Fleet):
    """backfill.Fleet on [start, start + hours] (start - warmup_hours before it), with no
    outages, and pods arriving at a fixed rate on each node."""

    def __init__(self, nodes, gpus_per_node, start, hours, warmup_hours, seed, pod_rate, pod_hours):
        self.interval = 1
        self.start = int(start)
        self.end = self.start + int(hours * 3600)
        self.sim_start = self.start - int(warmup_hours * 3600)
        self.days = hours / 24.0
        self.seed = seed
        self.pod_rate = pod_rate
        self.pod_hours = pod_hours
        self.events = {"unattributed_gpus": [[n, 0] for n in range(1, nodes + 1)], "unattributed_ratio": 0.02}
        self.rng = random.Random(seed)
        self._make_nodes(nodes, gpus_per_node)
        self.arrivals = 0
        self._schedule()
        for g in self.gpus:
            self._segments(g)
            self._lives(g)
        self.ambiguous = []

    def shared_gpu(self, node):
        """The time-sliced GPU of every other node, or None."""
        return len(node.gpus) - 1 if node.number % 2 == 1 and len(node.gpus) > 1 else None

    def _schedule(self):
        for n, g in self.events["unattributed_gpus"]:
            self.nodes[n - 1].gpus[g].unattributed = self.events["unattributed_ratio"]
        rate = self.pod_rate / 3600.0
        mean = self.pod_hours * 3600.0
        for node in self.nodes:
            rng = random.Random("%s/live/%d" % (self.seed, node.number))
            shared = self.shared_gpu(node)
            excl = [i for i in range(len(node.gpus)) if i != shared]
            free = {i: self.sim_start for i in excl}
            sizes = [k for k in SIZES if k <= len(excl)] or [1]
            sliced = []
            t = float(self.sim_start)
            while rate > 0:
                t += rng.expovariate(rate)
                arrival = int(t)
                if arrival >= self.end:
                    break
                if arrival >= self.start:
                    self.arrivals += 1
                kind = self._kind(rng, KINDS)
                duration = max(60, int(rng.expovariate(1.0 / mean)))
                if shared is not None and rng.random() < 0.25:
                    sliced = [e for e in sliced if e > arrival]
                    if len(sliced) < 3:
                        node.gpus[shared].procs.append(backfill.Proc(
                            self._owner(rng, "k8s"), arrival, arrival + duration, rng.randint(5, 30) / 100.0,
                            rng.randint(2, 8) * GIB))
                        sliced.append(arrival + duration)
                        continue
                k = rng.choice(sizes)
                chosen = sorted(excl, key=lambda i: (free[i], i))[:k]
                begin = max([arrival] + [free[i] for i in chosen])
                owner = self._owner(rng, kind)
                if begin >= self.end:
                    continue
                for i in chosen:
                    node.gpus[i].procs.append(backfill.Proc(owner, begin, begin + duration, rng.randint(20, 95) / 100.0,
                                                            rng.randint(8, 70) * GIB))
                    free[i] = begin + duration

    def churn(self):
        """Per hour of the horizon: pods started, ledger series lives born, processes started."""
        hours = (self.end - self.start) / 3600.0
        starts = {}
        procs = 0
        for g in self.gpus:
            for p in g.procs:
                if self.start <= p.start < self.end:
                    procs += 1
                    starts[(p.owner, p.start)] = 1
        lives = sum(1 for g in self.gpus for life in g.lives if self.start <= life[1] < self.end)
        return {"pods_per_hour": len(starts) / hours, "owner_gpu_lives_per_hour": lives / hours,
                "processes_per_hour": procs / hours,
                "new_series_per_hour": (len(LEDGER) * lives + 2 * procs) / hours}

    def truth_by_project(self, periods):
        """{project: {field: usage}} counted over a period of each node's own: `periods` is
        {node number: (from, to)}, e.g. the times the ledger values of a report's two edge samples
        are as of (gpumeter_ledger_checkpoint_timestamp_seconds)."""
        out = {}
        for number, (a, b) in periods.items():
            for gpu in self.nodes[number - 1].gpus:
                for s, e, counted, _, procs in gpu.segments:
                    lo, hi = max(s, a), min(e, b)
                    if hi <= lo or not counted:
                        continue
                    for owner, r in self.rates(gpu, procs).items():
                        acc = out.setdefault(owner[0], [0.0] * 4)
                        for c in range(4):
                            acc[c] += r[c] * (hi - lo)
        fields = ("allocated_seconds", "busy_seconds", "memory_byte_seconds", "energy_joules")
        return {k: dict(zip(fields, v)) for k, v in sorted(out.items())}

    def truth_summary(self, a, b):
        t = self.truth(a, b)
        return {"from": a, "to": b, "by_project": t["by"]["project"], "total": t["total"],
                "covered_seconds": t["covered_seconds"], "owners": len(t["owners"])}


def default_pod_hours(pod_rate, gpus_per_node):
    sizes = [k for k in SIZES if k <= gpus_per_node]
    return OCCUPANCY * gpus_per_node / (pod_rate * sum(sizes) / len(sizes)) if pod_rate > 0 else 24.0


# ---------------------------------------------------------------------------------------------
# Rendering


def fmt(v):
    if v == int(v) and abs(v) < 1e15:
        return "%d" % v
    return repr(float(v))


def labelset(pairs):
    return "{" + ",".join('%s="%s"' % (k, backfill.escape(v)) for k, v in pairs) + "}"


class GpuPlan:
    """One GPU's precomputed parts: cumulative device integrals over its segments."""
    __slots__ = ("gpu", "starts", "cum_u", "cum_p", "u", "p", "mem", "procs", "info")

    def __init__(self, fleet, gpu):
        self.gpu = gpu
        self.starts, self.cum_u, self.cum_p, self.u, self.p, self.mem, self.procs = [], [], [], [], [], [], []
        cu = cp = 0.0
        for a, b, _, _, procs in gpu.segments:
            u = fleet.utilization(gpu, procs)
            p = gpu.idle_w + (gpu.tdp_w - gpu.idle_w) * u if procs else gpu.idle_w
            self.starts.append(a)
            self.cum_u.append(cu)
            self.cum_p.append(cp)
            self.u.append(u)
            self.p.append(p)
            self.mem.append(sum(x.memory for x in procs))
            self.procs.append(procs)
            cu += u * (b - a)
            cp += p * (b - a)
        self.info = MODEL_INFO[gpu.model]

    def state(self, t):
        j = max(0, bisect.bisect_right(self.starts, t) - 1)
        dt = t - self.starts[j]
        return State(self, j, self.u[j], self.p[j], self.mem[j], self.procs[j],
                     self.cum_u[j] + self.u[j] * dt, self.cum_p[j] + self.p[j] * dt)


class State:
    __slots__ = ("plan", "j", "u", "p", "mem", "procs", "busy", "energy")

    def __init__(self, plan, j, u, p, mem, procs, busy, energy):
        self.plan, self.j, self.u, self.p, self.mem, self.procs, self.busy, self.energy = \
            plan, j, u, p, mem, procs, busy, energy


def _clock(s, domain):
    lo, hi = s.plan.info["clocks"].get(domain, (0, 0))
    return (hi if s.procs else lo) * 1e6


def _temp(s, sensor):
    lo, hi = s.plan.info["temp"]
    return round(lo + (hi - lo) * s.u) + (6 if sensor == "memory" else 0)


# Device families: value of the series at a state; the argument is the value of the family's
# extra label (sensor, clock, reason, ...), if any. A family not here keeps its template value.
DEVICE_VALUES = {
    "gpu_up": lambda s, x: 1,
    "gpu_utilization_ratio": lambda s, x: round(s.u, 6),
    "gpu_memory_utilization_ratio": lambda s, x: round(0.6 * s.u, 6),
    "gpu_encoder_utilization_ratio": lambda s, x: 0,
    "gpu_decoder_utilization_ratio": lambda s, x: 0,
    "gpu_memory_total_bytes": lambda s, x: MEMORY[s.plan.gpu.model],
    "gpu_memory_used_bytes": lambda s, x: s.mem,
    "gpu_memory_free_bytes": lambda s, x: MEMORY[s.plan.gpu.model] - s.mem,
    "gpu_memory_reserved_bytes": lambda s, x: 0,
    "gpu_temperature_celsius": _temp,
    "gpu_power_watts": lambda s, x: round(s.p, 3),
    "gpu_power_limit_watts": lambda s, x: s.plan.gpu.tdp_w,
    "gpu_energy_joules_total": lambda s, x: round(s.energy, 3),
    "gpu_clock_hertz": _clock,
    "gpu_performance_state": lambda s, x: 0 if s.procs else 8,
    "gpu_pcie_link_generation": lambda s, x: s.plan.info["pcie_gen"],
    "gpu_pcie_link_width": lambda s, x: 16,
    "gpu_pcie_replay_errors_total": lambda s, x: 0,
    "gpu_pcie_transmit_bytes_total": lambda s, x: int(PCIE_TX * s.busy),
    "gpu_pcie_receive_bytes_total": lambda s, x: int(PCIE_RX * s.busy),
    "gpu_clock_event_active": lambda s, x: 1 if x == "gpu_idle" and not s.procs else 0,
    "gpu_ecc_errors_total": lambda s, x: 0,
    "gpu_remapped_rows": lambda s, x: 0,
    "gpu_graphics_engine_active_ratio": lambda s, x: round(s.u, 6),
    "gpu_sm_active_ratio": lambda s, x: round(s.u, 6),
    "gpu_sm_occupancy_ratio": lambda s, x: round(s.u / 2, 6),
    "gpu_tensor_active_ratio": lambda s, x: 0,
    "gpu_dram_active_ratio": lambda s, x: round(s.u / 2, 6),
    "gpu_pipe_active_ratio": lambda s, x: round(s.u / 2, 6) if x == "fp32" else 0,
    "gpu_pcie_throughput_bytes_per_second": lambda s, x: round((PCIE_TX if x == "transmit" else PCIE_RX) * s.u),
    "gpu_mig_enabled": lambda s, x: 0,
}


class Server:
    """The fleet's expositions, their render costs, and the truth."""

    def __init__(self, fleet, template, collect_interval=1.0):
        self.fleet = fleet
        self.template = template
        self.collect = collect_interval
        self.started = time.time()
        self.lock = threading.Lock()
        self.stats = {"renders": 0, "render_wall_seconds": 0.0, "render_cpu_seconds": 0.0, "max_render_seconds": 0.0,
                      "bytes": 0, "samples": 0}
        self.last_series = {}
        self.plans = {}
        self.pids = {}
        self.node_plans = [self._plan_node(node) for node in fleet.nodes]

    # -- plans ------------------------------------------------------------------------------

    def _plan_node(self, node):
        gpus = [GpuPlan(self.fleet, g) for g in node.gpus]
        gpm = MODEL_INFO[node.gpus[0].model]["gpm"]
        parts = []  # (kind, header, data)
        for fam in self.template:
            if is_gpm(fam) and not gpm:
                continue
            header = "# HELP %s %s\n# TYPE %s %s\n" % (fam["name"], fam["help"], fam["name"], fam["type"])
            name = fam["name"]
            samples = fam["samples"]
            order = [k for k, _ in samples[0][1]] if samples else []
            if name in LEDGER:
                parts.append(("ledger", header, (LEDGER.index(name), name, order)))
            elif name in DEVICE_LEDGER:
                parts.append(("device_ledger", header, (DEVICE_LEDGER.index(name), name)))
            elif "pid" in order:
                parts.append(("process", header, (name, order)))
            elif name == "gpu_info":
                parts.append(("info", header, self._info_lines(node, name, order)))
            elif samples and any(dict(s[1]).get("gpu") == "0" for s in samples):
                lines = []  # per GPU: [(prefix, fn, extra)]
                fn = DEVICE_VALUES.get(name)
                for plan in gpus:
                    g = plan.gpu
                    mine = []
                    for _, labels, value in samples:
                        d = dict(labels)
                        if d.get("gpu") != "0":
                            continue
                        extra = [v for k, v in labels if k not in ("gpu", "uuid")]
                        lab = [(k, str(g.index) if k == "gpu" else g.uuid if k == "uuid" else v) for k, v in labels]
                        prefix = name + labelset(lab) + " "
                        if fn is None:
                            mine.append((prefix, None, value))
                        else:
                            mine.append((prefix, fn, extra[0] if extra else None))
                    lines.append(mine)
                tail = "".join("%s%s %s\n" % (name, labelset(labels), value) for _, labels, value in samples
                               if dict(labels).get("gpu") == "")
                parts.append(("device", header, (lines, tail)))
            else:
                parts.append(("agent", header, [(name, labels, value) for _, labels, value in samples]))
        retired = sorted(life[2] for g in node.gpus for life in g.lives)
        return {"node": node, "gpus": gpus, "parts": parts, "retired": retired}

    def _info_lines(self, node, name, order):
        out = []
        for g in node.gpus:
            d = {"gpu": str(g.index), "uuid": g.uuid, "vendor": "nvidia", "model": g.model,
                 "pci_bus_id": "00000000:%02X:00.0" % (0x18 + 0x10 * g.index), "driver_version": DRIVER,
                 "vbios_version": MODEL_INFO[g.model]["vbios"]}
            out.append(name + labelset([(k, d.get(k, "")) for k in order]) + " 1\n")
        return "".join(out)

    def _pid(self, proc):
        pid = self.pids.get(id(proc))
        if pid is None:
            with self.lock:
                pid = self.pids.setdefault(id(proc), 100000 + len(self.pids))
        return pid

    # -- rendering --------------------------------------------------------------------------

    def collection_time(self, now):
        return math.floor(now / self.collect) * self.collect

    def render(self, index, now=None):
        """Node `index` (0-based)'s body at `now` (default: the current time); returns
        (text, series)."""
        now = time.time() if now is None else now
        t = self.collection_time(now)
        np_ = self.node_plans[index]
        states = [p.state(t) for p in np_["gpus"]]
        out = []
        n = 0
        active = None
        for kind, header, data in np_["parts"]:
            out.append(header)
            if kind == "device":
                lines, tail = data
                for st, mine in zip(states, lines):
                    for prefix, fn, extra in mine:
                        out.append(prefix + (fmt(fn(st, extra)) if fn is not None else extra) + "\n")
                    n += len(mine)
                if tail:
                    out.append(tail)
                    n += tail.count("\n")
            elif kind == "info":
                out.append(data)
                n += len(np_["gpus"])
            elif kind == "ledger":
                c, name, order = data
                if active is None:
                    active = self._active_lives(np_, t)
                for g, owner, born, j, knots, values, slopes, labels in active:
                    v = values[c][j] + slopes[c][j] * (t - knots[j])
                    out.append(name + labels + " " + fmt(v) + "\n")
                n += len(active)
            elif kind == "device_ledger":
                c, name = data
                for plan in np_["gpus"]:
                    g = plan.gpu
                    for born, until, covered, gaps in g.device_lives:
                        if born < t < until:
                            knots, values, slopes = covered if c == 0 else gaps
                            j = bisect.bisect_right(knots, t) - 1
                            v = values[j] + slopes[j] * (t - knots[j]) if j >= 0 else 0.0
                            out.append('%s{gpu="%d",uuid="%s"} %s\n' % (name, g.index, g.uuid, fmt(v)))
                            n += 1
            elif kind == "process":
                name, order = data
                for st in states:
                    g = st.plan.gpu
                    for p in st.procs:
                        owner = dict(zip(backfill.OWNER_DIMS, p.owner))
                        d = dict(owner, gpu=str(g.index), uuid=g.uuid, pid=str(self._pid(p)))
                        v = p.memory if name == "gpu_process_memory_used_bytes" else p.share
                        out.append(name + labelset([(k, d.get(k, "")) for k in order]) + " " + fmt(v) + "\n")
                        n += 1
            else:
                for name, labels, value in data:
                    out.append(name + (labelset(labels) if labels else "") + " " + self._agent_value(
                        name, dict(labels), value, np_, now, t) + "\n")
                    n += 1
        return "".join(out), n

    def _active_lives(self, np_, t):
        out = []
        for plan in np_["gpus"]:
            g = plan.gpu
            for life in g.lives:
                owner, born, until, knots, values, slopes = life
                if born < t < until:
                    j = bisect.bisect_right(knots, t) - 1
                    out.append((g, owner, born, j, knots, values, slopes, self._owner_labels(g, owner)))
        return out

    _label_cache = {}

    def _owner_labels(self, g, owner):
        key = (g.uuid, owner)
        s = self._label_cache.get(key)
        if s is None:
            s = labelset([("gpu", str(g.index)), ("uuid", g.uuid)] + list(zip(backfill.OWNER_DIMS, owner)))
            self._label_cache[key] = s
        return s

    def _agent_value(self, name, labels, value, np_, now, t):
        if name == "gpumeter_ledger_checkpoint_timestamp_seconds":
            return fmt(t)  # the time the ledger values served are as of
        if name == "gpumeter_config_last_reload_success_timestamp_seconds":
            return fmt(round(self.started, 3))
        if name == "gpumeter_snapshot_age_seconds":
            return fmt(round(now - t, 6))
        if name == "gpumeter_series_dropped_total" and labels.get("kind") == "owner":
            return fmt(bisect.bisect_right(np_["retired"], t) * len(LEDGER))
        return value

    def measured_render(self, index):
        c0, w0 = time.thread_time(), time.perf_counter()
        body, n = self.render(index)
        cpu, wall = time.thread_time() - c0, time.perf_counter() - w0
        with self.lock:
            s = self.stats
            s["renders"] += 1
            s["render_wall_seconds"] += wall
            s["render_cpu_seconds"] += cpu
            s["max_render_seconds"] = max(s["max_render_seconds"], wall)
            s["bytes"] += len(body)
            s["samples"] += n
            self.last_series[index + 1] = n
        return body


def make_handler(server):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def send(self, code, body, ctype="text/plain; charset=utf-8"):
            data = body.encode() if isinstance(body, str) else body
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            url = urllib.parse.urlsplit(self.path)
            parts = url.path.strip("/").split("/")
            try:
                if len(parts) == 3 and parts[0] == "nodes" and parts[2] == "metrics":
                    i = int(parts[1])
                    if not 1 <= i <= len(server.node_plans):
                        return self.send(404, "no such node\n")
                    return self.send(200, server.measured_render(i - 1), "text/plain; version=0.0.4; charset=utf-8")
                if url.path == "/truth":
                    q = urllib.parse.parse_qs(url.query)
                    a, b = float(q["from"][0]), float(q["to"][0])
                    return self.send(200, json.dumps(server.fleet.truth_summary(a, b)), "application/json")
                if url.path == "/stats":
                    with server.lock:
                        doc = dict(server.stats, series_per_node=dict(server.last_series),
                                   nodes=len(server.node_plans), gpus=len(server.fleet.gpus),
                                   start=server.fleet.start, end=server.fleet.end, uptime_seconds=time.time() - server.started)
                    return self.send(200, json.dumps(doc), "application/json")
                if url.path == "/":
                    return self.send(200, "".join("/nodes/%d/metrics  %s\n" % (i + 1, p["node"].instance)
                                                  for i, p in enumerate(server.node_plans)))
            except (KeyError, ValueError) as e:
                return self.send(400, "bad request: %s\n" % e)
            self.send(404, "not found\n")

        def log_message(self, *args):
            pass

    return Handler


class QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512

    def handle_error(self, request, client_address):
        pass  # a scraper that hangs up early


def write_file_sd(path, port, nodes, host="127.0.0.1"):
    groups = [{"targets": ["%s:%d" % (host, port)],
               "labels": {"__metrics_path__": "/nodes/%d/metrics" % (i + 1), "instance": node.instance}}
              for i, node in enumerate(nodes)]
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(groups, f, indent=1)
    os.rename(tmp, path)


def write_prometheus_config(path, file_sd, scrape_interval, evaluation_interval, rule_files, extra=None):
    cfg = {"global": {"scrape_interval": scrape_interval, "evaluation_interval": evaluation_interval},
           "rule_files": [os.path.abspath(r) for r in rule_files],
           "scrape_configs": [{"job_name": "gpumeter", "file_sd_configs": [{"files": [os.path.abspath(file_sd)]}]}]}
    if extra:
        cfg.update(extra)
    with open(path, "w") as f:
        json.dump(cfg, f, indent=1)  # JSON is YAML


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--nodes", type=int, default=200)
    p.add_argument("--gpus-per-node", type=int, default=8)
    p.add_argument("--pod-rate", type=float, default=2.0, help="pods (jobs) started per node per hour (default 2)")
    p.add_argument("--pod-hours", type=float,
                   help="mean hours a pod holds its GPUs (default: %g x GPUs per node / (pod rate x mean GPUs per pod))" % OCCUPANCY)
    p.add_argument("--seed", default="fleet")
    p.add_argument("--start", type=float, help="unix time the live horizon starts (default: now)")
    p.add_argument("--hours", type=float, default=24.0, help="length of the live horizon; the server exits at its end")
    p.add_argument("--warmup-hours", type=float, default=26.0,
                   help="model time before --start (24 h of retained owners reach steady state)")
    p.add_argument("--collect-interval", type=float, default=1.0,
                   help="seconds: values are as of the last multiple of it, like an agent's last collection")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="listening port (0: any free one, see --ready-file)")
    p.add_argument("--ready-file", help="write {port, url, start, end, ...} here as JSON once listening")
    p.add_argument("--file-sd", help="write the Prometheus file_sd targets here")
    p.add_argument("--prometheus-config", help="write a Prometheus config scraping the fleet here (needs --file-sd)")
    p.add_argument("--scrape-interval", default="15s")
    p.add_argument("--evaluation-interval", help="default: the scrape interval")
    p.add_argument("--rule-file", action="append", default=[], help="rule file for --prometheus-config (repeatable)")
    p.add_argument("--report-every", type=float, default=60.0, help="seconds between render cost lines (0: never)")
    p.add_argument("--template", default=TEMPLATE, help="the captured exposition (default %(default)s)")
    p.add_argument("--capture-template", metavar="OUT",
                   help="run a real agent (--gpumeter) on %s and write its exposition as the template" % TEMPLATE_SCENARIO)
    p.add_argument("--gpumeter", default=os.path.join(ROOT, "build", "bin", "gpumeter"))
    args = p.parse_args(argv)

    if args.capture_template:
        capture_template(args.gpumeter, args.capture_template)
        print("fleet_server: wrote %s" % args.capture_template)
        return 0
    if args.prometheus_config and not args.file_sd:
        p.error("--prometheus-config needs --file-sd")
    if args.nodes < 1 or args.gpus_per_node < 1:
        p.error("--nodes and --gpus-per-node must be positive")

    start = args.start if args.start is not None else time.time()
    pod_hours = args.pod_hours or default_pod_hours(args.pod_rate, args.gpus_per_node)
    t0 = time.process_time()
    w0 = time.time()
    fleet = LiveFleet(args.nodes, args.gpus_per_node, start, args.hours, args.warmup_hours, args.seed,
                      args.pod_rate, pod_hours)
    server = Server(fleet, load_template(args.template), args.collect_interval)
    churn = fleet.churn()
    print("fleet_server: %d nodes x %d GPUs, pods %.2f per node-hour (mean %.2f h), model built in %.1f s CPU "
          "(%.1f s wall)" % (args.nodes, args.gpus_per_node, args.pod_rate, pod_hours, time.process_time() - t0,
                             time.time() - w0))
    print("fleet_server: churn over the horizon: %.0f pods/h started, %.0f owner-GPU ledger lives/h, "
          "%.0f processes/h, %.0f new series/h" % (churn["pods_per_hour"], churn["owner_gpu_lives_per_hour"],
                                                  churn["processes_per_hour"], churn["new_series_per_hour"]))
    # The render cost of one scrape of every node.
    c0, r0 = time.process_time(), time.perf_counter()
    total = size = 0
    for i in range(args.nodes):
        body, n = server.render(i)
        total += n
        size += len(body)
    cpu, wall = time.process_time() - c0, time.perf_counter() - r0
    print("fleet_server: one scrape of all %d nodes: %d series, %.1f MiB, render %.2f s CPU (%.2f ms per node, "
          "%.1f%% of a core at a %s scrape)" % (args.nodes, total, size / 2 ** 20, cpu, 1000 * cpu / args.nodes,
                                               100 * cpu / max(parse_duration(args.scrape_interval), 1e-9),
                                               args.scrape_interval), flush=True)

    httpd = QuietServer((args.host, args.port), make_handler(server))
    port = httpd.server_address[1]
    if args.file_sd:
        write_file_sd(args.file_sd, port, fleet.nodes, args.host)
    if args.prometheus_config:
        write_prometheus_config(args.prometheus_config, args.file_sd, args.scrape_interval,
                                args.evaluation_interval or args.scrape_interval, args.rule_file)
    if args.ready_file:
        tmp = args.ready_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"port": port, "url": "http://%s:%d" % (args.host, port), "start": fleet.start,
                       "end": fleet.end, "nodes": args.nodes, "gpus_per_node": args.gpus_per_node,
                       "pod_rate": args.pod_rate, "pod_hours": pod_hours, "seed": args.seed,
                       "warmup_hours": args.warmup_hours, "hours": args.hours,
                       "collect_interval": args.collect_interval, "series_per_scrape": total,
                       "render_cpu_seconds_per_scrape": cpu, "churn": churn}, f)
        os.rename(tmp, args.ready_file)
    print("fleet_server: serving http://%s:%d/nodes/<1..%d>/metrics until %s" % (
        args.host, port, args.nodes, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(fleet.end))), flush=True)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    last = dict(server.stats)
    last_t = time.time()
    while not stop.is_set() and time.time() < fleet.end:
        stop.wait(min(args.report_every or 1.0, 1.0) if args.report_every else 1.0)
        if args.report_every and time.time() - last_t >= args.report_every:
            with server.lock:
                s = dict(server.stats)
            n = s["renders"] - last["renders"]
            if n:
                cpu = s["render_cpu_seconds"] - last["render_cpu_seconds"]
                wall = s["render_wall_seconds"] - last["render_wall_seconds"]
                print("fleet_server: last %.0f s: %d scrapes, render %.2f ms CPU (%.2f ms wall) per node, "
                      "%.1f%% of a core" % (time.time() - last_t, n, 1000 * cpu / n, 1000 * wall / n,
                                          100 * cpu / (time.time() - last_t)), flush=True)
            last, last_t = s, time.time()
    httpd.shutdown()
    httpd.server_close()
    return 0


def parse_duration(text):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m|h)", text)
    if not m:
        raise SystemExit("fleet_server: bad duration %r" % text)
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]


if __name__ == "__main__":
    sys.exit(main())
