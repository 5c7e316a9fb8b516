"""`gpumeter report` end to end: simulator -> agent -> a real Prometheus, and -> a real
VictoriaMetrics through remote_write; totals against the simulator's ground truth, periods
that tile, prices that change mid-period, budgets, every output format, and counter resets
from an agent restarted without its state file."""
import csv
import io
import json
import math
import os
import signal
import sys
import tempfile
import time

import harness
from harness import (AgentTestCase, Agent, COUNTERS, Prometheus, SCENARIOS, ScenarioStart, SimNode, VictoriaMetrics,
                     EDGE_SECONDS, allowed_deviation, expected_owners, owner_edges, report, report_json, sim_env,
                     sim_truth, wait_until)

sys.path.insert(0, os.path.join(harness.SOURCE_DIR, "tests", "tools"))
import focus_check  # noqa: E402

MIXED = os.path.join(SCENARIOS, "ledger-mixed.yaml")
CHURN = os.path.join(SCENARIOS, "ledger-churn.yaml")
END = 43.0
TOLERANCE = 1e-3  # the product's bar: 0.1 % of the truth
TILE = 1e-9       # consecutive periods add up exactly, but for floating-point rounding
OWNER_DIMS = ["project", "user", "namespace", "pod", "hpc_job"]
FIELDS = list(COUNTERS.values())
MODEL = "NVIDIA H100 80GB HBM3"
RESERVED = ("__idle__", "__unattributed__")
# The simulator's truth splits energy with the H100's idle power, as the agent is told here.
LEDGER_CONFIG = 'ledger:\n  allocation: process\n  checkpoint_interval: 1s\n  idle_power_watts: {"%s": 70}\n' % MODEL


def rows_by_key(doc):
    return {tuple(r["key"][d] for d in doc["by"]): r for r in doc["rows"]}


def truth_by_owner(truth):
    """Truth per (project, user, namespace, pod, hpc_job), summed over GPUs, with the owner's job
    edges under "edges"."""
    out = {}
    edges = owner_edges(truth)
    for (gpu, *owner), fields in expected_owners(truth).items():
        acc = out.setdefault(tuple(owner), {f: 0.0 for f in FIELDS})
        for f in FIELDS:
            acc[f] += fields[f]
        acc["edges"] = acc.get("edges", 0) + edges[(gpu, *owner)]
    return out


def add_rows(docs):
    out = {}
    for doc in docs:
        for key, r in rows_by_key(doc).items():
            acc = out.setdefault(key, {f: 0.0 for f in FIELDS + ["cost"]})
            for f in FIELDS:
                acc[f] += r[f]
            if r.get("cost"):
                acc["cost"] += r["cost"]["total"]
    return out


