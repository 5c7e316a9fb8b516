#!/usr/bin/python3
"""What the PCIe throughput fallback costs the agent (docs/metrics.md, "PCIe throughput before
R555"): the core case (bench/bench.py: a 1 s collection interval, no resolvable owner, the ledger
in memory, a scrape a second) on deploy/scenarios/bench-8x-64proc.yaml, whose driver (R550) counts
no PCIe bytes, so that with the default collectors (no GPM) the agent reads
nvmlDeviceGetPcieThroughput for each of the 8 GPUs, each way, on its throughput thread:

  without      nvmlDeviceGetPcieThroughput answering NOT_SUPPORTED (GPUMETER_SIM_UNSUPPORTED):
               asked once per GPU, then never, as before the fallback
  with         the fallback: 16 calls of 20 ms a second on the throughput thread

run one after the other (--rounds alternates them again), each from the same scenario time.
Prints each run's CPU and peak RSS (bench/rocm_bench.py's measure) and, from every scrape of the
window, each GPU's collection latency: the sum of its collectors' last durations
(gpumeter_collector_duration_seconds, the collection worker's time), and the pcie collector's
alone. The simulator's call sleeps its 20 ms and reads the model: the CPU a real driver spends in
the call is not in these figures.

Usage: bench/pcie_bench.py --build build   (about two minutes with the defaults)"""
import argparse
import os
import re
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench import ROOT, print_table  # noqa: E402
from rocm_bench import add_measure_arguments, measure, parse_measure_args, seconds_of  # noqa: E402

THROUGHPUT = "nvmlDeviceGetPcieThroughput"
DURATION = re.compile(rb'^gpumeter_collector_duration_seconds\{collector="(\w+)",gpu="(\d+)"[^}]*\} (\S+)$', re.M)


class Latencies:
    """Each scrape's per-GPU collection latency and pcie collector duration (seconds)."""

    def __init__(self):
        self.collection, self.pcie = [], []

    def add(self, body):
        per_gpu = {}
        for collector, gpu, value in DURATION.findall(body):
            per_gpu.setdefault(gpu, {})[collector.decode()] = float(value)
        for durations in per_gpu.values():
            self.collection.append(sum(durations.values()))
            if "pcie" in durations:
                self.pcie.append(durations["pcie"])


def percentile(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(p * len(s)))] if s else float("nan")


def run(args, work, name, env_extra):
    env = dict(os.environ, GPUMETER_SIM_EPOCH="%.6f" % (time.time() - seconds_of(args.at)), **env_extra)
    latencies = Latencies()
    r = measure(args, work, "%s-%d" % (name, len(os.listdir(work))), ["--sim.scenario", args.scenario], env=env,
                on_body=latencies.add)
    sampled = b"gpu_pcie_throughput_bytes_per_second{" in r["body"]
    if sampled != (name == "with"):
        raise SystemExit("pcie_bench: %s: PCIe throughput series %s" % (name, "present" if sampled else "absent"))
    r["latencies"] = latencies
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_measure_arguments(ap, "run", "20s")
    ap.add_argument("--scenario", default=os.path.join(ROOT, "deploy", "scenarios", "bench-8x-64proc.yaml"))
    ap.add_argument("--rounds", type=int, default=1, help="times each configuration runs, alternating")
    args = parse_measure_args(ap)
    work = tempfile.mkdtemp(prefix="gpumeter-pcie-bench-")
    results = []
    try:
        for _ in range(args.rounds):
            for name, extra in (("without", {"GPUMETER_SIM_UNSUPPORTED": THROUGHPUT}), ("with", {})):
                results.append((name, run(args, work, name, extra)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    base = results[0][1]
    rows = []
    for name, r in results:
        cpu = r["agent_cpu"] / r["window"]
        lat = r["latencies"]
        rows.append((name, "%.3f %% of a core%s" % (cpu * 100, "" if r["agent_exact"] else " (10 ms ticks)"),
                     "%.2fx" % (cpu / (base["agent_cpu"] / base["window"])), "%.1f MiB" % (r["peak_rss_kib"] / 1024),
                     "%.2f ms" % (1e3 * sum(lat.collection) / len(lat.collection)),
                     "%.2f ms" % (1e3 * percentile(lat.collection, 0.99)),
                     "%.3f ms" % (1e3 * sum(lat.pcie) / len(lat.pcie)), "%.3f ms" % (1e3 * max(lat.pcie)),
                     "%d" % len(lat.collection), "%d" % r["scrapes"]))
    print("PCIe throughput fallback: the agent on %s (R550, 8 GPUs, default collectors), 1 s collection, a scrape "
          "every %g s, %g s measured after %g s" % (os.path.basename(args.scenario), args.scrape_every, args.duration,
                                                     args.warmup))
    print()
    print_table(("fallback", "agent CPU", "/ without", "peak RSS", "collection, mean", "collection, p99",
                 "pcie collector, mean", "pcie collector, max", "GPU collections seen", "scrapes"), rows)


if __name__ == "__main__":
    main()
