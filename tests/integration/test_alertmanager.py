"""The Alertmanager configuration in deploy/alertmanager: `amtool check-config` passes (and fails
on a broken copy); every shipped alert routes to the receiver its severity and category call for;
a real Alertmanager inhibits what the config says and nothing more (a critical GPU alert
silences the warning on the same GPU only, a node down silences that node's GPU alerts but not
its cost or agent alerts, a spent budget silences that project's budget warnings only); and end
to end, a GPU lost on the simulator reaches a webhook inside this test through the agent, a real
Prometheus loading the shipped alert rules, and a real Alertmanager loading the shipped config,
firing and then resolved.

What the tests change in the shipped files, and only that:
* the Alertmanager config: every receiver URL points at this test's webhook sink (the path names
  the receiver), and group_wait/group_interval are 1 s in every route, so notifications come in
  seconds instead of minutes;
* the alert rules: the `for:` of GpuLost is 3 s instead of 1 m, so it fires within the test."""
import copy
import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest

import yaml

from harness import (SCENARIOS, SOURCE_DIR, Agent, AgentTestCase, Alertmanager, Prometheus, ScenarioStart,
                     WebhookSink, http_get, parse_text, sim_env, wait_until)

AM_CONFIG = os.path.join(SOURCE_DIR, "deploy", "alertmanager", "alertmanager.yml")
ALERTS = os.path.join(SOURCE_DIR, "deploy", "prometheus", "gpumeter-alerts.yml")
SCENARIO = os.path.join(SCENARIOS, "alert-gpu-lost.yaml")
CLUSTER = "it-cluster"
# The receiver each kind of alert must reach.
PAGER, CHAT, INFO, FINANCE = "gpu-pager", "gpu-chat", "gpu-info", "finance-budget"


def amtool(*args):
    return subprocess.run(["amtool", *args], capture_output=True, text=True, timeout=60)


def shipped_config():
    with open(AM_CONFIG) as f:
        return yaml.safe_load(f)


def config_for_test(sink, wait="1s"):
    """The shipped config with only the receiver URLs (pointed at the sink, the path naming the
    receiver) and group_wait/group_interval (`wait` in every route) changed."""
    cfg = copy.deepcopy(shipped_config())
    for r in cfg["receivers"]:
        hooks = r.get("webhook_configs")
        if not hooks:
            raise AssertionError("receiver %s has no webhook_configs to point at the sink" % r["name"])
        for h in hooks:
            h["url"] = sink.url("/" + r["name"])

    def shorten(route, root):
        for key in ("group_wait", "group_interval"):
            if root or key in route:
                route[key] = wait
        for child in route.get("routes", []):
            shorten(child, False)
    shorten(cfg["route"], True)
    return yaml.safe_dump(cfg, sort_keys=False)


def expected_receiver(labels):
    if labels.get("category") == "cost":
        return FINANCE
    return {"critical": PAGER, "warning": CHAT, "info": INFO}[labels["severity"]]