class ReportAgainstTruth(AgentTestCase):
    """One simulated run read back through Prometheus and through VictoriaMetrics."""

    def run_pipeline(self, scenario, start, state_dir):
        node = self.track(SimNode(scenario, start))
        config = node.config(LEDGER_CONFIG)
        state = os.path.join(state_dir, "ledger.json")
        agent = self.track(Agent(scenario=scenario, env=sim_env(start),
                                 extra_args=node.agent_args(config, state)))
        return node, config, state, agent

    def test_totals_tiling_prices_and_formats(self):
        began = time.time()
        start = ScenarioStart()
        vm = self.track(VictoriaMetrics())
        node, config, state, agent = self.run_pipeline(MIXED, start, tempfile.mkdtemp(prefix="gpumeter-report-"))
        # An HA pair: two Prometheus servers scrape the agent, each sending its copy to
        # VictoriaMetrics under its own replica label, which the store keeps apart (no
        # -dedup.minScrapeInterval). The report bills one copy.
        prom, _ = (self.track(Prometheus(["127.0.0.1:%d" % agent.port],
                                         extra_config="remote_write:\n  - url: %s\n" % vm.write_url(),
                                         flags=["--storage.remote.flush-deadline=1s"],
                                         external_labels={"replica": replica}))
                   for replica in ("a", "b"))
        agent.wait_ready()
        epoch = start.begin()
        # The scenario's last usage is at END; the checkpoint that publishes it and the scrape
        # that reads it follow within a few seconds.
        wait_until(lambda: time.time() > epoch + END + 6, END + 30, interval=0.5, what="scenario end")
        period_from, period_to = began - 5, time.time() - 1.5
        vm.flush()
        time.sleep(2)  # remote_write batches and VictoriaMetrics' in-memory buffer
        vm.flush()
        truth = truth_by_owner(sim_truth(MIXED, 0, END))
        worst = {}
        for name, url in (("prometheus", prom.base), ("victoriametrics", vm.base)):
            doc = report_json("--url", url, "--from", period_from, "--to", period_to, "--by", ",".join(OWNER_DIMS))
            self.assertEqual(doc["by"], OWNER_DIMS)
            self.assertTrue(doc["reconciliation"]["ok"], doc["reconciliation"])
            self.assertIn("Prometheus" if name == "prometheus" else "VictoriaMetrics", doc["source"]["backend"])
            replica_warnings = [w for w in doc["warnings"] if w["kind"] == "replica"]
            self.assertEqual(len(replica_warnings), 0 if name == "prometheus" else 1, doc["warnings"])
            got = rows_by_key(doc)
            worst[name] = 0.0
            for key, want in truth.items():
                self.assertIn(key, got, "%s: owner %r missing; report has %r" % (name, key, sorted(got)))
                for f in FIELDS:
                    v = want[f]
                    if v == 0:
                        continue
                    dev = abs(got[key][f] - v) / v
                    worst[name] = max(worst[name], dev)
                    allowed = allowed_deviation(v, want["allocated_seconds"], want["edges"], TOLERANCE)
                    self.assertLessEqual(abs(got[key][f] - v), allowed, "%s %s of %r: report %.9g, truth %.9g" %
                                         (name, f, key, got[key][f], v))
            for key in got:
                self.assertTrue(key in truth or key[0] in RESERVED, "%s: unexpected owner %r" % (name, key))
            # Three periods that split the whole at odd instants add up to it exactly.
            cut1, cut2 = period_from + 17.3, period_from + 31.77
            parts = [report_json("--url", url, "--from", a, "--to", b, "--by", ",".join(OWNER_DIMS))
                     for a, b in ((period_from, cut1), (cut1, cut2), (cut2, period_to))]
            summed = add_rows(parts)
            for key, r in got.items():
                for f in FIELDS:
                    self.assertLessEqual(abs(summed[key][f] - r[f]), TILE * max(1.0, abs(r[f])),
                                         "%s: %s of %r: parts %r, whole %r" % (name, f, key, summed[key][f], r[f]))
        print("largest relative deviation from the truth: %r" % worst)
        self.check_read_paths(prom, vm, period_from, period_to)
        # Told the store holds no replicas, the report adds both copies up: about twice the truth
        # (each copy is off by its own scrapes at the job's edges, as above).
        doc = report_json("--url", vm.base, "--from", period_from, "--to", period_to, "--by", ",".join(OWNER_DIMS),
                          "--replica-label", "none")
        both = rows_by_key(doc)
        for key, want in truth.items():
            self.assertAlmostEqual(both[key]["allocated_seconds"] / want["allocated_seconds"], 2, delta=0.1)
        self.check_prices(prom, epoch, period_from, period_to)
        self.check_formats(prom, period_from, period_to)

    def check_read_paths(self, prom, vm, period_from, period_to):
        """Prometheus answers remote read, which the report uses unless told otherwise: through
        the query API alone, the same data gives the same bill. VictoriaMetrics has none."""
        args = ["--url", prom.base, "--from", period_from, "--to", period_to, "--by", ",".join(OWNER_DIMS)]
        remote, query = report_json(*args), report_json(*(args + ["--read", "query"]))
        self.assertIn("(remote read)", remote["source"]["backend"])
        self.assertNotIn("remote read", query["source"]["backend"])
        a, b = rows_by_key(remote), rows_by_key(query)
        self.assertEqual(sorted(a), sorted(b))
        for key, r in a.items():
            for f in FIELDS:
                self.assertLessEqual(abs(r[f] - b[key][f]), TILE * max(1.0, abs(r[f])),
                                     "%s of %r: remote read %r, query API %r" % (f, key, r[f], b[key][f]))
        for k, v in remote["reconciliation"].items():
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                self.assertEqual(v, query["reconciliation"][k], k)
            else:
                self.assertAlmostEqual(v, query["reconciliation"][k], delta=TILE * max(1.0, abs(v)), msg=k)
        out = report("--url", vm.base, "--from", period_from, "--to", period_to, "--read", "remote", check=False)
        self.assertEqual(out.returncode, 1, out.stderr)
        self.assertIn("/api/v1/read", out.stderr)
        self.assertIn("--read remote", out.stderr)
        self.assertEqual(out.stdout, "")

    def check_prices(self, prom, epoch, period_from, period_to):
        """A price change mid-period, utilization and energy pricing, a budget."""
        change = epoch + 20.0
        pricing = os.path.join(tempfile.mkdtemp(prefix="gpumeter-pricing-"), "pricing.yaml")
        with open(pricing, "w") as f:
            f.write("currency: EUR\n"
                    "gpu_models:\n"
                    "  \"%s\":\n"
                    "    - {gpu_hour: 3.6, busy_gpu_hour: 1.8}\n"
                    "    - {from: \"%s\", gpu_hour: 7.2, busy_gpu_hour: 0}\n"
                    "energy: {kwh: 0.36, pue: 1.25}\n"
                    "budgets:\n  vision: 1000\n"
                    "billing: {provider: Research Computing, account_id: rc-gpu, service_name: GPU cluster}\n"
                    "sites: {\"*\": {pue: 1.4, gco2e_per_kwh: 380}}\n"
                    % (MODEL, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(change)) + ".000Z"))
        doc = report_json("--url", prom.base, "--from", period_from, "--to", period_to, "--by", "project",
                          "--pricing", pricing)
        self.assertEqual(doc["currency"], "EUR")
        got = rows_by_key(doc)
        # Usage is priced when it is scraped, which trails the GPU by a collection, a checkpoint
        # and a scrape interval (1 s each here): the cost must lie between the truth split at the
        # change and the truth split that much earlier. Under the sanitizers on a loaded 2-core
        # machine each of the three can slip by a second, so the bound allows twice the nominal.
        lag = 6.0
        bounds = [expected_costs(epoch, change_at) for change_at in (change - lag, change)]
        whole = truth_by_project(sim_truth(MIXED, 0, END))
        for project in bounds[1]:
            cost = got[(project,)]["cost"]
            # Each job edge may move one driver sample period of the project's usage.
            w = whole.get(project, {})
            tol = TOLERANCE + (w.get("edges", 0) * EDGE_SECONDS / w["allocated_seconds"]
                               if w.get("allocated_seconds") else 0.0)
            for name in ("allocation", "utilization", "energy"):
                low, high = sorted(b.get(project, {}).get(name, 0.0) for b in bounds)
                self.assertTrue(low * (1 - tol) - 1e-12 <= cost[name] <= high * (1 + tol) + 1e-12,
                                "%s cost of %s: %r, truth between %r and %r" % (name, project, cost[name], low, high))
        budget = got[("vision",)]["budget"]
        self.assertAlmostEqual(budget["for_period"], 1000 * (period_to - period_from) / (30.4375 * 86400), places=9)
        self.assertAlmostEqual(budget["used_ratio"], got[("vision",)]["cost"]["total"] / budget["for_period"], places=9)
        total = sum(r["cost"]["total"] for r in doc["rows"])
        self.assertAlmostEqual(doc["total"]["cost"]["total"], total, places=9)
        # Energy at the facility and its carbon: each group's kWh x PUE x the intensity.
        self.assertTrue(doc["footprint"])
        for r in doc["rows"] + [doc["total"]]:
            self.assertAlmostEqual(r["facility_energy_joules"], r["energy_joules"] * 1.4,
                                   delta=1e-12 * max(1.0, r["energy_joules"]))
            self.assertAlmostEqual(r["co2e_kg"], r["energy_joules"] / 3.6e6 * 1.4 * 380 / 1000,
                                   delta=1e-12 * max(1.0, r["co2e_kg"]))
        self.assertAlmostEqual(math.fsum(r["co2e_kg"] for r in doc["rows"]), doc["total"]["co2e_kg"],
                               delta=1e-12 * doc["total"]["co2e_kg"])
        # Each group's energy split: an owner's idle energy is the board's 70 W idle power while
        # it held a GPU (the simulated board never draws less), the rest active. An idle GPU
        # draws its idle power only, so the idle line's energy is all idle energy (less than 70 W
        # times its seconds where the agent had no power reading yet, its first seconds).
        for r in doc["rows"] + [doc["total"]]:
            self.assertAlmostEqual(r["idle_energy_joules"] + r["active_energy_joules"], r["energy_joules"],
                                   delta=1e-9 * max(1.0, r["energy_joules"]))
            self.assertGreaterEqual(r["active_energy_joules"], -1e-9 * max(1.0, r["energy_joules"]))
            if r.get("idle"):
                self.assertLessEqual(r["active_energy_joules"], 1e-9 * r["energy_joules"])
            elif "idle" in r:
                # Within 0.1 % plus what the project's job edges may move, as its costs above;
                # both parts follow the energy counter's increase over each reading.
                held = r["allocated_seconds"]
                w = whole.get(r["key"]["project"], {})
                tol = TOLERANCE + (w.get("edges", 0) * EDGE_SECONDS / w["allocated_seconds"]
                                   if w.get("allocated_seconds") else 0.0)
                self.assertLessEqual(abs(r["idle_energy_joules"] - 70 * held), tol * 70 * held + 1e-6,
                                     "idle energy of %r" % r["key"])
        self.check_focus(prom, pricing, period_from, period_to)

    def check_focus(self, prom, pricing, period_from, period_to):
        """The FOCUS 1.2 export: conforms, names what the pricing file says, and adds up to the
        report's totals; the checker catches each kind of fault; bad flags exit 2."""
        a, b = math.ceil(period_from), math.floor(period_to)  # FOCUS dates are whole seconds
        base = ["--url", prom.base, "--from", a, "--to", b, "--pricing", pricing]
        text = report(*(base + ["--format", "focus"])).stdout
        self.assertEqual(focus_check.check(text), [])
        rows = list(csv.DictReader(io.StringIO(text)))
        doc = report_json(*(base + ["--by", "project"]))
        self.assertAlmostEqual(math.fsum(float(r["BilledCost"]) for r in rows) / doc["total"]["cost"]["total"], 1,
                               delta=1e-12)
        self.assertAlmostEqual(math.fsum(float(r["PricingQuantity"]) for r in rows) * 3600
                               / doc["total"]["allocated_seconds"], 1, delta=1e-12)
        by_project = {}
        for r in rows:
            project = r["SubAccountId"] or "__%s__" % r["x_RowKind"]
            by_project.setdefault(project, []).append(float(r["BilledCost"]))
            for part in ("x_CostAllocation", "x_CostUtilization", "x_CostEnergy", "x_CostIdle"):
                self.assertGreaterEqual(float(r[part]), 0)
            self.assertEqual(float(r["BilledCost"]), float(r["EffectiveCost"]))
            self.assertTrue(r["ResourceId"].startswith("GPU-"), r)
            self.assertEqual((r["ProviderName"], r["BillingAccountId"], r["ServiceName"], r["BillingCurrency"]),
                             ("Research Computing", "rc-gpu", "GPU cluster", "EUR"))
            self.assertEqual(r["ChargePeriodStart"], time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(a)))
            if r["x_RowKind"] == "owner":
                self.assertEqual(json.loads(r["Tags"])["project"], r["SubAccountId"])
        self.assertAlmostEqual(math.fsum(float(r["x_Co2eKg"]) for r in rows) / doc["total"]["co2e_kg"], 1,
                               delta=1e-12)
        self.assertEqual(set(by_project), {row["key"]["project"] for row in doc["rows"]})
        for row in doc["rows"]:
            self.assertAlmostEqual(math.fsum(by_project[row["key"]["project"]]), row["cost"]["total"],
                                   delta=1e-12 * max(1.0, row["cost"]["total"]))
        # The checker is no rubber stamp: each fault below is one it must report.
        header, first = text.split("\n")[:2]
        cells = dict(zip(header.split(","), next(csv.reader([first]))))

        def with_cells(**changes):
            row = dict(cells, **changes)
            out = io.StringIO()
            csv.writer(out, lineterminator="\n").writerows([list(row), list(row.values())])
            return out.getvalue()
        faults = {
            "Mandatory column BilledCost missing": "\n".join(
                ",".join(line.split(",")[1:]) for line in [header, first]) + "\n",
            "ChargeCategory 'usage'": with_cells(ChargeCategory="usage"),
            "BilledCost '1.5E+3'": with_cells(BilledCost="1.5E+3"),
            "ConsumedUnit and ConsumedQuantity": with_cells(ConsumedUnit=""),
            "Tags: the value of 'project' is not a scalar": with_cells(Tags='{"project": {"a": 1}}'),
            "ServiceSubcategory 'Other (Compute)' belongs to": with_cells(ServiceCategory="Storage"),
            "ChargePeriodStart": with_cells(ChargePeriodStart="2026-11-01T00:00:00.5Z"),
            "PricingUnit 'hours'": with_cells(PricingUnit="hours"),
            "BillingAccountId is null": with_cells(BillingAccountId=""),
        }
        for want, bad in faults.items():
            found = focus_check.check(bad)
            self.assertTrue(any(want in p for p in found), "%r not reported; found %r" % (want, found))
        for args, why in ((["--format", "focus", "--by", "user"], "leave --by out"),
                          (["--url", prom.base, "--from", a + 0.5, "--to", b, "--pricing", pricing, "--format",
                            "focus"], "whole seconds")):
            out = report(*((base if args[0] != "--url" else []) + args), check=False)
            self.assertEqual(out.returncode, 2, out.stderr)
            self.assertIn(why, out.stderr)
        out = report("--url", prom.base, "--from", a, "--to", b, "--format", "focus", check=False)
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertIn("needs --pricing", out.stderr)

    def check_formats(self, prom, period_from, period_to):
        base = ["--url", prom.base, "--from", period_from, "--to", period_to, "--by", "project,user"]
        doc = report_json(*base)
        table = report(*base).stdout
        for r in doc["rows"]:
            self.assertIn(r["key"]["project"], table)
        self.assertIn("reconciliation: owners", table)
        rows = list(csv.DictReader(io.StringIO(report(*(base + ["--format", "csv"])).stdout)))
        self.assertEqual(len(rows), len(doc["rows"]))
        for line, r in zip(rows, doc["rows"]):
            self.assertEqual((line["project"], line["user"]), (r["key"]["project"], r["key"]["user"]))
            self.assertAlmostEqual(float(line["allocated_gpu_hours"]) * 3600, r["allocated_seconds"], places=6)
        out = os.path.join(tempfile.mkdtemp(prefix="gpumeter-html-"), "report.html")
        report(*(base + ["--format", "html", "--output", out]))
        with open(out) as f:
            page = f.read()
        self.assertIn("<svg", page)
        for r in doc["rows"]:
            if not r["idle"]:
                # The reserved owners are shown by name in parentheses, as the table shows them.
                project = r["key"]["project"]
                self.assertIn("(unattributed)" if project == "__unattributed__" else project, page)


