"""A real Prometheus scrapes the agent running on the simulated 8x H100 node, and its queries
return the scenario's values, computed independently by `gpumeter sim truth`."""
import os
import time

from harness import AgentTestCase, Agent, DEPLOY_SCENARIOS, Prometheus, sim_truth, wait_until

SCENARIO = os.path.join(DEPLOY_SCENARIOS, "h100-8x-three-teams.yaml")
START_OFFSET = 120  # play the scenario from t=120 s, where every team's jobs are running


def by_gpu(result):
    return {r["metric"]["gpu"]: float(r["value"][1]) for r in result}


class PrometheusScrape(AgentTestCase):
    def test_queries_return_the_scenario_values(self):
        epoch = time.time() - START_OFFSET
        agent = self.track(Agent(scenario=SCENARIO, env={"GPUMETER_SIM_EPOCH": repr(epoch)}))
        agent.wait_ready()
        prom = self.track(Prometheus(["127.0.0.1:%d" % agent.port]))
        wait_until(lambda: len(prom.query("gpu_up == 1")) == 8, 60, what="8 GPUs up in Prometheus")
        target = prom.targets()[0]
        self.assertEqual(target["health"], "up", target)
        self.assertEqual(target["lastError"], "")
        # Let ten more scrapes land so that rate() has a window to work with.
        time.sleep(11)
        now = time.time()
        t = now - epoch

        # GPUs whose load was constant over the last 12 scenario seconds: their instantaneous values
        # are exactly the truth's window averages.
        per_second = [sim_truth(SCENARIO, int(t) - k - 1, int(t) - k) for k in range(12)]
        constant = []
        for g in per_second[0]["gpus"]:
            idx = g["gpu"]
            series = [(w["gpus"][idx]["busy_seconds"], w["gpus"][idx]["energy_joules"],
                       w["gpus"][idx]["memory_byte_seconds"]) for w in per_second]
            if len(set(series)) == 1:
                constant.append((str(idx), series[0]))
        self.assertGreaterEqual(len(constant), 4, "the scenario has a constant training job on 4 GPUs")

        util = by_gpu(prom.query("gpu_utilization_ratio", at=now))
        power = by_gpu(prom.query("gpu_power_watts", at=now))
        mem = by_gpu(prom.query("gpu_memory_used_bytes", at=now))
        rate = by_gpu(prom.query("rate(gpu_energy_joules_total[8s])", at=now))
        for gpu, (busy, joules, byte_seconds) in constant:
            self.assertAlmostEqual(util[gpu], busy, places=6, msg="gpu %s utilization" % gpu)
            self.assertAlmostEqual(power[gpu], joules, places=3, msg="gpu %s power" % gpu)
            self.assertEqual(mem[gpu], byte_seconds, "gpu %s memory used" % gpu)
            # Energy is read when the GPU is sampled and stored when it is scraped; the two differ
            # by under a second, which bounds the error of the slope over 8 s.
            self.assertLess(abs(rate[gpu] - joules) / joules, 0.05, "gpu %s energy rate %s vs %s" %
                            (gpu, rate[gpu], joules))

        total = by_gpu(prom.query("gpu_memory_total_bytes", at=now))
        self.assertEqual(sorted(total), [str(i) for i in range(8)])
        self.assertTrue(all(v == 81559 * 1024 * 1024 for v in total.values()))
        info = prom.query("gpu_info", at=now)
        self.assertEqual(len(info), 8)
        self.assertTrue(all(r["metric"]["model"] == "NVIDIA H100 80GB HBM3" for r in info))
        self.assertEqual(len(prom.query("gpumeter_snapshot_age_seconds < 5", at=now)), 1)
