"""What a GPU's users control reaches the agent's outputs intact and harmless
(docs/security.md, "Inputs a GPU's users control"): bytes that are not UTF-8 in an allow-listed
environment value, a process name, a cgroup name and an HPC job mapping file are replaced by
U+FFFD in /metrics, the JSON API and the state file alike, so the agent neither aborts at its
first checkpoint nor on GET /api/v1/gpus/<uuid>, and a restart resumes each such owner as the
same series. A mapping file that is a symbolic link (to a secret) is not read. The JSON API
lists every process, also those beyond the per-process series limit."""
import json
import os
import tempfile
import time

from harness import (AgentTestCase, Agent, BIN, DEPLOY_SCENARIOS, Process, http_get, parse_text, wait_until)

SCENARIO = os.path.join(DEPLOY_SCENARIOS, "h100-8x-three-teams.yaml")
# Scenario time of the static /proc tree: every job of the scenario's first half is running.
AT = 1200
R = "\ufffd"


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def set_comm(proc, pid, comm):
    """Rewrites the (comm) field of /proc/<pid>/stat, which the agent reads the name from."""
    path = os.path.join(proc, str(pid), "stat")
    with open(path, "rb") as f:
        stat = f.read()
    write(path, stat[:stat.index(b"(") + 1] + comm + stat[stat.rindex(b")"):])