def expected_costs(epoch, change_at):
    """Cost per project for the test's pricing file if its price changed at `change_at`."""
    before = truth_by_project(sim_truth(MIXED, 0, change_at - epoch))
    after = truth_by_project(sim_truth(MIXED, change_at - epoch, END))
    out = {}
    for project in set(before) | set(after):
        b, a = before.get(project, {}), after.get(project, {})
        out[project] = {
            "allocation": b.get("allocated_seconds", 0) / 3600 * 3.6 + a.get("allocated_seconds", 0) / 3600 * 7.2,
            "utilization": b.get("busy_seconds", 0) / 3600 * 1.8,
            "energy": (b.get("energy_joules", 0) + a.get("energy_joules", 0)) / 3.6e6 * 0.36 * 1.25,
        }
    return out


def truth_by_project(truth):
    out = {}
    for key, fields in truth_by_owner(truth).items():
        acc = out.setdefault(key[0], {f: 0.0 for f in FIELDS + ["edges"]})
        for f in FIELDS + ["edges"]:
            acc[f] += fields[f]
    return out


def raw_increase(samples):
    """The counter definition the report implements, over raw samples: resets restart at 0."""
    total, prev = 0.0, 0.0
    for _, v in samples:
        v = float(v)
        total += v - prev if v >= prev else v
        prev = v
    return total