class Config(unittest.TestCase):
    def test_amtool_check_config(self):
        r = amtool("check-config", AM_CONFIG)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("SUCCESS", r.stdout)
        self.assertIn("3 inhibit rules", r.stdout)
        self.assertIn("4 receivers", r.stdout)

    def test_amtool_rejects_a_broken_copy(self):
        # The check above means something: the same file with a route to a missing receiver fails.
        cfg = shipped_config()
        cfg["route"]["routes"][0]["receiver"] = "no-such-receiver"
        with tempfile.NamedTemporaryFile("w", suffix=".yml") as f:
            yaml.safe_dump(cfg, f)
            f.flush()
            r = amtool("check-config", f.name)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("no-such-receiver", r.stdout + r.stderr)

    def test_grouping_and_intervals(self):
        route = shipped_config()["route"]
        self.assertEqual(route["group_by"], ["cluster", "instance", "alertname"])
        cost = [r for r in route["routes"] if r.get("matchers") == ['category="cost"']]
        self.assertEqual(len(cost), 1)
        self.assertEqual(cost[0]["group_by"], ["cluster", "project", "alertname"])
        critical = [r for r in route["routes"] if r.get("matchers") == ['severity="critical"']]
        self.assertEqual(len(critical), 1)

        def seconds(d):
            return int(d[:-1]) * {"s": 1, "m": 60, "h": 3600}[d[-1]]
        self.assertLess(seconds(critical[0]["repeat_interval"]), seconds(route["repeat_interval"]))
        self.assertLess(seconds(critical[0]["group_wait"]), seconds(route["group_wait"]))

    def route(self, labels, expected):
        args = ["%s=%s" % kv for kv in sorted(labels.items())]
        r = amtool("config", "routes", "test", "--config.file=" + AM_CONFIG, "--verify.receivers=" + expected, *args)
        self.assertEqual(r.returncode, 0, "%s: %s%s" % (args, r.stdout, r.stderr))
        self.assertEqual(r.stdout.strip(), expected, args)

    def test_routes_by_severity_and_category(self):
        self.route({"alertname": "GpuLost", "severity": "critical", "category": "health",
                    "cluster": CLUSTER, "instance": "node-a:9400"}, PAGER)
        self.route({"alertname": "GpuMemoryUsageHigh", "severity": "warning", "category": "capacity"}, CHAT)
        self.route({"alertname": "GpuPowerCapped", "severity": "info", "category": "health"}, INFO)
        # A critical cost alert goes to finance, not to the pager.
        self.route({"alertname": "GpuProjectBudgetExceeded", "severity": "critical", "category": "cost",
                    "project": "vision"}, FINANCE)
        self.route({"alertname": "GpuIdleHoldingMemory", "severity": "warning", "category": "cost"}, FINANCE)
        # No known severity: the fallback still reaches people.
        self.route({"alertname": "SomethingElse"}, CHAT)
        self.route({"alertname": "SomethingElse", "severity": "page"}, CHAT)
        # --verify.receivers does fail on a mismatch.
        r = amtool("config", "routes", "test", "--config.file=" + AM_CONFIG, "--verify.receivers=" + CHAT,
                   "severity=critical", "alertname=GpuLost")
        self.assertNotEqual(r.returncode, 0, r.stdout)

    def test_every_shipped_alert_routes_by_its_labels(self):
        with open(ALERTS) as f:
            rules = [r for g in yaml.safe_load(f)["groups"] for r in g["rules"] if "alert" in r]
        self.assertGreaterEqual(len(rules), 20)
        seen = set()
        for rule in rules:
            labels = dict(rule["labels"], alertname=rule["alert"])
            with self.subTest(alert=rule["alert"]):
                self.route(labels, expected_receiver(labels))
                seen.add(expected_receiver(labels))
        self.assertEqual(seen, {PAGER, CHAT, INFO, FINANCE})


def remove_after(test, *dirs):
    """Removes the temporary folders once the test's processes are stopped and their logs printed
    (cleanups run after tearDown)."""
    for d in dirs:
        test.addCleanup(shutil.rmtree, d, True)


def alert(name, severity, category, **labels):
    return {"labels": dict(labels, alertname=name, severity=severity, category=category, cluster=CLUSTER),
            "annotations": {"summary": name, "description": name, "runbook": name}}