class HostileValues(AgentTestCase):
    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp(prefix="gpumeter-hostile-")
        self.epoch = time.time() - AT
        self.env = {"GPUMETER_SIM_EPOCH": repr(self.epoch)}
        root = os.path.join(self.dir, "root")
        p = Process([BIN, "sim", "procfs", "--scenario", SCENARIO, "--out", root], env=self.env, workdir=self.dir,
                    name="sim-procfs")
        self.assertEqual(p.proc.wait(60), 0, p.log())
        p.stop()
        self.root, self.proc = root, os.path.join(root, "proc")
        # GPU 4: the project from an environment value; GPU 5: a Slurm job id from the
        # environment and a project from a user-delegated cgroup's name; GPU 6: a project from
        # the process name; GPU 7: a job from a mapping file with binary content.
        write(os.path.join(self.proc, "32010", "environ"), b"GPUMETER_PROJECT=vision\xff\xfeserving\0")
        write(os.path.join(self.proc, "33100", "environ"), b"SLURM_JOB_ID=48\xff213\0")
        write(os.path.join(self.proc, "33100", "cgroup"), b"0::/user.slice/bad\xfe.scope\n")
        write(os.path.join(self.proc, "34001", "environ"), b"")
        set_comm(self.proc, 34001, b"nb\xfe")
        self.mapping = os.path.join(self.dir, "jobs")
        os.mkdir(self.mapping)
        write(os.path.join(self.mapping, "7"), b"\x9b\x01job\n")
        # GPU 3's file is a link to a secret: whoever can write the directory must not read it.
        write(os.path.join(self.dir, "secret"), b"api_token=sk-live-123456\n")
        os.symlink(os.path.join(self.dir, "secret"), os.path.join(self.mapping, "3"))
        self.config = os.path.join(self.dir, "gpumeter.yaml")
        with open(self.config, "w") as f:
            f.write("attribution:\n  environment: [GPUMETER_PROJECT, SLURM_JOB_ID]\n  kubelet:\n    socket: off\n"
                    "  hpc_job_mapping_dir: %s\n"
                    "project:\n  default: other\n  rules:\n"
                    # RE2's . matches characters, \\C any byte: these values are not UTF-8.
                    "    - {source: env.GPUMETER_PROJECT}\n    - {source: comm, match: 'nb\\C*'}\n"
                    "    - {source: systemd_unit, match: 'bad\\C*'}\n"
                    "ledger:\n  checkpoint_interval: 1s\nprocesses:\n  max_series: 2\n" % self.mapping)
        self.state = os.path.join(self.dir, "ledger.json")

    def agent(self):
        agent = self.track(Agent(scenario=SCENARIO, env=self.env, extra_args=[
            "--path.procfs", self.proc, "--path.rootfs", self.root, "--config.file", self.config,
            "--ledger.state-file", self.state]))
        agent.wait_ready()
        return agent

    def allocated(self, agent):
        """{(gpu, project, hpc_job): value} of gpu_allocated_seconds_total."""
        out = {}
        for (name, labels), value in parse_text(agent.metrics()[1]).items():
            if name == "gpu_allocated_seconds_total":
                l = dict(labels)
                key = (l["gpu"], l["project"], l["hpc_job"])
                self.assertNotIn(key, out, "one owner served twice")
                out[key] = value
        return out

    def test_values_that_are_not_utf8_are_replaced_everywhere(self):
        expected = {("4", "vision%s%sserving" % (R, R), ""), ("5", "bad%s.scope" % R, "48%s213" % R),
                    ("6", "nb%s" % R, ""), ("7", "other", "%s\x01job" % R)}
        agent = self.agent()
        wait_until(lambda: expected <= set(self.allocated(agent)), 30, what="the owners' ledger series")

        # The JSON API: every answer parses, the same values; every process is listed although
        # only 2 are served as series.
        status, headers, body = http_get(agent.base + "/api/v1/gpus")
        self.assertEqual(status, 200)
        self.assertEqual(headers["x-content-type-options"], "nosniff")
        doc = json.loads(body.decode("utf-8"))
        by_index = {g["index"]: g for g in doc["gpus"]}
        self.assertEqual(by_index[4]["owners"][0]["project"], "vision%s%sserving" % (R, R))
        self.assertEqual(by_index[5]["owners"][0]["hpc_job"], "48%s213" % R)
        self.assertEqual(by_index[6]["owners"][0]["project"], "nb%s" % R)
        listed = sorted(p["pid"] for g in doc["gpus"] for p in g["processes"])
        self.assertEqual(listed, [31001, 31002, 31003, 31004, 32010, 33100, 34001])
        series = [l for (n, l), _ in parse_text(agent.metrics()[1]).items() if n == "gpu_process_memory_used_bytes"]
        self.assertEqual(len(series), 2)
        status, _, one = http_get(agent.base + "/api/v1/gpus/" + by_index[4]["uuid"])
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(one.decode("utf-8"))["gpu"]["owners"], by_index[4]["owners"])
        status, headers, missing = http_get(agent.base + "/api/v1/gpus/")
        self.assertEqual((status, headers["content-type"]), (404, "application/json"))
        self.assertIn("no GPU with UUID", json.loads(missing)["error"])

        # The link was not followed: the secret is nowhere.
        self.assertNotIn("sk-live", agent.metrics()[1])
        self.assertIn("HPC job mapping files skipped", agent.process.log())

        # The state file is UTF-8 JSON with the same values, and a restart resumes each owner
        # as the one series it was.
        before = self.allocated(agent)
        self.assertEqual(agent.stop(), 0, agent.process.log())
        with open(self.state, "rb") as f:
            saved = f.read()
        self.assertNotIn(b"sk-live", saved)
        state = json.loads(saved.decode("utf-8"))
        owners = {(g["index"], o["owner"]["project"], o["owner"]["hpc_job"])
                  for g in state["gpus"].values() for o in g["ledger"]["owners"]}
        self.assertLessEqual({(int(g), p, j) for g, p, j in expected}, owners)
        again = self.agent()
        self.assertIn("ledger state loaded", again.process.log())
        wait_until(lambda: expected <= set(self.allocated(again)), 30, what="the owners' series after a restart")
        now = self.allocated(again)
        for key in expected:
            self.assertGreaterEqual(now[key], before[key], key)
        self.assertNotIn("terminate", again.process.log())


if __name__ == "__main__":
    import unittest
    unittest.main()
