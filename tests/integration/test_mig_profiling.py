"""GPM per MIG instance through the agent and a real Prometheus, against the simulator's truth, on
mig-h100.yaml (an H100 split 3g + 2g + 1g + 1g, the two 1g instances re-partitioned into one 2g at
45 s). Each instance's GPM gauges (gpu_sm_active_ratio and the other ratios), averaged over a window
of scenario time, match `sim truth`'s per-instance averages within 1 % (0.002 absolute near zero):
the instance's own activity, not its share of the GPU. The re-partition needs no restart: the
destroyed instances' series stop and the new instance's start. PCIe and NVLink throughput have no
per-instance series (the simulated driver answers them for the whole GPU only).

Each gauge sample is GPM's average over the interval between two collections (1 s), so the mean of
the samples scraped in (from, to] covers the window shifted back by under one interval plus the
scrape's lag. Each window is chosen with the same load in the second before its start and the
second before its end, so that shift moves nothing (the test checks this on the truth)."""
import os
import subprocess
import time

from harness import AgentTestCase, Agent, Prometheus, SCENARIOS, ScenarioStart, sim_env, sim_truth, wait_until

SCENARIO = os.path.join(SCENARIOS, "mig-h100.yaml")
# Windows of scenario time per instance: load changes inside some, none at their edges.
WINDOWS = {
    "train": (12.0, 62.0),    # 90 % throughout
    "infer": (12.0, 62.0),    # 50 %, 80 % while asr-c runs (20-60 s), 50 % again
    "small-a": (12.0, 38.0),  # destroyed at 45 s
    "small-b": (12.0, 38.0),
    "merged": (52.0, 62.0),   # created at 45 s; its kernel runs 50-85 s
}
END = max(to for _, to in WINDOWS.values())
RATIOS = {  # family{labels} -> field of the truth's per-instance profiling object
    ("gpu_graphics_engine_active_ratio", ()): "graphics_util_percent",
    ("gpu_sm_active_ratio", ()): "sm_util_percent",
    ("gpu_sm_occupancy_ratio", ()): "sm_occupancy_percent",
    ("gpu_tensor_active_ratio", ()): "tensor_util_percent",
    ("gpu_dram_active_ratio", ()): "dram_bw_util_percent",
    ("gpu_pipe_active_ratio", (("pipe", "fp64"),)): "fp64_util_percent",
    ("gpu_pipe_active_ratio", (("pipe", "fp32"),)): "fp32_util_percent",
    ("gpu_pipe_active_ratio", (("pipe", "fp16"),)): "fp16_util_percent",
}


def instances(truth):
    return {m["name"]: m for m in truth["mig"]["instances"]}


class MigProfiling(AgentTestCase):
    def test_gpm_per_instance_matches_the_truth_across_a_repartition(self):
        start = ScenarioStart()
        agent = self.track(Agent(scenario=SCENARIO, env=sim_env(start),
                                 extra_args=[]))  # profiling is on by default
        prom = self.track(Prometheus(["127.0.0.1:%d" % agent.port]))
        agent.wait_ready()
        epoch = start.begin()
        pid = agent.process.proc.pid
        wait_until(lambda: time.time() > epoch + END + 2, END + 30, interval=0.5, what="scenario time %g s" % (END + 2))
        self.assertTrue(agent.process.alive())
        self.assertEqual(agent.process.proc.pid, pid)
        _, body = agent.metrics()
        r = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

        whole = instances(sim_truth(SCENARIO, 0, 90))
        worst = (0.0, "")
        for name, (start, end) in WINDOWS.items():
            truth = instances(sim_truth(SCENARIO, start, end))[name]
            before_start = instances(sim_truth(SCENARIO, start - 1, start))[name]["profiling"]
            before_end = instances(sim_truth(SCENARIO, end - 1, end))[name]["profiling"]
            mig_uuid = whole[name]["mig_uuid"]
            for (family, labels), field in RATIOS.items():
                # The window's edges see the same load: the collections' lag shifts nothing.
                self.assertAlmostEqual(before_start[field], before_end[field], places=9, msg=(name, field))
                selector = ",".join(['gpu="0"', 'mig_uuid="%s"' % mig_uuid, 'gpu_instance="%d"' % truth["gpu_instance"],
                                     'mig_profile="%s"' % truth["profile"]] + ['%s="%s"' % kv for kv in labels])
                expr = "avg_over_time(%s{%s}[%ds])" % (family, selector, end - start)
                rows = prom.query(expr, at=epoch + end)
                self.assertEqual(len(rows), 1, "%s: %r" % (expr, rows))
                got = float(rows[0]["value"][1])
                want = truth["profiling"][field] / 100
                if want > 0:
                    worst = max(worst, (abs(got - want) / want, "%s{%s}" % (family, selector)))
                self.assertLessEqual(abs(got - want), max(0.01 * want, 0.002),
                                     "%s: agent %.6g, truth %.6g" % (expr, got, want))
        print("largest relative deviation of an instance's GPM gauge from the truth: %.3g %% (%s)" %
              (100 * worst[0], worst[1]))

        # Each instance's own activity, not its slice share of the GPU: infer's two jobs keep it
        # busy 80 % of the time, with 70 % of its SMs busy meanwhile: 56 % SM activity.
        infer = instances(sim_truth(SCENARIO, 25, 35))["infer"]
        self.assertAlmostEqual(infer["profiling"]["graphics_util_percent"], 80, places=6)
        self.assertAlmostEqual(infer["profiling"]["sm_util_percent"], 56, places=6)
        rows = prom.query('avg_over_time(gpu_sm_active_ratio{mig_uuid="%s"}[8s])' % infer["mig_uuid"],
                          at=epoch + 34)
        self.assertAlmostEqual(float(rows[0]["value"][1]), 0.56, delta=0.0056)

        # The re-partition at 45 s: small-a and small-b stop, merged starts, train and infer go on.
        def series(name, at):
            return prom.query('gpu_sm_active_ratio{mig_uuid="%s"}' % whole[name]["mig_uuid"], at=epoch + at)
        for name in ("train", "infer", "small-a", "small-b"):
            self.assertEqual(len(series(name, 40)), 1, name)
        self.assertEqual(series("merged", 40), [])
        for name in ("train", "infer", "merged"):
            self.assertEqual(len(series(name, 50)), 1, name)
            self.assertEqual(len(series(name, END)), 1, name)
        for name in ("small-a", "small-b"):
            self.assertEqual(series(name, 50), [], name)
            self.assertEqual(series(name, END), [], name)
        merged = series("merged", 50)[0]["metric"]
        self.assertEqual((merged["gpu_instance"], merged["mig_profile"]), ("5", "2g.20gb"))
        # No PCIe or NVLink series per instance; the whole GPU has its PCIe.
        self.assertEqual(prom.query('gpu_pcie_throughput_bytes_per_second{mig_uuid!=""}', at=epoch + END), [])
        self.assertEqual(prom.query('gpu_nvlink_throughput_bytes_per_second{mig_uuid!=""}', at=epoch + END), [])
        self.assertEqual(len(prom.query('gpu_pcie_throughput_bytes_per_second{gpu="0", mig_uuid=""}',
                                        at=epoch + END)), 2)


if __name__ == "__main__":
    import unittest
    unittest.main()
