"""The alert and budget rules in deploy/prometheus: `promtool check` and `promtool test rules`
pass; every alert carries a severity, a category, a summary, a description that shows the
measured value, and a runbook line; every alert has promtool tests that show it firing and
staying silent; the budget rules load together with the cost rules that `gpumeter rules`
writes; the example Prometheus configuration passes `promtool check config`; and a real
Prometheus evaluates every rule without error on a simulated node whose GPU reports Xids."""
import json
import glob
import os
import shutil
import subprocess
import tempfile
import unittest

import yaml

from harness import BIN, SCENARIOS, SOURCE_DIR, Agent, AgentTestCase, Prometheus, http_get, wait_until

PROM_DIR = os.path.join(SOURCE_DIR, "deploy", "prometheus")
ALERTS = os.path.join(PROM_DIR, "gpumeter-alerts.yml")
BUDGET = os.path.join(PROM_DIR, "gpumeter-budget.yml")
RULE_TESTS = sorted(glob.glob(os.path.join(PROM_DIR, "tests", "*_test.yml")))
SEVERITIES = {"critical", "warning", "info"}
CATEGORIES = {"health", "capacity", "cost", "agent"}
# Alerts whose description need not show $value: the condition itself is the news.
NO_VALUE = {"GpuXidCritical", "GpuXidError", "GpuRowRemapFailure", "GpuRowRemapPending", "GpuLost",
            "GpumeterAgentDown", "GpumeterAgentAbsent", "GpumeterBackendDown", "GpumeterNoBackend", "GpuNvlinkDown"}


def promtool(*args):
    return subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=120)


def alert_rules(group=None):
    """The shipped alerts, or those of one group."""
    with open(ALERTS) as f:
        doc = yaml.safe_load(f)
    return [r for g in doc["groups"] if group in (None, g["name"]) for r in g["rules"] if "alert" in r]


class AlertRules(unittest.TestCase):
    def test_promtool_check_rules(self):
        r = promtool("check", "rules", "--lint=all", "--lint-fatal", ALERTS, BUDGET)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout.count("SUCCESS"), 2, r.stdout)

    def test_promtool_rule_tests(self):
        self.assertGreaterEqual(len(RULE_TESTS), 2, RULE_TESTS)
        r = promtool("test", "rules", *RULE_TESTS)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout.count("SUCCESS"), len(RULE_TESTS), r.stdout)

    def test_every_alert_is_labelled_and_annotated(self):
        rules = alert_rules()
        self.assertGreaterEqual(len(rules), 20)
        names = [r["alert"] for r in rules]
        self.assertEqual(len(names), len(set(names)), "alert names repeat")
        for r in rules:
            with self.subTest(alert=r["alert"]):
                self.assertIn(r["labels"].get("severity"), SEVERITIES)
                self.assertIn(r["labels"].get("category"), CATEGORIES)
                ann = r["annotations"]
                self.assertEqual(set(ann), {"summary", "description", "runbook"})
                self.assertIn("docs/alerts.md#" + r["alert"].lower(), ann["runbook"])
                if r["alert"] not in NO_VALUE:
                    self.assertIn("$value", ann["description"])

    def test_every_alert_is_tested_firing_and_silent(self):
        firing, silent = set(), set()
        for path in RULE_TESTS:
            with open(path) as f:
                doc = yaml.safe_load(f)
            for case in doc["tests"]:
                for t in case.get("alert_rule_test", []):
                    (firing if t.get("exp_alerts") else silent).add(t["alertname"])
        for name in (r["alert"] for r in alert_rules()):
            with self.subTest(alert=name):
                self.assertIn(name, firing, "no test shows %s firing" % name)
                self.assertIn(name, silent, "no test shows %s silent" % name)

    def test_runbook_anchors_exist_in_the_alert_reference(self):
        with open(os.path.join(SOURCE_DIR, "docs", "alerts.md")) as f:
            doc = f.read()
        for name in (r["alert"] for r in alert_rules()):
            with self.subTest(alert=name):
                self.assertIn("### " + name + "\n", doc)


