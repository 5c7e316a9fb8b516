"""Shared helpers for integration tests: real processes on loopback ports, always stopped.

Paths come from the environment set by CTest (see CMakeLists.txt in this folder):
GPUMETER_BIN, GPUMETER_SIM_LIB, GPUMETER_SOURCE_DIR.

Every temporary file and directory of a test process, and of the processes it starts (TMPDIR),
goes in one directory that is removed when the test process exits. GPUMETER_KEEP_TEST_DIRS=1
keeps it, to read the logs of a failed run; its path is printed then.
"""
import atexit
import gzip
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request


def _own_temporary_directory():
    inherited = os.environ.get("TMPDIR", "")
    if inherited and os.environ.get("GPUMETER_HARNESS_TMPDIR") == inherited:
        # A process a test started that imports the harness too (bench/soak.py from test_soak):
        # the test's directory is already its own, and one more level would push unix socket
        # paths (the simulated kubelet's) past their 107 bytes.
        tempfile.tempdir = inherited
        return
    path = tempfile.mkdtemp(prefix="gpumeter-test-")
    os.environ["GPUMETER_HARNESS_TMPDIR"] = path
    if os.environ.get("GPUMETER_KEEP_TEST_DIRS") == "1":
        atexit.register(lambda: sys.stderr.write("harness: kept %s\n" % path))
    else:
        atexit.register(shutil.rmtree, path, True)
    tempfile.tempdir = path
    os.environ["TMPDIR"] = path


_own_temporary_directory()

BIN = os.environ.get("GPUMETER_BIN", "")
SIM_LIB = os.environ.get("GPUMETER_SIM_LIB", "")
SOURCE_DIR = os.environ.get("GPUMETER_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
SCENARIOS = os.path.join(SOURCE_DIR, "tests", "integration", "scenarios")
DEPLOY_SCENARIOS = os.path.join(SOURCE_DIR, "deploy", "scenarios")


class ScenarioStart:
    """Scenario time 0 at the moment the test chooses. Every simulated peer started with `env`
    (the simulated NVML library in an agent, `sim procfs`, `sim kubelet`, `sim sysfs`) holds
    scenario time at 0 until begin() writes the epoch, so a test starts its peers, waits until
    they are ready, and only then lets the scenario run: however slowly a loaded machine starts
    them, no job starts before they can see it (GPUMETER_SIM_EPOCH_FILE, docs/simulator.md)."""

    def __init__(self):
        self.path = os.path.join(tempfile.mkdtemp(prefix="gpumeter-start-"), "epoch")
        self.env = {"GPUMETER_SIM_EPOCH_FILE": self.path}
        self.epoch = None

    def begin(self):
        """Starts scenario time now; returns the epoch (unix seconds)."""
        if self.epoch is None:
            self.epoch = time.time()
            with open(self.path + ".tmp", "w") as f:
                f.write(repr(self.epoch) + "\n")
            os.rename(self.path + ".tmp", self.path)
        return self.epoch


def sim_env(epoch):
    """The environment that puts a simulated peer on `epoch`: unix seconds, or a ScenarioStart."""
    if isinstance(epoch, ScenarioStart):
        return dict(epoch.env)
    return {"GPUMETER_SIM_EPOCH": repr(epoch)}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Process:
    """A child process with its output captured to a file; stop() is idempotent."""

    def __init__(self, args, env=None, workdir=None, name="proc"):
        self.workdir = workdir or tempfile.mkdtemp(prefix="gpumeter-it-")
        self.log_path = os.path.join(self.workdir, name + ".log")
        self._log = open(self.log_path, "wb")
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, env=full_env,
                                     cwd=self.workdir, start_new_session=True)

    def alive(self):
        return self.proc.poll() is None

    def stop(self, timeout=15):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log.close()
        return self.proc.returncode

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")


def http_get(url, headers=None, timeout=10):
    """Returns (status, headers dict with lower-case keys, body bytes); never raises on HTTP errors."""
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


def wait_until(pred, timeout=30, interval=0.1, what="condition"):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            last = pred()
            if last:
                return last
        except (OSError, ValueError, KeyError) as e:  # not up yet
            last = e
        time.sleep(interval)
    raise AssertionError("timed out after %ss waiting for %s (last: %r)" % (timeout, what, last))


