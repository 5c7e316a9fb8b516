"""The ledger on a stepping wall clock: the real agent under libfaketime (Debian's faketime).

Which process sees a step: only the agent. libfaketime is preloaded into it with its offset in a
file the test rewrites (FAKETIME_TIMESTAMP_FILE, read on every call with FAKETIME_NO_CACHE), and
FAKETIME_DONT_FAKE_MONOTONIC leaves its monotonic clock alone, as NTP or a VM restore would. The
simulator is the agent's libnvidia-ml.so.1, in the same process: it turns the same wall clock
into scenario time (GPUMETER_SIM_EPOCH, src/sim/scenario/scenario_clock.*) and stamps its samples with it,
so its timestamps step with the wall clock as a real driver's do. The scenario runs the same
steady jobs for hours on either side of the epoch, so the jobs are the same before and after a
step. The test itself, on the real clock, measures how much real time passed.

What is asserted, per GPU: the ledger keeps integrating after a step (covered + gap grows with
real time, within a few seconds of checkpoint and collection lag: never frozen, never counting
an hour twice); no exported counter ever goes back; Σ allocated over owners = covered at every
scrape; the step is logged once, with its size; and owners are not pruned by a step forward.
"""
import json
import os
import re
import time
import unittest

import harness

FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"
SCENARIO = os.path.join(harness.SCENARIOS, "clock.yaml")
HOUR = 3600
# Scrapes show the last checkpoint (every 1 s here) of collections made every 1 s: the ledger's
# growth between two scrapes may differ from the real time between them by a few seconds.
LAG = 5.0
COUNTERS = ("gpu_allocated_seconds_total", "gpu_busy_seconds_total", "gpu_memory_byte_seconds_total",
            "gpu_attributed_energy_joules_total", "gpumeter_ledger_covered_seconds_total",
            "gpumeter_ledger_gap_seconds_total")


def ledger(samples):
    """{uuid: (covered, gap, sum of allocated)} and {(name, labels): value} of every ledger counter."""
    gpus = {}
    counters = {}
    for (name, labels), value in samples.items():
        if name not in COUNTERS:
            continue
        counters[(name, labels)] = value
        uuid = dict(labels).get("uuid")
        covered, gap, allocated = gpus.get(uuid, (0.0, 0.0, 0.0))
        if name == "gpumeter_ledger_covered_seconds_total":
            covered = value
        elif name == "gpumeter_ledger_gap_seconds_total":
            gap = value
        elif name == "gpu_allocated_seconds_total":
            allocated += value
        gpus[uuid] = (covered, gap, allocated)
    return gpus, counters


