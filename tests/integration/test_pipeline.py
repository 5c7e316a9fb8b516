"""The README's main command runs scripts/pipeline.sh: a simulated fleet (an agent per node, each
with its host side), a real Prometheus with the cost, budget and alert rules, a real Alertmanager
and a real VictoriaMetrics fed by remote_write, and a chargeback table from `gpumeter report` at
each interval. The first run of a state directory backfills the fleet's last 30 days from the
simulator's truth and the alerts they fired, and within 60 s of its start prints a month's
chargeback across the projects, with the totals the truth gives, and writes an HTML report that
headless Chromium renders. Ctrl-C (SIGINT to the script) stops every process it started, and a
second run on the same state directory works and keeps the first run's data."""
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse

import yaml

import harness
from harness import BIN, SOURCE_DIR, free_port, http_get, wait_until
from test_report_html import chromium

# The fleet of scripts/pipeline.sh: instance, scenario, price per GPU-hour of its model in
# deploy/pricing/list-prices.yaml (the MI300X is priced by its "*" placeholder).
FLEET = [("gpu-node-01", "h100-8x-three-teams.yaml", 6.88), ("gpu-node-02", "faults-demo.yaml", 6.88),
         ("gpu-node-03", "mig-h100.yaml", 6.88), ("gpu-node-04", "mi300x-8x-three-teams.yaml", 1.00)]
DAYS = 30
FIRST_TABLE_SECONDS = 60  # a month of chargeback within 60 s of the start, on 2 cores

PIPELINE = os.path.join(SOURCE_DIR, "scripts", "pipeline.sh")


def processes_mentioning(text):
    """PIDs of live processes whose command line contains `text`."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if text.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def tail(path, lines=30):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError as e:
        return "(%s)" % e


def consecutive_free_ports(n):
    """A first port with the n - 1 after it free too: the fleet's agents listen on consecutive ports."""
    import socket
    for _ in range(50):
        base = free_port()
        socks = []
        try:
            for p in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise AssertionError("no %d consecutive free ports" % n)


def month_truth(nodes):
    """{project: (allocated GPU-hours, USD)} over the fleet's 30 days: each node plays its scenario
    back to back, so a project's month is (30 d / the play) times its usage in one play
    (`gpumeter sim truth`), priced at its node's model."""
    out = {}
    for _, scenario, price in nodes:
        path = os.path.join(SOURCE_DIR, "deploy", "scenarios", scenario)
        # One play: `sim truth` runs to the scenario's duration by default.
        truth = json.loads(subprocess.run([BIN, "sim", "truth", "--scenario", path, "--format", "json"], check=True,
                                          capture_output=True, text=True).stdout)
        play = truth["to_seconds"]
        if truth.get("mig"):
            continue  # its pods' projects come from namespaces; checked through the totals below
        plays = DAYS * 86400 / play
        for job in truth["jobs"]:
            project = job.get("env", {}).get("GPUMETER_PROJECT")
            if project is None:
                continue
            hours, usd = out.get(project, (0.0, 0.0))
            h = job["allocated_seconds"] * plays / 3600
            out[project] = (hours + h, usd + h * price)
    return out


def table_rows(text):
    """{project: [cells]} of the first chargeback table in `text`, and its header line."""
    start = text.index("chargeback over")
    header = re.search(r"^gpumeter report .*\((\S+ d)\)$", text[start:], re.M)
    rows = {}
    block = text[start:text.index("reconciliation:", start)]
    # The table has a MIG SLICE GPU-H column after ALLOC GPU-H, and MIG SM-ACTIVE GPU-H after
    # BUSY GPU-H, when some row held a MIG slice.
    mig = "MIG SLICE GPU-H" in block
    for line in block.splitlines():
        cells = line.split()
        if len(cells) == 12 + 2 * mig and re.match(r"[\d,]+\.\d\d$", cells[1]):
            if mig:
                del cells[4]  # the SM activity, then the slice hours
                del cells[2]
            rows[cells[0]] = [float(c.replace(",", "")) if re.match(r"[\d,.]+$", c) else c for c in cells[1:]]
    return rows, header.group(1) if header else None


def get_json(url):
    status, _, body = http_get(url)
    if status != 200:
        raise AssertionError("GET %s: %d %r" % (url, status, body[:200]))
    return json.loads(body)


