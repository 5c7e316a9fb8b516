"""The live /metrics of an agent on the simulated 8x H100 node, checked by real peers:
promtool (no warnings), the strict OpenMetrics parser, and gzip decoders."""
import gzip
import os
import subprocess
import zlib

from harness import AgentTestCase, Agent, DEPLOY_SCENARIOS, http_get, parse_text, sample, wait_until

SCENARIO = os.path.join(DEPLOY_SCENARIOS, "h100-8x-three-teams.yaml")
OM_ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
             "text/plain;version=0.0.4;q=0.5,*/*;q=0.1")


def strip_age(body):
    return "\n".join(l for l in body.splitlines() if "gpumeter_snapshot_age_seconds" not in l)


class LiveExposition(AgentTestCase):
    @classmethod
    def setUpClass(cls):
        cls.agent = Agent(scenario=SCENARIO)
        cls.agent.wait_ready()
        # Wait until every GPU has been collected at least once.
        wait_until(lambda: all(sample(parse_text(cls.agent.metrics()[1]), "gpu_up", gpu=str(i)) == 1
                               for i in range(8)), 30, what="8 GPUs up")

    @classmethod
    def tearDownClass(cls):
        cls.agent.stop()
        print(cls.agent.process.log()[-2000:])

    def test_text_passes_promtool_without_warnings(self):
        hdrs, body = self.agent.metrics()
        self.assertEqual(hdrs["content-type"], "text/plain; version=0.0.4; charset=utf-8")
        r = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True, text=True)
        self.assertEqual((r.returncode, r.stdout + r.stderr), (0, ""))

    def test_openmetrics_parses_strictly(self):
        from prometheus_client.openmetrics.parser import text_string_to_metric_families
        hdrs, body = self.agent.metrics({"Accept": OM_ACCEPT})
        self.assertEqual(hdrs["content-type"], "application/openmetrics-text; version=1.0.0; charset=utf-8")
        self.assertTrue(body.endswith("# EOF\n"))
        families = {f.name: f for f in text_string_to_metric_families(body)}
        self.assertEqual(families["gpu_energy_joules"].type, "counter")
        self.assertIn("gpumeter_snapshot_age_seconds", families)
        self.assertEqual(len([s for s in families["gpu_up"].samples]), 8)

    def test_gzip_when_asked_and_identical_content(self):
        for accept in (None, OM_ACCEPT):
            headers = {"Accept-Encoding": "gzip"}
            if accept:
                headers["Accept"] = accept
            status, hdrs, raw = http_get(self.agent.base + "/metrics", headers=headers)
            self.assertEqual(status, 200)
            self.assertEqual(hdrs.get("content-encoding"), "gzip")
            self.assertEqual(int(hdrs["content-length"]), len(raw))
            unzipped = gzip.decompress(raw).decode()
            # zlib's own decoder, strict about the single-member framing and the CRC.
            self.assertEqual(zlib.decompress(raw, 16 + zlib.MAX_WBITS).decode(), unzipped)
            _, plain = self.agent.metrics({"Accept": accept} if accept else None)
            self.assertIn("gpumeter_snapshot_age_seconds", unzipped)
            # Snapshots change between the two requests, so compare the structure.
            names = lambda b: sorted({l.split("{")[0].split(" ")[0] for l in b.splitlines() if l and l[0] != "#"})
            self.assertEqual(names(unzipped), names(plain))
        status, hdrs, _ = http_get(self.agent.base + "/metrics", headers={"Accept-Encoding": "gzip;q=0, identity"})
        self.assertNotIn("content-encoding", hdrs)

    def test_every_product_metric_is_present(self):
        samples = parse_text(self.agent.metrics()[1])
        names = {n for (n, _) in samples}
        for m in ["gpu_up", "gpu_info", "gpu_utilization_ratio", "gpu_memory_utilization_ratio",
                  "gpu_memory_total_bytes", "gpu_memory_used_bytes", "gpu_memory_free_bytes",
                  "gpu_temperature_celsius", "gpu_power_watts", "gpu_power_limit_watts", "gpu_energy_joules_total",
                  "gpu_clock_hertz", "gpu_performance_state", "gpu_pcie_link_generation", "gpu_pcie_link_width",
                  "gpu_pcie_replay_errors_total", "gpu_pcie_transmit_bytes_total", "gpu_pcie_receive_bytes_total",
                  "gpu_clock_event_active", "gpu_ecc_errors_total", "gpu_remapped_rows",
                  "gpumeter_build_info", "gpumeter_backend_up", "gpumeter_collector_success",
                  "gpumeter_collector_duration_seconds", "gpumeter_snapshot_age_seconds"]:
            self.assertIn(m, names)
        # H100 SXM boards have no fan: the value is left out, not printed as a placeholder.
        self.assertNotIn("gpu_fan_speed_ratio", names)
        info = [dict(ls) for (n, ls) in samples if n == "gpu_info"]
        self.assertEqual(len(info), 8)
        for i in info:
            self.assertEqual(i["model"], "NVIDIA H100 80GB HBM3")
            self.assertEqual(i["vendor"], "nvidia")
            self.assertTrue(i["uuid"].startswith("GPU-"))
            self.assertRegex(i["pci_bus_id"], r"^[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.0$")
        self.assertEqual(sample(samples, "gpu_memory_total_bytes", gpu="0"), 81559 * 1024 * 1024)
        self.assertEqual(sample(samples, "gpu_power_limit_watts", gpu="0"), 700)
        # No series carries job or instance: Prometheus owns those labels.
        self.assertFalse([ls for (_, ls) in samples if any(k in ("job", "instance") for k, _ in ls)])

    def test_no_sentinels_or_special_values(self):
        for (name, _), v in parse_text(self.agent.metrics()[1]).items():
            self.assertTrue(v == v and abs(v) < 1e18, (name, v))

    def test_endpoints(self):
        status, hdrs, page = http_get(self.agent.base + "/")
        self.assertEqual(status, 200)
        self.assertIn("text/html", hdrs["content-type"])
        for needle in (b"/metrics", b"/-/healthy", b"/-/ready", b"NVIDIA H100 80GB HBM3"):
            self.assertIn(needle, page)
        self.assertEqual(http_get(self.agent.base + "/-/healthy")[0], 200)
        self.assertEqual(http_get(self.agent.base + "/-/ready")[0], 200)
        self.assertEqual(http_get(self.agent.base + "/nope")[0], 404)
