"""The README's main command runs scripts/pipeline.sh: the agent on the simulated node, a real
Prometheus with the cost, budget and alert rules, a real Alertmanager and a real VictoriaMetrics
fed by remote_write, and a chargeback table from `gpumeter report` at each interval. Ctrl-C
(SIGINT to the script) stops every process it started, and a second run on the same state
directory works and keeps the first run's data."""
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.parse

from harness import BIN, SOURCE_DIR, free_port, http_get, wait_until

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


def get_json(url):
    status, _, body = http_get(url)
    if status != 200:
        raise AssertionError("GET %s: %d %r" % (url, status, body[:200]))
    return json.loads(body)


class Run:
    """scripts/pipeline.sh in a session of its own, its output collected in a thread."""

    def __init__(self, state_dir, ports):
        self.ports = ports
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
        ports = {name: free_port() for name in ("agent", "prometheus", "alertmanager", "victoriametrics")}
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
        up = get_json(prom + "/api/v1/query?query=" + urllib.parse.quote('up{job="gpumeter"}'))["data"]["result"]
        self.assertEqual([r["value"][1] for r in up], ["1"])
        groups = {g["name"] for g in get_json(prom + "/api/v1/rules")["data"]["groups"]}
        self.assertTrue({"gpumeter.cost", "gpumeter.budget", "gpumeter.gpu.memory", "gpumeter.agent"} <= groups, groups)
        want = ["http://127.0.0.1:%d/api/v2/alerts" % ports["alertmanager"]]
        wait_until(lambda: [m["url"] for m in get_json(prom + "/api/v1/alertmanagers")["data"]["activeAlertmanagers"]]
                   == want, 30, what="Prometheus sending to the Alertmanager")
        self.assertEqual(http_get("http://127.0.0.1:%d/-/ready" % ports["alertmanager"])[0], 200)
        # VictoriaMetrics receives the agent's series and the recorded cost rates through remote_write.
        vm = "http://127.0.0.1:%d" % ports["victoriametrics"]

        def in_vm(metric):
            return get_json(vm + "/api/v1/series?" + urllib.parse.urlencode({"match[]": metric}))["data"]
        wait_until(lambda: in_vm("gpu_allocated_seconds_total") and in_vm("gpumeter:cost_per_hour:by_project"), 60,
                   what="remote_write into VictoriaMetrics")
        self.assertTrue(all(s.get("cluster") == "local" for s in in_vm("gpu_up")))

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
        self.check_running(first)
        first_end = time.time()
        self.check_stopped(first)

        second = self.start()
        self.check_running(second)
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