class ClockTest(harness.AgentTestCase):
    def setUp(self):
        super().setUp()
        self.dir = harness.tempfile.mkdtemp(prefix="gpumeter-clock-")
        self.offset_file = os.path.join(self.dir, "faketime.rc")
        self.state_file = os.path.join(self.dir, "ledger.json")
        self.config = os.path.join(self.dir, "gpumeter.yaml")
        with open(self.config, "w") as f:
            # A retention shorter than the step forward: a step must not prune anyone.
            f.write("ledger:\n  checkpoint_interval: 1s\n  owner_retention: 30m\n")
        self.procfs = os.path.join(self.dir, "proc")  # no host side: the owners are unattributed
        os.makedirs(self.procfs)
        # Scenario time 0 two hours ago (real clock): a step of an hour either way stays inside
        # the jobs, which run from 0 on.
        self.epoch = time.time() - 2 * HOUR
        self.agent = None
        self.last = None  # (real time, ledger) of the previous scrape

    def set_offset(self, seconds):
        with open(self.offset_file, "w") as f:
            f.write("%+.3f\n" % seconds)

    def start(self, offset):
        self.set_offset(offset)
        asan = os.environ.get("ASAN_OPTIONS", "")
        env = {"LD_PRELOAD": FAKETIME_LIB, "FAKETIME_TIMESTAMP_FILE": self.offset_file, "FAKETIME_NO_CACHE": "1",
               "FAKETIME_DONT_FAKE_MONOTONIC": "1", "GPUMETER_SIM_EPOCH": repr(self.epoch),
               # Under ASan the runtime must come first; libfaketime is preloaded before it.
               "ASAN_OPTIONS": asan + (":" if asan else "") + "verify_asan_link_order=0"}
        self.agent = self.track(harness.Agent(
            SCENARIO, env=env, extra_args=["--config.file", self.config, "--ledger.state-file", self.state_file,
                                           "--path.procfs", self.procfs]))
        self.agent.wait_ready()

    def scrape(self):
        """Scrapes, and checks against the previous scrape: no counter back, Σ allocated = covered."""
        now = time.time()
        gpus, counters = ledger(harness.parse_text(self.agent.metrics()[1]))
        for uuid, (covered, gap, allocated) in gpus.items():
            self.assertAlmostEqual(allocated, covered, delta=1e-6 * max(1.0, covered), msg=uuid)
        if self.last is not None:
            for key, value in self.last[2].items():
                self.assertIn(key, counters, "a ledger series went away: %r" % (key,))
                self.assertGreaterEqual(counters[key], value, "went back: %r" % (key,))
        self.last = (now, gpus, counters)
        return now, gpus

    def run_for(self, seconds):
        deadline = time.time() + seconds
        while time.time() < deadline:
            self.scrape()
            time.sleep(0.5)
        return self.scrape()

    def wait_covered(self, seconds):
        harness.wait_until(lambda: len(self.scrape()[1]) == 2 and all(c >= seconds for c, _, _ in self.last[1].values()),
                           60, what="both GPUs covered for %ss" % seconds)

    def assert_followed(self, before, after, max_gap=LAG):
        """Between two scrapes, every GPU's covered + gap grew with real time, and gap only a little."""
        elapsed = after[0] - before[0]
        for uuid, (covered, gap, _) in after[1].items():
            covered0, gap0, _ = before[1][uuid]
            grown = (covered - covered0) + (gap - gap0)
            print("%s %s: covered +%.2f s, gap +%.2f s in %.2f s of real time"
                  % (self.id().rsplit(".", 1)[-1], uuid, covered - covered0, gap - gap0, elapsed))
            self.assertGreater(grown, elapsed - LAG, "%s froze: grew %.1f s in %.1f s" % (uuid, grown, elapsed))
            self.assertLess(grown, elapsed + LAG, "%s grew %.1f s in %.1f s" % (uuid, grown, elapsed))
            self.assertLess(gap - gap0, max_gap, uuid)

    def logged_steps(self, message):
        return [float(m.group(1)) for m in re.finditer(re.escape(message) + r'.*?step_seconds=(-?[0-9.]+)',
                                                       self.agent.process.log())]

    def live_step(self, step):
        self.start(0)
        self.wait_covered(3)
        before = self.scrape()
        self.set_offset(step)
        after = self.run_for(15)
        self.assert_followed(before, after)
        steps = self.logged_steps("msg=\"wall clock stepped; the ledger follows it\"")
        self.assertEqual(len(steps), 1, self.agent.process.log()[-2000:])
        self.assertAlmostEqual(steps[0], step, delta=1.0)
        samples = harness.parse_text(self.agent.metrics()[1])
        self.assertEqual(harness.sample(samples, "gpumeter_ledger_clock_steps_total"), 2)  # once per GPU
        self.assertEqual(harness.sample(samples, "gpumeter_series_dropped_total", kind="owner"), 0)

    def test_a_step_back_while_running(self):
        self.live_step(-HOUR)

    def test_a_step_forward_while_running(self):
        self.live_step(HOUR)

    def test_small_steps_back_add_up(self):
        """30 steps of -0.24 s, one a second: each is under the threshold of a step (0.25 s), and
        before they added up, 22 % of the real time was neither covered nor a gap."""
        self.start(0)
        self.wait_covered(3)
        before = self.scrape()
        offset = 0.0
        for _ in range(30):
            offset -= 0.24
            self.set_offset(offset)
            time.sleep(1)
            self.scrape()
        after = self.run_for(3)
        self.assert_followed(before, after)
        steps = self.logged_steps("msg=\"wall clock stepped; the ledger follows it\"")
        self.assertGreater(len(steps), 0, self.agent.process.log()[-2000:])
        self.assertTrue(all(s < 0 for s in steps), steps)

    def restart(self, step, same_boot=True):
        self.start(0)
        self.wait_covered(3)
        stopped = self.last  # the last scrape; the checkpoint at the stop holds at least as much
        self.agent.stop()  # SIGTERM: the last checkpoint
        if not same_boot:
            with open(self.state_file) as f:
                doc = json.load(f)
            doc.setdefault("clock", {})["boot_id"] = "another-boot"
            with open(self.state_file, "w") as f:
                json.dump(doc, f)
        time.sleep(2)
        self.start(step)
        first = self.scrape()  # checked against the last scrape before the stop
        after = self.run_for(12)
        for uuid, (covered, _, _) in after[1].items():
            self.assertGreater(covered - first[1][uuid][0], 12 - LAG, "%s froze after the restart" % uuid)
        return stopped, after

    def test_restarted_an_hour_earlier(self):
        stopped, after = self.restart(-HOUR)
        self.assert_followed(stopped, after)  # the downtime was read back from the driver's buffer
        steps = self.logged_steps("wall clock stepped while the agent was down")
        self.assertEqual(len(steps), 1, self.agent.process.log()[-2000:])
        self.assertAlmostEqual(steps[0], -HOUR, delta=1.0)

    def test_restarted_an_hour_later(self):
        stopped, after = self.restart(HOUR)
        self.assert_followed(stopped, after)
        steps = self.logged_steps("wall clock stepped while the agent was down")
        self.assertEqual(len(steps), 1, self.agent.process.log()[-2000:])
        self.assertAlmostEqual(steps[0], HOUR, delta=1.0)

    def test_a_future_cursor_with_no_clock_to_tell_the_step(self):
        # The state file's monotonic reading is of another boot: how far the clock went back is
        # unknown. The cursor is refused, the ledger restarts from the GPU's now, and is logged.
        _, after = self.restart(-HOUR, same_boot=False)
        log = self.agent.process.log()
        self.assertEqual(log.count("ledger cursor ahead of the GPU's clock"), 2, log[-2000:])  # once per GPU
        self.assertNotIn("stepped while the agent was down", log)


