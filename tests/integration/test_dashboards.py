"""The Grafana dashboards in deploy/grafana: their structure (uids, panel ids, the datasource
variable on every panel and variable, every variable they use defined before use, links, units,
the provisioning files), then every panel query run against a real Prometheus that scrapes the
agent on a simulated node, with a `cluster` target label, the cost rules `gpumeter rules` writes
and the shipped budget and alert rules. Each variable is resolved by running its own query as
Grafana would (label_values, query_result with its regex) and substituted as Grafana's Prometheus
data source does (regex-escaped, `.*` for All); Grafana's built-ins get values suited to a 1 s
scrape. A query that errors, warns or returns no data fails the test, named with its dashboard,
panel and expression."""
import glob
import json
import os
import re
import subprocess
import tempfile
import time
import unittest
import urllib.parse

import yaml

import harness
import rocm_namespace
from harness import (AgentTestCase, Agent, BIN, Process, Prometheus, SCENARIOS, SOURCE_DIR, SimNode, free_port,
                     http_get, wait_until)

GRAFANA = os.path.join(SOURCE_DIR, "deploy", "grafana")
DASHBOARDS = os.path.join(GRAFANA, "dashboards")
PROMETHEUS_DIR = os.path.join(SOURCE_DIR, "deploy", "prometheus")
SCENARIO = os.path.join(SCENARIOS, "dashboards.yaml")
MIG_SCENARIO = os.path.join(SCENARIOS, "dashboards-mig.yaml")
MIXED = os.path.join(SCENARIOS, "dashboards-mixed.yaml")
PRICING = os.path.join(SOURCE_DIR, "tests", "integration", "dashboards", "pricing.yaml")
DOCS = os.path.join(SOURCE_DIR, "docs", "dashboards.md")
EXPECTED_UIDS = {"gpumeter-fleet", "gpumeter-gpu", "gpumeter-chargeback", "gpumeter-health"}
DS_REF = "${datasource}"
CLUSTER = "dash-test"
READY_AT = 12.0   # scenario seconds: jobs from 3 s, Xids at 5-6 s, then a few scrapes and rule runs
# Grafana's built-ins for a 1 s scrape interval (the data source's timeInterval) and a 30 s range:
# $__rate_interval is max($__interval + scrape interval, 4 x scrape interval).
RANGE_S = 30
BUILTINS = {"__interval": "1s", "__interval_ms": "1000", "__rate_interval": "4s", "__range": "%ds" % RANGE_S,
            "__range_s": str(RANGE_S), "__range_ms": str(RANGE_S * 1000)}
RANGE_QUERY = (20, 2)  # a range query over the last 20 s, one point every 2 s
# $name, ${name}, ${name:format}, [[name]]
VAR_REF = re.compile(r"\$(\w+)|\$\{(\w+)(?::[^}]*)?\}|\[\[(\w+)(?::[^\]]*)?\]\]")


def load_dashboards():
    out = {}
    for path in sorted(glob.glob(os.path.join(DASHBOARDS, "*.json"))):
        with open(path) as f:
            out[os.path.basename(path)] = json.load(f)
    return out


def all_panels(dash):
    """Every panel, rows' collapsed panels included."""
    for p in dash.get("panels", []):
        yield p
        for q in p.get("panels", []) or []:
            yield q


def query_panels(dash):
    return [p for p in all_panels(dash) if p.get("type") != "row"]


def var_refs(text):
    return {a or b or c for a, b, c in VAR_REF.findall(text or "")}


def variable_query(v):
    q = v.get("query")
    return q.get("query", "") if isinstance(q, dict) else (q or "")


def js_regex(pattern):
    """A Grafana variable regex (/.../flags) as a Python regex."""
    m = re.fullmatch(r"/(.*)/([gimsuy]*)", pattern, re.S)
    body, flags = (m.group(1), m.group(2)) if m else (pattern, "")
    body = re.sub(r"\(\?<(?![=!])", "(?P<", body)
    return re.compile(body, re.I if "i" in flags else 0)


