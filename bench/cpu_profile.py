#!/usr/bin/python3
"""Where the agent's idle CPU goes, on the node of bench/peer_bench.py (8 H100s, 64 processes,
1 s collection, owners from a simulated procfs, a state file checkpointed every 5 s, no scrapes).

Two views of one window:
- per thread, from /proc/<pid>/task/<tid>/schedstat (nanoseconds on the CPU): the agent names
  its threads (gm-gpu-N, gm-events, gm-publisher, gm-checkpoint, gm-http, gm-kubelet);
- with --perf (Debian's linux-perf), inside the threads: `perf record --call-graph dwarf`, and
  the share of the samples under each of the agent's main frames, inclusive of what they call
  (kernel time included).

The simulator runs inside the agent's process, as in every benchmark here, so NVML's part is the
simulator's cost, not a real driver's.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import AGENT_CONFIG, ROOT, print_table, stop  # noqa: E402
from peer_bench import start_agent  # noqa: E402

# Frames of the agent, in the order they are printed, with what they stand for. Inclusive
# shares overlap where one frame calls another (the ledger is under the worker).
FRAMES = [
    ("gpumeter::CollectionScheduler::run_worker", "GPU workers (everything below)"),
    ("gpumeter::NvmlBackend::collect", "  NVML calls, simulator included"),
    ("gpumeter::UsageTracker::on_reading", "  usage tracker (owners + ledger)"),
    ("gpumeter::HostOwnerResolver::resolve", "    owner lookups"),
    ("gpumeter::GpuLedger::advance", "    ledger advance (busy split)"),
    ("gpumeter::UsageTracker::run_checkpoints", "checkpoint thread (state file, fsync)"),
    ("gpumeter::CollectionScheduler::run_publisher", "publisher (snapshot assembly)"),
    ("gpumeter::CollectionScheduler::run_events", "Xid event thread"),
    ("__x64_sys_futex", "of all: futex waits and wakes (scheduler)"),
    ("malloc", "of all: malloc"),
]


def thread_times(pid):
    """{tid: (name, ns on the CPU)}"""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                name = f.read().strip()
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                ns = int(f.read().split()[0])
        except OSError:
            continue
        out[tid] = (name, ns)
    return out


def role(name):
    return re.sub(r"\d+$", "N", name)


def perf_shares(data):
    report = subprocess.run(["perf", "report", "-i", data, "--children", "--stdio", "-g", "none",
                             "--sort", "symbol", "--percent-limit", "0"],
                            capture_output=True, text=True, check=True).stdout
    shares = {}
    samples = re.search(r"# Samples: (\S+)", report)
    for line in report.splitlines():
        # "  61.70%  0.53%  [.] symbol   <further columns after two or more spaces>"
        m = re.match(r"\s+([0-9.]+)%\s+([0-9.]+)%\s+\[[.k]\]\s+(.*?)(?:\s{2,}.*)?$", line)
        if m:
            shares.setdefault(m.group(3), float(m.group(1)))
    return shares, samples.group(1) if samples else "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--scenario", default=os.path.join(ROOT, "deploy", "scenarios", "bench-8x-64proc.yaml"))
    ap.add_argument("--processes", type=int, default=64)
    ap.add_argument("--window", type=int, default=120, help="seconds measured (default 120)")
    ap.add_argument("--perf", action="store_true", help="also record call graphs with perf (linux-perf)")
    ap.add_argument("--perf-frequency", type=int, default=4000)
    ap.add_argument("--perf-output", help="keep perf's data in this file, for perf report")
    args = ap.parse_args()
    if args.perf and shutil.which("perf") is None:
        raise SystemExit("cpu_profile: --perf needs perf (apt-get install linux-perf)")

    work = tempfile.mkdtemp(prefix="gpumeter-cpu-profile-")
    try:
        with open(os.path.join(work, "agent.yaml"), "w") as f:
            f.write(AGENT_CONFIG)
        env = dict(os.environ, GPUMETER_SIM_EPOCH="%.6f" % time.time())
        procs, _ = start_agent(args, work, env)
        pid = procs[0].pid
        try:
            time.sleep(5)  # past the first rounds: every process is resolved and in the ledger
            print("cpu_profile: %d s on pid %d%s ..." % (args.window, pid, " under perf" if args.perf else ""),
                  file=sys.stderr)
            perf = None
            data = os.path.abspath(args.perf_output) if args.perf_output else os.path.join(work, "perf.data")
            if args.perf:
                perf = subprocess.Popen(["perf", "record", "-q", "-F", str(args.perf_frequency), "--call-graph",
                                         "dwarf,16384", "-p", str(pid), "-o", data],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(1)
            before, t0 = thread_times(pid), time.monotonic()
            time.sleep(args.window)
            after, t1 = thread_times(pid), time.monotonic()
            if perf is not None:
                perf.send_signal(2)
                perf.wait(timeout=120)
        finally:
            for p in procs:
                stop(p)

        seconds = t1 - t0
        by_role = defaultdict(lambda: [0, 0])
        for tid, (name, ns) in after.items():
            was = before.get(tid, (name, 0))[1]
            r = by_role[role(name)]
            r[0] += 1
            r[1] += ns - was
        total = sum(ns for _, ns in by_role.values())
        rows = []
        for name, (threads, ns) in sorted(by_role.items(), key=lambda kv: -kv[1][1]):
            rows.append((name, str(threads), "%.3f" % (ns / 1e6 / seconds), "%.1f%%" % (100 * ns / total if total else 0)))
        rows.append(("all threads", str(sum(t for t, _ in by_role.values())), "%.3f" % (total / 1e6 / seconds),
                     "%.4f%% of a core" % (100 * total / 1e9 / seconds)))
        print("\nAgent CPU by thread over %.0f s (schedstat), 8 GPUs, %d processes, 1 s collection, no scrapes"
              % (seconds, args.processes))
        print_table(["thread", "threads", "CPU ms per second", "share"], rows)

        if args.perf:
            shares, samples = perf_shares(data)
            rows = [(label, frame, "%.1f%%" % shares.get(frame, 0.0)) for frame, label in FRAMES]
            print("\nInside the agent (perf, %s samples at %d Hz with call graphs; inclusive shares of all samples)"
                  % (samples, args.perf_frequency))
            print_table(["part", "frame", "share"], rows)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
