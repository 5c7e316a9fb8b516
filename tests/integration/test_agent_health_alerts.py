"""The agent's own series, as live agents export them on an NVIDIA-only, an AMD-only and a mixed
node, fire no shipped alert (docs/alerts.md): a backend the node has no use for is absent, not
down. Each agent runs on its simulated node (the AMD GPUs through Debian's real ROCm SMI in a
private mount namespace, as test_rocm does), every gpumeter_* sample it serves becomes a promtool
input series held for 30 minutes, and `promtool test rules` expects no alert of the rule file at
all. The same series with what the agent exported before (`gpumeter_backend_up 0` for the absent
backend) must fire GpumeterBackendDown: the check can fail."""
import os
import tempfile
import unittest

import yaml

import harness
from harness import Agent, AgentTestCase, parse_text
from test_alert_rules import ALERTS, alert_rules, promtool
from test_rocm import AT, run_on_tree

DEPLOY = os.path.join(harness.SOURCE_DIR, "deploy", "scenarios")
NVIDIA = os.path.join(DEPLOY, "h100-8x-three-teams.yaml")
AMD = os.path.join(DEPLOY, "mi300x-8x-three-teams.yaml")
MIXED = os.path.join(DEPLOY, "mixed-4h100-4mi300x.yaml")
TEST_ROCM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "test_rocm.py")


def selector(name, labels):
    quoted = ", ".join('%s="%s"' % (k, v.replace("\\", "\\\\").replace('"', '\\"')) for k, v in sorted(labels))
    return "%s{%s}" % (name, quoted)


def health_series(body, instance):
    """promtool input series: every gpumeter_* sample of a scrape, and the scrape's `up`."""
    target = [("job", "gpumeter"), ("instance", instance)]
    series = [{"series": selector("up", target), "values": "1x30"}]
    for (name, labels), value in sorted(parse_text(body).items()):
        if name.startswith("gpumeter_"):
            series.append({"series": selector(name, list(labels) + target), "values": "%r+0x30" % value})
    return series


class AgentHealthAlerts(AgentTestCase):
    @classmethod
    def setUpClass(cls):
        cls.scrapes = {"nvidia-only": cls.nvidia_scrape(), "amd-only": cls.namespace_scrape(AMD, None),
                       "mixed": cls.namespace_scrape(MIXED, MIXED)}

    @staticmethod
    def nvidia_scrape():
        agent = Agent(scenario=NVIDIA)
        try:
            agent.wait_ready()
            return agent.metrics()[1]
        finally:
            agent.stop()

    @staticmethod
    def namespace_scrape(tree_scenario, agent_scenario):
        """The agent's scrape in the namespace, its AMD GPUs from the scenario's sysfs tree; NVML
        from the simulator playing `agent_scenario`, or missing when it is None."""
        work = run_on_tree(tree_scenario, AT, TEST_ROCM, "--inner", "gpumeter-health-",
                           *([agent_scenario] if agent_scenario else []))
        with open(os.path.join(work, "metrics.txt")) as f:
            return f.read()

    def run_rule_test(self, series, expected):
        """promtool test rules on `series`: at 20 minutes, the alerts of `expected` (name -> list of
        label dicts) fire and every other alert of the rule file does not."""
        tests = [{"alertname": r["alert"], "eval_time": "20m", "exp_alerts": expected.get(r["alert"], [])}
                 for r in alert_rules()]
        doc = {"rule_files": [ALERTS], "evaluation_interval": "1m",
               "tests": [{"interval": "1m", "input_series": series, "alert_rule_test": tests}]}
        path = os.path.join(tempfile.mkdtemp(prefix="gpumeter-health-rules-"), "health_test.yml")
        with open(path, "w") as f:
            yaml.safe_dump(doc, f, sort_keys=False)
        return promtool("test", "rules", path)

    def test_healthy_agents_fire_no_alert(self):
        backends = {}
        for node, body in self.scrapes.items():
            samples = parse_text(body)
            backends[node] = sorted((n, dict(l)["backend"], v) for (n, l), v in samples.items()
                                    if n in ("gpumeter_backend_up", "gpumeter_backend_absent"))
            with self.subTest(node=node):
                r = self.run_rule_test(health_series(body, node), {})
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(backends, {
            "nvidia-only": [("gpumeter_backend_absent", "rocm_smi", 1), ("gpumeter_backend_up", "nvml", 1)],
            "amd-only": [("gpumeter_backend_absent", "nvml", 1), ("gpumeter_backend_up", "rocm_smi", 1)],
            "mixed": [("gpumeter_backend_up", "nvml", 1), ("gpumeter_backend_up", "rocm_smi", 1)],
        })

    def test_the_series_the_agent_exported_before_would_fire(self):
        # Before, a backend with no GPU or library on the node was exported as down.
        for node, absent in (("nvidia-only", "rocm_smi"), ("amd-only", "nvml")):
            with self.subTest(node=node):
                series = health_series(self.scrapes[node], node)
                series.append({"series": selector("gpumeter_backend_up", [("backend", absent), ("job", "gpumeter"),
                                                                          ("instance", node)]),
                               "values": "0x30"})
                fired = {"job": "gpumeter", "instance": node, "backend": absent, "severity": "warning",
                         "category": "agent"}
                r = self.run_rule_test(series, {})
                self.assertNotEqual(r.returncode, 0, r.stdout)
                self.assertIn("GpumeterBackendDown", r.stdout + r.stderr)
                summary = "The gpumeter agent on %s cannot use %s" % (node, absent)
                expected = {"GpumeterBackendDown": [{"exp_labels": fired, "exp_annotations": {
                    "summary": summary,
                    "description": "The agent on %s runs, but its %s backend has been down for 5 minutes: the "
                                   "node's %s GPUs are not measured." % (node, absent, absent),
                    "runbook": "Check that the driver is loaded (nvidia-smi, or rocm-smi for AMD) and that the agent "
                               "can open the library named in its log (docs/alerts.md#gpumeterbackenddown)."}}]}
                r = self.run_rule_test(series, expected)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main()
