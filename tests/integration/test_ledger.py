"""The usage ledger against the simulator's exact ground truth, read back through a real
Prometheus: mixed owners (Kubernetes pods named by the kubelet, Slurm jobs under cgroup v1 and
v2, an exclusive job, a time-sliced GPU, a driver reload), 100 short processes, an agent killed
mid-run and restarted, and a corrupt state file."""
import glob
import os
import signal
import tempfile
import time

from harness import (AgentTestCase, Agent, COUNTERS, Prometheus, SCENARIOS, ScenarioStart, SimNode,
                     check_ledger_against_truth, sim_env, wait_until)

MIXED = os.path.join(SCENARIOS, "ledger-mixed.yaml")
CHURN = os.path.join(SCENARIOS, "ledger-churn.yaml")
END = 43.0  # both scenarios' duration
TOLERANCE = 1e-3  # 0.1 %, plus one driver sample period per job edge (harness.allowed_deviation)
# After the scenario's end: a checkpoint (2 s) publishes the last usage, then a scrape reads it.
SETTLE = 5.0
LEDGER_CONFIG = ('ledger:\n  allocation: process\n  checkpoint_interval: 2s\n'
                 '  idle_power_watts: {"NVIDIA H100 80GB HBM3": 70}\n')


class LedgerAccuracy(AgentTestCase):
    def start(self, scenario, epoch, port=None, state=None):
        """An agent (and, the first time, the node) on `epoch`: unix seconds, or a ScenarioStart."""
        node = getattr(self, "node", None)
        if node is None:
            self.node = node = self.track(SimNode(scenario, epoch))
            self.state = state or os.path.join(tempfile.mkdtemp(prefix="gpumeter-ledger-"), "ledger.json")
            self.config = node.config(LEDGER_CONFIG)
        return self.track(Agent(scenario=scenario, port=port, env=sim_env(epoch),
                                extra_args=node.agent_args(self.config, self.state)))

    def check_against_truth(self, prom, scenario, truth_to):
        return check_ledger_against_truth(self, prom, scenario, truth_to, TOLERANCE, idle_energy=True)

    def test_mixed_owners_match_truth(self):
        start = ScenarioStart()
        agent = self.start(MIXED, start)
        prom = self.track(Prometheus(["127.0.0.1:%d" % agent.port]))
        agent.wait_ready()
        epoch = start.begin()
        end = END
        wait_until(lambda: time.time() > epoch + end + SETTLE, end + 20, interval=0.5, what="scenario end")
        self.check_against_truth(prom, MIXED, end)
        # The driver reload reset the device's energy counter; no ledger counter was reset.
        self.assertTrue(prom.query("resets(gpu_energy_joules_total[2m]) > 0"), "the driver reload was seen")
        for metric in COUNTERS:
            self.assertEqual(prom.query("resets(%s[2m]) > 0" % metric), [], metric)
        self.assertEqual(prom.query("gpumeter_kubelet_up")[0]["value"][1], "1")

    def test_agent_killed_and_restarted_mid_run_loses_nothing(self):
        start = ScenarioStart()
        agent = self.start(MIXED, start)
        prom = self.track(Prometheus(["127.0.0.1:%d" % agent.port]))
        agent.wait_ready()
        epoch = start.begin()
        end = END
        # SIGKILL between two checkpoints: the state on disk is up to one interval old.
        wait_until(lambda: time.time() > epoch + 15.0, 30, what="mid-run")
        agent.process.proc.send_signal(signal.SIGKILL)
        agent.process.proc.wait()
        time.sleep(2)
        again = self.start(MIXED, start, port=agent.port)
        again.wait_ready()
        self.assertIn("ledger state loaded", again.process.log())
        wait_until(lambda: time.time() > epoch + end + SETTLE, end + 20, interval=0.5, what="scenario end")
        truth, got = self.check_against_truth(prom, MIXED, end)
        # Prometheus saw every ledger counter continue: no reset anywhere.
        for metric in COUNTERS:
            self.assertEqual(prom.query("resets(%s[2m]) > 0" % metric), [], metric)
        # The driver's sample buffer covered the downtime, so nothing is a gap.
        gaps = prom.query("sum(gpumeter_ledger_gap_seconds_total)")
        self.assertEqual(float(gaps[0]["value"][1]), 0.0)

    def test_hundred_short_processes(self):
        start = ScenarioStart()
        agent = self.start(CHURN, start)
        prom = self.track(Prometheus(["127.0.0.1:%d" % agent.port]))
        agent.wait_ready()
        epoch = start.begin()
        end = END
        wait_until(lambda: time.time() > epoch + end + SETTLE, end + 20, interval=0.5, what="scenario end")
        truth, got = self.check_against_truth(prom, CHURN, end)
        self.assertGreaterEqual(len({j["pid"] for j in truth["jobs"]}), 100)

    def test_corrupt_state_file_is_set_aside_and_replaced(self):
        epoch = time.time()
        state_dir = tempfile.mkdtemp(prefix="gpumeter-ledger-")
        state = os.path.join(state_dir, "ledger.json")
        with open(state, "w") as f:
            f.write('{"format": "gpumeter-ledger-state", "version": 1, "gpus": {"GPU-1": ')
        agent = self.start(MIXED, epoch, state=state)
        agent.wait_ready()
        wait_until(lambda: os.path.exists(state), 20, what="a new state file")
        aside = glob.glob(state + ".corrupt-*")
        self.assertEqual(len(aside), 1)
        with open(aside[0]) as f:
            self.assertIn('"GPU-1": ', f.read())  # kept as it was, for inspection
        log = agent.process.log()
        self.assertIn("ledger state file unusable", log)
        self.assertIn("not valid JSON", log)
        self.assertTrue(agent.process.alive())


if __name__ == "__main__":
    import unittest
    unittest.main()
