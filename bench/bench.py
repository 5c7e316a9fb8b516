#!/usr/bin/python3
"""Measures gpumeter serve against nginx in the same run and prints three tables.

Core, on the 64-process node (deploy/scenarios/bench-8x-64proc.yaml):
- render time: per snapshot and per scrape (Google Benchmark, bench/render_bench.cpp);
- scrape latency p50/p99 at 10 connections and scrapes/s at 50 connections (wrk), for the agent
  and for nginx serving the agent's own /metrics bytes as a static file;
- agent CPU seconds per hour at a 1 s collection interval (from /proc/<pid>/stat, no scrapes);
- agent peak RSS (VmHWM) after all of the load.

Attribution, on the 500-process node (deploy/scenarios/bench-8x-500proc.yaml), the agent run
twice with the same config file and a ledger state file: once with a procfs tree kept by
`gpumeter sim procfs --follow` (every owner resolved), once with an empty procfs (no owner
resolvable, everything else equal). For each: CPU at a 1 s interval, per collection and GPU,
per process; peak RSS; /metrics size and series; state file size; scrape p50/p99 at 10
connections (and nginx serving the attributed body).

Per-collection parts (Google Benchmark, bench/ledger_bench.cpp, CPU time): ledger advance and
tracker update per GPU at 63 processes, owner lookup per process, snapshot contribution,
render and checkpoint of the 500-process node, with every process its own owner and with owners
unresolvable; their difference per second on the node, summed, against the agent's.
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return r.read()
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit("bench: %s did not answer within %ss" % (url, timeout))


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime


def thread_cpu(pid):
    """(the ids of the live threads, their CPU seconds from schedstat, in nanoseconds)"""
    tids, ns = set(), 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                ns += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        tids.add(tid)
    return frozenset(tids), ns / 1e9


class CpuMeter:
    """CPU seconds of a process since the meter was made. With `threads_persist` (nothing in the
    window starts a thread, e.g. no requests to a server that makes one per connection): the sum
    of its threads' schedstat, in nanoseconds. Otherwise utime + stime from /proc/<pid>/stat,
    which also counts threads that ran and exited in the window, in 10 ms ticks: at this
    agent's load a 60 s window holds about ten, so those figures are 10 % coarse."""

    def __init__(self, pid, threads_persist):
        self.pid = pid
        self.exact = threads_persist
        self.tids, self.ns0 = thread_cpu(pid)
        self.ticks0 = cpu_seconds(pid)

    def seconds(self):
        """(CPU seconds, whether they are the nanosecond figure)"""
        if self.exact:
            tids, ns = thread_cpu(self.pid)
            if tids == self.tids:
                return ns - self.ns0, True
        return cpu_seconds(self.pid) - self.ticks0, False


def status_kib(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def to_us(text):
    m = re.match(r"([\d.]+)(us|ms|s)", text)
    value, unit = float(m.group(1)), m.group(2)
    return value * {"us": 1, "ms": 1000, "s": 1e6}[unit]


def wrk(url, connections, seconds, threads=2):
    out = subprocess.run(["wrk", "-t%d" % threads, "-c%d" % connections, "-d%ds" % seconds, "--latency", url],
                         check=True, capture_output=True, text=True).stdout
    p50 = to_us(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1))
    p99 = to_us(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1))
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)|Socket errors: (.*)", out)
    return {"p50_us": p50, "p99_us": p99, "rps": rps, "errors": errors.group(0) if errors else ""}


def render_bench(build):
    exe = os.path.join(build, "bin", "render_bench")
    out = subprocess.run([exe, "--benchmark_format=json", "--benchmark_min_time=0.5"], check=True,
                         capture_output=True, text=True).stdout
    rows = {}
    for b in json.loads(out)["benchmarks"]:
        unit = {"ns": 1e-3, "us": 1, "ms": 1e3}[b["time_unit"]]
        rows[b["name"] + (" " + b["label"] if b.get("label") else "")] = b["real_time"] * unit
    return rows


