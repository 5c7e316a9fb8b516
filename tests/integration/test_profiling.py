"""Profiling metrics (NVML GPM) and NVLink through a real Prometheus, against the simulator's
truth. On profiling-h100.yaml (8x H100: varied profile mixes, a square wave, a ramp, NVLink traffic,
a link down 30-50 s; GPU 2 with the gpm_batch_collapse quirk, so a batched request would read
every metric as the first) each GPU's GPM gauges, averaged over scenario time 30-80 s, match `sim truth`'s
exact averages within 1 % (0.002 absolute near zero); the NVLink byte counters grow as the truth's
bytes per link. On profiling-a100.yaml (A100: no GPM) the GPM families are absent, not zero,
while NVLink is served, and PCIe throughput comes from the pcie collector (R550 counts no PCIe
bytes: the driver's 20 ms sample, test_pcie_fallback.py); `promtool check metrics` is clean on both.

Each gauge sample is GPM's average over the interval between two collections (1 s here), so the
mean of the samples scraped in (30 s, 80 s] covers 50 s of GPU time shifted back by under one
interval plus the scrape's lag. That shift trades up to 1 s of the window's end for as much
before its start: the bound adds the truth's difference between the second before 30 s and the
second before 80 s, over the window (the ramp's GPU 5 moves; the others are level or periodic)."""
import os
import subprocess
import time

from harness import AgentTestCase, Agent, Prometheus, SCENARIOS, ScenarioStart, parse_text, sim_env, sim_truth, wait_until

H100 = os.path.join(SCENARIOS, "profiling-h100.yaml")
A100 = os.path.join(SCENARIOS, "profiling-a100.yaml")
# NVLink is off by default and profiling on (docs/configuration.md#collectors); both named here.
ON = ["--collector.profiling", "--collector.nvlink"]
FROM, TO = 30.0, 80.0
GAUGES = {  # family{labels} -> field of the truth's profiling object, scale to the family's unit
    ("gpu_graphics_engine_active_ratio", ()): ("graphics_util_percent", 0.01),
    ("gpu_sm_active_ratio", ()): ("sm_util_percent", 0.01),
    ("gpu_sm_occupancy_ratio", ()): ("sm_occupancy_percent", 0.01),
    ("gpu_tensor_active_ratio", ()): ("tensor_util_percent", 0.01),
    ("gpu_dram_active_ratio", ()): ("dram_bw_util_percent", 0.01),
    ("gpu_pipe_active_ratio", (("pipe", "fp64"),)): ("fp64_util_percent", 0.01),
    ("gpu_pipe_active_ratio", (("pipe", "fp32"),)): ("fp32_util_percent", 0.01),
    ("gpu_pipe_active_ratio", (("pipe", "fp16"),)): ("fp16_util_percent", 0.01),
    ("gpu_pcie_throughput_bytes_per_second", (("direction", "transmit"),)): ("pcie_tx_mib_per_second", 2**20),
    ("gpu_pcie_throughput_bytes_per_second", (("direction", "receive"),)): ("pcie_rx_mib_per_second", 2**20),
    ("gpu_nvlink_throughput_bytes_per_second", (("direction", "transmit"),)): ("nvlink_tx_mib_per_second", 2**20),
    ("gpu_nvlink_throughput_bytes_per_second", (("direction", "receive"),)): ("nvlink_rx_mib_per_second", 2**20),
}
PROFILING_FAMILIES = {family for family, _ in GAUGES}


def promtool_clean(test, body):
    r = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True, text=True)
    test.assertEqual(r.returncode, 0, r.stdout + r.stderr)