class Agent:
    """`gpumeter serve` on a free port, on the simulator unless nvml_library is given."""

    def __init__(self, scenario=None, extra_args=(), env=None, nvml_library=None, interval="1s", port=None):
        self.port = port or free_port()
        self.base = "http://127.0.0.1:%d" % self.port
        args = [BIN, "serve", "--web.listen-address", "127.0.0.1:%d" % self.port,
                "--collect.interval", interval]
        if scenario:
            args += ["--sim.scenario", scenario]
        if nvml_library:
            args += ["--nvml.library", nvml_library]
        args += list(extra_args)
        # Never the default state file under /var/lib: tests run as root on the host.
        if not any(a == "--ledger.state-file" or a.startswith("--ledger.state-file=") for a in args):
            args += ["--ledger.state-file", ""]
        self.process = Process(args, env=env, name="gpumeter")

    def wait_ready(self, timeout=30):
        def ready():
            if not self.process.alive():
                raise AssertionError("gpumeter exited early:\n" + self.process.log())
            return http_get(self.base + "/-/ready", timeout=2)[0] == 200
        wait_until(ready, timeout, what="gpumeter /-/ready")

    def wait_healthy(self, timeout=30):
        def healthy():
            if not self.process.alive():
                raise AssertionError("gpumeter exited early:\n" + self.process.log())
            return http_get(self.base + "/-/healthy", timeout=2)[0] == 200
        wait_until(healthy, timeout, what="gpumeter /-/healthy")

    def metrics(self, headers=None):
        status, hdrs, body = http_get(self.base + "/metrics", headers=headers)
        if status != 200:
            raise AssertionError("GET /metrics: %d %r" % (status, body[:200]))
        if hdrs.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        return hdrs, body.decode("utf-8")

    def stop(self):
        return self.process.stop()


def parse_text(body):
    """Prometheus text format to {(name, frozenset(labels.items())): value} via prometheus_client."""
    from prometheus_client.parser import text_string_to_metric_families
    out = {}
    for fam in text_string_to_metric_families(body):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def sample(samples, name, **labels):
    """The value of the one sample of `name` whose labels include `labels`."""
    found = [v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= set(ls)]
    if len(found) != 1:
        raise KeyError("%s%r: %d matches" % (name, labels, len(found)))
    return found[0]