def ledger_bench(build, sim_root, config):
    """CPU time in µs per call of each ledger_bench benchmark, by name."""
    exe = os.path.join(build, "bin", "ledger_bench")
    out = subprocess.run([exe, "--benchmark_format=json", "--benchmark_min_time=0.5", "--sim-root=" + sim_root,
                          "--config=" + config], check=True, capture_output=True, text=True).stdout
    rows = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("error_occurred"):
            raise SystemExit("bench: ledger_bench %s: %s" % (b["name"], b.get("error_message")))
        unit = {"ns": 1e-3, "us": 1, "ms": 1e3}[b["time_unit"]]
        rows[b["name"]] = b["cpu_time"] * unit
    return rows


# Attribution from procfs only: the allow-listed variables, a regex rule evaluated for every
# process (each has GPUMETER_PROJECT) and the Slurm account as a fallback. No kubelet, no HPC
# job mapping. Checkpoints every 5 s; every other key keeps its default (all six owner labels,
# 256 per-process series).
AGENT_CONFIG = """\
attribution:
  environment: [GPUMETER_PROJECT, SLURM_JOB_ACCOUNT]
  hpc_job_mapping_dir: ""
  kubelet: {socket: off}
project:
  rules:
    - source: env.GPUMETER_PROJECT
      match: '([a-z][a-z0-9-]*)'
      project: '$1'
    - source: slurm_account
ledger:
  checkpoint_interval: 5s
"""


def pids_in(proc):
    try:
        return sum(1 for n in os.listdir(proc) if n.isdigit())
    except OSError:
        return 0


def metric_value(body, name):
    m = re.search(rb"^" + re.escape(name.encode()) + rb" (\S+)$", body, re.M)
    return float(m.group(1)) if m else None