class Inhibition(AgentTestCase):
    def test_inhibit_rules_on_a_real_alertmanager(self):
        sink = self.track(WebhookSink())
        am = self.track(Alertmanager(config_for_test(sink)))
        remove_after(self, sink.dir, am.dir)
        gpu = {"job": "gpumeter"}
        a, b, c = "node-a:9400", "node-b:9400", "node-c:9400"
        alerts = {
            # Node A: a critical and a warning on GPU X, a warning on GPU Y.
            "crit-x": alert("GpuMemoryUsageCritical", "critical", "capacity", instance=a, gpu="0", uuid="GPU-X", **gpu),
            "warn-x": alert("GpuMemoryUsageHigh", "warning", "capacity", instance=a, gpu="0", uuid="GPU-X", **gpu),
            "warn-y": alert("GpuMemoryUsageHigh", "warning", "capacity", instance=a, gpu="1", uuid="GPU-Y", **gpu),
            # Node B is down: its GPU alerts are silenced, its cost and agent alerts are not.
            "down-b": alert("GpumeterAgentDown", "critical", "agent", instance=b, **gpu),
            "hot-b": alert("GpuTemperatureHigh", "warning", "health", instance=b, gpu="0", uuid="GPU-B0", **gpu),
            "lost-b": alert("GpuLost", "critical", "health", instance=b, gpu="1", uuid="GPU-B1", **gpu),
            "idle-b": alert("GpuIdleHoldingMemory", "warning", "cost", instance=b, gpu="2", uuid="GPU-B2", **gpu),
            # Without a uuid on either side this would count as the same GPU as down-b.
            "backend-b": alert("GpumeterBackendDown", "warning", "agent", instance=b, backend="nvml", **gpu),
            # Node C is up: nothing silences its GPU alert.
            "hot-c": alert("GpuTemperatureHigh", "warning", "health", instance=c, gpu="0", uuid="GPU-C0", **gpu),
            # Budgets (no instance, no uuid): project a's spent budget silences a's forecast only.
            "spent-a": alert("GpuProjectBudgetExceeded", "critical", "cost", project="a", currency="USD"),
            "forecast-a": alert("GpuProjectForecastOverBudget", "warning", "cost", project="a", currency="USD"),
            "rate-b": alert("GpuProjectSpendAboveBudgetRate", "warning", "cost", project="b", currency="USD"),
        }
        inhibited_by = {"warn-x": "crit-x", "hot-b": "down-b", "lost-b": "down-b", "forecast-a": "spent-a"}
        am.post_alerts(list(alerts.values()))

        def key(labels):
            for k, v in alerts.items():
                if v["labels"] == labels:
                    return k
            raise AssertionError("unexpected alert %r" % labels)

        def all_present():
            got = {key(x["labels"]): x for x in am.alerts()}
            return got if len(got) == len(alerts) else None

        def settled():
            # The API stores a posted alert at once, but the inhibitor learns of source alerts on
            # a goroutine of its own, moments later on a loaded machine; until then the targets
            # read as active. Wait for every expected suppression, then check each exactly.
            got = all_present()
            return got if got and all(got[k]["status"]["inhibitedBy"] for k in inhibited_by) else None
        try:
            got = wait_until(settled, 15, what="the expected inhibitions in /api/v2/alerts")
        except AssertionError:  # the checks below name what is wrong
            got = wait_until(all_present, 5, what="every posted alert in /api/v2/alerts")
        fingerprints = {k: x["fingerprint"] for k, x in got.items()}
        for k, x in got.items():
            with self.subTest(alert=k):
                if k in inhibited_by:
                    self.assertEqual(x["status"]["inhibitedBy"], [fingerprints[inhibited_by[k]]])
                    self.assertEqual(x["status"]["state"], "suppressed")
                else:
                    self.assertEqual(x["status"]["inhibitedBy"], [])
                    self.assertEqual(x["status"]["state"], "active")

        # The notifications: every group that has an active alert is sent to its receiver, with
        # only its active alerts; an inhibited alert is never sent.
        expected = {  # (receiver, alertname, instance or project) -> keys of the alerts sent
            (PAGER, "GpuMemoryUsageCritical", a): {"crit-x"},
            (CHAT, "GpuMemoryUsageHigh", a): {"warn-y"},
            (PAGER, "GpumeterAgentDown", b): {"down-b"},
            (FINANCE, "GpuIdleHoldingMemory", ""): {"idle-b"},
            (CHAT, "GpumeterBackendDown", b): {"backend-b"},
            (CHAT, "GpuTemperatureHigh", c): {"hot-c"},
            (FINANCE, "GpuProjectBudgetExceeded", "a"): {"spent-a"},
            (FINANCE, "GpuProjectSpendAboveBudgetRate", "b"): {"rate-b"},
        }

        def notified():
            out = {}
            for path, doc in sink.payloads():
                self.assertEqual(path, "/" + doc["receiver"])
                self.assertEqual(doc["status"], "firing")
                g = doc["groupLabels"]
                group = (doc["receiver"], g["alertname"], g.get("instance", g.get("project", "")))
                out.setdefault(group, set()).update(key(x["labels"]) for x in doc["alerts"])
            return out
        try:
            wait_until(lambda: set(notified()) >= set(expected), 20, what="a notification for every active group")
        except AssertionError:
            pass  # the comparison below shows what is missing
        time.sleep(2)  # two more group intervals: an inhibited alert would have been sent by now
        self.assertEqual(notified(), expected)
        # The cost route groups by project; the others by node.
        for _, doc in sink.payloads():
            if doc["receiver"] == FINANCE:
                self.assertEqual(set(doc["groupLabels"]) - {"project"}, {"cluster", "alertname"})
            else:
                self.assertEqual(set(doc["groupLabels"]), {"cluster", "instance", "alertname"})
            self.assertEqual(doc["groupLabels"]["cluster"], CLUSTER)


def alerting_prometheus(targets, rule_file, alertmanager):
    """A real Prometheus scraping the agents as job gpumeter, with the cluster as an external
    label, the given rule file, and an Alertmanager."""
    return Prometheus(config={
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "external_labels": {"cluster": CLUSTER}},
        "rule_files": [rule_file],
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": ["127.0.0.1:%d" % alertmanager.port]}]}]},
        "scrape_configs": [{"job_name": "gpumeter", "static_configs": [{"targets": list(targets)}]}],
    })


LOST_AT = 10.0  # scenario: GPU 1 is lost from 10 s to 25 s
BACK_AT = 25.0
FOR = "3s"      # GpuLost's `for:` in the test's copy of the rules (1m in the shipped file)


