"""Two clusters, one store: each cluster's agent is scraped by its own Prometheus, which sets
its `cluster` external label and sends everything to one VictoriaMetrics by remote_write
(docs/scale-out.md). `gpumeter report` against the store covers both clusters: by cluster, each
cluster's rows are exactly that cluster's own Prometheus' report, and by project alone, each
project's total is the sum of the two."""
import os
import tempfile
import time

from harness import (AgentTestCase, Agent, COUNTERS, Prometheus, SCENARIOS, ScenarioStart, SimNode, VictoriaMetrics,
                     report_json, sim_env, wait_until)

# Two scenarios whose GPUs have UUIDs of their own, as two clusters' GPUs do.
CLUSTERS = {"east": os.path.join(SCENARIOS, "ledger-mixed.yaml"), "west": os.path.join(SCENARIOS, "ledger-churn.yaml")}
END = 43.0  # both scenarios' last usage
FIELDS = list(COUNTERS.values())
SAME = 1e-9  # one store's copy of the same samples: equal but for floating-point rounding
LEDGER_CONFIG = "ledger:\n  allocation: process\n  checkpoint_interval: 1s\n"


def rows(doc):
    return {tuple(r["key"][d] for d in doc["by"]): r for r in doc["rows"]}


class TwoClusters(AgentTestCase):
    def assert_same(self, got, want, what):
        for f in FIELDS:
            self.assertLessEqual(abs(got[f] - want[f]), SAME * max(1.0, abs(want[f])),
                                 "%s %s: %r against %r" % (what, f, got[f], want[f]))

    def test_one_store_reports_both_clusters_as_their_own_servers_do(self):
        began = time.time()
        start = ScenarioStart()
        vm = self.track(VictoriaMetrics())
        proms = {}
        for cluster, scenario in CLUSTERS.items():
            node = self.track(SimNode(scenario, start))
            state = os.path.join(tempfile.mkdtemp(prefix="gpumeter-cluster-"), "ledger.json")
            agent = self.track(Agent(scenario=scenario, env=sim_env(start),
                                     extra_args=node.agent_args(node.config(LEDGER_CONFIG), state)))
            proms[cluster] = self.track(Prometheus(["127.0.0.1:%d" % agent.port],
                                                   extra_config="remote_write:\n  - url: %s\n" % vm.write_url(),
                                                   flags=["--storage.remote.flush-deadline=1s"],
                                                   external_labels={"cluster": cluster}))
            agent.wait_ready()
        epoch = start.begin()
        wait_until(lambda: time.time() > epoch + END + 6, END + 30, interval=0.5, what="scenario end")
        period = ("--from", began - 5, "--to", time.time() - 1.5)
        vm.flush()
        time.sleep(2)  # remote_write batches and VictoriaMetrics' in-memory buffer
        vm.flush()

        own = {c: rows(report_json("--url", p.base, *period, "--by", "project")) for c, p in proms.items()}
        by_cluster = report_json("--url", vm.base, *period, "--by", "cluster,project")
        self.assertTrue(by_cluster["reconciliation"]["ok"], by_cluster["reconciliation"])
        store = rows(by_cluster)
        self.assertEqual(sorted({k[0] for k in store}), sorted(CLUSTERS))
        for cluster, want in own.items():
            self.assertTrue(want)
            self.assertEqual(sorted(k[1] for k in store if k[0] == cluster), sorted(k[0] for k in want), cluster)
            for (project,), r in want.items():
                self.assert_same(store[(cluster, project)], r, "%s/%s" % (cluster, project))
        # By project alone, a project in both clusters is their sum.
        total = rows(report_json("--url", vm.base, *period, "--by", "project"))
        projects = set(k[0] for r in own.values() for k in r)
        self.assertEqual(sorted(k[0] for k in total), sorted(projects))
        for project in projects:
            want = {f: sum(r[(project,)][f] for r in own.values() if (project,) in r) for f in FIELDS}
            self.assert_same(total[(project,)], want, project)


if __name__ == "__main__":
    import unittest
    unittest.main()
