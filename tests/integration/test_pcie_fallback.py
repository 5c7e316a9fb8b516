"""PCIe throughput on drivers without the PCIe byte-count fields (197/198 arrived with R555) and
GPUs without GPM (A100), through the agent, against the simulator's truth (pcie-fallback.yaml:
three A100s on R535 under constant loads, docs/metrics.md "PCIe throughput before R555").

The agent reads nvmlDeviceGetPcieThroughput, which measures for 20 ms inside the call, on a
thread of its own, and exports the rates as gpu_pcie_throughput_bytes_per_second, never as the
byte counters. Each GPU's gauge must equal the model's rate times the GPU's busy fraction in the
truth within 0.5 % (the driver answers whole KB/s, 1024 bytes each: under 1e-6 of these rates),
and the idle GPU's must be 0, not absent. GPU 1's throughput call hangs for 6 s from 4 s: its
collections go on meanwhile (gpu_up stays 1 and its energy counter moves), which they could not
if the call ran on the GPU's collection worker."""
import os
import time

from harness import AgentTestCase, Agent, SCENARIOS, ScenarioStart, parse_text, sample, sim_env, sim_truth, wait_until

SCENARIO = os.path.join(SCENARIOS, "pcie-fallback.yaml")
RATES = {"transmit": 3e9, "receive": 6e9}  # the model's pcie rates at 100 % (bytes per second)
FAMILY = "gpu_pcie_throughput_bytes_per_second"
TOLERANCE = 0.005
HANG = (4.0, 10.0)  # GPU 1's throughput call, scenario seconds


class PcieFallback(AgentTestCase):
    def scrape_at(self, agent, epoch, t):
        """The agent's samples once scenario time `t` has passed."""
        wait_until(lambda: time.time() > epoch + t, t + 30, interval=0.1, what="scenario time %.1f s" % t)
        return parse_text(agent.metrics()[1])

    def check_rates(self, samples, truth, gpus, when):
        for g in truth["gpus"]:
            if g["gpu"] not in gpus:
                continue
            busy = g["busy_seconds"] / truth["window_seconds"]
            for direction, full in RATES.items():
                want = busy * full
                try:
                    got = sample(samples, FAMILY, gpu=str(g["gpu"]), direction=direction)
                except KeyError as e:
                    self.fail("%s: no %s{gpu=%s, direction=%s} (%s)" % (when, FAMILY, g["gpu"], direction, e))
                self.assertLessEqual(abs(got - want), TOLERANCE * max(want, 1.0),
                                     "%s: GPU %s %s: agent %.6g B/s, truth %.6g B/s" % (when, g["gpu"], direction,
                                                                                         got, want))

    def test_r535_a100_throughput_matches_the_truth_and_stays_off_the_worker(self):
        start = ScenarioStart()
        agent = self.track(Agent(scenario=SCENARIO, env=sim_env(start)))
        agent.wait_ready()
        epoch = start.begin()
        truth = sim_truth(SCENARIO, 1, 3)

        # A round of the reader and a collection after it: every GPU's rates by 3 s.
        samples = self.scrape_at(agent, epoch, 3.0)
        self.check_rates(samples, truth, {0, 1, 2}, "at 3 s")
        names = {name for (name, _labels) in samples}
        # R535 counts no PCIe bytes: the rates are not passed off as the driver's counters.
        self.assertNotIn("gpu_pcie_transmit_bytes_total", names)
        self.assertNotIn("gpu_pcie_receive_bytes_total", names)
        self.assertIn("gpu_pcie_link_generation", names)

        # GPU 1's throughput call hangs from its first read after 4 s (at most a second later)
        # until 6 s after. Its collections do not wait for it: the GPU stays up, and what its
        # worker reads keeps moving.
        first = self.scrape_at(agent, epoch, HANG[0] + 2.5)
        second = self.scrape_at(agent, epoch, HANG[0] + 4.5)
        for s, when in ((first, "6.5 s"), (second, "8.5 s")):
            self.assertEqual(sample(s, "gpu_up", gpu="1"), 1.0, "GPU 1 down at %s, in the hung call" % when)
        self.assertGreater(sample(second, "gpu_energy_joules_total", gpu="1"),
                           sample(first, "gpu_energy_joules_total", gpu="1"))

        # After the hang every GPU's rates are read again.
        samples = self.scrape_at(agent, epoch, HANG[1] + 2.5)
        self.check_rates(samples, truth, {0, 1, 2}, "at 12.5 s")


if __name__ == "__main__":
    import unittest
    unittest.main()
