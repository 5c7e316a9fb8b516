#!/usr/bin/python3
"""The last days of a simulated fleet's history, as OpenMetrics for
`promtool tsdb create-blocks-from openmetrics`, derived from the simulator's ground truth.

Each node plays its scenario back to back, from END - DAYS to END: at a time x after the start
the scenario is at x mod P (P its duration), and the ledger of an agent that ran all along, with
its state file, holds q whole plays plus the play so far (q = x div P):

    counter(x) = q * truth(0, P) + truth(0, x mod P)          (`gpumeter sim truth`)

So the history's figures are exact and explainable: over the days, each owner's usage is
(DAYS * 86400 / P) times its usage in one play of the scenario (`--describe` prints it per
project). DAYS * 86400 must be a multiple of every P, so that the plays end at END, where the
live nodes start their scenarios at 0.

Series, one sample per --interval, with the labels the agent exports (empty ones left out, as
Prometheus stores them) and `job` and `instance` as the pipeline's scrape config sets them:
  * the ledger (docs/ledger.md), process policy: gpu_allocated_seconds_total,
    gpu_busy_seconds_total, gpu_memory_byte_seconds_total and gpu_attributed_energy_joules_total
    per GPU (or MIG device) and owner; the time no process held to project="__idle__", busy time
    no process accounts for to project="__unattributed__"; gpumeter_ledger_covered_seconds_total
    per GPU. On a GPU in MIG mode the MIG devices are billed in GPU-seconds (slices / 7), and the
    slices no instance holds go to the GPU's "__idle__" (docs/metrics.md);
  * gauges, each the average over the interval before the sample as the counters give it:
    gpu_info, gpu_up, gpu_utilization_ratio (not on a GPU in MIG mode), gpu_power_watts,
    gpu_memory_used_bytes; and `up` for each node, as Prometheus records its scrapes;
  * the scenario's Xid faults as gpu_xid_errors_total, once a day, in each day's first play (a
    fault every play would be a GPU to replace, not a month to look at).
Owners are named as the pipeline's agent config names them: project from GPUMETER_PROJECT,
else from a namespace team-<project>, else "unknown", user from the scenario's users (else the uid), hpc_job from SLURM_JOB_ID,
namespace, pod and container from the pod.

Usage:
  history.py --gpumeter BIN --end UNIX --days 30 --interval 600 --out FILE \
      --node INSTANCE=SCENARIO [--node ...] [--describe FILE.json]
Progress goes to standard error.
"""
import argparse
import concurrent.futures
import json
import math
import re
import subprocess
import sys
import time

import yaml

DAY = 86400
MIG_SLICES = 7
COUNTERS = (  # family, truth field, help
    ("gpu_allocated_seconds", "allocated_seconds", "Seconds of the GPU allocated to the owner."),
    ("gpu_busy_seconds", "busy_seconds", "Integral of GPU utilization in seconds, by owner."),
    ("gpu_memory_byte_seconds", "memory_byte_seconds", "Integral of the owner's device memory in byte-seconds."),
    ("gpu_attributed_energy_joules", "energy_joules", "GPU energy in joules charged to the owner."),
)
FIELDS = [c[1] for c in COUNTERS]


