"""`gpumeter report` on a MIG history backfilled into a real Prometheus (promtool blocks): one
H100 cut 3g + 2g + 1g + 1g with pods of different namespaces on the slices, re-partitioned
midway (the 3g gives way to a 2g and one unallocated slice), an instance nobody uses, and the
parent's unallocated slice as __idle__. The ledger's series are written as the ledger bills MIG
(docs/ledger.md): an instance of s compute slices accrues s/7 GPU-seconds per second, split among
its owners, with the instance's mig labels. The report must price each slice by its share of the
H100's price, by its profile's price per instance-hour where the pricing file sets one, group
by mig_profile, and show the slice hours; `gpumeter rules`, evaluated by promtool on the same
history, must charge each namespace what the report charges it."""
import csv
import io
import os
import shutil
import subprocess
import tempfile
import time
import unittest

import harness
from harness import Process, free_port, http_get, report, report_json, wait_until

MODEL = "NVIDIA H100 80GB HBM3"
PRICE = 3.5          # per H100-hour
HALF = 3 * 3600      # the layout changes after 3 h
INTERVAL = 60        # seconds between samples
EXACT = 1e-9         # the history's counters are exact: so are the report's sums
GPU = {"job": "gpumeter", "instance": "n1:9400", "gpu": "0", "uuid": "GPU-7f1c2e40"}

# (instance, profile, gpu_instance, slices, [(namespace, share of the instance)], first half, second half)
INSTANCES = [
    ("MIG-a3", "3g.40gb", "1", 3, [("ns-a", 1.0)], True, False),
    ("MIG-b2", "2g.20gb", "5", 2, [("ns-b", 0.5), ("ns-e", 0.5)], True, True),
    ("MIG-c1", "1g.10gb", "13", 1, [("ns-c", 1.0)], True, True),
    ("MIG-d1", "1g.10gb", "14", 1, [("__idle__", 1.0)], True, True),   # an instance nobody uses
    ("MIG-e2", "2g.20gb", "3", 2, [("ns-a", 1.0)], False, True),       # replaces the 3g midway
]
# The slice the 3g left free: the parent's own __idle__ series, mig labels empty.
PARENT_IDLE = (1, False, True)


def labels_text(labels):
    return ",".join('%s="%s"' % (k, v) for k, v in sorted(labels.items()))


def owner_labels(namespace):
    if namespace == "__idle__":
        return {"project": "__idle__"}
    team = "team-" + namespace[3:]
    return {"project": team, "user": team + "-user", "namespace": namespace, "pod": namespace + "-pod-0",
            "container": "main"}


