"""Time on a faulty GPU, end to end: a GPU falls off the bus (Xid 79, then every NVML call
answers GPU_IS_LOST) under a job; the agent charges the time from the Xid until the job's process
has left to the job with fault="true", and `gpumeter report` against a real Prometheus bills it
to the job (faulty: bill) or keeps it on a __faulty__ line (faulty: exclude), with owners + idle
+ faulty = the covered GPU time."""
import os
import tempfile
import time

from harness import (AgentTestCase, Agent, Prometheus, SCENARIOS, ScenarioStart, SimNode, report_json, sim_env,
                     sim_truth, wait_until)

SCENARIO = os.path.join(SCENARIOS, "faulty-gpu.yaml")
END = 40.0
XID_AT, JOB_END = 12.0, 30.0  # the struck job's GPU is faulty from its Xid until its process leaves
INTERVAL = 1.0  # --collect.interval: a fault span's edges are known to within a reading
EDGE = 0.2  # a driver sample period: a job's own edges (harness.EDGE_SECONDS)
PRICES = ('gpu_models: {"NVIDIA H100 80GB HBM3": {gpu_hour: 3.6}}\n'
          "idle: {policy: separate}\n")


class FaultyGpu(AgentTestCase):
    def test_faulty_time_is_marked_and_billed_or_kept_apart(self):
        start = ScenarioStart()
        node = self.track(SimNode(SCENARIO, start))
        config = node.config("ledger:\n  allocation: process\n  checkpoint_interval: 1s\n"
                             '  idle_power_watts: {"NVIDIA H100 80GB HBM3": 70}\n')
        state = os.path.join(tempfile.mkdtemp(prefix="gpumeter-faulty-"), "ledger.json")
        agent = self.track(Agent(scenario=SCENARIO, env=sim_env(start), extra_args=node.agent_args(config, state)))
        prom = self.track(Prometheus(["127.0.0.1:%d" % agent.port]))
        agent.wait_ready()
        epoch = start.begin()
        wait_until(lambda: time.time() > epoch + END + 6, END + 30, interval=0.5, what="scenario end")
        period = (epoch - 5, time.time() - 1.5)

        log = agent.process.log()
        self.assertIn("an error that kills work struck the GPU", log)
        self.assertIn("GPU not answering", log)
        self.assertIn("the processes an error struck have left the GPU", log)

        # The ledger: the struck job's time before the Xid is healthy, after it faulty; the other
        # GPU's job is never faulty.
        truth = {j["name"]: j for j in sim_truth(SCENARIO, 0, END)["jobs"]}
        before = {j["name"]: j for j in sim_truth(SCENARIO, 0, XID_AT)["jobs"]}
        series = {}
        for r in prom.query("gpu_allocated_seconds_total", at=period[1]):
            m = r["metric"]
            key = (m["gpu"], m["project"], m.get("fault", ""))
            series[key] = series.get(key, 0.0) + float(r["value"][1])
        gaps = {r["metric"]["gpu"]: float(r["value"][1])
                for r in prom.query("gpumeter_ledger_gap_seconds_total", at=period[1])}
        print("ledger allocated seconds:", sorted(series.items()), "gaps:", gaps)
        healthy = series.get(("1", "struck", ""), 0.0)
        faulty = series.get(("1", "struck", "true"), 0.0)
        want_healthy = before["struck"]["allocated_seconds"]
        self.assertLessEqual(abs(healthy - want_healthy), INTERVAL + EDGE, "struck before its Xid: %.3f s" % healthy)
        want_faulty = truth["struck"]["allocated_seconds"] - want_healthy
        # What the ledger could not integrate at all (a lost window longer than the driver's
        # buffers) is a gap, not faulty time.
        self.assertLessEqual(abs(faulty + gaps.get("1", 0.0) - want_faulty), 2 * INTERVAL + EDGE,
                             "struck after its Xid: %.3f s faulty" % faulty)
        self.assertGreater(faulty, 0.5 * want_faulty)
        self.assertNotIn(("0", "steady", "true"), series)
        self.assertLessEqual(abs(series[("0", "steady", "")] - truth["steady"]["allocated_seconds"]), 2 * EDGE)

        # The report: billed as any time, or kept out of the owners' charges.
        prices_dir = tempfile.mkdtemp(prefix="gpumeter-faulty-pricing-")
        docs = {}
        for policy in ("bill", "exclude"):
            path = os.path.join(prices_dir, policy + ".yaml")
            with open(path, "w") as f:
                f.write(PRICES + "faulty: %s\n" % policy)
            docs[policy] = report_json("--url", prom.base, "--from", period[0], "--to", period[1], "--by", "project",
                                       "--pricing", path)
        rows = {policy: {r["key"]["project"]: r for r in doc["rows"]} for policy, doc in docs.items()}
        billed, kept = rows["bill"], rows["exclude"]
        self.assertEqual(docs["exclude"]["faulty_policy"], "exclude")
        self.assertNotIn("__faulty__", billed)
        self.assertAlmostEqual(billed["struck"]["allocated_seconds"], healthy + faulty, delta=1e-6)
        self.assertAlmostEqual(kept["struck"]["allocated_seconds"], healthy, delta=1e-6)
        self.assertTrue(kept["__faulty__"]["faulty"])
        # The faulty line holds the struck job's faulty time and any idle time in a fault span.
        self.assertGreaterEqual(kept["__faulty__"]["allocated_seconds"], faulty - 1e-6)
        self.assertLessEqual(kept["__faulty__"]["allocated_seconds"], faulty + 2 * INTERVAL + EDGE)
        # The tenant is billed nothing for that time: its cost is its healthy seconds' only.
        self.assertAlmostEqual(kept["struck"]["cost"]["total"], healthy / 3600 * 3.6, delta=1e-9)
        self.assertAlmostEqual(billed["struck"]["cost"]["total"], (healthy + faulty) / 3600 * 3.6, delta=1e-9)
        self.assertAlmostEqual(kept["steady"]["allocated_seconds"], billed["steady"]["allocated_seconds"], delta=1e-9)
        # Owners + idle + faulty = capacity, under both policies.
        for policy, doc in docs.items():
            rec = doc["reconciliation"]
            self.assertTrue(rec["ok"], (policy, rec))
            self.assertAlmostEqual(rec["owners_seconds"] + rec["idle_seconds"] + rec["faulty_seconds"],
                                   rec["covered_seconds"], delta=1e-6 * rec["covered_seconds"])
        self.assertEqual(docs["bill"]["reconciliation"]["faulty_seconds"], 0)
        self.assertAlmostEqual(docs["exclude"]["reconciliation"]["faulty_seconds"], kept["__faulty__"]["allocated_seconds"],
                               delta=1e-9)


if __name__ == "__main__":
    import unittest
    unittest.main()