def regex_escape(value):
    """Grafana's prometheusSpecialRegexEscape: what a value of a multi-value or All variable becomes."""
    value = value.replace("\\", "\\\\\\\\")
    return re.sub(r"([$^*{}\[\]'+?.()|])", r"\\\\\1", value)


def interpolate(text, values, variables):
    """Substitutes dashboard variables (values: name -> list of values, or None for All) and built-ins."""
    def sub(m):
        name = m.group(1) or m.group(2) or m.group(3)
        if name in BUILTINS:
            return BUILTINS[name]
        if name not in values:
            raise KeyError("variable $%s has no value" % name)
        v = variables[name]
        chosen = values[name]
        if chosen is None:
            return v.get("allValue") or "(" + "|".join(regex_escape(x) for x in v["_options"]) + ")"
        if not v.get("multi") and not v.get("includeAll"):
            return chosen[0].replace("\\", "\\\\").replace("'", "\\\\'")
        escaped = [regex_escape(x) for x in chosen]
        return escaped[0] if len(escaped) == 1 else "(" + "|".join(escaped) + ")"
    return VAR_REF.sub(sub, text)


class PromClient:
    def __init__(self, prom):
        self.base = prom.base

    def get(self, path, params):
        status, _, body = http_get(self.base + path + "?" + urllib.parse.urlencode(params, doseq=True), timeout=30)
        doc = json.loads(body)
        if status != 200 or doc.get("status") != "success":
            raise QueryError("%s %s" % (doc.get("errorType", status), doc.get("error", body[:300])))
        if doc.get("warnings"):
            raise QueryError("warnings: %r" % doc["warnings"])
        return doc["data"]

    def instant(self, expr, at):
        return self.get("/api/v1/query", {"query": expr, "time": repr(at)})

    def range(self, expr, end):
        span, step = RANGE_QUERY
        return self.get("/api/v1/query_range", {"query": expr, "start": repr(end - span), "end": repr(end),
                                                "step": str(step)})

    def variable_values(self, query, at):
        """A Prometheus template variable query as Grafana runs it: a list of option texts."""
        m = re.fullmatch(r"\s*label_values\((.*)\)\s*", query, re.S)
        if m:
            args = m.group(1)
            sel, _, label = args.rpartition(",")
            label = label.strip()
            params = {"start": repr(at - RANGE_S), "end": repr(at)}
            if sel.strip():
                params["match[]"] = sel.strip()
            return self.get("/api/v1/label/%s/values" % label, params)
        m = re.fullmatch(r"\s*query_result\((.*)\)\s*", query, re.S)
        if m:
            out = []
            for r in self.instant(m.group(1), at)["result"]:
                metric = dict(r["metric"])
                text = metric.pop("__name__", "")
                text += "{" + ",".join('%s="%s"' % kv for kv in metric.items()) + "}"
                out.append("%s %s %d" % (text, r["value"][1], int(r["value"][0] * 1000)))
            return out
        raise QueryError("unsupported variable query %r" % query)


class QueryError(Exception):
    pass


def apply_regex(v, texts):
    """Grafana's variable regex: named groups text and value, else the first group, else the text."""
    options = []
    regex = js_regex(v["regex"]) if v.get("regex") else None
    for t in texts:
        if regex is None:
            options.append((t, t))
            continue
        m = regex.search(t)
        if not m:
            continue
        groups = m.groupdict()
        if "value" in groups or "text" in groups:
            value = groups.get("value") or groups.get("text")
            options.append((groups.get("text") or value, value))
        elif m.groups():
            options.append((m.group(1), m.group(1)))
        else:
            options.append((t, t))
    seen, out = set(), []
    for text, value in sorted(options) if v.get("sort", 0) in (1, 5) else options:
        if value not in seen:
            seen.add(value)
            out.append((text, value))
    return out