def counter_decreases(openmetrics):
    """[(series, value before, value after)] for each counter sample below the one before it."""
    last, out = {}, []
    for line in openmetrics.splitlines():
        m = re.match(r"(\w+_total\{.*\}) (\S+) \d+$", line)
        if not m:
            continue
        v = float(m.group(2))
        if v < last.get(m.group(1), v):
            out.append((m.group(1), last[m.group(1)], v))
        last[m.group(1)] = v
    return out


class HistoryCounters(unittest.TestCase):
    """scripts/history.py writes counters that never go down: each offset's truth is computed on
    its own, and two neighbours could differ by rounding the wrong way (91 decreases of about
    2e-12 on a scenario with loads in 2% steps), which the report reads as data no ledger wrote."""

    def test_counters_never_go_down(self):
        tmp = tempfile.mkdtemp(prefix="gpumeter-history-")
        self.addCleanup(shutil.rmtree, tmp)
        # The three teams' node with every job's load stepping by about 2% at its own pace.
        with open(os.path.join(SOURCE_DIR, "deploy", "scenarios", "h100-8x-three-teams.yaml")) as f:
            scenario = yaml.safe_load(f)
        for i, job in enumerate(scenario["jobs"]):
            job["utilization"] = {"pattern": "ramp", "from": 0.02, "to": 0.98, "over": "%dm" % (7 + i),
                                  "step": "%ds" % (7 + 2 * i)}
        path = os.path.join(tmp, "steps.yaml")
        with open(path, "w") as f:
            yaml.safe_dump(scenario, f)
        out = os.path.join(tmp, "history.om")
        subprocess.run([sys.executable, os.path.join(SOURCE_DIR, "scripts", "history.py"), "--gpumeter", BIN,
                        "--end", "1764000000", "--days", "1", "--interval", "60", "--out", out,
                        "--node", "n1=" + path], check=True, capture_output=True, timeout=300)
        with open(out) as f:
            text = f.read()
        self.assertIn("gpu_busy_seconds_total{", text)
        self.assertEqual(counter_decreases(text), [])


class Run:
    """scripts/pipeline.sh in a session of its own, its output collected in a thread."""

    def __init__(self, state_dir, ports):
        self.ports = ports
        self.started = time.time()
        env = dict(os.environ, GPUMETER_BIN=BIN, GPUMETER_STATE_DIR=state_dir, GPUMETER_SIMULATE="1",
                   GPUMETER_LISTEN_ADDRESS="127.0.0.1:%d" % ports["agent"],
                   GPUMETER_PROMETHEUS_PORT=str(ports["prometheus"]),
                   GPUMETER_ALERTMANAGER_PORT=str(ports["alertmanager"]),
                   GPUMETER_VICTORIAMETRICS_PORT=str(ports["victoriametrics"]),
                   GPUMETER_REPORT_INTERVAL="4", GPUMETER_SCRAPE_INTERVAL="2s")
        self.proc = subprocess.Popen(["bash", PIPELINE], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     start_new_session=True, text=True)
        self.lines = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line)

    def output(self):
        return "".join(self.lines)

    def interrupt(self):
        """Ctrl-C: SIGINT to the script's process group, as a terminal sends it."""
        os.killpg(self.proc.pid, signal.SIGINT)
        rc = self.proc.wait(timeout=90)
        self.reader.join(timeout=10)
        return rc

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


