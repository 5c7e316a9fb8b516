"""The container recipe and the Kubernetes manifests, checked against the real agent and the
real peers they configure.

- Every manifest in deploy/kubernetes parses, names its object and namespace, and is listed in
  the kustomization; the DaemonSet, Service and ServiceMonitor agree with each other (labels,
  selectors, ports, the mounts and the paths the agent's arguments name, probes, resources sized
  from the figures in docs/benchmarks.md, the security context).
- The DaemonSet's container arguments run the real agent, with only the mounted paths moved to
  a simulated node (its /proc tree, /etc/passwd and kubelet socket) and a free loopback port: it
  becomes ready, names each GPU's pod from the kubelet and each process's user from passwd, and
  saves the ledger in the state directory. A real Prometheus then scrapes it through the scrape
  configuration prometheus-operator generates for the ServiceMonitor (its selection, job and
  target labels, followed by the ServiceMonitor's relabelings): job and instance come out as the
  alert rules and dashboards expect, and the agent's owner labels arrive unchanged.
- The ConfigMap's config file is accepted by the agent as it is, and a broken copy is refused.
- The PrometheusRule is the generator's output, its groups are those of the shipped rule files,
  and they pass `promtool check rules` and the shipped `promtool test rules` suites loaded from
  the manifest instead of the files.
- The Containerfile: two stages on debian:12 and debian:12-slim, the build stage installs the
  build group of scripts/install-deps.sh, the run stage installs exactly the Debian 12 packages
  that hold the libraries `ldd` lists for the agent and the simulator, runs as a non-root uid,
  and lays the files out so that the binary finds its simulator (tried on that layout).
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import yaml

from harness import (BIN, DEPLOY_SCENARIOS, SIM_LIB, SOURCE_DIR, AgentTestCase, Process, Prometheus, SimNode, free_port,
                     http_get, wait_until)

K8S_DIR = os.path.join(SOURCE_DIR, "deploy", "kubernetes")
CONTAINERFILE = os.path.join(SOURCE_DIR, "deploy", "container", "Containerfile")
GENERATOR = os.path.join(SOURCE_DIR, "scripts", "gen-prometheusrule.py")
PROM_DIR = os.path.join(SOURCE_DIR, "deploy", "prometheus")
RULE_SOURCES = [os.path.join(PROM_DIR, "gpumeter-alerts.yml"), os.path.join(PROM_DIR, "gpumeter-budget.yml")]
RULE_TESTS = sorted(glob.glob(os.path.join(PROM_DIR, "tests", "*_test.yml")))
SCENARIO = os.path.join(DEPLOY_SCENARIOS, "h100-8x-three-teams.yaml")
NAMESPACE = "gpumeter"
NODE_NAME = "gpu-node-7"
AGENT_POD = "gpumeter-x7k2p"

EXPECTED_KINDS = {
    ("v1", "Namespace"), ("v1", "ServiceAccount"), ("v1", "ResourceQuota"), ("v1", "ConfigMap"),
    ("apps/v1", "DaemonSet"), ("v1", "Service"), ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
}


# ---- loading ----------------------------------------------------------------------------------

def manifest_files():
    return sorted(p for p in glob.glob(os.path.join(K8S_DIR, "*.yaml")) if os.path.basename(p) != "kustomization.yaml")


def load_objects():
    """{kind: object} over every manifest; fails on a kind that appears twice."""
    objs = {}
    for path in manifest_files():
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if doc is None:
                    continue
                if doc["kind"] in objs:
                    raise AssertionError("%s: a second %s" % (path, doc["kind"]))
                doc["_file"] = os.path.basename(path)
                objs[doc["kind"]] = doc
    return objs


def container(objs):
    cs = objs["DaemonSet"]["spec"]["template"]["spec"]["containers"]
    if len(cs) != 1:
        raise AssertionError("expected one container, got %d" % len(cs))
    return cs[0]


def flag_values(args):
    """--name=value (or --name value) arguments as {name: value}; the subcommand is left out."""
    out, i = {}, 0
    while i < len(args):
        a = args[i]
        if a.startswith("--"):
            if "=" in a:
                k, v = a[2:].split("=", 1)
            else:
                k, v = a[2:], args[i + 1]
                i += 1
            if k in out:
                raise AssertionError("--%s given twice" % k)
            out[k] = v
        i += 1
    return out


def mounts(objs):
    """{volume name: (mountPath, readOnly, volume)} for the agent's container."""
    volumes = {v["name"]: v for v in objs["DaemonSet"]["spec"]["template"]["spec"]["volumes"]}
    out = {}
    for m in container(objs)["volumeMounts"]:
        out[m["name"]] = (m["mountPath"], bool(m.get("readOnly", False)), volumes[m["name"]])
    return out


def configmap_config(objs):
    data = objs["ConfigMap"]["data"]
    if len(data) != 1:
        raise AssertionError("expected one file in the ConfigMap, got %s" % sorted(data))
    (key, text), = data.items()
    return key, text


def under(path, directory):
    return os.path.commonpath([path, directory]) == directory