class StateFileTest(harness.AgentTestCase):
    """The state file fails closed, and the first checkpoints come right after start."""

    def setUp(self):
        super().setUp()
        self.dir = harness.tempfile.mkdtemp(prefix="gpumeter-state-")
        self.state_file = os.path.join(self.dir, "ledger.json")
        self.config = os.path.join(self.dir, "gpumeter.yaml")
        self.procfs = os.path.join(self.dir, "proc")
        os.makedirs(self.procfs)

    def agent(self, checkpoint_interval="1s"):
        with open(self.config, "w") as f:
            f.write("ledger:\n  checkpoint_interval: %s\n" % checkpoint_interval)
        return self.track(harness.Agent(SCENARIO, extra_args=["--config.file", self.config, "--ledger.state-file",
                                                              self.state_file, "--path.procfs", self.procfs]))

    def saved(self):
        with open(self.state_file) as f:
            return json.load(f)

    def test_an_unreadable_state_file_stops_the_start_and_is_left_alone(self):
        os.makedirs(self.state_file)  # a mis-mounted volume, say
        with open(os.path.join(self.state_file, "inside"), "w") as f:
            f.write("kept")
        agent = self.agent()
        self.assertEqual(agent.process.proc.wait(30), 2)
        self.assertIn("cannot use the ledger state file", agent.process.log())
        self.assertIn(self.state_file, agent.process.log())
        self.assertEqual(os.listdir(self.state_file), ["inside"])

    def test_a_state_file_too_large_stops_the_start_and_is_not_written(self):
        # A ledger padded past the 256 MiB bound (sparse): the agent says it leaves the file as it
        # is and exits 2, and its shutdown must not write an empty ledger over it (it did).
        with open(self.state_file, "w") as f:
            f.write('{"format": "gpumeter-ledger", "version": 1, "gpus": {}}')
        os.truncate(self.state_file, 300 << 20)
        before = os.stat(self.state_file)
        agent = self.agent()
        self.assertEqual(agent.process.proc.wait(30), 2)
        self.assertIn("it is left as it is", agent.process.log())
        self.assertNotIn("ledger state saved", agent.process.log())
        after = os.stat(self.state_file)
        self.assertEqual((after.st_size, after.st_mtime_ns, after.st_ino), (before.st_size, before.st_mtime_ns, before.st_ino))

    def test_an_impossible_amount_restarts_alone_and_the_rest_resumes(self):
        agent = self.agent()
        agent.wait_ready()
        harness.wait_until(lambda: len(self.saved()["gpus"]) == 2, 30, what="both GPUs saved")
        agent.stop()
        doc = self.saved()
        uuid = sorted(doc["gpus"])[0]
        doc["gpus"][uuid]["ledger"]["covered_seconds"] = -1e9
        with open(self.state_file, "w") as f:
            f.write(json.dumps(doc))
        agent = self.agent()
        agent.wait_ready()
        self.assertEqual([n for n in os.listdir(self.dir) if n.startswith("ledger.json.corrupt-")], [])
        log = agent.process.log()
        self.assertIn("an amount that cannot be true restarts at 0", log)
        self.assertIn("covered_seconds", log)
        samples = harness.parse_text(agent.metrics()[1])
        self.assertEqual(harness.sample(samples, "gpumeter_ledger_state_dropped_values"), 1)
        covered = harness.wait_until(lambda: harness.sample(harness.parse_text(agent.metrics()[1]),
                                                            "gpumeter_ledger_covered_seconds_total", uuid=uuid) + 1,
                                     30, what="the GPU's ledger") - 1
        self.assertLess(covered, 60)  # the bad amount restarted
        # The other GPU's ledger resumed whole (tests/integration/test_non_finite.py checks owners).
        other = sorted(doc["gpus"])[1]
        resumed = harness.wait_until(lambda: harness.sample(harness.parse_text(agent.metrics()[1]),
                                                            "gpumeter_ledger_covered_seconds_total", uuid=other) + 1,
                                     30, what="the other GPU's ledger") - 1
        self.assertGreaterEqual(resumed, doc["gpus"][other]["ledger"]["covered_seconds"])

    def test_the_first_checkpoints_come_right_after_start(self):
        agent = self.agent(checkpoint_interval="1h")
        agent.wait_ready()
        # With a checkpoint interval of an hour, only the checkpoints at start and after each
        # GPU's first reading can have saved both GPUs' cursors.
        harness.wait_until(lambda: len(self.saved()["gpus"]) == 2, 30, what="both GPUs saved")
        harness.wait_until(lambda: harness.sample(harness.parse_text(agent.metrics()[1]),
                                                  "gpumeter_ledger_checkpoint_success") == 1, 30,
                           what="gpumeter_ledger_checkpoint_success 1")
        samples = harness.parse_text(agent.metrics()[1])
        self.assertEqual(harness.sample(samples, "gpumeter_ledger_checkpoint_failures_total"), 0)


if __name__ == "__main__":
    unittest.main()
