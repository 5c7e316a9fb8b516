#!/usr/bin/python3
"""The agent on 8 simulated AMD MI300X through the real ROCm SMI, beside the same agent on 8
simulated H100 through the NVML simulator, in the same run; prints a table and the ratios.

AMD: `gpumeter sim sysfs --follow` keeps the amdgpu tree of
deploy/scenarios/mi300x-8x-three-teams.yaml in step with the scenario clock, and the agent reads
it through Debian's librocm_smi64 (5.2.3) in a private mount namespace with the tree over
/sys/class and /sys/module (tests/integration/rocm_namespace.py, as the integration tests set it
up; needs root), NVML absent. NVIDIA: the agent on the scenario's twin,
deploy/scenarios/h100-8x-three-teams.yaml (the same teams and jobs on 8 H100), through the
simulator's libnvidia-ml.so.1. Both run as bench/bench.py's core case: a 1 s collection interval,
no resolvable owner, the ledger in memory; one after the other, each from the same point of its
scenario (--at). Each is scraped once a second (Prometheus' request: text format, gzip) from the
moment it is ready; after --warmup seconds, a window of --duration seconds measures:
- the agent's CPU: the sum of its threads' schedstat, in nanoseconds (bench.py's CpuMeter; if a
  thread started or ended in the window, utime + stime in 10 ms ticks, and the table says so);
- for AMD, the tree writer's CPU, the same way;
- after the window, the agent's peak RSS (VmHWM) and the `gpu_*` series of its /metrics.

Usage: bench/rocm_bench.py --build build   (about 1.5 minutes with the defaults)"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "integration"))
from bench import ROOT, CpuMeter, print_table, start_core_agent, status_kib, stop, wait_http  # noqa: E402
from peer_bench import scrape, scrape_body  # noqa: E402
import rocm_namespace  # noqa: E402

GPUS = 8


def seconds_of(text):
    """'50m' -> 3000.0; also s and h, or plain seconds."""
    units = {"s": 1, "m": 60, "h": 3600}
    return float(text[:-1]) * units[text[-1]] if text[-1] in units else float(text)


def gpu_series(body):
    return sum(1 for line in body.splitlines() if line.startswith(b"gpu_"))


def wait_for_gpus(url, process, timeout=30):
    """The body once every GPU has its gpu_info series."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if process.poll() is not None:
            raise SystemExit("rocm_bench: the agent exited with status %d" % process.returncode)
        body = wait_http(url)
        if all(b'gpu_info{gpu="%d"' % g in body for g in range(GPUS)):
            return body
        time.sleep(0.2)
    raise SystemExit("rocm_bench: the agent did not report %d GPUs within %d s" % (GPUS, timeout))


class Scraper:
    """Scrapes `url` every `every` seconds on a thread until stopped; counts them, and hands each
    body (decompressed) to `on_body` while it is set."""

    def __init__(self, url, every):
        self.url, self.every, self.on_body = url, every, None
        self.done = threading.Event()
        self.count, self.failures = 0, []
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self):
        next_at = time.monotonic()
        while not self.done.wait(max(0.0, next_at - time.monotonic())):
            try:
                on_body = self.on_body
                if on_body:
                    on_body(scrape_body(self.url))
                else:
                    scrape(self.url)
                self.count += 1
            except OSError as e:
                self.failures.append(str(e))
            next_at += self.every

    def stop(self):
        self.done.set()
        self.thread.join()
        if self.failures:
            raise SystemExit("rocm_bench: scrapes failed: %s" % self.failures[0])


def add_measure_arguments(ap, per, at):
    """The options measure() reads (--build, --duration, --warmup, --at, --scrape-every), each
    `per` run ("agent", "configuration"), from scenario time `at`; parse with parse_measure_args."""
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--duration", type=float, default=40, help="seconds measured per %s (default 40)" % per)
    ap.add_argument("--warmup", type=float, default=10,
                    help="seconds each %s runs, scraped, before the window (default 10)" % per)
    ap.add_argument("--at", default=at, help="scenario time at which each %s starts (default %s)" % (per, at))
    ap.add_argument("--scrape-every", type=float, default=1, help="seconds between scrapes (default 1)")


def parse_measure_args(ap):
    args = ap.parse_args()
    args.exe = os.path.join(os.path.abspath(args.build), "bin", "gpumeter")
    return args


