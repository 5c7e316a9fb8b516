#!/usr/bin/python3
"""Times `gpumeter report` on a 1000-GPU fleet's 30-day history in a local Prometheus.

The history comes from tests/tools/backfill.py (125 nodes x 8 GPUs by default, every owner's
four ledger counters, gpu_info, covered and gap seconds; the gauges gpu_up and
gpu_utilization_ratio are left out, since the report does not read them). It is written one
18 h window at a time and turned into a TSDB block by `promtool tsdb create-blocks-from
openmetrics`, two promtool runs beside the generator, each file deleted once converted. Then a
Prometheus is started on the blocks and this is timed, --runs times:

  gpumeter report --from <first sample> --to <last sample> --by project \
      --pricing deploy/pricing/list-prices.yaml --format json

recording wall time, the number of API requests and the report's own elapsed time (both from its
JSON), and the peak RSS of the report process (its VmHWM). Also measured: the size of
Prometheus' data, its peak RSS, for scale one `sum by (project)(increase(...[30d]))` query,
the hand-built stack's way, and the store reading every owner sample once (a day's
count_over_time per step, the four counters on two connections): the floor for any reader that
looks at every sample. Target: under 30 s for the 30-day report.

The scrape interval defaults to 300 s: at 60 s the history is 5x the samples (about 620
million), which takes promtool over half an hour on two cores; see docs/report-accuracy.md.

--store victoriametrics loads the same history into a single-node VictoriaMetrics instead
(/api/v1/import/prometheus, one window at a time) and times the report against it.

The report runs with --read (default auto: remote read on Prometheus, the query API on
VictoriaMetrics). On Prometheus the bench also runs the same report once through the query API
alone (--read query) as the peer, and prints its wall time, requests and peak RSS and the
largest difference between the two reports' rows (--no-query-peer skips it).
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "tools"))
import backfill  # noqa: E402
from bench import print_table, status_kib  # noqa: E402  (shared with bench/bench.py)

TARGET_SECONDS = 30
FALLBACK_PRICING = """# bench/report_bench.py's own prices, used when deploy/pricing/list-prices.yaml is missing
currency: USD
gpu_models:
  "NVIDIA H100 80GB HBM3": {gpu_hour: 6.88}
  "NVIDIA A100-SXM4-80GB": {gpu_hour: 3.43}
  "NVIDIA L40S": {gpu_hour: 1.861}
  "*": {gpu_hour: 1.00}
idle:
  policy: separate
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def du_bytes(path):
    total = 0
    for d, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(d, f)).st_blocks * 512
            except OSError:
                pass
    return total


def load_prometheus(fleet, workdir, blocks, gauges):
    """Generates the history window by window and converts each with promtool; returns
    (samples, files, generation seconds, wall seconds)."""
    gen_seconds = 0.0
    files = 0
    t0 = time.monotonic()

    def generated():
        """The history's files, timing how long each takes to write."""
        nonlocal gen_seconds
        it = backfill.iter_files(fleet, os.path.join(workdir, "om"), "openmetrics", gauges, backfill.ALIGN)
        while True:
            g0 = time.monotonic()
            try:
                item = next(it)
            except StopIteration:
                return
            gen_seconds += time.monotonic() - g0
            yield item

    def progress(count, samples):
        nonlocal files
        files = count
        sys.stderr.write("\rreport_bench: %d windows, %d samples, %.0f s" % (count, samples, time.monotonic() - t0))
        sys.stderr.flush()

    try:
        samples = backfill.promtool_blocks(generated(), blocks, progress)
    except RuntimeError as e:
        raise SystemExit("report_bench: %s" % e)
    sys.stderr.write("\n")
    return samples, files, gen_seconds, time.monotonic() - t0