class History:
    """Every ledger series of the H100 as (labels, rate in GPU-seconds per second, start, end),
    and the exact truth per (namespace, profile)."""

    def __init__(self, start):
        self.start, self.mid, self.end = start, start + HALF, start + 2 * HALF
        self.series = []
        self.truth = {}  # (namespace or "__idle__", mig_profile) -> GPU-seconds
        for mig_uuid, profile, gi, slices, owners, first, second in INSTANCES:
            for namespace, share in owners:
                labels = dict(GPU, mig_uuid=mig_uuid, gpu_instance=gi, compute_instance="0", mig_profile=profile,
                              **owner_labels(namespace))
                self.add(labels, slices / 7 * share, first, second, (namespace, profile))
        slices, first, second = PARENT_IDLE
        self.add(dict(GPU, project="__idle__"), slices / 7, first, second, ("__idle__", ""))

    def add(self, labels, rate, first, second, key):
        t0 = self.start if first else self.mid
        t1 = self.end if second else self.mid
        self.series.append((labels, rate, t0, t1))
        self.truth[key] = self.truth.get(key, 0.0) + rate * (t1 - t0)

    def promtool_series(self):
        """gpu_info and the allocated seconds as `promtool test rules` input series, one value a
        minute from time 0 ("_" where a series has no sample)."""
        minutes = int(self.end - self.start) // 60
        rows = [('gpu_info{%s}' % labels_text(dict(GPU, vendor="nvidia", model=MODEL)), "1x%d" % minutes)]
        for labels, rate, t0, t1 in self.series:
            values = []
            for k in range(minutes + 1):
                t = self.start + 60 * k
                values.append(repr(rate * (t - t0)) if t0 <= t <= t1 else "_")
            rows.append(("gpu_allocated_seconds_total{%s}" % labels_text(labels), " ".join(values)))
        return "".join("      - series: '%s'\n        values: '%s'\n" % row for row in rows)

    def openmetrics(self):
        out = []

        def family(name, kind, rows):
            out.append("# TYPE %s %s\n" % (name, kind))
            sample = name + "_total" if kind == "counter" else name
            for labels, value_at, t0, t1 in rows:
                for t in range(int(t0), int(t1) + 1, INTERVAL):
                    out.append("%s{%s} %r %d\n" % (sample, labels_text(labels), value_at(t - t0), t))

        family("gpu_info", "gauge", [(dict(GPU, vendor="nvidia", model=MODEL), lambda dt: 1, self.start, self.end)])
        family("gpumeter_ledger_covered_seconds", "counter", [(GPU, lambda dt: float(dt), self.start, self.end)])
        family("gpumeter_ledger_gap_seconds", "counter", [(GPU, lambda dt: 0.0, self.start, self.end)])
        owners = self.series
        busy = [s for s in self.series if s[0]["project"] != "__idle__"]
        family("gpu_allocated_seconds", "counter", [(l, (lambda r: lambda dt: r * dt)(r), a, b) for l, r, a, b in owners])
        family("gpu_busy_seconds", "counter", [(l, (lambda r: lambda dt: r / 2 * dt)(r), a, b) for l, r, a, b in busy])
        family("gpu_memory_byte_seconds", "counter", [(l, lambda dt: 2.0 ** 30 * dt, a, b) for l, r, a, b in busy])
        family("gpu_attributed_energy_joules", "counter",
               [(l, (lambda r: lambda dt: 700 * r * dt)(r), a, b) for l, r, a, b in owners])
        out.append("# EOF\n")
        return "".join(out)


