"""The NVML recorder (`gpumeter serve --nvml.record`) and the simulator's replay of a recording
(a scenario with `replay: FILE`): one agent records every NVML call on a simulated node while its
loads move; a second agent replays the recording on the same simulated procfs. Its ledger equals
the recorded run's within 0.1%. The transcript names every call with its arguments, return code
and decoded outputs; --nvml.record-anonymize replaces serials, UUIDs and pids consistently; the
duration and size bounds end the recording with an "end" line."""
import collections
import json
import os
import re
import subprocess
import tempfile
import time
import unittest

import sanitizer_preload

sanitizer_preload.preload(__name__)

import harness
from harness import BIN, SCENARIOS

SCENARIO = os.path.join(SCENARIOS, "replay-2x-h100.yaml")
RECORD_SECONDS = 12


def read_lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def ledger_totals(state_file):
    """{(uuid, owner labels): {allocated, busy, memory, energy}} from an agent's ledger state file."""
    with open(state_file) as f:
        state = json.load(f)
    out = {}
    for uuid, gpu in state["gpus"].items():
        for owner in gpu["ledger"]["owners"]:
            labels = json.dumps(owner["owner"], sort_keys=True)
            out[(uuid, labels)] = {k: owner[k] for k in ("allocated_seconds", "busy_seconds", "memory_byte_seconds",
                                                         "energy_joules")}
        out[(uuid, "gpu")] = {k: gpu["ledger"][k] for k in ("busy_seconds", "covered_seconds", "energy_joules")}
    return out


