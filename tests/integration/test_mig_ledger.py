"""MIG billing end to end (tests/integration/scenarios/mig-h100.yaml: one H100 split 3g + 2g + 1g +
1g, pods of five namespaces on the slices, two of them time-sliced on the 2g instance, the two 1g
instances merged into a 2g at 45 s; a notebook pod holding the new slice from 47 s, its kernel
running 50-85 s; a whole H100 beside it). Two agents read the simulated node at once, one per
allocation policy, and a real Prometheus scrapes both.

Per MIG instance and per owner, the ledger's allocated, busy (SM activity on MIG) and energy counters
against `gpumeter sim truth`'s "mig" section (docs/ledger.md, "MIG"). Ledger seconds on a MIG instance are GPU-seconds
(its slices of 7 per second): the test divides them by the instance's share to compare with the
truth's instance seconds. Bounds: 0.1 %, plus at each edge what the agent can know of it
(docs/ledger.md): a process that stops on a MIG instance (no per-process records there) is taken
to have stopped halfway through the collection that no longer lists it, so half a collection
interval; a pod edge under the scheduler policy, one kubelet refresh and the List call; an
instance created or destroyed, one collection interval of the instance's own time (the free
slices take it over). Busy time of the two pods time-sliced on one instance cannot be split (NVML
has no per-process utilization on MIG): while both run it goes to __unattributed__ on that
instance, with the power above idle, and only the instance's totals are compared.

The layout change needs no restart (one agent process throughout), drives no counter backwards
(PromQL resets() is 0 on every ledger series), keeps the destroyed instances' series, and the
ledger reconciles: per GPU the owners' allocated seconds add up to the covered seconds.

`gpumeter report --by namespace` on the history prices each slice by its share of the GPU's
price, and where the pricing file prices a profile (1g.10gb here), its instances by instance-hour."""
import os
import subprocess
import tempfile
import time

import yaml

from harness import BIN, SCENARIOS, Agent, AgentTestCase, Prometheus, ScenarioStart, SimNode, report_json, sim_env, wait_until

SCENARIO = os.path.join(SCENARIOS, "mig-h100.yaml")
END = 90.0
SETTLE = 5.0          # a checkpoint (1 s) publishes the last round, then a scrape reads it
INTERVAL = 1.0        # --collect.interval (the harness's)
REFRESH = 1.0         # the kubelet refresh interval
SOURCE_READ = 0.25    # one List call on a loaded machine
TOLERANCE = 1e-3
SLICES = 7.0
# On a MIG instance the busy counter is SM activity (GPM), not time busy: the truth's
# sm_active_seconds. The scenario's jobs keep 70 % of their SMs busy, so the two differ.
FIELDS = {"gpu_allocated_seconds_total": "allocated_seconds",
          "gpu_busy_seconds_total": "sm_active_seconds",
          "gpu_attributed_energy_joules_total": "energy_joules"}
SECONDS_FIELDS = ("allocated_seconds", "sm_active_seconds")
H100_HOUR = 7.0      # the test's price per GPU-hour of an H100: a slice of s costs s per hour
PROFILE_HOUR = 2.5   # and, in the second pricing, per instance-hour of a 1g.10gb


def truth_for(policy, scenario=SCENARIO):
    out = subprocess.run([BIN, "sim", "truth", "--scenario", scenario, "--from", "0", "--to", str(END),
                          "--format", "json", "--policy", policy], check=True, capture_output=True, text=True)
    import json
    return json.loads(out.stdout)


def load_scenario(scenario=SCENARIO):
    with open(scenario) as f:
        return yaml.safe_load(f)


