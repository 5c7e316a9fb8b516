"""Collector switches (docs/configuration.md#collectors): `--collector.<name>` and
`--no-collector.<name>` as node_exporter spells them, the config file's `collectors:` section,
which a reload applies without a restart, each collector's success and duration as
`gpumeter_collector_success` / `gpumeter_collector_duration_seconds`, NVLink off by default and
profiling on, and the ledger's rule: it cannot run without the device collector it bills from.

The agent runs on the simulated 8x H100 node of profiling-h100.yaml (NVLink, GPM, jobs from 3 s)."""
import os
import signal
import subprocess
import tempfile
import time

from harness import BIN, AgentTestCase, Agent, SCENARIOS, parse_text, wait_until

SCENARIO = os.path.join(SCENARIOS, "profiling-h100.yaml")
DEVICE_COLLECTORS = ["device", "clocks", "ecc", "pcie", "nvlink", "profiling", "mig"]
# A family each device collector exports on this node.
FAMILY_OF = {
    "device": "gpu_temperature_celsius",
    "clocks": "gpu_clock_hertz",
    "pcie": "gpu_pcie_link_generation",
    "nvlink": "gpu_nvlink_up",
    "profiling": "gpu_sm_active_ratio",
    "mig": "gpu_mig_enabled",
}


def families(samples):
    return {name for name, _ in samples}


def collector_rows(samples, family="gpumeter_collector_success"):
    """{collector: {gpu: value}} of one of the two self-metric families."""
    out = {}
    for (name, labels), value in samples.items():
        if name == family:
            l = dict(labels)
            out.setdefault(l["collector"], {})[l["gpu"]] = value
    return out


