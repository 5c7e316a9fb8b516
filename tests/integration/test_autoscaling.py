"""Autoscaling on GPU metrics through prometheus-adapter (deploy/kubernetes/autoscaling,
docs/autoscaling.md), without a cluster: no kubectl, adapter or API server runs here.

The rules file is parsed and each rule checked as the adapter reads it. Its queries then run
against a real Prometheus that scrapes the real agent on a simulated node with Kubernetes pods
(scenarios/autoscaling.yaml), the way the adapter would run them for an HPA:

- discovery: the rule's `seriesQuery` through /api/v1/series, each series' metric name turned
  into the API's metric name by `name.matches`/`as`, its `namespace` and `pod` labels into
  resources by `resources.overrides`;
- a request: the rule's `metricsQuery` rendered as prometheus-adapter renders it
  (pkg/naming/metrics_query.go, `metricsQuery.Build` for custom metrics and `BuildExternal` for
  external ones, mirrored by `build_custom` and `build_external` below), then run as an instant
  query.

Each answer must hold one series per pod (or per namespace), with the value of the simulator's
truth (`gpumeter sim truth`) within the bounds stated where they are checked. The HPA example,
the adapter's ConfigMap, Helm values and APIServices are checked against the rules file."""
import json
import os
import re
import tempfile
import time
import unittest
import urllib.parse

import yaml

import harness
from harness import AgentTestCase, Agent, Prometheus, SCENARIOS, SOURCE_DIR, SimNode, http_get, wait_until

AUTOSCALING = os.path.join(SOURCE_DIR, "deploy", "kubernetes", "autoscaling")
RULES = os.path.join(AUTOSCALING, "prometheus-adapter-rules.yaml")
CONFIGMAP = os.path.join(AUTOSCALING, "prometheus-adapter-configmap.yaml")
HELM_VALUES = os.path.join(AUTOSCALING, "prometheus-adapter-values.yaml")
HPA = os.path.join(AUTOSCALING, "hpa-example.yaml")
APISERVICES = os.path.join(AUTOSCALING, "prometheus-adapter-apiservices.yaml")
DOCS = os.path.join(SOURCE_DIR, "docs", "autoscaling.md")
K8S_DOCS = os.path.join(SOURCE_DIR, "docs", "kubernetes.md")
SCENARIO = os.path.join(SCENARIOS, "autoscaling.yaml")

CUSTOM = {"gpu_pod_utilization_ratio", "gpu_pod_memory_used_bytes"}
EXTERNAL = {"gpu_namespace_utilization_ratio"}
JOBS_START = 3.0  # the scenario's jobs all start at 3 s and run to its end
READY_AT = 25.0   # scenario seconds: over 15 s of the pods' counters in Prometheus
MIN_SPAN = 5.0    # scenario seconds between a pod's first and last samples in the 2m window
# `gpumeter sim truth` bills time as the process policy does. Under the scheduler policy (the
# default with the kubelet source on), a pod's allocated seconds also count the time it holds a
# GPU without a process: here from when the kubelet reports it until its process is found
# (docs/autoscaling.md).
POLICY = "ledger:\n  allocation: process\n"
# The fields queryTemplateArgs gives a metricsQuery template (pkg/naming/metrics_query.go).
TEMPLATE_FIELDS = {"Series", "LabelMatchers", "LabelValuesByName", "GroupBy", "GroupBySlice"}
TEMPLATE_ACTION = re.compile(r"<<\s*(.*?)\s*>>")


def load_rules():
    with open(RULES) as f:
        return yaml.safe_load(f)


def go_quote(value):
    """Go's %q for the printable ASCII of label values: prom.LabelEq and LabelMatches
    (pkg/client/helpers.go) quote a value with it."""
    if not all(32 <= ord(c) < 127 for c in value):
        raise ValueError("only printable ASCII is mirrored: %r" % value)
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def label_for(rule, resource):
    """The label resources.overrides maps to `resource` (the adapter's LabelForResource)."""
    labels = [label for label, o in rule["resources"]["overrides"].items() if o.get("resource") == resource]
    if len(labels) != 1:
        raise KeyError("rule maps %d labels to %s" % (len(labels), resource))
    return labels[0]


