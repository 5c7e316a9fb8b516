"""Scheduler allocations end to end (tests/integration/scenarios/allocations.yaml: an idle notebook
pod, a Slurm job between its steps, a process bypassing the scheduler beside that job, two pods
time-sliced on one GPU, a GPU nobody holds). The agent reads the simulated kubelet and the HPC
job mapping that `gpumeter sim procfs` keeps; a real Prometheus scrapes it.

* scheduler policy: allocated, idle-allocated and busy seconds per owner against
  `gpumeter sim truth --policy scheduler`, within 0.1 % plus, at each pod edge, one kubelet
  refresh interval and the List call's own time (docs/ledger.md, "Edges"); the foreign seconds;
  the idle-allocation alert firing through a real Prometheus and Alertmanager at a webhook,
  naming the notebook's pod; `gpumeter report` showing each owner's idle allocation;
* the Slurm job's allocation read from its cgroup (v2: the job's processes' SLURM_JOB_GPUS), with
  neither the kubelet nor the mapping: within 0.1 % plus one refresh interval at each edge;
* process policy: the same run billed as before, against `gpumeter sim truth`.

The test's copy of the alert rules changes only GpuAllocatedIdle's window (5m -> 3s) and `for:`
(30m -> 12s), so that it fires within the 60 s scenario; `for:` stays several windows long, as in
the shipped rule, so that the last stretch of an allocation that ended does not fire it."""
import json
import os
import subprocess
import tempfile
import time

import yaml

from harness import (BIN, EDGE_SECONDS, SCENARIOS, SOURCE_DIR, Agent, AgentTestCase, Alertmanager, ScenarioStart,
                     SimNode, WebhookSink, check_ledger_against_truth, report_json, sim_env, sim_truth, wait_until)
from test_alertmanager import FINANCE, alerting_prometheus, config_for_test

SCENARIO = os.path.join(SCENARIOS, "allocations.yaml")
ALERTS = os.path.join(SOURCE_DIR, "deploy", "prometheus", "gpumeter-alerts.yml")
END = 60.0        # the scenario's duration
SETTLE = 5.0      # a checkpoint (1 s) publishes the last usage, then a scrape reads it
REFRESH = 1.0     # the kubelet refresh interval of this test
# One read of a source's own time on a loaded machine (a kubelet List call, a walk of the Slurm
# cgroups): the agent takes a change from the moment the read returns.
SOURCE_READ = 0.25
TOLERANCE = 1e-3  # 0.1 %
FIELDS = {"gpu_allocated_seconds_total": "allocated_seconds",
          "gpu_idle_allocated_seconds_total": "idle_allocated_seconds",
          "gpu_busy_seconds_total": "busy_seconds"}
RESERVED = ("__idle__", "__unattributed__")


