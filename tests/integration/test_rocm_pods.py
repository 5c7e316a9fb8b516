"""Pods on AMD GPUs named in the ledger, through Debian's real ROCm SMI.

pods-amd.yaml (three pods on 4 MI300X) is played in real time: `gpumeter sim sysfs --follow`
keeps the amdgpu tree in step with the scenario clock, `sim procfs` writes the pods' processes,
and `sim kubelet` lists each pod's GPUs as AMD's device plugin does: resource amd.com/gpu, the
GPUs' PCI addresses as device ids (docs/kubelet.md, "Device ids"). Two agents read the same tree
in private mount namespaces (docs/rocm-behaviour.md), one per ledger policy, through the default
`kubelet.resource_names`; a real Prometheus scrapes both.

* process policy: every owner (GPU, project, user, namespace, pod) against `gpumeter sim truth`,
  within 0.1 % plus one AMD edge allowance per job edge (test_rocm_ledger.py);
* scheduler policy: allocated, idle-allocated and busy seconds of every pod against `gpumeter sim
  truth --policy scheduler`, within 0.1 % plus, at each pod edge, one kubelet refresh and the
  List call's own time, and at each process edge the AMD edge allowance (test_allocations.py)."""
import json
import os
import subprocess
import time

import yaml

import harness
import rocm_namespace
import test_allocations
import test_rocm_ledger
from harness import AgentTestCase, Process, Prometheus, SCENARIOS, SimNode, free_port, wait_until

SCENARIO = os.path.join(SCENARIOS, "pods-amd.yaml")
END = 40.0        # the scenario's duration
SETTLE = 5.0      # a checkpoint publishes the last usage, then a scrape reads it
REFRESH = 1.0     # the kubelet refresh interval of this test
SOURCE_READ = 0.25  # one List call's own time on a loaded machine (test_allocations.py)
TOLERANCE = 1e-3  # 0.1 %
AMD_EDGE_SECONDS = test_rocm_ledger.AMD_EDGE_SECONDS
FIELDS = {"gpu_allocated_seconds_total": "allocated_seconds",
          "gpu_idle_allocated_seconds_total": "idle_allocated_seconds",
          "gpu_busy_seconds_total": "busy_seconds"}
RESERVED = ("__idle__", "__unattributed__")
LEDGER = ('ledger:\n  allocation: %s\n  checkpoint_interval: 1s\n'
          '  idle_power_watts: {"AMD Instinct MI300X": 140}\n')


def load_scenario():
    with open(SCENARIO) as f:
        return yaml.safe_load(f)


