#!/usr/bin/python3
"""Measures gpumeter serve beside the exporter users write (bench/peer_exporter.py: Python, ctypes
over NVML, prometheus_client) on the same simulated node, and prints a table of ratios.

Both read deploy/scenarios/bench-8x-64proc.yaml (8 H100s, 64 processes) through the simulator's
libnvidia-ml.so.1 at a 1 s interval. They run one after the other, never together, alternating
which goes first, --repeat times each; each figure is the median over the repeats. In each run:
- idle CPU with no scrapes, then with a scrape every 15 s (Prometheus' request: text format,
  gzip), each over a window of --window seconds: CPU time from /proc/<pid>/stat divided by
  GPUs x collection rounds in the window;
- scrape p50 at 10 connections and scrapes/s at 50 connections (wrk, no compression), the same
  method for both;
- peak RSS (VmHWM) after all of the load.

The agent runs as deployed: owners resolved from a procfs tree kept by `gpumeter sim procfs
--follow` (the bench config of bench/bench.py), the usage ledger checkpointed to a state file
every 5 s, and the Xid event thread. The peer keeps no ledger, attributes nothing and watches no
events.
"""
import argparse
import gzip
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import (AGENT_CONFIG, ROOT, CpuMeter, free_port, pids_in, print_table, status_kib,  # noqa: E402
                   stop, wait_http, wrk)

PROMETHEUS_ACCEPT = ("application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4,"
                     "*/*;q=0.1")


def scrape(url):
    """A scrape as Prometheus makes it; the bytes it sent (gzip where it answered gzip)."""
    return len(scrape_raw(url)[0])


def scrape_body(url):
    """A scrape as Prometheus makes it; the body, decompressed."""
    data, encoding = scrape_raw(url)
    return gzip.decompress(data) if encoding == "gzip" else data


