"""Faults on AMD GPUs, through Debian's real ROCm SMI: the fault tests of test_faults.py repeated
for AMD. scenarios/faults-amd.yaml is a mixed node, NVIDIA GPUs 0-1 through the simulated NVML
and AMD GPUs 2-5 through ROCm SMI reading `gpumeter sim sysfs --follow`'s tree in a private
mount namespace (docs/rocm-behaviour.md). The AMD GPU 3 hangs (its gpu_metrics and hwmon power
reads block), the AMD GPU 4 is lost (its sysfs files are gone), and the AMD GPU 5's KFD process
files hang (a read inside the backend's one-at-a-time process calls); none stalls the other
GPUs, of either vendor, or the scrape, and all recover without a restart. AMD has no Xid, and no
error window is modelled for it (docs/rocm-behaviour.md, "Faults")."""
import os
import tempfile
import time

import harness
import rocm_namespace
from harness import AgentTestCase, Process, SCENARIOS, free_port, http_get, parse_text, sample, wait_until

SCENARIO = os.path.join(SCENARIOS, "faults-amd.yaml")


class RocmFaults(AgentTestCase):
    def test_isolation_and_recovery(self):
        work = tempfile.mkdtemp(prefix="gpumeter-rocm-faults-")
        tree = os.path.join(work, "sysfs")
        start = harness.ScenarioStart()
        env = start.env
        self.track(Process(rocm_namespace.follow_argv(harness.BIN, tree, SCENARIO), env=env, workdir=work,
                           name="sim-sysfs"))
        wait_until(lambda: rocm_namespace.tree_ready(tree), 30, what="sim sysfs")
        port = free_port()
        base = "http://127.0.0.1:%d" % port
        agent = self.track(Process(rocm_namespace.argv(tree, [
            harness.BIN, "serve", "--web.listen-address", "127.0.0.1:%d" % port, "--collect.interval", "1s",
            "--sim.scenario", SCENARIO, "--ledger.state-file", ""]), env=env, name="gpumeter"))
        wait_until(lambda: http_get(base + "/-/ready", timeout=2)[0] == 200, 30, what="agent ready")
        epoch = start.begin()  # the first fault is at 6 s

        timeline = []  # (scenario time, samples)
        deadline = epoch + 22
        while time.time() < deadline:
            t = time.time() - epoch
            # The client gives up after 2 s: a scrape must never wait on a hung GPU's reads.
            status, _, body = http_get(base + "/metrics", timeout=2)
            self.assertEqual(status, 200, "scrape failed at t=%.1f" % t)
            timeline.append((t, parse_text(body.decode())))
            time.sleep(0.25)
        self.assertTrue(agent.alive())

        def up(samples, gpu):
            return sample(samples, "gpu_up", gpu=str(gpu))

        def during(a, b):
            return [s for t, s in timeline if a <= t <= b]

        def process_series(samples, gpu):
            return [n for (n, ls) in samples if n.startswith("gpu_process_") and ("gpu", str(gpu)) in ls]

        self.assertEqual(sample(timeline[-1][1], "gpumeter_backend_up", backend="rocm_smi"), 1)
        self.assertEqual(sample(timeline[-1][1], "gpumeter_backend_up", backend="nvml"), 1)
        vendors = {dict(ls)["gpu"]: dict(ls)["vendor"] for (n, ls) in timeline[-1][1] if n == "gpu_info"}
        self.assertEqual(vendors, {"0": "nvidia", "1": "nvidia", "2": "amd", "3": "amd", "4": "amd", "5": "amd"})

        # GPUs 0-2 (NVIDIA 0 and 1, AMD 2) have no fault: up in every scrape, and their energy
        # counters keep moving while GPU 3 hangs and GPU 4 is lost.
        for gpu in (0, 1, 2):
            for t, s in timeline:
                if t > 1:
                    self.assertEqual(up(s, gpu), 1, "gpu %d at t=%.1f" % (gpu, t))
            energy = [sample(s, "gpu_energy_joules_total", gpu=str(gpu)) for s in during(7, 14)]
            self.assertGreater(len(set(energy)), 4, "gpu %d kept being collected during the faults" % gpu)

        # GPU 3 hangs from 6 s for 8 s: down once two intervals pass, back afterwards.
        self.assertTrue(all(up(s, 3) == 1 for s in during(1, 5.5)))
        self.assertTrue(any(up(s, 3) == 0 for s in during(8.5, 13.5)))
        self.assertTrue(all(up(s, 3) == 1 for s in during(17, 22)))
        down = [s for s in during(8.5, 13.5) if up(s, 3) == 0][0]
        # A down GPU's stale readings and processes are not served as current ones.
        self.assertFalse([ls for (n, ls) in down if n == "gpu_power_watts" and ("gpu", "3") in ls])
        self.assertEqual(process_series(down, 3), [])
        energy3 = [sample(s, "gpu_energy_joules_total", gpu="3") for s in during(17, 22)]
        self.assertGreater(len(set(energy3)), 4, "gpu 3 is collected again after the hang")

        # GPU 5's process files hang from 6 s for 8 s: it is down (its worker waits in the process
        # calls), the other AMD GPUs stay up (checked above), and it comes back with its process.
        self.assertTrue(any(up(s, 5) == 0 for s in during(8.5, 13.5)))
        self.assertTrue(all(up(s, 5) == 1 for s in during(17, 22)))
        self.assertEqual(sample(timeline[-1][1], "gpu_process_memory_used_bytes", gpu="5", pid="5005"), 8 * 2**30)

        # GPU 4 is lost from 6 s to 12 s, then comes back in the same agent process, with its job.
        before = during(3, 5.5)[-1]
        self.assertEqual(sample(before, "gpu_process_memory_used_bytes", gpu="4", pid="5004"), 8 * 2**30)
        self.assertTrue(any(up(s, 4) == 0 for s in during(7, 11)))
        self.assertTrue(all(up(s, 4) == 1 for s in during(15, 22)))
        lost = [s for s in during(7, 11) if up(s, 4) == 0][0]
        self.assertEqual(process_series(lost, 4), [])
        self.assertFalse([ls for (n, ls) in lost if n == "gpu_power_watts" and ("gpu", "4") in ls])
        self.assertEqual(sample(timeline[-1][1], "gpu_process_memory_used_bytes", gpu="4", pid="5004"), 8 * 2**30)

        # The log says what happened, once per transition (a hung call fails nothing: it is late).
        self.assertEqual(agent.stop(), 0)
        log = agent.log()
        self.assertIn('msg="GPU collection recovered" gpu=4', log)
        self.assertIn("NOT_SUPPORTED", log)  # how the library reports a GPU whose files are gone


if __name__ == "__main__":
    import unittest
    unittest.main()
