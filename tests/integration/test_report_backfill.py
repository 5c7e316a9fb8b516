"""`gpumeter report` against 30 days of synthetic fleet history backfilled into a real Prometheus
(promtool blocks) and a real VictoriaMetrics (/api/v1/import/prometheus), compared with the exact
truth of tests/tools/backfill.py: totals per owner, consecutive periods adding up to the whole,
the gaps named in warnings, reconciliation, and the hand-built stack's formulas measured on the
same data (docs/report-accuracy.md has the figures)."""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse
import urllib.request

import harness
from harness import Process, free_port, http_get, wait_until

sys.path.insert(0, os.path.join(harness.SOURCE_DIR, "tests", "tools"))
import backfill  # noqa: E402

BIN = harness.BIN or os.path.join(harness.SOURCE_DIR, "build", "bin", "gpumeter")
NODES, GPUS, DAYS, INTERVAL, SEED = 2, 4, 30, 60, "1"
TOLERANCE = 1e-3   # the bar: 0.1 %
SUMS = 1e-9        # consecutive periods against the whole
FIELDS = ("allocated_seconds", "busy_seconds", "memory_byte_seconds", "energy_joules")
OWNER_DIMS = ("project", "user", "namespace", "pod", "hpc_job")
PRICE = 5.0        # USD per GPU-hour, as in the seeds' formula
# An uneven split of the 30 days: 10 days 3 h 17 min, then the rest.
UNEVEN = 10 * 86400 + 3 * 3600 + 17 * 60


def rel(a, b, scale):
    return abs(a - b) / max(abs(b), scale)


def group(rows, dims):
    """{key tuple: [4 fields]} from the report's rows."""
    out = {}
    for r in rows:
        key = tuple(r["key"].get(d, "") for d in dims)
        acc = out.setdefault(key, [0.0] * 4)
        for i, f in enumerate(FIELDS):
            acc[i] += r[f]
    return out


def truth_groups(truth, dims):
    """The same from the truth's cells (GPU x owner); reserved owners carry their project in
    every owner dimension, as the report's rows do."""
    out = {}
    for c in truth["cells"]:
        labels = c["labels"]
        reserved = labels["project"] in backfill.RESERVED
        key = tuple(labels["project"] if reserved else labels.get(d, "") for d in dims)
        acc = out.setdefault(key, [0.0] * 4)
        for i, f in enumerate(FIELDS):
            acc[i] += c[f]
    return out


