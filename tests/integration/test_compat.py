"""gpumeter as a drop-in for dcgm-exporter and the nvidia-smi exporters (docs/migrating.md).

One simulated node (scenarios/compat.yaml, with its kubelet and procfs) runs three agents, one
per compat set, all scraped by one real Prometheus over OpenMetrics, as Prometheus scrapes by
default. Every PromQL query of the seed articles (../shared/seeds/, copied below as written) is
evaluated against the agent in the matching set and must return data; the cost formulas must
give the value their article means, from the simulator's truth. The agents run with the default
collectors. A dashboard rebuilt from the public description of Grafana dashboard 12239 must show
data in every panel, and OpenCost's GPU usage query one series per pod's container with its
share. Each set's exposition goes through promtool and the strict OpenMetrics parser, and
dcgm-exporter's own default counters file is accepted."""
import json
import os
import re
import subprocess
import tempfile
import time
import unittest
import urllib.parse

from harness import (Agent, BIN, Prometheus, SCENARIOS, SOURCE_DIR, SimNode, http_get, sim_truth, wait_until)

SCENARIO = os.path.join(SCENARIOS, "compat.yaml")
FIXTURES = os.path.join(SOURCE_DIR, "tests", "fixtures", "dcgm-exporter")
DEFAULT_COUNTERS = os.path.join(FIXTURES, "default-counters.csv")
DASHBOARD_12239 = os.path.join(SOURCE_DIR, "tests", "integration", "dashboards", "dcgm-exporter-12239.json")
CHECK_OPENMETRICS = os.path.join(SOURCE_DIR, "tests", "tools", "check_openmetrics.py")
READY_AT = 12.0  # scenario seconds: every job runs from 3 s; a few scrapes later
GIB = 1024.0 ** 3

# The seed articles' queries, copied as written (whitespace aside).
# 000: a real-time cost rate and a period's bill at 5 USD per fully busy GPU hour, on dcgm-exporter 1.x names.
SEED_000_RATE = """sum by (instance, gpuNumber) (
dcgm_gpu_utilization
* 5 # $5.00 USD (每满载GPU小时成本)
/ 100 # 归一化利用率 (0-1)
/ 3600 # 转换为每秒成本
)"""
SEED_000_TOTAL = """sum_over_time(
(
dcgm_gpu_utilization
* 5
/ 100
/ 3600
)[30d:]
)"""
SEED_000_BY_PROJECT = """sum by (project_id) (
dcgm_gpu_utilization
* 5
/ 100
/ 3600
)"""
# 001: an alert, a trend alert and a join, on the nvidia-smi exporters' names.
SEED_001_ALERT = "nvidia_smi_utilization_gpu_percent > 90"
SEED_001_PREDICT = "predict_linear(nvidia_smi_memory_used_bytes[1h], 30*60) > 24e9"
SEED_001_JOIN = """rate(nvidia_smi_utilization_gpu_percent[5m]) *
on(instance) group_left
avg(rate(training_batch_time_seconds[5m])) by (job)"""
# 002: the framebuffer alerts (GPUMemoryUsageHigh, GPUMemoryUsageCritical), on dcgm-exporter 1.x names.
SEED_002_HIGH = "dcgm_fb_used / dcgm_fb_total > 0.85"
SEED_002_CRITICAL = "dcgm_fb_used / dcgm_fb_total > 0.95"
# promtool's lint findings on dcgm-exporter's own names, which a drop-in must keep: counters
# without _total (as dcgm-exporter's counters files type them), the word counter in
# DCGM_FI_DEV_PCIE_REPLAY_COUNTER, and the gauge dcgm_fb_total that 1.x-era alerts divide by.
CAMEL_CASE = "label names should be written in 'snake_case' not 'camelCase'"
COUNTER_TOTAL = 'counter metrics should have "_total" suffix'
TYPE_IN_NAME = "metric name should not include type 'counter'"
GAUGE_TOTAL = 'non-counter metrics should not have "_total" suffix'
SCHEMA_FINDINGS = {
    "dcgm-exporter": {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION " + COUNTER_TOTAL,
                      "DCGM_FI_DEV_PCIE_REPLAY_COUNTER " + COUNTER_TOTAL,
                      "DCGM_FI_DEV_PCIE_REPLAY_COUNTER " + TYPE_IN_NAME,
                      "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS " + COUNTER_TOTAL,
                      "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL " + COUNTER_TOTAL,
                      "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS " + COUNTER_TOTAL},
    "dcgm-exporter-1.x": {"dcgm_total_energy_consumption " + COUNTER_TOTAL,
                          "dcgm_pcie_replay_counter " + COUNTER_TOTAL,
                          "dcgm_pcie_replay_counter " + TYPE_IN_NAME,
                          "dcgm_fb_total " + GAUGE_TOTAL},
}
# The unit these figures are in: USD per fully busy GPU second.
USD_PER_BUSY_SECOND = 5.0 / 3600


