"""Many clusters and HA pairs in one VictoriaMetrics, with the store's own tools (issue 32,
docs/scale-out.md).

TwoClusterStore: hours of synthetic ledger history from two clusters (`cluster` east and west,
as each cluster's Prometheus labels what it sends) are imported into one VictoriaMetrics. A real
vmalert replays the cost rules that `gpumeter rules --pricing FILE` writes and the shipped
budget rules over those hours, writing what they record back into the store, as an operator
backfills rules after moving to vmalert (one level of rules at a time, each level reading only
what earlier levels wrote and the store answers in full: vmalert's own replay of chained rules
waits a fixed -replay.rulesDelay and hopes). Then
* a live vmalert evaluates the cost, budget and shipped alert rules across both clusters and
  sends to a real Alertmanager loading the shipped config, which notifies a webhook: a project
  over its budget only when its two clusters' spend is added up fires GpuProjectBudgetExceeded,
  so does a project over budget in one cluster, and the project under budget does not. The
  month-to-date spend vmalert records for each cluster's project is exact;
* the dashboards' `cluster` variable, resolved as Grafana does against the store, lists both
  clusters, and the chargeback dashboard's queries with one cluster chosen show that cluster's
  projects and figures only, and with All the sum of the two.

StoreDeduplication: an HA pair, two Prometheus replicas with their own `replica` external label
scraping one simulated agent, sends to two VictoriaMetrics started with -dedup.minScrapeInterval
equal to the scrape interval: one as it is, one that also drops the `replica` label on ingestion
(-relabelConfig). `gpumeter report` against each equals the report against one replica.

ClustersThroughVmagent: test_clusters.py's two live clusters with vmagent in place of Prometheus.

What these tests change in the shipped files: the Alertmanager config's receiver URLs and group
waits (as test_alertmanager does). Nothing in the rules."""
import json
import os
import re
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

import yaml

from harness import (BIN, COUNTERS, SCENARIOS, SOURCE_DIR, Agent, AgentTestCase, Alertmanager, Process, Prometheus,
                     ScenarioStart, SimNode, VictoriaMetrics, WebhookSink, free_port, http_get, report_json, sim_env,
                     wait_until)
from test_alertmanager import FINANCE, config_for_test
from test_dashboards import PromClient, apply_regex, interpolate, load_dashboards, query_panels, variable_query

PROM_DIR = os.path.join(SOURCE_DIR, "deploy", "prometheus")
BUDGET_RULES = os.path.join(PROM_DIR, "gpumeter-budget.yml")
ALERT_RULES = os.path.join(PROM_DIR, "gpumeter-alerts.yml")
MODEL = "NVIDIA H100 80GB HBM3"
PRICE = 2.0            # per GPU-hour, every model: the cost rules' rate is 2 per held GPU
INTERVAL = 60          # seconds between the history's samples, and the replayed rules' interval
HOURS = 4              # whole hours of history before the current hour
SAME = 1e-9            # figures that must be equal but for floating-point rounding
# (cluster, node, project) -> GPUs the project holds there, all of the history. alpha spends in
# both clusters, gamma in east only, beta in west only; each cluster has an idle GPU.
HELD = {("east", "east-1:9400", "alpha"): 1, ("east", "east-1:9400", "gamma"): 2, ("east", "east-2:9400", "gamma"): 1,
        ("east", "east-2:9400", "__idle__"): 1,
        ("west", "west-1:9400", "alpha"): 2, ("west", "west-1:9400", "beta"): 1, ("west", "west-1:9400", "__idle__"): 1}
CLUSTERS = ("east", "west")


def spend_per_hour(cluster=None):
    """Cost per hour by project (in `cluster`, or in both)."""
    out = {}
    for (c, _, project), gpus in HELD.items():
        if cluster in (None, c):
            out[project] = out.get(project, 0.0) + gpus * PRICE
    return out


def month_start(t):
    tm = time.gmtime(t)
    return t - (tm.tm_mday - 1) * 86400 - tm.tm_hour * 3600 - tm.tm_min * 60 - tm.tm_sec


