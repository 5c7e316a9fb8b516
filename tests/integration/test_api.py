"""The local JSON API (docs/api.md): /api/v1/gpus and /api/v1/gpus/<uuid> serve the same snapshot
as /metrics, with each GPU's readings and the owners of its processes (pods named by the
simulated kubelet); errors are JSON with the right status; the API sits behind the same basic
auth as /metrics."""
import base64
import crypt
import json
import os
import tempfile
import time
import urllib.request

from harness import (AgentTestCase, Agent, SCENARIOS, SimNode, http_get, parse_text, sample, wait_until)

SCENARIO = os.path.join(SCENARIOS, "dashboards.yaml")
LEAD = 3.0


class Api(AgentTestCase):
    def start(self, extra=()):
        epoch = time.time() + LEAD
        node = self.track(SimNode(SCENARIO, epoch))
        config = node.config("ledger:\n  checkpoint_interval: 1s\n")
        agent = self.track(Agent(scenario=SCENARIO, env={"GPUMETER_SIM_EPOCH": repr(epoch)}, interval="2s",
                                 extra_args=node.agent_args(config, "") + list(extra)))
        return epoch, agent

    def consistent(self, agent):
        """The API's answer and /metrics from one snapshot: the API is read before and after the
        scrape, and kept when both name the same snapshot."""
        for _ in range(20):
            _, _, before = http_get(agent.base + "/api/v1/gpus")
            _, _, metrics = http_get(agent.base + "/metrics")
            _, _, after = http_get(agent.base + "/api/v1/gpus")
            a, b = json.loads(before), json.loads(after)
            if a["snapshot_unix"] == b["snapshot_unix"]:
                return a, parse_text(metrics.decode())
            time.sleep(0.2)
        self.fail("no two API answers around a scrape named the same snapshot")

    def test_gpus_match_metrics_and_name_owners(self):
        epoch, agent = self.start()
        agent.wait_ready()
        wait_until(lambda: time.time() > epoch + 8, 30, what="jobs running with owners")
        status, headers, _ = http_get(agent.base + "/api/v1/gpus")
        self.assertEqual(status, 200)
        self.assertEqual(headers["content-type"], "application/json")
        self.assertEqual(headers["cache-control"], "no-store")
        doc, metrics = self.consistent(agent)
        self.assertEqual(doc["api_version"], "v1")
        self.assertGreaterEqual(doc["snapshot_age_seconds"], 0)
        self.assertEqual([g["index"] for g in doc["gpus"]], [0, 1, 2, 3])
        for g in doc["gpus"]:
            gpu = str(g["index"])
            info = [dict(l) for (n, l), _ in metrics.items() if n == "gpu_info" and ("gpu", gpu) in l][0]
            self.assertEqual((g["uuid"], g["model"], g["vendor"]), (info["uuid"], info["model"], info["vendor"]))
            self.assertTrue(g["up"])
            for key, family in (("utilization_ratio", "gpu_utilization_ratio"), ("power_watts", "gpu_power_watts")):
                self.assertEqual(g[key], sample(metrics, family, gpu=gpu, uuid=g["uuid"]), (gpu, key))
            self.assertEqual(g["memory"]["used_bytes"], sample(metrics, "gpu_memory_used_bytes", gpu=gpu, uuid=g["uuid"]))
            # Profiling is on by default and these H100s have GPM (docs/api.md, profiling_status).
            self.assertEqual(g["profiling_status"], "measured")
            self.assertEqual(g["profiling"]["sm_active_ratio"],
                             sample(metrics, "gpu_sm_active_ratio", gpu=gpu, uuid=g["uuid"]))
            self.assertEqual(g["temperature_celsius"]["gpu"],
                             sample(metrics, "gpu_temperature_celsius", gpu=gpu, uuid=g["uuid"], sensor="gpu"))
            for p in g["processes"]:
                self.assertEqual(p["memory_bytes"], sample(metrics, "gpu_process_memory_used_bytes", gpu=gpu,
                                                           uuid=g["uuid"], pid=str(p["pid"]), **p["owner"]))
        by_index = {g["index"]: g for g in doc["gpus"]}
        # GPU 0: the nlp training pod, named by the kubelet.
        self.assertEqual([p["pid"] for p in by_index[0]["processes"]], [51001])
        self.assertEqual(by_index[0]["owners"],
                         [{"project": "nlp", "user": "dana", "namespace": "team-nlp", "pod": "llm-train-worker-0",
                           "container": "trainer"}])
        # GPU 3 is time-sliced by two pods whose processes carry no HOSTNAME, so neither pod can be
        # picked from the kubelet's list (docs/kubelet.md): two owners, by project and user.
        self.assertEqual(sorted((o["project"], o["user"]) for o in by_index[3]["owners"]),
                         [("nlp", "dana"), ("vision", "bob")])

        # One GPU by UUID: the same object as in the list, from the same snapshot.
        uuid = by_index[2]["uuid"]
        for _ in range(20):
            _, _, listed = http_get(agent.base + "/api/v1/gpus")
            _, _, one = http_get(agent.base + "/api/v1/gpus/" + uuid)
            listed, one = json.loads(listed), json.loads(one)
            if listed["snapshot_unix"] == one["snapshot_unix"]:
                break
        self.assertEqual(one["gpu"], [g for g in listed["gpus"] if g["uuid"] == uuid][0])

        # Errors are JSON too.
        status, _, body = http_get(agent.base + "/api/v1/gpus/GPU-00000000-0000-0000-0000-000000000000")
        self.assertEqual(status, 404)
        self.assertIn("no GPU with UUID", json.loads(body)["error"])
        req = urllib.request.Request(agent.base + "/api/v1/gpus", data=b"{}", method="POST")
        try:
            urllib.request.urlopen(req, timeout=5)
            self.fail("POST was accepted")
        except urllib.error.HTTPError as e:
            self.assertEqual(e.code, 405)
            self.assertEqual(e.headers["Allow"], "GET, HEAD")

    def test_same_basic_auth_as_metrics(self):
        d = tempfile.mkdtemp(prefix="gpumeter-api-web-")
        hashed = crypt.crypt("s3cret", crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 10))
        with open(os.path.join(d, "web.yml"), "w") as f:
            f.write("basic_auth_users:\n  scheduler: '%s'\n" % hashed)
        _, agent = self.start(["--web.config.file", os.path.join(d, "web.yml")])
        good = {"Authorization": "Basic " + base64.b64encode(b"scheduler:s3cret").decode()}
        bad = {"Authorization": "Basic " + base64.b64encode(b"scheduler:wrong").decode()}
        wait_until(lambda: http_get(agent.base + "/api/v1/gpus", headers=good)[0] == 200, 30, what="API with auth")
        for path in ("/api/v1/gpus", "/metrics"):
            self.assertEqual(http_get(agent.base + path)[0], 401, path)
            self.assertEqual(http_get(agent.base + path, headers=bad)[0], 401, path)
            self.assertEqual(http_get(agent.base + path, headers=good)[0], 200, path)


if __name__ == "__main__":
    import unittest
    unittest.main()