class Pipeline(unittest.TestCase):
    def setUp(self):
        self.state_dir = tempfile.mkdtemp(prefix="gpumeter-pipeline-")
        self.addCleanup(self.cleanup)
        self.runs = []

    def cleanup(self):
        for run in self.runs:
            run.kill()
        for pid in processes_mentioning(self.state_dir):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.state_dir, ignore_errors=True)

    def start(self):
        ports = {name: free_port() for name in ("prometheus", "alertmanager", "victoriametrics")}
        ports["agent"] = consecutive_free_ports(len(FLEET))
        run = Run(self.state_dir, ports)
        self.runs.append(run)
        return run

    def check_running(self, run):
        ports = run.ports
        prom = "http://127.0.0.1:%d" % ports["prometheus"]

        def report_with_rows():
            if run.proc.poll() is not None:
                raise AssertionError("pipeline exited early (%s):\n%s" % (run.proc.returncode, run.output()))
            out = run.output()
            # The alerts follow each table: wait for both, else the output may end in between.
            return (re.search(r"^nlp-pretraining\s+\d", out, re.M) and "reconciliation: owners" in out
                    and "firing alerts (Alertmanager)" in out)
        wait_until(report_with_rows, 120, interval=0.5,
                   what="a chargeback table with the simulated projects, and the firing alerts")
        out = run.output()
        for name, port in ports.items():
            self.assertIn(":%d/" % port, out, "the %s URL is printed" % name)
        # Prometheus scrapes the agent, loaded the three rule files, and knows the Alertmanager.
        self.check_every_node_scraped(run, prom)
        groups = {g["name"] for g in get_json(prom + "/api/v1/rules")["data"]["groups"]}
        self.assertTrue({"gpumeter.cost", "gpumeter.budget", "gpumeter.gpu.memory", "gpumeter.agent"} <= groups, groups)
        want = ["http://127.0.0.1:%d/api/v2/alerts" % ports["alertmanager"]]
        wait_until(lambda: [m["url"] for m in get_json(prom + "/api/v1/alertmanagers")["data"]["activeAlertmanagers"]]
                   == want, 30, what="Prometheus sending to the Alertmanager")
        # Ready, as it says itself; on a loaded machine its listener can reset the first probe.
        def alertmanager_ready():
            try:
                return http_get("http://127.0.0.1:%d/-/ready" % ports["alertmanager"])[0] == 200
            except (OSError, http.client.HTTPException):
                return False
        wait_until(alertmanager_ready, 30, what="the Alertmanager ready")
        # VictoriaMetrics receives the agent's series and the recorded cost rates through remote_write.
        vm = "http://127.0.0.1:%d" % ports["victoriametrics"]

        def in_vm(metric):
            return get_json(vm + "/api/v1/series?" + urllib.parse.urlencode({"match[]": metric}))["data"]
        wait_until(lambda: in_vm("gpu_allocated_seconds_total") and in_vm("gpumeter:cost_per_hour:by_project"), 60,
                   what="remote_write into VictoriaMetrics")
        self.assertTrue(all(s.get("cluster") == "local" for s in in_vm("gpu_up")))

    def check_every_node_scraped(self, run, prom):
        """Each node of the fleet, and no other, answers a scrape of Prometheus's. A node counts once
        one scrape of it succeeded: on a loaded machine a single scrape may run past its 2 s timeout."""
        nodes = sorted(name for name, _, _ in self.fleet(run))
        seen, last_error = set(), {}

        def scraped():
            targets = [t for t in get_json(prom + "/api/v1/targets?state=active")["data"]["activeTargets"]
                       if t["labels"].get("job") == "gpumeter"]
            for t in targets:
                instance = t["labels"]["instance"]
                if t["health"] == "up":
                    seen.add(instance)
                else:
                    last_error[instance] = t.get("lastError", "")
            unknown = {t["labels"]["instance"] for t in targets} - set(nodes)
            self.assertFalse(unknown, "Prometheus scrapes targets outside the fleet")
            return sorted(seen) == nodes
        try:
            wait_until(scraped, 60, interval=0.5, what="every node scraped")
        except AssertionError:
            logs = os.path.join(self.state_dir, "logs")
            detail = "".join("\n-- %s: last error %r; log:\n%s" % (
                name, last_error.get(name), tail(os.path.join(logs, name + ".log"))) for name in nodes if name not in seen)
            raise AssertionError("nodes never scraped: %s%s" % (sorted(set(nodes) - seen), detail))

    def fleet(self, run):
        """The nodes the run started: the AMD node needs root and ROCm SMI, and says so when it is left out."""
        out = run.output()
        return FLEET[:3] if "(without the AMD node:" in out else FLEET

    def check_month(self, run):
        """Within 60 s of the start: a month's chargeback across the projects with the truth's
        totals, priced, and the HTML report's path; then the month's alerts in Prometheus."""
        def first_table():
            if run.proc.poll() is not None:
                raise AssertionError("pipeline exited early (%s):\n%s" % (run.proc.returncode, run.output()))
            return "== HTML report: " in run.output()
        wait_until(first_table, FIRST_TABLE_SECONDS + 30, interval=0.2, what="the first table and the HTML report")
        elapsed = time.time() - run.started
        print("first table and HTML report %.1f s after the start" % elapsed)  # shown in the test log
        self.assertLessEqual(elapsed, FIRST_TABLE_SECONDS, run.output())
        out = run.output()
        self.assertIn("history: backfilled into", out)
        rows, period = table_rows(out)
        self.assertEqual(period, "30 d", out)
        want = month_truth(self.fleet(run))
        self.assertGreaterEqual(len([p for p in want if p in rows]), 3, rows)
        for project, (hours, usd) in want.items():
            with self.subTest(project=project):
                self.assertIn(project, rows, out)
                alloc, total_usd = rows[project][0], rows[project][9]
                # The live minute adds at most 8 GPUs x 60 s to a project; the rest is the history.
                self.assertAlmostEqual(alloc, hours, delta=max(0.3, hours * 1e-4), msg=out)
                self.assertAlmostEqual(total_usd, usd, delta=max(3.0, usd * 1e-4), msg=out)
        # The report's own check: every covered GPU-hour is an owner's or idle.
        self.assertRegex(out, r"reconciliation: owners [\d,.]+ \+ idle [\d,.]+ = [\d,.]+ GPU-h; covered by the ledger [\d,.]+ GPU-h: ok")
        # The HTML report: its path is printed, and headless Chromium renders it, charts and rows.
        path = re.search(r"^== HTML report: (\S+)", out, re.M).group(1)
        self.assertTrue(path.startswith(self.state_dir), path)
        dom = chromium(["--dump-dom", "file://" + path])
        for chart in ("chart-cost", "chart-timeline"):
            self.assertIn('id="%s"' % chart, dom)
        for project in want:
            self.assertIn(project, dom)
        # The alerts of the month: the faults node's Xids, one a day, in ALERTS over the 30 days.
        prom = "http://127.0.0.1:%d" % run.ports["prometheus"]
        query = 'count_over_time(ALERTS{alertname="GpuXidCritical",instance="gpu-node-02",xid="79"}[31d])'

        def alerts():
            r = get_json(prom + "/api/v1/query?" + urllib.parse.urlencode({"query": query}))["data"]["result"]
            return r
        result = wait_until(alerts, 90, interval=2, what="the history's alerts in Prometheus")
        # An evaluation after each day's Xid 79, and one at the series' first sample (a new Xid
        # series is born at 1 in the rule's eyes).
        self.assertEqual(result[0]["value"][1], str(DAYS + 1), out)
        self.assertIn("fired: GpuXidCritical", run.output())

    def check_stopped(self, run):
        rc = run.interrupt()
        self.assertEqual(rc, 130, run.output())
        self.assertIn("== stopped", run.output())
        self.assertEqual(processes_mentioning(self.state_dir), [], "processes left behind")
        for name, port in run.ports.items():
            with self.subTest(port=name):
                probe = subprocess.run(["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/%d" % port], capture_output=True)
                self.assertNotEqual(probe.returncode, 0, "%s still listens" % name)

    def test_runs_stops_on_ctrl_c_and_runs_again(self):
        first = self.start()
        self.check_month(first)
        self.check_running(first)
        first_end = time.time()
        self.check_stopped(first)

        second = self.start()
        self.check_running(second)
        self.assertIn("history: already backfilled", second.output())
        # The first run's samples are still in Prometheus.
        prom = "http://127.0.0.1:%d" % second.ports["prometheus"]
        before = get_json(prom + "/api/v1/query?" + urllib.parse.urlencode(
            {"query": 'up{job="gpumeter"}', "time": "%.3f" % (first_end - 2)}))["data"]["result"]
        self.assertTrue(before, "Prometheus lost the first run's data")
        self.check_stopped(second)

    def test_a_busy_port_is_a_clear_error(self):
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen()
            busy = s.getsockname()[1]
            env = dict(os.environ, GPUMETER_BIN=BIN, GPUMETER_STATE_DIR=self.state_dir, GPUMETER_SIMULATE="1",
                       GPUMETER_LISTEN_ADDRESS="127.0.0.1:%d" % free_port(), GPUMETER_PROMETHEUS_PORT=str(busy))
            r = subprocess.run(["bash", PIPELINE], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("port %d is in use" % busy, r.stderr)
        self.assertEqual(processes_mentioning(self.state_dir), [])


if __name__ == "__main__":
    unittest.main()
