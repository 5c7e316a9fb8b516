#!/usr/bin/python3
"""Series a gpumeter agent exports, by kind, on simulated nodes: the figures that size a
Prometheus (or a long-term store) for a fleet. Prints one table.

For each scenario the agent runs on the simulator with owners from a `gpumeter sim procfs
--follow` tree and the benchmark's agent config, as bench.py runs it. After a few collections
its /metrics is split into:
- device series (every gpu_* family but gpu_info, the ledger and the per-process families),
  per GPU;
- ledger series: 4 counters per (owner, GPU) pair, idle and unattributed time included;
- per-process series: 2 per process kept under processes.max_series;
- identity (gpu_info) and the agent's own gpumeter_* series.

Usage: bench/sizing.py --build build   (bench/run.sh runs it)
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

from bench import AGENT_CONFIG, ROOT, free_port, pids_in, print_table, stop, wait_http

LEDGER = ("gpu_allocated_seconds_total", "gpu_busy_seconds_total", "gpu_memory_byte_seconds_total",
          "gpu_attributed_energy_joules_total")
PROCESS = ("gpu_process_memory_used_bytes", "gpu_process_utilization_ratio")


def classify(body):
    counts = {"device": 0, "identity": 0, "ledger": 0, "process": 0, "agent": 0, "other": 0}
    gpus = 0
    for line in body.decode().splitlines():
        if not line or line.startswith("#"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name == "gpu_up":
            gpus += 1
        if name in LEDGER:
            counts["ledger"] += 1
        elif name in PROCESS:
            counts["process"] += 1
        elif name == "gpu_info":
            counts["identity"] += 1
        elif name.startswith("gpumeter_"):
            counts["agent"] += 1
        elif name.startswith("gpu_"):
            counts["device"] += 1
        else:
            counts["other"] += 1
    counts["gpus"] = gpus
    counts["total"] = sum(v for k, v in counts.items() if k not in ("gpus",))
    return counts


def measure(build, scenario, work, settle):
    name = os.path.splitext(os.path.basename(scenario))[0]
    d = os.path.join(work, name)
    host = os.path.join(d, "host")
    os.makedirs(os.path.join(host, "proc"))
    exe = os.path.join(build, "bin", "gpumeter")
    env = dict(os.environ, GPUMETER_SIM_EPOCH="%.6f" % time.time())
    sim = agent = None
    try:
        sim = subprocess.Popen([exe, "sim", "procfs", "--scenario", scenario, "--out", host, "--follow"],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 30
        while pids_in(os.path.join(host, "proc")) == 0:
            if time.time() > deadline or sim.poll() is not None:
                raise SystemExit("sizing: gpumeter sim procfs wrote no process for %s" % scenario)
            time.sleep(0.1)
        port = free_port()
        agent = subprocess.Popen([exe, "serve", "--sim.scenario", scenario, "--web.listen-address",
                                  "127.0.0.1:%d" % port, "--collect.interval", "1s", "--log.level", "warn",
                                  "--config.file", os.path.join(work, "agent.yaml"), "--path.procfs",
                                  os.path.join(host, "proc"), "--path.rootfs", host, "--ledger.state-file",
                                  os.path.join(d, "ledger.json")],
                                 env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_http("http://127.0.0.1:%d/-/ready" % port)
        time.sleep(settle)
        body = wait_http("http://127.0.0.1:%d/metrics" % port)
        r = classify(body)
        r["processes"] = pids_in(os.path.join(host, "proc"))
        r["bytes"] = len(body)
        r["scenario"] = name
        return r
    finally:
        stop(agent)
        stop(sim)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--settle", type=float, default=8, help="seconds of collection before reading /metrics")
    ap.add_argument("scenarios", nargs="*", default=[
        os.path.join(ROOT, "deploy", "scenarios", s)
        for s in ("h100-8x-three-teams.yaml", "bench-8x-64proc.yaml", "bench-8x-500proc.yaml")])
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="gpumeter-sizing-") as work:
        with open(os.path.join(work, "agent.yaml"), "w") as f:
            f.write(AGENT_CONFIG)
        for scenario in args.scenarios:
            print("sizing: %s ..." % os.path.basename(scenario), file=sys.stderr)
            r = measure(args.build, scenario, work, args.settle)
            pairs = r["ledger"] // len(LEDGER)
            rows.append([r["scenario"], str(r["gpus"]), str(r["processes"]), str(pairs),
                         "%.1f" % (r["device"] / max(r["gpus"], 1)), str(r["ledger"]), str(r["process"]),
                         str(r["identity"] + r["agent"] + r["other"]), str(r["total"]),
                         "%.1f" % (r["total"] / 15), "%.1f" % (r["bytes"] / 1024)])
    print_table(["scenario", "GPUs", "processes", "owner-GPU pairs", "device series per GPU", "ledger series",
                 "process series", "identity + agent", "total series", "samples/s at 15 s", "body KiB"], rows)


if __name__ == "__main__":
    main()