def measure(args, work, name, source_args, wrap=None, writer=None, env=None, on_body=None):
    """One agent, scraped throughout; its figures over the window after the warm-up. `on_body`
    gets each body scraped in the window."""
    agent, port = start_core_agent(args.exe, os.path.join(work, name), source_args, wrap=wrap, env=env)
    url = "http://127.0.0.1:%d/metrics" % port
    scraper = None
    r = {}
    try:
        wait_for_gpus(url, agent)
        scraper = Scraper(url, args.scrape_every)
        print("rocm_bench: %s: warm-up %g s, then %g s measured ..." % (name, args.warmup, args.duration),
              file=sys.stderr)
        time.sleep(args.warmup)
        scraper.on_body = on_body
        meters = {"agent": CpuMeter(agent.pid, threads_persist=True)}
        if writer:
            meters["writer"] = CpuMeter(writer.pid, threads_persist=True)
        scrapes0, t0 = scraper.count, time.monotonic()
        time.sleep(args.duration)
        for who, meter in meters.items():
            r[who + "_cpu"], r[who + "_exact"] = meter.seconds()
        r["window"] = time.monotonic() - t0
        r["scrapes"] = scraper.count - scrapes0
        scraper.on_body = None
        scraper.stop()
        scraper = None
        body = wait_http(url)
        r["gpu_series"] = gpu_series(body)
        r["peak_rss_kib"] = status_kib(agent.pid, "VmHWM")
        if agent.poll() is not None or (writer and writer.poll() is not None):
            raise SystemExit("rocm_bench: %s: a process exited during the window" % name)
        r["body"] = body
    finally:
        if scraper:
            scraper.done.set()
            scraper.thread.join()
        stop(agent)
    return r


def run_amd(args, work):
    tree = os.path.join(work, "sysfs")
    env = dict(os.environ, GPUMETER_SIM_EPOCH="%.6f" % (time.time() - seconds_of(args.at)))
    writer = subprocess.Popen(rocm_namespace.follow_argv(args.exe, tree, args.amd_scenario), env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 30
        while not rocm_namespace.tree_ready(tree):
            if time.time() > deadline or writer.poll() is not None:
                raise SystemExit("rocm_bench: gpumeter sim sysfs did not write the tree")
            time.sleep(0.1)
        r = measure(args, work, "amd", ["--nvml.library", os.path.join(work, "no-libnvidia-ml.so.1")],
                    wrap=lambda argv: rocm_namespace.argv(tree, argv), writer=writer, env=env)
    finally:
        stop(writer)
    if b'gpumeter_backend_up{backend="rocm_smi"} 1' not in r["body"]:
        raise SystemExit("rocm_bench: the agent's ROCm SMI backend is not up (is librocm-smi64-1 installed? "
                         "scripts/install-deps.sh bench)")
    return r


def run_nvidia(args, work):
    env = dict(os.environ, GPUMETER_SIM_EPOCH="%.6f" % (time.time() - seconds_of(args.at)))
    r = measure(args, work, "nvidia", ["--sim.scenario", args.nvidia_scenario], env=env)
    if b'gpumeter_backend_up{backend="nvml"} 1' not in r["body"]:
        raise SystemExit("rocm_bench: the agent's NVML backend is not up")
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_measure_arguments(ap, "agent", "50m")
    ap.add_argument("--amd-scenario", default=os.path.join(ROOT, "deploy", "scenarios", "mi300x-8x-three-teams.yaml"))
    ap.add_argument("--nvidia-scenario", default=os.path.join(ROOT, "deploy", "scenarios", "h100-8x-three-teams.yaml"))
    args = parse_measure_args(ap)
    if os.geteuid() != 0:
        raise SystemExit("rocm_bench: needs root for the private mount namespace (unshare -m)")
    if not shutil.which("unshare"):
        raise SystemExit("rocm_bench: unshare is missing; run scripts/install-deps.sh bench")

    work = tempfile.mkdtemp(prefix="gpumeter-rocm-bench-")
    try:
        amd = run_amd(args, work)
        nvidia = run_nvidia(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def cpu(r, who):
        s = r[who + "_cpu"]
        return "%.3f s in %.1f s: %.3f %% of a core%s" % (s, r["window"], s / r["window"] * 100,
                                                          "" if r[who + "_exact"] else " (10 ms ticks)")

    def ratio(a, b):
        return "%.2fx" % (a / b) if b else ""

    rows = [
        ("agent CPU (threads' schedstat)", cpu(amd, "agent"), cpu(nvidia, "agent"),
         ratio(amd["agent_cpu"] / amd["window"], nvidia["agent_cpu"] / nvidia["window"])),
        ("agent peak RSS (VmHWM)", "%.1f MiB" % (amd["peak_rss_kib"] / 1024), "%.1f MiB" % (nvidia["peak_rss_kib"] / 1024),
         ratio(amd["peak_rss_kib"], nvidia["peak_rss_kib"])),
        ("`gpu_*` series", "%d" % amd["gpu_series"], "%d" % nvidia["gpu_series"],
         ratio(amd["gpu_series"], nvidia["gpu_series"])),
        ("scrapes in the window", "%d" % amd["scrapes"], "%d" % nvidia["scrapes"], ""),
        ("tree writer CPU (`gpumeter sim sysfs --follow`)", cpu(amd, "writer"), "", ""),
    ]
    print("AMD: the agent through ROCm SMI against the same agent through NVML, 1 s collection, a scrape every %g s, "
          "%g s measured after %g s" % (args.scrape_every, args.duration, args.warmup))
    print()
    print_table(("measure", "8x MI300X, ROCm SMI (%s)" % os.path.basename(args.amd_scenario),
                 "8x H100, NVML simulator (%s)" % os.path.basename(args.nvidia_scenario), "AMD / NVIDIA"), rows)


if __name__ == "__main__":
    main()
