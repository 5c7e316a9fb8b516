"""A short run of the soak (scripts/soak.sh, bench/soak.py): a simulated node of 8 GPUs with jobs
starting and stopping and every owner resolvable, scraped 20 times a second, with the ledger checked
against the ground truth and RSS, fds and threads checked for growth after the warm-up. The full
soak's figures are in docs/benchmarks.md; this keeps the script working and its bars honest."""
import os
import re
import subprocess
import sys
import unittest

from harness import BIN, SOURCE_DIR, allowed_deviation  # noqa: F401  (harness sets up TMPDIR)

sys.path.insert(0, os.path.join(SOURCE_DIR, "bench"))
import soak  # noqa: E402

# At the real clock, to keep the suite's run short and its wall-clock settings those of a real
# node: each lane's first three jobs of 10 s give every owner a turn within about 36 s, the
# warm-up, and the ledger's job edges are held as tests/integration/test_ledger.py holds them.
# The day at 48x is the script's own run (docs/benchmarks.md, "Soak").
SMOKE_DURATION = "90"
SMOKE_SCALE = "1"
SMOKE_WARMUP = "40"


class SoakSmoke(unittest.TestCase):
    def test_short_soak_meets_the_bars(self):
        out = subprocess.run([os.path.join(SOURCE_DIR, "scripts", "soak.sh"), "--duration", SMOKE_DURATION,
                              "--time-scale", SMOKE_SCALE, "--sample-every", "2", "--warmup", SMOKE_WARMUP],
                             env=dict(os.environ, GPUMETER_BIN=BIN), capture_output=True, text=True, timeout=240)
        print(out.stdout[-6000:], out.stderr[-3000:])  # shown when the test fails
        self.assertEqual(out.returncode, 0)
        self.assertIn("soak: PASSED", out.stdout)
        m = re.search(r"scrapes: (\d+) answered, (\d+) failed", out.stdout)
        self.assertIsNotNone(m)
        self.assertGreater(int(m.group(1)), 0)
        self.assertEqual(int(m.group(2)), 0)
        for label in ("RSS MiB", "fds", "threads"):
            self.assertRegex(out.stdout, r"\n%s +[\d.]+ +[\d.]+ +[\d.]+ +[+-][\d.]+\n" % re.escape(label))
        self.assertRegex(out.stdout, r"Ledger against `gpumeter sim truth` over \[0, \d+ s\]: \d+ jobs, \d+ owners")

    def test_help_lists_the_options(self):
        out = subprocess.run([os.path.join(SOURCE_DIR, "scripts", "soak.sh"), "--help"], capture_output=True,
                             text=True, timeout=60)
        self.assertEqual(out.returncode, 0)
        for flag in ("--duration", "--time-scale", "--scrape-rate", "--sample-every", "--warmup"):
            self.assertIn(flag, out.stdout)


class SoakBars(unittest.TestCase):
    """The bars fail when they should: growth after the warm-up and a ledger off the truth."""

    @staticmethod
    def rows(rss, fds, threads):
        return [{"wall": float(i), "rss_kib": r, "fds": f, "threads": t}
                for i, (r, f, t) in enumerate(zip(rss, fds, threads))]

    def test_flat_resources_pass_and_a_moment_open_fd_is_not_growth(self):
        rows = self.rows([30000] * 10, [13, 12, 14, 13, 12, 12, 13, 14, 13, 13], [37] * 10)
        self.assertEqual(soak.growth_failures(soak.growth_summary(rows, 2.0), 1024), [])

    def test_growth_after_warmup_fails(self):
        leak = self.rows([30000 + 400 * i for i in range(10)], [13 + i // 3 for i in range(10)],
                         [37 + i // 2 for i in range(10)])
        fails = soak.growth_failures(soak.growth_summary(leak, 2.0), 1024)
        self.assertEqual(len(fails), 3, fails)
        # In a sanitizer build RSS is not barred; fds and threads still are.
        self.assertEqual(len(soak.growth_failures(soak.growth_summary(leak, 2.0), None)), 2)
        # Growth before the end of the warm-up is not counted.
        warm = self.rows([20000, 25000, 30000] + [30000] * 7, [10, 12, 13] + [13] * 7, [30, 36, 37] + [37] * 7)
        self.assertEqual(soak.growth_failures(soak.growth_summary(warm, 3.0), 1024), [])

    def test_ledger_off_the_truth_fails(self):
        import harness
        truth = {"users": {"alice": 2050}, "gpus": [{"gpu": 0, "busy_seconds": 500.0}],
                 "jobs": [{"gpu": 0, "uid": 2050, "env": {"GPUMETER_PROJECT": "climate", "SLURM_JOB_ID": "7"},
                           "allocated_seconds": 1000.0, "busy_seconds": 500.0, "memory_byte_seconds": 1e12,
                           "energy_joules": 3e5}]}
        labels = frozenset({"gpu": "0", "project": "climate", "user": "alice", "hpc_job": "7"}.items())

        def ledger(factor):
            return {(name, labels): truth["jobs"][0][field] * factor for name, field in harness.COUNTERS.items()}
        self.assertEqual(soak.ledger_check(harness, ledger(1.0), truth)[-1], [])
        # 2 edges of 0.2 s on 1000 s, plus 0.1 %: 0.14 %. One percent off fails every counter.
        fails = soak.ledger_check(harness, ledger(1.01), truth)[-1]
        self.assertEqual(len(fails), 5, fails)  # four counters and the GPU's busy time
        missing = soak.ledger_check(harness, {}, truth)[-1]
        self.assertTrue(any("has no" in f for f in missing), missing)


if __name__ == "__main__":
    unittest.main()
