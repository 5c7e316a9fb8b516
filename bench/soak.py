"""The soak: plays a day of scenario (bench/soak_scenario.py) at an accelerated clock on a simulated
node with every owner resolvable, scrapes /metrics 20 times a second for the whole run, samples the
agent's RSS, open fds and threads, and at the end compares the ledger with `gpumeter sim truth`.
Run it through scripts/soak.sh; `--help` lists the options. Exits 0 when every bar holds, 1 when one
fails, 2 on bad arguments or when the run could not be made.

Bars (the issue's): the ledger within 0.1 % of the truth, with the same bound as
tests/integration/test_ledger.py (harness.allowed_deviation: 0.1 % plus one driver sample period of
the owner's counters per job edge); no growth in RSS, fds or threads after the warm-up.
"""
import argparse
import gzip
import http.client
import os
import signal
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)


def parse_duration(text):
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    text = text.strip()
    if text and text[-1] in units:
        return float(text[:-1]) * units[text[-1]]
    return float(text)


def arguments(argv):
    p = argparse.ArgumentParser(prog="scripts/soak.sh", description=(
        "Plays DURATION of scenario at TIME_SCALE scenario seconds per wall second on a simulated node "
        "of 8 GPUs (jobs starting and stopping, every owner resolvable), scrapes /metrics RATE times a "
        "second, samples the agent's RSS, fds and threads, and compares its ledger with the simulator's "
        "ground truth at the end. Exits 0 if the ledger is within 0.1%% of the truth (plus one driver "
        "sample period per job edge, as tests/integration/test_ledger.py) and RSS, fds and threads did "
        "not grow after the warm-up; 1 if a bar fails; 2 if the run could not be made."))
    p.add_argument("--duration", default="24h", help="scenario time to play: 86400, 90m, 24h (default 24h)")
    p.add_argument("--time-scale", type=float, default=48.0,
                   help="scenario seconds per wall second (default 48: 24 h in 30 min)")
    p.add_argument("--scrape-rate", type=float, default=20.0, help="scrapes per second (default 20)")
    p.add_argument("--sample-every", type=float, default=0.0,
                   help="wall seconds between samples of RSS, fds and threads (default: 1/30 of the run, at least 2)")
    p.add_argument("--warmup", type=float, default=0.0,
                   help="wall seconds of warm-up before the growth bars apply (default: 10%% of the run, at least 10)")
    p.add_argument("--rss-slack-kib", type=int, default=1024,
                   help="RSS growth after the warm-up still counted as none, for the allocator's noise (default 1024)")
    p.add_argument("--edge-seconds", type=float, default=None,
                   help="what each job edge may move of an owner's counters, in seconds at the owner's rate, "
                        "on top of 0.1%% (default 0.2: one driver sample period, as tests/integration/test_ledger.py)")
    p.add_argument("--seed", type=int, default=13, help="seed of the generated scenario (default 13)")
    p.add_argument("--gpumeter", default=os.environ.get("GPUMETER_BIN", os.path.join(SOURCE, "build", "bin", "gpumeter")),
                   help="the gpumeter binary (default $GPUMETER_BIN, else build/bin/gpumeter)")
    p.add_argument("--keep", action="store_true", help="keep the run's directory (logs, scenario, state file)")
    a = p.parse_args(argv)
    try:
        a.duration_s = int(parse_duration(a.duration))
    except ValueError:
        p.error("--duration: expected seconds or a number with s, m, h or d, got %r" % a.duration)
    if a.duration_s < 60 or a.time_scale <= 0 or a.time_scale > 1000 or a.scrape_rate <= 0:
        p.error("--duration must be at least 60 s, --time-scale above 0 and at most 1000, --scrape-rate above 0")
    a.wall = a.duration_s / a.time_scale
    a.sample_every = a.sample_every or max(2.0, a.wall / 30)
    a.warmup = a.warmup or max(10.0, a.wall / 10)
    if not os.access(a.gpumeter, os.X_OK):
        p.error("no gpumeter binary at %s (build it, or give --gpumeter)" % a.gpumeter)
    return a


