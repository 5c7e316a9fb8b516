"""Billing does not depend on --collect.interval: three agents read one simulated node at 1 s,
5 s and 30 s (dcgm-exporter's default), one Prometheus scrapes all three, and each agent's busy
and allocated seconds per owner must match the ground truth within 0.5 %, plus one driver sample
period per job edge (as test_ledger.py, harness.allowed_deviation), with under 0.5 % of the busy
time left unattributed. Scenario: scenarios/ledger-intervals.yaml (every owner
resolvable, edges off the whole second and off the sample grid). Both per-process record variants
are on the node: GPU 3's driver averages a record over the whole window, GPU 8's (the same two
pods, one of them bursty) over the process's active samples only, which each agent learns from a
lone bursty job before the pods share GPU 8 (the scenario's header)."""
import os
import tempfile
import time

from harness import (AgentTestCase, Agent, Prometheus, SCENARIOS, ScenarioStart, SimNode, allowed_deviation,
                     expected_owners, owner_edges, sim_env, sim_truth, wait_until)

SCENARIO = os.path.join(SCENARIOS, "ledger-intervals.yaml")
# The first job starts at 9.34 s. An agent charges nothing before its first reading that has
# driver samples, and the simulated GPUs have samples from scenario time 0 on (the scenario begins
# once every agent is ready): the 5 s and 30 s agents drain every 5 s, so that reading comes up to
# 5.2 s after time 0 (more on a loaded machine), and every job starts 4 s later than that.
END = 95.0  # the scenario's duration
LAST_EDGE = 87.23  # the last job's end
TOLERANCE = 5e-3  # 0.5 %
INTERVALS = ("1s", "5s", "30s")
CHECKED = {"gpu_allocated_seconds_total": "allocated_seconds", "gpu_busy_seconds_total": "busy_seconds"}
REPORTED = {"gpu_memory_byte_seconds_total": "memory_byte_seconds",
            "gpu_attributed_energy_joules_total": "energy_joules"}


def owners_of(prom, instance, at, metrics):
    out = {}
    for metric, field in metrics.items():
        for r in prom.query('%s{instance="%s"}' % (metric, instance), at=at):
            m = r["metric"]
            key = (m["gpu"], m["project"], m.get("user", ""), m.get("namespace", ""), m.get("pod", ""),
                   m.get("hpc_job", ""))
            acc = out.setdefault(key, {})
            acc[field] = acc.get(field, 0.0) + float(r["value"][1])
    return out


class CollectionInterval(AgentTestCase):
    def test_owner_totals_do_not_depend_on_the_interval(self):
        start = ScenarioStart()
        node = self.track(SimNode(SCENARIO, start))
        config = node.config("ledger:\n  allocation: process\n  checkpoint_interval: 2s\n"
                             '  idle_power_watts: {"NVIDIA H100 80GB HBM3": 70}\n')
        state_dir = tempfile.mkdtemp(prefix="gpumeter-intervals-")
        agents = {}
        started = time.time()
        for interval in INTERVALS:
            state = os.path.join(state_dir, "ledger-%s.json" % interval)
            agents[interval] = self.track(Agent(scenario=SCENARIO, interval=interval,
                                                env=sim_env(start),
                                                extra_args=node.agent_args(config, state)))
        prom = self.track(Prometheus(["127.0.0.1:%d" % a.port for a in agents.values()]))
        for a in agents.values():
            a.wait_ready()
        epoch = start.begin()
        # Until Prometheus holds, from every agent, a ledger whose cursor is past the last job's
        # end on every GPU: the agents drain the driver's buffers at least every 5 s, a checkpoint
        # (2 s) saves what they integrated, and the next published snapshot (once per collection
        # interval, so up to 30 s later) shows it. Each ledger began after the agents were
        # started, so a ledger that covered this long is past that end.
        covered = LAST_EDGE + (epoch - started) + 0.5

        def settled():
            rows = prom.query("min by (instance) (gpumeter_ledger_covered_seconds_total)")
            return len(rows) == len(agents) and all(float(r["value"][1]) >= covered for r in rows)
        wait_until(settled, END + 60, interval=1, what="every agent's ledger past the last job's end")
        time.sleep(1.5)  # one more scrape of each

        truth = sim_truth(SCENARIO, 0, END)
        want = expected_owners(truth)
        edges = owner_edges(truth)
        total_busy = sum(g["busy_seconds"] for g in truth["gpus"])
        at = time.time() - 1.5
        failures = []
        for interval, agent in agents.items():
            instance = "127.0.0.1:%d" % agent.port
            got = owners_of(prom, instance, at, dict(CHECKED, **REPORTED))
            worst = {}
            for key, fields in want.items():
                self.assertIn(key, got, "%s: owner %r missing; scraped: %r" % (interval, key, sorted(got)))
                for field, value in fields.items():
                    if value <= 0:
                        continue
                    dev = abs(got[key].get(field, 0.0) - value) / value
                    if dev > worst.get(field, (0, None))[0]:
                        worst[field] = (dev, key)
                    allowed = allowed_deviation(value, fields["allocated_seconds"], edges[key], TOLERANCE)
                    if field in CHECKED.values() and abs(got[key].get(field, 0.0) - value) > allowed:
                        failures.append("%s %s of %r: ledger %.6g, truth %.6g (%.3f %%)" % (
                            interval, field, key, got[key].get(field, 0.0), value, 100 * dev))
            unattributed = sum(v.get("busy_seconds", 0.0) for k, v in got.items() if k[1] == "__unattributed__")
            # Shown in the test log: the figures the docs quote.
            print("--collect.interval %s: largest deviation per counter: %s; unattributed busy %.4f %% of %.1f s"
                  % (interval, ", ".join("%s %.3g %% (GPU %s %s)" % (f, 100 * d, k[0], k[1])
                                         for f, (d, k) in sorted(worst.items())),
                     100 * unattributed / total_busy, total_busy))
            if unattributed > TOLERANCE * total_busy:
                failures.append("%s: %.4f s of %.1f s busy unattributed" % (interval, unattributed, total_busy))
            for key in got:
                if key[1] not in ("__idle__", "__unattributed__"):
                    self.assertIn(key, want, "%s: unexpected owner %r" % (interval, key))
        for f in failures:
            print("FAILED BOUND: " + f)
        self.assertEqual(failures, [])


if __name__ == "__main__":
    import unittest
    unittest.main()
