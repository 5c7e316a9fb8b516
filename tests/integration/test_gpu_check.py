"""scripts/gpu-check.sh, the self-check kit, on the simulator (--sim --quick): every step passes
against an honest agent and honest burns; each planted fault fails the check with exit 1,
naming the comparisons it breaks and no others; without a GPU it exits 2; and every process it
started is gone when it ends, interrupted or not. The three runs of the kit start together, each
on its own simulated node (its own scenario clock and simulated CUDA directory). Its parsers
also read what the real nvidia-smi prints, in the layouts of several driver branches."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import harness

SCRIPT = os.path.join(harness.SOURCE_DIR, "scripts", "gpu-check.sh")
PASSED = ("pass", "report")


def start_check(*args):
    out = tempfile.mkdtemp(prefix="gpu-check-")
    env = dict(os.environ, GPU_CHECK_PYTHON=sys.executable)
    argv = [SCRIPT, "--gpumeter", harness.BIN, "--nvml-library", harness.SIM_LIB, "--out", out] + list(args)
    log = open(os.path.join(tempfile.mkdtemp(prefix="gpu-check-stderr-"), "stderr"), "w+")
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log, env=env, start_new_session=True)
    return proc, out, log


def finish(started, timeout=270):
    proc, out, log = started
    try:
        rc = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    with log:
        log.seek(0)
        return rc, out, log.read()


def load(out):
    with open(os.path.join(out, "results.json")) as f:
        return json.load(f)


def comparisons(results):
    return [c for step in results["steps"] for c in step["comparisons"]]


def leftovers(out):
    """Processes whose command line or environment names the output folder: under --sim every
    process the check starts has GPUMETER_SIM_CUDA_DIR=<out>/sim-cuda."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        for part in ("cmdline", "environ"):
            try:
                with open("/proc/%s/%s" % (pid, part), "rb") as f:
                    if out.encode() in f.read():
                        found.append(int(pid))
                        break
            except OSError:
                pass
    return found