class WithCostRules(unittest.TestCase):
    """The shipped files together with generated cost rules, as deploy/prometheus/prometheus.yml
    loads them."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="gpumeter-alert-rules-")
        self.addCleanup(shutil.rmtree, self.dir)
        for name in ("prometheus.yml", "gpumeter-alerts.yml", "gpumeter-budget.yml"):
            shutil.copy(os.path.join(PROM_DIR, name), self.dir)
        pricing = os.path.join(self.dir, "pricing.yaml")
        with open(pricing, "w") as f:
            f.write('gpu_models:\n  "*": {gpu_hour: 2}\nbudgets:\n  vision: 1000\n')
        r = subprocess.run([BIN, "rules", "--pricing", pricing, "--output", os.path.join(self.dir, "gpumeter-cost.yml")],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_example_config_passes_promtool_check_config(self):
        r = promtool("check", "config", os.path.join(self.dir, "prometheus.yml"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("SUCCESS: 3 rule files found", r.stdout)
        self.assertEqual(r.stdout.count("SUCCESS"), 5, r.stdout)  # the config, its syntax, its three rule files

    def test_cost_alerts_read_series_the_cost_and_budget_rules_record(self):
        recorded = set()
        for name in ("gpumeter-cost.yml", "gpumeter-budget.yml"):
            with open(os.path.join(self.dir, name)) as f:
                for g in yaml.safe_load(f)["groups"]:
                    recorded |= {r["record"] for r in g["rules"] if "record" in r}
        waste = {r["alert"] for r in alert_rules("gpumeter.gpu.waste")}  # from the ledger, not from prices
        for r in alert_rules():
            if r["labels"]["category"] != "cost" or r["alert"] in waste:
                continue
            used = {tok for tok in recorded if tok in r["expr"]}
            with self.subTest(alert=r["alert"]):
                self.assertTrue(used, r["expr"])
                for word in r["expr"].replace("(", " ").replace(")", " ").split():
                    if word.startswith("gpumeter:"):
                        self.assertIn(word, recorded)


class LiveEvaluation(AgentTestCase):
    """The simulator's faults scenario (Xid 79 and Xid 13 on GPU 3 at 7 s and 8 s) -> the agent ->
    a real Prometheus evaluating every shipped rule file once a second."""

    def test_rules_evaluate_and_xids_fire_on_a_real_agent(self):
        rules_dir = tempfile.mkdtemp(prefix="gpumeter-live-rules-")
        self.addCleanup(shutil.rmtree, rules_dir)
        pricing = os.path.join(rules_dir, "pricing.yaml")
        with open(pricing, "w") as f:
            f.write('gpu_models:\n  "*": {gpu_hour: 2}\nbudgets:\n  unknown: 1\n')
        cost = os.path.join(rules_dir, "gpumeter-cost.yml")
        r = subprocess.run([BIN, "rules", "--pricing", pricing, "--output", cost], capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        agent = self.track(Agent(os.path.join(SCENARIOS, "faults.yaml")))
        agent.wait_ready()
        files = [cost, BUDGET, ALERTS]
        prom = self.track(Prometheus(["127.0.0.1:%d" % agent.port],
                                     extra_config="rule_files: [%s]\n" % ", ".join("'%s'" % f for f in files)))

        def groups():
            _, _, body = http_get(prom.base + "/api/v1/rules")
            return json.loads(body)["data"]["groups"]

        def firing(name):
            return {a["metric"].get("xid") for a in prom.query('ALERTS{alertname="%s", alertstate="firing"}' % name)}

        wait_until(lambda: "79" in firing("GpuXidCritical") and "13" in firing("GpuXidError"), 60,
                   what="Xid alerts firing")
        self.assertEqual(firing("GpuXidCritical"), {"79"})
        self.assertEqual(firing("GpuXidError"), {"13"})
        # Every rule of every file has been evaluated, and none failed.
        wait_until(lambda: all(r["lastEvaluation"] > "2000" for g in groups() for r in g["rules"]), 30,
                   what="every rule evaluated")
        loaded = {g["file"] for g in groups()}
        self.assertEqual(loaded, set(files))
        for g in groups():
            for rule in g["rules"]:
                with self.subTest(rule=rule["name"]):
                    self.assertEqual(rule["health"], "ok", rule.get("lastError"))
        # The cost rules and the budget rules produce series from the agent's ledger. The budget
        # group reads the cost group's series; the two groups are evaluated independently, so the
        # first budget evaluation may come before the first cost series exist.
        wait_until(lambda: prom.query("gpumeter:cost:month_forecast:by_project"), 30,
                   what="the month's forecast recorded from the cost rules' series")