class Profiling(AgentTestCase):
    def test_h100_gpm_and_nvlink_match_the_truth(self):
        start = ScenarioStart()
        agent = self.track(Agent(scenario=H100, env=sim_env(start), extra_args=ON))
        prom = self.track(Prometheus(["127.0.0.1:%d" % agent.port]))
        agent.wait_ready()
        epoch = start.begin()
        wait_until(lambda: time.time() > epoch + TO + 2, TO + 30, interval=0.5, what="scenario time 82 s")
        _, body = agent.metrics()
        promtool_clean(self, body)
        truth = sim_truth(H100, FROM, TO)
        before_start, before_end = sim_truth(H100, FROM - 1, FROM), sim_truth(H100, TO - 1, TO)
        at = epoch + TO
        worst = (0.0, "")
        for g in truth["gpus"]:
            gpu = str(g["gpu"])
            for (family, labels), (field, scale) in GAUGES.items():
                selector = ",".join(['gpu="%s"' % gpu, 'mig_uuid=""'] + ['%s="%s"' % kv for kv in labels])
                rows = prom.query("avg_over_time(%s{%s}[%ds])" % (family, selector, TO - FROM), at=at)
                want = g["profiling"][field] * scale
                self.assertEqual(len(rows), 1, "%s{%s}: %r" % (family, selector, rows))
                got = float(rows[0]["value"][1])
                dev = abs(got - want) / want if want > 0 else 0.0
                if want > 0:
                    worst = max(worst, (dev, "%s{%s}" % (family, selector)))
                # The samples may lag the window by up to two seconds (one collection interval,
                # and a scrape late by another under ASan on a loaded machine): each second of lag
                # swaps at most the last second's value for the first's.
                shift = 2 * abs(before_start["gpus"][g["gpu"]]["profiling"][field] -
                                before_end["gpus"][g["gpu"]]["profiling"][field]) * scale / (TO - FROM)
                bound = max(0.01 * want, 0.002 * scale * 100 if scale == 0.01 else 0.0) + shift
                self.assertLessEqual(abs(got - want), bound, "%s{%s}: agent %.6g, truth %.6g" % (family, selector,
                                                                                                 got, want))
        print("largest relative deviation of a GPM gauge from the truth: %.3g %% (%s)" % (100 * worst[0], worst[1]))

        # NVLink: each link's bytes over the window against the truth's. The counter is read at each
        # collection, so the increase between the scrapes at 30 s and 80 s covers 50 s shifted by
        # under a second at each end: within 3 % (GPU 1's link 5 is down for 30-50 s).
        for g in truth["gpus"]:
            for link in g.get("nvlink", []):
                if link["tx_bytes"] <= 0:
                    continue
                expr = 'gpu_nvlink_transmit_bytes_total{gpu="%s", link="%d"}' % (g["gpu"], link["link"])
                end = prom.query(expr, at=at)
                start = prom.query(expr, at=epoch + FROM)
                self.assertTrue(end and start, expr)
                grown = float(end[0]["value"][1]) - float(start[0]["value"][1])
                self.assertAlmostEqual(grown, link["tx_bytes"], delta=0.03 * link["tx_bytes"], msg=expr)
        # Link 5 of GPU 1 was down for 20 s of the window: up again at the end, down in between.
        down = prom.query('min_over_time(gpu_nvlink_up{gpu="1", link="5"}[%ds])' % (TO - FROM), at=at)
        self.assertEqual(down[0]["value"][1], "0")
        self.assertEqual(prom.query('gpu_nvlink_up{gpu="1", link="5"}', at=at)[0]["value"][1], "1")
        self.assertEqual(prom.query('count(gpu_nvlink_up{gpu="0"})', at=at)[0]["value"][1], "18")

    def test_a100_has_no_profiling_metrics_and_keeps_nvlink(self):
        # Profiling as by default: on, and silent on a GPU without GPM.
        agent = self.track(Agent(scenario=A100, extra_args=["--collector.nvlink"]))
        agent.wait_ready()
        wait_until(lambda: "gpu_nvlink_up{" in agent.metrics()[1], 30, what="NVLink series")
        time.sleep(2.5)  # two more collections: GPM would have a pair by now
        _, body = agent.metrics()
        promtool_clean(self, body)
        families = {name for (name, _labels) in parse_text(body)}
        pcie = "gpu_pcie_throughput_bytes_per_second"
        self.assertEqual(families & (PROFILING_FAMILIES - {pcie}), set())
        self.assertIn(pcie, families)  # the pcie collector's, not GPM's
        self.assertNotIn("gpu_pcie_transmit_bytes_total", families)
        self.assertIn("gpu_nvlink_transmit_bytes_total", families)
        self.assertIn("gpu_utilization_ratio", families)


if __name__ == "__main__":
    import unittest
    unittest.main()
