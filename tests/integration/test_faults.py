"""Faults on the simulated node: a hung call on one GPU leaves the others and the scrape alone and
marks that GPU down; a lost GPU and a burst of unknown errors recover without a restart; Xids
are counted per code. Scenario: scenarios/faults.yaml."""
import os
import time

from harness import AgentTestCase, Agent, SCENARIOS, ScenarioStart, http_get, parse_text, sample, sim_env

SCENARIO = os.path.join(SCENARIOS, "faults.yaml")


class Faults(AgentTestCase):
    def test_isolation_and_recovery(self):
        start = ScenarioStart()
        agent = self.track(Agent(scenario=SCENARIO, env=sim_env(start)))
        agent.wait_ready()
        epoch = start.begin()  # the first fault is at 6 s

        timeline = []  # (scenario time, samples)
        deadline = epoch + 22
        while time.time() < deadline:
            t = time.time() - epoch
            # The client gives up after 2 s: a scrape must never wait on a driver call.
            status, _, body = http_get(agent.base + "/metrics", timeout=2)
            self.assertEqual(status, 200, "scrape failed at t=%.1f" % t)
            timeline.append((t, parse_text(body.decode())))
            time.sleep(0.25)
        self.assertTrue(agent.process.alive())

        def up(samples, gpu):
            return sample(samples, "gpu_up", gpu=str(gpu))

        def during(a, b):
            return [s for t, s in timeline if a <= t <= b]

        # GPU 0 has no fault: up in every scrape, and its energy counter keeps moving throughout.
        for t, s in timeline:
            if t > 1:
                self.assertEqual(up(s, 0), 1, "gpu 0 at t=%.1f" % t)
        energy0 = [sample(s, "gpu_energy_joules_total", gpu="0") for s in during(7, 14)]
        self.assertGreater(len(set(energy0)), 4, "gpu 0 kept being collected during the hang")

        # GPU 1 hangs from 6 s for 8 wall seconds: down once two intervals pass, back afterwards.
        self.assertTrue(all(up(s, 1) == 1 for s in during(1, 5.5)))
        self.assertTrue(any(up(s, 1) == 0 for s in during(8.5, 13.5)))
        self.assertTrue(all(up(s, 1) == 1 for s in during(18, 22)))
        down = [s for s in during(8.5, 13.5) if up(s, 1) == 0][0]
        # A down GPU's stale readings are not served as current ones.
        self.assertFalse([ls for (n, ls) in down if n == "gpu_power_watts" and ("gpu", "1") in ls])

        # GPU 2 is lost from 6 s to 12 s, then comes back in the same agent process.
        self.assertTrue(any(up(s, 2) == 0 for s in during(7, 11)))
        self.assertTrue(all(up(s, 2) == 1 for s in during(15, 22)))
        # Its job's per-process series go with it, and come back with it.
        def process_series(samples, gpu):
            return [n for (n, ls) in samples
                    if n.startswith("gpu_process_") and ("gpu", str(gpu)) in ls]
        before = during(3, 5.5)[-1]
        self.assertEqual(sample(before, "gpu_process_memory_used_bytes", gpu="2", pid="5002"), 8 * 2**30)
        lost = [s for s in during(7, 11) if up(s, 2) == 0][0]
        self.assertEqual(process_series(lost, 2), [])
        self.assertEqual(process_series(down, 1), [])  # the hung GPU's too
        self.assertEqual(sample(timeline[-1][1], "gpu_process_memory_used_bytes", gpu="2", pid="5002"),
                         8 * 2**30)

        # GPU 4 answers NVML_ERROR_UNKNOWN from 6 s to 10 s.
        self.assertTrue(any(up(s, 4) == 0 for s in during(7, 9.5)))
        self.assertTrue(all(up(s, 4) == 1 for s in during(13, 22)))

        # GPU 3: two Xid events, counted per code.
        last = timeline[-1][1]
        self.assertEqual(sample(last, "gpu_xid_errors_total", gpu="3", xid="79"), 1)
        self.assertEqual(sample(last, "gpu_xid_errors_total", gpu="3", xid="13"), 1)
        self.assertFalse([ls for (n, ls) in last if n == "gpu_xid_errors_total" and ("gpu", "3") not in ls])

        # The log says what happened, once per transition.
        self.assertEqual(agent.stop(), 0)
        log = agent.process.log()
        self.assertIn("xid=79", log)
        self.assertIn('msg="GPU collection recovered" gpu=2', log)