def truth(gpumeter, scenario, to):
    if to <= 0:
        return None
    out = subprocess.run([gpumeter, "sim", "truth", "--scenario", scenario, "--from", "0", "--to", "%.6f" % to,
                          "--format", "json"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def duration_seconds(text):
    text = str(text)
    if re.fullmatch(r"[0-9.]+", text):
        return float(text)
    parts = re.findall(r"([0-9.]+)(ms|h|m|s)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise SystemExit("history: cannot read duration %r" % text)
    return sum(float(n) * {"h": 3600, "m": 60, "s": 1, "ms": 0.001}[u] for n, u in parts)


def xid_faults(path):
    """The scenario's Xid faults: [(gpu, at seconds, code)]."""
    with open(path) as f:
        doc = yaml.safe_load(f) or {}
    return [(int(x["gpu"]), duration_seconds(x["at"]), int(x["code"]))
            for x in doc.get("faults", []) if x.get("kind") == "xid"]


def scenario_duration(path):
    """The scenario's `duration` in seconds: a number, or units such as 2h, 1h30m, 90s."""
    with open(path) as f:
        m = re.search(r"^duration:\s*\"?([0-9hms.]+)\"?\s*(#.*)?$", f.read(), re.M)
    if not m:
        raise SystemExit("history: %s has no duration" % path)
    text = m.group(1)
    if re.fullmatch(r"[0-9.]+", text):
        return int(float(text))
    parts = re.findall(r"([0-9.]+)([hms])", text)
    if "".join(n + u for n, u in parts) != text:
        raise SystemExit("history: %s: cannot read duration %r" % (path, text))
    return int(sum(float(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in parts))


def amd_uuid(uuid):
    """An AMD GPU's `uuid` label: ROCm SMI's unique id as rocm-smi prints it, which the simulated
    amdgpu tree takes from the scenario's UUID (its last 16 hex digits, top nibble never 0)."""
    digits = "".join(c for c in uuid.lower() if c in "0123456789abcdef")[-16:].rjust(16, "0")
    if digits[0] == "0":
        digits = "4" + digits[1:]
    return "0x%x" % int(digits, 16)


def owner_labels(job, users, amd=False):
    env = job.get("env", {})
    k8s = job.get("kubernetes", {})
    if amd:
        # Pods are not named on AMD GPUs (the kubelet's device map knows NVIDIA's resource only):
        # the container is the first 12 hex digits of the container id in the cgroup path.
        m = re.search(r"[0-9a-f]{64}", job.get("cgroup", ""))
        k8s = {"container": m.group(0)[:12]} if m else {}
    project = env.get("GPUMETER_PROJECT", "")
    if not project:
        m = re.fullmatch(r"team-(.*)", k8s.get("namespace", ""))
        project = m.group(1) if m else "unknown"
    return (("project", project),
            ("user", users.get(job["uid"], str(job["uid"]))),
            ("namespace", k8s.get("namespace", "")), ("pod", k8s.get("pod", "")),
            ("container", k8s.get("container", "")), ("hpc_job", env.get("SLURM_JOB_ID", "")))


def reserved(project):
    return (("project", project),)


def usage(t):
    """{(gpu labels, owner labels): {field: value}}, {gpu labels: covered seconds}, and the GPUs
    ({uuid: (gpu, model, mig)}) and their totals ({uuid: {busy, energy, memory}}), from one truth."""
    out, covered, totals = {}, {}, {}
    if t is None:
        return out, covered, totals
    users = {uid: name for name, uid in t.get("users", {}).items()}
    window = t["window_seconds"]
    mig = t.get("mig", {})
    mig_gpus = {g["uuid"]: g for g in mig.get("gpus", [])}

    def add(gpu_key, owner, values):
        acc = out.setdefault((gpu_key, owner), dict.fromkeys(FIELDS, 0.0))
        for f, v in values.items():
            acc[f] += v

    for g in t["gpus"]:
        amd = g["model"].startswith("AMD")
        if amd:
            g["uuid"] = amd_uuid(g["uuid"])
            for j in t["jobs"]:
                if j["gpu"] == g["gpu"]:
                    j["uuid"], j["amd"] = g["uuid"], True
        key = (("gpu", str(g["gpu"])), ("uuid", g["uuid"]))
        covered[key] = window
        totals[g["uuid"]] = {"busy": g["busy_seconds"], "energy": g["energy_joules"],
                             "memory": g["memory_byte_seconds"]}
        if g["uuid"] in mig_gpus:
            m = mig_gpus[g["uuid"]]
            add(key, reserved("__idle__"), {"allocated_seconds": m["unallocated_slice_seconds"] / MIG_SLICES,
                                            "energy_joules": m["unallocated_energy_joules"]})
            continue
        add(key, reserved("__idle__"), {"allocated_seconds": g["idle_seconds"], "energy_joules": g["idle_energy_joules"]})
        jobs = [j for j in t["jobs"] if j["uuid"] == g["uuid"]]
        for j in jobs:
            add(key, owner_labels(j, users, j.get("amd", False)), {f: j[f] for f in FIELDS})
        rest = g["busy_seconds"] - sum(j["busy_seconds"] for j in jobs)
        if rest > 1e-6 * max(1.0, g["busy_seconds"]):
            add(key, reserved("__unattributed__"), {"busy_seconds": rest})
    jobs_by_name = {}
    for j in t["jobs"]:
        jobs_by_name.setdefault(j["name"], j)
    for inst in mig.get("instances", []):
        key = (("gpu", str(inst["gpu"])), ("uuid", inst["uuid"]), ("mig_uuid", inst["mig_uuid"]),
               ("gpu_instance", str(inst["gpu_instance"])), ("compute_instance", str(inst["compute_instance"])),
               ("mig_profile", inst["profile"]))
        share = inst["slices"] / MIG_SLICES
        add(key, reserved("__idle__"), {"allocated_seconds": inst["idle_seconds"] * share,
                                        "energy_joules": inst["idle_energy_joules"]})
        for o in inst["owners"]:
            job = jobs_by_name.get(o["owner"])
            owner = owner_labels(job, users) if job else reserved("unknown")
            add(key, owner, {"allocated_seconds": o["allocated_seconds"] * share,
                             "busy_seconds": o["busy_seconds"] * share,
                             "memory_byte_seconds": o["memory_byte_seconds"], "energy_joules": o["energy_joules"]})
    return out, covered, totals


class Node:
    def __init__(self, instance, scenario, gpumeter, interval, span):
        self.instance, self.scenario = instance, scenario
        one = truth(gpumeter, scenario, 1)  # the scenario's length and its GPUs
        self.period = None
        self.gpumeter = gpumeter
        self.gpus = {(amd_uuid(g["uuid"]) if g["model"].startswith("AMD") else g["uuid"]): (g["gpu"], g["model"])
                     for g in one["gpus"]}
        self.mig = {g["uuid"] for g in one.get("mig", {}).get("gpus", [])}
        self.vendor = {}
        self.interval, self.span = interval, span
        self.xids = xid_faults(scenario)

    def load(self, period, pool):
        """The truths this node's samples need: one per distinct offset into the scenario."""
        if self.span % period:
            raise SystemExit("history: %s: %d days are not a whole number of plays of %g s" %
                             (self.scenario, self.span // DAY, period))
        self.period = period
        offsets = sorted({(k * self.interval) % period for k in range(int(period // math.gcd(self.interval, period)) + 1)}
                         | {period})
        futures = {r: pool.submit(truth, self.gpumeter, self.scenario, r) for r in offsets}
        self.at = {r: usage(f.result()) for r, f in futures.items()}
        self.owners = sorted({k for u, _, _ in self.at.values() for k in u})

    def value(self, x):
        """(usage, covered, totals) at x seconds after the history's start."""
        q, r = divmod(x, self.period)
        whole, rest = self.at[self.period], self.at[r]
        return whole, rest, q


def labels_text(pairs):
    return ",".join('%s="%s"' % (k, v.replace("\\", "\\\\").replace('"', '\\"')) for k, v in pairs if v != "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpumeter", required=True)
    ap.add_argument("--end", type=int, required=True, help="the history's last sample (Unix seconds)")
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--interval", type=int, default=600, help="seconds between samples")
    ap.add_argument("--node", action="append", required=True, help="INSTANCE=SCENARIO")
    ap.add_argument("--job", default="gpumeter")
    ap.add_argument("--out", required=True)
    ap.add_argument("--describe", help="write each node's plays and per-project totals here (JSON)")
    a = ap.parse_args()
    t0 = time.monotonic()
    span = a.days * DAY
    end = a.end
    start = end - span
    nodes = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for spec in a.node:
            instance, scenario = spec.split("=", 1)
            node = Node(instance, scenario, a.gpumeter, a.interval, span)
            node.load(scenario_duration(scenario), pool)
            nodes.append(node)
            print("history: %s: %s, %d GPUs, a play of %g s, %d plays" %
                  (instance, scenario.rsplit("/", 1)[-1], len(node.gpus), node.period, span // node.period),
                  file=sys.stderr, flush=True)
    samples = list(range(0, span + 1, a.interval))
    describe = {"start": start, "end": end, "days": a.days, "interval": a.interval, "nodes": []}
    lines = 0
    with open(a.out, "w") as out:
        def family(name, kind, help_text):
            out.write("# HELP %s %s\n# TYPE %s %s\n" % (name, help_text, name, kind))

        for name, field, help_text in COUNTERS:
            family(name, "counter", help_text)
            for node in nodes:
                base = (("instance", node.instance), ("job", a.job))
                for key in node.owners:
                    text = labels_text(base + key[0] + key[1])
                    whole = node.at[node.period][0].get(key, {}).get(field, 0.0)
                    v = 0.0
                    for x in samples:
                        q, r = divmod(x, node.period)
                        # Each offset's truth is computed on its own, so two neighbours can differ by
                        # rounding (about 1e-12 of the value) the wrong way. A ledger counter never
                        # goes down, and the report refuses one that goes down and not to zero.
                        v = max(v, q * whole + node.at[r][0].get(key, {}).get(field, 0.0))
                        out.write("%s_total{%s} %.17g %d\n" % (name, text, v, start + x))
                    lines += len(samples)
        family("gpumeter_ledger_covered_seconds", "counter", "Seconds the ledger has integrated.")
        for node in nodes:
            for uuid, (gpu, _) in sorted(node.gpus.items()):
                text = labels_text((("instance", node.instance), ("job", a.job), ("gpu", str(gpu)), ("uuid", uuid)))
                for x in samples:
                    out.write("gpumeter_ledger_covered_seconds_total{%s} %d %d\n" % (text, x, start + x))
                lines += len(samples)
        print("history: ledger counters written (%d samples, %.1f s)" % (lines, time.monotonic() - t0),
              file=sys.stderr, flush=True)

        def gauge(name, help_text, value_of, skip_mig=False, extra=()):
            nonlocal lines
            family(name, "gauge", help_text)
            for node in nodes:
                for uuid, (gpu, model) in sorted(node.gpus.items()):
                    if skip_mig and uuid in node.mig:
                        continue
                    text = labels_text((("instance", node.instance), ("job", a.job), ("gpu", str(gpu)), ("uuid", uuid))
                                       + tuple(extra_pair(model) for extra_pair in extra))
                    prev = None
                    for x in samples:
                        cur = total(node, uuid, x)
                        v = value_of(prev, cur)
                        prev = cur
                        if v is not None:
                            out.write("%s{%s} %.6g %d\n" % (name, text, v, start + x))
                            lines += 1

        def total(node, uuid, x):
            q, r = divmod(x, node.period)
            whole = node.at[node.period][2].get(uuid, {})
            part = node.at[r][2].get(uuid, {})
            return {k: q * whole.get(k, 0.0) + part.get(k, 0.0) for k in ("busy", "energy", "memory")}

        def rate(field, scale=1.0):
            return lambda prev, cur: None if prev is None else (cur[field] - prev[field]) / a.interval * scale

        family("up", "gauge", "1 if the target was scraped.")
        for node in nodes:
            text = labels_text((("instance", node.instance), ("job", a.job)))
            for x in samples:
                out.write("up{%s} 1 %d\n" % (text, start + x))
            lines += len(samples)
        family("gpu_xid_errors", "counter", "Xid events, by code.")
        for node in nodes:
            by_uuid = {gpu: uuid for uuid, (gpu, _) in node.gpus.items()}
            for gpu, at, code in node.xids:
                text = labels_text((("instance", node.instance), ("job", a.job), ("gpu", str(gpu)),
                                    ("uuid", by_uuid[gpu]), ("xid", str(code))))
                for x in samples:
                    day, into = divmod(x, DAY)
                    out.write("gpu_xid_errors_total{%s} %d %d\n" % (text, day + (into >= at), start + x))
                lines += len(samples)
        vendor = lambda model: ("vendor", "amd" if model.startswith("AMD") else "nvidia")
        gauge("gpu_info", "GPU identity.", lambda prev, cur: 1, extra=(vendor, lambda m: ("model", m)))
        gauge("gpu_up", "1 if the last collection succeeded.", lambda prev, cur: 1)
        gauge("gpu_utilization_ratio", "GPU utilization, the interval's average.", rate("busy"), skip_mig=True)
        gauge("gpu_power_watts", "GPU power, the interval's average.", rate("energy"))
        gauge("gpu_memory_used_bytes", "Device memory used, the interval's average.", rate("memory"))
        out.write("# EOF\n")
    for node in nodes:
        plays = span // node.period
        projects = {}
        for (gpu_key, owner), fields in node.at[node.period][0].items():
            p = projects.setdefault(dict(owner)["project"], dict.fromkeys(FIELDS, 0.0))
            for f in FIELDS:
                p[f] += fields[f] * plays
        describe["nodes"].append({"instance": node.instance, "scenario": node.scenario, "play_seconds": node.period,
                                  "plays": plays, "gpus": len(node.gpus), "projects": projects})
    if a.describe:
        with open(a.describe, "w") as f:
            json.dump(describe, f, indent=1)
    print("history: %d samples in %s (%.1f s)" % (lines, a.out, time.monotonic() - t0), file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
