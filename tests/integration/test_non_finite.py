"""Non-finite values through the agent (scenario gpm-non-finite.yaml: an H100 in MIG mode whose
nvmlGpmMetricsGet answers NaN from 6 s to 14 s). A MIG device's busy time is its GPM SM activity,
so a NaN the backend let through reached the MIG ledger, was exported as NaN, saved as null, and
made the next start set the whole state file aside.

The backend drops every non-finite value and counts it by call
(gpumeter_backend_non_finite_values_total); no exported value is NaN or infinite; the saved state
holds no null and loads again. Then one amount of that state file is made a NaN (null), as an
older agent would have saved it: the file still loads, every other owner resumes from its saved
counters, the bad amount restarts at 0, the log names it, and gpumeter_ledger_state_dropped_values
counts it."""
import json
import math
import os
import tempfile
import time

from harness import AgentTestCase, Agent, SCENARIOS, ScenarioStart, SimNode, http_get, parse_text, sim_env

SCENARIO = os.path.join(SCENARIOS, "gpm-non-finite.yaml")
END = 24.0
NON_FINITE = "gpumeter_backend_non_finite_values_total"


def owners_of(state):
    """{(mig_uuid, project): owner entry} of GPU 0's MIG ledgers in a saved state."""
    out = {}
    for entry in state["gpus"].values():
        for unit in entry.get("mig", []):
            for o in unit["ledger"]["owners"]:
                out[(unit["mig_uuid"], o["owner"]["project"])] = o
    return out


class NonFinite(AgentTestCase):
    def start_agent(self, node, config, state, start):
        agent = self.track(Agent(scenario=SCENARIO, env=sim_env(start), extra_args=node.agent_args(config, state)))
        agent.wait_ready()
        return agent

    def scrape(self, agent):
        status, _, body = http_get(agent.base + "/metrics", timeout=5)
        self.assertEqual(status, 200)
        return parse_text(body.decode())

    def test_nan_is_dropped_counted_and_never_costs_the_state(self):
        start = ScenarioStart()
        node = self.track(SimNode(SCENARIO, start, kubelet=False))
        config = node.config("ledger:\n  checkpoint_interval: 1s\n")
        state = os.path.join(tempfile.mkdtemp(prefix="gpumeter-nan-"), "ledger.json")
        agent = self.start_agent(node, config, state, start)
        epoch = start.begin()
        while time.time() < epoch + END + 2:
            samples = self.scrape(agent)
            bad = sorted(name for (name, _), v in samples.items() if not math.isfinite(v))
            self.assertEqual(bad, [], "non-finite values exported at t=%.1f" % (time.time() - epoch))
            time.sleep(0.5)
        samples = self.scrape(agent)
        dropped = [v for (n, ls), v in samples.items()
                   if n == NON_FINITE and dict(ls).get("call") == "nvmlGpmMetricsGet" and dict(ls).get("gpu") == "0"]
        self.assertEqual(len(dropped), 1, "counted by call and GPU")
        self.assertGreater(dropped[0], 0)
        busy = {dict(ls)["project"]: v for (n, ls), v in samples.items()
                if n == "gpu_busy_seconds_total" and dict(ls).get("mig_uuid")}
        self.assertGreater(busy.get("vision", 0), 0, busy)
        self.assertGreater(busy.get("speech", 0), 0, busy)
        self.assertEqual(agent.stop(), 0)

        # The saved state holds no null, and a new agent resumes from it.
        with open(state) as f:
            text = f.read()
        self.assertNotIn("null", text)
        saved = owners_of(json.loads(text))
        self.assertLessEqual({"vision", "speech"}, {p for _, p in saved}, sorted(saved))
        again = self.start_agent(node, config, state, start)
        self.assertIn("ledger state loaded", again.process.log())
        self.assertNotIn("set aside", again.process.log())
        self.assertEqual(again.stop(), 0)

        # One amount saved as a NaN (null): the file loads, the rest resumes, the amount restarts.
        doc = json.loads(open(state).read())
        saved = {k: dict(o) for k, o in owners_of(doc).items()}
        victim = next(k for k in sorted(saved) if k[1] == "vision")
        for entry in doc["gpus"].values():
            for unit in entry.get("mig", []):
                for o in unit["ledger"]["owners"]:
                    if (unit["mig_uuid"], o["owner"]["project"]) == victim:
                        o["busy_seconds"] = None
        with open(state, "w") as f:
            json.dump(doc, f)
        third = self.start_agent(node, config, state, start)
        log = third.process.log()
        self.assertNotIn("set aside", log)
        self.assertIn("an amount that cannot be true restarts at 0", log)
        self.assertIn('\\"busy_seconds\\" was null', log)
        samples = self.scrape(third)
        self.assertEqual([v for (n, _), v in samples.items() if n == "gpumeter_ledger_state_dropped_values"], [1])
        for (uuid, project), o in saved.items():
            got = [v for (n, ls), v in samples.items() if n == "gpu_allocated_seconds_total"
                   and dict(ls).get("mig_uuid") == uuid and dict(ls).get("project") == project]
            self.assertEqual(len(got), 1, (uuid, project))
            self.assertGreaterEqual(got[0], o["allocated_seconds"], "%s %s resumed" % (uuid, project))
            busy = [v for (n, ls), v in samples.items() if n == "gpu_busy_seconds_total"
                    and dict(ls).get("mig_uuid") == uuid and dict(ls).get("project") == project]
            if (uuid, project) == victim:
                self.assertLess(busy[0], o["busy_seconds"], "the NaN amount restarted at 0")
            else:
                self.assertGreaterEqual(busy[0], o["busy_seconds"], "%s %s resumed" % (uuid, project))


if __name__ == "__main__":
    import unittest
    unittest.main()