class GpuCheckOnTheSimulator(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        runs = {"all": start_check("--sim", "--quick"),
                "sim-lie": start_check("--sim", "--quick", "--steps", "1", "--plant-fault", "sim-lie"),
                "burn-half-duty": start_check("--sim", "--quick", "--steps", "2", "--plant-fault", "burn-half-duty")}
        cls.runs = {name: finish(started) for name, started in runs.items()}

    def run_of(self, name):
        rc, out, stderr = self.runs[name]
        self.assertTrue(os.path.exists(os.path.join(out, "results.json")), stderr)
        return rc, out, stderr, load(out)

    def test_every_step_passes(self):
        rc, out, stderr, results = self.run_of("all")
        bad = [(c["step"], c["name"], c["status"], c["note"]) for c in comparisons(results)
               if c["status"] not in PASSED]
        self.assertEqual(bad, [], stderr)
        self.assertEqual(rc, 0, stderr)
        self.assertEqual(results["verdict"], "pass")
        self.assertEqual([s["step"] for s in results["steps"]], [1, 2, 3, 4, 5, 6, 7])
        for step in results["steps"]:
            self.assertIn("pass", [c["status"] for c in step["comparisons"]], "step %d compared nothing" % step["step"])
            for c in step["comparisons"]:
                self.assertEqual(set(c), {"name", "step", "measured", "tolerance", "status", "passed", "note"})
        names = {c["name"] for c in comparisons(results)}
        for name in ("idle: temperature.gpu", "loaded: utilization.gpu", "loaded: compute processes",
                     "idle: clocks_event_reasons.active", "loaded: power.draw.average",
                     "allocated seconds of check-a vs burn", "busy seconds of check-b vs burn",
                     "busy seconds of check-b vs nvidia-smi pmon",
                     "busy seconds of check-b after check-a ended vs burn",
                     "gap seconds vs utilization-sample holes", "covered + gap seconds vs the idle stretch",
                     "smUtil of the 20 % burn vs its duty", "smUtil of both pids vs the GPU's utilization",
                     "loaded: ledger energy (all owners) vs the NVML energy counter",
                     "power-sample spacing: nvidia-smi -q -d POWER vs nvmlDeviceGetSamples",
                     "GPM 2 sm_util: 12 at once vs alone", "GPM 2 sm_util vs nvidia-smi dmon",
                     "CPU per GPU sample, agent vs peer"):
            self.assertIn(name, names)
        self.assertEqual(results["info"]["mode"], "simulator")
        self.assertTrue(results["info"]["burn_available"])
        self.assertLess(results["info"]["seconds"], 200, "--sim --quick is meant to take about two minutes")
        with open(os.path.join(out, "report.md")) as f:
            report = f.read()
        self.assertIn("**PASS**", report)
        self.assertIn("## Step 7: Cost against the peer exporter", report)
        logs = os.listdir(os.path.join(out, "logs"))
        for name in ("agent.log", "nvidia-smi.log", "step2-check-a.log", "step2-check-b.log", "step7-peer-1.log"):
            self.assertIn(name, logs)
        # The agent's NVML recording, anonymized, summarised in the report, with a scenario that
        # replays it.
        self.assertTrue(results["info"]["recording_flag"])
        with open(os.path.join(out, "recording.jsonl")) as f:
            lines = [json.loads(line) for line in f]
        self.assertTrue(lines[0]["anonymized"])
        self.assertNotIn(results["info"]["uuid"], json.dumps(lines))
        self.assertIn("| nvmlDeviceGetUtilizationRates | %d |"
                      % sum(1 for l in lines if l.get("fn") == "nvmlDeviceGetUtilizationRates"), report)
        with open(os.path.join(out, "replay.yaml")) as f:
            self.assertIn("replay: recording.jsonl", f.read())
        self.assertEqual(leftovers(out), [])

    def failing(self, name, steps):
        rc, out, stderr, results = self.run_of(name)
        self.assertEqual(rc, 1, stderr)
        self.assertEqual([s["step"] for s in results["steps"]], steps)
        self.assertEqual(results["verdict"], "fail")
        failed = sorted(c["name"] for c in comparisons(results) if c["status"] == "fail")
        for f in failed:
            self.assertIn(f, stderr, "each failure is named on stderr")
        with open(os.path.join(out, "report.md")) as f:
            self.assertIn("**FAIL**", f.read())
        self.assertEqual(leftovers(out), [])
        others = [c for c in comparisons(results) if c["status"] != "fail"]
        self.assertTrue(all(c["status"] in PASSED for c in others), others)
        return failed, {c["name"] for c in others}

    def test_a_simulator_that_lies_to_the_agent_fails_the_temperature(self):
        failed, passed = self.failing("sim-lie", [1])
        self.assertEqual(failed, ["idle: temperature.gpu", "loaded: temperature.gpu"])
        self.assertIn("idle: temperature.memory", passed)
        self.assertIn("loaded: power.draw", passed)

    def test_a_burn_at_half_its_duty_fails_the_busy_seconds(self):
        failed, passed = self.failing("burn-half-duty", [2])
        for name in ("busy seconds of check-a vs burn", "busy seconds of both owners vs burns",
                     "busy seconds of check-a before check-b started vs burn",
                     "busy seconds of check-b after check-a ended vs burn"):
            self.assertIn(name, failed)
        self.assertTrue(all(f.startswith("busy seconds of ") and f.endswith("burn") or f.endswith("burns")
                            for f in failed), failed)
        for name in ("allocated seconds of check-a vs burn", "allocated seconds of check-b vs burn",
                     "busy seconds of check-a vs nvidia-smi pmon", "busy seconds of check-b vs nvidia-smi pmon"):
            self.assertIn(name, passed)


class GpuCheckEdges(unittest.TestCase):
    def test_without_a_gpu_it_says_so_and_exits_2(self):
        tmp = tempfile.mkdtemp()
        no_gpu = os.path.join(tmp, "nvidia-smi")
        with open(no_gpu, "w") as f:
            f.write("#!/bin/sh\necho 'No devices were found'\nexit 6\n")
        os.chmod(no_gpu, 0o755)
        for tool, why in ((os.path.join(tmp, "missing"), "nvidia-smi not found"), (no_gpu, "lists no GPU")):
            rc, out, stderr = finish(start_check("--nvidia-smi", tool), timeout=60)
            self.assertEqual(rc, 2, stderr)
            self.assertIn(why, stderr)
            self.assertIn("--sim", stderr)
            self.assertFalse(os.path.exists(os.path.join(out, "results.json")))
        rc, _, stderr = finish(start_check("--plant-fault", "sim-lie"), timeout=60)
        self.assertEqual(rc, 2, stderr)
        self.assertIn("--plant-fault needs --sim", stderr)

    def test_an_interrupted_run_stops_everything_it_started(self):
        started = start_check("--sim", "--quick", "--steps", "2")
        proc, out, _ = started
        # Wait until the first burn runs, then stop the check as a service manager would.
        harness.wait_until(lambda: os.path.exists(os.path.join(out, "logs", "step2-check-a.log")), 60,
                           what="the first burn")
        time.sleep(2)
        self.assertTrue(leftovers(out), "the agent and the burn run")
        proc.send_signal(signal.SIGTERM)
        rc, out, stderr = finish(started, timeout=60)
        self.assertNotEqual(rc, 0, stderr)
        self.assertEqual(leftovers(out), [])
        results = load(out)
        self.assertIn("interrupted", json.dumps(results))


sys.path.insert(0, os.path.join(harness.SOURCE_DIR, "scripts"))
from gpu_check import smi  # noqa: E402  (the kit's parsers, on the real tool's formats)

# What nvidia-smi prints, in the layouts of R470 to R570 drivers.
QUERY_CSV = ("0, GPU-6f1c2a7e-3b9d-4c8e-9a41-2d7f5e8b0c13, 3, 0, 81559, 527, 12, 81020, 71.25, [N/A], "
             "[Not Supported], 31, P8, 0x0000000000000004\n")
PMON = """# gpu        pid  type    sm   mem   enc   dec   command
# Idx          #   C/G     %     %     %     %   name
    0      23145     C    98    42     -     -   python
    0      23146     C     -     -     -     -   python3 train.py
# gpu         pid   type     sm    mem    enc    dec    jpg    ofa    command
# Idx           #    C/G      %      %      %      %      %      %    name
    0     381024     C     45      2      -      -      -      -    python3
    0          -     -      -      -      -      -      -      -    -
"""
POWER_R470 = """
==============NVSMI LOG==============

Driver Version                            : 470.103.01

Attached GPUs                             : 1
GPU 00000000:3B:00.0
    Power Readings
        Power Management                  : Supported
        Power Draw                        : 43.45 W
    Power Samples
        Duration                          : 2.38 sec
        Number of Samples                 : 119
        Max                               : 44.00 W
        Min                               : 43.30 W
        Avg                               : 43.59 W
    Module Power Readings
        Power Draw                        : N/A
"""
DMON = """# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk  smutil  smocc
# Idx      W      C      C      %      %      %      %      %      %    MHz    MHz       %      %
    0     71     30     38      0      0      0      0      0      0   2619    345       -      -
    0    698     52     60    100     12      0      0      0      0   2619   1980     97     41
"""


class NvidiaSmiFormats(unittest.TestCase):
    def test_query_gpu_csv_with_absent_values(self):
        cells = next(smi.csv_rows(QUERY_CSV))
        values = [smi.value(c) for c in cells]
        self.assertEqual(values[2:5], [3.0, 0.0, 81559.0])
        self.assertEqual(values[8], 71.25)
        self.assertIsInstance(values[9], smi.Absent)
        self.assertEqual(values[10].text, "[Not Supported]")
        self.assertEqual(values[12], 8, "P8 is P-state 8")
        self.assertEqual(values[13], 0x4, "a clock event reason mask")
        self.assertIsInstance(smi.value("N/A"), smi.Absent)

    def test_pmon_of_old_and_new_drivers(self):
        rows = smi.parse_pmon([(1.0, line) for line in PMON.splitlines()])
        self.assertEqual([(pid, sm) for _, pid, sm in rows], [(23145, 98.0), (381024, 45.0)])

    def test_power_samples(self):
        self.assertEqual(smi.parse_power_samples(POWER_R470), {"duration_s": 2.38, "samples": 119, "avg_w": 43.59})
        self.assertIsNone(smi.parse_power_samples(POWER_R470.replace("2.38 sec", "N/A")))
        self.assertIsNone(smi.parse_power_samples("GPU 00000000:3B:00.0\n    Power Readings\n"))

    def test_dmon_gpm_columns_are_the_last_ones_asked(self):
        values, names = smi.parse_dmon_gpm(DMON, [2, 3])
        self.assertEqual(values, {2: 97.0, 3: 41.0})
        self.assertEqual(names, ["smutil", "smocc"])
        self.assertEqual(smi.parse_dmon_gpm("# gpu smutil\n", [2]), (None, "no data line in dmon's output"))


if __name__ == "__main__":
    unittest.main()