def load_victoriametrics(fleet, workdir, url, gauges):
    """Generates the history window by window and imports each into VictoriaMetrics; returns
    (samples, files, generation seconds, wall seconds)."""
    gen_seconds = 0.0
    files = samples = 0
    t0 = time.monotonic()
    it = backfill.iter_files(fleet, os.path.join(workdir, "prom"), "prometheus", gauges, backfill.ALIGN)
    while True:
        g0 = time.monotonic()
        try:
            path, count = next(it)
        except StopIteration:
            break
        gen_seconds += time.monotonic() - g0
        with open(path, "rb") as f:
            req = urllib.request.Request(url + "/api/v1/import/prometheus", data=f, method="POST",
                                         headers={"Content-Length": str(os.path.getsize(path))})
            with urllib.request.urlopen(req, timeout=600) as r:
                if r.status not in (200, 204):
                    raise SystemExit("report_bench: VictoriaMetrics import answered HTTP %d" % r.status)
        os.unlink(path)
        files += 1
        samples += count
        sys.stderr.write("\rreport_bench: %d windows, %d samples, %.0f s" % (files, samples, time.monotonic() - t0))
        sys.stderr.flush()
    with urllib.request.urlopen(url + "/internal/force_flush", timeout=600) as r:
        r.read()
    sys.stderr.write("\n")
    return samples, files, gen_seconds, time.monotonic() - t0


def start_store(store, workdir, data, interval, query_log):
    """Prometheus on the blocks in `data`, or VictoriaMetrics on its data directory; returns
    (process, url) once it is ready."""
    port = free_port()
    url = "http://127.0.0.1:%d" % port
    log = open(os.path.join(workdir, store + ".log"), "wb")
    if store == "prometheus":
        cfg = os.path.join(workdir, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: %ds\n" % interval)
            if query_log:
                f.write("  query_log_file: %s\n" % os.path.abspath(query_log))
        args = ["prometheus", "--config.file=" + cfg, "--storage.tsdb.path=" + data,
                "--storage.tsdb.retention.time=60d", "--storage.tsdb.max-block-duration=18h",
                "--web.listen-address=127.0.0.1:%d" % port, "--log.level=warn"]
        ready = "/-/ready"
    else:
        args = ["victoria-metrics", "-storageDataPath=" + data, "-retentionPeriod=100y",
                "-httpListenAddr=127.0.0.1:%d" % port, "-loggerLevel=WARN"]
        ready = "/health"
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + 120
    while True:
        try:
            with urllib.request.urlopen(url + ready, timeout=2) as r:
                if r.status == 200:
                    return proc, url
        except OSError:
            if time.time() > deadline or proc.poll() is not None:
                raise SystemExit("report_bench: %s did not become ready; see %s" % (store, log.name))
            time.sleep(0.2)


def peak_rss_kib(pid, done):
    """The process' VmHWM, read every 20 ms until `done` is set; the last value read. Not
    wait4's ru_maxrss: Linux carries the high-water mark of the forking process (this one, which
    holds the fleet's model: hundreds of MiB) across exec into the child's."""
    peak = [0]

    def poll():
        while not done.is_set():
            try:
                peak[0] = max(peak[0], status_kib(pid, "VmHWM"))
            except (OSError, ValueError):
                pass
            time.sleep(0.02)

    t = threading.Thread(target=poll, daemon=True)
    t.start()
    return t, peak


def run_report(binary, url, fleet, pricing, out, read="auto"):
    args = [binary, "report", "--url", url, "--from", str(fleet.start), "--to", str(fleet.end), "--by", "project",
            "--pricing", pricing, "--format", "json", "--output", out, "--progress", "never", "--read", read]
    t0 = time.monotonic()
    # Its warnings can be more than a pipe holds (one per GPU for an outage of the store).
    err_file = tempfile.TemporaryFile()
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err_file)
    done = threading.Event()
    poller, peak = peak_rss_kib(p.pid, done)
    # The last reading comes from a zombie-free process: wait with WNOWAIT first.
    os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
    done.set()
    poller.join()
    peak[0] = max(peak[0], status_kib(p.pid, "VmHWM"))
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    err_file.seek(0)
    err = err_file.read().decode("utf-8", "replace")
    err_file.close()
    if p.returncode != 0:
        raise SystemExit("report_bench: %s exited %d:\n%s" % (" ".join(args), p.returncode, err[-3000:]))
    with open(out) as f:
        doc = json.load(f)
    return {"wall_seconds": wall, "peak_rss_kib": peak[0], "cpu_seconds": usage.ru_utime + usage.ru_stime,
            "queries": doc.get("queries"), "elapsed_seconds": doc.get("elapsed_seconds"), "doc": doc,
            "rows": len(doc.get("rows", [])), "warnings": len(doc.get("warnings", [])),
            "step_seconds": doc.get("step_seconds"), "backend": doc.get("source", {}).get("backend"),
            "total": doc.get("total")}


