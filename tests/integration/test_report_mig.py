"""`gpumeter report` on a MIG history backfilled into a real Prometheus (promtool blocks): one
H100 cut 3g + 2g + 1g + 1g with pods of different namespaces on the slices, re-partitioned
midway (the 3g gives way to a 2g and one unallocated slice), an instance nobody uses, and the
parent's unallocated slice as __idle__. The ledger's series are written as the ledger bills MIG
(docs/ledger.md): an instance of s compute slices accrues s/7 GPU-seconds per second, split among
its owners, with the instance's mig labels. The report must price each slice by its share of the
H100's price, by its profile's price per instance-hour where the pricing file sets one, group
by mig_profile, and show the slice hours; `gpumeter rules`, evaluated by promtool on the same
history, must charge each namespace what the report charges it.

ReportMigA30: the same on an A30 (4 slices; scenarios/mig-a30.yaml), its history written from
`gpumeter sim truth`: an instance of s slices accrues s/4 GPU-seconds per second, and a profile's
price per instance-hour must charge exactly that per hour of the instance (not x 7/s), and the
GPU dashboard's MIG row must show each instance's own slices of the 4."""
import csv
import io
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest
import urllib.parse

import yaml

import harness
from harness import SCENARIOS, report, report_json, serve_backfilled

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
    """Every ledger series of one GPU in MIG mode as (labels, rate in GPU-seconds per second,
    start, end), and the exact truth per (namespace, profile). `gpu` is the GPU's labels, `model`
    its gpu_info model, `slices` the gpu_mig_slices it exports (None: none)."""

    def __init__(self, start, end, gpu, model, slices):
        self.start, self.end = start, end
        self.gpu, self.model, self.slices = gpu, model, slices
        self.series = []
        self.truth = {}  # (namespace or "__idle__", mig_profile) -> GPU-seconds

    def add(self, labels, rate, t0, t1, key):
        self.series.append((labels, rate, t0, t1))
        self.truth[key] = self.truth.get(key, 0.0) + rate * (t1 - t0)

    def gauges(self):
        """gpu_info, and gpu_mig_slices where the GPU exports it: (name, labels, value)."""
        out = [("gpu_info", dict(self.gpu, vendor="nvidia", model=self.model), 1)]
        if self.slices is not None:
            out.append(("gpu_mig_slices", self.gpu, self.slices))
        return out

    def promtool_series(self):
        """The gauges and the allocated seconds as `promtool test rules` input series, one value
        a minute from time 0 ("_" where a series has no sample)."""
        minutes = int(self.end - self.start) // 60
        rows = [('%s{%s}' % (name, labels_text(labels)), "%rx%d" % (value, minutes))
                for name, labels, value in self.gauges()]
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

        for name, labels, value in self.gauges():
            family(name, "gauge", [(labels, (lambda v: lambda dt: v)(value), self.start, self.end)])
        family("gpumeter_ledger_covered_seconds", "counter", [(self.gpu, lambda dt: float(dt), self.start, self.end)])
        family("gpumeter_ledger_gap_seconds", "counter", [(self.gpu, lambda dt: 0.0, self.start, self.end)])
        owners = self.series
        # The agent exports an owner's four counters together; __idle__ is busy 0 and holds no memory.
        work = [(l, 0 if l["project"] == "__idle__" else r, a, b) for l, r, a, b in owners]
        family("gpu_allocated_seconds", "counter", [(l, (lambda r: lambda dt: r * dt)(r), a, b) for l, r, a, b in owners])
        family("gpu_busy_seconds", "counter", [(l, (lambda r: lambda dt: r / 2 * dt)(r), a, b) for l, r, a, b in work])
        family("gpu_memory_byte_seconds", "counter",
               [(l, (lambda r: lambda dt: 2.0 ** 30 * dt if r else 0.0)(r), a, b) for l, r, a, b in work])
        family("gpu_attributed_energy_joules", "counter",
               [(l, (lambda r: lambda dt: 700 * r * dt)(r), a, b) for l, r, a, b in owners])
        out.append("# EOF\n")
        return "".join(out)


