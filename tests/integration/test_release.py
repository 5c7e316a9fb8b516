"""An operator's release of the GPUs (docs/alerts.md, "Resetting a GPU"): POST /-/release makes
the agent close NVML, so that `gpumeter sim reset` (nvidia-smi -r's check that no process holds
the driver open) succeeds, and the agent takes the GPUs back after the period. What the driver's
sample buffers still hold then is billed; the rest of the release is gap in the ledger, every other
second is billed as the truth says, and no counter goes back. Scenario release.yaml."""
import os
import subprocess
import time

from harness import (AgentTestCase, Agent, BIN, SCENARIOS, ScenarioStart, SimNode, allowed_deviation,
                     expected_owners, http_get, owner_edges, parse_text, sim_env, sim_truth, wait_until)
from test_quirks import ledger_owners, one
from test_reload import post

SCENARIO = os.path.join(SCENARIOS, "release.yaml")
END = 40.0
RELEASE_AT = 10.0  # scenario seconds
PERIOD = 8.0
BUFFERED = 5.0  # what the scenario's sample buffers hold
TOLERANCE = 1e-3
RELEASED = "gpumeter_backend_released_until_timestamp_seconds"
GAP = "gpumeter_ledger_gap_seconds_total"


def reset(env):
    """`gpumeter sim reset --gpu 0`: (exit code, output)."""
    out = subprocess.run([BIN, "sim", "reset", "--scenario", SCENARIO, "--gpu", "0"], capture_output=True,
                         text=True, env=dict(os.environ, **env))
    return out.returncode, out.stdout + out.stderr


class Release(AgentTestCase):
    def test_a_release_lets_a_gpu_be_reset_and_bills_the_rest(self):
        start = ScenarioStart()
        node = self.track(SimNode(SCENARIO, start, kubelet=False))
        config = node.config()
        env = sim_env(start)
        agent = self.track(Agent(scenario=SCENARIO, env=env,
                                 extra_args=node.agent_args(config, "") + ["--web.enable-lifecycle"]))
        agent.wait_ready()
        epoch = start.begin()

        # Bad requests change nothing.
        self.assertEqual(post(agent.base + "/-/release?for=2h")[0], 400)
        self.assertEqual(post(agent.base + "/-/release?seconds=5")[0], 400)
        self.assertEqual(http_get(agent.base + "/-/release")[0], 405)
        code, out = reset(env)
        self.assertEqual(code, 1, out)
        self.assertIn("In use by another client", out)

        timeline = []

        def scrape():
            status, _, body = http_get(agent.base + "/metrics", timeout=2)
            self.assertEqual(status, 200)
            timeline.append((time.time() - epoch, parse_text(body.decode())))
            return timeline[-1][1]

        while time.time() < epoch + RELEASE_AT:
            scrape()
            time.sleep(0.5)
        status, body = post(agent.base + "/-/release?for=%ds" % PERIOD)
        released_at = time.time() - epoch
        self.assertEqual(status, 200, body)
        self.assertIn("nvml: released for 8 s", body)
        code, out = reset(env)
        self.assertEqual(code, 0, out)
        self.assertIn("was successfully reset", out)
        self.assertIn("release", agent.process.log())

        until = wait_until(lambda: one(scrape(), RELEASED, backend="nvml"), 5, interval=0.2,
                           what="the release in the metrics")
        self.assertAlmostEqual(until, epoch + released_at + PERIOD, delta=1.0)
        wait_until(lambda: one(scrape(), "gpu_up", gpu="0") == 0, 5, interval=0.2, what="GPU 0 unread")
        self.assertEqual(one(timeline[-1][1], "gpumeter_backend_up", backend="nvml"), 0)

        back = wait_until(lambda: one(scrape(), "gpu_up", gpu="0") == 1 and time.time() - epoch, PERIOD + 10,
                          interval=0.2, what="the GPUs taken back")
        self.assertGreaterEqual(back, released_at + PERIOD - 0.5)
        self.assertEqual(one(timeline[-1][1], RELEASED, backend="nvml"), 0)
        code, out = reset(env)
        self.assertEqual(code, 1, out)  # held again

        while time.time() < epoch + END + 4:
            scrape()
            time.sleep(0.5)
        self.assertTrue(agent.process.alive())
        last = timeline[-1][1]

        # The gap is the release less what the buffers held when the GPUs were taken back, to
        # within a collection at each end.
        gaps = {g: one(last, GAP, gpu=g) for g in ("0", "1")}
        for g, gap in gaps.items():
            self.assertGreaterEqual(gap, PERIOD - BUFFERED - 1.5, "GPU %s: %r" % (g, gaps))
            self.assertLessEqual(gap, back - released_at - BUFFERED + 1.5, "GPU %s: %r" % (g, gaps))

        # Every owner is billed as the truth says, less at most its share of the gap.
        truth = sim_truth(SCENARIO, 0, END)
        got = ledger_owners(last)
        edges = owner_edges(truth)
        for key, fields in expected_owners(truth).items():
            gap = gaps[key[0]]
            for field in ("allocated_seconds", "busy_seconds"):
                value, measured = fields[field], got.get(key, {}).get(field, 0.0)
                rate = value / fields["allocated_seconds"]
                bound = allowed_deviation(value, fields["allocated_seconds"], edges[key], TOLERANCE)
                self.assertLessEqual(measured, value + bound, "%s of %r" % (field, key))
                self.assertGreaterEqual(measured, value - bound - rate * gap, "%s of %r" % (field, key))

        # No counter went back across the release.
        for (name, labels), _ in last.items():
            if not name.endswith("_total") or not name.startswith(("gpu_", "gpumeter_ledger")):
                continue
            series = [s.get((name, labels)) for _, s in timeline if (name, labels) in s]
            self.assertEqual(series, sorted(series), name)


if __name__ == "__main__":
    import unittest
    unittest.main()