class ReportMig(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="gpumeter-report-mig-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
        # Whole hours, ending two hours ago: older than Prometheus' head block, so the blocks
        # promtool writes are all there is.
        end = int(time.time()) // 3600 * 3600 - 2 * 3600
        cls.history = History(end - 2 * HALF)
        om = os.path.join(cls.tmp, "history.om")
        with open(om, "w") as f:
            f.write(cls.history.openmetrics())
        blocks = os.path.join(cls.tmp, "data")
        os.makedirs(blocks)
        r = subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", "-q", om, blocks],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise AssertionError("promtool: " + r.stderr[-2000:])
        cfg = os.path.join(cls.tmp, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: %ds\n" % INTERVAL)
        port = free_port()
        cls.url = "http://127.0.0.1:%d" % port
        cls.prom = Process(["prometheus", "--config.file=" + cfg, "--storage.tsdb.path=" + blocks,
                            "--storage.tsdb.retention.time=30d", "--web.listen-address=127.0.0.1:%d" % port,
                            "--log.level=warn"], workdir=cls.tmp, name="prometheus")
        cls.addClassCleanup(cls.prom.stop)
        wait_until(lambda: http_get(cls.url + "/-/ready", timeout=2)[0] == 200, 60, what="prometheus ready")

    def pricing(self, extra=""):
        path = os.path.join(self.tmp, "pricing-%d.yaml" % len(os.listdir(self.tmp)))
        with open(path, "w") as f:
            f.write('gpu_models:\n  "%s": {gpu_hour: %r}\n  "*": {gpu_hour: 1}\n%s' % (MODEL, PRICE, extra))
        return path

    def run_report(self, *args):
        h = self.history
        return report_json("--url", self.url, "--from", h.start, "--to", h.end, "--step", "30m", *args)

    def truth_by(self, index):
        out = {}
        for key, seconds in self.history.truth.items():
            out[key[index]] = out.get(key[index], 0.0) + seconds
        return out

    def assert_close(self, got, want, what):
        self.assertLessEqual(abs(got - want), EXACT * max(1.0, abs(want)), "%s: report %r, truth %r" % (what, got, want))

    def test_history_adds_up_to_the_gpu(self):
        # The instances plus the unallocated slice are the GPU's seconds, as the ledger keeps them.
        self.assert_close(sum(self.history.truth.values()), 2 * HALF, "GPU-seconds of the history")
        doc = self.run_report("--by", "namespace")
        rec = doc["reconciliation"]
        self.assertTrue(rec["ok"], rec)
        self.assert_close(rec["covered_seconds"], 2 * HALF, "covered seconds")
        self.assert_close(rec["owners_seconds"] + rec["idle_seconds"], 2 * HALF, "owners + idle")

    def test_by_namespace_prices_each_slice_by_its_share(self):
        doc = self.run_report("--by", "namespace", "--pricing", self.pricing())
        rows = {(r["key"]["namespace"], r["idle"]): r for r in doc["rows"]}
        truth = self.truth_by(0)
        self.assertEqual({k[0] if not k[1] else "__idle__" for k in rows}, set(truth))
        for namespace, seconds in truth.items():
            row = rows[(namespace, namespace == "__idle__")]
            self.assert_close(row["allocated_seconds"], seconds, "GPU-seconds of %s" % namespace)
            self.assert_close(row["cost"]["allocation"], seconds * PRICE / 3600, "cost of %s" % namespace)
        # ns-a held 3/7 for 3 h, then 2/7 for 3 h: 15/7 GPU-hours, 7.5 at 3.5 per GPU-hour.
        self.assert_close(rows[("ns-a", False)]["cost"]["allocation"], 7.5, "ns-a")
        # The whole GPU for 6 h, whoever held its slices.
        self.assert_close(doc["total"]["cost"]["allocation"], 6 * PRICE, "the GPU's 6 h")
        # Every owner row's time was on slices; the idle row holds the parent's unallocated slice too.
        for (namespace, idle), row in rows.items():
            want = truth[namespace] - (self.history.truth[("__idle__", "")] if idle else 0)
            self.assert_close(row["mig_allocated_seconds"], want, "slice seconds of %s" % namespace)
        self.assertEqual(rows[("ns-a", False)]["mig_profiles"], ["2g.20gb", "3g.40gb"])

    def test_profile_price_replaces_the_share(self):
        # An instance-hour of a 1g.10gb costs 0.9 where its share would be 3.5 / 7 = 0.5.
        pricing = self.pricing('mig_profiles:\n  "%s":\n    1g.10gb: {instance_hour: 0.9}\n' % MODEL)
        doc = self.run_report("--by", "namespace", "--pricing", pricing)
        rows = {(r["key"]["namespace"], r["idle"]): r for r in doc["rows"]}
        hours = 2 * HALF / 3600
        # ns-c held a whole 1g for 6 h: 6 instance-hours.
        self.assert_close(rows[("ns-c", False)]["cost"]["allocation"], hours * 0.9, "ns-c on a priced 1g")
        # Idle: the unused 1g for 6 h at its price, the parent's free slice for 3 h at its share.
        self.assert_close(rows[("__idle__", True)]["cost"]["allocation"],
                          hours * 0.9 + self.history.truth[("__idle__", "")] * PRICE / 3600, "idle")
        # The 3g and the 2g have no price: still their share.
        truth = self.truth_by(0)
        for namespace in ("ns-a", "ns-b", "ns-e"):
            self.assert_close(rows[(namespace, False)]["cost"]["allocation"], truth[namespace] * PRICE / 3600, namespace)

    def test_by_mig_profile(self):
        pricing = self.pricing('mig_profiles:\n  "*":\n    3g.40gb: {instance_hour: 2.0}\n')
        doc = self.run_report("--by", "mig_profile", "--pricing", pricing)
        self.assertEqual(doc["by"], ["mig_profile"])
        rows = {(r["key"]["mig_profile"], r["idle"]): r for r in doc["rows"]}
        owners = {}
        idle = {}
        for (namespace, profile), seconds in self.history.truth.items():
            target = idle if namespace == "__idle__" else owners
            target[profile] = target.get(profile, 0.0) + seconds
        self.assertEqual(set(rows), {(p, False) for p in owners} | {(p, True) for p in idle})
        for (profile, is_idle), row in rows.items():
            want = (idle if is_idle else owners)[profile]
            self.assert_close(row["allocated_seconds"], want, "GPU-seconds of %r" % profile)
        # The 3g ran 3 h at 2.0 per instance-hour, whatever its share would have cost.
        self.assert_close(rows[("3g.40gb", False)]["cost"]["allocation"], 6.0, "3g")
        self.assert_close(rows[("2g.20gb", False)]["cost"]["allocation"], owners["2g.20gb"] * PRICE / 3600, "2g")
        # The parent's unallocated slice is no MIG instance: profile "", no slice hours.
        self.assertEqual(rows[("", True)]["mig_allocated_seconds"], 0)

        table = report("--url", self.url, "--from", self.history.start, "--to", self.history.end, "--by",
                       "mig_profile,namespace", "--pricing", pricing).stdout
        self.assertIn("MIG_PROFILE", table)
        self.assertIn("MIG SLICE GPU-H", table)
        lines = list(csv.DictReader(io.StringIO(report(
            "--url", self.url, "--from", self.history.start, "--to", self.history.end, "--by", "mig_profile",
            "--format", "csv").stdout)))
        by_profile = {(l["mig_profile"], l["kind"]): l for l in lines}
        self.assertEqual(by_profile[("3g.40gb", "owner")]["mig_profiles"], "3g.40gb")
        self.assert_close(float(by_profile[("3g.40gb", "owner")]["mig_allocated_gpu_hours"]) * 3600,
                          owners["3g.40gb"], "CSV slice hours")

    def test_rules_price_as_the_report(self):
        """`gpumeter rules` from the same pricing file, evaluated by promtool on the same history
        (shifted to 1970, where promtool starts), gives each namespace the cost per hour the
        report charges it in each half."""
        pricing = self.pricing('mig_profiles:\n  "*":\n    3g.40gb: {instance_hour: 2.0}\n'
                               '  "%s":\n    1g.10gb: {instance_hour: 0.9}\n' % MODEL)
        h = self.history
        expected = []
        for a, b, at in ((h.start, h.mid, "90m"), (h.mid, h.end, "270m")):
            doc = report_json("--url", self.url, "--from", a, "--to", b, "--step", "30m", "--by", "namespace",
                              "--pricing", pricing)
            samples = ""
            for r in doc["rows"]:
                per_hour = round(r["cost"]["allocation"] / ((b - a) / 3600) * 1e6) / 1e6
                namespace = "" if r["idle"] else r["key"]["namespace"]
                labels = '{namespace="%s",currency="USD"}' % namespace if namespace else '{currency="USD"}'
                samples += "          - labels: '%s'\n            value: %r\n" % (labels, per_hour)
            expected.append("      - expr: round(gpumeter:cost_per_hour:by_namespace * 1e6) / 1e6\n"
                            "        eval_time: %s\n        exp_samples:\n%s" % (at, samples))
        work = tempfile.mkdtemp(dir=self.tmp)
        r = subprocess.run([harness.BIN, "rules", "--pricing", pricing, "--output", os.path.join(work, "rules.yml")],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        test = os.path.join(work, "test.yml")
        with open(test, "w") as f:
            f.write("rule_files: [rules.yml]\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n"
                    "    input_series:\n%s    promql_expr_test:\n%s" % (h.promtool_series(), "".join(expected)))
        r = subprocess.run(["promtool", "test", "rules", test], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_unknown_dimension_names_mig_profile(self):
        r = report("--url", self.url, "--by", "mig", check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("mig_profile", r.stderr)


if __name__ == "__main__":
    unittest.main()