class ReportAcrossResets(AgentTestCase):
    def test_agent_restarted_without_state(self):
        """The state file is deleted while the agent is down: every ledger counter restarts from
        zero. The report counts both sides of the reset, exactly as the raw samples say, and names
        the GPUs whose ledger restarted."""
        began = time.time()
        start = ScenarioStart()
        node = self.track(SimNode(CHURN, start))
        config = node.config(LEDGER_CONFIG)
        state = os.path.join(tempfile.mkdtemp(prefix="gpumeter-report-"), "ledger.json")
        env = sim_env(start)
        agent = self.track(Agent(scenario=CHURN, env=env, extra_args=node.agent_args(config, state)))
        prom = self.track(Prometheus(["127.0.0.1:%d" % agent.port]))
        agent.wait_ready()
        epoch = start.begin()
        wait_until(lambda: time.time() > epoch + 20, 40, what="mid-run")
        agent.process.proc.send_signal(signal.SIGKILL)
        agent.process.proc.wait()
        os.unlink(state)
        again = self.track(Agent(scenario=CHURN, env=env, port=agent.port, extra_args=node.agent_args(config, state)))
        again.wait_ready()
        wait_until(lambda: time.time() > epoch + 32, 40, what="after the restart")
        period_from, period_to = began - 5, time.time() - 1.5
        doc = report_json("--url", prom.base, "--from", period_from, "--to", period_to, "--by", "project,pod,gpu")
        self.assertTrue(any(w["kind"] == "reset" for w in doc["warnings"]), doc["warnings"])
        # The same definition computed here from every raw sample Prometheus holds.
        for metric, field in COUNTERS.items():
            want = {}
            for s in prom.query("%s[5m]" % metric, at=period_to):
                m = s["metric"]
                # The report names reserved rows by the reserved project in every owner column.
                pod = m["project"] if m["project"] in RESERVED else m.get("pod", "")
                key = (m["project"], pod, m["uuid"])
                want[key] = want.get(key, 0.0) + raw_increase(s["values"])
            got = {key: r[field] for key, r in rows_by_key(doc).items()}
            self.assertEqual(sorted(k for k, v in want.items() if v), sorted(k for k, v in got.items() if v), metric)
            for key, v in want.items():
                self.assertLessEqual(abs(got.get(key, 0.0) - v), 1e-9 * max(1.0, v), "%s of %r" % (metric, key))
        resets = prom.query("sum(resets(gpu_allocated_seconds_total[5m]))", at=period_to)
        self.assertGreater(float(resets[0]["value"][1]), 0, "the restart reset the counters")


if __name__ == "__main__":
    import unittest
    unittest.main()