def accuracy(fleet, doc):
    """The report by project against the generator's exact truth."""
    truth = fleet.truth(fleet.start, fleet.end)
    fields = ("allocated_seconds", "busy_seconds", "memory_byte_seconds", "energy_joules")
    worst, where = 0.0, ""
    for row in doc["rows"]:
        project = row["key"]["project"]
        want = truth["by"]["project"].get(project)
        for f in fields:
            w = want[f] if want else 0.0
            d = abs(row[f] - w) / max(abs(w), 1e-9)
            if d > worst:
                worst, where = d, "%s %s: %.6g vs truth %.6g" % (project, f, row[f], w)
    rec = doc["reconciliation"]
    return {"worst": worst, "where": where, "reconciliation_ok": rec["ok"],
            "difference_seconds": rec["difference_seconds"], "invisible_resets": len(fleet.ambiguous)}


def largest_difference(a, b):
    """The largest relative difference between two reports' rows by project."""
    fields = ("allocated_seconds", "busy_seconds", "memory_byte_seconds", "energy_joules")
    rows_b = {json.dumps(r["key"], sort_keys=True): r for r in b["rows"]}
    worst = 0.0 if len(a["rows"]) == len(b["rows"]) else float("inf")
    for r in a["rows"]:
        other = rows_b.get(json.dumps(r["key"], sort_keys=True))
        if other is None:
            return float("inf")
        pairs = [(r[f], other[f]) for f in fields]
        if isinstance(r.get("cost"), dict):
            pairs.append((r["cost"]["total"], other["cost"]["total"]))
        for x, y in pairs:
            worst = max(worst, abs(x - y) / max(abs(x), 1e-9))
    return worst


def timed_query(url, expr, at):
    params = urllib.parse.urlencode({"query": expr, "time": repr(at)})
    t0 = time.monotonic()
    with urllib.request.urlopen(url + "/api/v1/query?" + params, timeout=600) as r:
        doc = json.load(r)
    return time.monotonic() - t0, len(doc["data"]["result"])


OWNER_COUNTERS = ("gpu_allocated_seconds_total", "gpu_busy_seconds_total", "gpu_memory_byte_seconds_total",
                  "gpu_attributed_energy_joules_total")


