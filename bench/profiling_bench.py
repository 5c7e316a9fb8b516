#!/usr/bin/python3
"""What profiling (NVML GPM), NVLink and MIG cost the agent: the same core case (bench/bench.py: a
1 s collection interval, no resolvable owner, the ledger in memory, a scrape a second) on 8
simulated H100, one configuration after the other, in the same run; prints a table with each
configuration's CPU and peak RSS and its ratio to the first.

  no GPM       deploy/scenarios/h100-8x-three-teams.yaml with the GPM calls answering NOT_SUPPORTED
               (GPUMETER_SIM_UNSUPPORTED), as on an A100: the agent's cost before this feature
  GPM          the same scenario: a GPM sample pair per GPU
  GPM+NVLink   tests/integration/scenarios/profiling-h100.yaml: GPM, and 18 NVLinks per GPU read
               each collection (one field-values call per link)
  MIG          bench/scenarios/mig-8x-h100.yaml, when present: every GPU in MIG mode with four
               instances, each enumerated, read and sampled by GPM every collection
  defaults     profiling-h100.yaml again with the default collectors: profiling on, NVLink off
  defaults+compat  the same with --compat dcgm-exporter and dcgm-exporter's default counters:
               what the drop-in adds to a default agent

All but the last two run with --collector.profiling --collector.nvlink (NVLink is off by default).

Usage: bench/profiling_bench.py --build build   (about 4 minutes with the defaults)"""
import argparse
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench import ROOT, print_table  # noqa: E402
from rocm_bench import add_measure_arguments, measure, parse_measure_args, seconds_of  # noqa: E402

GPM_CALLS = "nvmlGpmQueryDeviceSupport"  # unsupported here, the agent never takes a sample


ON = ["--collector.profiling", "--collector.nvlink"]


def configurations():
    scenarios = os.path.join(ROOT, "deploy", "scenarios")
    h100 = os.path.join(ROOT, "tests", "integration", "scenarios", "profiling-h100.yaml")
    out = [("no GPM", os.path.join(scenarios, "h100-8x-three-teams.yaml"), {"GPUMETER_SIM_UNSUPPORTED": GPM_CALLS}, ON),
           ("GPM", os.path.join(scenarios, "h100-8x-three-teams.yaml"), {}, ON),
           ("GPM+NVLink", h100, {}, ON)]
    mig = os.path.join(HERE, "scenarios", "mig-8x-h100.yaml")
    if os.path.exists(mig):
        out.append(("MIG", mig, {}, ON))
    out.append(("defaults", h100, {}, []))
    out.append(("defaults+compat", h100, {}, ["--compat", "dcgm-exporter"]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_measure_arguments(ap, "configuration", "20s")
    args = parse_measure_args(ap)
    work = tempfile.mkdtemp(prefix="gpumeter-profiling-bench-")
    results = []
    try:
        for name, scenario, extra, flags in configurations():
            env = dict(os.environ, GPUMETER_SIM_EPOCH="%.6f" % (time.time() - seconds_of(args.at)), **extra)
            r = measure(args, work, name.replace(" ", "-").replace("+", "-"), ["--sim.scenario", scenario] + flags,
                        env=env)
            has_gpm = b"gpu_sm_active_ratio{" in r["body"]
            if has_gpm != (name != "no GPM"):
                raise SystemExit("profiling_bench: %s: GPM series %s" % (name, "present" if has_gpm else "absent"))
            results.append((name, os.path.basename(scenario), r))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    base = results[0][2]
    rows = []
    for name, scenario, r in results:
        cpu = r["agent_cpu"] / r["window"]
        rows.append((name, scenario, "%.3f %% of a core%s" % (cpu * 100, "" if r["agent_exact"] else " (10 ms ticks)"),
                     "%.2fx" % (cpu / (base["agent_cpu"] / base["window"])),
                     "%.1f MiB" % (r["peak_rss_kib"] / 1024), "%.2fx" % (r["peak_rss_kib"] / base["peak_rss_kib"]),
                     "%d" % r["gpu_series"], "%d bytes" % len(r["body"]), "%d" % r["scrapes"]))
    print("Profiling, NVLink and MIG: the agent on 8 simulated H100, 1 s collection, a scrape every %g s, "
          "%g s measured after %g s" % (args.scrape_every, args.duration, args.warmup))
    print()
    print_table(("configuration", "scenario", "agent CPU", "/ no GPM", "peak RSS", "/ no GPM", "`gpu_*` series",
                 "body", "scrapes"), rows)


if __name__ == "__main__":
    main()