def scheduler_truth():
    out = subprocess.run([BIN, "sim", "truth", "--scenario", SCENARIO, "--from", "0", "--to", str(END),
                          "--format", "json", "--policy", "scheduler"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def load_scenario():
    with open(SCENARIO) as f:
        return yaml.safe_load(f)


def owner_name(labels, scenario):
    """The scenario's name for the owner of a ledger series: the allocation of its pod or Slurm
    job, else the job (outside any allocation) of its user."""
    for a in scenario["allocations"]:
        k8s, slurm = a.get("kubernetes", {}), a.get("slurm", {})
        if labels.get("pod") and k8s.get("pod") == labels["pod"] and k8s.get("namespace") == labels["namespace"]:
            return a["name"]
        if labels.get("hpc_job") and slurm.get("job_id") == labels["hpc_job"]:
            return a["name"]
    uid = scenario["users"].get(labels.get("user"))
    names = [j["name"] for j in scenario["jobs"] if j.get("uid") == uid and "allocation" not in j]
    return names[0] if len(names) == 1 else "?%r" % (labels,)


def edges_per_gpu(scenario, end=END):
    """(pod allocation edges, process edges) inside a run that ends at `end`, per GPU index."""
    pods, procs = {}, {}
    for a in scenario["allocations"]:
        n = sum(1 for t in (a["start"], a["end"]) if 0 < t < end)
        for g in a["gpus"]:
            if "kubernetes" in a:
                pods[g] = pods.get(g, 0) + n
    for j in scenario["jobs"]:
        n = sum(1 for t in (j["start"], j["end"]) if 0 < t < end)
        for g in j["gpus"]:
            procs[g] = procs.get(g, 0) + n
    return pods, procs


class Allocations(AgentTestCase):
    def start(self, policy, start):
        """A node and a ready agent on the held `start` (a ScenarioStart): the scenario runs once
        the test begins it."""
        node = self.track(SimNode(SCENARIO, start))
        config = node.config("ledger:\n  allocation: %s\n  checkpoint_interval: 1s\n"
                             '  idle_power_watts: {"NVIDIA H100 80GB HBM3": 70}\n' % policy,
                             attribution="  hpc_job_mapping_dir: %s\n" % node.hpc_jobs_dir, refresh="%gs" % REFRESH)
        state = os.path.join(tempfile.mkdtemp(prefix="gpumeter-alloc-"), "ledger.json")
        agent = self.track(Agent(scenario=SCENARIO, env=sim_env(start), extra_args=node.agent_args(config, state)))
        agent.wait_ready()
        self.assertRegex(agent.process.log(), r"ledger allocation policy.*allocation\W+%s" % policy)
        return agent

    def rules_with_short_idle_window(self):
        with open(ALERTS) as f:
            doc = yaml.safe_load(f)
        rule = [r for g in doc["groups"] for r in g["rules"] if r.get("alert") == "GpuAllocatedIdle"]
        self.assertEqual(len(rule), 1)
        self.assertEqual(rule[0]["for"], "30m")
        self.assertEqual(rule[0]["expr"].count("[5m]"), 2)
        rule[0]["expr"] = rule[0]["expr"].replace("[5m]", "[3s]")
        rule[0]["for"] = "12s"
        path = os.path.join(tempfile.mkdtemp(prefix="gpumeter-alloc-rules-"), "gpumeter-alerts.yml")
        with open(path, "w") as f:
            yaml.safe_dump(doc, f, sort_keys=False)
        return path

    def test_scheduler_policy_bills_allocations_and_alerts_on_the_idle_notebook(self):
        sink = self.track(WebhookSink())
        am = self.track(Alertmanager(config_for_test(sink)))
        began = time.time()
        start = ScenarioStart()
        agent = self.start("scheduler", start)
        instance = "127.0.0.1:%d" % agent.port
        prom = self.track(alerting_prometheus([instance], self.rules_with_short_idle_window(), am))
        epoch = start.begin()

        def idle_alerts():
            return [x for _, doc in sink.payloads() if doc["status"] == "firing" for x in doc["alerts"]
                    if x["labels"]["alertname"] == "GpuAllocatedIdle"]

        # The notebook's kernel ran 10-20 s; its pod holds GPU 0 until 58 s.
        alerts = wait_until(lambda: [x for x in idle_alerts() if x["labels"].get("pod") == "jupyter-alice"],
                            END + 10 - (time.time() - epoch), interval=0.5, what="GpuAllocatedIdle at the webhook")
        # Allocated at 2 s, the kernel ran 10-20 s: idle for long enough only from 20 s on.
        self.assertGreater(time.time() - epoch, 20 + 12, "fired before the pod had been held idle for 12 s")
        labels = alerts[0]["labels"]
        self.assertEqual((labels["namespace"], labels["container"], labels["gpu"], labels["category"]),
                         ("team-vision", "notebook", "0", "cost"))
        self.assertIn("Pod team-vision/jupyter-alice holds GPU 0", alerts[0]["annotations"]["summary"])
        paths = {path for path, doc in sink.payloads()
                 if any(x["labels"]["alertname"] == "GpuAllocatedIdle" for x in doc["alerts"])}
        self.assertEqual(paths, {"/" + FINANCE})

        wait_until(lambda: time.time() > epoch + END + SETTLE, END + 20, interval=0.5, what="scenario end")
        # A pod whose process ran through its allocation but for a 2 s and a 5 s stretch, shorter
        # than the rule's `for:`: never named.
        self.assertEqual([x for x in idle_alerts() if x["labels"].get("pod") == "eval-a"], [])
        at = time.time() - 1.5
        scenario = load_scenario()
        truth = scheduler_truth()
        got = {}
        for metric, field in FIELDS.items():
            for r in prom.query(metric, at=at):
                m = r["metric"]
                if m.get("project") in RESERVED:
                    continue
                acc = got.setdefault((int(m["gpu"]), owner_name(m, scenario)), {})
                acc[field] = acc.get(field, 0.0) + float(r["value"][1])
        want = {(o["gpu"], o["name"]): o for o in truth["owners"]}
        self.assertEqual(set(got), set(want))
        pods, procs = edges_per_gpu(scenario)
        worst = []
        for key, o in want.items():
            gpu = key[0]
            for field in FIELDS.values():
                v, measured = o[field], got[key].get(field, 0.0)
                # Time moves at a pod edge by up to one refresh (and the List's own time), at a
                # process edge by up to one driver sample period; busy time moves at its rate.
                rate = 1.0 if field != "busy_seconds" else (v / o["allocated_seconds"] if o["allocated_seconds"] else 0)
                edges = pods.get(gpu, 0) * (REFRESH + SOURCE_READ) + procs.get(gpu, 0) * EDGE_SECONDS
                bound = TOLERANCE * v + edges * rate + 1e-6
                worst.append((abs(measured - v), field, key, bound))
                self.assertLessEqual(abs(measured - v), bound,
                                     "%s of %r: ledger %.6g, truth %.6g" % (field, key, measured, v))
        print("largest deviations (seconds, field, owner, bound): %r" % sorted(worst, reverse=True)[:5])
        # No pod edges on the Slurm job's GPUs: its allocation is billed within 0.1 % (and the
        # process edges inside it do not move allocated time).
        for gpu in (1, 2):
            o = want[(gpu, "slurm-51300")]
            self.assertLessEqual(abs(got[(gpu, "slurm-51300")]["allocated_seconds"] - o["allocated_seconds"]),
                                 TOLERANCE * o["allocated_seconds"] + (2 * EDGE_SECONDS if gpu == 2 else 0) + 1e-6)
        # The bypassing process shared GPU 2 with the job for 4 s, counted as foreign.
        foreign = {r["metric"]["gpu"]: float(r["value"][1])
                   for r in prom.query("gpumeter_ledger_foreign_seconds_total", at=at)}
        for g in truth["gpus"]:
            self.assertLessEqual(abs(foreign[str(g["gpu"])] - g["foreign_seconds"]),
                                 TOLERANCE * g["foreign_seconds"] + 2 * EDGE_SECONDS + 1e-6, "gpu %d" % g["gpu"])
        # The owners and idle time cover exactly the integrated time, GPU by GPU.
        covered = {r["metric"]["gpu"]: float(r["value"][1])
                   for r in prom.query("gpumeter_ledger_covered_seconds_total", at=at)}
        for gpu, total in covered.items():
            held = sum(float(r["value"][1])
                       for r in prom.query('gpu_allocated_seconds_total{gpu="%s"}' % gpu, at=at))
            self.assertAlmostEqual(held, total, delta=1e-9 * total + 1e-9)

        # gpumeter report: each owner's idle allocation, by pod and job.
        doc = report_json("--url", prom.base, "--from", began - 5, "--to", time.time() - 1.5,
                          "--by", "namespace,pod,hpc_job")
        rows = {tuple(r["key"][d] for d in doc["by"]): r for r in doc["rows"]}
        for name, key in (("jupyter-alice", ("team-vision", "jupyter-alice", "")),
                          ("slurm-51300", ("", "", "51300")), ("asr-b", ("team-speech", "asr-b", ""))):
            self.assertIn(key, rows, sorted(rows))
            want_idle = sum(o["idle_allocated_seconds"] for (g, n), o in want.items() if n == name)
            gpus = {g for (g, n) in want if n == name}
            bound = TOLERANCE * want_idle + sum(pods.get(g, 0) * (REFRESH + SOURCE_READ) + procs.get(g, 0) * EDGE_SECONDS
                                                for g in gpus) + 1e-6
            self.assertLessEqual(abs(rows[key]["idle_allocated_seconds"] - want_idle), bound, name)
        table = subprocess.run([BIN, "report", "--url", prom.base, "--from", str(began - 5), "--to",
                                str(time.time() - 1.5), "--by", "pod", "--no-color"],
                               capture_output=True, text=True, timeout=60)
        self.assertEqual(table.returncode, 0, table.stderr)
        self.assertIn("IDLE ALLOC GPU-H", table.stdout)

    def test_slurm_job_from_its_cgroup(self):
        start = ScenarioStart()
        node = self.track(SimNode(SCENARIO, start, kubelet=False, slurm_cgroup="v2"))
        config = node.config("ledger:\n  allocation: scheduler\n  checkpoint_interval: 1s\n",
                             attribution="  slurm_cgroups: auto\n  slurm_refresh_interval: %gs\n" % REFRESH,
                             environment=["SLURM_JOB_GPUS", "SLURM_JOB_ID"])
        state = os.path.join(tempfile.mkdtemp(prefix="gpumeter-alloc-"), "ledger.json")
        agent = self.track(Agent(scenario=SCENARIO, env=sim_env(start), extra_args=node.agent_args(config, state)))
        agent.wait_ready()
        self.assertIn("reading Slurm jobs' GPUs from their cgroups", agent.process.log())
        from harness import Prometheus
        prom = self.track(Prometheus(["127.0.0.1:%d" % agent.port]))
        epoch = start.begin()
        wait_until(lambda: time.time() > epoch + END + SETTLE, END + 20, interval=0.5, what="scenario end")
        at = time.time() - 1.5
        want = {(o["gpu"], o["name"]): o for o in scheduler_truth()["owners"]}
        got = {}
        for metric, field in FIELDS.items():
            for r in prom.query('%s{hpc_job="51300"}' % metric, at=at):
                acc = got.setdefault(int(r["metric"]["gpu"]), {})
                acc[field] = acc.get(field, 0.0) + float(r["value"][1])
        self.assertEqual(set(got), {1, 2})
        _, procs = edges_per_gpu(load_scenario())
        for gpu in (1, 2):
            o = want[(gpu, "slurm-51300")]
            # Each of the job's two edges is seen at the next read of the cgroups, and the bypassing
            # process on GPU 2 moves shares at its own two edges.
            for field in ("allocated_seconds", "idle_allocated_seconds"):
                bound = TOLERANCE * o[field] + 2 * (REFRESH + SOURCE_READ) + procs.get(gpu, 0) * EDGE_SECONDS + 1e-6
                self.assertLessEqual(abs(got[gpu][field] - o[field]), bound,
                                     "%s on GPU %d: ledger %.6g, truth %.6g" % (field, gpu, got[gpu][field], o[field]))

    def test_process_policy_bills_processes_as_before(self):
        start = ScenarioStart()
        agent = self.start("process", start)
        from harness import Prometheus
        prom = self.track(Prometheus(["127.0.0.1:%d" % agent.port]))
        epoch = start.begin()
        wait_until(lambda: time.time() > epoch + END + SETTLE, END + 20, interval=0.5, what="scenario end")
        check_ledger_against_truth(self, prom, SCENARIO, END, TOLERANCE)
        self.assertEqual(prom.query("gpu_idle_allocated_seconds_total"), [])
        self.assertEqual(prom.query("gpumeter_ledger_foreign_seconds_total"), [])
        # The notebook's idle time is nobody's under this policy.
        truth = sim_truth(SCENARIO, 0, END)
        idle0 = float(prom.query('gpu_allocated_seconds_total{project="__idle__", gpu="0"}')[0]["value"][1])
        self.assertGreater(idle0, truth["gpus"][0]["idle_seconds"] - 1)