def start_nginx(work, body):
    """nginx serving `body` as a static file, one worker per core as usual: (process, url)."""
    www = os.path.join(work, "www")
    os.makedirs(www, exist_ok=True)
    with open(os.path.join(www, "metrics"), "wb") as f:
        f.write(body)
    nport = free_port()
    conf = os.path.join(work, "nginx.conf")
    with open(conf, "w") as f:
        f.write("worker_processes auto; daemon off; pid %s/nginx.pid; error_log %s/nginx.err;\n"
                "events { worker_connections 1024; }\n"
                "http { access_log off; server { listen 127.0.0.1:%d; location / { root %s; "
                "default_type text/plain; } } }\n" % (work, work, nport, www))
    nginx = subprocess.Popen(["nginx", "-c", conf, "-p", work], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    url = "http://127.0.0.1:%d/metrics" % nport
    try:
        wait_http(url)
    except BaseException:
        stop(nginx, signal.SIGQUIT)
        raise
    return nginx, url


def stop(proc, sig=signal.SIGTERM):
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def start_core_agent(exe, work, source_args, wrap=None, env=None):
    """`gpumeter serve` as the core case runs it: GPUs from `source_args` (--sim.scenario FILE, or
    the flags of another backend), a 1 s interval, no resolvable owner (an empty procfs, as a host
    without the simulated pids gives) and the ledger in memory. `wrap` turns the command line
    into the one started (a namespace around it); the command must replace it (exec), so the
    process started is the agent. Returns (the process, its port) once it is ready."""
    empty = os.path.join(work, "empty")
    os.makedirs(os.path.join(empty, "proc"), exist_ok=True)
    port = free_port()
    argv = [exe, "serve"] + list(source_args) + [
        "--web.listen-address", "127.0.0.1:%d" % port, "--collect.interval", "1s", "--log.level", "warn",
        "--path.procfs", os.path.join(empty, "proc"), "--path.rootfs", empty, "--ledger.state-file", ""]
    agent = subprocess.Popen(wrap(argv) if wrap else argv, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        wait_http("http://127.0.0.1:%d/-/ready" % port)
    except BaseException:
        stop(agent)
        raise
    return agent, port


def sample_cpu(pid, seconds):
    meter, t0 = CpuMeter(pid, threads_persist=True), time.monotonic()  # no requests in the window
    time.sleep(seconds)
    cpu, _ = meter.seconds()
    return cpu / (time.monotonic() - t0)  # CPU seconds per second


def attribution_run(args, work, name, attributed, processes):
    """The agent on the 500-process scenario with the bench config and a ledger state file;
    owners from a `gpumeter sim procfs --follow` tree, or from an empty procfs."""
    d = os.path.join(work, name)
    os.makedirs(os.path.join(d, "state"))
    os.makedirs(os.path.join(d, "host", "proc"))
    host = os.path.join(d, "host")
    state = os.path.join(d, "state", "ledger.json")
    env = dict(os.environ, GPUMETER_SIM_EPOCH="%.6f" % time.time())
    exe = os.path.join(args.build, "bin", "gpumeter")
    sim = agent = nginx = None
    r = {}
    try:
        if attributed:
            sim = subprocess.Popen([exe, "sim", "procfs", "--scenario", args.scenario_500, "--out", host, "--follow"],
                                   env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.time() + 30
            while pids_in(os.path.join(host, "proc")) < processes:
                if time.time() > deadline or sim.poll() is not None:
                    raise SystemExit("bench: gpumeter sim procfs did not write %d processes" % processes)
                time.sleep(0.1)
        port = free_port()
        with open(os.path.join(d, "agent.log"), "wb") as log:
            agent = subprocess.Popen([exe, "serve", "--sim.scenario", args.scenario_500,
                                      "--web.listen-address", "127.0.0.1:%d" % port, "--collect.interval", "1s",
                                      "--log.level", "warn", "--config.file", os.path.join(work, "agent.yaml"),
                                      "--path.procfs", os.path.join(host, "proc"), "--path.rootfs", host,
                                      "--ledger.state-file", state],
                                     env=env, stdout=subprocess.DEVNULL, stderr=log)
        url = "http://127.0.0.1:%d/metrics" % port
        wait_http("http://127.0.0.1:%d/-/ready" % port)
        # A few collection rounds, and a checkpoint: the ledger's counters are served once a
        # checkpoint has saved them, so every owner is in the snapshot only after the first
        # checkpoint that follows their first integration.
        deadline = time.time() + 30
        while True:
            time.sleep(1)
            body = wait_http(url)
            owners = sum(1 for line in body.splitlines() if line.startswith(b"gpu_allocated_seconds_total{"))
            if owners >= (processes if attributed else 1) or time.time() > deadline:
                break
        r["body_bytes"] = len(body)
        r["series"] = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
        owners = [line for line in body.splitlines() if line.startswith(b"gpu_allocated_seconds_total{")]
        r["owner_series"] = len(owners)
        r["unattributed_owner_series"] = sum(1 for line in owners if b'project="__unattributed__"' in line)
        r["process_series"] = sum(1 for line in body.splitlines() if line.startswith(b"gpu_process_memory_used_bytes{"))
        r["process_series_dropped"] = metric_value(body, 'gpumeter_series_dropped_total{kind="process"}')

        print("bench: sampling agent CPU (%s) for %d s ..." % (name, args.cpu_seconds), file=sys.stderr)
        rate = sample_cpu(agent.pid, args.cpu_seconds)
        r["cpu_seconds_per_hour"] = rate * 3600
        r["cpu_percent_of_core"] = rate * 100
        r["cpu_ms_per_collection_per_gpu"] = rate * 1000 / args.gpus  # one collection per second
        r["cpu_us_per_process_sample"] = rate * 1e6 / processes

        print("bench: wrk against gpumeter (%s) ..." % name, file=sys.stderr)
        r["gpumeter_c10"] = wrk(url, 10, args.seconds)
        if attributed:
            nginx, nurl = start_nginx(os.path.join(d, "nginx"), body)
            print("bench: wrk against nginx (%s body) ..." % name, file=sys.stderr)
            r["nginx_c10"] = wrk(nurl, 10, args.seconds)
        r["peak_rss_kib"] = status_kib(agent.pid, "VmHWM")
        r["rss_kib"] = status_kib(agent.pid, "VmRSS")
        r["rss_anon_kib"] = status_kib(agent.pid, "RssAnon")
        r["rss_file_kib"] = status_kib(agent.pid, "RssFile")
        last = wait_http(url)
        r["checkpoint_seconds"] = metric_value(last, "gpumeter_ledger_checkpoint_duration_seconds")
        r["checkpoint_success"] = metric_value(last, "gpumeter_ledger_checkpoint_success")
        r["state_file_bytes"] = os.path.getsize(state) if os.path.exists(state) else 0
    except SystemExit:
        if os.path.exists(os.path.join(d, "agent.log")):
            with open(os.path.join(d, "agent.log"), errors="replace") as f:
                sys.stderr.write(f.read()[-4000:])
        raise
    finally:
        stop(agent)
        stop(sim)
        stop(nginx, signal.SIGQUIT)
    return r


def print_table(header, rows):
    w = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    print("| " + " | ".join("%-*s" % (w[i], h) for i, h in enumerate(header)) + " |")
    print("|" + "|".join("-" * (x + 2) for x in w) + "|")
    for r in rows:
        print("| " + " | ".join("%-*s" % (w[i], c) for i, c in enumerate(r)) + " |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--scenario", default=os.path.join(ROOT, "deploy", "scenarios", "bench-8x-64proc.yaml"))
    ap.add_argument("--scenario-500", default=os.path.join(ROOT, "deploy", "scenarios", "bench-8x-500proc.yaml"))
    ap.add_argument("--gpus", type=int, default=8, help="GPUs of the 500-process scenario")
    ap.add_argument("--seconds", type=int, default=int(os.environ.get("BENCH_SECONDS", "10")))
    ap.add_argument("--cpu-seconds", type=int, default=int(os.environ.get("BENCH_CPU_SECONDS", "60")))
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    for tool in ("wrk", "nginx"):
        if not shutil.which(tool) and not os.path.exists("/usr/sbin/" + tool):
            raise SystemExit("bench: %s is missing; run scripts/install-deps.sh bench" % tool)

    work = tempfile.mkdtemp(prefix="gpumeter-bench-")
    os.chmod(work, 0o755)  # nginx workers drop root privileges and must still read the file
    exe = os.path.join(args.build, "bin", "gpumeter")
    agent = nginx = None
    try:
        results = {"render_us": render_bench(args.build)}

        # The ledger micro-benchmarks read a procfs tree of the 500-process scenario at time 0.
        with open(os.path.join(work, "agent.yaml"), "w") as f:
            f.write(AGENT_CONFIG)
        oneshot = os.path.join(work, "oneshot")
        subprocess.run([exe, "sim", "procfs", "--scenario", args.scenario_500, "--out", oneshot, "--at", "0"],
                       check=True, stdout=subprocess.DEVNULL, env={k: v for k, v in os.environ.items()
                                                                  if not k.startswith("GPUMETER_SIM_")})
        processes = pids_in(os.path.join(oneshot, "proc"))
        results["processes_500"] = processes
        print("bench: ledger micro-benchmarks ...", file=sys.stderr)
        results["ledger_cpu_us"] = ledger_bench(args.build, oneshot, os.path.join(work, "agent.yaml"))

        # Core: no owner is resolvable (an empty procfs, as a host without these simulated pids
        # gives) and the ledger stays in memory, as before attribution existed.
        agent, port = start_core_agent(exe, work, ["--sim.scenario", args.scenario])
        time.sleep(2)  # a few collection rounds, so every GPU and process is in the snapshot
        body = wait_http("http://127.0.0.1:%d/metrics" % port)
        results["body_bytes"] = len(body)
        results["series"] = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))

        # CPU at a 1 s interval with no scrapes: the steady cost of collection and rendering.
        print("bench: sampling agent CPU for %d s ..." % args.cpu_seconds, file=sys.stderr)
        rate = sample_cpu(agent.pid, args.cpu_seconds)
        results["cpu_seconds_per_hour"] = rate * 3600
        results["cpu_percent_of_core"] = rate * 100

        # nginx serving the same bytes from a static file, one worker per core as usual.
        nginx, nginx_url = start_nginx(os.path.join(work, "nginx"), body)
        for name, url in (("gpumeter", "http://127.0.0.1:%d/metrics" % port), ("nginx", nginx_url)):
            print("bench: wrk against %s ..." % name, file=sys.stderr)
            results[name + "_c10"] = wrk(url, 10, args.seconds)
            results[name + "_c50"] = wrk(url, 50, args.seconds)
        results["peak_rss_kib"] = status_kib(agent.pid, "VmHWM")
        results["rss_kib"] = status_kib(agent.pid, "VmRSS")
        results["rss_anon_kib"] = status_kib(agent.pid, "RssAnon")
        results["rss_file_kib"] = status_kib(agent.pid, "RssFile")
        stop(agent)
        stop(nginx, signal.SIGQUIT)
        agent = nginx = None

        # Attribution at 500 processes: the same agent with and without owners.
        results["attributed"] = attribution_run(args, work, "attributed", True, processes)
        results["unattributed"] = attribution_run(args, work, "unattributed", False, processes)
    finally:
        stop(agent)
        stop(nginx, signal.SIGQUIT)
        shutil.rmtree(work, ignore_errors=True)

    g10, n10, g50, n50 = (results[k] for k in ("gpumeter_c10", "nginx_c10", "gpumeter_c50", "nginx_c50"))
    rows = [
        ("body size (text 0.0.4)", "%d bytes, %d series" % (results["body_bytes"], results["series"]), "", ""),
    ]
    for name, us in sorted(results["render_us"].items()):
        rows.append(("render: " + name, "%.2f us" % us, "", ""))
    rows += [
        ("scrape p50 @10 conns", "%.0f us" % g10["p50_us"], "%.0f us" % n10["p50_us"],
         "%.2fx nginx (target <= 2x)" % (g10["p50_us"] / n10["p50_us"])),
        ("scrape p99 @10 conns", "%.0f us" % g10["p99_us"], "%.0f us" % n10["p99_us"],
         "%.2fx nginx" % (g10["p99_us"] / n10["p99_us"])),
        ("scrapes/s @50 conns", "%.0f" % g50["rps"], "%.0f" % n50["rps"],
         "%.2f of nginx (target >= 0.5)" % (g50["rps"] / n50["rps"])),
        ("CPU at 1 s interval", "%.1f s/hour (%.3f%% of a core)" % (results["cpu_seconds_per_hour"],
                                                                    results["cpu_percent_of_core"]),
         "", "target < 0.5% of a core"),
        ("peak RSS", "%.1f MiB" % (results["peak_rss_kib"] / 1024), "", "target < 20 MiB"),
        ("RSS at the end: anonymous + file-backed", "%.1f + %.1f MiB" % (results["rss_anon_kib"] / 1024,
                                                                          results["rss_file_kib"] / 1024),
         "", "file-backed: mostly shared libraries"),
    ]
    print("Core: %s, 1 s collection" % os.path.basename(args.scenario))
    print()
    print_table(("measure", "gpumeter", "nginx", "ratio"), rows)

    a, u = results["attributed"], results["unattributed"]
    n = results["processes_500"]

    def pair(key, fmt, scale=1.0):
        va, vu = (a[key] or 0) * scale, (u[key] or 0) * scale
        return fmt % va, fmt % vu, ("+" if va >= vu else "") + fmt % (va - vu)

    rows = [
        ("owner series (gpu_allocated_seconds_total)",
         "%d (%d unattributed)" % (a["owner_series"], a["unattributed_owner_series"]),
         "%d (%d unattributed)" % (u["owner_series"], u["unattributed_owner_series"]), ""),
        ("per-process series kept / dropped", "%d / %d" % (a["process_series"], a["process_series_dropped"] or 0),
         "%d / %d" % (u["process_series"], u["process_series_dropped"] or 0), ""),
        ("/metrics body (text 0.0.4), bytes",) + pair("body_bytes", "%d"),
        ("/metrics series",) + pair("series", "%d"),
        ("CPU at 1 s interval, s/hour",) + pair("cpu_seconds_per_hour", "%.1f"),
        ("CPU, % of one core",) + pair("cpu_percent_of_core", "%.3f"),
        ("CPU per collection per GPU, ms",) + pair("cpu_ms_per_collection_per_gpu", "%.3f"),
        ("CPU per process-sample (per process per collection), us",) + pair("cpu_us_per_process_sample", "%.2f"),
        ("peak RSS (VmHWM), MiB",) + pair("peak_rss_kib", "%.1f", 1 / 1024),
        ("  RSS at the end, anonymous, MiB",) + pair("rss_anon_kib", "%.1f", 1 / 1024),
        ("  RSS at the end, file-backed (shared libraries), MiB",) + pair("rss_file_kib", "%.1f", 1 / 1024),
        ("ledger state file, bytes",) + pair("state_file_bytes", "%d"),
        ("last checkpoint, wall time (one sample, fsync-bound), ms",) +
        pair("checkpoint_seconds", "%.2f", 1000)[:2] + ("",),
        ("scrape p50 @10 conns, us",) + (("%.0f" % a["gpumeter_c10"]["p50_us"], "%.0f" % u["gpumeter_c10"]["p50_us"],
                                          "nginx %.0f on the attributed body" % a["nginx_c10"]["p50_us"])),
        ("scrape p99 @10 conns, us",) + (("%.0f" % a["gpumeter_c10"]["p99_us"], "%.0f" % u["gpumeter_c10"]["p99_us"],
                                          "nginx %.0f on the attributed body" % a["nginx_c10"]["p99_us"])),
    ]
    print()
    print("Attribution: %s (%d processes, %d GPUs), 1 s collection, checkpoint every 5 s" %
          (os.path.basename(args.scenario_500), n, args.gpus))
    print()
    print_table(("measure", "with attribution", "owners unresolvable", "difference"), rows)

    lb = results["ledger_cpu_us"]
    # part, benchmark with every process its own owner, the same with owners unresolvable (None:
    # not run; the agent's failed lookups are retried only every 5 s), calls per second on the
    # node at a 1 s interval (None: not a steady cost), counted in the sum of the parts.
    parts = [
        ("ledger advance, 1 GPU, 8 processes", "BM_LedgerAdvance/8/1", None, None, False),
        ("ledger advance, 1 GPU, 63 processes", "BM_LedgerAdvance/63/1", "BM_LedgerAdvance/63/0", args.gpus, False),
        ("tracker on_reading (advance included), 1 GPU, 8 processes", "BM_OnReading/8/1", None, None, False),
        ("tracker on_reading (advance included), 1 GPU, 63 processes", "BM_OnReading/63/1", "BM_OnReading/63/0",
         args.gpus, True),
        ("owner lookup, cached process (a stat(), the owner kept)", "BM_Resolve/cached", None, n, True),
        ("  of which the stat() of /proc/<pid>", "BM_EntryId", None, n, False),
        ("owner labels + project rules, when a process, pod or job changes", "BM_BuildOwner", None, None, False),
        ("owner lookup, new process (4 files read)", "BM_Resolve/new", None, None, False),
        ("tracker contribute, 504 processes, per snapshot", "BM_ContributeNode/1", "BM_ContributeNode/0", 1, True),
        ("render the 504-process node, per scrape (none while idle)", "BM_RenderNode/1", "BM_RenderNode/0", None,
         False),
        ("checkpoint the 504-process ledger (every 5 s)", "BM_CheckpointNode/1", "BM_CheckpointNode/0", 0.2, True),
    ]
    rows = []
    total_us = 0.0
    for what, own, unresolvable, calls, summed in parts:
        if own not in lb:
            continue
        us = lb[own]
        us_u = lb.get(unresolvable) if unresolvable else None
        diff = None if calls is None else (us - (us_u or 0.0)) * calls  # µs per second
        if summed and diff is not None:
            total_us += diff
        rows.append((what, "%.2f us" % us, "%.2f us" % us_u if us_u is not None else "",
                     "" if calls is None else "%g" % calls,
                     "" if diff is None else "+%.3f ms (%.3f%% of a core)" % (diff / 1000, diff / 1e4)))
    rows.append(("attribution, sum of the parts (CPU per second)", "", "", "",
                 "+%.3f ms (%.3f%% of a core); agent measured %+.3f%%" %
                 (total_us / 1000, total_us / 1e4, a["cpu_percent_of_core"] - u["cpu_percent_of_core"])))
    print()
    print("Per-collection parts (bench/ledger_bench.cpp, CPU time per call)")
    print()
    print_table(("part", "own owner each", "owners unresolvable", "calls/s on the node", "difference per second"),
                rows)

    for k in ("gpumeter_c10", "gpumeter_c50", "nginx_c10", "nginx_c50"):
        if results[k]["errors"]:
            print("warning: %s: %s" % (k, results[k]["errors"]))
    for run in ("attributed", "unattributed"):
        for k in ("gpumeter_c10", "nginx_c10"):
            if k in results[run] and results[run][k]["errors"]:
                print("warning: %s %s: %s" % (run, k, results[run][k]["errors"]))
    if a["unattributed_owner_series"]:
        print("warning: %d owner series unattributed with a procfs tree" % a["unattributed_owner_series"])
    if a["checkpoint_success"] != 1 or u["checkpoint_success"] != 1:
        print("warning: a ledger checkpoint failed")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
