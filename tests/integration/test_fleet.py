"""A simulated fleet, live: tests/tools/fleet_server.py serving 20 nodes of 8 GPUs, scraped every
second by a real Prometheus through its file_sd targets, with the cost rules (`gpumeter rules
--pricing deploy/pricing/list-prices.yaml`), the budget rules and the alert rules loaded.

Checked: every target up under its own instance; each scrape's sample count is what the fleet's
model had at that moment (the node's fixed series plus four ledger series per owner on a GPU and
two per process); every rule group evaluates without error; the cost rules give a series for
every owner on every node; `gpumeter report` over the scraped period equals the model's truth per
project within 0.1 %, plus what the period's two edges may move (the usage in the scrape and
collection interval before each edge), and exactly the truth between the times its edge
samples' ledger values are as of. And, on their own, that what a node serves has the same
families, types, help texts and label names as a real agent's body on a simulated 8x H100 node
(the template the fleet server renders from must not drift from the agent)."""
import json
import os
import subprocess
import sys
import tempfile
import time

import harness
from harness import AgentTestCase, Process, http_get, wait_until

sys.path.insert(0, os.path.join(harness.SOURCE_DIR, "tests", "tools"))
import fleet_server  # noqa: E402

NODES = 20
SCRAPE = 1.0           # seconds, the scrape and evaluation interval
SCRAPED = 20           # seconds of scraping before the checks
TOLERANCE = 1e-3       # the bar: 0.1 %
FIELDS = ("allocated_seconds", "busy_seconds", "memory_byte_seconds", "energy_joules")
OWNER = ("project", "user", "namespace", "pod", "container", "hpc_job")
SCENARIO = os.path.join(harness.DEPLOY_SCENARIOS, "h100-8x-three-teams.yaml")
FLEET_SERVER = os.path.join(harness.SOURCE_DIR, "tests", "tools", "fleet_server.py")


def shape(body):
    """{family: (type, help, {label names of each sample, in order})} of a text body."""
    return {f["name"]: (f["type"], f["help"], frozenset(tuple(k for k, _ in s[1]) for s in f["samples"]))
            for f in fleet_server.parse_families(body)}