class DashboardStructure(unittest.TestCase):
    def setUp(self):
        self.dashboards = load_dashboards()

    def test_the_four_dashboards_parse_with_unique_uids_and_titles(self):
        uids = [d.get("uid") for d in self.dashboards.values()]
        self.assertEqual(set(uids), EXPECTED_UIDS)
        self.assertEqual(len(uids), len(set(uids)))
        titles = [d.get("title") for d in self.dashboards.values()]
        self.assertEqual(len(titles), len(set(titles)))
        for name, d in self.dashboards.items():
            with self.subTest(dashboard=name):
                self.assertEqual(name, d["uid"] + ".json")
                self.assertIn("gpumeter", d.get("tags", []))
                self.assertGreaterEqual(d.get("schemaVersion", 0), 36)
                self.assertIsNone(d.get("id"), "an exported dashboard carries no database id")
                self.assertTrue(d.get("description"))

    def test_every_panel_queries_through_the_datasource_variable(self):
        for name, d in self.dashboards.items():
            with self.subTest(dashboard=name):
                variables = d["templating"]["list"]
                ds = [v for v in variables if v["name"] == "datasource"]
                self.assertEqual(len(ds), 1)
                self.assertEqual((ds[0]["type"], ds[0]["query"]), ("datasource", "prometheus"))
                for v in variables:
                    if v["type"] == "query":
                        self.assertEqual(v["datasource"], {"type": "prometheus", "uid": DS_REF}, v["name"])
                ids = [p["id"] for p in all_panels(d)]
                self.assertEqual(len(ids), len(set(ids)), "panel ids repeat")
                panels = query_panels(d)
                self.assertGreaterEqual(len(panels), 10)
                for p in panels:
                    where = "%s: panel %d %r" % (name, p["id"], p["title"])
                    self.assertEqual(p.get("datasource"), {"type": "prometheus", "uid": DS_REF}, where)
                    self.assertTrue(p.get("targets"), where + " has no query")
                    self.assertTrue(p.get("description"), where + " has no description")
                    refs = [t["refId"] for t in p["targets"]]
                    self.assertEqual(len(refs), len(set(refs)), where)
                    for t in p["targets"]:
                        self.assertEqual(t.get("datasource"), {"type": "prometheus", "uid": DS_REF}, where)
                        self.assertTrue(t.get("expr", "").strip(), where)
                    if p["type"] != "table":
                        self.assertTrue(p["fieldConfig"]["defaults"].get("unit"), where + " has no unit")
                    pos = p["gridPos"]
                    self.assertTrue(0 <= pos["x"] and pos["x"] + pos["w"] <= 24, where)

    def test_every_variable_used_is_defined_before_use(self):
        for name, d in self.dashboards.items():
            with self.subTest(dashboard=name):
                defined = []
                for v in d["templating"]["list"]:
                    for ref in var_refs(variable_query(v)):
                        self.assertIn(ref, defined, "%s: variable %s uses $%s before it is defined" %
                                      (name, v["name"], ref))
                    defined.append(v["name"])
                texts = [d.get("title", "")] + [json.dumps(link) for link in d.get("links", [])]
                for p in query_panels(d):
                    texts += [p.get("title", ""), json.dumps(p["fieldConfig"]), json.dumps(p.get("options", {}))]
                    texts += [t.get("expr", "") + " " + t.get("legendFormat", "") for t in p["targets"]]
                used = set().union(*(var_refs(t) for t in texts))
                undefined = {u for u in used if not u.startswith("__") and u not in defined}
                self.assertEqual(undefined, set())
                unknown_builtins = {u for u in used if u.startswith("__") and u not in BUILTINS and
                                    u not in ("__data", "__url_time_range", "__field", "__series", "__value")}
                self.assertEqual(unknown_builtins, set())
                for v in d["templating"]["list"]:
                    if v["type"] == "query":
                        self.assertTrue(v.get("includeAll") and v.get("allValue") == ".*", v["name"])
                for p in query_panels(d):
                    exprs = " ".join(t["expr"] for t in p["targets"])
                    if "rate(" in exprs or "increase(" in exprs:
                        self.assertTrue("$__rate_interval" in exprs or "$__range" in exprs,
                                        "%s: %r has a fixed rate window" % (name, p["title"]))

    def test_variables_are_chained_cluster_node_gpu_project(self):
        for name, d in self.dashboards.items():
            variables = {v["name"]: v for v in d["templating"]["list"]}
            self.assertIn("cluster", variables, name)
            self.assertIn("node", variables, name)
            self.assertIn("$cluster", variable_query(variables["node"]))
            self.assertIn("instance", variable_query(variables["node"]))
            for dependent in ("gpu", "project"):
                if dependent in variables:
                    q = variable_query(variables[dependent])
                    self.assertTrue("$cluster" in q and "$node" in q, "%s: %s is not chained" % (name, dependent))
        self.assertIn("gpu", {v["name"] for v in self.dashboards["gpumeter-gpu.json"]["templating"]["list"]})
        self.assertIn("project",
                      {v["name"] for v in self.dashboards["gpumeter-chargeback.json"]["templating"]["list"]})

    def test_dashboards_link_to_each_other(self):
        for name, d in self.dashboards.items():
            with self.subTest(dashboard=name):
                tag_links = [link for link in d.get("links", []) if link.get("type") == "dashboards"]
                self.assertTrue(any("gpumeter" in link.get("tags", []) and link.get("includeVars") and
                                    link.get("keepTime") for link in tag_links), d.get("links"))
                for p in query_panels(d):
                    for link in p["fieldConfig"]["defaults"].get("links", []):
                        m = re.match(r"/d/([^/?]+)", link["url"])
                        self.assertTrue(m and m.group(1) in EXPECTED_UIDS, link["url"])

    def test_provisioning_files_point_at_the_dashboards(self):
        with open(os.path.join(GRAFANA, "provisioning", "dashboards", "gpumeter.yml")) as f:
            prov = yaml.safe_load(f)
        self.assertEqual(prov["apiVersion"], 1)
        providers = prov["providers"]
        self.assertEqual(len(providers), 1)
        p = providers[0]
        self.assertEqual(p["type"], "file")
        path = p["options"]["path"]
        self.assertTrue(path.startswith("/"), path)
        with open(DOCS) as f:
            docs = f.read()
        # The docs say where to copy deploy/grafana/dashboards/*.json: the provider's folder.
        self.assertIn(path, docs)
        self.assertIn("deploy/grafana/dashboards", docs)
        self.assertIn("deploy/grafana/provisioning", docs)
        for uid in EXPECTED_UIDS:
            self.assertIn(uid + ".json", docs)
        with open(os.path.join(GRAFANA, "provisioning", "datasources", "prometheus.yml")) as f:
            ds = yaml.safe_load(f)
        self.assertEqual(ds["apiVersion"], 1)
        sources = ds["datasources"]
        self.assertEqual([s["type"] for s in sources], ["prometheus"])
        self.assertTrue(sources[0]["url"].startswith("http"))
        self.assertTrue(re.fullmatch(r"\d+[smh]", sources[0]["jsonData"]["timeInterval"]))