def h100_history(start):
    """The H100 of INSTANCES, re-partitioned after HALF; its agent exports no gpu_mig_slices."""
    h = History(start, start + 2 * HALF, GPU, MODEL, None)
    h.mid = start + HALF

    def span(first, second):
        return (h.start if first else h.mid), (h.end if second else h.mid)

    for mig_uuid, profile, gi, slices, owners, first, second in INSTANCES:
        for namespace, share in owners:
            labels = dict(GPU, mig_uuid=mig_uuid, gpu_instance=gi, compute_instance="0", mig_profile=profile,
                          **owner_labels(namespace))
            h.add(labels, slices / 7 * share, *span(first, second), (namespace, profile))
    slices, first, second = PARENT_IDLE
    h.add(dict(GPU, project="__idle__"), slices / 7, *span(first, second), ("__idle__", ""))
    return h


def serve_history(cls, history_at, prefix):
    """Backfills the history `history_at(start)` returns into a Prometheus of the class's own
    (cls.tmp, cls.history, cls.url)."""
    cls.tmp = tempfile.mkdtemp(prefix=prefix)
    cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
    # Whole hours, ending two hours ago: older than Prometheus' head block, so the blocks
    # promtool writes are all there is.
    end = int(time.time()) // 3600 * 3600 - 2 * 3600
    cls.history = history_at(end - 2 * HALF)
    serve_backfilled(cls, cls.history.openmetrics(), INTERVAL)


def write_pricing(directory, text):
    path = os.path.join(directory, "pricing-%d.yaml" % len(os.listdir(directory)))
    with open(path, "w") as f:
        f.write(text)
    return path


