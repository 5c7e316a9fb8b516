"""The exposition's series cap (exposition.max_series, docs/configuration.md): three agents read
one simulated node of 2 GPUs and 12 processes of 1 to 12 GiB, one without a cap, one whose cap leaves some
processes out, one whose cap is below what is never cut. A capped body holds at most the cap's
series (or, below what is never cut, only that); per-process series go first, the smallest
processes first; the ledger is whole; the cap's own series say what was left out; the log says
it once."""
import os
import tempfile

from harness import AgentTestCase, Agent, SCENARIOS, parse_text, wait_until

SCENARIO = os.path.join(SCENARIOS, "series-cap.yaml")
LEDGER = ("gpu_allocated_seconds_total", "gpu_busy_seconds_total", "gpu_memory_byte_seconds_total",
          "gpu_attributed_energy_joules_total")


def series(body):
    return [line for line in body.splitlines() if line and not line.startswith("#")]


def label_sets(samples, name):
    return sorted(sorted(ls) for (n, ls) in samples if n == name)


class SeriesCap(AgentTestCase):
    def agent(self, max_series=None):
        extra = []
        if max_series is not None:
            path = os.path.join(tempfile.mkdtemp(prefix="gpumeter-cap-"), "gpumeter.yaml")
            with open(path, "w") as f:
                f.write("exposition:\n  max_series: %d\n" % max_series)
            extra = ["--config.file", path]
        return self.track(Agent(scenario=SCENARIO, extra_args=extra))

    def test_detail_goes_first_and_the_ledger_stays_whole(self):
        free = self.agent()
        free.wait_ready()
        wait_until(lambda: len([s for s in series(free.metrics()[1])
                                if s.startswith("gpu_process_memory_used_bytes{")]) == 12,
                   30, what="12 processes' series")
        body = free.metrics()[1]
        uncapped = len(series(body))
        full = parse_text(body)
        # Room for all but 8 of the uncapped series, the cap's own three included: four processes
        # of two series each go (one more if the agent's own counters gained series meanwhile).
        cap = uncapped + 3 - 8
        capped, tight = self.agent(cap), self.agent(100)
        for a in (capped, tight):
            a.wait_ready()

        def settled():
            got = parse_text(capped.metrics()[1])
            return label_sets(got, "gpu_allocated_seconds_total") == label_sets(full, "gpu_allocated_seconds_total")
        wait_until(settled, 30, what="the capped agent's ledger")

        body = capped.metrics()[1]
        got = parse_text(body)
        self.assertLessEqual(len(series(body)), cap)
        self.assertEqual(got[("gpumeter_series_limit", frozenset())], cap)
        self.assertEqual(got[("gpumeter_series_limit_dropped", frozenset({("kind", "nvlink")}))], 0)
        kept = {dict(ls)["pid"]: v for (n, ls), v in got.items() if n == "gpu_process_memory_used_bytes"}
        every = {dict(ls)["pid"]: v for (n, ls), v in full.items() if n == "gpu_process_memory_used_bytes"}
        gone = set(every) - set(kept)
        self.assertTrue(4 <= len(gone) <= 5, sorted(gone))
        self.assertFalse([n for (n, ls) in got if n == "gpu_process_utilization_ratio" and dict(ls)["pid"] in gone])
        self.assertEqual(got[("gpumeter_series_limit_dropped", frozenset({("kind", "process")}))], 2 * len(gone))
        # The smallest processes went (each process has a size of its own, 1 to 12 GiB).
        self.assertEqual(sorted(gone), sorted(sorted(every, key=every.get)[:len(gone)]))
        self.assertLess(max(every[p] for p in gone), min(kept.values()))
        for name in LEDGER:
            self.assertEqual(label_sets(got, name), label_sets(full, name), name)
        log = capped.process.log()
        self.assertEqual(log.count("series over exposition.max_series"), 1, log[-2000:])
        self.assertIn("dropped_process=", log)

        # A cap below the ledger and the device values: every per-process series goes, the
        # rest is served, and the log says the cap cannot be met.
        body = tight.metrics()[1]
        got = parse_text(body)
        self.assertGreater(len(series(body)), 100)
        self.assertFalse([n for (n, _) in got if n.startswith("gpu_process_")])
        per_process = len([n for (n, _) in full if n.startswith("gpu_process_")])
        self.assertEqual(got[("gpumeter_series_limit_dropped", frozenset({("kind", "process")}))], per_process)
        for name in LEDGER:
            self.assertEqual(label_sets(got, name), label_sets(full, name), name)
        self.assertIn("exposition.max_series is below the series never cut", tight.process.log())


if __name__ == "__main__":
    import unittest
    unittest.main()
