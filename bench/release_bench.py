#!/usr/bin/python3
"""Memory of the release's agent beside the agent of a normal build, in the same run.

Each agent runs as bench/bench.py's core case runs it (deploy/scenarios/bench-8x-64proc.yaml: 8
GPUs with 64 processes, a 1 s interval, the ledger in memory) and takes wrk at 50 connections on
/metrics for BENCH_SECONDS (default 10). Then its peak RSS (VmHWM) and its RSS split into
anonymous and file-backed pages are read from /proc/<pid>/status, and the file-backed pages are
split by /proc/<pid>/smaps into the agent's own binary, the simulated NVML and the rest (glibc).
The agents alternate, --repeat runs each; the table gives each one's median and range.

- release: the portable bundle's bin/gpumeter (scripts/release.sh): every library but glibc
  linked in, unused code dropped by the linker (docs/packaging.md);
- build: bin/gpumeter of a normal build tree (default build/), which links about 60 shared
  libraries of Debian 12.

Usage: bench/release_bench.py [--bundle DIR] [--build DIR] [--repeat N] [--seconds S]
"""
import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import print_table, start_core_agent, status_kib, stop, wrk  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def file_backed_split(pid):
    """Resident KiB of file mappings: (the agent's binary, libnvidia-ml, every other file)."""
    split = [0, 0, 0]
    exe = os.path.realpath("/proc/%d/exe" % pid)
    where = None
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5 and ":" in fields[3]:  # a mapping's first line
                path = fields[5] if len(fields) > 5 and fields[5].startswith("/") else None
                where = None if path is None else 0 if path == exe else 1 if "libnvidia-ml" in path else 2
            elif fields[0] == "Rss:" and where is not None:
                split[where] += int(fields[1])
    return split


def measure(exe, scenario, seconds):
    with tempfile.TemporaryDirectory(prefix="gpumeter-release-bench-") as work:
        agent, port = start_core_agent(exe, work, ["--sim.scenario", scenario])
        try:
            load = wrk("http://127.0.0.1:%d/metrics" % port, 50, seconds)
            binary, nvml, other = file_backed_split(agent.pid)
            return {"hwm": status_kib(agent.pid, "VmHWM"), "anon": status_kib(agent.pid, "RssAnon"),
                    "file": status_kib(agent.pid, "RssFile"), "binary": binary, "nvml": nvml, "other": other,
                    "rps": load["rps"]}
        finally:
            stop(agent)


def mib(kib):
    return "%.1f" % (kib / 1024)


def cell(values, fmt):
    return "%s (%s to %s)" % (fmt(statistics.median(values)), fmt(min(values)), fmt(max(values)))


def main():
    version = open(os.path.join(ROOT, "CMakeLists.txt")).read().split("project(gpumeter VERSION ")[1].split()[0]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundle", default=os.path.join(ROOT, "release", "gpumeter-%s-linux-amd64" % version))
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--scenario", default=os.path.join(ROOT, "deploy", "scenarios", "bench-8x-64proc.yaml"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=int(os.environ.get("BENCH_SECONDS", "10")))
    args = ap.parse_args()
    agents = {"release": os.path.join(args.bundle, "bin", "gpumeter"), "build": os.path.join(args.build, "bin", "gpumeter")}
    for name, exe in agents.items():
        if not os.access(exe, os.X_OK):
            sys.exit("release_bench: no %s agent at %s (scripts/release.sh; cmake --build --preset default)" % (name, exe))
    runs = {name: [] for name in agents}
    for i in range(args.repeat):
        for name, exe in agents.items():
            print("release_bench: run %d of %d, %s" % (i + 1, args.repeat, name), file=sys.stderr)
            runs[name].append(measure(exe, args.scenario, args.seconds))
    rows = []
    for name in agents:
        r = runs[name]
        rows.append([name, cell([x["hwm"] for x in r], mib), cell([x["anon"] for x in r], mib),
                     cell([x["file"] for x in r], mib),
                     " + ".join(mib(statistics.median([x[k] for x in r])) for k in ("binary", "nvml", "other")),
                     cell([x["rps"] for x in r], lambda v: "%.0f" % v)])
    print("Memory under load: %s, wrk 50 connections for %d s, %d runs each (median, range)\n"
          % (os.path.basename(args.scenario), args.seconds, args.repeat))
    print_table(["agent", "peak RSS (VmHWM), MiB", "anonymous, MiB", "file-backed, MiB",
                 "of it binary + NVML + other (smaps), MiB", "scrapes/s"], rows)


if __name__ == "__main__":
    main()