def quantity(q):
    """A Kubernetes CPU (cores) or memory (bytes) quantity as a float."""
    m = re.fullmatch(r"([0-9.]+)(m|Ki|Mi|Gi|k|M|G)?", str(q))
    if not m:
        raise AssertionError("unexpected quantity %r" % q)
    scale = {None: 1, "m": 1e-3, "Ki": 1024, "Mi": 1024 ** 2, "Gi": 1024 ** 3, "k": 1e3, "M": 1e6, "G": 1e9}
    return float(m.group(1)) * scale[m.group(2)]


def benchmark_sizing():
    """The DaemonSet sizing figures docs/benchmarks.md gives: (peak RSS in MiB, share of a core)."""
    with open(os.path.join(SOURCE_DIR, "docs", "benchmarks.md")) as f:
        text = f.read()
    para = text[text.index("**For sizing a DaemonSet**"):]
    rss = re.search(r"\*\*peak RSS ([0-9.]+) MiB\*\*", para)
    cpu = re.search(r"\*\*([0-9.]+) % of one core\*\*", para)
    if not rss or not cpu:
        raise AssertionError("docs/benchmarks.md no longer gives the DaemonSet sizing figures")
    return float(rss.group(1)), float(cpu.group(1)) / 100


def project_version():
    with open(os.path.join(SOURCE_DIR, "CMakeLists.txt")) as f:
        return re.search(r"project\(gpumeter VERSION ([0-9.]+)", f.read()).group(1)


def alert_job():
    """The job the shipped alert rules expect, from `up{job="..."}`."""
    with open(RULE_SOURCES[0]) as f:
        jobs = set(re.findall(r'up\{job="([^"]+)"\}', f.read()))
    if len(jobs) != 1:
        raise AssertionError("the alert rules name %d jobs: %s" % (len(jobs), jobs))
    return jobs.pop()


def parse_text(body):
    """Text exposition to {(name, frozenset(labels.items())): value}: names, labels, values."""
    out = {}
    for line in body.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r'([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)(?: \d+)?', line)
        if not m:
            raise AssertionError("unparsed exposition line: %r" % line)
        labels = {k: re.sub(r"\\(.)", lambda e: "\n" if e.group(1) == "n" else e.group(1), v)
                  for k, v in re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or "")}
        out[(m.group(1), frozenset(labels.items()))] = float(m.group(3))
    return out


def promtool(*args):
    return subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=120)


# ---- the manifests ----------------------------------------------------------------------------

