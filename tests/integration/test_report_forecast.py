"""`gpumeter report --forecast` on 30 days of history with a known trend, backfilled into a real
Prometheus (promtool blocks): one GPU held by project "growth", whose share of it grows linearly
from 0.2 to 0.8 over the 30 days, and one held by project "flat" at a constant 0.5. The ledger
counters are the exact integrals of those shares, so the least-squares line through the GPUs each
project held per step is the construction itself, and the forecast of the next 30 days is known:
"growth" holds 0.2 + 0.6 x 1.5 = 1.1 GPUs on average over days 30-60 (792 GPU-hours), "flat"
0.5 (360 GPU-hours). Checked in every output format, priced and unpriced."""
import csv
import io
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import harness
from harness import serve_backfilled

BIN = harness.BIN
DAY = 86400
DAYS = 30
INTERVAL = 1800    # one sample every 30 minutes
HORIZON = 30 * DAY
PRICE = 2.0        # per GPU-hour, every model
# project -> (share at the start, share at the end) of its GPU
SHARES = {"growth": (0.2, 0.8), "flat": (0.5, 0.5)}
WANT_GPUS_AT_END = {"growth": 0.8, "flat": 0.5}
WANT_TREND = {"growth": 0.6 / DAYS, "flat": 0.0}
WANT_HOURS = {"growth": (0.2 + 0.6 * 1.5) * HORIZON / 3600, "flat": 0.5 * HORIZON / 3600}


def share_integral(project, t):
    """Seconds of its GPU the project held from the history's start to t seconds after it."""
    a, b = SHARES[project]
    slope = (b - a) / (DAYS * DAY)
    return a * t + slope * t * t / 2


def openmetrics(start):
    """The history as OpenMetrics text: the ledger counters of two GPUs, one per project."""
    lines = []
    times = range(0, DAYS * DAY + 1, INTERVAL)
    gpus = {"growth": ("0", "GPU-forecast-0"), "flat": ("1", "GPU-forecast-1")}

    def family(name, kind, samples):
        lines.append("# TYPE %s %s" % (name, kind))
        for labels, value_of in samples:
            text = ",".join('%s="%s"' % kv for kv in labels)
            suffix = "_total" if kind == "counter" else ""
            for t in times:
                lines.append("%s%s{%s} %r %d" % (name, suffix, text, value_of(t), start + t))

    base = [("job", "gpumeter"), ("instance", "node-1:9400")]
    family("gpu_info", "gauge", [(base + [("gpu", g), ("uuid", u), ("vendor", "nvidia"), ("model", "NVIDIA H100 80GB HBM3")],
                                  lambda t: 1) for g, u in gpus.values()])
    owners = []
    for project, (g, u) in gpus.items():
        dev = base + [("gpu", g), ("uuid", u)]
        owners.append((dev + [("project", project)], lambda t, p=project: share_integral(p, t)))
        owners.append((dev + [("project", "__idle__")], lambda t, p=project: t - share_integral(p, t)))
    family("gpu_allocated_seconds", "counter", owners)
    family("gpu_busy_seconds", "counter", [(labels, lambda t, f=f: 0.5 * f(t)) for labels, f in owners])
    family("gpu_memory_byte_seconds", "counter", [(labels, lambda t, f=f: 2**30 * f(t)) for labels, f in owners])
    family("gpu_attributed_energy_joules", "counter", [(labels, lambda t, f=f: 300 * f(t)) for labels, f in owners])
    family("gpumeter_ledger_covered_seconds", "counter",
           [(base + [("gpu", g), ("uuid", u)], lambda t: t) for g, u in gpus.values()])
    family("gpumeter_ledger_gap_seconds", "counter",
           [(base + [("gpu", g), ("uuid", u)], lambda t: 0) for g, u in gpus.values()])
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