def sim_truth(scenario, t_from, t_to):
    out = subprocess.run([BIN, "sim", "truth", "--scenario", scenario, "--from", str(t_from), "--to", str(t_to),
                          "--format", "json"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


# Ledger counter -> field of `gpumeter sim truth`'s jobs.
COUNTERS = {
    "gpu_allocated_seconds_total": "allocated_seconds",
    "gpu_busy_seconds_total": "busy_seconds",
    "gpu_memory_byte_seconds_total": "memory_byte_seconds",
    "gpu_attributed_energy_joules_total": "energy_joules",
}


# A process's start and end are known to within one of the driver's utilization sample periods
# (its per-process samples are that far apart, off the device grid; docs/ledger.md), so each job
# edge may move up to that much of the job's counters between it and its neighbours.
EDGE_SECONDS = 0.2


def owner_edges(truth):
    """How many job edges (starts and ends) each owner of expected_owners(truth) has."""
    users = {uid: name for name, uid in truth.get("users", {}).items()}
    out = {}
    for j in truth["jobs"]:
        env, k8s = j.get("env", {}), j.get("kubernetes", {})
        key = (str(j["gpu"]), env.get("GPUMETER_PROJECT", "unknown"), users.get(j["uid"], str(j["uid"])),
               k8s.get("namespace", ""), k8s.get("pod", ""), env.get("SLURM_JOB_ID", ""))
        out[key] = out.get(key, 0) + 2
    return out


def allowed_deviation(value, allocated, edges, tolerance, edge_seconds=EDGE_SECONDS):
    """The bound on an owner's counter: a relative tolerance, plus what its edges may move at
    the counter's rate while the owner was there (`edge_seconds` each)."""
    rate = value / allocated if allocated > 0 else 0.0
    return tolerance * abs(value) + edges * edge_seconds * rate + 1e-6


def expected_owners(truth, counters=COUNTERS):
    """Truth per (gpu, project, user, namespace, pod, hpc_job), summed over the jobs of an owner."""
    users = {uid: name for name, uid in truth.get("users", {}).items()}
    out = {}
    for j in truth["jobs"]:
        env = j.get("env", {})
        k8s = j.get("kubernetes", {})
        hpc = env.get("SLURM_JOB_ID", "")
        key = (str(j["gpu"]), env.get("GPUMETER_PROJECT", "unknown"), users.get(j["uid"], str(j["uid"])),
               k8s.get("namespace", ""), k8s.get("pod", ""), hpc)
        acc = out.setdefault(key, {f: 0.0 for f in counters.values()})
        for f in counters.values():
            acc[f] += j[f]
    return out


RESERVED_PROJECTS = ("__idle__", "__unattributed__")


def scraped_owners(prom, at, counters=COUNTERS):
    out = {}
    for metric, field in counters.items():
        for r in prom.query(metric, at=at):
            m = r["metric"]
            key = (m["gpu"], m["project"], m.get("user", ""), m.get("namespace", ""), m.get("pod", ""),
                   m.get("hpc_job", ""))
            acc = out.setdefault(key, {})  # containers of one owner (Docker ids) are summed
            acc[field] = acc.get(field, 0.0) + float(r["value"][1])
    return out


IDLE_ENERGY = ("gpu_attributed_idle_energy_joules_total", "idle_power_energy_joules")


def check_ledger_against_truth(test, prom, scenario, truth_to, tolerance, idle_energy=False):
    """The ledger's counters, read back through Prometheus, against `gpumeter sim truth` (the
    process policy) over [0, truth_to): each owner within `tolerance` plus what its job edges may
    move, no unexpected owner, and the per-GPU invariants. With `idle_energy` (the agent's
    ledger.idle_power_watts is the model's idle power), each owner's idle energy too, and per GPU
    its owners' idle and active energy add up to the GPU's. Returns (truth, scraped)."""
    truth = sim_truth(scenario, 0, truth_to)
    counters = dict(COUNTERS, **dict([IDLE_ENERGY])) if idle_energy else COUNTERS
    want = expected_owners(truth, counters)
    # Every query evaluates at one instant, so all figures come from the same scrape.
    at = time.time() - 1.5
    got = scraped_owners(prom, at, counters)
    worst = max((abs(got.get(k, {}).get(f, 0.0) - v) / v, "%s %s" % (f, k))
                for k, fields in want.items() for f, v in fields.items() if v > 0)
    print("largest relative deviation from the truth: %.3g (%s)" % worst)  # shown in the test log
    edges = owner_edges(truth)
    for key, fields in want.items():
        test.assertIn(key, got, "owner %r missing; scraped owners: %r" % (key, sorted(got)))
        alloc = fields["allocated_seconds"]
        for field, value in fields.items():
            measured = got[key].get(field)
            test.assertIsNotNone(measured, "%s of %r" % (field, key))
            test.assertLessEqual(abs(measured - value), allowed_deviation(value, alloc, edges[key], tolerance),
                                 "%s of %r: ledger %.6g, truth %.6g" % (field, key, measured, value))
    for key, fields in got.items():
        if key[1] in RESERVED_PROJECTS:
            continue
        test.assertIn(key, want, "unexpected owner %r" % (key,))
    # Invariants per GPU: owners (idle included) cover exactly the integrated time, and the
    # busy time adds up to the GPU's.
    covered = {r["metric"]["gpu"]: float(r["value"][1])
               for r in prom.query("gpumeter_ledger_covered_seconds_total", at=at)}
    for g in truth["gpus"]:
        gpu = str(g["gpu"])
        alloc = sum(v.get("allocated_seconds", 0) for k, v in got.items() if k[0] == gpu)
        busy = sum(v.get("busy_seconds", 0) for k, v in got.items() if k[0] == gpu)
        test.assertAlmostEqual(alloc, covered[gpu], delta=1e-9 * covered[gpu] + 1e-9)
        test.assertLessEqual(abs(busy - g["busy_seconds"]), tolerance * g["busy_seconds"] + 1e-6,
                             "gpu %s busy: ledger %.6g, truth %.6g" % (gpu, busy, g["busy_seconds"]))
        if idle_energy:
            field = IDLE_ENERGY[1]
            for k, v in got.items():
                if k[0] == gpu:
                    test.assertLessEqual(v.get(field, 0), v.get("energy_joules", 0) * (1 + 1e-12), k)
    return truth, got


class Prometheus:
    """A real Prometheus from Debian on a free port with its own data directory."""

    def __init__(self, targets=(), scrape_interval="1s", extra_config="", job_config="", flags=(), config=None,
                 external_labels=None):
        """Scrapes `targets` as job gpumeter, with `external_labels` (a dict) on what it sends, or,
        given `config` (a dict), runs that whole configuration instead."""
        self.port = free_port()
        self.base = "http://127.0.0.1:%d" % self.port
        self.dir = tempfile.mkdtemp(prefix="gpumeter-prom-")
        cfg = os.path.join(self.dir, "prometheus.yml")
        with open(cfg, "w") as f:
            if config is not None:
                json.dump(config, f)  # JSON is YAML
            else:
                f.write("global:\n  scrape_interval: %s\n  evaluation_interval: %s\n"
                        % (scrape_interval, scrape_interval))
                if external_labels:
                    f.write("  external_labels: %s\n" % json.dumps(external_labels))
                f.write("scrape_configs:\n  - job_name: gpumeter\n%s    static_configs:\n      - targets: [%s]\n"
                        % (job_config, ", ".join("'%s'" % t for t in targets)))
                f.write(extra_config)
        self.process = Process(["prometheus", "--config.file=" + cfg, "--storage.tsdb.path=" + self.dir + "/data",
                                "--web.listen-address=127.0.0.1:%d" % self.port, "--log.level=warn"] + list(flags),
                               workdir=self.dir, name="prometheus")
        try:
            wait_until(lambda: http_get(self.base + "/-/ready", timeout=2)[0] == 200, 60, what="prometheus ready")
        except AssertionError:
            self.process.stop()
            raise AssertionError("prometheus did not become ready:\n" + self.process.log()[-3000:])

    def query(self, expr, at=None):
        params = {"query": expr}
        if at is not None:
            params["time"] = repr(at)
        status, _, body = http_get(self.base + "/api/v1/query?" + urllib.parse.urlencode(params))
        doc = json.loads(body)
        if status != 200 or doc.get("status") != "success":
            raise AssertionError("query %r failed: %s" % (expr, body[:300]))
        return doc["data"]["result"]

    def targets(self):
        _, _, body = http_get(self.base + "/api/v1/targets")
        return json.loads(body)["data"]["activeTargets"]

    def stop(self):
        return self.process.stop()


def serve_backfilled(test_class, openmetrics_text, scrape_interval, retention="30d", block_flags=()):
    """A Prometheus of the test class's own whose only data is `openmetrics_text` (samples with
    their timestamps), backfilled by promtool into test_class.tmp: sets test_class.url and
    test_class.prom, stopped at class cleanup."""
    om = os.path.join(test_class.tmp, "history.om")
    with open(om, "w") as f:
        f.write(openmetrics_text)
    blocks = os.path.join(test_class.tmp, "data")
    os.makedirs(blocks, exist_ok=True)
    r = subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", "-q"] + list(block_flags) + [om, blocks],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise AssertionError("promtool: " + r.stderr[-2000:])
    cfg = os.path.join(test_class.tmp, "prometheus.yml")
    with open(cfg, "w") as f:
        f.write("global:\n  scrape_interval: %ds\n" % scrape_interval)
    port = free_port()
    test_class.url = "http://127.0.0.1:%d" % port
    test_class.prom = Process(["prometheus", "--config.file=" + cfg, "--storage.tsdb.path=" + blocks,
                               "--storage.tsdb.retention.time=" + retention, "--web.listen-address=127.0.0.1:%d" % port,
                               "--log.level=warn"], workdir=test_class.tmp, name="prometheus")
    test_class.addClassCleanup(test_class.prom.stop)
    wait_until(lambda: http_get(test_class.url + "/-/ready", timeout=2)[0] == 200, 60, what="prometheus ready")


class VictoriaMetrics:
    """A real single-node VictoriaMetrics from Debian on a free port with its own data directory,
    started with `flags` added. Queries see data up to 1 s old (the default hides the last 30 s)."""

    def __init__(self, flags=()):
        self.port = free_port()
        self.base = "http://127.0.0.1:%d" % self.port
        self.dir = tempfile.mkdtemp(prefix="gpumeter-vm-")
        self.process = Process(["victoria-metrics", "-storageDataPath=" + self.dir + "/data", "-retentionPeriod=100y",
                                "-httpListenAddr=127.0.0.1:%d" % self.port, "-search.latencyOffset=1s",
                                "-loggerLevel=WARN"] + list(flags), workdir=self.dir, name="victoria-metrics")
        wait_until(lambda: http_get(self.base + "/health", timeout=2)[0] == 200, 60, what="victoria-metrics ready")

    def write_url(self):
        return self.base + "/api/v1/write"

    def flush(self):
        http_get(self.base + "/internal/force_flush")

    def stop(self):
        return self.process.stop()


def report(*args, check=True):
    """Runs `gpumeter report` with the given arguments; returns the CompletedProcess."""
    out = subprocess.run([BIN, "report"] + [str(a) for a in args], capture_output=True, text=True, timeout=300)
    if check and out.returncode != 0:
        raise AssertionError("gpumeter report %r exited %d:\n%s" % (args, out.returncode, out.stderr[-3000:]))
    return out


def report_json(*args):
    """`gpumeter report ... --format json` parsed."""
    return json.loads(report(*(list(args) + ["--format", "json"])).stdout)


class AgentTestCase(unittest.TestCase):
    """Stops every process a test started and prints the tail of its log."""

    def setUp(self):
        self._procs = []

    def track(self, p):
        self._procs.append(p)
        return p

    def failures_so_far(self):
        """This test's failures and errors as unittest formatted them, or None when they cannot
        be known (unittest keeps them in its private outcome, filled as each part of a test
        fails)."""
        result = getattr(getattr(self, "_outcome", None), "result", None)
        if result is None or not hasattr(result, "failures"):
            return None
        return [text for test, text in result.failures + result.errors
                if getattr(test, "test_case", test) is self]

    def tearDown(self):
        # Every process is stopped; a failed test then prints why, and the tails of their logs.
        # A test that passed prints none: CTest shows the output of a file's tests when one of
        # them fails, and an excerpt of it may be all a reader gets.
        failures = self.failures_so_far()
        if failures:
            print("---- %s failed ----\n%s" % (self.id(), "\n".join(failures)))
        for p in reversed(self._procs):
            p.stop()
            if failures is None or failures:
                proc = p.process if hasattr(p, "process") else p
                print("---- tail of %s ----\n%s" % (proc.log_path, proc.log()[-3000:]))


class SimNode:
    """The host side of a simulated node: `gpumeter sim procfs --follow` and, optionally,
    `gpumeter sim kubelet`, both on the scenario clock given by `epoch` (unix seconds, or a
    ScenarioStart)."""

    def __init__(self, scenario, epoch, kubelet=True, lead=None, slurm_cgroup=None):
        self.dir = tempfile.mkdtemp(prefix="gpumeter-node-")
        self.root = os.path.join(self.dir, "root")
        self.procfs = os.path.join(self.root, "proc")
        self.socket = os.path.join(self.dir, "kubelet.sock") if kubelet else ""
        env = sim_env(epoch)
        lead_args = ["--lead", lead] if lead else []  # scenario time, e.g. "240s"
        # `slurm_cgroup`: the Slurm jobs' cgroup layout to write (v1, v1-whitelist, v2, v2-sluid), or none.
        cgroup_args = ["--slurm-cgroup", slurm_cgroup] if slurm_cgroup else []
        self.procs = [Process([BIN, "sim", "procfs", "--scenario", scenario, "--out", self.root, "--follow"]
                              + lead_args + cgroup_args, env=env, workdir=self.dir, name="sim-procfs")]
        if kubelet:
            self.procs.append(Process([BIN, "sim", "kubelet", "--scenario", scenario, "--socket", self.socket]
                                      + lead_args, env=env, workdir=self.dir, name="sim-kubelet"))
        wait_until(lambda: os.path.exists(os.path.join(self.root, "etc", "passwd")), 30, what="sim procfs")
        if kubelet:
            wait_until(lambda: os.path.exists(self.socket), 30, what="sim kubelet socket")
        self.log_path = self.procs[0].log_path
        self.process = self.procs[0]

    # The HPC job mapping directory `sim procfs` keeps for the scenario's Slurm allocations.
    @property
    def hpc_jobs_dir(self):
        return os.path.join(self.root, "run", "gpumeter-hpc-jobs")

    def config(self, text="", attribution="", refresh="1s", environment=()):
        """Writes an agent config naming this node's kubelet (refreshed every `refresh`), with
        `attribution` (indented lines) added to its attribution section and `environment` to its
        allow-list; returns its path."""
        path = os.path.join(self.dir, "gpumeter.yaml")
        kubelet = "  kubelet:\n    socket: %s\n    refresh_interval: %s\n" % (self.socket or "off", refresh)
        allow = ", ".join(["GPUMETER_PROJECT", "SLURM_JOB_ACCOUNT"] + list(environment))
        with open(path, "w") as f:
            f.write("attribution:\n  environment: [%s]\n" % allow + kubelet + attribution)
            f.write("project:\n  default: unknown\n  rules:\n    - {source: env.GPUMETER_PROJECT}\n")
            f.write(text)
        return path

    def agent_args(self, config_path, state_file):
        return ["--path.procfs", self.procfs, "--path.rootfs", self.root, "--config.file", config_path,
                "--ledger.state-file", state_file]

    def stop(self):
        for p in reversed(self.procs):
            p.stop()
        return 0


# ---- Alertmanager and a webhook sink (tests/integration/test_alertmanager.py) ----------------
import http.server  # noqa: E402  (kept next to the classes that use them)
import threading  # noqa: E402

ALERTMANAGER_BIN = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager") or "prometheus-alertmanager"


class Alertmanager:
    """A real Alertmanager from Debian on a free port, with clustering (gossip) off and its own
    data directory. Give it the configuration's text."""

    def __init__(self, config_text, flags=()):
        self.port = free_port()
        self.base = "http://127.0.0.1:%d" % self.port
        self.dir = tempfile.mkdtemp(prefix="gpumeter-am-")
        self.config_path = os.path.join(self.dir, "alertmanager.yml")
        with open(self.config_path, "w") as f:
            f.write(config_text)
        self.process = Process([ALERTMANAGER_BIN, "--config.file=" + self.config_path,
                                "--storage.path=" + os.path.join(self.dir, "data"),
                                "--web.listen-address=127.0.0.1:%d" % self.port,
                                "--cluster.listen-address=", "--log.level=warn"] + list(flags),
                               workdir=self.dir, name="alertmanager")

        def ready():
            if not self.process.alive():
                raise AssertionError("alertmanager exited early:\n" + self.process.log())
            return http_get(self.base + "/-/ready", timeout=2)[0] == 200
        try:
            wait_until(ready, 60, what="alertmanager ready")
        except AssertionError:
            self.process.stop()
            raise

    def post_alerts(self, alerts):
        """POST /api/v2/alerts with a list of {labels, annotations, startsAt?, endsAt?}."""
        req = urllib.request.Request(self.base + "/api/v2/alerts", data=json.dumps(alerts).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(req, timeout=10) as r:
            if r.status != 200:
                raise AssertionError("POST /api/v2/alerts: %d" % r.status)

    def alerts(self, query=""):
        """GET /api/v2/alerts[?query]: the alerts with their status (state, inhibitedBy, silencedBy)."""
        status, _, body = http_get(self.base + "/api/v2/alerts" + ("?" + query if query else ""))
        if status != 200:
            raise AssertionError("GET /api/v2/alerts: %d %r" % (status, body[:300]))
        return json.loads(body)

    def stop(self):
        return self.process.stop()


class WebhookSink:
    """An HTTP server in a thread of the test that records every JSON POST it receives, as
    Alertmanager's webhook receiver would get them: payloads() returns [(path, document)].
    It has a log (one line per POST), so AgentTestCase.track can print what arrived."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="gpumeter-sink-")
        self.log_path = os.path.join(self.dir, "webhook.log")
        self._received = []
        self._lock = threading.Lock()
        open(self.log_path, "w").close()
        sink = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                try:
                    doc = json.loads(body)
                except ValueError:
                    doc = None
                with sink._lock:
                    sink._received.append((self.path, doc))
                    with open(sink.log_path, "ab") as f:
                        f.write(self.path.encode() + b" " + body.strip() + b"\n")
                self.send_response(200 if doc is not None else 400)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.base = "http://127.0.0.1:%d" % self.port
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()
        self._stopped = False

    def url(self, path="/"):
        return self.base + path

    def payloads(self):
        with self._lock:
            return list(self._received)

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stop(self):
        if not self._stopped:
            self._stopped = True
            self.server.shutdown()
            self.server.server_close()
        return 0