class Manifests(unittest.TestCase):
    def setUp(self):
        self.objs = load_objects()

    def test_every_manifest_names_its_object_and_is_in_the_kustomization(self):
        self.assertEqual({(o["apiVersion"], k) for k, o in self.objs.items()}, EXPECTED_KINDS)
        for kind, o in self.objs.items():
            with self.subTest(kind=kind):
                self.assertEqual(o["metadata"]["name"], "gpumeter")
                self.assertEqual(o["metadata"]["labels"]["app.kubernetes.io/name"], "gpumeter")
                if kind == "Namespace":
                    self.assertNotIn("namespace", o["metadata"])
                else:
                    self.assertEqual(o["metadata"]["namespace"], NAMESPACE)
        with open(os.path.join(K8S_DIR, "kustomization.yaml")) as f:
            kust = yaml.safe_load(f)
        self.assertEqual(kust["kind"], "Kustomization")
        self.assertEqual(sorted(kust["resources"]), sorted(os.path.basename(p) for p in manifest_files()))

    def test_daemonset_pod(self):
        ds = self.objs["DaemonSet"]
        pod = ds["spec"]["template"]["spec"]
        self.assertLessEqual(ds["spec"]["selector"]["matchLabels"].items(),
                             ds["spec"]["template"]["metadata"]["labels"].items())
        self.assertIs(pod["hostPID"], True)
        self.assertNotIn("hostNetwork", pod)
        self.assertEqual(pod["priorityClassName"], "system-node-critical")
        # Admitted where the cluster limits that class to namespaces with a quota naming it.
        quota = self.objs["ResourceQuota"]["spec"]
        self.assertIn({"scopeName": "PriorityClass", "operator": "In", "values": [pod["priorityClassName"]]},
                      quota["scopeSelector"]["matchExpressions"])
        self.assertGreaterEqual(int(quota["hard"]["pods"]), 5000)
        self.assertEqual(pod["serviceAccountName"], self.objs["ServiceAccount"]["metadata"]["name"])
        self.assertIs(pod["automountServiceAccountToken"], False)
        self.assertIs(self.objs["ServiceAccount"]["automountServiceAccountToken"], False)
        self.assertEqual(pod["nodeSelector"], {"nvidia.com/gpu.present": "true"})
        self.assertIn({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, pod["tolerations"])
        # One writer per node's ledger state file: the old pod is gone before the new one starts.
        self.assertEqual(ds["spec"]["updateStrategy"]["rollingUpdate"]["maxSurge"], 0)
        # hostPID and hostPath need the privileged Pod Security level in the namespace.
        self.assertEqual(self.objs["Namespace"]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
                         "privileged")

    def test_daemonset_mounts_match_the_agent_arguments(self):
        c = container(self.objs)
        self.assertEqual(c["args"][0], "serve")
        flags = flag_values(c["args"][1:])
        m = mounts(self.objs)
        self.assertEqual(set(m), {"config", "proc", "passwd", "pod-resources", "state"})

        def host(name):
            return m[name][2]["hostPath"]["path"], m[name][2]["hostPath"]["type"]

        # Every host path is read-only but the ledger's state directory.
        for name, (path, ro, vol) in m.items():
            with self.subTest(volume=name):
                self.assertEqual(ro, name not in ("state",), "readOnly of %s" % name)
        self.assertEqual(host("proc"), ("/proc", "Directory"))
        self.assertEqual(flags["path.procfs"], m["proc"][0])
        self.assertEqual(host("passwd"), ("/etc/passwd", "File"))
        self.assertEqual(m["passwd"][0], os.path.join(flags["path.rootfs"], "etc/passwd"))
        self.assertEqual(host("pod-resources"), ("/var/lib/kubelet/pod-resources", "Directory"))
        self.assertEqual(host("state"), ("/var/lib/gpumeter", "DirectoryOrCreate"))
        self.assertTrue(under(flags["ledger.state-file"], m["state"][0]), flags["ledger.state-file"])
        # The config file is the ConfigMap's one key, in the directory it is mounted on.
        key, text = configmap_config(self.objs)
        self.assertEqual(m["config"][2]["configMap"]["name"], self.objs["ConfigMap"]["metadata"]["name"])
        self.assertEqual(flags["config.file"], os.path.join(m["config"][0], key))
        socket = yaml.safe_load(text)["attribution"]["kubelet"]["socket"]
        self.assertEqual(os.path.dirname(socket), m["pod-resources"][0])
        self.assertEqual(flags["web.listen-address"], ":%d" % c["ports"][0]["containerPort"])

    def test_probes_resources_and_security(self):
        c = container(self.objs)
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        self.assertEqual(ports, {"metrics": 9400})
        self.assertEqual(c["livenessProbe"]["httpGet"], {"path": "/-/healthy", "port": "metrics"})
        self.assertEqual(c["readinessProbe"]["httpGet"], {"path": "/-/ready", "port": "metrics"})

        peak_mib, cores = benchmark_sizing()
        req, lim = c["resources"]["requests"], c["resources"]["limits"]
        self.assertGreaterEqual(quantity(req["memory"]), 1.5 * peak_mib * 2 ** 20, "memory request vs peak RSS")
        self.assertGreaterEqual(quantity(lim["memory"]), 3 * peak_mib * 2 ** 20, "memory limit vs peak RSS")
        self.assertLessEqual(quantity(lim["memory"]), 256 * 2 ** 20, "an order of magnitude below dcgm-exporter")
        self.assertGreaterEqual(quantity(req["cpu"]), 1.5 * cores, "cpu request vs the benchmark")
        self.assertGreaterEqual(quantity(lim["cpu"]), 10 * quantity(req["cpu"]), "cpu limit leaves bursts unthrottled")

        sc = c["securityContext"]
        self.assertIs(sc["allowPrivilegeEscalation"], False)
        self.assertIs(sc["readOnlyRootFilesystem"], True)
        self.assertIs(sc["privileged"], False)
        self.assertEqual(sc["capabilities"]["drop"], ["ALL"])
        self.assertEqual(sorted(sc["capabilities"]["add"]), ["DAC_READ_SEARCH", "SYS_ADMIN", "SYS_PTRACE"])
        self.assertEqual(sc["runAsUser"], 0)  # the kubelet's socket is root's (docs/kubelet.md)
        self.assertEqual(self.objs["DaemonSet"]["spec"]["template"]["spec"]["securityContext"]["seccompProfile"],
                         {"type": "RuntimeDefault"})

    def test_image_version_matches_the_project(self):
        version = project_version()
        c = container(self.objs)
        self.assertEqual(c["image"], "gpumeter:" + version)
        self.assertEqual(self.objs["DaemonSet"]["metadata"]["labels"]["app.kubernetes.io/version"], version)
        self.assertEqual(Containerfile.parse().labels()["org.opencontainers.image.version"], version)

    def test_service_and_servicemonitor_select_the_agent(self):
        ds, svc, sm = self.objs["DaemonSet"], self.objs["Service"], self.objs["ServiceMonitor"]
        pod_labels = ds["spec"]["template"]["metadata"]["labels"]
        self.assertLessEqual(svc["spec"]["selector"].items(), pod_labels.items())
        self.assertEqual(svc["spec"]["clusterIP"], "None")
        (port,) = svc["spec"]["ports"]
        self.assertEqual(port["name"], "metrics")
        self.assertEqual(port["port"], 9400)
        self.assertEqual(port["targetPort"], "metrics")
        self.assertIn(port["targetPort"], {p["name"] for p in container(self.objs)["ports"]})

        self.assertLessEqual(sm["spec"]["selector"]["matchLabels"].items(), svc["metadata"]["labels"].items())
        self.assertIn(svc["metadata"]["namespace"], sm["spec"]["namespaceSelector"]["matchNames"])
        (ep,) = sm["spec"]["endpoints"]
        self.assertEqual(ep["port"], port["name"])
        self.assertEqual(ep["path"], "/metrics")
        # The job prometheus-operator gives the targets: the jobLabel's value on the Service, else
        # the Service's name. It must be the job the alert rules watch.
        job = svc["metadata"]["labels"].get(sm["spec"].get("jobLabel", ""), svc["metadata"]["name"])
        self.assertEqual(job, alert_job())
        self.assertEqual(svc["metadata"]["name"], alert_job())


# ---- the PrometheusRule -----------------------------------------------------------------------

class PrometheusRuleManifest(unittest.TestCase):
    def test_committed_file_is_the_generator_output(self):
        out = subprocess.run([sys.executable, GENERATOR, "--output", "-"], capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        with open(os.path.join(K8S_DIR, "prometheusrule.yaml")) as f:
            committed = f.read()
        self.assertEqual(committed, out.stdout, "deploy/kubernetes/prometheusrule.yaml is out of date: "
                                                "run scripts/gen-prometheusrule.py")
        check = subprocess.run([sys.executable, GENERATOR, "--check"], capture_output=True, text=True, timeout=60)
        self.assertEqual(check.returncode, 0, check.stderr)

    def test_groups_are_the_shipped_rule_files(self):
        groups = []
        for path in RULE_SOURCES:
            with open(path) as f:
                groups += yaml.safe_load(f)["groups"]
        rule = load_objects()["PrometheusRule"]
        self.assertEqual(rule["spec"]["groups"], groups)
        self.assertEqual(set(rule["spec"]), {"groups"})

    def test_rules_in_the_manifest_pass_promtool_and_the_shipped_rule_tests(self):
        tmp = tempfile.mkdtemp(prefix="gpumeter-k8s-rules-")
        try:
            rules = os.path.join(tmp, "prometheusrule-groups.yml")
            with open(rules, "w") as f:
                yaml.safe_dump({"groups": load_objects()["PrometheusRule"]["spec"]["groups"]}, f, sort_keys=False)
            r = promtool("check", "rules", "--lint=all", "--lint-fatal", rules)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("SUCCESS", r.stdout)

            self.assertGreaterEqual(len(RULE_TESTS), 2, RULE_TESTS)
            tests = []
            for path in RULE_TESTS:
                with open(path) as f:
                    doc = yaml.safe_load(f)
                self.assertTrue(all(os.path.basename(p) in map(os.path.basename, RULE_SOURCES)
                                    for p in doc["rule_files"]), doc["rule_files"])
                doc["rule_files"] = [rules]
                tests.append(os.path.join(tmp, os.path.basename(path)))
                with open(tests[-1], "w") as f:
                    yaml.safe_dump(doc, f, sort_keys=False)
            r = promtool("test", "rules", *tests)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertEqual(r.stdout.count("SUCCESS"), len(tests), r.stdout)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_generator_wraps_the_cost_rules(self):
        tmp = tempfile.mkdtemp(prefix="gpumeter-k8s-cost-")
        try:
            cost = os.path.join(tmp, "gpumeter-cost.yml")
            pricing = os.path.join(SOURCE_DIR, "deploy", "pricing", "list-prices.yaml")
            r = subprocess.run([BIN, "rules", "--pricing", pricing, "--output", cost], capture_output=True, text=True,
                               timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            out = subprocess.run([sys.executable, GENERATOR, "--name", "gpumeter-cost", cost], capture_output=True,
                                 text=True, timeout=60)
            self.assertEqual(out.returncode, 0, out.stderr)
            doc = yaml.safe_load(out.stdout)
            self.assertEqual((doc["kind"], doc["metadata"]["name"]), ("PrometheusRule", "gpumeter-cost"))
            with open(cost) as f:
                self.assertEqual(doc["spec"]["groups"], yaml.safe_load(f)["groups"])
            not_rules = os.path.join(SOURCE_DIR, "deploy", "config", "gpumeter.yaml")
            bad = subprocess.run([sys.executable, GENERATOR, not_rules], capture_output=True, text=True, timeout=60)
            self.assertNotEqual(bad.returncode, 0)
            self.assertIn("no rule groups", bad.stderr)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


# ---- the Containerfile ------------------------------------------------------------------------

class Containerfile:
    """Instructions of deploy/container/Containerfile, by stage, continuation lines joined."""

    def __init__(self, stages):
        self.stages = stages  # [(from_args, [(INSTRUCTION, argument text)])]

    @classmethod
    def parse(cls, path=CONTAINERFILE):
        stages, current, pending = [], None, ""
        with open(path) as f:
            for raw in f:
                line = raw.rstrip("\n")
                if line.lstrip().startswith("#") or (not line.strip() and not pending):
                    continue
                if line.endswith("\\"):
                    pending += line[:-1] + " "
                    continue
                line, pending = pending + line, ""
                instr, _, arg = line.strip().partition(" ")
                instr = instr.upper()
                if instr == "FROM":
                    current = []
                    stages.append((arg.split(), current))
                elif current is None:
                    if instr != "ARG":
                        raise AssertionError("%s before the first FROM" % instr)
                else:
                    current.append((instr, " ".join(arg.split())))
        return cls(stages)

    def instructions(self, stage, name):
        return [a for i, a in self.stages[stage][1] if i == name]

    def apt_packages(self, stage):
        pkgs = []
        for run in self.instructions(stage, "RUN"):
            for part in run.split("&&"):
                words = part.split()
                if "apt-get" in words and "install" in words:
                    pkgs += [w for w in words[words.index("install") + 1:] if not w.startswith("-")]
        return pkgs

    def labels(self, stage=-1):
        out = {}
        for arg in self.instructions(stage, "LABEL"):
            for k, v in re.findall(r'([\w.-]+)="([^"]*)"', arg):
                out[k] = v
        args = dict(a.split("=", 1) for a in self.instructions(stage, "ARG") if "=" in a)
        return {k: re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], v) for k, v in out.items()}


def install_deps_group(group):
    with open(os.path.join(SOURCE_DIR, "scripts", "install-deps.sh")) as f:
        m = re.search(r"^%s_pkgs=\(([^)]*)\)" % group, f.read(), re.M)
    return m.group(1).split()


def ldd_libraries(path):
    out = subprocess.run(["ldd", path], capture_output=True, text=True, timeout=30, check=True).stdout
    libs = []
    for line in out.splitlines():
        parts = line.split()
        if "=>" in parts and len(parts) > parts.index("=>") + 1 and parts[parts.index("=>") + 1].startswith("/"):
            libs.append(parts[parts.index("=>") + 1])
        elif parts and parts[0].startswith("/"):
            libs.append(parts[0])
    return libs


def dpkg_owners(paths):
    """{path: package} for each library, trying the path as ldd gave it, its real path and the
    other side of the /usr merge."""
    candidates = {}
    for p in paths:
        real = os.path.realpath(p)
        alts = [p, real]
        for q in (p, real):
            alts.append(q[4:] if q.startswith("/usr/") else "/usr" + q)
        candidates[p] = alts
    everything = sorted({a for alts in candidates.values() for a in alts})
    out = subprocess.run(["dpkg", "-S"] + everything, capture_output=True, text=True, timeout=60).stdout
    owner = {}
    for line in out.splitlines():
        pkgs, _, path = line.partition(": ")
        if "diversion" in pkgs:
            continue
        owner[path.strip()] = pkgs.split(",")[0].strip().split(":")[0]
    return {p: next((owner[a] for a in alts if a in owner), None) for p, alts in candidates.items()}


class ContainerRecipe(unittest.TestCase):
    def setUp(self):
        self.cf = Containerfile.parse()

    def test_two_stages_on_debian_12(self):
        self.assertEqual(len(self.cf.stages), 2)
        self.assertEqual(self.cf.stages[0][0], ["debian:12", "AS", "build"])
        self.assertEqual(self.cf.stages[1][0], ["debian:12-slim"])
        copies = self.cf.instructions(1, "COPY")
        self.assertTrue(copies and all(c.startswith("--from=build ") for c in copies), copies)

    def test_build_stage_installs_the_build_group_and_builds_release_with_ninja(self):
        # scripts/install-deps.sh itself installs the build group: no second list to drift.
        self.assertIn("scripts/install-deps.sh /usr/local/bin/gpumeter-install-deps", self.cf.instructions(0, "COPY"))
        runs = self.cf.instructions(0, "RUN")
        self.assertEqual(runs[0], "gpumeter-install-deps build && rm -rf /var/lib/apt/lists/*")
        self.assertEqual(self.cf.apt_packages(0), [])
        self.assertIn("cmake", install_deps_group("build"))
        self.assertIn("ninja-build", install_deps_group("build"))
        build = " ".join(runs)
        self.assertRegex(build, r"cmake -S \. -B (\S+) -G Ninja -DCMAKE_BUILD_TYPE=Release")
        self.assertRegex(build, r"cmake --build \S+ --target gpumeter nvml_sim")
        # The layout the run stage copies: the binary, the simulator beside it as the binary
        # expects (../lib/gpumeter), the config.
        for dest in ("/out/usr/bin/gpumeter", "/out/usr/lib/gpumeter/libnvidia-ml.so.1",
                     "/out/etc/gpumeter/gpumeter.yaml"):
            self.assertIn(dest, build)

    def test_run_stage_installs_exactly_the_packages_of_the_linked_libraries(self):
        pkgs = self.cf.apt_packages(1)
        self.assertEqual(len(pkgs), len(set(pkgs)), "a package listed twice")
        libs = ldd_libraries(BIN) + ldd_libraries(SIM_LIB)
        self.assertGreater(len(libs), 10)
        # Under the sanitizer preset the test binary also links the sanitizer runtimes, which the
        # image's Release build does not.
        libs = [lib for lib in libs if not re.search(r"/lib(asan|ubsan)\.so", lib)]
        owners = dpkg_owners(sorted(set(libs)))
        unowned = sorted(p for p, o in owners.items() if o is None)
        self.assertEqual(unowned, [], "libraries no Debian package holds")
        self.assertEqual(sorted(set(owners.values())), sorted(pkgs))
        # Each is a Debian 12 package apt knows.
        r = subprocess.run(["apt-cache", "show", "--no-all-versions"] + pkgs, capture_output=True, text=True,
                           timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(re.findall(r"^Package: (\S+)$", r.stdout, re.M)), sorted(pkgs))
        for p in pkgs:
            self.assertFalse(p.endswith("-dev"), p)

    def test_run_stage_user_environment_and_entrypoint(self):
        users = self.cf.instructions(1, "USER")
        self.assertTrue(users)
        uid, _, gid = users[-1].partition(":")
        self.assertTrue(uid.isdigit() and int(uid) > 0, "USER %s: a numeric non-root uid" % users[-1])
        self.assertTrue(gid == "" or (gid.isdigit() and int(gid) > 0), users[-1])
        env = " ".join(self.cf.instructions(1, "ENV"))
        self.assertIn("NVIDIA_VISIBLE_DEVICES=all", env)
        self.assertRegex(env, r"NVIDIA_DRIVER_CAPABILITIES=\S*utility")
        self.assertEqual(self.cf.instructions(1, "EXPOSE"), ["9400"])
        self.assertEqual(self.cf.instructions(1, "HEALTHCHECK"), [])
        self.assertEqual(json.loads(self.cf.instructions(1, "ENTRYPOINT")[-1]), ["/usr/bin/gpumeter"])
        cmd = json.loads(self.cf.instructions(1, "CMD")[-1])
        self.assertEqual(cmd, ["serve", "--config.file=/etc/gpumeter/gpumeter.yaml"])
        labels = self.cf.labels()
        for key in ("title", "description", "version"):
            self.assertTrue(labels.get("org.opencontainers.image." + key), key)
        # The state directory the default --ledger.state-file names belongs to that user.
        self.assertTrue(any(re.search(r"chown %s:%s /var/lib/gpumeter\b" % (uid, gid or uid), r)
                            for r in self.cf.instructions(1, "RUN")))


class ImageLayout(AgentTestCase):
    def test_binary_finds_the_simulator_and_config_where_the_image_puts_them(self):
        root = tempfile.mkdtemp(prefix="gpumeter-image-")
        try:
            for src, dest in ((BIN, "usr/bin/gpumeter"), (SIM_LIB, "usr/lib/gpumeter/libnvidia-ml.so.1"),
                              (os.path.join(SOURCE_DIR, "deploy", "config", "gpumeter.yaml"),
                               "etc/gpumeter/gpumeter.yaml")):
                os.makedirs(os.path.dirname(os.path.join(root, dest)), exist_ok=True)
                shutil.copy2(src, os.path.join(root, dest))
            cmd = json.loads(Containerfile.parse().instructions(1, "CMD")[-1])
            args = [a.replace("=/", "=" + root + "/") for a in cmd]
            port = free_port()
            p = self.track(Process([os.path.join(root, "usr/bin/gpumeter")] + args +
                                   ["--web.listen-address=127.0.0.1:%d" % port, "--ledger.state-file", "",
                                    "--sim.scenario", SCENARIO], name="gpumeter-image"))
            wait_ready(p, port)
            self.assertIn("library=%s/usr/lib/gpumeter/libnvidia-ml.so.1" % root, p.log())
            samples = parse_text(http_get("http://127.0.0.1:%d/metrics" % port)[2].decode())
            self.assertEqual(sorted(v for (n, _), v in samples.items() if n == "gpu_up"), [1.0] * 8)
        finally:
            shutil.rmtree(root, ignore_errors=True)


# ---- the agent as deployed --------------------------------------------------------------------

def wait_ready(process, port, timeout=30):
    def ready():
        if not process.alive():
            raise AssertionError("gpumeter exited early:\n" + process.log())
        return http_get("http://127.0.0.1:%d/-/ready" % port, timeout=2)[0] == 200
    wait_until(ready, timeout, what="gpumeter /-/ready")


def sanitize(name):
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def operator_scrape_config(objs, target, interval="1s"):
    """The scrape job prometheus-operator generates for the ServiceMonitor's endpoint
    (pkg/prometheus/promcfg.go, role endpoints), pointed at `target` by a static config whose
    labels stand in for what Kubernetes service discovery gives the agent's pod."""
    svc, sm = objs["Service"], objs["ServiceMonitor"]
    (ep,) = sm["spec"]["endpoints"]
    c = container(objs)
    meta = {
        "__meta_kubernetes_namespace": svc["metadata"]["namespace"],
        "__meta_kubernetes_service_name": svc["metadata"]["name"],
        "__meta_kubernetes_endpoint_port_name": svc["spec"]["ports"][0]["name"],
        "__meta_kubernetes_endpoint_address_target_kind": "Pod",
        "__meta_kubernetes_endpoint_address_target_name": AGENT_POD,
        "__meta_kubernetes_pod_name": AGENT_POD,
        "__meta_kubernetes_pod_container_name": c["name"],
        "__meta_kubernetes_pod_node_name": NODE_NAME,
    }
    for k, v in svc["metadata"]["labels"].items():
        meta["__meta_kubernetes_service_label_" + sanitize(k)] = v
        meta["__meta_kubernetes_service_labelpresent_" + sanitize(k)] = "true"
    relabel = []
    for k, v in sm["spec"]["selector"]["matchLabels"].items():
        relabel.append({"action": "keep", "source_labels": ["__meta_kubernetes_service_label_" + sanitize(k),
                                                            "__meta_kubernetes_service_labelpresent_" + sanitize(k)],
                        "regex": "(%s);true" % re.escape(v)})
    relabel += [
        {"action": "keep", "source_labels": ["__meta_kubernetes_endpoint_port_name"], "regex": ep["port"]},
        {"source_labels": ["__meta_kubernetes_endpoint_address_target_kind",
                           "__meta_kubernetes_endpoint_address_target_name"],
         "separator": ";", "regex": "Node;(.*)", "replacement": "${1}", "target_label": "node"},
        {"source_labels": ["__meta_kubernetes_endpoint_address_target_kind",
                           "__meta_kubernetes_endpoint_address_target_name"],
         "separator": ";", "regex": "Pod;(.*)", "replacement": "${1}", "target_label": "pod"},
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
        {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "service"},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
        {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "job", "replacement": "${1}"},
    ]
    if sm["spec"].get("jobLabel"):
        relabel.append({"source_labels": ["__meta_kubernetes_service_label_" + sanitize(sm["spec"]["jobLabel"])],
                        "target_label": "job", "regex": "(.+)", "replacement": "${1}"})
    relabel.append({"target_label": "endpoint", "replacement": ep["port"]})
    keys = {"sourceLabels": "source_labels", "targetLabel": "target_label", "regex": "regex",
            "replacement": "replacement", "separator": "separator", "action": "action", "modulus": "modulus"}
    for r in ep.get("relabelings", []):
        unknown = set(r) - set(keys)
        if unknown:
            raise AssertionError("relabeling fields this test does not translate: %s" % unknown)
        relabel.append({keys[k]: (v.lower() if k == "action" else v) for k, v in r.items()})
    return {
        "job_name": "serviceMonitor/%s/%s/0" % (sm["metadata"]["namespace"], sm["metadata"]["name"]),
        "honor_labels": bool(ep.get("honorLabels", False)),
        "metrics_path": ep.get("path", "/metrics"),
        "scrape_interval": interval,
        "static_configs": [{"targets": [target], "labels": meta}],
        "relabel_configs": relabel,
    }


class DeployedAgent(AgentTestCase):
    def setUp(self):
        super().setUp()
        self.objs = load_objects()
        self.tmp = tempfile.mkdtemp(prefix="gpumeter-k8s-")

    def tearDown(self):
        super().tearDown()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def config_file(self, replace=None):
        key, text = configmap_config(self.objs)
        if replace:
            text = text.replace(*replace)
            self.assertNotEqual(text, configmap_config(self.objs)[1], "nothing replaced")
        d = os.path.join(self.tmp, "config")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, key), "w") as f:
            f.write(text)
        return d, os.path.join(d, key)

    def test_configmap_config_is_accepted_as_it_is_and_a_broken_one_is_not(self):
        _, path = self.config_file()
        port = free_port()
        p = self.track(Process([BIN, "serve", "--web.listen-address=127.0.0.1:%d" % port, "--config.file=" + path,
                                "--ledger.state-file", "", "--sim.scenario", SCENARIO], name="gpumeter-configmap"))
        wait_ready(p, port)
        self.assertNotIn("level=error", p.log())

        _, broken = self.config_file(replace=("  checkpoint_interval: 5s", "  checkpoint_interval: 5s\n  colour: red"))
        r = subprocess.run([BIN, "serve", "--web.listen-address=127.0.0.1:%d" % free_port(), "--config.file=" + broken,
                            "--ledger.state-file", "", "--sim.scenario", SCENARIO], capture_output=True, text=True,
                           timeout=30)
        self.assertNotEqual(r.returncode, 0)
        self.assertRegex(r.stdout + r.stderr, r"gpumeter\.yaml:\d+:\d+: ledger")

    def test_daemonset_arguments_run_the_agent_and_prometheus_operator_scrapes_it(self):
        c = container(self.objs)
        m = mounts(self.objs)
        epoch = time.time() + 1.0
        node = self.track(SimNode(SCENARIO, epoch, kubelet=True))
        # Only what the pod would have mounted moves: the host's /proc and passwd (the simulated
        # node's), the kubelet socket, the config and the state directories, the port.
        socket = yaml.safe_load(configmap_config(self.objs)[1])["attribution"]["kubelet"]["socket"]
        config_dir, _ = self.config_file(replace=("socket: " + socket, "socket: " + node.socket))
        state_dir = os.path.join(self.tmp, "state")
        os.makedirs(state_dir)
        moved = {m["proc"][0]: node.procfs, flag_values(c["args"][1:])["path.rootfs"]: node.root,
                 m["config"][0]: config_dir, m["state"][0]: state_dir}
        port = free_port()
        args = []
        for a in c["args"]:
            if a.startswith("--web.listen-address="):
                a = "--web.listen-address=127.0.0.1:%d" % port
            elif a.startswith("--config.reload-interval="):
                pass  # a duration, not a path
            elif a.startswith("--"):
                name, _, value = a.partition("=")
                for inside, outside in moved.items():
                    if value == inside or value.startswith(inside.rstrip("/") + "/"):
                        a = name + "=" + outside + value[len(inside.rstrip("/")):]
                        break
                else:
                    self.fail("an argument this test cannot place: %s" % a)
            args.append(a)
        p = self.track(Process([BIN] + args + ["--sim.scenario", SCENARIO], env={"GPUMETER_SIM_EPOCH": repr(epoch)},
                               name="gpumeter-daemonset"))
        wait_ready(p, port)
        base = "http://127.0.0.1:%d" % port
        self.assertEqual(http_get(base + c["livenessProbe"]["httpGet"]["path"])[0], 200)
        self.assertEqual(http_get(base + c["readinessProbe"]["httpGet"]["path"])[0], 200)

        # Owners from every mount: pods from the kubelet socket, users from passwd, projects
        # from environ through the ConfigMap's rules.
        def owned():
            s = parse_text(http_get(base + "/metrics")[2].decode())
            return s if any(n == "gpu_allocated_seconds_total" and dict(ls).get("pod") == "llm-pretrain-worker-0"
                            for n, ls in s) else None
        samples = wait_until(owned, 20, interval=0.5, what="owner labels from the kubelet")
        self.assertEqual(samples[("gpumeter_kubelet_up", frozenset())], 1.0)
        self.assertEqual(sorted(v for (n, _), v in samples.items() if n == "gpu_up"), [1.0] * 8)
        owners = {frozenset((k, v) for k, v in ls if v and k not in ("gpu", "uuid"))
                  for n, ls in samples if n == "gpu_allocated_seconds_total" and dict(ls)["gpu"] == "0"}
        self.assertIn(frozenset({("project", "nlp-pretraining"), ("user", "dana"), ("namespace", "team-nlp"),
                                 ("pod", "llm-pretrain-worker-0"), ("container", "trainer")}), owners)

        # prometheus-operator's scrape job for the ServiceMonitor, on a real Prometheus.
        cfg = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
               "scrape_configs": [operator_scrape_config(self.objs, "127.0.0.1:%d" % port)]}
        prom = self.track(Prometheus(config=cfg))
        query = prom.query

        def scraped():
            if not prom.process.alive():
                raise AssertionError("prometheus exited:\n" + prom.process.log())
            return len(query("gpu_up")) == 8 and len(query("gpu_allocated_seconds_total")) >= 8
        wait_until(scraped, 30, interval=0.5, what="prometheus scraping the agent")

        up = query("up")
        self.assertEqual(len(up), 1, up)
        self.assertEqual(up[0]["metric"], {"__name__": "up", "job": alert_job(), "instance": NODE_NAME})
        self.assertEqual(up[0]["value"][1], "1")
        # The agent-down alerts' expressions are quiet.
        self.assertEqual(query('up{job="%s"} == 0' % alert_job()), [])
        self.assertEqual(query('absent(up{job="%s"})' % alert_job()), [])
        series = query('{job="%s"}' % alert_job())
        self.assertGreater(len(series), 100)
        for s in series:
            labels = s["metric"]
            self.assertEqual(labels["instance"], NODE_NAME, labels)
            self.assertFalse([k for k in labels if k.startswith("exported_")], labels)
            self.assertNotEqual(labels.get("namespace"), NAMESPACE, labels)
            self.assertNotEqual(labels.get("pod"), AGENT_POD, labels)
            self.assertNotIn("service", labels)
            self.assertNotIn("endpoint", labels)
        # The owner labels arrive as the agent wrote them; the idle GPUs' series have none.
        # (Under the scheduler policy the pod's allocation may first show, before its process is
        # found, with the project the rules give its names and no user: docs/ledger.md.)
        worker = query('gpu_allocated_seconds_total{gpu="0", pod="llm-pretrain-worker-0", user!=""}')
        self.assertEqual(len(worker), 1, worker)
        self.assertEqual({k: worker[0]["metric"][k] for k in ("namespace", "container", "project", "user")},
                         {"namespace": "team-nlp", "container": "trainer", "project": "nlp-pretraining",
                          "user": "dana"})
        before = query('gpu_allocated_seconds_total{gpu="0", pod="llm-pretrain-worker-0", user=""}')
        self.assertLessEqual(len(before), 1, before)
        idle = query('gpu_allocated_seconds_total{project="__idle__"}')
        self.assertTrue(idle)
        for s in idle:
            self.assertFalse({"namespace", "pod", "container"} & set(s["metric"]), s["metric"])

        # SIGTERM (as the kubelet stops the pod) saves the ledger in the state directory.
        self.assertEqual(p.stop(), 0)
        with open(os.path.join(state_dir, os.path.basename(flag_values(c["args"][1:])["ledger.state-file"]))) as f:
            self.assertTrue(json.load(f))


if __name__ == "__main__":
    unittest.main()