def render(template, series, matchers, group_by):
    """Executes a metricsQuery template (delimiters << >>) with the fields used by the shipped
    rules; any other action fails, rather than being rendered differently from the adapter."""
    args = {"Series": series, "LabelMatchers": ",".join(matchers), "GroupBy": ",".join(group_by)}

    def sub(m):
        field = re.fullmatch(r"\.(\w+)", m.group(1))
        if not field or field.group(1) not in args:
            raise ValueError("template action <<%s>> is not mirrored by this test" % m.group(1))
        return args[field.group(1)]
    return TEMPLATE_ACTION.sub(sub, template)


def build_custom(rule, series, namespace, pods):
    """metricsQuery.Build for pods in a namespace, with no metric selector: the namespace
    matcher (namespace="..."), then the pod label, `=` for one name and `=~"a|b"` for several;
    GroupBy is the pod label."""
    matchers = ["%s=%s" % (label_for(rule, "namespace"), go_quote(namespace))]
    pod_label = label_for(rule, "pod")
    op = "=~" if len(pods) > 1 else "="
    matchers.append("%s%s%s" % (pod_label, op, go_quote("|".join(pods))))
    return render(rule["metricsQuery"], series, matchers, [pod_label])


def build_external(rule, series, namespace):
    """metricsQuery.BuildExternal with no metric selector: namespace="..." when the rule is
    namespaced (the default), and an empty GroupBy (QueryForExternalSeries passes "")."""
    matchers = []
    if rule.get("resources", {}).get("namespaced", True):
        matchers.append("%s=%s" % (label_for(rule, "namespace"), go_quote(namespace)))
    return render(rule["metricsQuery"], series, matchers, [])


def go_expand(template):
    """A Go regexp.Expand template ($1, ${1}) as a Python re replacement."""
    return re.sub(r"\$\{?(\d+)\}?", r"\\g<\1>", template)


def api_name(rule, series_name):
    """The metric name the adapter serves for a discovered series (name.matches / name.as)."""
    m = re.search(rule["name"]["matches"], series_name)
    if not m:
        return None
    return m.expand(go_expand(rule["name"].get("as") or "$0"))


