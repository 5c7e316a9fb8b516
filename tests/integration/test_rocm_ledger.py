"""The usage ledger on AMD GPUs against the simulator's ground truth, through a real Prometheus.

ledger-amd.yaml (the owners of ledger-mixed.yaml on 8 MI300X) is played in real time: `gpumeter
sim sysfs --follow` keeps the amdgpu tree in step with the scenario clock, `sim procfs` and `sim
kubelet` name the owners (pods by their AMD GPUs' PCI addresses, as AMD's device plugin lists them), and the agent reads the GPUs through Debian's real ROCm SMI in a private
mount namespace with the tree over /sys/class and /sys/module (docs/rocm-behaviour.md). The
graphics client viz-render is billed from its DRM fdinfo engine time, which `sim procfs` writes:
its busy seconds carry no sampling error, only the time after the last counter the agent read."""
import os
import time

import harness
import rocm_namespace
import test_ledger
from harness import AgentTestCase, Process, Prometheus, SCENARIOS, ScenarioStart, SimNode, free_port, wait_until

SCENARIO = os.path.join(SCENARIOS, "ledger-amd.yaml")
# What one job edge may move on AMD: a process is billed from the first collection that lists it
# (every 200 ms here), and the tree shows it up to one writer period (100 ms) after it starts
# (docs/rocm-behaviour.md); NVIDIA's edge is one driver sample period.
AMD_EDGE_SECONDS = 0.2 + 0.1
# A graphics client's engine counter is exact, and a client first seen is billed all of its time,
# so its start moves nothing; at its end, the time since the last counter read is lost: up to one
# collection interval plus one procfs writer period (docs/rocm-behaviour.md).
GRAPHICS_PROJECT = "viz"
GRAPHICS_END_SECONDS = 0.2 + 0.1
LEDGER_CONFIG = 'ledger:\n  allocation: process\n  checkpoint_interval: 2s\n  idle_power_watts: {"AMD Instinct MI300X": 140}\n'


class RocmLedgerAccuracy(AgentTestCase):
    def test_owners_match_truth(self):
        start = ScenarioStart()
        env = start.env
        node = self.track(SimNode(SCENARIO, start))
        tree = os.path.join(node.dir, "sysfs")
        self.track(Process(rocm_namespace.follow_argv(harness.BIN, tree, SCENARIO), env=env, workdir=node.dir,
                           name="sim-sysfs"))
        wait_until(lambda: rocm_namespace.tree_ready(tree), 30, what="sim sysfs")
        config = node.config(LEDGER_CONFIG)
        port = free_port()
        agent = self.track(Process(rocm_namespace.argv(tree, [
            harness.BIN, "serve", "--web.listen-address", "127.0.0.1:%d" % port, "--collect.interval", "200ms",
            "--nvml.library", os.path.join(node.dir, "no-libnvidia-ml.so.1")]
            + node.agent_args(config, os.path.join(node.dir, "ledger.json"))), env=env, name="gpumeter"))
        prom = self.track(Prometheus(["127.0.0.1:%d" % port]))
        wait_until(lambda: harness.http_get("http://127.0.0.1:%d/-/ready" % port, timeout=2)[0] == 200, 30,
                   what="agent ready")
        epoch = start.begin()
        end = test_ledger.END
        wait_until(lambda: time.time() > epoch + end + test_ledger.SETTLE, end + 20, interval=0.5,
                   what="scenario end")
        self.assertIn("ROCm SMI backend up", agent.log())
        self.assertEqual(prom.targets()[0]["health"], "up", prom.targets())
        self.check(prom, end)

    def check(self, prom, end):
        truth = harness.sim_truth(SCENARIO, 0, end)
        edges = harness.owner_edges(truth)
        # Owners by GPU, project, user, pod and Slurm job: the simulated kubelet lists the pods'
        # GPUs as AMD's device plugin does (amd.com/gpu, PCI addresses; docs/kubelet.md).
        want = harness.expected_owners(truth)
        got = harness.scraped_owners(prom, time.time() - 1.5)
        self.assertTrue(any(key[4] for key in want), "the scenario has pods")
        multi_gpu = {str(j["gpu"]) for j in truth["jobs"] if sum(1 for k in truth["jobs"] if k["pid"] == j["pid"]) > 1}
        worst = (0.0, "")
        for key, fields in want.items():
            self.assertIn(key, got, "owner %r missing; scraped owners: %r" % (key, sorted(got)))
            for field, value in fields.items():
                if field == "memory_byte_seconds" and key[0] in multi_gpu:
                    continue  # ROCm SMI sums a multi-GPU process's VRAM: not known per GPU
                measured = got[key].get(field, 0.0)
                if value > 0:
                    worst = max(worst, (abs(measured - value) / value, "%s %r" % (field, key)))
                print("%s %r: ledger %.6g truth %.6g" % (field, key, measured, value))
                self.assertLessEqual(abs(measured - value),
                                     harness.allowed_deviation(value, fields["allocated_seconds"], edges[key],
                                                               test_ledger.TOLERANCE, AMD_EDGE_SECONDS),
                                     "%s of %r: ledger %.6g, truth %.6g" % (field, key, measured, value))
        print("largest relative deviation from the truth: %.3g (%s)" % worst)
        graphics = [k for k in want if k[1] == GRAPHICS_PROJECT]
        self.assertEqual(len(graphics), 1, sorted(want))
        key = graphics[0]
        value, measured = want[key]["busy_seconds"], got[key].get("busy_seconds", 0.0)
        rate = value / want[key]["allocated_seconds"]
        print("graphics client busy seconds: ledger %.6f truth %.6f (%.3g)" % (measured, value,
                                                                               (measured - value) / value))
        self.assertLessEqual(measured, value * (1 + test_ledger.TOLERANCE), "graphics busy above its engine time")
        self.assertGreaterEqual(measured, value * (1 - test_ledger.TOLERANCE) - GRAPHICS_END_SECONDS * rate,
                                "graphics busy of %r: ledger %.6f, truth %.6f" % (key, measured, value))


if __name__ == "__main__":
    import unittest
    unittest.main()