class Scraper(threading.Thread):
    """GETs /metrics at a fixed rate on one keep-alive connection (reopened after an error), as
    Prometheus does, with gzip. Counts answers, failures and latencies."""

    def __init__(self, port, rate):
        super().__init__(daemon=True)
        self.port, self.period = port, 1.0 / rate
        self.ok = self.failed = 0
        self.latencies = []
        self.last_error = ""
        self.last_body = b""
        self.stop_event = threading.Event()

    def run(self):
        conn = None
        next_t = time.monotonic()
        while not self.stop_event.is_set():
            t0 = time.monotonic()
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                conn.request("GET", "/metrics", headers={"Accept-Encoding": "gzip"})
                r = conn.getresponse()
                body = r.read()
                if r.status != 200:
                    raise OSError("HTTP %d" % r.status)
                self.latencies.append(time.monotonic() - t0)
                self.ok += 1
                self.last_body = body
            except (OSError, http.client.HTTPException) as e:
                self.failed += 1
                self.last_error = repr(e)
                if conn is not None:
                    conn.close()
                conn = None
            next_t += self.period
            delay = next_t - time.monotonic()
            if delay > 0:
                self.stop_event.wait(delay)
            else:
                next_t = time.monotonic()  # behind: no burst to catch up
        if conn is not None:
            conn.close()

    def owner_series(self):
        body = self.last_body
        try:
            body = gzip.decompress(body)
        except OSError:
            pass
        return body.count(b"\ngpu_allocated_seconds_total{")


def proc_sample(pid):
    fields = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            fields[k] = v.strip()
    with open("/proc/%d/stat" % pid) as f:
        stat = f.read().rsplit(")", 1)[1].split()
    return {"rss_kib": int(fields["VmRSS"].split()[0]), "hwm_kib": int(fields["VmHWM"].split()[0]),
            "fds": len(os.listdir("/proc/%d/fd" % pid)), "threads": int(fields["Threads"]),
            "cpu_ticks": int(stat[11]) + int(stat[12])}