class RulesStructure(unittest.TestCase):
    def setUp(self):
        self.cfg = load_rules()

    def test_the_rules_file_has_the_documented_custom_and_external_metrics(self):
        self.assertEqual(set(self.cfg), {"rules", "externalRules"})
        self.assertEqual({r["name"]["as"] for r in self.cfg["rules"]}, CUSTOM)
        self.assertEqual({r["name"]["as"] for r in self.cfg["externalRules"]}, EXTERNAL)

    def test_each_rule_is_well_formed(self):
        for kind in ("rules", "externalRules"):
            for rule in self.cfg[kind]:
                with self.subTest(metric=rule["name"]["as"]):
                    self.assertEqual(set(rule), {"seriesQuery", "resources", "name", "metricsQuery"})
                    metric = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{", rule["seriesQuery"]).group(1)
                    self.assertEqual(api_name(rule, metric), rule["name"]["as"])
                    # Every label mapped to a resource is required non-empty by the series query,
                    # so the idle, unattributed and Slurm owners are never discovered.
                    for label in rule["resources"]["overrides"]:
                        self.assertIn('%s!=""' % label, rule["seriesQuery"])
                    self.assertEqual(label_for(rule, "namespace"), "namespace")
                    if kind == "rules":
                        self.assertEqual(label_for(rule, "pod"), "pod")
                    for action in TEMPLATE_ACTION.findall(rule["metricsQuery"]):
                        self.assertIn(action.lstrip("."), TEMPLATE_FIELDS)
                    self.assertIn("<<.Series>>", rule["metricsQuery"])
                    self.assertIn("<<.LabelMatchers>>", rule["metricsQuery"])
                    if kind == "externalRules":
                        # The adapter gives external queries an empty GroupBy.
                        self.assertNotIn("<<.GroupBy>>", rule["metricsQuery"])

    def test_rendering_mirrors_the_adapter(self):
        rule = next(r for r in self.cfg["rules"] if r["name"]["as"] == "gpu_pod_memory_used_bytes")
        self.assertEqual(build_custom(rule, "gpu_process_memory_used_bytes", "team-vision", ["a", "b"]),
                         'sum by (pod) (gpu_process_memory_used_bytes{namespace="team-vision",pod=~"a|b"})')
        self.assertEqual(build_custom(rule, "gpu_process_memory_used_bytes", "ns", ["a"]),
                         'sum by (pod) (gpu_process_memory_used_bytes{namespace="ns",pod="a"})')
        ext = self.cfg["externalRules"][0]
        self.assertIn('gpu_busy_seconds_total{pod!="",namespace="ns"}',
                      build_external(ext, "gpu_busy_seconds_total", "ns"))
        with self.assertRaises(ValueError):
            render("<<range .GroupBySlice>><<.>><<end>>", "s", [], [])

    def test_the_configmap_and_helm_values_hold_the_same_rules(self):
        with open(CONFIGMAP) as f:
            cm = yaml.safe_load(f)
        self.assertEqual((cm["apiVersion"], cm["kind"]), ("v1", "ConfigMap"))
        self.assertEqual(yaml.safe_load(cm["data"]["config.yaml"]), self.cfg)
        with open(HELM_VALUES) as f:
            values = yaml.safe_load(f)
        self.assertEqual(values["rules"]["custom"], self.cfg["rules"])
        self.assertEqual(values["rules"]["external"], self.cfg["externalRules"])
        self.assertIs(values["rules"]["default"], False)
        self.assertTrue(values["prometheus"]["url"].startswith("http"))
        self.assertIsInstance(values["prometheus"]["port"], int)

    def test_the_apiservices_register_both_metrics_apis_with_the_adapter(self):
        with open(APISERVICES) as f:
            services = list(yaml.safe_load_all(f))
        with open(CONFIGMAP) as f:
            namespace = yaml.safe_load(f)["metadata"]["namespace"]
        self.assertEqual(sorted(s["spec"]["group"] for s in services),
                         ["custom.metrics.k8s.io", "external.metrics.k8s.io"])
        for s in services:
            self.assertEqual((s["apiVersion"], s["kind"]), ("apiregistration.k8s.io/v1", "APIService"))
            self.assertEqual(s["metadata"]["name"], "%s.%s" % (s["spec"]["version"], s["spec"]["group"]))
            self.assertEqual(s["spec"]["version"], "v1beta1")
            self.assertEqual(s["spec"]["service"], {"name": "prometheus-adapter", "namespace": namespace})

    def test_the_hpa_example_targets_the_adapters_metrics(self):
        with open(HPA) as f:
            hpa = yaml.safe_load(f)
        self.assertEqual((hpa["apiVersion"], hpa["kind"]), ("autoscaling/v2", "HorizontalPodAutoscaler"))
        spec = hpa["spec"]
        self.assertEqual((spec["scaleTargetRef"]["apiVersion"], spec["scaleTargetRef"]["kind"]),
                         ("apps/v1", "Deployment"))
        self.assertTrue(spec["scaleTargetRef"]["name"])
        self.assertLessEqual(1, spec["minReplicas"])
        self.assertLessEqual(spec["minReplicas"], spec["maxReplicas"])
        quantity = re.compile(r"\d+(\.\d+)?(m|k|Ki|Mi|Gi)?")
        kinds = {}
        for m in spec["metrics"]:
            source = m[m["type"].lower()]
            kinds.setdefault(m["type"], set()).add(source["metric"]["name"])
            target = source["target"]
            if m["type"] == "Pods":
                self.assertEqual(target["type"], "AverageValue")  # the only type Pods metrics take
                self.assertRegex(str(target["averageValue"]), quantity)
            else:
                self.assertEqual(m["type"], "External")
                self.assertIn(target["type"], ("Value", "AverageValue"))
                self.assertRegex(str(target[target["type"][0].lower() + target["type"][1:]]), quantity)
        self.assertEqual(set(kinds), {"Pods", "External"})
        self.assertLessEqual(kinds["Pods"], CUSTOM)
        self.assertLessEqual(kinds["External"], EXTERNAL)

    def test_docs_describe_the_files_and_metrics(self):
        with open(DOCS) as f:
            docs = f.read()
        for name in sorted(CUSTOM | EXTERNAL) + ["prometheus-adapter-rules.yaml", "hpa-example.yaml",
                                                "prometheus-adapter-configmap.yaml",
                                                "prometheus-adapter-values.yaml", "prometheus-adapter-apiservices.yaml",
                                                "test_autoscaling.py"]:
            self.assertIn(name, docs)
        with open(K8S_DOCS) as f:
            self.assertIn("(autoscaling.md)", f.read())


class AdapterQueries(AgentTestCase):
    """The rules' queries against a real Prometheus scraping the agent on the simulator."""

    def series(self, prom, match, at):
        params = {"match[]": match, "start": repr(at - 60), "end": repr(at)}
        status, _, body = http_get(prom.base + "/api/v1/series?" + urllib.parse.urlencode(params))
        doc = json.loads(body)
        self.assertEqual((status, doc["status"]), (200, "success"), body[:300])
        return doc["data"]

    def query(self, prom, expr, at):
        """An instant query as the adapter runs it; an error or a warning fails the test."""
        params = {"query": expr, "time": repr(at)}
        status, _, body = http_get(prom.base + "/api/v1/query?" + urllib.parse.urlencode(params))
        doc = json.loads(body)
        self.assertEqual((status, doc["status"]), (200, "success"), "%s: %s" % (expr, body[:300]))
        self.assertFalse(doc.get("warnings"), expr)
        return {tuple(sorted(r["metric"].items())): float(r["value"][1]) for r in doc["data"]["result"]}

    def ledger_span(self, prom, key, at, jobs, t_end):
        """The scenario times of the first and last samples of the pod's allocated seconds in a
        2m window ending at `at`, from their values (see the caller)."""
        ns, pod = key
        found = prom.query('gpu_allocated_seconds_total{namespace="%s",pod="%s"}[2m]' % (ns, pod), at=at)
        self.assertEqual(len(found), 1, "%s/%s: %r" % (ns, pod, found))  # one GPU, one container
        values = found[0]["values"]
        share = sum(j["allocated_seconds"] for j in jobs) / (t_end - JOBS_START)
        t0, t1 = (JOBS_START + float(values[i][1]) / share for i in (0, -1))
        self.assertGreaterEqual(t1 - t0, MIN_SPAN, "%s/%s: samples span only %.2f s" % (ns, pod, t1 - t0))
        return t0, t1

    def test_each_rule_returns_each_pods_truth(self):
        start = harness.ScenarioStart()
        node = self.track(SimNode(SCENARIO, start))
        work = tempfile.mkdtemp(prefix="gpumeter-hpa-")
        agent = self.track(Agent(scenario=SCENARIO, env=harness.sim_env(start),
                                 extra_args=node.agent_args(node.config(POLICY), os.path.join(work, "ledger.json"))))
        agent.wait_ready()
        prom = self.track(Prometheus(["127.0.0.1:%d" % agent.port]))
        # Begun once the agent is ready: a ledger started after the jobs would miss their first
        # moments, and every span below, read from the pods' allocated seconds, would be shifted.
        epoch = start.begin()
        wait_until(lambda: time.time() > epoch + READY_AT, READY_AT + 60, interval=0.5, what="scenario time")
        at = time.time() - 1.5
        t_end = at - epoch

        truth = harness.sim_truth(SCENARIO, JOBS_START, "%.3f" % t_end)
        pods = {}  # (namespace, pod) -> [jobs]
        for j in truth["jobs"]:
            k8s = j.get("kubernetes")
            if k8s:
                pods.setdefault((k8s["namespace"], k8s["pod"]), []).append(j)
        self.assertEqual(len(pods), 4)
        namespaces = sorted({ns for ns, _ in pods})
        # Memory is constant while the jobs run: the truth's byte-seconds over a window inside
        # their run, divided by its length.
        steady = harness.sim_truth(SCENARIO, 5, 15)
        memory = {}
        for j in steady["jobs"]:
            if j.get("kubernetes"):
                key = (j["kubernetes"]["namespace"], j["kubernetes"]["pod"])
                memory[key] = memory.get(key, 0.0) + j["memory_byte_seconds"] / 10.0

        # Utilization: rate() scales each counter's increase between the first and the last
        # sample in its window by a factor of their times and the window's (extrapolation, then
        # division by the window). A pod's two counters come from the same scrapes, so the factor
        # is the same and the ratio is the pod's busy over allocated seconds between the ledger
        # times of those two samples. Those times are read from the pod's own allocated seconds: with a constant
        # share of its GPU from the jobs' start, a pod has `allocated / share` seconds at scenario
        # time JOBS_START + allocated / share. The truth over that span is the expected value.
        spans = {key: self.ledger_span(prom, key, at, jobs, t_end) for key, jobs in pods.items()}
        span_truth = {}
        for key, (t0, t1) in spans.items():
            jobs = [j for j in harness.sim_truth(SCENARIO, "%.6f" % t0, "%.6f" % t1)["jobs"]
                    if (j.get("kubernetes") or {}).get("pod") == key[1]]
            span_truth[key] = (sum(j["busy_seconds"] for j in jobs), sum(j["allocated_seconds"] for j in jobs))
            print("%s/%s: samples span scenario time %.3f-%.3f s; truth busy %.4f, allocated %.4f"
                  % (key + (t0, t1) + span_truth[key]))

        def ratio(keys):
            return sum(span_truth[k][0] for k in keys) / sum(span_truth[k][1] for k in keys)

        # Bounds. A pod's span is known to within how far the ledger may place a process's start
        # (harness.EDGE_SECONDS, 0.2 s: one of the driver's sample periods, docs/ledger.md), which
        # shifts both ends alike; on GPU 0's square wave (0.9/0.4, period 4 s) that moves the
        # average over a span of length L by at most (0.9 - 0.4) * 0.2 / L: 0.007 over the 15 s
        # of an ordinary run, 0.02 at MIN_SPAN. Steady pods read their truth to rounding. A
        # namespace's pods may have been first scraped a collection apart, which weighs their
        # rates slightly differently from their increases: 0.02.
        def pod_bound(key):
            t0, t1 = spans[key]
            return (0.9 - 0.4) * harness.EDGE_SECONDS / (t1 - t0) + 1e-9
        NAMESPACE_BOUND = 0.02
        cfg = load_rules()
        for rule in cfg["rules"] + cfg["externalRules"]:
            name = rule["name"]["as"]
            found = self.series(prom, rule["seriesQuery"], at)
            series_names = {s["__name__"] for s in found}
            self.assertEqual({api_name(rule, s) for s in series_names}, {name})
            series = series_names.pop()
            if name in EXTERNAL:
                self.assertEqual(sorted({s["namespace"] for s in found}), namespaces, name)
            else:
                self.assertEqual({(s["namespace"], s["pod"]) for s in found}, set(pods), "%s: %r" % (name, found))

        for rule in cfg["rules"]:
            name, series = rule["name"]["as"], re.match(r"\w+", rule["seriesQuery"]).group(0)
            for ns in namespaces:
                in_ns = sorted(p for n, p in pods if n == ns)
                # All the namespace's pods at once (as for an HPA's target), then each alone.
                for asked in [in_ns] + [[p] for p in in_ns] if len(in_ns) > 1 else [in_ns]:
                    expr = build_custom(rule, series, ns, asked)
                    got = self.query(prom, expr, at)
                    print("%s %s: %s -> %r" % (name, ns, expr, got))
                    self.assertEqual(set(got), {(("pod", p),) for p in asked}, expr)
                    for p in asked:
                        value = got[(("pod", p),)]
                        if name == "gpu_pod_utilization_ratio":
                            want = ratio([(ns, p)])
                            self.assertLessEqual(abs(value - want), pod_bound((ns, p)),
                                                 "%s of %s/%s: %.4f, truth %.4f" % (name, ns, p, value, want))
                        else:
                            self.assertAlmostEqual(value, memory[(ns, p)], delta=1e-9 * memory[(ns, p)],
                                                   msg="%s of %s/%s" % (name, ns, p))
                # A pod of another namespace is not found in this one.
                other = next(p for n, p in sorted(pods) if n != ns)
                self.assertEqual(self.query(prom, build_custom(rule, series, ns, [other]), at), {})

        for rule in cfg["externalRules"]:
            name, series = rule["name"]["as"], re.match(r"\w+", rule["seriesQuery"]).group(0)
            for ns in namespaces:
                expr = build_external(rule, series, ns)
                got = self.query(prom, expr, at)
                print("%s %s: %s -> %r" % (name, ns, expr, got))
                self.assertEqual(set(got), {(("namespace", ns),)}, expr)
                want = ratio([k for k in pods if k[0] == ns])
                value = got[(("namespace", ns),)]
                self.assertLessEqual(abs(value - want), NAMESPACE_BOUND,
                                     "%s of %s: %.4f, truth %.4f" % (name, ns, value, want))
            # A namespace without GPU pods has no value (the HPA then reports the metric missing).
            self.assertEqual(self.query(prom, build_external(rule, series, "team-none"), at), {})


if __name__ == "__main__":
    unittest.main()
