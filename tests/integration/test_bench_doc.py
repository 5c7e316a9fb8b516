"""docs/benchmarks.md and bench/run.sh cannot drift apart: the doc's table of steps is the
script's, in its order, and the measurements it leaves out (the CPU profile, the soak) are named
as run on their own."""
import os
import re
import unittest

from harness import SOURCE_DIR


def read(*path):
    with open(os.path.join(SOURCE_DIR, *path)) as f:
        return f.read()


class BenchDoc(unittest.TestCase):
    def test_step_table_is_run_sh_in_order(self):
        steps = re.findall(r"(?m)^(?:exec )?/usr/bin/python3 (bench/\w+\.py) ", read("bench", "run.sh"))
        self.assertGreater(len(steps), 1)
        doc = read("docs", "benchmarks.md")
        intro = doc[:doc.index("\n## ")]
        self.assertEqual(re.findall(r"(?m)^\| `(bench/\w+\.py)` \|", intro), steps)
        # What run.sh leaves out is said to be run on its own.
        alone = intro[intro.index("not part of it"):]
        alone = alone[:alone.index("\n\n")]
        for script in ("bench/cpu_profile.py", "scripts/soak.sh"):
            self.assertNotIn(script, steps)
            self.assertIn("`%s`" % script, alone)


if __name__ == "__main__":
    unittest.main()