class ReportForecast(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="gpumeter-forecast-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
        # Ends at 00:00 UTC at least 4 hours ago: promtool backfills no sample of the last 3 hours.
        import time
        cls.end = int(time.time() - 4 * 3600) // DAY * DAY
        cls.start = cls.end - DAYS * DAY
        serve_backfilled(cls, openmetrics(cls.start), INTERVAL, retention="90d", block_flags=["--max-block-duration=18h"])
        cls.pricing = os.path.join(cls.tmp, "pricing.yaml")
        with open(cls.pricing, "w") as f:
            f.write('currency: EUR\ngpu_models:\n  "*": {gpu_hour: %r}\nidle:\n  policy: separate\n' % PRICE)

    def report(self, fmt, *extra):
        args = [BIN, "report", "--url", self.url, "--from", str(self.start), "--to", str(self.end), "--by", "project",
                "--forecast", "30d", "--format", fmt, "--progress", "never"] + list(extra)
        r = subprocess.run(args, capture_output=True, text=True, timeout=240)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def check(self, got, project):
        """A forecast (gpus_at_end, trend per day, GPU-hours) against the construction."""
        gpus, trend, hours = got
        self.assertAlmostEqual(gpus, WANT_GPUS_AT_END[project], delta=1e-6, msg=project)
        self.assertAlmostEqual(trend, WANT_TREND[project], delta=1e-8, msg=project)
        self.assertAlmostEqual(hours, WANT_HOURS[project], delta=1e-6 * WANT_HOURS[project], msg=project)

    def test_json_forecast_is_the_construction(self):
        doc = json.loads(self.report("json"))
        self.assertEqual(doc["forecast_seconds"], HORIZON)
        rows = {r["key"]["project"]: r for r in doc["rows"]}
        for project in SHARES:
            f = rows[project]["forecast"]
            print("%s: %s" % (project, json.dumps(f)))
            self.check((f["gpus_at_end"], f["trend_gpus_per_day"], f["gpu_hours"]), project)
            self.assertIsNone(f["cost"])
        self.assertIsNone(rows["__idle__"]["forecast"])  # idle time is not demand
        total = doc["total"]["forecast"]
        self.assertAlmostEqual(total["gpu_hours"], sum(WANT_HOURS.values()), delta=1e-6 * sum(WANT_HOURS.values()))
        self.assertAlmostEqual(total["trend_gpus_per_day"], WANT_TREND["growth"], delta=1e-8)

    def test_priced_forecast_at_each_group_s_cost_per_gpu_hour(self):
        doc = json.loads(self.report("json", "--pricing", self.pricing))
        rows = {r["key"]["project"]: r for r in doc["rows"]}
        for project in SHARES:
            self.assertAlmostEqual(rows[project]["forecast"]["cost"], PRICE * WANT_HOURS[project],
                                   delta=1e-6 * PRICE * WANT_HOURS[project])
        self.assertAlmostEqual(doc["total"]["forecast"]["cost"], PRICE * sum(WANT_HOURS.values()),
                               delta=1e-6 * PRICE * sum(WANT_HOURS.values()))

    def test_csv_table_and_html_show_it(self):
        rows = {r["project"]: r for r in csv.DictReader(io.StringIO(self.report("csv", "--pricing", self.pricing)))}
        for project in SHARES:
            r = rows[project]
            self.check((float(r["forecast_gpus_at_end"]), float(r["forecast_trend_gpus_per_day"]),
                        float(r["forecast_gpu_hours"])), project)
            self.assertAlmostEqual(float(r["forecast_cost"]), PRICE * WANT_HOURS[project], delta=1e-3)
        self.assertEqual(rows["__idle__"]["forecast_gpu_hours"], "")
        table = self.report("table", "--pricing", self.pricing)
        print(table)
        section = table[table.index("forecast for the next 30 d"):]
        self.assertRegex(section, r"growth\s+0\.80\s+\+0\.020\s+792\.0\s+1,584\.00")
        self.assertRegex(section, r"flat\s+0\.50\s+\+0\.000\s+360\.0\s+720\.00")
        self.assertRegex(section, r"TOTAL\s+1\.30\s+\+0\.020\s+1,152\.0\s+2,304\.00")
        html = self.report("html", "--pricing", self.pricing)
        self.assertIn('<h2 id="forecast">Forecast for the next 30.0 days</h2>', html)
        self.assertIn("792.0", html)

    def test_bad_horizon_is_refused(self):
        r = subprocess.run([BIN, "report", "--url", self.url, "--forecast", "soon"], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--forecast", r.stderr)


if __name__ == "__main__":
    unittest.main()