def sample_pass(url, fleet):
    """The store reading every owner sample of the period once, and nothing else: a day's
    count_over_time per step for each of the four counters, two requests at a time (as the
    report's two connections). A floor for any reader that looks at every sample. Returns
    (wall seconds, samples counted)."""
    def count(name):
        params = urllib.parse.urlencode({"query": "sum(count_over_time(%s[1d]))" % name,
                                         "start": repr(fleet.start + 86400), "end": repr(fleet.end), "step": "86400"})
        with urllib.request.urlopen(url + "/api/v1/query_range?" + params, timeout=600) as r:
            doc = json.load(r)
        return sum(float(v) for s in doc["data"]["result"] for _, v in s["values"])
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        samples = sum(ex.map(count, OWNER_COUNTERS))
    return time.monotonic() - t0, samples


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--nodes", type=int, default=125)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--interval", type=int, default=300, help="scrape interval of the history, seconds")
    ap.add_argument("--seed", default="bench")
    ap.add_argument("--gauges", action="store_true", help="also backfill gpu_up and gpu_utilization_ratio")
    ap.add_argument("--pricing", default=os.path.join(ROOT, "deploy", "pricing", "list-prices.yaml"))
    ap.add_argument("--runs", type=int, default=3, help="timed report runs")
    ap.add_argument("--workdir", help="keep the history and the TSDB here (default: a temporary directory, removed)")
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--query-log", help="Prometheus' query log file (query_log_file), to see what the report asks")
    ap.add_argument("--store", choices=("prometheus", "victoriametrics"), default="prometheus",
                    help="where the history is loaded and the report reads it (default: prometheus)")
    ap.add_argument("--read", choices=("auto", "query", "remote"), default="auto",
                    help="the report's --read for the timed runs (default: auto, remote read on Prometheus)")
    ap.add_argument("--no-query-peer", action="store_true",
                    help="on Prometheus, skip the one run of the same report through the query API alone")
    args = ap.parse_args()

    binary = os.path.join(args.build, "bin", "gpumeter")
    for tool in ("promtool", "prometheus") if args.store == "prometheus" else ("victoria-metrics",):
        if shutil.which(tool) is None:
            raise SystemExit("report_bench: %s not found (scripts/install-deps.sh test installs it)" % tool)
    if subprocess.run([binary, "report", "--help"], capture_output=True).returncode != 0:
        raise SystemExit("report_bench: %s has no working report command" % binary)

    workdir = args.workdir or tempfile.mkdtemp(prefix="gpumeter-report-bench-")
    os.makedirs(workdir, exist_ok=True)
    blocks = os.path.join(workdir, "prometheus" if args.store == "prometheus" else "victoria-metrics")
    pricing = args.pricing
    pricing_note = os.path.relpath(pricing, ROOT) if pricing.startswith(ROOT) else pricing
    if not os.path.exists(pricing):
        pricing = os.path.join(workdir, "pricing.yaml")
        with open(pricing, "w") as f:
            f.write(FALLBACK_PRICING)
        pricing_note = "bench's own (%s missing)" % pricing_note
    prom = None
    results = {}
    try:
        params = {"nodes": args.nodes, "gpus_per_node": args.gpus_per_node, "days": args.days,
                  "interval": args.interval, "seed": args.seed, "gauges": args.gauges}
        stamp = os.path.join(workdir, "history.json" if args.store == "prometheus" else "history-vm.json")
        reuse = None
        if os.path.exists(stamp) and os.path.isdir(blocks) and os.listdir(blocks):
            with open(stamp) as f:
                reuse = json.load(f)
            if reuse.get("params") != params:
                raise SystemExit("report_bench: %s holds another history (%s); remove it" % (workdir, stamp))
        t0 = time.monotonic()
        fleet_args = argparse.Namespace(end=reuse["end"] if reuse else None, events=None, **{
            k: v for k, v in params.items() if k != "gauges"})
        fleet = backfill.build_fleet(fleet_args)
        results["model_seconds"] = time.monotonic() - t0
        if reuse:
            print("report_bench: reusing the blocks in %s" % blocks)
            results.update({k: reuse[k] for k in ("samples", "files", "generate_seconds", "load_seconds")})
        else:
            shutil.rmtree(blocks, ignore_errors=True)
            os.makedirs(blocks)
            if args.store == "prometheus":
                samples, files, gen, wall = load_prometheus(fleet, workdir, blocks, args.gauges)
            else:
                prom, url = start_store(args.store, workdir, blocks, args.interval, None)
                samples, files, gen, wall = load_victoriametrics(fleet, workdir, url, args.gauges)
            results.update(samples=samples, files=files, generate_seconds=gen, load_seconds=wall)
            with open(stamp, "w") as f:
                json.dump(dict(params=params, end=fleet.end, samples=samples, files=files, generate_seconds=gen,
                               load_seconds=wall), f)
        results["series_lives"] = sum(len(g.lives) for g in fleet.gpus)
        if prom is None:
            prom, url = start_store(args.store, workdir, blocks, args.interval, args.query_log)
        results["tsdb_bytes"] = du_bytes(blocks)
        results["blocks"] = len([d for d in os.listdir(blocks) if len(d) == 26])
        results["series"] = int(float(json.load(urllib.request.urlopen(
            url + "/api/v1/query?" + urllib.parse.urlencode({"query": "count({job=\"gpumeter\"})",
                                                                "time": str(fleet.end)})))["data"]["result"][0]["value"][1]))

        runs = []
        for i in range(args.runs):
            r = run_report(binary, url, fleet, pricing, os.path.join(workdir, "report.json"), args.read)
            runs.append(r)
            print("report_bench: run %d: %.2f s wall, %s queries, %.0f MiB peak RSS" %
                  (i + 1, r["wall_seconds"], r["queries"], r["peak_rss_kib"] / 1024))
        if args.store == "prometheus" and args.read != "query" and not args.no_query_peer:
            peer = run_report(binary, url, fleet, pricing, os.path.join(workdir, "report-query.json"), "query")
            print("report_bench: through the query API alone: %.2f s wall, %s queries, %.0f MiB peak RSS" %
                  (peer["wall_seconds"], peer["queries"], peer["peak_rss_kib"] / 1024))
            peer["largest_difference"] = largest_difference(runs[0]["doc"], peer.pop("doc"))
            results["query_peer"] = peer
        results["accuracy"] = accuracy(fleet, runs[0].pop("doc"))
        for r in runs[1:]:
            r.pop("doc")
        results["runs"] = runs
        results["increase_query_seconds"], results["increase_query_rows"] = timed_query(
            url, "sum by (project)(increase(gpu_allocated_seconds_total[%dd]))" % args.days, fleet.end)
        results["sample_pass_seconds"], results["sample_pass_samples"] = sample_pass(url, fleet)
        results["prometheus_peak_rss_kib"] = status_kib(prom.pid, "VmHWM")
    finally:
        if prom is not None and prom.poll() is None:
            prom.send_signal(signal.SIGTERM)
            try:
                prom.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(prom.pid, signal.SIGKILL)
                prom.wait()
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)

    walls = sorted(r["wall_seconds"] for r in runs)
    best, median = walls[0], walls[len(walls) // 2]
    first = runs[0]
    gpus = args.nodes * args.gpus_per_node
    store = "Prometheus" if args.store == "prometheus" else "VictoriaMetrics"
    rows = [
        ("fleet", "%d nodes x %d GPUs = %d GPUs, %d days" % (args.nodes, args.gpus_per_node, gpus, args.days), ""),
        ("scrape interval of the history", "%d s" % args.interval,
         "60 s is 5x the samples: too slow to backfill on 2 cores" if args.interval > 60 else ""),
        ("samples backfilled", "{:,}".format(results["samples"]),
         "%s series lives (owner x GPU)" % "{:,}".format(results["series_lives"])),
        ("series at the end", "{:,}".format(results["series"]), ""),
        ("generate + " + ("promtool" if args.store == "prometheus" else "import") + ", wall",
         "%.0f s" % results["load_seconds"],
         "generator %.0f s of it, %s files of 18 h" % (results["generate_seconds"], results["files"])),
        ("%s data size" % store, "%.1f MiB" % (results["tsdb_bytes"] / 2 ** 20)
         + (" in %d blocks" % results["blocks"] if args.store == "prometheus" else ""), ""),
        ("report wall time, best / median of %d" % len(runs), "%.2f s / %.2f s" % (best, median),
         "target < %d s: %s" % (TARGET_SECONDS, "met" if median < TARGET_SECONDS else "MISSED")),
        ("report elapsed (its JSON), first run", "%.2f s" % first["elapsed_seconds"], ""),
        ("report CPU (user + system), first run", "%.2f s" % first["cpu_seconds"], ""),
        ("API requests (queries)", str(first["queries"]), "step %s s" % first["step_seconds"]),
        ("report peak RSS", "%.1f MiB" % (max(r["peak_rss_kib"] for r in runs) / 1024), "VmHWM"),
        ("rows / warnings", "%d / %d" % (first["rows"], first["warnings"]), ""),
        ("largest deviation from the exact truth, by project", "%.3g" % results["accuracy"]["worst"],
         results["accuracy"]["where"]),
        ("reconciliation", "ok" if results["accuracy"]["reconciliation_ok"] else "NOT ok",
         "owners + idle - covered = %.0f s" % results["accuracy"]["difference_seconds"]),
        ("resets no reader can see", str(results["accuracy"]["invisible_resets"]),
         "series back from 0 above their old total at once (truth's ambiguous_resets)"),
        ("pricing", pricing_note, ""),
    ]
    if "query_peer" in results:
        peer = results["query_peer"]
        rows.append(("the same report through the query API alone (--read query), one run",
                     "%.2f s, %s requests, %.1f MiB" % (peer["wall_seconds"], peer["queries"],
                                                        peer["peak_rss_kib"] / 1024),
                     "largest difference from the timed report's rows: %.2g" % peer["largest_difference"]))
    rows += [
        ("%s peak RSS after the reports" % store, "%.0f MiB" % (results["prometheus_peak_rss_kib"] / 1024), ""),
        ("one sum by (project)(increase(...[%dd])) query" % args.days, "%.2f s" % results["increase_query_seconds"],
         "the hand-built stack's way, for scale (inexact)"),
        ("%s reading every owner sample once" % store, "%.2f s" % results["sample_pass_seconds"],
         "%s samples counted, 4 counters on 2 connections: a floor for any reader of every sample"
         % format(int(results["sample_pass_samples"]), ",")),
    ]
    print()
    print("Report: %d-day chargeback of %d GPUs from %s (%s)" % (args.days, gpus, store, first["backend"]))
    print()
    print_table(("measure", "value", "note"), rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
