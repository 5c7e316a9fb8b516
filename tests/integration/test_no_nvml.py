"""Without any NVML library the agent still starts, says why once, and reports itself not ready:
NVML is absent (no library), and with no AMD GPU either, no backend is up."""
import os
import tempfile

from harness import AgentTestCase, Agent, http_get, parse_text, sample


class NoNvml(AgentTestCase):
    def test_starts_serves_backend_down_and_explains(self):
        missing = os.path.join(tempfile.mkdtemp(), "libnvidia-ml.so.1")
        agent = self.track(Agent(nvml_library=missing))
        agent.wait_healthy()
        _, body = agent.metrics()
        samples = parse_text(body)
        self.assertEqual(sample(samples, "gpumeter_backend_absent", backend="nvml"), 1)
        self.assertNotIn("gpumeter_backend_up", [n for (n, _) in samples], "an absent backend is not down")
        self.assertFalse([n for (n, _) in samples if n.startswith("gpu_")], "no GPU series without a backend")

        status, _, text = http_get(agent.base + "/-/ready")
        self.assertEqual(status, 503)
        self.assertIn(b"NVML library not found", text)
        self.assertIn(missing.encode(), text)

        status, _, page = http_get(agent.base + "/")
        self.assertEqual(status, 200)
        self.assertIn(b"NVML library not found", page)

        self.assertEqual(agent.stop(), 0)
        lines = [l for l in agent.process.log().splitlines() if "NVML" in l and "level=warn" in l]
        self.assertEqual(len(lines), 1, agent.process.log())
        self.assertIn(missing, lines[0])

    def test_library_without_nvml_symbols_is_reported(self):
        # A real shared library that is not NVML: loads, but lacks the required entry points.
        agent = self.track(Agent(nvml_library="libz.so.1"))
        agent.wait_healthy()
        status, _, text = http_get(agent.base + "/-/ready")
        self.assertEqual(status, 503)
        self.assertIn(b"lacks required NVML entry points", text)
        _, body = agent.metrics()
        self.assertEqual(sample(parse_text(body), "gpumeter_backend_up", backend="nvml"), 0)