def clock(seconds):
    seconds = max(0, int(seconds))
    return "%02d:%02d:%02d" % (seconds // 3600, seconds // 60 % 60, seconds % 60)


def growth_summary(rows, warmup):
    """Per resource: (warm-up value, max after warm-up, end value, growth = end - warm-up value).
    The warm-up value is the highest of the first three samples after the warm-up, the end value
    the lowest of the last three, so a descriptor or thread open for a moment (a checkpoint being
    written, a connection being replaced) is not read as growth; a leak lifts the floor at the end
    above the start."""
    after = [r for r in rows if r["wall"] >= warmup]
    out = {}
    for key in ("rss_kib", "fds", "threads"):
        w = max(r[key] for r in after[:3])
        e = min(r[key] for r in after[-3:])
        out[key] = (w, max(r[key] for r in after), e, e - w)
    return out


def growth_failures(summary, rss_slack_kib):
    """The bars: fds and threads end no higher than after the warm-up; RSS no more than the slack
    (None: RSS not barred, in a sanitizer build)."""
    fails = []
    for key, allowed in (("rss_kib", rss_slack_kib), ("fds", 0), ("threads", 0)):
        if allowed is not None and summary[key][3] > allowed:
            fails.append("%s grew by %d after the warm-up (allowed %d)" % (key, summary[key][3], allowed))
    return fails


def sanitizer_build(path):
    """True for a binary built with AddressSanitizer: its allocator keeps freed memory mapped and its
    shadow memory grows with the addresses used, so its RSS creeps (about 1.2 MiB a minute in the
    smoke run, quarantine off) where the plain build's stays flat."""
    with open(path, "rb") as f:
        return any(b"__asan_init" in chunk for chunk in iter(lambda: f.read(1 << 22), b""))


def owner_key(labels):
    return (labels["gpu"], labels["project"], labels.get("user", ""), labels.get("namespace", ""),
            labels.get("pod", ""), labels.get("hpc_job", ""))


def ledger_check(h, samples, truth, edge_seconds=None):
    """Compares every owner's four counters and each GPU's busy time with the truth. Returns
    (rows for the table, worst relative deviation per counter, failures)."""
    want, edges = h.expected_owners(truth), h.owner_edges(truth)
    edge_scale = 1.0 if edge_seconds is None else edge_seconds / h.EDGE_SECONDS
    got = {}
    for (name, labels), value in samples.items():
        field = h.COUNTERS.get(name)
        if field:
            acc = got.setdefault(owner_key(dict(labels)), {})
            acc[field] = acc.get(field, 0.0) + value  # containers of one owner are summed
    rows, worst, per_edge, fails = [], {}, {}, []
    for key in sorted(want, key=lambda k: (int(k[0]), k[1:])):
        fields = want[key]
        row = {"owner": key}
        for field, value in fields.items():
            measured = got.get(key, {}).get(field)
            if measured is None:
                fails.append("owner %r has no %s" % (key, field))
                continue
            dev = abs(measured - value)
            bound = h.allowed_deviation(value, fields["allocated_seconds"], edges[key] * edge_scale, 1e-3)
            rel = dev / value if value > 0 else 0.0
            row[field] = (value, measured, rel, bound / value if value > 0 else 0.0)
            worst[field] = max(worst.get(field, 0.0), rel)
            # The deviation in seconds of the owner's presence per job edge, at the counter's rate.
            rate = value / fields["allocated_seconds"] if fields["allocated_seconds"] > 0 else 0.0
            if rate > 0:
                per_edge[field] = max(per_edge.get(field, 0.0), dev / rate / edges[key])
            if dev > bound:
                fails.append("%s of %r: ledger %.6g, truth %.6g (%.4f%%, bound %.4f%%)"
                             % (field, key, measured, value, 100 * rel, 100 * bound / value))
        rows.append(row)
    for key in got:
        if key not in want and key[1] not in ("__idle__", "__unattributed__"):
            fails.append("unexpected owner %r" % (key,))
    unattributed = sum(v.get("busy_seconds", 0.0) for k, v in got.items() if k[1] == "__unattributed__")
    for g in truth["gpus"]:
        gpu = str(g["gpu"])
        busy = sum(v.get("busy_seconds", 0.0) for k, v in got.items() if k[0] == gpu)
        rel = abs(busy - g["busy_seconds"]) / g["busy_seconds"] if g["busy_seconds"] else 0.0
        worst["gpu busy"] = max(worst.get("gpu busy", 0.0), rel)
        if abs(busy - g["busy_seconds"]) > 1e-3 * g["busy_seconds"] + 1e-6:
            fails.append("gpu %s busy: ledger %.6g, truth %.6g" % (gpu, busy, g["busy_seconds"]))
    return rows, worst, per_edge, unattributed, fails


def run(a):
    if a.keep:
        os.environ["GPUMETER_KEEP_TEST_DIRS"] = "1"
    os.environ["GPUMETER_BIN"] = a.gpumeter
    os.environ["GPUMETER_SIM_TIME_SCALE"] = repr(a.time_scale)  # the library, sim procfs, sim kubelet
    sys.path.insert(0, os.path.join(SOURCE, "tests", "integration"))
    sys.path.insert(0, HERE)
    import harness as h  # its temporary directory holds everything the run writes
    import soak_scenario

    interval = 1.0
    text, njobs = soak_scenario.generate(a.duration_s, a.time_scale, interval, a.seed)
    workdir = tempfile.mkdtemp(prefix="soak-")
    scenario = os.path.join(workdir, "soak.yaml")
    with open(scenario, "w") as f:
        f.write(text)
    # Wall-clock settings of the node scaled to the accelerated clock: a pid's /proc entry and its
    # pod exist 5 s of wall time around the job, as a real host's would for the agent's 1 s reads.
    lead = "%ds" % int(5 * a.time_scale)
    # Scenario time begins once the agent is ready (a held clock, harness.ScenarioStart).
    scenario_start = h.ScenarioStart()
    print("soak: %d s of scenario (%s) at %gx = %.0f s of wall time; %d jobs on 8 GPUs; %g scrapes/s; "
          "a sample every %.0f s; warm-up %.0f s; run directory %s" % (a.duration_s, clock(a.duration_s),
          a.time_scale, a.wall, njobs, a.scrape_rate, a.sample_every, a.warmup, workdir), flush=True)
    node = h.SimNode(scenario, scenario_start, lead=lead)
    state = os.path.join(workdir, "ledger.json")
    config = node.config("ledger:\n  allocation: process\n  checkpoint_interval: 2s\n"
                         '  idle_power_watts: {"NVIDIA H100 80GB HBM3": 70}\n'
                         # 5 min of wall time would keep 4 scenario hours of exited processes at 48x.
                         "processes:\n  retention: %ds\n" % max(1, int(300 / a.time_scale)))
    asan = os.environ.get("ASAN_OPTIONS", "")  # a sanitizer build's quarantine is not the agent's RSS
    agent = h.Agent(scenario=scenario, interval="%gs" % interval, extra_args=node.agent_args(config, state),
                    env=dict(scenario_start.env, ASAN_OPTIONS=asan + (":" if asan else "") +
                         "quarantine_size_mb=0:thread_local_quarantine_size_kb=0:malloc_context_size=0"))
    scraper = None
    try:
        agent.wait_ready()
        epoch = scenario_start.begin()
        pid = agent.process.proc.pid
        scraper = Scraper(agent.port, a.scrape_rate)
        scraper.start()
        start = time.time()
        end_wall = epoch + a.duration_s / a.time_scale
        settle = 6.0  # a checkpoint (2 s) publishes the last usage after the scenario's end
        rows = []
        header = "%8s %10s %9s %9s %5s %8s %7s %9s %7s %7s" % (
            "wall s", "scenario", "RSS MiB", "HWM MiB", "fds", "threads", "CPU %", "scrapes", "failed", "owners")
        print(header, flush=True)
        last_ticks, last_t = proc_sample(pid)["cpu_ticks"], time.time()
        first_ticks, first_t = last_ticks, last_t
        next_sample = start
        while True:
            now = time.time()
            if now >= next_sample or now >= end_wall + settle:
                if not agent.process.alive():
                    raise RuntimeError("the agent exited:\n" + agent.process.log()[-3000:])
                s = proc_sample(pid)
                s["wall"] = now - start
                cpu = 100.0 * (s["cpu_ticks"] - last_ticks) / os.sysconf("SC_CLK_TCK") / max(now - last_t, 1e-9)
                last_ticks, last_t = s["cpu_ticks"], now
                rows.append(s)
                print("%8.0f %10s %9.2f %9.2f %5d %8d %7.2f %9d %7d %7d" % (
                    s["wall"], clock((now - epoch) * a.time_scale), s["rss_kib"] / 1024, s["hwm_kib"] / 1024,
                    s["fds"], s["threads"], cpu, scraper.ok, scraper.failed, scraper.owner_series()), flush=True)
                next_sample += a.sample_every
                if now >= end_wall + settle:
                    break
            time.sleep(max(0.0, min(next_sample, end_wall + settle) - time.time()))
        total_cpu = (last_ticks - first_ticks) / os.sysconf("SC_CLK_TCK") / (last_t - first_t)
        _, body = agent.metrics()
        scraper.stop_event.set()
        scraper.join(15)
    finally:
        if scraper is not None:
            scraper.stop_event.set()
        code = agent.stop()
        node.stop()
    truth = h.sim_truth(scenario, 0, a.duration_s)
    samples = h.parse_text(body)
    gaps = sum(v for (n, _), v in samples.items() if n == "gpumeter_ledger_gap_seconds_total")
    return report(a, h, rows, truth, samples, gaps, scraper, total_cpu, code, agent)


def report(a, h, rows, truth, samples, gaps, scraper, total_cpu, code, agent):
    fails = []
    print("\nResources after the warm-up (%.0f s of wall time; %d samples after it):"
          % (a.warmup, sum(1 for r in rows if r["wall"] >= a.warmup)))
    if sum(1 for r in rows if r["wall"] >= a.warmup) < 2:
        fails.append("fewer than two samples after the warm-up: nothing to compare")
    else:
        summary = growth_summary(rows, a.warmup)
        print("%-8s %12s %12s %12s %12s" % ("", "warm-up", "max after", "end", "growth"))
        for key, label, div in (("rss_kib", "RSS MiB", 1024.0), ("fds", "fds", 1), ("threads", "threads", 1)):
            w, mx, e, g = summary[key]
            fmt = "%-8s %12.2f %12.2f %12.2f %+12.2f" if div != 1 else "%-8s %12d %12d %12d %+12d"
            print(fmt % (label, w / div, mx / div, e / div, g / div))
        asan = sanitizer_build(a.gpumeter)
        if asan:
            print("a sanitizer build: its allocator's RSS is not the agent's, so the RSS bar is not applied")
        fails += growth_failures(summary, None if asan else a.rss_slack_kib)
    lat = sorted(scraper.latencies)
    pct = (lambda q: 1000 * lat[min(len(lat) - 1, int(q * len(lat)))]) if lat else (lambda q: 0.0)
    print("peak RSS (VmHWM) %.2f MiB; agent CPU over the run %.2f%% of one core" % (rows[-1]["hwm_kib"] / 1024,
                                                                                  100 * total_cpu))
    print("scrapes: %d answered, %d failed%s; latency p50 %.2f ms, p99 %.2f ms, max %.2f ms"
          % (scraper.ok, scraper.failed, " (last: %s)" % scraper.last_error if scraper.failed else "",
             pct(0.5), pct(0.99), 1000 * lat[-1] if lat else 0.0))
    table, worst, per_edge, unattributed, ledger_fails = ledger_check(h, samples, truth, a.edge_seconds)
    fails += ledger_fails
    print("\nLedger against `gpumeter sim truth` over [0, %d s]: %d jobs, %d owners (gpu, project, user, "
          "namespace, pod, hpc_job); gap %.6g s" % (a.duration_s, len(truth["jobs"]), len(table), gaps))
    print("%-4s %-9s %-6s %-28s %14s %9s %14s %9s %9s" % ("gpu", "project", "user", "pod / hpc_job",
          "allocated s", "dev %", "busy s", "dev %", "bound %"))
    for row in table:
        k = row["owner"]
        al, bu = row.get("allocated_seconds"), row.get("busy_seconds")
        if al and bu:
            print("%-4s %-9s %-6s %-28s %14.3f %9.5f %14.3f %9.5f %9.5f" % (
                k[0], k[1], k[2], (k[4] or k[5])[:28], al[0], 100 * al[2], bu[0], 100 * bu[2], 100 * bu[3]))
    print("largest relative deviation: " + ", ".join("%s %.3g%%" % (f, 100 * v) for f, v in sorted(worst.items())))
    edge_bound = h.EDGE_SECONDS if a.edge_seconds is None else a.edge_seconds
    print("largest deviation per job edge, in seconds at the owner's rate (bound %g s): " % edge_bound
          + ", ".join("%s %.3f s" % (f, v) for f, v in sorted(per_edge.items())))
    print("busy seconds of __unattributed__: %.6g (GPU busy time no process present claimed)" % unattributed)
    if gaps > 0:
        fails.append("%.6g s counted as gap: the driver's sample buffers overflowed" % gaps)
    if code != 0:
        fails.append("the agent exited %s on SIGTERM" % code)
    if fails:
        print("\nsoak: FAILED")
        for f in fails[:40]:
            print("  " + f)
        print("---- tail of the agent's log ----\n" + agent.process.log()[-3000:])
        return 1
    print("\nsoak: PASSED (ledger within 0.1%% of the truth plus %g s per job edge; no growth in RSS "
          "(slack %d KiB), fds or threads after the warm-up)" % (edge_bound, a.rss_slack_kib))
    return 0


def main(argv):
    a = arguments(argv)
    # Interrupted or terminated (a test's timeout, Ctrl-C, or SIGINT to a background job, which
    # the shell started ignoring it): unwind, so that the agent and the node's processes stop.
    def stop(signum, frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        return run(a)
    except (RuntimeError, AssertionError, OSError) as e:
        print("soak: the run could not be made: %s" % e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