class Collectors(AgentTestCase):
    def start(self, extra=(), config=None):
        args = list(extra)
        if config is not None:
            args += ["--config.file", config]
        agent = self.track(Agent(scenario=SCENARIO, extra_args=args))
        agent.wait_ready()
        return agent

    def scrape(self, agent):
        return parse_text(agent.metrics()[1])

    def wait_for(self, agent, pred, what, timeout=30):
        """The first scrape whose samples satisfy `pred`."""
        got = {}

        def check():
            got["s"] = self.scrape(agent)
            return pred(got["s"])
        wait_until(check, timeout, interval=0.5, what=what)
        return got["s"]

    def write(self, path, text):
        # Written beside and renamed, as a ConfigMap swaps its files: a reload never reads half a file.
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)

    def test_defaults_leave_nvlink_off_and_report_every_other_collector(self):
        agent = self.start()
        # Processes run from 3 s: the per-process series and the ledger are on by default; GPM
        # needs two samples.
        s = self.wait_for(agent, lambda s: {"gpu_process_memory_used_bytes", "gpu_sm_active_ratio"} <= families(s),
                          "per-process series and GPM gauges")
        names = families(s)
        for collector in ("device", "clocks", "pcie", "profiling", "mig"):
            self.assertIn(FAMILY_OF[collector], names, collector)
        self.assertIn("gpu_tensor_active_ratio", names)
        self.assertNotIn("gpu_nvlink_up", names)
        self.assertNotIn("gpu_nvlink_transmit_bytes_total", names)
        # Where the driver counts PCIe bytes (R555+, as here) PCIe throughput is GPM's.
        self.assertIn("gpu_pcie_throughput_bytes_per_second", names)
        self.assertIn("gpu_allocated_seconds_total", names)
        s = self.wait_for(agent, lambda s: {"ledger", "events"} <= set(collector_rows(s)), "the ledger's and events' runs")
        success = collector_rows(s)
        duration = collector_rows(s, "gpumeter_collector_duration_seconds")
        # The event wait: one series for the node, success only (a wait has no duration).
        self.assertEqual(success.pop("events"), {"": 1})
        self.assertNotIn("events", duration)
        self.assertEqual(sorted(success),
                         sorted(["device", "clocks", "ecc", "pcie", "profiling", "mig", "processes", "ledger"]))
        for collector, gpus in success.items():
            self.assertEqual(sorted(gpus), [str(g) for g in range(8)], collector)
            self.assertTrue(all(v == 1 for v in gpus.values()), (collector, gpus))
            self.assertEqual(sorted(duration[collector]), sorted(gpus), collector)
            self.assertTrue(all(v >= 0 for v in duration[collector].values()), (collector, duration[collector]))
        self.assertTrue(any(v > 0 for gpus in duration.values() for v in gpus.values()), duration)

    def test_switches_turn_collectors_on_and_off(self):
        agent = self.start(["--collector.nvlink", "--collector.profiling", "--no-collector.clocks",
                            "--no-collector.pcie", "--no-collector.processes"])
        # GPM needs two samples; the ledger has processes from 3 s.
        s = self.wait_for(agent, lambda s: {"gpu_sm_active_ratio", "gpu_allocated_seconds_total"} <= families(s),
                          "GPM gauges and the ledger")
        names = families(s)
        self.assertIn("gpu_nvlink_up", names)
        self.assertIn("gpu_nvlink_transmit_bytes_total", names)
        self.assertIn("gpu_temperature_celsius", names)
        self.assertIn("gpu_pcie_throughput_bytes_per_second", names)  # from GPM, with the pcie collector off
        for gone in ("gpu_clock_hertz", "gpu_clock_event_active", "gpu_performance_state", "gpu_pcie_link_generation",
                     "gpu_pcie_link_width", "gpu_pcie_replay_errors_total", "gpu_pcie_transmit_bytes_total",
                     "gpu_process_memory_used_bytes", "gpu_process_utilization_ratio"):
            self.assertNotIn(gone, names)
        # Without the PCIe collector's field call, the device collector reads the memory temperature itself.
        self.assertTrue(any(n == "gpu_temperature_celsius" and dict(l).get("sensor") == "memory" for n, l in s), s)
        s = self.wait_for(agent, lambda s: {"ledger", "events"} <= set(collector_rows(s)), "the ledger's and events' runs")
        # The process lists are still read for the ledger, but the processes collector is off.
        self.assertEqual(sorted(collector_rows(s)),
                         sorted(["device", "ecc", "nvlink", "profiling", "mig", "ledger", "events"]))

    def test_the_ledger_cannot_lose_the_device_collector(self):
        r = subprocess.run([BIN, "serve", "--web.listen-address", "127.0.0.1:0", "--ledger.state-file", "",
                            "--sim.scenario", SCENARIO, "--no-collector.device"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("--no-collector.ledger", r.stdout + r.stderr)
        r = subprocess.run([BIN, "serve", "--collector.clocks", "--no-collector.clocks"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("--no-collector.clocks", r.stdout + r.stderr)
        # With the ledger off as well, the agent runs without the device basics and without a ledger.
        agent = self.start(["--no-collector.device", "--no-collector.ledger"])
        s = self.wait_for(agent, lambda s: "gpu_process_memory_used_bytes" in families(s), "per-process series")
        names = families(s)
        self.assertIn("gpu_clock_hertz", names)
        for gone in ("gpu_utilization_ratio", "gpu_power_watts", "gpu_energy_joules_total", "gpu_temperature_celsius",
                     "gpu_allocated_seconds_total", "gpumeter_ledger_covered_seconds_total"):
            self.assertNotIn(gone, names)
        rows = collector_rows(s)
        self.assertNotIn("device", rows)
        self.assertNotIn("ledger", rows)
        self.assertEqual(sorted(rows["processes"]), [str(g) for g in range(8)])

    def test_an_interval_reads_a_collector_less_often(self):
        with tempfile.TemporaryDirectory() as d:
            config = os.path.join(d, "gpumeter.yaml")
            self.write(config, "collectors:\n  clocks: {interval: 1h}\n")
            agent = self.start(config=config)
            first = collector_rows(self.wait_for(agent, lambda s: len(collector_rows(s).get("clocks", {})) == 8,
                                                 "every GPU's clocks"), "gpumeter_collector_duration_seconds")
            time.sleep(3.5)
            later = collector_rows(self.scrape(agent), "gpumeter_collector_duration_seconds")
        # The clocks' one run is reported as it was; the device collector ran every second.
        self.assertEqual(first["clocks"], later["clocks"])
        self.assertNotEqual(first["device"], later["device"])

    def test_a_reload_changes_the_collectors_without_a_restart(self):
        with tempfile.TemporaryDirectory() as d:
            config = os.path.join(d, "gpumeter.yaml")
            self.write(config, "collectors:\n  nvlink: {enabled: true}\n  ecc: {enabled: true}\n")
            # A flag wins over the file, before and after a reload.
            agent = self.start(["--no-collector.ecc"], config=config)
            s = self.wait_for(agent, lambda s: "gpu_nvlink_up" in families(s), "NVLink series")
            self.assertIn("gpu_clock_hertz", families(s))
            self.assertNotIn("ecc", collector_rows(s))
            pid = agent.process.proc.pid

            self.write(config, "collectors:\n  nvlink: {enabled: false}\n  clocks: {enabled: false}\n"
                               "  profiling: {enabled: true}\n")
            agent.process.proc.send_signal(signal.SIGHUP)
            # The events collector's row comes with the first event wait's outcome, which can be
            # later than a reload right after the start (under the sanitizers, it was).
            s = self.wait_for(agent, lambda s: "gpu_sm_active_ratio" in families(s) and
                              "gpu_nvlink_up" not in families(s) and "gpu_clock_hertz" not in families(s) and
                              "events" in collector_rows(s), "the reloaded collectors")
            self.assertEqual(s[("gpumeter_config_last_reload_successful", frozenset())], 1)
            self.assertEqual(sorted(collector_rows(s)),
                             sorted(["device", "pcie", "profiling", "mig", "processes", "ledger", "events"]))

            # A config the ledger cannot run with is refused with its reason; the last good one stays.
            self.write(config, "collectors:\n  device: {enabled: false}\n  clocks: {enabled: true}\n")
            agent.process.proc.send_signal(signal.SIGHUP)
            s = self.wait_for(agent, lambda s: s[("gpumeter_config_last_reload_successful", frozenset())] == 0,
                              "the refused reload")
            wait_until(lambda: "--no-collector.ledger" in agent.process.log(), 10, what="the reason in the log")
            time.sleep(2.5)  # two more collections under the old plan
            s = self.scrape(agent)
            self.assertIn("gpu_temperature_celsius", families(s))
            self.assertIn("gpu_sm_active_ratio", families(s))
            self.assertNotIn("gpu_clock_hertz", families(s))
            self.assertEqual(agent.process.proc.pid, pid)
            self.assertTrue(agent.process.alive())