class DashboardQueries(AgentTestCase):
    """Every panel query against a real Prometheus fed by the simulator."""

    SCENARIO = SCENARIO

    def alert_rules(self, work):
        return os.path.join(PROMETHEUS_DIR, "gpumeter-alerts.yml")

    def start_agent(self, node, config, state, env):
        """The agent on the simulated node, with the default collectors; returns its port."""
        agent = self.track(Agent(scenario=self.SCENARIO, env=env, extra_args=node.agent_args(config, state)))
        agent.wait_ready()
        return agent.port

    def start_pipeline(self):
        work = tempfile.mkdtemp(prefix="gpumeter-dash-")
        cost_rules = os.path.join(work, "cost-rules.yml")
        out = subprocess.run([BIN, "rules", "--pricing", PRICING, "--output", cost_rules], capture_output=True,
                             text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        rule_files = [cost_rules, os.path.join(PROMETHEUS_DIR, "gpumeter-budget.yml"), self.alert_rules(work)]
        self.began = time.time()
        start = harness.ScenarioStart()
        node = self.track(SimNode(self.SCENARIO, start))
        config = node.config("ledger:\n  checkpoint_interval: 1s\n")
        port = self.start_agent(node, config, os.path.join(work, "ledger.json"), start.env)
        prom = self.track(Prometheus(
            ["127.0.0.1:%d" % port],
            job_config="    relabel_configs:\n      - target_label: cluster\n        replacement: %s\n" % CLUSTER,
            extra_config="rule_files:\n" + "".join("  - '%s'\n" % f for f in rule_files)))
        return start.begin(), prom

    def wait_for_data(self, epoch, prom):
        wait_until(lambda: time.time() > epoch + READY_AT, READY_AT + 30, interval=0.5, what="scenario time")

        def ready():
            alerts = prom.query('ALERTS{alertname=~"GpuXid.*", alertstate="firing"}')
            mtd = prom.query("gpumeter:cost:month_forecast:by_project")
            spread = prom.query("gpumeter:idle_cost_per_hour:by_project")
            return len(alerts) == 4 and len(mtd) >= 3 and len(spread) >= 3
        wait_until(ready, 30, interval=0.5, what="Xid alerts, forecasts and spread idle cost in Prometheus")
        _, _, body = http_get(prom.base + "/api/v1/rules")
        groups = json.loads(body)["data"]["groups"]
        names = {g["name"] for g in groups}
        self.assertTrue({"gpumeter.cost", "gpumeter.budget", "gpumeter.gpu.errors"} <= names, names)
        broken = [(r["name"], r.get("lastError")) for g in groups for r in g["rules"] if r.get("health") == "err"]
        self.assertEqual(broken, [])

    def resolve(self, client, dash, pick, at):
        """Variable values in dashboard order; pick is 'first', 'last' or 'all'."""
        variables = {v["name"]: v for v in dash["templating"]["list"]}
        values, shown = {}, {}
        for v in dash["templating"]["list"]:
            if v["type"] == "datasource":
                continue
            query = interpolate(variable_query(v), values, variables)
            options = apply_regex(v, client.variable_values(query, at))
            v["_options"] = [value for _, value in options]
            self.assertTrue(options, "%s: variable %s has no values (query %s)" % (dash["uid"], v["name"], query))
            if pick == "all":
                values[v["name"]], shown[v["name"]] = None, "All"
            else:
                text, value = options[0] if pick == "first" else options[-1]
                values[v["name"]], shown[v["name"]] = [value], text
        return variables, values, shown

    def test_every_panel_query_returns_data(self):
        resolved = self.run_every_panel_query()
        # The chained variables picked real values: the cluster target label, the node, a GPU
        # shown by index, model and node, and a project from the ledger.
        gpu = resolved[("gpumeter-gpu", "first")]
        self.assertEqual(gpu["cluster"], CLUSTER)
        self.assertRegex(gpu["node"], r"^127\.0\.0\.1:\d+$")
        self.assertRegex(gpu["gpu"], r"^\d \| NVIDIA H100 80GB HBM3 \| 127\.0\.0\.1:\d+$")
        self.assertEqual(resolved[("gpumeter-chargeback", "first")]["project"], "climate")
        self.assertEqual(resolved[("gpumeter-chargeback", "last")]["project"], "vision")

    # GPUs of SCENARIO in MIG mode. The GPU dashboard's MIG row selects MIG instances only
    # (mig_uuid!=""): it is empty for a GPU that is not in MIG mode, and on a node with none.
    MIG_GPUS = ()
    # What a GPU in MIG mode does not give for the whole GPU (docs/dashboards.md, "MIG"): exactly
    # these panels are empty for it, and every other panel shows data for it.
    ABSENT_ON_MIG = {
        "gpu_utilization_ratio": "NVML gives no utilization on a MIG-enabled GPU",
        "gpu_process_utilization_ratio": "NVML gives no per-process utilization on MIG",
        "gpu_memory_utilization_ratio": "NVML gives no memory utilization on a MIG-enabled GPU",
        "gpu_remapped_rows": "not supported on a GPU with MIG instances",
    }

    # The nvlink collector's families. The agents run with the default collectors, in which NVLink
    # is off for its cost: these panels are empty, and each one's description says how to fill it.
    NVLINK_OFF = re.compile(r"\bgpu_nvlink_(up|speed_bytes_per_second|transmit_bytes_total|receive_bytes_total|"
                            r"errors_total)\b")
    NVLINK_OFF_REASON = "the nvlink collector is off by default"

    def expected_empty(self, shown, expr):
        """Why `expr` may show no data with the variables `shown`; None when it must show data."""
        gpu = shown.get("gpu", "All")
        index = None if gpu == "All" else int(gpu.split(" |")[0])
        if 'mig_uuid!=""' in expr:
            if not self.MIG_GPUS:
                return "no GPU in MIG mode on this node"
            if index is not None and index not in self.MIG_GPUS:
                return "GPU %d is not in MIG mode" % index
            return None
        reasons = [self.NVLINK_OFF_REASON] if self.NVLINK_OFF.search(expr) else []
        if index in self.MIG_GPUS:
            reasons += [why for family, why in self.ABSENT_ON_MIG.items() if re.search(r"\b%s\b" % family, expr)]
        return "; ".join(reasons) or None

    def run_every_panel_query(self):
        """Runs every panel's queries with each variable at its first value, its last and All;
        returns the variables' shown values per (dashboard uid, pick)."""
        epoch, prom = self.start_pipeline()
        self.prom, self.epoch = prom, epoch
        self.wait_for_data(epoch, prom)
        client = PromClient(prom)
        at = time.time()
        failures, counted, resolved, expected_empty = [], {}, {}, set()
        for name, dash in load_dashboards().items():
            for pick in ("first", "last", "all"):
                variables, values, shown = self.resolve(client, dash, pick, at)
                resolved[(dash["uid"], pick)] = shown
                n = 0
                for p in query_panels(dash):
                    for t in p["targets"]:
                        try:
                            expr = interpolate(t["expr"], values, variables)
                        except KeyError as e:
                            failures.append("%s, panel %r query %s: %s" % (name, p["title"], t["refId"], e))
                            continue
                        empty_because = self.expected_empty(shown, expr)
                        if self.NVLINK_OFF_REASON in (empty_because or "") and \
                                "--collector.nvlink" not in p.get("description", ""):
                            failures.append("%s, panel %r: empty on a default agent, and its description does "
                                            "not say to run the agent with --collector.nvlink" % (name, p["title"]))
                        for kind in ("instant", "range"):
                            n += 1
                            where = "%s, variables %s, panel %r query %s (%s)" % (name, shown, p["title"],
                                                                                t["refId"], kind)
                            try:
                                data = client.instant(expr, at) if kind == "instant" else client.range(expr, at)
                                if empty_because and data["result"]:
                                    failures.append("%s: data where none was expected (%s); update the list of "
                                                    "panels empty on this GPU\n    %s" % (where, empty_because, expr))
                                elif empty_because:
                                    expected_empty.add(p["title"])
                                elif not data["result"]:
                                    raise QueryError("no data")
                            except QueryError as e:
                                failures.append("%s: %s\n    %s" % (where, e, expr))
                counted[(name, pick)] = n
        # The failures first and the rest a line each: CTest's excerpt of a failed test's output
        # can be short, and unittest's summary of a failure comes only after every class's logs.
        if failures:
            print("FAILED QUERIES:\n%s" % "\n".join(failures))
        print("variables resolved: %s" % json.dumps({"%s/%s" % k: v for k, v in resolved.items()}))
        print("queries run: %r" % counted)
        print("panels empty where expected: %s" % sorted(expected_empty))
        if failures:
            self.fail("%d of %d queries failed:\n%s" % (len(failures), sum(counted.values()), "\n".join(failures)))
        self.assert_agents_up(client, at)
        return resolved

    def assert_agents_up(self, client, at):
        """The fleet dashboard's Agents table shows this healthy agent up (green): a backend the
        node has no GPU or library for is absent, not down."""
        dash = load_dashboards()["gpumeter-fleet.json"]
        panel = [p for p in query_panels(dash) if p["title"] == "Agents"][0]
        expr = panel["targets"][0]["expr"].replace("$cluster", ".*").replace("$node", ".*")
        result = client.instant(expr, at)["result"]
        self.assertTrue(result, expr)
        for r in result:
            self.assertEqual(r["value"][1], "1", "%s shows down:\n    %s" % (r["metric"], expr))


class MixedNodeDashboardQueries(DashboardQueries):
    """The same queries on a node with four NVIDIA and four AMD GPUs in one agent: the AMD GPUs
    are read through Debian's real ROCm SMI from a simulated amdgpu tree, in a private mount
    namespace with the tree over /sys/class and /sys/module (docs/rocm-behaviour.md)."""
    SCENARIO = MIXED
    # What the GPU and health dashboards cannot show for an MI300X read through ROCm SMI
    # (docs/dashboards.md, "Mixed nodes"): exactly these panels are empty for the AMD GPU, and
    # every other panel shows data for it.
    ABSENT_ON_AMD = {
        "gpu_fan_speed_ratio": "the MI300X is passively cooled: no fan",
        "gpu_performance_state": "NVIDIA's P-state; ROCm's performance level is not one",
        "gpu_remapped_rows": "NVIDIA's row remapping; AMD retires pages instead",
        "gpu_xid_errors_total": "Xid errors are NVIDIA's",
        "gpu_sm_active_ratio": "profiling metrics come from NVML's GPM",
        "gpu_sm_occupancy_ratio": "profiling metrics come from NVML's GPM",
        "gpu_tensor_active_ratio": "profiling metrics come from NVML's GPM",
        "gpu_dram_active_ratio": "profiling metrics come from NVML's GPM",
        "gpu_pipe_active_ratio": "profiling metrics come from NVML's GPM",
        "gpu_nvlink_transmit_bytes_total": "NVLink is NVIDIA's (AMD's Infinity Fabric links are not read)",
        "gpu_nvlink_receive_bytes_total": "NVLink is NVIDIA's (AMD's Infinity Fabric links are not read)",
        "gpu_nvlink_up": "NVLink is NVIDIA's (AMD's Infinity Fabric links are not read)",
        "gpu_nvlink_errors_total": "NVLink is NVIDIA's (AMD's Infinity Fabric links are not read)",
    }

    def alert_rules(self, work):
        """The shipped alert rules with every `for` cut to 2 s, so that the memory alerts fire
        within the test."""
        with open(os.path.join(PROMETHEUS_DIR, "gpumeter-alerts.yml")) as f:
            doc = yaml.safe_load(f)
        for group in doc["groups"]:
            for rule in group["rules"]:
                if "for" in rule:
                    rule["for"] = "2s"
        path = os.path.join(work, "gpumeter-alerts.yml")
        with open(path, "w") as f:
            yaml.safe_dump(doc, f, sort_keys=False)
        return path

    def expected_empty(self, shown, expr):
        mig = super().expected_empty(shown, expr)  # the MIG row: no GPU in MIG mode here
        if not shown.get("gpu", "").startswith("7 | AMD"):
            return mig
        reasons = [why for family, why in self.ABSENT_ON_AMD.items() if re.search(r"\b%s\b" % family, expr)]
        return "; ".join(reasons + ([mig] if mig else [])) or None

    def start_agent(self, node, config, state, env):
        tree = os.path.join(node.dir, "sysfs")
        self.track(Process(rocm_namespace.follow_argv(BIN, tree, self.SCENARIO), env=env, workdir=node.dir,
                           name="sim-sysfs"))
        wait_until(lambda: rocm_namespace.tree_ready(tree), 30, what="sim sysfs")
        port = free_port()
        self.track(Process(rocm_namespace.argv(tree, [
            BIN, "serve", "--web.listen-address", "127.0.0.1:%d" % port, "--collect.interval", "1s",
            "--sim.scenario", self.SCENARIO]
            + node.agent_args(config, state)), env=env, name="gpumeter"))
        wait_until(lambda: http_get("http://127.0.0.1:%d/-/ready" % port, timeout=2)[0] == 200, 30,
                   what="agent ready")
        return port

    def test_every_panel_query_returns_data(self):
        resolved = self.run_every_panel_query()
        # The GPU variable runs from an NVIDIA GPU (first) to an AMD one (last).
        self.assertRegex(resolved[("gpumeter-gpu", "first")]["gpu"], r"^0 \| NVIDIA H100 80GB HBM3 \| ")
        self.assertRegex(resolved[("gpumeter-gpu", "last")]["gpu"], r"^7 \| AMD Instinct MI300X \| ")
        self.assertEqual(resolved[("gpumeter-chargeback", "first")]["project"], "climate")
        self.assertEqual(resolved[("gpumeter-chargeback", "last")]["project"], "vision")
        # The shipped alerts on both vendors: the Xid alerts on the four H100s only, the memory
        # alerts on the MI300X whose job fills 90 % of its VRAM (and on no other GPU).
        firing = {}
        for a in self.prom.query('ALERTS{alertstate="firing"}'):
            firing.setdefault(a["metric"]["alertname"], set()).add(a["metric"].get("gpu"))
        self.assertEqual(firing.get("GpuXidCritical", set()) | firing.get("GpuXidError", set()), {"0", "1", "2", "3"})
        self.assertEqual(firing.get("GpuMemoryUsageHigh"), {"5"}, firing)
        # One bill for both vendors: `gpumeter report --by model` prices each model's GPU-hours
        # at its own price (the H100's, and the catch-all for the MI300X).
        doc = harness.report_json("--url", self.prom.base, "--from", str(self.began - 5), "--to",
                                  str(time.time() - 1.5), "--by", "model", "--pricing", PRICING)
        rows = {}
        for r in doc["rows"]:
            if not r["idle"] and not r["unattributed"]:
                rows[r["key"]["model"]] = r
        print("report --by model: %s" % json.dumps(rows, indent=1))
        self.assertEqual(sorted(rows), ["AMD Instinct MI300X", "NVIDIA H100 80GB HBM3"])
        for model, gpu_hour, busy_gpu_hour in (("NVIDIA H100 80GB HBM3", 3.20, 0.40), ("AMD Instinct MI300X", 1.00, 0)):
            r = rows[model]
            self.assertGreater(r["allocated_seconds"], 4 * 5, model)  # four GPUs, each owned since 3 s
            self.assertAlmostEqual(r["cost"]["allocation"], r["allocated_seconds"] / 3600 * gpu_hour, places=9)
            self.assertAlmostEqual(r["cost"]["utilization"], r["busy_seconds"] / 3600 * busy_gpu_hour, places=9)
            self.assertGreater(r["cost"]["energy"], 0, model)


if __name__ == "__main__":
    unittest.main()


class MigNodeDashboardQueries(DashboardQueries):
    """The same queries on dashboards.yaml's node with GPU 3 in MIG mode: the MIG row shows its
    instances' layout, their owners' slices, SM activity and memory; for GPU 3 the panels NVML
    cannot fill for a MIG parent are empty (ABSENT_ON_MIG), and every other panel has data."""
    SCENARIO = MIG_SCENARIO
    MIG_GPUS = (3,)

    def test_every_panel_query_returns_data(self):
        resolved = self.run_every_panel_query()
        self.assertRegex(resolved[("gpumeter-gpu", "last")]["gpu"], r"^3 \| NVIDIA H100 80GB HBM3 \| ")
        # The slices held on GPU 3: each pod its 3g instance, the seventh slice __idle__.
        want = {("3g.40gb", "jupyter-bob", "vision"): 3, ("3g.40gb", "eval-harness-0", "nlp"): 3, ("", "", "__idle__"): 1}

        def held_now():
            held = {(r["metric"].get("mig_profile", ""), r["metric"].get("pod", ""), r["metric"]["project"]):
                    float(r["value"][1])
                    for r in self.prom.query('7 * sum by (mig_profile, pod, project) '
                                             '(rate(gpu_allocated_seconds_total{gpu="3"}[5s]))', at=time.time())}
            # Owners of the first moments (before the pods' projects were read, the instances'
            # idle time before the jobs started) hold nothing now.
            return {k: v for k, v in held.items() if v > 0.01}

        def settled(held):
            return set(held) == set(want) and all(abs(held[k] - v) <= 0.05 for k, v in want.items())

        # A rate over 5 s of 1 s scrapes dips when a loaded machine delays a scrape or a
        # collection: the slices held are asserted once a window is whole, within 30 s.
        held = held_now()
        deadline = time.time() + 30
        while not settled(held) and time.time() < deadline:
            time.sleep(0.5)
            held = held_now()
        self.assertEqual(set(held), set(want), held)
        for key, slices in want.items():
            self.assertAlmostEqual(held[key], slices, delta=0.05, msg=key)