def utc(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def history(first, last):
    """The ledger counters of HELD's GPUs and their gpu_info, every INTERVAL seconds from `first`
    to `last`, as Prometheus text with millisecond timestamps (/api/v1/import/prometheus). Each
    GPU is allocated to its project all along: 1 allocated and 0.5 busy second per second."""
    lines = []
    gpus = []
    for (cluster, node, project), n in sorted(HELD.items()):
        for _ in range(n):
            index = sum(1 for g in gpus if g[0] == cluster and g[1] == node)
            gpus.append((cluster, node, index, project))
    for t in range(first, last + 1, INTERVAL):
        for cluster, node, index, project in gpus:
            gpu = 'cluster="%s",job="gpumeter",instance="%s",gpu="%d",uuid="GPU-%s-%s-%d"' % (
                cluster, node, index, cluster, node.split(":")[0], index)
            owner = ('project="%s",user="%s",namespace="",pod="",container="",hpc_job=""'
                     % (project, "" if project.startswith("__") else project + "-user"))
            elapsed = 7200 + t - first  # the agents had been counting for two hours already
            lines.append('gpu_info{%s,vendor="nvidia",model="%s"} 1 %d' % (gpu, MODEL, t * 1000))
            lines.append("gpumeter_ledger_covered_seconds_total{%s} %d %d" % (gpu, elapsed, t * 1000))
            lines.append("gpu_allocated_seconds_total{%s,%s} %d %d" % (gpu, owner, elapsed, t * 1000))
            busy = 0 if project == "__idle__" else elapsed / 2
            lines.append("gpu_busy_seconds_total{%s,%s} %r %d" % (gpu, owner, busy, t * 1000))
    return "\n".join(lines) + "\n"


def vm_get(vm, path, params):
    status, _, body = http_get(vm.base + path + "?" + urllib.parse.urlencode(params, doseq=True), timeout=30)
    doc = json.loads(body)
    if status != 200 or doc.get("status") != "success":
        raise AssertionError("%s %r: %s" % (path, params, body[:500]))
    return doc["data"]


def instant(vm, expr, at):
    return vm_get(vm, "/api/v1/query", {"query": expr, "time": repr(at)})["result"]


LEDGER = '{__name__=~"%s"}' % "|".join(list(COUNTERS) + ["gpumeter_ledger_covered_seconds_total"])


def wait_for_writes(stores, until):
    """Waits until every ledger series in each store has a sample at or after `until`: what the
    scrapers sent by remote_write up to then has all arrived and can be read."""
    def arrived():
        for vm in stores:
            vm.flush()
            last = instant(vm, "min(timestamp(%s))" % LEDGER, time.time())
            if not last or float(last[0]["value"][1]) < until:
                return False
        return True
    wait_until(arrived, 60, interval=0.5, what="the remote_write samples up to the period's end")


def recording_levels(paths):
    """The recording rules of the rule files `paths`, in the groups they came from, split into
    levels: a rule's level is one more than the highest level of the rules it reads (by the
    recorded names in its expression), 0 for a rule that reads none of them. A vmalert replay of
    one level after the other reads every input complete."""
    rules = []
    for path in paths:
        with open(path) as f:
            for group in yaml.safe_load(f)["groups"]:
                rules += [(group["name"], r) for r in group["rules"] if "record" in r]
    names = {r["record"] for _, r in rules}
    reads = [{n for n in names if re.search(r"(?<![\w:])%s(?![\w:])" % re.escape(n), r["expr"])} for _, r in rules]
    level = {}
    while len(level) < len(names):
        before = len(level)
        for name in names - set(level):
            inputs = set().union(*(reads[i] for i, (_, r) in enumerate(rules) if r["record"] == name))
            if inputs <= set(level):
                level[name] = 1 + max((level[n] for n in inputs), default=-1)
        if len(level) == before:
            raise AssertionError("recording rules read each other in a cycle: %r" % sorted(names - set(level)))
    out = []
    for lv in range(max(level.values()) + 1):
        groups = {}
        for group, r in rules:
            if level[r["record"]] == lv:
                groups.setdefault(group, []).append(r)
        out.append({"groups": [{"name": g, "rules": rs} for g, rs in groups.items()]})
    return out


class TwoClusterStore(AgentTestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="gpumeter-clusters-store-")
        now = time.time()
        # History ends at the last whole hour: the hours the month-to-date spend counts are then
        # fixed for the whole test (the current hour has no cost samples, even once it is whole).
        cls.end = int(now // 3600 * 3600)
        first_hour = cls.end - HOURS * 3600
        cls.month_start = month_start(cls.end)
        # Whole hours of this month with history: at 00:00-00:59 UTC on the 1st there are none.
        cls.hours = max(0, min(HOURS, (cls.end - cls.month_start) // 3600))
        # Budgets: alpha is over only with both clusters added up (it spends 2/h in east and 4/h
        # in west: 6/h against 5/h of budget, 120%), gamma is over in east alone (6/h against 4/h,
        # 150%), beta is under (2/h against 4/h, 50%).
        scale = max(cls.hours, 1)
        cls.budgets = {"alpha": 5 * scale, "gamma": 4 * scale, "beta": 4 * scale}
        cls.pricing = os.path.join(cls.tmp, "pricing.yaml")
        with open(cls.pricing, "w") as f:
            f.write('currency: USD\ngpu_models:\n  "*": {gpu_hour: %r}\nbudgets:\n' % PRICE)
            for project, budget in sorted(cls.budgets.items()):
                f.write("  %s: %r\n" % (project, budget))
        cls.cost_rules = os.path.join(cls.tmp, "gpumeter-cost.yml")
        subprocess.run([BIN, "rules", "--pricing", cls.pricing, "--output", cls.cost_rules], check=True, timeout=60)

        cls.vm = VictoriaMetrics(["-search.disableCache"])
        cls.addClassCleanup(cls.vm.stop)
        # Ten minutes of counters before the first hour, so the 5m rates cover all of it.
        body = history(first_hour - 600, cls.end).encode()
        req = urllib.request.Request(cls.vm.base + "/api/v1/import/prometheus", data=body, method="POST")
        with urllib.request.urlopen(req, timeout=120) as r:
            if r.status not in (200, 204):
                raise AssertionError("VictoriaMetrics import: HTTP %d" % r.status)
        cls.vm.flush()
        wait_until(lambda: len(instant(cls.vm, "gpu_info", cls.end)) == sum(HELD.values()), 30,
                   what="the imported history")

        # Replay the recording rules over the whole hours, one level at a time.
        began = time.time()
        replayed = 0
        for i, level in enumerate(recording_levels([cls.cost_rules, BUDGET_RULES])):
            path = os.path.join(cls.tmp, "level-%d.yml" % i)
            with open(path, "w") as f:
                yaml.safe_dump(level, f, sort_keys=False)
            replayed += cls.replay(path, first_hour + INTERVAL, cls.end)
        cls.replay_seconds = time.time() - began
        print("\nhistory: %d GPUs in 2 clusters, %d whole hours (%d of this month) to %s; replayed %d recorded "
              "samples in %.1f s" % (sum(HELD.values()), HOURS, cls.hours, utc(cls.end), replayed, cls.replay_seconds))

    @classmethod
    def replay(cls, rule_file, first, last):
        """vmalert -replay of `rule_file` over [first, last]; returns the samples it wrote, once the
        store answers them all."""
        out = subprocess.run(["vmalert", "-rule=" + rule_file, "-datasource.url=" + cls.vm.base,
                              "-remoteWrite.url=" + cls.vm.base, "-replay.timeFrom=" + utc(first),
                              "-replay.timeTo=" + utc(last), "-replay.disableProgressBar", "-replay.rulesDelay=0s",
                              "-evaluationInterval=%ds" % INTERVAL, "-datasource.queryStep=%ds" % INTERVAL,
                              "-httpListenAddr=127.0.0.1:%d" % free_port()],
                             capture_output=True, text=True, timeout=120)
        m = re.search(r"replay finished! Imported (\d+) samples", out.stderr + out.stdout)
        if out.returncode != 0 or not m:
            raise AssertionError("vmalert replay of %s exited %d:\n%s" % (rule_file, out.returncode,
                                                                          (out.stdout + out.stderr)[-3000:]))
        written = int(m.group(1))
        with open(rule_file) as f:
            names = sorted({r["record"] for g in yaml.safe_load(f)["groups"] for r in g["rules"]})
        window = "%ds" % (last - first + INTERVAL)

        def stored():
            cls.vm.flush()
            return sum(float(r["value"][1]) for n in names
                       for r in instant(cls.vm, "count_over_time(%s[%s])" % (n, window), last))
        wait_until(lambda: stored() == written, 30, what="the %d samples replayed from %s" % (written, rule_file))
        if written == 0:
            raise AssertionError("vmalert replayed nothing for %s" % names)
        return written

    def expected_month_to_date(self):
        """(cluster, project) -> the month-to-date spend the budget rules must record."""
        return {(c, p): rate * self.hours for c in CLUSTERS for p, rate in spend_per_hour(c).items()}

    def test_cross_cluster_budget_alert_through_vmalert_and_alertmanager(self):
        sink = self.track(WebhookSink())
        am = self.track(Alertmanager(config_for_test(sink)))
        vmalert_port = free_port()
        vmalert = self.track(Process(
            ["vmalert", "-rule=" + self.cost_rules, "-rule=" + BUDGET_RULES, "-rule=" + ALERT_RULES,
             "-datasource.url=" + self.vm.base, "-remoteWrite.url=" + self.vm.base, "-remoteWrite.flushInterval=1s",
             "-notifier.url=" + am.base, "-evaluationInterval=2s", "-httpListenAddr=127.0.0.1:%d" % vmalert_port],
            name="vmalert"))
        began = time.time()
        over = {p for p, per_hour in spend_per_hour().items()
                if p in self.budgets and self.hours and per_hour * self.hours > self.budgets[p]}
        self.assertEqual(over, {"alpha", "gamma"} if self.hours else set())

        def budget_alerts():
            if not vmalert.alive():
                raise AssertionError("vmalert exited:\n" + vmalert.log()[-3000:])
            return {a["labels"]["project"]: a for a in am.alerts('filter=alertname="GpuProjectBudgetExceeded"')}

        def live_month_to_date():
            """(cluster, project) -> every month-to-date figure vmalert recorded live (after the
            replayed hours)."""
            self.vm.flush()
            status, _, body = http_get(self.vm.base + "/api/v1/export?" + urllib.parse.urlencode(
                {"match[]": "gpumeter:cost:month_to_date:by_project", "start": str(self.end + 1)}))
            if status != 200:
                raise AssertionError("export: %d %r" % (status, body[:300]))
            got = {}
            for line in body.decode().splitlines():
                doc = json.loads(line)
                got.setdefault((doc["metric"]["cluster"], doc["metric"]["project"]), []).extend(doc["values"])
            return got

        def iterations(rule_file, group):
            """How many times vmalert has evaluated the group `group` of `rule_file`."""
            _, _, body = http_get("http://127.0.0.1:%d/metrics" % vmalert_port)
            for labels, value in re.findall(r"^vmalert_iteration_total\{(.*)\} (\S+)$", body.decode(), re.M):
                labels = dict(re.findall(r'(\w+)="([^"]*)"', labels))
                if labels.get("file") == rule_file and labels.get("group") == group:
                    return float(value)
            return 0.0
        want = self.expected_month_to_date()
        if over:
            # What vmalert records now, from the replayed hours, per cluster and project: exact.
            got = wait_until(lambda: len(live_month_to_date()) == len(want) and live_month_to_date(), 60,
                             interval=0.5, what="month-to-date spend recorded by vmalert")
            alerts = wait_until(lambda: set(budget_alerts()) >= over and budget_alerts(), 60, interval=0.5,
                                what="GpuProjectBudgetExceeded for %s in Alertmanager" % sorted(over))

            def at_webhook():
                got = {a["labels"]["project"]: a for path, doc in sink.payloads()
                       if path == "/" + FINANCE and doc["status"] == "firing" for a in doc["alerts"]}
                return got if set(got) >= over else None
            notified = wait_until(at_webhook, 60, interval=0.5, what="the budget alerts at the webhook")
        else:
            # The first hour of a month: nothing spent this month yet, and the history has no cost
            # now, so the month-to-date spend is 0 or not recorded at all. Wait for vmalert to have
            # evaluated the budget rules, then the alert rules twice more.
            wait_until(lambda: iterations(BUDGET_RULES, "gpumeter.budget") >= 2, 60, interval=0.5,
                       what="vmalert's budget rules evaluated")
            seen = iterations(ALERT_RULES, "gpumeter.cost")
            wait_until(lambda: iterations(ALERT_RULES, "gpumeter.cost") >= seen + 2, 60, interval=0.5,
                       what="vmalert's cost alerts evaluated")
            got = live_month_to_date()
            alerts, notified = budget_alerts(), {}
        for key, values in got.items():
            for v in values:
                self.assertLessEqual(abs(v - want[key]), SAME * max(1.0, want[key]),
                                     "%s: %r, want %r" % (key, v, want[key]))
        got = {k: v[-1] for k, v in got.items()}
        # Alpha (over only with both clusters) and gamma (over in east alone) fire, beta does not.
        self.assertEqual(set(alerts), over)
        self.assertEqual(set(notified), over)
        spent = {"alpha": "120%", "gamma": "150%"}
        for project, a in alerts.items():
            labels = a["labels"]
            self.assertEqual((labels["severity"], labels["category"], labels["currency"]), ("critical", "cost", "USD"))
            # A budget is per project, whatever the cluster: the alert adds the clusters up and
            # has no cluster label (the month-to-date series above keep it).
            self.assertNotIn("cluster", labels)
            self.assertIn(spent[project], a["annotations"]["description"])
            self.assertEqual(a["status"]["state"], "active")
            self.assertEqual([r["name"] for r in a["receivers"]], [FINANCE])
        for project, a in notified.items():
            self.assertEqual(a["labels"]["alertname"], "GpuProjectBudgetExceeded")
        self.assertFalse([a for a in am.alerts() if a["labels"].get("project") == "beta"])
        print("month-to-date spend recorded by vmalert: %s; budgets %s; alerts at Alertmanager %s, at the "
              "webhook %s, %.1f s after vmalert started"
              % (json.dumps({"%s/%s" % k: v for k, v in sorted(got.items())}), json.dumps(self.budgets),
                 sorted(alerts), sorted(notified), time.time() - began))

    def test_dashboard_cluster_variable_selects_one_cluster_or_both(self):
        client = PromClient(self.vm)
        at = float(self.end)
        dash = load_dashboards()["gpumeter-chargeback.json"]
        variables = {v["name"]: v for v in dash["templating"]["list"]}
        cluster_var = variables["cluster"]
        options = [value for _, value in apply_regex(cluster_var, client.variable_values(
            variable_query(cluster_var), at))]
        self.assertEqual(sorted(options), list(CLUSTERS))
        # Grafana's built-ins for this history: one sample a minute, a one-hour range.
        builtins = {"__interval": "1m", "__interval_ms": "60000", "__rate_interval": "4m", "__range": "1h",
                    "__range_s": "3600", "__range_ms": "3600000"}

        def resolve(cluster):
            """The dashboard's variables in order, with `cluster` chosen (None: All) and the others All."""
            values = {}
            for v in dash["templating"]["list"]:
                if v["type"] == "datasource":
                    continue
                query = interpolate(variable_query(v), values, variables)
                v["_options"] = [value for _, value in apply_regex(v, client.variable_values(query, at))]
                values[v["name"]] = [cluster] if v["name"] == "cluster" and cluster else None
            return values

        def run(expr, values):
            expr = re.sub(r"\$\{?(%s)\}?" % "|".join(sorted(builtins, key=len, reverse=True)),
                          lambda m: builtins[m.group(1)], expr)
            return client.instant(interpolate(expr, values, variables), at)["result"]

        # The chained variables: each cluster's nodes and projects only.
        for cluster in CLUSTERS:
            values = resolve(cluster)
            self.assertEqual(sorted(variables["node"]["_options"]), sorted({n for c, n, _ in HELD if c == cluster}))
            self.assertEqual(sorted(variables["project"]["_options"]),
                             sorted({p for c, _, p in HELD if c == cluster and not p.startswith("__")}))
        # Every panel query of the chargeback dashboard, with east, west and All: where a result is
        # by project, only the chosen cluster's projects; the figures by project that add up
        # (cost rates, month to date, GPU-hours) are the cluster's own, and All is their sum.
        projects = {c: {p for cc, _, p in HELD if cc == c} for c in CLUSTERS}
        checked, failures = 0, []
        results = {}
        for cluster in CLUSTERS + (None,):
            values = resolve(cluster)
            for p in query_panels(dash):
                for t in p["targets"]:
                    if "$cluster" not in t["expr"] and "${cluster" not in t["expr"]:
                        continue
                    where = "panel %r query %s, cluster %s" % (p["title"], t["refId"], cluster or "All")
                    try:
                        result = run(t["expr"], values)
                    except Exception as e:  # noqa: BLE001  (a query the store refuses)
                        failures.append("%s: %s" % (where, e))
                        continue
                    checked += 1
                    results[(p["title"], t["refId"], cluster)] = result
                    shown = {r["metric"]["project"] for r in result if "project" in r["metric"]}
                    allowed = projects[cluster] if cluster else projects["east"] | projects["west"]
                    if not shown <= allowed:
                        failures.append("%s: projects %s, the cluster has %s" % (where, sorted(shown), sorted(allowed)))
        self.assertEqual(failures, [])

        def by_project(result):
            return {r["metric"]["project"]: float(r["value"][1]) for r in result}
        month = {(c, p): v for (c, p), v in self.expected_month_to_date().items()}
        for cluster in CLUSTERS + (None,):
            name = cluster or "All"
            cost = by_project(results[("Cost per hour by project", "A", cluster)])
            want = spend_per_hour(cluster)
            self.assertEqual(sorted(cost), sorted(want), name)
            for project, v in want.items():
                self.assertLessEqual(abs(cost[project] - v), SAME * v, "%s %s: %r, want %r" % (name, project,
                                                                                             cost[project], v))
            mtd = by_project(results[("Month to date and forecast", "A", cluster)])
            for project in want:
                v = sum(m for (c, p), m in month.items() if p == project and cluster in (None, c))
                self.assertLessEqual(abs(mtd[project] - v), SAME * max(1.0, v), "%s %s month to date: %r, want %r"
                                     % (name, project, mtd[project], v))
            hours = by_project(results[("Usage by project over the range", "A", cluster)])
            for project in want:
                gpus = sum(n for (c, _, p), n in HELD.items() if p == project and cluster in (None, c))
                self.assertLessEqual(abs(hours[project] - gpus), SAME * gpus, "%s %s GPU-hours" % (name, project))
        print("chargeback dashboard: cluster options %s; %d panel queries run with east, west and All"
              % (options, checked))


def rows(doc):
    return {tuple(r["key"][d] for d in doc["by"]): r for r in doc["rows"]}


class StoreDeduplication(AgentTestCase):
    """An HA pair's two copies in a VictoriaMetrics that de-duplicates.

    VictoriaMetrics de-duplicates the samples of one series (-dedup.minScrapeInterval keeps the
    last sample of each interval), not series that differ by a label: with each replica's
    `replica` label the store keeps both copies, and the report finds the label and bills one
    replica (the one with the most data in the period). Dropping the label on ingestion
    (-relabelConfig, or vmagent's relabeling) makes the copies one series, which
    de-duplication thins to one sample a second, taken from either replica.

    Both are compared with the reports against each replica's own Prometheus, exactly (1e-9,
    floating-point rounding): the replicas scrape the same agent, whose counters change once a
    collection (1 s, the scrape interval), so two scrapes in one collection interval read the
    same values, and the period's ends lie where the counters are still (before the agent and
    after the scenario's last job). The replicas can still differ at a series born in the period:
    the report cannot know its value before its first sample (docs/report-accuracy.md), and a
    replica whose first scrape of it falls one collection later than the other's loses that
    collection's usage too. That happens: in about half the runs the idle GPUs' series, born as
    the agent starts, cost one replica one collection of idle energy (6% of the __idle__ energy
    here). So the store's report must equal one replica's, never a mix that bills more or less
    than either: the replica-labelled store bills the replica with the most data, the relabeled
    one whichever replica's first samples survived de-duplication (in one run a, in another b).
    Both replicas scrape before the agent starts, so neither misses any job.
    """

    def test_ha_pair_deduplicated_by_the_store_reports_as_one_replica(self):
        scenario = os.path.join(SCENARIOS, "ledger-mixed.yaml")
        end = 43.0  # the scenario's last usage
        began = time.time()
        start = ScenarioStart()
        relabel = os.path.join(tempfile.mkdtemp(prefix="gpumeter-relabel-"), "relabel.yml")
        with open(relabel, "w") as f:
            f.write("- action: labeldrop\n  regex: replica\n")
        # The scrape interval is 1 s, and so is -dedup.minScrapeInterval.
        stores = {"dedup": self.track(VictoriaMetrics(["-dedup.minScrapeInterval=1s"])),
                  "relabeled": self.track(VictoriaMetrics(["-dedup.minScrapeInterval=1s",
                                                           "-relabelConfig=" + relabel]))}
        port = free_port()
        write = "remote_write:\n" + "".join("  - url: %s\n" % vm.write_url() for vm in stores.values())
        replicas = {r: self.track(Prometheus(["127.0.0.1:%d" % port], extra_config=write,
                                             flags=["--storage.remote.flush-deadline=1s"],
                                             external_labels={"replica": r}))
                    for r in ("a", "b")}
        # Prometheus starts scraping a few seconds after it is ready (its scrape manager's first
        # reload); the agent starts once both replicas scrape its address (up 0), so that neither
        # replica misses the start of the scenario.
        wait_until(lambda: all(p.query("up") for p in replicas.values()), 60, interval=0.2,
                   what="both replicas scraping")
        node = self.track(SimNode(scenario, start))
        state = os.path.join(tempfile.mkdtemp(prefix="gpumeter-ha-"), "ledger.json")
        agent = self.track(Agent(scenario=scenario, env=sim_env(start), port=port, extra_args=node.agent_args(
            node.config("ledger:\n  allocation: process\n  checkpoint_interval: 1s\n"), state)))
        agent.wait_ready()
        epoch = start.begin()
        wait_until(lambda: time.time() > epoch + end + 6, end + 30, interval=0.5, what="scenario end")
        to = time.time() - 1.5
        period = ("--from", began - 5, "--to", to)
        wait_for_writes(stores.values(), to)
        by = "project,user,namespace,pod,hpc_job"
        one = {r: report_json("--url", p.base, *period, "--by", by) for r, p in replicas.items()}
        store = {name: report_json("--url", vm.base, *period, "--by", by) for name, vm in stores.items()}
        covered = {"match[]": "gpumeter_ledger_covered_seconds_total", "start": repr(began - 5)}
        gpus = len(vm_get(replicas["a"], "/api/v1/series", covered))
        copies = {name: len(vm_get(vm, "/api/v1/series", covered)) for name, vm in stores.items()}
        self.assertEqual(copies, {"dedup": 2 * gpus, "relabeled": gpus})
        for name, doc in store.items():
            kinds = [w["kind"] for w in doc["warnings"]]
            self.assertEqual(kinds.count("replica"), 1 if name == "dedup" else 0, doc["warnings"])
        fields = list(COUNTERS.values())

        def difference(doc, other):
            got, want = rows(doc), rows(other)
            self.assertEqual(sorted(got), sorted(want))
            return max(abs(got[k][f] - want[k][f]) / max(1.0, abs(want[k][f])) for k in want for f in fields)
        between = difference(one["b"], one["a"])
        found = {}
        for name, doc in store.items():
            self.assertTrue(doc["reconciliation"]["ok"], (name, doc["reconciliation"]))
            found[name] = {r: difference(doc, one[r]) for r in one}
        print("largest relative difference between the replicas' reports: %.3g; of each store's report from each "
              "replica's: %s" % (between, json.dumps(found)))
        for name, diffs in found.items():
            self.assertLessEqual(min(diffs.values()), SAME, "%s: %r" % (name, diffs))


class ClustersThroughVmagent(AgentTestCase):
    """test_clusters.py's two clusters with vmagent in place of each cluster's Prometheus: each
    cluster's vmagent scrapes its own agent, sets its `cluster` external label, and sends to the
    shared VictoriaMetrics and to one of the cluster's own (the cluster's server, here the
    reference). `gpumeter report` against the shared store, by cluster, equals each cluster's own
    store exactly (the same samples), and by project alone the sum of the two."""

    def test_vmagent_clusters_report_as_their_own_stores_do(self):
        clusters = {"east": os.path.join(SCENARIOS, "ledger-mixed.yaml"),
                    "west": os.path.join(SCENARIOS, "ledger-churn.yaml")}
        end = 43.0  # both scenarios' last usage
        began = time.time()
        start = ScenarioStart()
        shared = self.track(VictoriaMetrics())
        own, ports = {}, {}
        for cluster in clusters:
            own[cluster] = self.track(VictoriaMetrics())
            ports[cluster] = free_port()
            folder = tempfile.mkdtemp(prefix="gpumeter-vmagent-")
            config = os.path.join(folder, "scrape.yml")
            with open(config, "w") as f:
                json.dump({"global": {"scrape_interval": "1s", "external_labels": {"cluster": cluster}},
                           "scrape_configs": [{"job_name": "gpumeter", "static_configs": [
                               {"targets": ["127.0.0.1:%d" % ports[cluster]]}]}]}, f)
            self.track(Process(["vmagent", "-promscrape.config=" + config, "-remoteWrite.url=" + shared.write_url(),
                                "-remoteWrite.url=" + own[cluster].write_url(),
                                "-remoteWrite.tmpDataPath=" + os.path.join(folder, "queue"),
                                "-httpListenAddr=127.0.0.1:%d" % free_port(), "-loggerLevel=WARN"],
                               workdir=folder, name="vmagent"))

        def scraping():
            shared.flush()
            return {r["metric"].get("cluster") for r in instant(shared, "up", time.time())} == set(clusters)
        wait_until(scraping, 60, interval=0.5, what="both vmagents scraping")
        for cluster, scenario in clusters.items():
            node = self.track(SimNode(scenario, start))
            state = os.path.join(tempfile.mkdtemp(prefix="gpumeter-cluster-"), "ledger.json")
            config = node.config("ledger:\n  allocation: process\n  checkpoint_interval: 1s\n")
            agent = self.track(Agent(scenario=scenario, env=sim_env(start), port=ports[cluster],
                                     extra_args=node.agent_args(config, state)))
            agent.wait_ready()
        epoch = start.begin()
        wait_until(lambda: time.time() > epoch + end + 6, end + 30, interval=0.5, what="scenario end")
        to = time.time() - 1.5
        period = ("--from", began - 5, "--to", to)
        wait_for_writes([shared] + list(own.values()), to)
        fields = list(COUNTERS.values())

        def assert_same(got, want, what):
            for f in fields:
                self.assertLessEqual(abs(got[f] - want[f]), SAME * max(1.0, abs(want[f])),
                                     "%s %s: %r against %r" % (what, f, got[f], want[f]))
        reference = {c: rows(report_json("--url", vm.base, *period, "--by", "project")) for c, vm in own.items()}
        by_cluster = report_json("--url", shared.base, *period, "--by", "cluster,project")
        self.assertTrue(by_cluster["reconciliation"]["ok"], by_cluster["reconciliation"])
        store = rows(by_cluster)
        self.assertEqual(sorted({k[0] for k in store}), sorted(clusters))
        for cluster, want in reference.items():
            self.assertTrue(want)
            self.assertEqual(sorted(k[1] for k in store if k[0] == cluster), sorted(k[0] for k in want), cluster)
            for (project,), r in want.items():
                assert_same(store[(cluster, project)], r, "%s/%s" % (cluster, project))
        total = rows(report_json("--url", shared.base, *period, "--by", "project"))
        projects = {k[0] for r in reference.values() for k in r}
        self.assertEqual(sorted(k[0] for k in total), sorted(projects))
        for project in projects:
            want = {f: sum(r[(project,)][f] for r in reference.values() if (project,) in r) for f in fields}
            assert_same(total[(project,)], want, project)
        print("vmagent clusters: %s; projects by cluster in the shared store: %d"
              % (json.dumps({c: len(r) for c, r in reference.items()}), len(store)))


if __name__ == "__main__":
    import unittest
    unittest.main()