class ReportMig(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        serve_history(cls, h100_history, "gpumeter-report-mig-")

    def pricing(self, extra=""):
        return write_pricing(self.tmp, 'gpu_models:\n  "%s": {gpu_hour: %r}\n  "*": {gpu_hour: 1}\n%s'
                             % (MODEL, PRICE, extra))

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


A30_SCENARIO = os.path.join(SCENARIOS, "mig-a30.yaml")
A30_MODEL = "NVIDIA A30"
A30_PRICE = 2.0      # per A30-hour
A30_1G_HOUR = 0.9    # per instance-hour of a 1g.6gb: above its share, 2.0 / 4 = 0.5


def a30_history(start):
    """The A30 of scenarios/mig-a30.yaml over 6 h (2 x HALF), its ledger series written from
    `gpumeter sim truth --policy scheduler`: each instance accrues slices / the truth's GPU
    slices per second, to each pod holding it (each for the instance's whole life) or to
    __idle__. Its agent exports gpu_mig_slices."""
    out = subprocess.run([harness.BIN, "sim", "truth", "--scenario", A30_SCENARIO, "--from", "0", "--to",
                          str(2 * HALF), "--format", "json", "--policy", "scheduler"],
                         check=True, capture_output=True, text=True, timeout=60)
    truth = json.loads(out.stdout)["mig"]
    with open(A30_SCENARIO) as f:
        namespaces = {a["name"]: a["kubernetes"]["namespace"] for a in yaml.safe_load(f)["allocations"]}
    (g,) = truth["gpus"]
    gpu = {"job": "gpumeter", "instance": "n2:9400", "gpu": "0", "uuid": g["uuid"]}
    h = History(start, start + 2 * HALF, gpu, A30_MODEL, g["slices"])
    h.sim, h.namespaces = truth, namespaces
    assert g["unallocated_slice_seconds"] == 0, "every slice is held by an instance throughout"
    for m in truth["instances"]:
        labels = dict(gpu, mig_uuid=m["mig_uuid"], gpu_instance=str(m["gpu_instance"]),
                      compute_instance=str(m["compute_instance"]), mig_profile=m["profile"])
        span = (start + m["start"], start + m["end"])
        rate = m["slices"] / g["slices"]
        for o in m["owners"]:
            assert o["allocated_seconds"] == m["seconds"], (m["name"], o)
            namespace = namespaces[o["owner"]]
            h.add(dict(labels, **owner_labels(namespace)), rate, *span, (namespace, m["profile"]))
        if not m["owners"]:
            assert m["idle_seconds"] == m["seconds"], m["name"]
            h.add(dict(labels, project="__idle__"), rate, *span, ("__idle__", m["profile"]))
    return h


class ReportMigA30(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        serve_history(cls, a30_history, "gpumeter-report-mig-a30-")

    def test_a_profile_price_is_per_hour_of_the_instance_on_four_slices(self):
        h = self.history
        self.assertEqual(h.slices, 4)
        pricing = write_pricing(self.tmp, 'gpu_models:\n  "%s": {gpu_hour: %r}\n  "*": {gpu_hour: 1}\n'
                                          'mig_profiles:\n  "%s":\n    1g.6gb: {instance_hour: %r}\n'
                                % (A30_MODEL, A30_PRICE, A30_MODEL, A30_1G_HOUR))
        doc = report_json("--url", self.url, "--from", h.start, "--to", h.end, "--step", "30m", "--by", "namespace",
                          "--pricing", pricing)
        rows = {(r["key"]["namespace"], r["idle"]): r for r in doc["rows"]}
        # From the truth: per namespace, the instance-seconds of each profile its pods held.
        want_seconds, want_cost = {}, {}
        for m in h.sim["instances"]:
            for namespace in [h.namespaces[o["owner"]] for o in m["owners"]] or ["__idle__"]:
                gpu_seconds = m["seconds"] * m["slices"] / h.slices
                priced = m["profile"] == "1g.6gb"
                cost = m["seconds"] / 3600 * A30_1G_HOUR if priced else gpu_seconds / 3600 * A30_PRICE
                want_seconds[namespace] = want_seconds.get(namespace, 0.0) + gpu_seconds
                want_cost[namespace] = want_cost.get(namespace, 0.0) + cost
        self.assertEqual({k[0] if not k[1] else "__idle__" for k in rows}, set(want_cost))
        for namespace, cost in want_cost.items():
            row = rows[(namespace, namespace == "__idle__")]
            self.assertLessEqual(abs(row["allocated_seconds"] - want_seconds[namespace]), EXACT * want_seconds[namespace],
                                 "GPU-seconds of %s" % namespace)
            self.assertLessEqual(abs(row["cost"]["allocation"] - cost), EXACT * max(1.0, cost),
                                 "cost of %s: report %r, truth %r" % (namespace, row["cost"]["allocation"], cost))
        # ns-q held two 1g.6gb for 6 h and 3 h: 9 instance-hours at 0.9 (by 7 slices: 14.175).
        self.assertAlmostEqual(rows[("ns-q", False)]["cost"]["allocation"], 9 * A30_1G_HOUR, places=9)
        # ns-r: a 1g.6gb for 3 h, then a 2g.12gb for 3 h at its share, 2/4 x 2.0 per hour.
        self.assertAlmostEqual(rows[("ns-r", False)]["cost"]["allocation"], 3 * A30_1G_HOUR + 3 * 1.0, places=9)
        # The GPU's 6 h, whoever held its slices.
        self.assertAlmostEqual(doc["total"]["allocated_seconds"], 2 * HALF, places=6)

    def test_the_gpu_dashboards_mig_row_shows_each_instances_own_slices(self):
        """The GPU dashboard's "MIG slices held by owner", its variables on All, on this history:
        in each half of the 6 h every owner holds its instance's own slices of the A30's 4, and
        together they hold all 4 (slices of 7 would show a 1g.6gb as 1.75)."""
        with open(os.path.join(harness.SOURCE_DIR, "deploy", "grafana", "dashboards", "gpumeter-gpu.json")) as f:
            dash = json.load(f)
        panels = dash["panels"] + [p for row in dash["panels"] for p in row.get("panels", [])]
        (panel,) = [p for p in panels if p.get("title") == "MIG slices held by owner"]
        (target,) = panel["targets"]
        # The variables on All; $__rate_interval as Grafana sets it for samples a minute apart.
        expr = target["expr"].replace("$__rate_interval", "%ds" % (4 * INTERVAL))
        expr = re.sub(r"\$(cluster|node|gpu)\b", ".*", expr)
        self.assertNotIn("$", expr)
        h = self.history
        slices = {m["profile"]: m["slices"] for m in h.sim["instances"]}
        self.assertEqual(slices, {"1g.6gb": 1, "2g.12gb": 2})
        # Instances of each profile in each half: q0 to q3; then q0, q1 and half.
        for at, count in ((h.start + HALF / 2, {"1g.6gb": 4}), (h.start + HALF * 3 / 2, {"1g.6gb": 2, "2g.12gb": 1})):
            _, _, body = harness.http_get("%s/api/v1/query?%s" % (self.url, urllib.parse.urlencode(
                {"query": expr, "time": repr(at)})))
            doc = json.loads(body)
            self.assertEqual(doc["status"], "success", body[:300])
            got = {}
            for r in doc["data"]["result"]:
                got.setdefault(r["metric"]["mig_profile"], []).append(float(r["value"][1]))
            self.assertEqual({p: len(v) for p, v in got.items()}, count, got)
            for profile, values in got.items():
                for value in values:
                    self.assertAlmostEqual(value, slices[profile], delta=1e-6, msg=(at - h.start, profile, got))


if __name__ == "__main__":
    unittest.main()