def scheduler_truth():
    out = subprocess.run([harness.BIN, "sim", "truth", "--scenario", SCENARIO, "--from", "0", "--to", str(END),
                          "--format", "json", "--policy", "scheduler"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


class RocmPods(AgentTestCase):
    def start_agent(self, node, tree, policy, env):
        config = node.config(LEDGER % policy, refresh="%gs" % REFRESH)
        path = os.path.join(node.dir, "gpumeter-%s.yaml" % policy)
        os.rename(config, path)
        port = free_port()
        agent = self.track(Process(rocm_namespace.argv(tree, [
            harness.BIN, "serve", "--web.listen-address", "127.0.0.1:%d" % port, "--collect.interval", "200ms",
            "--nvml.library", os.path.join(node.dir, "no-libnvidia-ml.so.1")]
            + node.agent_args(path, os.path.join(node.dir, "ledger-%s.json" % policy))), env=env,
            name="gpumeter-%s" % policy))
        return agent, "127.0.0.1:%d" % port

    def test_pods_on_amd_gpus_under_both_policies(self):
        start = harness.ScenarioStart()
        env = start.env
        node = self.track(SimNode(SCENARIO, start))
        tree = os.path.join(node.dir, "sysfs")
        self.track(Process(rocm_namespace.follow_argv(harness.BIN, tree, SCENARIO), env=env, workdir=node.dir,
                           name="sim-sysfs"))
        wait_until(lambda: rocm_namespace.tree_ready(tree), 30, what="sim sysfs")
        agents = {policy: self.start_agent(node, tree, policy, env) for policy in ("process", "scheduler")}
        prom = self.track(Prometheus([target for _, target in agents.values()]))
        for policy, (agent, target) in agents.items():
            wait_until(lambda: harness.http_get("http://%s/-/ready" % target, timeout=2)[0] == 200, 30,
                       what="%s agent ready" % policy)
        epoch = start.begin()
        wait_until(lambda: time.time() > epoch + END + SETTLE, END + 30, interval=0.5, what="scenario end")
        for policy, (agent, _) in agents.items():
            self.assertIn("ROCm SMI backend up", agent.log())
            self.assertIn("kubelet pod-resources API up", agent.log())
        self.assertEqual({t["health"] for t in prom.targets()}, {"up"}, prom.targets())
        at = time.time() - 1.5
        self.check_process_policy(prom, agents["process"][1], at)
        self.check_scheduler_policy(prom, agents["scheduler"][1], at)

    def scraped(self, prom, instance, at, fields, key_of):
        got = {}
        for metric, field in fields.items():
            for r in prom.query('%s{instance="%s"}' % (metric, instance), at=at):
                key = key_of(r["metric"])
                if key is None:
                    continue
                acc = got.setdefault(key, {})
                acc[field] = acc.get(field, 0.0) + float(r["value"][1])
        return got

    def check_process_policy(self, prom, instance, at):
        truth = harness.sim_truth(SCENARIO, 0, END)
        want = harness.expected_owners(truth)
        edges = harness.owner_edges(truth)
        # Every job is in a pod: each owner names its pod (the truth's key has namespace and pod).
        self.assertTrue(all(key[3] and key[4] for key in want), sorted(want))

        def key_of(m):
            return (m["gpu"], m["project"], m.get("user", ""), m.get("namespace", ""), m.get("pod", ""),
                    m.get("hpc_job", ""))
        got = self.scraped(prom, instance, at, harness.COUNTERS, key_of)
        self.assertEqual({k for k in got if k[1] not in RESERVED}, set(want))
        worst = (0.0, "")
        for key, fields in want.items():
            for field, value in fields.items():
                measured = got[key].get(field, 0.0)
                if value > 0:
                    worst = max(worst, (abs(measured - value) / value, "%s %r" % (field, key)))
                self.assertLessEqual(abs(measured - value),
                                     harness.allowed_deviation(value, fields["allocated_seconds"], edges[key],
                                                               TOLERANCE, AMD_EDGE_SECONDS),
                                     "process policy, %s of %r: ledger %.6g, truth %.6g" % (field, key, measured, value))
        print("process policy: largest relative deviation from the truth: %.3g (%s)" % worst)
        print("process policy: allocated seconds, ledger - truth: %s" % ", ".join(
            "%s/%s gpu %s %+.3f s of %.1f" % (k[3], k[4], k[0], got[k]["allocated_seconds"] - f["allocated_seconds"],
                                              f["allocated_seconds"]) for k, f in sorted(want.items())))

    def check_scheduler_policy(self, prom, instance, at):
        scenario = load_scenario()
        pods = {(a["kubernetes"]["namespace"], a["kubernetes"]["pod"]): a["name"] for a in scenario["allocations"]}

        def key_of(m):
            if m.get("project") in RESERVED:
                return None
            return (int(m["gpu"]), pods.get((m.get("namespace", ""), m.get("pod", "")), "?%r" % (m,)))
        got = self.scraped(prom, instance, at, FIELDS, key_of)
        want = {(o["gpu"], o["name"]): o for o in scheduler_truth()["owners"]}
        self.assertEqual(set(got), set(want))
        pod_edges, proc_edges = test_allocations.edges_per_gpu(scenario, END)
        worst = []
        for key, o in want.items():
            gpu = key[0]
            for field in FIELDS.values():
                v, measured = o[field], got[key].get(field, 0.0)
                rate = 1.0 if field != "busy_seconds" else (v / o["allocated_seconds"] if o["allocated_seconds"] else 0)
                edges = pod_edges.get(gpu, 0) * (REFRESH + SOURCE_READ) + proc_edges.get(gpu, 0) * AMD_EDGE_SECONDS
                bound = TOLERANCE * v + edges * rate + 1e-6
                worst.append((round(abs(measured - v), 4), field, key, round(bound, 4)))
                self.assertLessEqual(abs(measured - v), bound,
                                     "scheduler policy, %s of %r: ledger %.6g, truth %.6g" % (field, key, measured, v))
        print("scheduler policy: largest deviations (seconds, field, owner, bound): %r" % sorted(worst, reverse=True)[:5])
        print("scheduler policy: allocated seconds, ledger - truth: %s" % ", ".join(
            "%s gpu %d %+.3f s of %.1f" % (k[1], k[0], got[k]["allocated_seconds"] - o["allocated_seconds"],
                                           o["allocated_seconds"]) for k, o in sorted(want.items())))


if __name__ == "__main__":
    import unittest
    unittest.main()