def unix(text):
    """The report's RFC 3339 times (UTC, "Z") as unix seconds."""
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class ReportBackfill(unittest.TestCase):
    reports = {}

    @classmethod
    def setUpClass(cls):
        t0 = time.time()
        cls.tmp = tempfile.mkdtemp(prefix="gpumeter-backfill-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
        # The history starts and ends at 00:00 UTC, where VictoriaMetrics' per-day index takes a
        # request's end as exclusive: series first sampled at that instant must still be read.
        end = backfill.default_end() // 86400 * 86400
        args = argparse.Namespace(nodes=NODES, gpus_per_node=GPUS, days=DAYS, interval=INTERVAL,
                                  end=end, seed=SEED, events=None)
        cls.fleet = fleet = backfill.build_fleet(args)
        cls.start, cls.end = fleet.start, fleet.end
        cls.events = {e["kind"]: e for e in fleet.event_log if e["kind"] != "returning-owner"}
        cls.returning = {e["owner"]["user"]: e for e in fleet.event_log if e["kind"] == "returning-owner"}

        # Prometheus: one promtool block per 18 h file, two promtool runs at a time, each file
        # deleted once converted (the whole history is 1.3 GB of text).
        blocks = os.path.join(cls.tmp, "prometheus")
        os.makedirs(blocks)
        cls.samples = backfill.promtool_blocks(
            backfill.iter_files(fleet, os.path.join(cls.tmp, "om"), "openmetrics", True, backfill.ALIGN), blocks)
        t_blocks = time.time() - t0

        cfg = os.path.join(cls.tmp, "prometheus.yml")
        with open(cfg, "w") as f:
            # evaluation_interval is also the default resolution of a subquery like [30d:]
            f.write("global:\n  scrape_interval: %ds\n  evaluation_interval: 1m\n" % INTERVAL)
        cls.prom_port = free_port()
        cls.prom_url = "http://127.0.0.1:%d" % cls.prom_port
        # max-block-duration=18h: the backfilled 18 h blocks are already the largest, so no
        # compaction competes with the reports for the two cores.
        cls.prom = Process(["prometheus", "--config.file=" + cfg, "--storage.tsdb.path=" + blocks,
                            "--storage.tsdb.retention.time=60d", "--storage.tsdb.max-block-duration=18h",
                            "--web.listen-address=127.0.0.1:%d" % cls.prom_port, "--log.level=warn"],
                           workdir=cls.tmp, name="prometheus")
        cls.addClassCleanup(cls.prom.stop)
        wait_until(lambda: http_get(cls.prom_url + "/-/ready", timeout=2)[0] == 200, 60, what="prometheus ready")

        # VictoriaMetrics: the same history as Prometheus text with millisecond timestamps.
        cls.vm_port = free_port()
        cls.vm_url = "http://127.0.0.1:%d" % cls.vm_port
        cls.vm = Process(["victoria-metrics", "-storageDataPath=" + os.path.join(cls.tmp, "vm"),
                          "-retentionPeriod=100y", "-httpListenAddr=127.0.0.1:%d" % cls.vm_port,
                          "-loggerLevel=WARN"], workdir=cls.tmp, name="victoria-metrics")
        cls.addClassCleanup(cls.vm.stop)
        wait_until(lambda: http_get(cls.vm_url + "/health", timeout=2)[0] == 200, 60, what="victoria-metrics")
        for path, _ in backfill.iter_files(fleet, os.path.join(cls.tmp, "prom"), "prometheus", False, backfill.ALIGN):
            with open(path, "rb") as f:
                body = f.read()
            os.unlink(path)
            req = urllib.request.Request(cls.vm_url + "/api/v1/import/prometheus", data=body, method="POST")
            with urllib.request.urlopen(req, timeout=120) as r:
                if r.status not in (200, 204):
                    raise AssertionError("VictoriaMetrics import: HTTP %d" % r.status)
        status, _, body = http_get(cls.vm_url + "/internal/force_flush", timeout=60)
        if status != 200:
            raise AssertionError("force_flush: %d %r" % (status, body[:200]))

        cls.whole = fleet.truth(cls.start, cls.end)
        print("\nbackfill: %d nodes x %d GPUs, %d days every %d s, %d samples, %d series lives; "
              "Prometheus blocks in %.1f s, all loaded in %.1f s; resets invisible in the samples: %d"
              % (NODES, GPUS, DAYS, INTERVAL, cls.samples, sum(len(g.lives) for g in fleet.gpus), t_blocks,
                 time.time() - t0, len(fleet.ambiguous)))
        for e in fleet.event_log:
            print("event:", json.dumps(e, sort_keys=True))

    # -- helpers --------------------------------------------------------------------------------

    def report(self, a, b, by, url=None, step=None):
        """`gpumeter report ... --format json`, run once per distinct request."""
        key = (a, b, tuple(by), url, step)
        if key in self.reports:
            return self.reports[key]
        out = os.path.join(self.tmp, "report.json")
        args = [BIN, "report", "--url", url or self.prom_url, "--from", str(a), "--to", str(b),
                "--by", ",".join(by), "--format", "json", "--output", out, "--progress", "never"]
        if step:
            args += ["--step", step]
        t0 = time.monotonic()
        p = subprocess.run(args, capture_output=True, text=True, timeout=240)
        wall = time.monotonic() - t0
        if p.returncode != 0:
            self.fail("%s exited %d:\n%s" % (" ".join(args), p.returncode, p.stderr[-3000:]))
        with open(out) as f:
            doc = json.load(f)
        self.assertEqual(doc["format"], "gpumeter-report")
        self.assertEqual(doc["from_unix"], a)
        self.assertEqual(doc["to_unix"], b)
        if b - a > 86400:
            print("report %s..%s by %s%s%s: %.2f s wall, %d queries, step %s s" % (
                a, b, ",".join(by), " (VictoriaMetrics)" if url == self.vm_url else "",
                " --step " + step if step else "", wall, doc["queries"], doc["step_seconds"]))
        self.reports[key] = doc
        return doc

    def query(self, expr, at, url=None):
        params = urllib.parse.urlencode({"query": expr, "time": repr(at)})
        status, _, body = http_get((url or self.prom_url) + "/api/v1/query?" + params, timeout=120)
        doc = json.loads(body)
        if status != 200 or doc.get("status") != "success":
            self.fail("query %r: %s" % (expr, body[:300]))
        return doc["data"]["result"]

    def compare(self, got, want, what):
        """Every group of `want` in `got` within TOLERANCE, and nothing else; returns the largest
        relative deviation. Every row off is listed before the test fails."""
        worst = 0.0
        bad = []
        scale = [max(abs(v[i]) for v in want.values()) * 1e-12 + 1e-9 for i in range(4)]
        for key, w in sorted(want.items()):
            if not any(w):
                continue
            self.assertIn(key, got, "%s: no row %r in the report (rows: %r)" % (what, key, sorted(got)))
            for i, f in enumerate(FIELDS):
                d = rel(got[key][i], w[i], scale[i])
                if d > TOLERANCE:
                    bad.append("%r %s: report %r, truth %r (%+.3g)" % (key, f, got[key][i], w[i],
                                                                      (got[key][i] - w[i]) / w[i]))
                else:
                    worst = max(worst, d)
        extra = [k for k, v in got.items() if k not in want and any(abs(x) > 1e-6 for x in v)]
        self.assertEqual(extra, [], "%s: rows the truth does not have" % what)
        if bad:
            print("%s: %d values off by more than %g (the others within %.3g):\n  %s"
                  % (what, len(bad), TOLERANCE, worst, "\n  ".join(bad)))
        self.assertEqual(bad, [], "%s: values off by more than %g" % (what, TOLERANCE))
        return worst

    def check_sum(self, name, parts, whole):
        """The parts' rows summed equal the whole's within SUMS; returns the largest deviation."""
        got = {}
        for part in parts:
            for k, v in part.items():
                acc = got.setdefault(k, [0.0] * 4)
                for i in range(4):
                    acc[i] += v[i]
        self.assertEqual(sorted(k for k, v in got.items() if any(v)), sorted(k for k, v in whole.items() if any(v)),
                         name)
        worst = 0.0
        bad = []
        for k, w in whole.items():
            for i, f in enumerate(FIELDS):
                d = rel(got[k][i], w[i], 1e-6)
                if d > SUMS:
                    bad.append("%r %s: sum %r, whole %r" % (k, f, got[k][i], w[i]))
                else:
                    worst = max(worst, d)
        if bad:
            print("%s against the 30-day report, off by more than %g:\n  %s" % (name, SUMS, "\n  ".join(bad)))
        self.assertEqual(bad, [], name)
        return worst

    # -- the tests ------------------------------------------------------------------------------

    def test_backfill_is_as_constructed(self):
        """The raw samples in Prometheus are the generator's intent: a returning owner restarts
        from 0, the node restarted without state restarts every counter, the outage leaves gap
        seconds and no samples."""
        ret = self.returning["zoe"]
        s2 = ret["returns_at"]
        r = self.query('gpu_allocated_seconds_total{user="zoe"}[%ds]' % (3 * 86400), s2 + 600)
        values = [(int(t), float(v)) for t, v in r[0]["values"]]
        before = [v for t, v in values if t < s2]
        after = [v for t, v in values if t > s2]
        self.assertAlmostEqual(before[-1], ret["first"][1] - ret["first"][0])
        self.assertEqual(after[0], INTERVAL - (s2 - self.start) % INTERVAL)  # from 0 at s2
        gap_in_series = min(t for t, _ in values if t > s2) - max(t for t, _ in values if t < s2)
        self.assertGreater(gap_in_series, s2 - ret["series_ends_at"])  # left the exposition, then back

        # The quick return: gone from the exposition for minutes, back from 0, and above its old
        # total before the next 3 h point of a 30-day report.
        quick = self.returning["yuki"]
        back = quick["returns_at"]
        r = self.query('gpu_allocated_seconds_total{user="yuki"}[4h]', back + 3 * 3600)
        values = [(int(t), float(v)) for t, v in r[0]["values"]]
        before = [(t, v) for t, v in values if t < back]
        after = [(t, v) for t, v in values if t > back]
        self.assertEqual(before[-1][1], quick["first"][1] - quick["first"][0])
        self.assertEqual(after[0][1], INTERVAL - (back - self.start) % INTERVAL)
        self.assertLess(after[0][0] - before[-1][0], 1800)
        self.assertGreater(after[-1][1], before[-1][1])

        rs = self.events["agent-restart-without-state"]
        r = self.query('gpumeter_ledger_covered_seconds_total{instance="%s"}[%ds]' % (rs["node"], 2 * INTERVAL),
                       rs["from"] + INTERVAL)
        self.assertEqual(len(r), GPUS)
        for s in r:
            self.assertEqual(float(s["values"][-1][1]), INTERVAL - rs["lost_seconds"])

        out = self.events["agent-outage-with-state"]
        r = self.query('gpumeter_ledger_gap_seconds_total{instance="%s"}' % out["node"], out["first_sample_after"])
        self.assertEqual(sorted(float(s["value"][1]) for s in r), [out["gap_seconds"]] * GPUS)
        r = self.query('count_over_time(gpu_info{instance="%s"}[%ds])' % (out["node"], out["to"] - out["from"] - 1),
                       out["to"] - 1)
        self.assertEqual(r, [])

        # VictoriaMetrics holds the same samples (it stores decimals: allow rounding).
        for metric in ("gpumeter_ledger_covered_seconds_total", "gpu_memory_byte_seconds_total",
                       "gpu_attributed_energy_joules_total"):
            expr = "sum(%s)" % metric
            p = float(self.query(expr, self.end)[0]["value"][1])
            v = float(self.query(expr, self.end, url=self.vm_url)[0]["value"][1])
            print("%s at the end: Prometheus %r, VictoriaMetrics %r" % (expr, p, v))
            self.assertLessEqual(rel(v, p, 1.0), 1e-9)

    def test_30_days_by_owner_equal_the_truth(self):
        worst = {}
        for by in (["project"], ["user"], list(OWNER_DIMS)):
            with self.subTest(by=",".join(by)):
                doc = self.report(self.start, self.end, by)
                total = doc["total"]
                for i, f in enumerate(FIELDS):
                    self.assertLessEqual(rel(total[f], self.whole["total"][f], 1e-9), TOLERANCE, "total " + f)
                worst[",".join(by)] = self.compare(group(doc["rows"], by), truth_groups(self.whole, by),
                                                   "30 days by " + ",".join(by))
        print("30-day report vs truth, largest relative deviation:", json.dumps(worst))

    def test_consecutive_periods_add_up(self):
        by = list(OWNER_DIMS)
        whole = group(self.report(self.start, self.end, by)["rows"], by)
        daily_sum = {}
        worst_day = 0.0
        for d in range(DAYS):
            a, b = self.start + d * 86400, self.start + (d + 1) * 86400
            doc = self.report(a, b, by)
            rows = group(doc["rows"], by)
            worst_day = max(worst_day, self.compare(rows, truth_groups(self.fleet.truth(a, b), by), "day %d" % d))
            for k, v in rows.items():
                acc = daily_sum.setdefault(k, [0.0] * 4)
                for i in range(4):
                    acc[i] += v[i]
        cut = self.start + UNEVEN
        self.assertFalse(self.fleet.in_gap(cut))
        first, second = (group(self.report(a, b, by)["rows"], by) for a, b in ((self.start, cut), (cut, self.end)))
        worst_sum = 0.0
        for name, parts in (("30 daily reports", [daily_sum]), ("10 d 3 h 17 min + rest", [first, second])):
            with self.subTest(name):
                worst_sum = max(worst_sum, self.check_sum(name, parts, whole))
        print("daily reports vs truth, largest relative deviation: %.3g; sums of consecutive periods vs the "
              "whole: %.3g" % (worst_day, worst_sum))

    def test_warnings_name_the_gaps_and_reconciliation_holds(self):
        gpus_of = {n.instance: [g.uuid for g in n.gpus] for n in self.fleet.nodes}
        out = self.events["agent-outage-with-state"]
        gap = self.events["prometheus-gap"]
        restart = self.events["agent-restart-without-state"]

        def find(doc, kind, uuid, node, t_lo, t_hi):
            """Warnings of `kind` about this GPU whose time range meets [t_lo, t_hi]."""
            return [w for w in doc["warnings"] if w["kind"] == kind and w["gpu"] == uuid and w["node"] == node
                    and unix(w["from"]) < t_hi and t_lo < unix(w["to"]) and uuid in w["message"]]

        # At the default step (3 h for 30 days).
        doc = self.report(self.start, self.end, ["project"])
        for w in doc["warnings"]:
            print("warning:", json.dumps(w, sort_keys=True))
        for uuid in gpus_of[out["node"]]:
            ws = find(doc, "gap", uuid, out["node"], out["from"], out["first_sample_after"])
            self.assertEqual(len(ws), 1, "one gap warning for %s" % uuid)
            self.assertIn("%d s" % out["gap_seconds"], ws[0]["message"])
            # the step in which the gap counter grew holds the first sample after the outage
            self.assertLess(unix(ws[0]["from"]), out["first_sample_after"])
            self.assertGreaterEqual(unix(ws[0]["to"]), out["first_sample_after"])
        for uuid in gpus_of[restart["node"]]:
            ws = find(doc, "reset", uuid, restart["node"], restart["from"] - 1, restart["to"] + INTERVAL)
            self.assertEqual(len(ws), 1, "one reset warning for %s" % uuid)
            self.assertLessEqual(unix(ws[0]["from"]), restart["from"])
            self.assertGreaterEqual(unix(ws[0]["to"]), restart["to"])
        holes = [w for w in doc["warnings"] if w["kind"] == "missing-data"]
        print("missing-data warnings at the default step (%s s): %d (a hole is named only when a whole step lies "
              "in it)" % (doc["step_seconds"], len(holes)))

        rec = doc["reconciliation"]
        print("reconciliation:", json.dumps(rec, sort_keys=True))
        self.assertTrue(rec["ok"])
        self.assertLessEqual(abs(rec["owners_seconds"] + rec["idle_seconds"] - rec["covered_seconds"]),
                             1e-6 * rec["covered_seconds"])
        for field in ("covered_seconds", "idle_seconds", "owners_seconds", "gap_seconds"):
            self.assertLessEqual(rel(rec[field], self.whole[field], 1.0), TOLERANCE,
                                 "reconciliation %s: %r vs truth %r" % (field, rec[field], self.whole[field]))

        # At a 1 h step the holes in the samples are named, within the true holes.
        doc = self.report(self.start, self.end, ["project"], step="1h")
        for w in doc["warnings"]:
            if w["kind"] == "missing-data":
                print("warning (--step 1h):", json.dumps(w, sort_keys=True))
        for nodes, hole in (([out["node"]], out), (list(gpus_of), gap)):
            for node in nodes:
                for uuid in gpus_of[node]:
                    ws = find(doc, "missing-data", uuid, node, hole["from"], hole["to"])
                    self.assertEqual(len(ws), 1, "one missing-data warning for %s in %s" % (uuid, hole["kind"]))
                    self.assertGreaterEqual(unix(ws[0]["from"]), hole["last_sample_before"])
                    self.assertLess(unix(ws[0]["to"]), hole["first_sample_after"])

    def test_victoriametrics_gives_the_same_totals(self):
        by = list(OWNER_DIMS)
        doc = self.report(self.start, self.end, by, url=self.vm_url)
        worst = {}
        for dims in (["project"], by):
            with self.subTest(by=",".join(dims)):
                got = {}
                for k, v in group(doc["rows"], by).items():
                    acc = got.setdefault(tuple(k[by.index(d)] for d in dims), [0.0] * 4)
                    for i in range(4):
                        acc[i] += v[i]
                worst[",".join(dims)] = self.compare(got, truth_groups(self.whole, dims),
                                                     "VictoriaMetrics, " + ",".join(dims))
        for i, f in enumerate(FIELDS):
            self.assertLessEqual(rel(doc["total"][f], self.whole["total"][f], 1e-9), TOLERANCE, "total " + f)
        print("VictoriaMetrics (%s) 30-day report vs truth, largest relative deviation: %s"
              % (doc["source"]["backend"], json.dumps(worst)))

    def test_seed_formulas_against_the_truth(self):
        """The hand-built stack's formulas on the same data. Only gpumeter's error is asserted."""
        at = self.end
        actual = self.whole["actual"]["total"]
        counted = self.whole["total"]
        lines = []

        true_cost = actual["busy_seconds"] * PRICE / 3600
        util = "sum(sum_over_time((gpu_utilization_ratio * 100 * %g / 100 / 3600)[30d:]))" % PRICE
        v = float(self.query(util, at)[0]["value"][1])
        lines.append((util, v, true_cost, "USD, truth = busy GPU-hours x %g (actual)" % PRICE))
        util60 = "sum(sum_over_time((gpu_utilization_ratio * %g / 3600)[30d:1m])) * 60" % PRICE
        v = float(self.query(util60, at)[0]["value"][1])
        lines.append((util60, v, true_cost, "USD, the same with each 1 m sample weighted by 60 s"))

        inc = "sum(increase(gpu_allocated_seconds_total[30d]))"
        v = float(self.query(inc, at)[0]["value"][1])
        lines.append((inc, v, counted["allocated_seconds"], "GPU-seconds, all owners with idle"))
        inc_busy = "sum(increase(gpu_busy_seconds_total[30d]))"
        v = float(self.query(inc_busy, at)[0]["value"][1])
        lines.append((inc_busy, v, counted["busy_seconds"], "busy GPU-seconds"))

        by_project = "sum by (project)(increase(gpu_allocated_seconds_total[30d]))"
        want = self.whole["by"]["project"]
        errs = {}
        for r in self.query(by_project, at):
            p = r["metric"].get("project", "")
            if not want[p]["allocated_seconds"]:
                continue
            errs[p] = (float(r["value"][1]) - want[p]["allocated_seconds"]) / want[p]["allocated_seconds"]

        doc = self.report(self.start, self.end, ["project"])
        ours = doc["total"]["busy_seconds"] * PRICE / 3600
        lines.append(("gpumeter report (busy GPU-hours x %g)" % PRICE, ours, counted["busy_seconds"] * PRICE / 3600,
                      "USD, truth = counted busy"))
        lines.append(("gpumeter report (busy GPU-hours x %g)" % PRICE, ours, true_cost,
                      "USD, truth = actual busy (the ledger missed the lost seconds)"))
        print("\nformula | value | truth | relative error | note")
        for q, v, t, note in lines:
            print("%s | %.6f | %.6f | %+.4g | %s" % (q, v, t, (v - t) / t, note))
        print("%s, per project relative error: %s" % (
            by_project, ", ".join("%s %+.4g" % (k, v) for k, v in sorted(errs.items()))))
        rows = group(doc["rows"], ["project"])
        worst = max(rel(rows[(p,)][0], w["allocated_seconds"], 1.0) for p, w in want.items() if w["allocated_seconds"])
        print("gpumeter report by project, allocated seconds, largest relative error: %.3g" % worst)
        self.assertLessEqual(worst, TOLERANCE)
        self.assertLessEqual(abs(ours - counted["busy_seconds"] * PRICE / 3600) / ours, TOLERANCE)


if __name__ == "__main__":
    unittest.main()