class Fleet(AgentTestCase):
    def test_a_node_serves_what_a_real_agent_serves(self):
        start = harness.ScenarioStart()
        node = self.track(harness.SimNode(SCENARIO, start, kubelet=False))
        agent = self.track(harness.Agent(SCENARIO, env=start.env, extra_args=node.agent_args(
            node.config(), os.path.join(node.dir, "ledger.json"))))
        agent.wait_ready()
        start.begin()

        def named_owner_and_process():
            body = agent.metrics()[1]
            ok = 'gpu_allocated_seconds_total{gpu="0"' in body and 'project="nlp-pretraining"' in body \
                and "gpu_process_utilization_ratio{" in body and "gpumeter_ledger_checkpoint_timestamp_seconds" in body
            return body if ok else None
        real = shape(wait_until(named_owner_and_process, 60, 0.5, "an owner and a process on GPU 0"))

        fleet = fleet_server.LiveFleet(3, 8, time.time(), 1, 26, "shape", 2.0, 0.5)
        server = fleet_server.Server(fleet, fleet_server.load_template())
        h100, a100 = server.render(0)[0], server.render(1)[0]
        self.assertIn("NVIDIA H100", h100)
        self.assertIn("NVIDIA A100", a100)
        served = shape(h100)
        self.assertEqual(sorted(served), sorted(real), "families: regenerate the template with "
                         "tests/tools/fleet_server.py --capture-template tests/tools/fleet_template.prom")
        for name in real:
            self.assertEqual(served[name][:2], real[name][:2], "TYPE and HELP of %s" % name)
            self.assertEqual(served[name][2], real[name][2], "label names of %s" % name)
        # The families of a node without GPM (A100): the H100's without the GPM ones, as the agent
        # leaves them out.
        gpm = {n for n, (_, help_text, _) in real.items() if help_text.rstrip(".").endswith("(GPM)")}
        self.assertIn("gpu_sm_active_ratio", gpm)
        self.assertEqual(sorted(shape(a100)), sorted(set(real) - gpm))
        # The body parses as Prometheus text.
        from prometheus_client.parser import text_string_to_metric_families
        self.assertGreater(sum(len(f.samples) for f in text_string_to_metric_families(h100)), 8 * 40)

    def test_fleet_scraped_live_with_the_rules(self):
        work = tempfile.mkdtemp(prefix="gpumeter-fleet-")
        cost = os.path.join(work, "gpumeter-cost.yml")
        with open(cost, "w") as f:
            subprocess.run([harness.BIN, "rules", "--pricing",
                            os.path.join(harness.SOURCE_DIR, "deploy", "pricing", "list-prices.yaml")],
                           stdout=f, check=True)
        rules = [cost] + [os.path.join(harness.SOURCE_DIR, "deploy", "prometheus", n)
                          for n in ("gpumeter-budget.yml", "gpumeter-alerts.yml")]
        ready, sd = os.path.join(work, "ready.json"), os.path.join(work, "targets.json")
        server = self.track(Process([sys.executable, FLEET_SERVER, "--nodes", str(NODES), "--seed", "test-fleet",
                                     "--hours", "2", "--ready-file", ready, "--file-sd", sd, "--report-every", "0"],
                                    workdir=work, name="fleet-server"))
        wait_until(lambda: os.path.exists(ready) or not server.alive(), 120, 0.2, "the fleet server")
        self.assertTrue(server.alive(), server.log())
        with open(ready) as f:
            info = json.load(f)
        # The same model in this process: the schedule is a function of the seed and the times.
        fleet = fleet_server.LiveFleet(NODES, info["gpus_per_node"], info["start"], info["hours"],
                                       info["warmup_hours"], info["seed"], info["pod_rate"], info["pod_hours"])
        a, b = info["start"] - 600, info["start"] - 300
        _, _, body = http_get("%s/truth?from=%d&to=%d" % (info["url"], a, b))
        self.assertEqual(json.loads(body)["by_project"], fleet.truth_summary(a, b)["by_project"])

        prom = self.track(harness.Prometheus(config={
            "global": {"scrape_interval": "%gs" % SCRAPE, "evaluation_interval": "%gs" % SCRAPE},
            "rule_files": rules,
            "scrape_configs": [{"job_name": "gpumeter", "file_sd_configs": [{"files": [sd]}]}]}))

        def all_up():
            targets = prom.targets()
            return len(targets) == NODES and all(t["health"] == "up" for t in targets) and targets
        targets = wait_until(all_up, 60, 0.5, "every target up")
        first = time.time()
        self.assertEqual(sorted(t["labels"]["instance"] for t in targets),
                         sorted("node-%d:9400" % i for i in range(1, NODES + 1)))
        self.assertEqual({t["labels"]["job"] for t in targets}, {"gpumeter"})
        time.sleep(max(0.0, first + SCRAPED - time.time()))
        now = time.time() - 1.5

        # -- every target up, with the series the model has -----------------------------------
        up = {r["metric"]["instance"]: r["value"][1] for r in prom.query('up{job="gpumeter"}', at=now)}
        self.assertEqual(up, {"node-%d:9400" % i: "1" for i in range(1, NODES + 1)})
        template = fleet_server.load_template()
        fixed = {}
        for gpm in (True, False):
            per_gpu = rest = 0
            for fam in template:
                if fam["name"] in fleet_server.LEDGER or (fleet_server.is_gpm(fam) and not gpm):
                    continue
                for _, labels, _ in fam["samples"]:
                    d = dict(labels)
                    if "pid" in d:
                        continue
                    if d.get("gpu") == "0":
                        per_gpu += 1
                    else:
                        rest += 1
            fixed[gpm] = per_gpu * info["gpus_per_node"] + rest

        def expected(node, t):
            t = float(int(t))
            lives = sum(1 for g in node.gpus for life in g.lives if life[1] < t < life[2])
            procs = sum(1 for g in node.gpus for p in g.procs if p.start <= t < p.end)
            return fixed[fleet_server.MODEL_INFO[node.gpus[0].model]["gpm"]] + 4 * lives + 2 * procs

        scraped = prom.query('scrape_samples_scraped{job="gpumeter"}[10s]', at=now)
        self.assertEqual(len(scraped), NODES)
        checked = 0
        for r in scraped:
            node = fleet.nodes[int(r["metric"]["instance"].split("-")[1].split(":")[0]) - 1]
            for ts, v in r["values"]:
                # The server renders as of its request's second; the sample carries the scrape's
                # start, a few milliseconds earlier, which may be in the second before.
                want = {expected(node, ts), expected(node, ts + 0.5)}
                self.assertIn(int(v), want, "%s at %.3f: %s series, model %s" % (node.instance, ts, v, want))
                checked += 1
        self.assertGreaterEqual(checked, NODES * 5)

        # -- the rule groups evaluate without errors --------------------------------------------
        _, _, body = http_get(prom.base + "/api/v1/rules")
        groups = json.loads(body)["data"]["groups"]
        names = {g["name"] for g in groups}
        self.assertTrue({"gpumeter.cost", "gpumeter.budget", "gpumeter.agent", "gpumeter.gpu.memory"} <= names, names)
        for g in groups:
            self.assertFalse(g["lastEvaluation"].startswith("0001"), "%s never evaluated" % g["name"])
            for rule in g["rules"]:
                self.assertEqual(rule["health"], "ok", "%s/%s: %s" % (g["name"], rule.get("name"), rule.get("lastError")))

        # -- the cost rules price every owner on every node -------------------------------------
        def owners(expr):
            out = {}
            for r in prom.query(expr, at=now):
                m = r["metric"]
                out.setdefault(m["instance"], set()).add(tuple(m.get(d, "") for d in OWNER))
            return out
        costed = owners('gpumeter:cost_per_hour:by_instance_owner{component="allocation",currency="USD"}')
        ledger = owners("gpu_allocated_seconds_total")
        # An owner needs two samples in the rate's window: those first seen within the last two
        # seconds may not have a cost yet.
        settled = owners("gpu_allocated_seconds_total and gpu_allocated_seconds_total offset 3s")
        self.assertEqual(sorted(costed), sorted(ledger))
        self.assertEqual(len(costed), NODES)
        for instance, have in costed.items():
            self.assertLessEqual(have, ledger[instance], instance)
            self.assertLessEqual(settled[instance], have, instance)
            node = fleet.nodes[int(instance.split("-")[1].split(":")[0]) - 1]
            surely = {life[0] for g in node.gpus for life in g.lives if life[1] < now - 3 and now + 1 < life[2]}
            maybe = {life[0] for g in node.gpus for life in g.lives if life[1] < now + 1 and now - 3 < life[2]}
            self.assertLessEqual(surely, ledger[instance], "%s: owners of the model not served" % instance)
            self.assertLessEqual(ledger[instance], maybe, "%s: owners served not in the model" % instance)
        priced = prom.query("count by (instance) (gpumeter:gpu_hour_price:by_uuid)", at=now)
        self.assertEqual({r["metric"]["instance"]: r["value"][1] for r in priced},
                         {"node-%d:9400" % i: str(info["gpus_per_node"]) for i in range(1, NODES + 1)})
        projects = {r["metric"]["project"] for r in prom.query("gpumeter:cost_per_hour:by_project", at=now)}
        self.assertTrue({"__idle__"} < projects, projects)

        # -- the report over the scraped period equals the truth --------------------------------
        a, b = first + 2.0, now
        doc = harness.report_json("--url", prom.base, "--from", "%.3f" % a, "--to", "%.3f" % b, "--by", "project")
        got = {r["key"]["project"]: r for r in doc["rows"]}
        # Exactly: the report reads each series' last sample at or before each edge, and a node's
        # ledger values are as of its gpumeter_ledger_checkpoint_timestamp_seconds in that scrape.
        asof = {}
        for r in prom.query('gpumeter_ledger_checkpoint_timestamp_seconds{job="gpumeter"}[60s]', at=b):
            number = int(r["metric"]["instance"].split("-")[1].split(":")[0])
            edges = [max((float(v) for ts, v in r["values"] if ts <= x), default=None) for x in (a, b)]
            self.assertNotIn(None, edges, r["metric"]["instance"])
            asof[number] = tuple(edges)
        self.assertEqual(len(asof), NODES)
        exact = fleet.truth_by_project(asof)
        self.assertEqual(sorted(got), sorted(p for p, v in exact.items() if any(v[f] > 0 for f in FIELDS)))
        for project, want in exact.items():
            for f in FIELDS:
                g = got.get(project, {}).get(f, 0.0)
                self.assertLessEqual(abs(g - want[f]), 1e-9 * abs(want[f]) + 1e-6,
                                     "%s %s: report %.12g, truth at the samples' times %.12g" % (project, f, g, want[f]))
        # Against the period itself: 0.1 %, plus what each edge may move (the usage in the scrape
        # interval, the collection interval and a second of slack before it, and the second after).
        truth = fleet.truth_summary(a, b)["by_project"]
        edge = SCRAPE + info["collect_interval"] + 1.0
        near = [fleet.truth_summary(x - edge, x + 1.0)["by_project"] for x in (a, b)]
        worst = 0.0
        for project, want in truth.items():
            for f in FIELDS:
                w = want[f]
                allowed = harness.allowed_deviation(w, 1.0, 0, TOLERANCE) + sum(n.get(project, {}).get(f, 0.0)
                                                                                 for n in near)
                g = got.get(project, {}).get(f, 0.0)
                self.assertLessEqual(abs(g - w), allowed, "%s %s: report %.9g, truth %.9g, allowed %.3g"
                                     % (project, f, g, w, allowed))
                if w:
                    worst = max(worst, abs(g - w) / w)
        self.assertTrue(doc["reconciliation"]["ok"], doc["reconciliation"])
        print("fleet: %d nodes, %d series per scrape at start, report over %.1f s: equal to the truth at the "
              "samples' times; largest relative deviation from the period's truth %.3g (edges)"
              % (NODES, info["series_per_scrape"], b - a, worst))


if __name__ == "__main__":
    import unittest
    unittest.main()