class MigLedger(AgentTestCase):
    scenario = SCENARIO  # the scenario the agents read

    def start_agents(self, start):
        node = self.track(SimNode(self.scenario, start))
        agents = {}
        for policy in ("process", "scheduler"):
            path = node.config("ledger:\n  allocation: %s\n  checkpoint_interval: 1s\n"
                               '  idle_power_watts: {"NVIDIA H100 80GB HBM3": 70}\n' % policy, refresh="%gs" % REFRESH)
            mine = os.path.join(tempfile.mkdtemp(prefix="gpumeter-mig-%s-" % policy), "gpumeter.yaml")
            os.replace(path, mine)
            state = os.path.join(os.path.dirname(mine), "ledger.json")
            agents[policy] = self.track(Agent(scenario=self.scenario, env=sim_env(start),
                                              extra_args=node.agent_args(mine, state)))
        for agent in agents.values():
            agent.wait_ready()
        return agents

    def test_mig_instances_are_billed_as_allocated(self):
        self.began = time.time()
        start = ScenarioStart()
        agents = self.start_agents(start)
        targets = {policy: "127.0.0.1:%d" % a.port for policy, a in agents.items()}
        prom = self.track(Prometheus(list(targets.values())))
        epoch = self.epoch = start.begin()
        pids = {policy: a.process.proc.pid for policy, a in agents.items()}
        wait_until(lambda: time.time() > epoch + END + SETTLE, END + 30, interval=0.5, what="scenario end")
        at = time.time() - 1.5
        scenario = load_scenario(self.scenario)
        for policy, agent in agents.items():
            self.assertEqual((agent.process.proc.pid, agent.process.proc.poll()), (pids[policy], None))  # no restart
            self.assertEqual(agent.process.log().count("starting gpumeter"), 1)
            self.check_policy(prom, targets[policy], policy, truth_for(policy, self.scenario), scenario, at)
            self.check_agent(agent, prom, targets[policy], at)
        self.check_report(prom, targets["process"], at)

    def check_agent(self, agent, prom, instance, at):
        """What a variant of the node checks beside the billing: nothing here."""

    def check_policy(self, prom, instance, policy, truth, scenario, at):
        pod_to_owner = {}
        for j in scenario["jobs"]:
            pod = (j.get("kubernetes") or {}).get("pod") or j["env"]["HOSTNAME"]
            pod_to_owner[pod] = j["name"]
        if policy == "scheduler":
            for a in scenario["allocations"]:
                pod_to_owner[a["kubernetes"]["pod"]] = a["name"]
        instances = {i["mig_uuid"]: i for i in truth["mig"]["instances"]}
        ends = {j["name"]: j.get("end", END) for j in scenario["jobs"]}

        # The ledger's series, by MIG device and owner (or reserved project), in instance seconds.
        got = {}  # mig_uuid -> owner -> field -> value
        for family, field in FIELDS.items():
            rows = prom.query('%s{instance="%s",gpu="0"}' % (family, instance), at=at)
            self.assertTrue(rows, family)
            for r in rows:
                m = r["metric"]
                uuid = m.get("mig_uuid", "")
                owner = m.get("project") if m.get("project", "").startswith("__") else pod_to_owner[m["pod"]]
                value = float(r["value"][1])
                if uuid:
                    share = instances[uuid]["slices"] / SLICES
                    self.assertEqual(m["mig_profile"], instances[uuid]["profile"])
                    self.assertEqual(m["gpu_instance"], str(instances[uuid]["gpu_instance"]))
                    if field in SECONDS_FIELDS:
                        value /= share
                acc = got.setdefault(uuid, {}).setdefault(owner, {})
                acc[field] = acc.get(field, 0.0) + value
        self.assertEqual(set(got) - {""}, set(instances), "every MIG device billed, destroyed ones kept")

        def owner_edges(name):
            """Seconds an owner's edges may move: half an interval at a process's stop; under the
            scheduler policy, a kubelet refresh and a List call at each pod edge."""
            return (0.5 * INTERVAL * (1 if ends.get(name, END) < END else 0)
                    + (2 * (REFRESH + SOURCE_READ) if policy == "scheduler" else 0))

        layout_edges = {uuid: sum(1 for e in (i["start"], i["end"]) if 0 < e < END) for uuid, i in instances.items()}
        worst = []
        for uuid, inst in instances.items():
            mine = got[uuid]
            shared = len(inst["owners"]) > 1
            # Each owner of the instance.
            for o in inst["owners"]:
                name = o["owner"]
                self.assertIn(name, mine, "%s on %s: %r" % (name, inst["name"], sorted(mine)))
                edges = owner_edges(name)
                for field in FIELDS.values():
                    if field != "allocated_seconds" and shared:
                        continue  # busy time and the energy above idle: compared on the instance's total
                    want, measured = o[field], mine[name].get(field, 0.0)
                    rate = 1.0 if field == "allocated_seconds" else want / max(o["allocated_seconds"], 1e-9)
                    bound = TOLERANCE * want + edges * rate + 1e-6
                    worst.append((abs(measured - want) / max(want, 1e-9), policy, inst["name"], name, field))
                    self.assertLessEqual(abs(measured - want), bound, "%s: %s of %s on %s: ledger %.6g, truth %.6g"
                                         % (policy, field, name, inst["name"], measured, want))
            # The instance as a whole, whoever got it: its owners' seconds and energy (the agent ran
            # before and after the scenario's window: its __idle__ time is not compared), its busy time.
            edges = INTERVAL * layout_edges[uuid] + sum(owner_edges(o["owner"]) for o in inst["owners"])
            owners = [v for k, v in mine.items() if k != "__idle__"]
            for field, want, values in (
                    ("allocated_seconds", inst["allocated_seconds"], owners),
                    ("sm_active_seconds", inst["sm_active_seconds"], list(mine.values())),
                    ("energy_joules", inst["energy_joules"] - inst["idle_energy_joules"], owners)):
                total = sum(v.get(field, 0.0) for v in values)
                rate = want / max(inst["allocated_seconds"], 1e-9)
                bound = TOLERANCE * want + edges * rate + 1e-6
                self.assertLessEqual(abs(total - want), bound, "%s: %s of instance %s: ledger %.6g, truth %.6g"
                                     % (policy, field, inst["name"], total, want))
            if shared:
                # Both pods' busy time while alone, and the unattributed part while together.
                for o in inst["owners"]:
                    self.assertLessEqual(mine[o["owner"]].get("sm_active_seconds", 0.0),
                                         o["sm_active_seconds"] * (1 + TOLERANCE) + INTERVAL)
                self.assertGreater(mine.get("__unattributed__", {}).get("sm_active_seconds", 0.0), 0)
        print("%s: largest relative deviations %r" % (policy, sorted(worst, reverse=True)[:4]))

        # The GPU: owners' allocated GPU-seconds add up to the covered seconds (the free slices'
        # __idle__ included: none in this layout but for the rounds around the change).
        covered = prom.query('gpumeter_ledger_covered_seconds_total{instance="%s",gpu="0"}' % instance, at=at)
        held = prom.query('sum(gpu_allocated_seconds_total{instance="%s",gpu="0"})' % instance, at=at)
        self.assertAlmostEqual(float(held[0]["value"][1]), float(covered[0]["value"][1]), delta=1e-6)
        # The free slices: none in either layout, so from scenario time 5 s on (before 0 the GPU has
        # no instance yet) they get at most the collection around the change. The counter's first
        # scrape after 5 s is the reference: Prometheus starts after the agents, and on a loaded
        # machine its first scrape can come later than that (the layout changes at 45 s).
        free = 'gpu_allocated_seconds_total{instance="%s",gpu="0",mig_uuid="",project="__idle__"}' % instance
        since = prom.query("min_over_time(%s[35s])" % free, at=self.epoch + 40)
        self.assertTrue(since, "no free-slice series scraped between scenario time 5 s and 40 s")
        grown = float(prom.query(free, at=at)[0]["value"][1]) - float(since[0]["value"][1])
        self.assertLessEqual(grown, truth["mig"]["gpus"][0]["unallocated_slice_seconds"] / SLICES
                             + 2 * INTERVAL * 2 / SLICES + 1e-6)
        # No ledger counter ever went back, across the layout change.
        for family in FIELDS:
            resets = prom.query('max(resets(%s{instance="%s"}[3m]))' % (family, instance), at=at)
            self.assertEqual(float(resets[0]["value"][1]), 0.0, family)

    def check_report(self, prom, instance, at):
        """`gpumeter report --by namespace` on this history prices each slice by its share of the
        GPU's price, and a 1g.10gb by its profile's price per instance-hour where the pricing file
        sets one; each namespace's cost against its GPU-seconds from the same Prometheus."""
        work = tempfile.mkdtemp(prefix="gpumeter-mig-report-")
        share = os.path.join(work, "share.yaml")
        with open(share, "w") as f:
            f.write('currency: USD\ngpu_models:\n  "NVIDIA H100 80GB HBM3": [{gpu_hour: %g}]\n' % H100_HOUR)
        profile = os.path.join(work, "profile.yaml")
        with open(profile, "w") as f:
            f.write('currency: USD\ngpu_models:\n  "NVIDIA H100 80GB HBM3": [{gpu_hour: %g}]\n'
                    'mig_profiles:\n  "*": {1g.10gb: [{instance_hour: %g}]}\n' % (H100_HOUR, PROFILE_HOUR))
        start = self.began - 5
        # GPU-seconds per namespace and profile over the period, from the ledger's series.
        held = {}
        for r in prom.query('sum by (namespace, mig_profile) (max_over_time(gpu_allocated_seconds_total'
                            '{instance="%s",project!~"__.*"}[%ds]))' % (instance, int(at - start) + 1), at=at):
            key = (r["metric"].get("namespace", ""), r["metric"].get("mig_profile", ""))
            held[key] = float(r["value"][1])
        for pricing, name in ((share, "share"), (profile, "profile")):
            doc = report_json("--url", prom.base, "--from", str(start), "--to", str(at), "--by", "node,namespace",
                              "--pricing", pricing)
            rows = {r["key"]["namespace"]: r for r in doc["rows"] if r["key"]["node"] == instance}
            for ns in ("team-vision", "team-nlp", "team-speech", "team-ml", "team-ops"):
                want = 0.0
                for (n, prof), seconds in held.items():
                    if n != ns:
                        continue
                    if name == "profile" and prof == "1g.10gb":
                        want += seconds * 7 / 3600 * PROFILE_HOUR  # instance-hours x its price
                    else:
                        want += seconds / 3600 * H100_HOUR        # GPU-hours x the GPU's price
                self.assertIn(ns, rows, sorted(rows))
                got = rows[ns]["cost"]["allocation"]
                self.assertAlmostEqual(got, want, delta=1e-6 * want + 1e-9, msg="%s pricing, %s" % (name, ns))
            print("report --by namespace, %s pricing: %r" % (name, {ns: round(r["cost"]["allocation"], 6)
                                                                   for ns, r in rows.items()}))