class ReplayTest(harness.AgentTestCase):
    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp(prefix="gpumeter-replay-")
        self.epoch = time.time()
        self.node = self.track(harness.SimNode(SCENARIO, self.epoch, kubelet=False))
        self.config = self.node.config()

    def record(self, extra=()):
        """Runs an agent for RECORD_SECONDS with the recorder on; the transcript and ledger paths."""
        transcript = os.path.join(self.dir, "recording.jsonl")
        state = os.path.join(self.dir, "recorded-ledger.json")
        agent = self.track(harness.Agent(SCENARIO, env=harness.sim_env(self.epoch),
                                         extra_args=self.node.agent_args(self.config, state)
                                         + ["--nvml.record", transcript, "--collector.profiling"] + list(extra)))
        agent.wait_ready()
        time.sleep(RECORD_SECONDS)
        self.assertEqual(agent.stop(), 0, agent.process.log())
        return transcript, state

    def replay(self, transcript, seconds):
        scenario = os.path.join(self.dir, "replay.yaml")
        with open(scenario, "w") as f:
            f.write("description: the recording of a simulated node\nreplay: %s\n" % os.path.basename(transcript))
        state = os.path.join(self.dir, "replayed-ledger.json")
        agent = self.track(harness.Agent(scenario, extra_args=self.node.agent_args(self.config, state)
                                         + ["--collector.profiling"]))
        agent.wait_ready()
        time.sleep(seconds)
        # GPM too answers from the recording: one metrics call per sample pair, keyed by the
        # device the samples were taken on.
        samples = harness.parse_text(agent.metrics()[1])
        sm = {dict(ls)["gpu"]: v for (n, ls), v in samples.items() if n == "gpu_sm_active_ratio"}
        self.assertEqual(sorted(sm), ["0", "1"], sm)
        self.assertTrue(all(0 < v <= 1 for v in sm.values()), sm)
        self.assertEqual(agent.stop(), 0, agent.process.log())
        return state, agent

    def test_replay_ledger_equals_the_recorded_run(self):
        transcript, recorded_state = self.record()
        lines = read_lines(transcript)
        span = (lines[-2]["t"] - lines[1]["t"]) / 1e9
        replayed_state, agent = self.replay(transcript, span + 3)
        self.assertIn("replaying an NVML recording", agent.process.log())
        recorded, replayed = ledger_totals(recorded_state), ledger_totals(replayed_state)
        owners = {k for k in recorded if k[1] != "gpu" and recorded[k]["allocated_seconds"] > 0}
        self.assertGreaterEqual(len(owners), 3, recorded)  # nlp on both GPUs, vision (and __idle__ none)
        self.assertEqual(set(recorded), set(replayed))
        for key, totals in recorded.items():
            for name, value in totals.items():
                got = replayed[key][name]
                self.assertLessEqual(abs(got - value), 0.001 * abs(value) + 1e-9,
                                     "%s %s: recorded %r, replayed %r" % (key, name, value, got))
        busy = sum(v["busy_seconds"] for k, v in recorded.items() if k[1] == "gpu")
        self.assertGreater(busy, 0.3 * 2 * (RECORD_SECONDS - 2))  # the loads really ran

    def test_transcript_lines(self):
        transcript, _ = self.record()
        lines = read_lines(transcript)
        header, end = lines[0], lines[-1]
        self.assertEqual(header["gpumeter_nvml_transcript"], 1)
        self.assertFalse(header["anonymized"])
        self.assertEqual(end["end"], "shutdown")
        self.assertEqual(end["calls"], len(lines) - 2)
        calls = lines[1:-1]
        fns = collections.Counter(c["fn"] for c in calls)
        for fn in ("nvmlInit_v2", "nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetSamples",
                   "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetTotalEnergyConsumption",
                   "nvmlDeviceGetProcessesUtilizationInfo"):
            self.assertIn(fn, fns)
        # Monotonic and wall times of each call's start (threads write their lines as calls end):
        # within the recording, and one clock step apart at most.
        self.assertTrue(all(0 <= c["t"] <= (RECORD_SECONDS + 30) * 1e9 for c in calls))
        offsets = [c["wall"] - c["t"] for c in calls]
        self.assertLess(max(offsets) - min(offsets), 50e6)
        self.assertLess(abs(calls[0]["wall"] / 1e9 - time.time()), RECORD_SECONDS + 60)
        # Decoded outputs: the handle of GPU 1, its UUID, the processes of GPU 1 with their memory.
        handle = next(c for c in calls if c["fn"] == "nvmlDeviceGetHandleByIndex_v2" and c["args"][0] == 1)
        self.assertEqual(handle["args"][1]["out"], {"h": "d1"})
        uuid = next(c for c in calls if c["fn"] == "nvmlDeviceGetUUID" and c["args"][0] == {"h": "d1"})
        self.assertRegex(uuid["args"][1]["out"], r"^GPU-[0-9a-f-]{36}$")
        lists = [c for c in calls if c["fn"] == "nvmlDeviceGetComputeRunningProcesses_v3"
                 and c["args"][0] == {"h": "d1"} and c["rc"] == 0 and c["args"][2] is not None]
        self.assertTrue(lists)
        pids = {(p["pid"], p["usedGpuMemory"]) for p in lists[-1]["args"][2]["out"]}
        self.assertEqual(pids, {(61002, 8 << 30), (61003, 12 << 30)})
        samples = [c for c in calls if c["fn"] == "nvmlDeviceGetSamples" and c["rc"] == 0 and c["args"][5]]
        self.assertTrue(samples)
        self.assertTrue(all(s["args"][5]["out"] for s in samples))
        self.assertTrue(all("raw" in s["args"][5] for s in samples))

    def test_anonymized_transcript(self):
        transcript, _ = self.record(["--nvml.record-anonymize"])
        text = open(transcript).read()
        lines = [json.loads(t) for t in text.splitlines()]
        self.assertTrue(lines[0]["anonymized"])
        self.assertNotIn("/", lines[0]["library"])
        # No real pid in any decoded record, nor in the raw bytes of the process lists a replay
        # copies back (pid first in each 24-byte record). A substring search of the whole file
        # would also hit digits of timestamps.
        real = {61001, 61002, 61003}
        pids, raw_pids = [], []

        def collect(value):
            if isinstance(value, dict):
                pids.extend(v for k, v in value.items() if k == "pid")
                for v in value.values():
                    collect(v)
            elif isinstance(value, list):
                for v in value:
                    collect(v)
        for c in lines[1:-1]:
            collect(c.get("args"))
            if c.get("fn") == "nvmlDeviceGetComputeRunningProcesses_v3" and c["rc"] == 0 and c["args"][2]:
                raw = bytes.fromhex(c["args"][2]["raw"])
                raw_pids += [int.from_bytes(raw[i:i + 4], "little") for i in range(0, len(raw), 24)]
        self.assertTrue(pids and raw_pids)
        self.assertFalse(real & set(pids), pids)
        self.assertFalse(real & set(raw_pids), raw_pids)
        uuids = [c["args"][1]["out"] for c in lines[1:-1] if c.get("fn") == "nvmlDeviceGetUUID"]
        self.assertEqual(len(set(uuids)), 2)
        self.assertTrue(all(re.match(r"^GPU-00000000-0000-4000-8000-0000000000\d\d$", u) for u in uuids), uuids)
        serials = [c["args"][1]["out"] for c in lines[1:-1] if c.get("fn") == "nvmlDeviceGetSerial"]
        self.assertTrue(all(re.match(r"^\d{13}$", s) for s in serials), serials)
        # Consistent: a process keeps its made-up pid in every list and record.
        seen = collections.defaultdict(set)
        for c in lines[1:-1]:
            if c.get("fn") == "nvmlDeviceGetComputeRunningProcesses_v3" and c["rc"] == 0 and c["args"][2]:
                seen[c["args"][0]["h"]].update(p["pid"] for p in c["args"][2]["out"])
        self.assertEqual({k: len(v) for k, v in seen.items()}, {"d0": 1, "d1": 2})

    def test_bounds_end_the_recording(self):
        transcript, _ = self.record(["--nvml.record-max-bytes", "20KiB"])
        self.assertLessEqual(os.path.getsize(transcript), 20 * 1024)
        self.assertEqual(read_lines(transcript)[-1]["end"], "size")
        os.remove(transcript)
        transcript, _ = self.record(["--nvml.record-duration", "2s"])
        lines = read_lines(transcript)
        self.assertEqual(lines[-1]["end"], "duration")
        self.assertLess(lines[-2]["t"] / 1e9, 3.5)

    def test_sim_check_and_broken_recordings(self):
        transcript, _ = self.record(["--nvml.record-duration", "3s"])
        scenario = os.path.join(self.dir, "replay.yaml")
        with open(scenario, "w") as f:
            f.write("replay: recording.jsonl\n")
        r = subprocess.run([BIN, "sim", "check", "--scenario", scenario], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"ok: replays .*recording.jsonl: \d+ calls of \d+ functions over \d+\.\d s")
        lines = open(transcript).read().splitlines()
        for n, broken in ((3, "{not json"), (4, '{"fn": "nvmlDeviceGetCount_v2", "t": "soon"}')):
            with open(transcript, "w") as f:
                f.write("\n".join(lines[:n - 1] + [broken] + lines[n:]) + "\n")
            r = subprocess.run([BIN, "sim", "check", "--scenario", scenario], capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 2, r.stdout)
            self.assertIn("recording.jsonl:%d:" % n, r.stderr)
            a = harness.Agent(scenario)
            a.process.proc.wait(30)
            self.assertEqual(a.stop(), 2)
            self.assertIn("recording.jsonl:%d:" % n, a.process.log())

    def test_bad_record_flags(self):
        for args, message in ((["--nvml.record", "/nonexistent/dir/x.jsonl"], "cannot write"),
                              (["--nvml.record", "x.jsonl", "--nvml.record-duration", "soon"], "--nvml.record-duration"),
                              (["--nvml.record", "x.jsonl", "--nvml.record-max-bytes", "1"], "--nvml.record-max-bytes")):
            a = harness.Agent(SCENARIO, env=harness.sim_env(self.epoch), extra_args=args)
            a.process.proc.wait(30)
            self.assertNotEqual(a.stop(), 0, args)
            self.assertIn(message, a.process.log())


if __name__ == "__main__":
    unittest.main()
