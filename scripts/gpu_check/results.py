"""What the check found: one Comparison per thing compared, grouped by step.

A comparison's status is one of
  pass           within its stated tolerance
  fail           outside it (the check exits 1)
  not compared   the value is legitimately absent on this GPU or driver ([N/A], [Not Supported],
                 no GPM), so there is nothing to compare
  report         a measurement shown for the reader, with no pass or fail
"""
import json
import math

PASS, FAIL, NOT_COMPARED, REPORT = "pass", "fail", "not compared", "report"


class Comparison:
    def __init__(self, step, name, status, measured=None, tolerance="", note=""):
        self.step, self.name, self.status = step, name, status
        self.measured, self.tolerance, self.note = measured or {}, tolerance, note

    def as_dict(self):
        return {"name": self.name, "step": self.step, "measured": _clean(self.measured),
                "tolerance": self.tolerance, "status": self.status, "passed": self.status != FAIL,
                "note": self.note}


def _clean(value):
    """JSON has no NaN: a NaN measured value is written as the string "NaN"."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def within(value, low, high, tol):
    return low - tol <= value <= high + tol


class Results:
    def __init__(self, steps):
        self.steps = steps  # [(number, title)] in run order
        self.items = []
        self.info = {}

    def add(self, step, name, status, measured=None, tolerance="", note=""):
        c = Comparison(step, name, status, measured, tolerance, note)
        self.items.append(c)
        return c

    def check(self, step, name, ok, measured, tolerance, note=""):
        return self.add(step, name, PASS if ok else FAIL, measured, tolerance, note)

    def of_step(self, step):
        return [c for c in self.items if c.step == step]

    def failures(self):
        return [c for c in self.items if c.status == FAIL]

    def as_dict(self):
        return {"info": self.info,
                "verdict": "fail" if self.failures() else "pass",
                "steps": [{"step": n, "title": t,
                           "comparisons": [c.as_dict() for c in self.of_step(n)]} for n, t in self.steps]}

    def write_json(self, path):
        with open(path, "w") as f:
            json.dump(self.as_dict(), f, indent=2, sort_keys=False)
            f.write("\n")