def promtool_findings(body):
    p = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True, text=True, timeout=60)
    return p.returncode, sorted(set(line for line in (p.stdout + p.stderr).splitlines() if line.strip()))


class Compat(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.procs = []
        try:
            cls.start()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def start(cls):
        cls.epoch = time.time() + 1.0
        cls.node = SimNode(SCENARIO, cls.epoch)
        cls.procs.append(cls.node)
        config = cls.node.config()
        cls.agents = {}
        for compat, extra in (("dcgm-exporter", ["--compat.collectors", DEFAULT_COUNTERS]),
                              ("dcgm-exporter-1.x", []), ("nvidia-smi", [])):
            # NODE_NAME names the Hostname label, as dcgm-exporter's DaemonSet sets it.
            # The default collectors: the counters file's fields need no collector flag.
            agent = Agent(scenario=SCENARIO, env={"GPUMETER_SIM_EPOCH": repr(cls.epoch), "NODE_NAME": "gpu-node-07"},
                          extra_args=cls.node.agent_args(config, "") + ["--compat", compat] + extra)
            cls.procs.append(agent)
            cls.agents[compat] = agent
        for agent in cls.agents.values():
            agent.wait_ready()
        cls.instance = {c: "127.0.0.1:%d" % a.port for c, a in cls.agents.items()}
        cls.prom = Prometheus(targets=sorted(cls.instance.values()))
        cls.procs.append(cls.prom)
        # Pods named (the kubelet is read every second) and READY_AT scenario seconds of scrapes.
        wait_until(lambda: time.time() > cls.epoch + READY_AT
                   and cls.prom.query('count(DCGM_FI_DEV_GPU_UTIL{pod!=""})')
                   and cls.prom.query('count(dcgm_gpu_utilization{pod="eval-harness-0"})'), 60,
                   what="pods on the compat series in Prometheus")

    @classmethod
    def tearDownClass(cls):
        for p in reversed(cls.procs):
            p.stop()
            proc = p.process if hasattr(p, "process") else p
            print("---- tail of %s ----\n%s" % (proc.log_path, proc.log()[-3000:]))

    def query(self, expr, at=None):
        return self.prom.query(expr, at)

    def values(self, expr, at=None):
        return {json.dumps(r["metric"], sort_keys=True): float(r["value"][1]) for r in self.query(expr, at)}

    def truth_busy_per_second(self, t_from, t_to):
        """Busy GPU seconds per second over the window, from the simulator's truth."""
        t_from, t_to = round(t_from - self.epoch, 3), round(t_to - self.epoch, 3)  # the flag takes ms
        t = sim_truth(SCENARIO, t_from, t_to)
        return sum(j["busy_seconds"] for j in t["jobs"]) / (t_to - t_from)

    # ---- seed 000: cost from dcgm-exporter 1.x's dcgm_gpu_utilization --------------------------

    def test_seed_000_cost_rate_is_the_truths_busy_seconds_at_five_usd_an_hour(self):
        now = time.time()
        got = self.query(SEED_000_RATE, now)
        self.assertEqual(len(got), 1, got)  # one node; gpuNumber is not a label of dcgm-exporter's
        self.assertEqual(got[0]["metric"], {"instance": self.instance["dcgm-exporter-1.x"]})
        # Constant utilization: the truth over any recent window is the rate at `now`. A shared
        # GPU's pods split its utilization, so the sum over them counts the GPU once.
        want = self.truth_busy_per_second(now - 5, now) * USD_PER_BUSY_SECOND
        self.assertAlmostEqual(float(got[0]["value"][1]), want, delta=want * 0.005)
        by_project = self.query(SEED_000_BY_PROJECT, now)
        self.assertEqual(len(by_project), 1)  # no project_id label anywhere: one sum for the fleet
        self.assertAlmostEqual(float(by_project[0]["value"][1]), want, delta=want * 0.005)

    def test_seed_000_period_bill_is_the_truths_busy_seconds_when_the_step_is_one_second(self):
        # The article's sum_over_time adds one sample of the USD/s rate per subquery step: a bill
        # in USD only when the step (the evaluation interval, 1 s here) is one second; at its
        # assumed 15 s it would be 15 times too small (docs/migrating.md).
        now = time.time()
        got = self.query(SEED_000_TOTAL, now)
        self.assertEqual(len(got), 5, got)  # one per GPU, two for GPU 2's pods: the fleet's bill is their sum
        first = min(float(s[0]) for r in self.query("dcgm_gpu_utilization[5m]", now) for s in r["values"])
        want = self.truth_busy_per_second(first, now) * (now - first) * USD_PER_BUSY_SECOND
        rate = self.truth_busy_per_second(now - 5, now) * USD_PER_BUSY_SECOND
        # Steps fall on whole seconds: one step more or less at each end.
        self.assertAlmostEqual(sum(float(r["value"][1]) for r in got), want, delta=2 * rate + want * 0.005)

    # ---- seed 001: the nvidia-smi exporters' names --------------------------------------------

    def test_seed_001_alerts_find_the_busy_gpu_and_the_full_ones(self):
        busy = self.query(SEED_001_ALERT)
        self.assertEqual([r["metric"]["instance"] for r in busy], [self.instance["nvidia-smi"]])
        self.assertAlmostEqual(float(busy[0]["value"][1]), 95, delta=0.5)
        uuid0 = self.query('DCGM_FI_DEV_GPU_UTIL{gpu="0"}')[0]["metric"]["UUID"]
        self.assertEqual(busy[0]["metric"]["uuid"], uuid0[len("GPU-"):].lower())
        # GPUs 0, 1 and 2 hold 78, 30 and 40 GiB, steady: each predicted above 24 GB.
        predicted = self.query(SEED_001_PREDICT)
        self.assertEqual(len(predicted), 3, predicted)
        self.assertEqual(sorted(round(float(r["value"][1]) / GIB) for r in predicted), [30, 40, 78])

    def test_seed_001_join_cannot_match_as_written(self):
        # The article's join keeps only `job` on its right side (avg ... by (job)) and then
        # matches on `instance`, which that side no longer has; and training_batch_time_seconds
        # is the article's own application metric. So it returns nothing against any exporter.
        # Its GPU side does return data in nvidia-smi mode.
        self.assertEqual(self.query(SEED_001_JOIN), [])
        left = self.query("rate(nvidia_smi_utilization_gpu_percent[5m])")
        self.assertEqual(len(left), 4)

    # ---- seed 002: dcgm-exporter 1.x framebuffer alerts ---------------------------------------

    def test_seed_002_memory_alerts_fire_for_the_full_gpu(self):
        for expr in (SEED_002_HIGH, SEED_002_CRITICAL):
            got = self.query(expr)
            self.assertEqual([(r["metric"]["gpu"], r["metric"]["pod"]) for r in got], [("0", "llm-train-0")], expr)
            self.assertAlmostEqual(float(got[0]["value"][1]), 78 * 1024 / 81559, delta=0.005)

    # ---- seed 003: Grafana dashboard 12239 on dcgm-exporter's names -------------------------

    def label_values(self, metric, label):
        _, _, body = http_get(self.prom.base + "/api/v1/label/%s/values?%s"
                              % (label, urllib.parse.urlencode({"match[]": metric})))
        return json.loads(body)["data"]

    def test_seed_003_dashboard_12239_shows_data_in_every_panel(self):
        with open(DASHBOARD_12239) as f:
            dash = json.load(f)
        variables = {}
        for v in dash["templating"]["list"]:
            m = re.fullmatch(r"label_values\((\w+), (\w+)\)", v["query"])
            values = self.label_values(m.group(1), m.group(2))
            self.assertTrue(values, "variable %s has no values" % v["name"])
            # All, as Grafana writes a multi-value variable: regex-escaped, then escaped for a PromQL string.
            variables[v["name"]] = ("(" + "|".join(re.escape(x) for x in values) + ")").replace("\\", "\\\\")
        self.assertEqual(len(self.label_values("DCGM_FI_DEV_GPU_TEMP", "gpu")), 4)
        self.assertEqual(self.label_values("DCGM_FI_DEV_GPU_TEMP", "instance"), [self.instance["dcgm-exporter"]])
        kinds = set()
        for panel in dash["panels"]:
            for target in panel["targets"]:
                expr = re.sub(r"\$\{(\w+)\}", lambda m: variables[m.group(1)], target["expr"])
                got = self.query(expr)
                self.assertTrue(got, "panel %r: no data for %s" % (panel["title"], expr))
                kinds.add(re.search(r"DCGM_FI_\w+", expr).group(0))
        # Tensor activity comes from GPM, which the simulated H100s serve (docs/nvml-behaviour.md).
        self.assertEqual(kinds, {"DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_SM_CLOCK",
                                 "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"})
        # Every field of the default counters file is served: none is named as not served, and each
        # has a series of every GPU that has what it measures (NVLink: not the PCIe board, GPU 3).
        # Bare metal licenses no vGPU software: its licence status is 0.
        log = self.agents["dcgm-exporter"].process.log()
        self.assertNotIn("dcgm-exporter fields not served", log)
        with open(DEFAULT_COUNTERS) as f:
            fields = [line.split(",")[0].strip() for line in f if line.strip() and not line.startswith("#")]
        fields = [x for x in fields if x != "DCGM_FI_DRIVER_VERSION"]  # the one label line
        self.assertEqual(len(fields), 25)
        for field in fields:
            gpus = ["0", "1", "2"] if field == "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL" else ["0", "1", "2", "3"]
            self.assertEqual(sorted({r["metric"]["gpu"] for r in self.query(field)}), gpus, field)
        self.assertEqual({r["value"][1] for r in self.query("DCGM_FI_DEV_VGPU_LICENSE_STATUS")}, {"0"})

    def test_opencost_gpu_usage_query_gives_each_container_its_share(self):
        # OpenCost's GPU usage query, as it writes it: one series per pod's container.
        got = self.query('avg_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{container!=""}[1m])')
        self.assertEqual(sorted((r["metric"]["gpu"], r["metric"]["pod"], r["metric"]["container"]) for r in got),
                         [("0", "llm-train-0", "trainer"), ("2", "eval-harness-0", "eval"),
                          ("2", "jupyter-bob", "notebook")])
        # The shared GPU's activity split by the pods' SM shares (3:1), as DCGM_FI_DEV_GPU_UTIL is.
        share = {r["metric"]["pod"]: float(r["value"][1]) for r in self.query('DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="2"}')}
        self.assertAlmostEqual(share["jupyter-bob"] / share["eval-harness-0"], 3, delta=0.1)

    def test_no_nvlink_rates_on_gpus_without_nvlink(self):
        # compat.yaml's PCIe H100 (GPU 3) has GPM but no NVLink: GPM's NVLink rates (0 there) are
        # left out; the SXM boards have theirs.
        instance = self.instance["dcgm-exporter"]
        self.assertTrue(self.query('gpu_sm_active_ratio{instance="%s",gpu="3"}' % instance))
        nvlink = self.query('gpu_nvlink_throughput_bytes_per_second{instance="%s"}' % instance)
        self.assertEqual(sorted({r["metric"]["gpu"] for r in nvlink}), ["0", "1", "2"])

    # ---- labels, shared GPUs and the exposition -----------------------------------------------

    def test_dcgm_exporter_labels_and_a_shared_gpus_pods(self):
        series = {r["metric"]["gpu"] + "/" + r["metric"].get("pod", ""): r["metric"]
                  for r in self.query("DCGM_FI_DEV_GPU_UTIL")}
        self.assertEqual(sorted(series), ["0/llm-train-0", "1/", "2/eval-harness-0", "2/jupyter-bob", "3/"])
        m = series["0/llm-train-0"]
        self.assertEqual(m["device"], "nvidia0")
        self.assertEqual(m["modelName"], "NVIDIA H100 80GB HBM3")
        self.assertEqual(m["DCGM_FI_DRIVER_VERSION"], "570.86.15")
        self.assertEqual((m["namespace"], m["container"]), ("team-nlp", "trainer"))
        self.assertEqual(m["Hostname"], "gpu-node-07")
        self.assertTrue(m["pci_bus_id"] and m["UUID"].startswith("GPU-"))
        self.assertEqual(series["1/"]["hpc_job"], "71234")
        # The pods of GPU 2 split its utilization and framebuffer by SM share (3:1) and memory (1:3);
        # summed by UUID, every GPU gives the device's value.
        util = self.values('DCGM_FI_DEV_GPU_UTIL{gpu="2"}')
        self.assertEqual(sorted(round(v) for v in util.values()), [10, 30])
        for expr, device in (("sum by (UUID) (DCGM_FI_DEV_GPU_UTIL)", "gpu_utilization_ratio * 100"),
                             ("sum by (UUID) (DCGM_FI_DEV_FB_USED)", "gpu_memory_used_bytes / 1048576"),
                             ("sum by (UUID) (DCGM_FI_PROF_GR_ENGINE_ACTIVE)", "gpu_graphics_engine_active_ratio")):
            at = time.time()
            got = {json.loads(k)["UUID"]: v for k, v in self.values(expr, at).items()}
            want = {r["metric"]["uuid"]: float(r["value"][1]) for r in self.query(
                '%s and on (uuid) gpu_up{instance="%s"}' % (device, self.instance["dcgm-exporter"]), at)}
            self.assertEqual(sorted(got), sorted(want))
            for uuid, v in want.items():
                self.assertAlmostEqual(got[uuid], v, delta=max(v, 1) * 0.02, msg="%s %s" % (expr, uuid))
        fb = self.values('DCGM_FI_DEV_FB_USED{gpu="2"}')
        self.assertEqual(sorted(round(v / 1024) for v in fb.values()), [10, 30])

    def test_dcgm_exporter_1x_labels_are_the_sets_less_the_counters_files(self):
        # docs/metrics.md: 1.x's series carry the dcgm-exporter set's labels but for those of the
        # counters file's `label` lines, which 1.x's fixed names do not read.
        def label_sets(expr):
            return {frozenset(k for k in r["metric"] if k not in ("__name__", "instance")) for r in self.query(expr)}
        full = label_sets("DCGM_FI_DEV_GPU_UTIL")
        self.assertTrue(full and all("DCGM_FI_DRIVER_VERSION" in labels for labels in full), full)
        self.assertEqual(label_sets("dcgm_gpu_utilization"), {labels - {"DCGM_FI_DRIVER_VERSION"} for labels in full})

    def test_names_reach_prometheus_as_written_over_openmetrics(self):
        # Prometheus asks for OpenMetrics; a counter named without _total keeps its name.
        for name in ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "dcgm_total_energy_consumption",
                     "nvidia_smi_energy_joules_total"):
            self.assertEqual(self.values("count(count by (uuid, UUID) (%s))" % name), {"{}": 4}, name)
        self.assertEqual(self.query("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_total"), [])
        joules = self.values("sum(nvidia_smi_energy_joules_total)")
        millijoules = self.values("sum(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION)")
        self.assertGreater(list(millijoules.values())[0], 900 * list(joules.values())[0])

    def test_every_set_passes_promtool_and_the_openmetrics_parser(self):
        # promlint flags what dcgm-exporter's own schema has and a drop-in must keep, and only
        # that: the camelCase label modelName on every family, and the names in SCHEMA_FINDINGS.
        # Any other finding fails, and gpumeter's own families and the nvidia-smi set are clean.
        for compat, agent in self.agents.items():
            _, body = agent.metrics()
            self.assertIn("\ngpu_up{", body)
            rc, findings = promtool_findings(body)
            if compat == "nvidia-smi":
                self.assertEqual((rc, findings), (0, []), compat)
                continue
            self.assertEqual(rc, 3, "%s: %s" % (compat, findings))  # lint only, no parse error
            # The only camelCase label is dcgm-exporter's modelName, which every compat family carries.
            labels = set(re.findall(r"[{,]([A-Za-z_][A-Za-z0-9_]*)=", body))
            self.assertEqual({l for l in labels if re.search(r"[a-z][A-Z]", l)}, {"modelName"}, compat)
            with_model = set(re.findall(r"^(\w+)\{[^}]*modelName=", body, re.M))
            want = {"%s %s" % (name, CAMEL_CASE) for name in with_model} | SCHEMA_FINDINGS[compat]
            self.assertEqual(sorted(set(findings) - want), [], "%s: findings beyond dcgm-exporter's schema" % compat)
            self.assertEqual(sorted(want - set(findings)), [], "%s: findings the schema should give" % compat)
            _, om = agent.metrics({"Accept": "application/openmetrics-text; version=1.0.0"})
            p = subprocess.run(["/usr/bin/python3", CHECK_OPENMETRICS, "-"], input=om, capture_output=True,
                               text=True, timeout=60)
            self.assertEqual(p.returncode, 0, "%s: %s" % (compat, p.stderr))


class CountersFile(unittest.TestCase):
    def run_serve(self, *args):
        return subprocess.run([BIN, "serve", "--web.listen-address", "127.0.0.1:0", "--ledger.state-file", "",
                               "--sim.scenario", SCENARIO, *args], capture_output=True, text=True, timeout=60)

    def test_a_malformed_counters_file_stops_the_agent_naming_its_line(self):
        with tempfile.NamedTemporaryFile("w", suffix=".csv") as f:
            f.write("# fields\nDCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).\nDCGM_FI_DEV_FB_USED gauge\n")
            f.flush()
            r = self.run_serve("--compat", "dcgm-exporter", "--compat.collectors", f.name)
            self.assertEqual(r.returncode, 2)
            self.assertIn("%s:3: expected 'DCGM_FIELD, type, help' (two commas)" % f.name, r.stdout + r.stderr)

    def test_an_unknown_set_is_a_bad_flag(self):
        r = self.run_serve("--compat", "dcgm")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("dcgm", r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main()
