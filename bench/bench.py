#!/usr/bin/python3
"""Measures gpumeter serve against nginx in the same run and prints a table.

- render time: per snapshot and per scrape (Google Benchmark, bench/render_bench.cpp);
- scrape latency p50/p99 at 10 connections and scrapes/s at 50 connections (wrk), for the agent
  and for nginx serving the agent's own /metrics bytes as a static file;
- agent CPU seconds per hour at a 1 s collection interval (from /proc/<pid>/stat, no scrapes);
- agent peak RSS (VmHWM) after all of the load.
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--scenario", default=os.path.join(ROOT, "deploy", "scenarios", "bench-8x-64proc.yaml"))
    ap.add_argument("--seconds", type=int, default=int(os.environ.get("BENCH_SECONDS", "10")))
    ap.add_argument("--cpu-seconds", type=int, default=int(os.environ.get("BENCH_CPU_SECONDS", "60")))
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args()
    for tool in ("wrk", "nginx"):
        if not shutil.which(tool) and not os.path.exists("/usr/sbin/" + tool):
            raise SystemExit("bench: %s is missing; run scripts/install-deps.sh bench" % tool)

    work = tempfile.mkdtemp(prefix="gpumeter-bench-")
    os.chmod(work, 0o755)  # nginx workers drop root privileges and must still read the file
    results = {"render_us": render_bench(args.build)}

    port = free_port()
    agent = subprocess.Popen([os.path.join(args.build, "bin", "gpumeter"), "serve", "--sim.scenario", args.scenario,
                              "--web.listen-address", "127.0.0.1:%d" % port, "--collect.interval", "1s",
                              "--log.level", "warn"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    nginx = None
    try:
        wait_http("http://127.0.0.1:%d/-/ready" % port)
        time.sleep(2)  # a few collection rounds, so every GPU and process is in the snapshot
        body = wait_http("http://127.0.0.1:%d/metrics" % port)
        results["body_bytes"] = len(body)
        results["series"] = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))

        # CPU at a 1 s interval with no scrapes: the steady cost of collection and rendering.
        print("bench: sampling agent CPU for %d s ..." % args.cpu_seconds, file=sys.stderr)
        c0, t0 = cpu_seconds(agent.pid), time.time()
        time.sleep(args.cpu_seconds)
        c1, t1 = cpu_seconds(agent.pid), time.time()
        results["cpu_seconds_per_hour"] = (c1 - c0) / (t1 - t0) * 3600
        results["cpu_percent_of_core"] = (c1 - c0) / (t1 - t0) * 100

        # nginx serving the same bytes from a static file, one worker per core as usual.
        os.makedirs(os.path.join(work, "www"))
        with open(os.path.join(work, "www", "metrics"), "wb") as f:
            f.write(body)
        nport = free_port()
        conf = os.path.join(work, "nginx.conf")
        with open(conf, "w") as f:
            f.write("worker_processes auto; daemon off; pid %s/nginx.pid; error_log %s/nginx.err;\n"
                    "events { worker_connections 1024; }\n"
                    "http { access_log off; server { listen 127.0.0.1:%d; location / { root %s/www; "
                    "default_type text/plain; } } }\n" % (work, work, nport, work))
        nginx = subprocess.Popen(["nginx", "-c", conf, "-p", work], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        wait_http("http://127.0.0.1:%d/metrics" % nport)

        for name, url in (("gpumeter", "http://127.0.0.1:%d/metrics" % port),
                          ("nginx", "http://127.0.0.1:%d/metrics" % nport)):
            print("bench: wrk against %s ..." % name, file=sys.stderr)
            results[name + "_c10"] = wrk(url, 10, args.seconds)
            results[name + "_c50"] = wrk(url, 50, args.seconds)
        results["peak_rss_kib"] = status_kib(agent.pid, "VmHWM")
        results["rss_kib"] = status_kib(agent.pid, "VmRSS")
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.wait(15)
        if nginx:
            nginx.send_signal(signal.SIGQUIT)
            nginx.wait(15)
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
    ]
    w = [max(len(r[i]) for r in rows + [("measure", "gpumeter", "nginx", "ratio")]) for i in range(4)]
    line = "| " + " | ".join("%-*s" % (w[i], h) for i, h in enumerate(("measure", "gpumeter", "nginx", "ratio"))) + " |"
    print(line)
    print("|" + "|".join("-" * (x + 2) for x in w) + "|")
    for r in rows:
        print("| " + " | ".join("%-*s" % (w[i], c) for i, c in enumerate(r)) + " |")
    for k in ("gpumeter_c10", "gpumeter_c50", "nginx_c10", "nginx_c50"):
        if results[k]["errors"]:
            print("warning: %s: %s" % (k, results[k]["errors"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
