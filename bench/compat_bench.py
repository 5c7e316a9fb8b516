#!/usr/bin/python3
"""What --compat costs: the /metrics body of the agent on the 64-process node in each compat set,
and the per-snapshot render (families, both formats, gzip) of an 8-GPU node from
bench/render_bench.cpp (BM_PerSnapshot_BuildRenderGzip_Compat, text_bytes its text body). A
scrape's own cost does not change: it sends the bytes rendered once per snapshot.

Usage: bench/compat_bench.py --build build   (needs the build configured with
-DGPUMETER_BUILD_BENCH=ON; about half a minute)"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import ROOT, free_port, print_table, stop, wait_http  # noqa: E402

SETS = [[], ["dcgm-exporter"], ["dcgm-exporter-1.x"], ["nvidia-smi"], ["dcgm-exporter", "dcgm-exporter-1.x",
                                                                        "nvidia-smi"]]


def body_of(exe, scenario, sets, work):
    """The text body of an agent with no resolvable owner (as bench.py's core run), after a few rounds."""
    empty = os.path.join(work, "empty")
    os.makedirs(os.path.join(empty, "proc"), exist_ok=True)
    port = free_port()
    args = [exe, "serve", "--sim.scenario", scenario, "--web.listen-address", "127.0.0.1:%d" % port,
            "--collect.interval", "1s", "--log.level", "error", "--path.procfs", os.path.join(empty, "proc"),
            "--path.rootfs", empty, "--ledger.state-file", ""]
    for s in sets:
        args += ["--compat", s]
    agent = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_http("http://127.0.0.1:%d/-/ready" % port)
        time.sleep(2)  # a few collection rounds, so every GPU and process is in the snapshot
        return wait_http("http://127.0.0.1:%d/metrics" % port)
    finally:
        stop(agent)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--scenario", default=os.path.join(ROOT, "deploy", "scenarios", "bench-8x-64proc.yaml"))
    args = ap.parse_args()
    exe = os.path.join(os.path.abspath(args.build), "bin", "gpumeter")
    bench_exe = os.path.join(os.path.abspath(args.build), "bin", "render_bench")
    out = subprocess.run([bench_exe, "--benchmark_format=json", "--benchmark_min_time=0.5",
                          "--benchmark_filter=BM_PerSnapshot_BuildRenderGzip_Compat"],
                         check=True, capture_output=True, text=True).stdout
    render = {}
    for b in json.loads(out)["benchmarks"]:
        unit = {"ns": 1e-3, "us": 1, "ms": 1e3}[b["time_unit"]]
        render[b["label"]] = (b["real_time"] * unit, int(b["text_bytes"]))
    rows = []
    with tempfile.TemporaryDirectory(prefix="gpumeter-compat-bench-") as work:
        base = None
        for sets in SETS:
            label = "+".join(sets) if sets else "no compat"
            body = body_of(exe, args.scenario, sets, work)
            series = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
            us, text_bytes = render[label]
            if base is None:
                base = (len(body), us)
            rows.append((label, "%d bytes, %d series" % (len(body), series), "%.2fx" % (len(body) / base[0]),
                         "%.2f us (%d bytes)" % (us, text_bytes), "%.2fx" % (us / base[1])))
    print("Compat sets: %s body, and the per-snapshot render of 8 GPUs" % os.path.basename(args.scenario))
    print()
    print_table(("--compat", "/metrics body (text 0.0.4)", "body vs none", "render per snapshot", "render vs none"),
                rows)


if __name__ == "__main__":
    main()