def scrape_raw(url):
    req = urllib.request.Request(url, headers={"Accept": PROMETHEUS_ACCEPT, "Accept-Encoding": "gzip"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.read(), r.headers.get("Content-Encoding", "")


def cpu_window(pid, seconds, url=None, every=None):
    """CPU seconds the process spends over `seconds`, scraping `url` every `every` seconds
    (the first scrape half an interval in, so the window holds seconds / every scrapes)."""
    stop_scraping = threading.Event()
    failures = []

    def scraper():
        next_at = time.monotonic() + every / 2
        while not stop_scraping.wait(max(0.0, next_at - time.monotonic())):
            try:
                scrape(url)
            except OSError as e:
                failures.append(str(e))
            next_at += every

    thread = threading.Thread(target=scraper) if url else None
    # Scrapes start a thread each in the peer's server: only a window without them is measured
    # in nanoseconds.
    meter = CpuMeter(pid, threads_persist=url is None)
    if thread:
        thread.start()
    time.sleep(seconds)
    cpu, precise = meter.seconds()
    if thread:
        stop_scraping.set()
        thread.join()
    if failures:
        raise SystemExit("peer_bench: scrapes failed: %s" % failures[0])
    return cpu, precise


def start_agent(args, work, env):
    host = os.path.join(work, "host")
    shutil.rmtree(host, ignore_errors=True)
    os.makedirs(os.path.join(host, "proc"))
    state = os.path.join(work, "state")
    shutil.rmtree(state, ignore_errors=True)
    os.makedirs(state)
    exe = os.path.join(args.build, "bin", "gpumeter")
    procs = []
    sim = subprocess.Popen([exe, "sim", "procfs", "--scenario", args.scenario, "--out", host, "--follow"],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.append(sim)
    deadline = time.time() + 30
    while pids_in(os.path.join(host, "proc")) < args.processes:
        if time.time() > deadline or sim.poll() is not None:
            for p in procs:
                stop(p)
            raise SystemExit("peer_bench: gpumeter sim procfs did not write %d processes" % args.processes)
        time.sleep(0.1)
    port = free_port()
    agent = subprocess.Popen([exe, "serve", "--sim.scenario", args.scenario,
                              "--web.listen-address", "127.0.0.1:%d" % port, "--collect.interval", "1s",
                              "--log.level", "warn", "--config.file", os.path.join(work, "agent.yaml"),
                              "--path.procfs", os.path.join(host, "proc"), "--path.rootfs", host,
                              "--ledger.state-file", os.path.join(state, "ledger.json")],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.insert(0, agent)
    wait_http("http://127.0.0.1:%d/-/ready" % port)
    return procs, "http://127.0.0.1:%d/metrics" % port


def start_peer(args, work, env):
    port = free_port()
    peer = subprocess.Popen(["/usr/bin/python3", os.path.join(ROOT, "bench", "peer_exporter.py"),
                             "--nvml-library", os.path.join(args.build, "lib", "gpumeter", "libnvidia-ml.so.1"),
                             "--address", "127.0.0.1", "--port", str(port), "--interval", "1"],
                            env=dict(env, GPUMETER_SIM_SCENARIO=args.scenario),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return [peer], "http://127.0.0.1:%d/metrics" % port


def measure(args, work, who):
    env = dict(os.environ, GPUMETER_SIM_EPOCH="%.6f" % time.time())
    procs, url = (start_agent if who == "agent" else start_peer)(args, work, env)
    pid = procs[0].pid
    r = {}
    try:
        time.sleep(3)  # a few collection rounds: every GPU and process is in the snapshot
        body = wait_http(url)
        r["body_bytes"] = len(body)
        r["series"] = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
        r["gzip_bytes"] = scrape(url)
        rounds = args.window / args.interval
        print("peer_bench: %s: CPU over %d s, no scrapes ..." % (who, args.window), file=sys.stderr)
        cpu, r["idle_precise"] = cpu_window(pid, args.window)
        r["idle_ms_per_gpu_sample"] = cpu * 1000 / (args.gpus * rounds)
        print("peer_bench: %s: CPU over %d s, a scrape every %g s ..." % (who, args.window, args.scrape_every),
              file=sys.stderr)
        cpu, r["scraped_precise"] = cpu_window(pid, args.window, url, args.scrape_every)
        r["scraped_ms_per_gpu_sample"] = cpu * 1000 / (args.gpus * rounds)
        print("peer_bench: %s: wrk ..." % who, file=sys.stderr)
        r["c10"] = wrk(url, 10, args.seconds)
        r["c50"] = wrk(url, 50, args.seconds)
        r["peak_rss_kib"] = status_kib(pid, "VmHWM")
        if procs[0].poll() is not None:
            raise SystemExit("peer_bench: %s exited during the run" % who)
    finally:
        for p in procs:
            stop(p)
    return r


def median(runs, *keys):
    values = []
    for r in runs:
        for k in keys:
            r = r[k]
        values.append(r)
    return statistics.median(values)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--scenario", default=os.path.join(ROOT, "deploy", "scenarios", "bench-8x-64proc.yaml"))
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--processes", type=int, default=64)
    ap.add_argument("--interval", type=float, default=1.0, help="collection interval of both, seconds")
    ap.add_argument("--window", type=int, default=int(os.environ.get("BENCH_PEER_SECONDS", "60")),
                    help="seconds of each CPU measurement (default 60, or $BENCH_PEER_SECONDS)")
    ap.add_argument("--scrape-every", type=float, default=15.0)
    ap.add_argument("--seconds", type=int, default=int(os.environ.get("BENCH_SECONDS", "10")),
                    help="wrk duration per run (default 10, or $BENCH_SECONDS)")
    ap.add_argument("--repeat", type=int, default=int(os.environ.get("BENCH_PEER_REPEAT", "2")),
                    help="runs of each, alternating (default 2, or $BENCH_PEER_REPEAT)")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    if not shutil.which("wrk"):
        raise SystemExit("peer_bench: wrk is missing; run scripts/install-deps.sh bench")

    work = tempfile.mkdtemp(prefix="gpumeter-peer-bench-")
    runs = {"agent": [], "peer": []}
    order = []
    try:
        with open(os.path.join(work, "agent.yaml"), "w") as f:
            f.write(AGENT_CONFIG)
        for i in range(args.repeat):
            for who in (("agent", "peer") if i % 2 == 0 else ("peer", "agent")):
                runs[who].append(measure(args, work, who))
                order.append((who, runs[who][-1]))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    a, p = runs["agent"], runs["peer"]

    def row(what, keys, fmt, scale=1.0, target=""):
        va, vp = median(a, *keys) * scale, median(p, *keys) * scale
        return (what, fmt % va, fmt % vp, "%.2fx" % (va / vp) if vp else "n/a", target)

    rows = [
        row("idle CPU per GPU sample, no scrapes, ms", ["idle_ms_per_gpu_sample"], "%.4f",
            target="<= 0.2x"),
        row("idle CPU per GPU sample, a scrape every %g s, ms" % args.scrape_every, ["scraped_ms_per_gpu_sample"],
            "%.4f", target="<= 0.2x"),
        row("CPU, % of one core, no scrapes", ["idle_ms_per_gpu_sample"], "%.3f",
            args.gpus / args.interval / 10),
        row("CPU, %% of one core, a scrape every %g s" % args.scrape_every, ["scraped_ms_per_gpu_sample"], "%.3f",
            args.gpus / args.interval / 10, target="agent < 0.1 %"),
        row("peak RSS (VmHWM), MiB", ["peak_rss_kib"], "%.1f", 1 / 1024, target="agent < 20 MiB"),
        row("scrape p50 @10 conns, us", ["c10", "p50_us"], "%.0f"),
        row("scrapes/s @50 conns", ["c50", "rps"], "%.0f"),
        row("/metrics body, bytes (text 0.0.4)", ["body_bytes"], "%d"),
        row("/metrics body, bytes (gzip, as Prometheus asks)", ["gzip_bytes"], "%d"),
        row("/metrics series", ["series"], "%d"),
    ]
    print("gpumeter against the exporter users write: %s, %d GPUs, %d processes, %g s collection, "
          "%d alternating runs of each (medians), %d s CPU windows" %
          (os.path.basename(args.scenario), args.gpus, args.processes, args.interval, args.repeat, args.window))
    print()
    print_table(("measure", "gpumeter", "peer (Python)", "gpumeter / peer", "target"), rows)
    print()
    print("gpumeter does more than the peer: the usage ledger (allocated, busy, memory and energy per owner,")
    print("checkpointed every 5 s), owner attribution from procfs, Xid events and its self-metrics. The peer")
    print("reads the device values and per-process memory and SM utilization, and nothing else.")
    print()
    print("Each run, in order: idle CPU per GPU sample in ms, no scrapes / a scrape every %g s" % args.scrape_every)
    print("(no scrapes: the threads' schedstat, in ns; with scrapes (*): utime + stime in 10 ms ticks, which")
    print("count the peer's thread per request)")
    for who, r in order:
        print("  %-5s %.4f%s / %.4f%s" % (who, r["idle_ms_per_gpu_sample"], "" if r["idle_precise"] else "*",
                                        r["scraped_ms_per_gpu_sample"], "" if r["scraped_precise"] else "*"))
    for who, rs in runs.items():
        for r in rs:
            for k in ("c10", "c50"):
                if r[k]["errors"]:
                    print("warning: %s %s: %s" % (who, k, r[k]["errors"]))


if __name__ == "__main__":
    main()
