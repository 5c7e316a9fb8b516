"""`gpumeter burn` on the simulated CUDA driver, end to end: burn -> simulated libcuda.so.1 ->
its log -> the simulated NVML -> the agent -> the ledger. Each burn process shows up under its
real pid with the memory it holds, busy exactly while its kernels run, and its owner comes from
its real /proc/<pid>/environ. The agent bills each one within 0.5% of the busy and allocated time
burn reports, plus one collection interval per edge (docs/real-hardware.md)."""
import json
import os
import signal
import subprocess
import tempfile
import time
import unittest

import sanitizer_preload

sanitizer_preload.preload(__name__)

import harness
from harness import BIN, SCENARIOS

SCENARIO = os.path.join(SCENARIOS, "burn-2x-h100.yaml")
INTERVAL = 1.0  # the agent's --collect.interval, seconds
MIB = 1 << 20


def within(measured, expected, edges=2):
    """The acceptance bound: 0.5% of burn's figure plus one collection interval per edge."""
    return abs(measured - expected) <= 0.005 * expected + edges * INTERVAL


class BurnTest(harness.AgentTestCase):
    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp(prefix="gpumeter-burn-")
        self.env = {"GPUMETER_SIM_SCENARIO": SCENARIO, "GPUMETER_SIM_EPOCH": repr(time.time()),
                    "GPUMETER_SIM_CUDA_DIR": os.path.join(self.dir, "cuda")}
        self.config = os.path.join(self.dir, "gpumeter.yaml")
        with open(self.config, "w") as f:
            f.write("attribution:\n  environment: [GPUMETER_PROJECT]\n"
                    "project:\n  default: unknown\n  rules:\n    - {source: env.GPUMETER_PROJECT}\n")

    def agent(self, extra_env=None):
        env = dict(self.env, **(extra_env or {}))
        a = self.track(harness.Agent(SCENARIO, env=env, interval="1s", extra_args=["--config.file", self.config]))
        a.wait_ready()
        return a

    def burn(self, *args, project=None, check=True):
        env = dict(os.environ, **self.env)
        if project:
            env["GPUMETER_PROJECT"] = project
        r = subprocess.run([BIN, "burn", "--sim.scenario", SCENARIO] + list(args), env=env,
                           capture_output=True, text=True, timeout=120)
        if check:
            self.assertEqual(r.returncode, 0, r.stderr)
        return r

    def start_burn(self, *args, project):
        env = dict(os.environ, **self.env, GPUMETER_PROJECT=project)
        return subprocess.Popen([BIN, "burn", "--sim.scenario", SCENARIO] + list(args), env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def ledger(self, agent, name, uuid):
        samples = harness.parse_text(agent.metrics()[1])
        return {dict(ls)["project"]: v for (n, ls), v in samples.items()
                if n == name and dict(ls).get("uuid") == uuid}

    def test_agent_bills_each_burn_as_it_reports(self):
        agent = self.agent()
        # Two owners at once on the two GPUs, then a third on the first GPU once it is free.
        solo = self.start_burn("--gpus", "0", "--duration", "8s", "--duty", "100", "--memory", "1GiB", project="solo")
        duty = self.start_burn("--gpus", "1", "--duration", "8s", "--duty", "30", "--memory", "512MiB", project="duty")
        reports = {}
        for name, p in (("solo", solo), ("duty", duty)):
            out, err = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 0, err)
            reports[name] = json.loads(out)
        r = self.burn("--gpus", "0", "--duration", "6s", "--duty", "50", "--period", "200ms", "--memory", "0",
                      project="late")
        reports["late"] = json.loads(r.stdout)
        time.sleep(2.5 * INTERVAL)  # the last collection after the last context is destroyed

        for name, report in reports.items():
            g = report["gpus"][0]
            self.assertAlmostEqual(g["run_seconds"], report["duration_seconds"], delta=0.05, msg=name)
            self.assertEqual(report["pid"] > 0, True)
            allocated = self.ledger(agent, "gpu_allocated_seconds_total", g["uuid"])
            busy = self.ledger(agent, "gpu_busy_seconds_total", g["uuid"])
            memory = self.ledger(agent, "gpu_memory_byte_seconds_total", g["uuid"])
            self.assertTrue(within(allocated.get(name, 0), g["seconds"]),
                            "%s: allocated %.3f s, burn was on the GPU %.3f s" % (name, allocated.get(name, 0), g["seconds"]))
            self.assertTrue(within(busy.get(name, 0), g["busy_seconds"]),
                            "%s: busy %.3f s, burn reports %.3f s" % (name, busy.get(name, 0), g["busy_seconds"]))
            self.assertAlmostEqual(g["busy_seconds"] / g["run_seconds"] * 100, report["duty_percent"], delta=1.0)
            expected_memory = g["memory_bytes"] * g["seconds"]
            self.assertLessEqual(abs(memory.get(name, 0) - expected_memory),
                                 0.005 * expected_memory + 2 * INTERVAL * g["memory_bytes"], name)
        # The GPUs were idle otherwise: busy time goes to no one else, but for what the agent
        # saw before its first sight of a process (at most one interval per edge).
        for uuid in {rep["gpus"][0]["uuid"] for rep in reports.values()}:
            busy = self.ledger(agent, "gpu_busy_seconds_total", uuid)
            others = sum(v for k, v in busy.items() if k not in reports)
            self.assertLessEqual(others, INTERVAL, busy)

    def test_a_running_burn_is_a_compute_process_with_its_memory_and_duty(self):
        agent = self.agent()
        p = self.start_burn("--gpus", "1", "--duration", "6s", "--duty", "40", "--memory", "3GiB", project="live")
        try:
            def listed():
                s = harness.parse_text(agent.metrics()[1])
                return {dict(ls)["pid"]: v for (n, ls), v in s.items() if n == "gpu_process_memory_used_bytes"}
            mem = harness.wait_until(lambda: listed().get(str(p.pid)), 15, what="burn in the process list")
            self.assertEqual(mem, 3 * 1024 * MIB)
            time.sleep(2.5)
            s = harness.parse_text(agent.metrics()[1])
            util = harness.sample(s, "gpu_process_utilization_ratio", pid=str(p.pid))
            self.assertAlmostEqual(util, 0.40, delta=0.03)
            device = harness.sample(s, "gpu_utilization_ratio", gpu="1")
            self.assertAlmostEqual(device, 0.40, delta=0.11)  # one 200 ms sample period: 40% +- one 100 ms edge
        finally:
            out, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 0, err)

    def test_cuda_visible_devices_and_uuids(self):
        r = self.burn("--gpus", "0", "--duration", "200ms", "--memory", "0", check=False)
        first = json.loads(r.stdout)["gpus"][0]["uuid"]
        env = dict(os.environ, **self.env, CUDA_VISIBLE_DEVICES="1")
        r = subprocess.run([BIN, "burn", "--sim.scenario", SCENARIO, "--gpus", "0", "--duration", "200ms",
                            "--memory", "0"], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        second = json.loads(r.stdout)["gpus"][0]["uuid"]
        self.assertNotEqual(first, second)
        self.assertRegex(second, r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
        # The UUIDs are the ones the simulated NVML gives the same GPUs.
        agent = self.agent()
        labels = {dict(ls)["gpu"]: dict(ls)["uuid"] for (n, ls), v in harness.parse_text(agent.metrics()[1]).items()
                  if n == "gpu_info"}
        self.assertEqual((labels["0"], labels["1"]), (first, second))
        r = subprocess.run([BIN, "burn", "--sim.scenario", SCENARIO, "--gpus", "1", "--duration", "1s"], env=env,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1)
        self.assertIn("GPU 1: the driver has 1 GPUs", r.stderr)

    def test_several_owners_from_one_command(self):
        agent = self.agent()
        r = self.burn("--gpus", "0", "--duration", "3s", "--duty", "20", "--memory", "0",
                      "--as", "GPUMETER_PROJECT=blue", "--as", "GPUMETER_PROJECT=green")
        processes = json.loads(r.stdout)["processes"]
        self.assertEqual([p["env"] for p in processes], [{"GPUMETER_PROJECT": "blue"}, {"GPUMETER_PROJECT": "green"}])
        self.assertNotEqual(processes[0]["pid"], processes[1]["pid"])
        time.sleep(2.5 * INTERVAL)
        allocated = self.ledger(agent, "gpu_allocated_seconds_total", processes[0]["gpus"][0]["uuid"])
        # Two processes side by side share each second of the GPU (docs/ledger.md).
        for p in processes:
            owner = p["env"]["GPUMETER_PROJECT"]
            self.assertTrue(within(allocated.get(owner, 0), p["gpus"][0]["seconds"] / 2), (owner, allocated))

    def test_a_killed_burn_leaves_the_gpu(self):
        agent = self.agent()
        p = self.start_burn("--gpus", "0", "--duration", "60s", "--memory", "1GiB", project="killed")

        def memory():
            s = harness.parse_text(agent.metrics()[1])
            return {dict(ls)["pid"]: v for (n, ls), v in s.items() if n == "gpu_process_memory_used_bytes"}
        harness.wait_until(lambda: memory().get(str(p.pid)) == 1 << 30, 15, what="burn listed with its memory")
        os.kill(p.pid, signal.SIGKILL)
        p.communicate(timeout=30)
        # No longer listed by the driver: the agent shows it at 0 for processes.retention
        # (docs/metrics.md), and the GPU's memory is free again.
        harness.wait_until(lambda: memory().get(str(p.pid)) == 0, 15, what="killed burn off the GPU")
        s = harness.parse_text(agent.metrics()[1])
        self.assertEqual(harness.sample(s, "gpu_memory_used_bytes", gpu="0"), 0)

    def test_interrupted_burn_still_reports(self):
        p = self.start_burn("--gpus", "0", "--duration", "60s", "--memory", "0", project="stopped")
        time.sleep(1.5)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 130, err)
        report = json.loads(out)
        self.assertTrue(report["interrupted"])
        self.assertLess(report["gpus"][0]["run_seconds"], 30)

    def test_a_stopped_parent_stops_its_children(self):
        env = dict(os.environ, **self.env)
        p = subprocess.Popen([BIN, "burn", "--sim.scenario", SCENARIO, "--duration", "60s", "--memory", "0",
                              "--as", "GPUMETER_PROJECT=a", "--as", "GPUMETER_PROJECT=b"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(2)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 130, err)
        processes = json.loads(out)["processes"]
        self.assertEqual(len(processes), 2)
        for child in processes:
            self.assertEqual(child["exit_code"], 130)
            self.assertTrue(child["interrupted"])
            self.assertLess(child["gpus"][0]["run_seconds"], 30)

    def test_bad_flags_exit_2(self):
        for args, message in ((["--duty", "120"], "--duty"), (["--gpus", "x"], "--gpus"),
                              (["--duration", "10"], "--duration"), (["--period", "1ms"], "--period"),
                              (["--memory", "lots"], "--memory"), (["--as", "novalue"], "--as")):
            r = self.burn(*args, check=False)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertIn(message, r.stderr)

    def test_without_a_driver(self):
        r = subprocess.run([BIN, "burn", "--cuda.library", os.path.join(self.dir, "libcuda.so.1"), "--duration", "1s"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1)
        self.assertIn("no CUDA driver", r.stderr)


if __name__ == "__main__":
    unittest.main()