class EndToEnd(AgentTestCase):
    def rules_with_short_gpu_lost(self):
        """The shipped alert rules with only GpuLost's `for:` shortened."""
        with open(ALERTS) as f:
            doc = yaml.safe_load(f)
        lost = [r for g in doc["groups"] for r in g["rules"] if r.get("alert") == "GpuLost"]
        self.assertEqual(len(lost), 1)
        self.assertTrue(lost[0]["expr"].strip().startswith("gpu_up == 0 unless"), lost[0]["expr"])
        self.assertEqual(lost[0]["labels"]["severity"], "critical")
        lost[0]["for"] = FOR
        folder = tempfile.mkdtemp(prefix="gpumeter-rules-")
        remove_after(self, folder)
        path = os.path.join(folder, "gpumeter-alerts.yml")
        with open(path, "w") as f:
            yaml.safe_dump(doc, f, sort_keys=False)
        return path

    def test_gpu_lost_fires_and_resolves_at_the_webhook(self):
        rules = self.rules_with_short_gpu_lost()
        sink = self.track(WebhookSink())
        am = self.track(Alertmanager(config_for_test(sink)))
        start = ScenarioStart()
        agent = self.track(Agent(scenario=SCENARIO, env=sim_env(start),
                                 extra_args=["--ledger.state-file", ""]))
        remove_after(self, sink.dir, am.dir, agent.process.workdir)
        agent.wait_ready()
        instance = "127.0.0.1:%d" % agent.port
        uuids = {dict(ls)["gpu"]: dict(ls)["uuid"] for (n, ls) in parse_text(agent.metrics()[1]) if n == "gpu_info"}
        self.assertEqual(set(uuids), {"0", "1"})
        prom = self.track(alerting_prometheus([instance], rules, am))
        remove_after(self, prom.dir)
        wait_until(lambda: [t for t in prom.targets() if t["health"] == "up"], 15, what="the agent scraped")
        # Prometheus loaded the whole shipped rule file, and found the Alertmanager.
        _, _, body = http_get(prom.base + "/api/v1/rules?type=alert")
        names = {r["name"] for g in json.loads(body)["data"]["groups"] for r in g["rules"]}
        self.assertIn("GpuLost", names)
        self.assertIn("GpumeterAgentDown", names)
        self.assertIn("GpuProjectBudgetExceeded", names)
        wait_until(lambda: json.loads(http_get(prom.base + "/api/v1/alertmanagers")[2])["data"]["activeAlertmanagers"],
                   15, what="prometheus sees the alertmanager")
        epoch = start.begin()

        def gpu_lost(status):
            for path, doc in sink.payloads():
                for x in doc["alerts"]:
                    if x["labels"]["alertname"] == "GpuLost" and doc["status"] == status:
                        return path, doc
            return None

        path, firing = wait_until(lambda: gpu_lost("firing"), LOST_AT + 20 - (time.time() - epoch),
                                  interval=0.2, what="GpuLost firing at the webhook")
        fired_at = time.time() - epoch
        self.assertGreater(fired_at, LOST_AT + 3, "fired before the GPU was lost for %s" % FOR)
        self.assertLess(fired_at, BACK_AT, "fired only after the GPU came back")
        self.assertEqual(path, "/" + PAGER)
        self.assertEqual(firing["receiver"], PAGER)
        self.assertEqual(firing["groupLabels"], {"cluster": CLUSTER, "instance": instance, "alertname": "GpuLost"})
        self.assertEqual(len(firing["alerts"]), 1, firing)  # GPU 0 is fine
        fired = firing["alerts"][0]
        self.assertEqual(fired["status"], "firing")
        labels = fired["labels"]
        self.assertEqual(labels, {"alertname": "GpuLost", "cluster": CLUSTER, "job": "gpumeter", "instance": instance,
                                  "gpu": "1", "uuid": uuids["1"], "severity": "critical", "category": "health"})
        self.assertEqual(set(fired["annotations"]), {"summary", "description", "runbook"})
        self.assertIn(instance, fired["annotations"]["summary"])

        # The GPU comes back at 25 s: the same alert is resolved at the webhook.
        path, resolved = wait_until(lambda: gpu_lost("resolved"), BACK_AT + 20 - (time.time() - epoch),
                                    interval=0.2, what="GpuLost resolved at the webhook")
        self.assertGreater(time.time() - epoch, BACK_AT)
        self.assertEqual(path, "/" + PAGER)
        self.assertEqual(len(resolved["alerts"]), 1, resolved)
        done = resolved["alerts"][0]
        self.assertEqual(done["status"], "resolved")
        self.assertEqual(done["fingerprint"], fired["fingerprint"])
        self.assertEqual(done["labels"], labels)
        self.assertNotEqual(done["endsAt"], "0001-01-01T00:00:00Z")
        # Alertmanager no longer lists it as active, and GPU 0 never alerted.
        self.assertFalse([x for x in am.alerts() if x["labels"]["alertname"] == "GpuLost"])
        for _, doc in sink.payloads():
            for x in doc["alerts"]:
                self.assertNotEqual(x["labels"].get("gpu"), "0", doc)
        self.assertTrue(agent.process.alive())


if __name__ == "__main__":
    unittest.main()
