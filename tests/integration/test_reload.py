"""Reloading the configuration without a restart (docs/configuration.md, "Reloading"): SIGHUP,
POST /-/reload behind --web.enable-lifecycle, and the periodic check that picks up a file a
ConfigMap volume replaces through its "..data" symlink. A changed project rule names the
processes by the new rule; a broken file is refused with its reason, the old rules stay in force
and gpumeter_config_last_reload_successful says 0 until a good file is loaded; a web config
loaded by a reload turns basic auth on."""
import base64
import crypt
import os
import signal
import tempfile
import time
import urllib.request

from harness import (AgentTestCase, Agent, SCENARIOS, SimNode, http_get, parse_text, sample, wait_until)

SCENARIO = os.path.join(SCENARIOS, "dashboards.yaml")
LEAD = 3.0
# Process 51001 on GPU 0 is the nlp training pod: GPUMETER_PROJECT=nlp in its environment.
PID = "51001"


def config_text(node, template):
    """An agent config for `node` whose one project rule expands `template` over GPUMETER_PROJECT."""
    return ("attribution:\n  environment: [GPUMETER_PROJECT, SLURM_JOB_ACCOUNT]\n"
            "  kubelet:\n    socket: %s\n    refresh_interval: 1s\n"
            "project:\n  default: unknown\n  rules:\n    - {source: env.GPUMETER_PROJECT, project: '%s'}\n"
            % (node.socket or "off", template))


def post(url, headers=None):
    req = urllib.request.Request(url, data=b"", method="POST", headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


class Reload(AgentTestCase):
    def start(self, config_path, extra=()):
        epoch = time.time() + LEAD
        node = self.track(SimNode(SCENARIO, epoch))
        with open(config_path, "w") as f:
            f.write(config_text(node, "$0"))
        agent = self.track(Agent(scenario=SCENARIO, env={"GPUMETER_SIM_EPOCH": repr(epoch)}, interval="1s",
                                 extra_args=node.agent_args(config_path, "") + list(extra)))
        agent.wait_ready()
        return node, agent

    def metrics(self, agent, headers=None):
        return parse_text(agent.metrics(headers)[1])

    def project_of(self, agent, headers=None):
        """The project label of process 51001's memory series, or None while it has none."""
        for (name, labels), _ in self.metrics(agent, headers).items():
            l = dict(labels)
            if name == "gpu_process_memory_used_bytes" and l.get("pid") == PID:
                return l["project"]
        return None

    def reload_state(self, agent):
        m = self.metrics(agent)
        return (sample(m, "gpumeter_config_last_reload_successful"),
                sample(m, "gpumeter_config_last_reload_success_timestamp_seconds"))

    def test_sighup_applies_rules_and_refuses_a_broken_file(self):
        d = tempfile.mkdtemp(prefix="gpumeter-reload-")
        path = os.path.join(d, "gpumeter.yaml")
        node, agent = self.start(path)
        wait_until(lambda: self.project_of(agent) == "nlp", 30, what="process 51001 named nlp")
        ok, started = self.reload_state(agent)
        self.assertEqual(ok, 1)
        self.assertGreater(started, time.time() - 120)

        # A new rule: the process is named by it, without a restart.
        with open(path, "w") as f:
            f.write(config_text(node, "team-$0"))
        agent.process.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: self.project_of(agent) == "team-nlp", 20, what="process 51001 renamed by the new rule")
        self.assertIn("configuration reloaded", agent.process.log())

        # A broken rule (a group the regex does not have): refused, the rule in force stays.
        with open(path, "w") as f:
            f.write(config_text(node, "$1"))
        agent.process.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: self.reload_state(agent)[0] == 0, 20, what="last reload reported failed")
        log = agent.process.log()
        self.assertIn("reloading the configuration failed", log)
        self.assertIn("project.rules[0].project", log)
        self.assertTrue(agent.process.alive())
        time.sleep(2)
        self.assertEqual(self.project_of(agent), "team-nlp")
        _, before = self.reload_state(agent)

        # Fixed: 1 again, with a newer timestamp, and the fixed rule in force.
        time.sleep(1.1)
        with open(path, "w") as f:
            f.write(config_text(node, "fixed-$0"))
        agent.process.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: self.reload_state(agent)[0] == 1, 20, what="last reload reported successful")
        self.assertGreater(self.reload_state(agent)[1], before)
        wait_until(lambda: self.project_of(agent) == "fixed-nlp", 20, what="process 51001 named by the fixed rule")

    def test_lifecycle_endpoint_needs_the_flag(self):
        d = tempfile.mkdtemp(prefix="gpumeter-reload-")
        _, agent = self.start(os.path.join(d, "gpumeter.yaml"))
        status, body = post(agent.base + "/-/reload")
        self.assertEqual((status, body), (403, "Lifecycle API is not enabled.\n"))
        self.assertEqual(http_get(agent.base + "/-/reload")[0], 405)

    def test_reload_endpoint_turns_basic_auth_on(self):
        d = tempfile.mkdtemp(prefix="gpumeter-reload-")
        web = os.path.join(d, "web.yml")
        with open(web, "w") as f:
            f.write("http_server_config:\n  headers:\n    X-Frame-Options: deny\n")
        _, agent = self.start(os.path.join(d, "gpumeter.yaml"),
                              ["--web.enable-lifecycle", "--web.config.file", web])
        self.assertEqual(http_get(agent.base + "/metrics")[0], 200)
        self.assertEqual(post(agent.base + "/-/reload"), (200, ""))

        hashed = crypt.crypt("s3cret", crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 10))
        with open(web, "w") as f:
            f.write("basic_auth_users:\n  ops: '%s'\nhttp_server_config:\n  headers:\n    X-Frame-Options: sameorigin\n"
                    % hashed)
        self.assertEqual(post(agent.base + "/-/reload"), (200, ""))
        status, headers, _ = http_get(agent.base + "/metrics")
        self.assertEqual(status, 401)
        self.assertEqual(headers["x-frame-options"], "sameorigin")
        auth = {"Authorization": "Basic " + base64.b64encode(b"ops:s3cret").decode()}
        self.assertEqual(http_get(agent.base + "/metrics", headers=auth)[0], 200)

        # A broken web config: 500 with the reason, and the one in force stays.
        with open(web, "w") as f:
            f.write("basic_auth_users:\n  ops: not-a-bcrypt-hash\n")
        status, body = post(agent.base + "/-/reload", auth)
        self.assertEqual(status, 500)
        self.assertIn("web.yml", body)
        self.assertEqual(http_get(agent.base + "/metrics")[0], 401)
        # Served from the next snapshot on.
        wait_until(lambda: sample(parse_text(agent.metrics(auth)[1]), "gpumeter_config_last_reload_successful") == 0,
                   20, what="last reload reported failed")

    def test_a_reload_fails_closed_and_never_hangs(self):
        """What an unlucky operator (or a ConfigMap mounted wrong) puts in a file's place: a
        directory, an emptied or half-written web config, a FIFO, /dev/zero. Each reload is
        refused with the reason, basic auth stays on, and SIGTERM still stops the agent with a FIFO
        in place. The compat fields not served are logged once, not at every reload."""
        d = tempfile.mkdtemp(prefix="gpumeter-reload-")
        web = os.path.join(d, "web.yml")
        hashed = crypt.crypt("s3cret", crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 10))
        good_web = "basic_auth_users:\n  ops: '%s'\n" % hashed
        with open(web, "w") as f:
            f.write("http_server_config:\n  http2: false\n")  # /-/ready without credentials
        path = os.path.join(d, "gpumeter.yaml")
        # A counters file with a field gpumeter does not read, named as not served.
        counters = os.path.join(d, "counters.csv")
        with open(counters, "w") as f:
            f.write("DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).\n"
                    "DCGM_FI_PROF_PIPE_INT_ACTIVE, gauge, Ratio of cycles the integer pipe is active.\n")
        _, agent = self.start(path, ["--web.enable-lifecycle", "--web.config.file", web,
                                     "--config.reload-interval", "1s", "--compat", "dcgm-exporter",
                                     "--compat.collectors", counters])
        auth = {"Authorization": "Basic " + base64.b64encode(b"ops:s3cret").decode()}
        with open(web, "w") as f:
            f.write(good_web)
        self.assertEqual(post(agent.base + "/-/reload"), (200, ""))

        def refused(reason):
            status, body = post(agent.base + "/-/reload", auth)
            self.assertEqual(status, 500, body)
            self.assertIn(reason, body)
            self.assertEqual(http_get(agent.base + "/metrics")[0], 401)
            self.assertTrue(agent.process.alive())

        # The web config swapped for a directory, emptied, cut short: basic auth stays on.
        os.remove(web)
        os.mkdir(web)
        time.sleep(2.5)  # two watch intervals: the watch tried it too
        refused("it is a directory, not a file")
        os.rmdir(web)
        for text in ("", "# nothing yet\n", "basic_auth_users:\n  "):
            with open(web, "w") as f:
                f.write(text)
            refused("would turn basic auth off")
        os.symlink("/dev/null", web + ".tmp")
        os.rename(web + ".tmp", web)
        refused("it is not a regular file")
        os.remove(web)
        with open(web, "w") as f:
            f.write(good_web)
        self.assertEqual(post(agent.base + "/-/reload", auth), (200, ""))

        # The agent config swapped for /dev/zero and for a FIFO: refused at once, not read.
        os.remove(path)
        os.symlink("/dev/zero", path)
        refused("cannot read the config file: it is not a regular file")
        os.remove(path)
        os.mkfifo(path)
        refused("cannot read the config file: it is not a regular file")
        time.sleep(2.5)  # the watch meets the FIFO too
        wait_until(lambda: sample(parse_text(agent.metrics(auth)[1]), "gpumeter_config_last_reload_successful") == 0,
                   20, what="last reload reported failed")
        self.assertEqual(agent.stop(), 0, "SIGTERM with a FIFO in the config's place")
        log = agent.process.log()
        self.assertIn("ledger", log)
        self.assertEqual(log.count("dcgm-exporter fields not served"), 1, log)

    def test_configmap_symlink_swap_is_picked_up(self):
        # The layout of a ConfigMap volume: gpumeter.yaml -> ..data/gpumeter.yaml, ..data -> ..<ts>.
        d = tempfile.mkdtemp(prefix="gpumeter-reload-")
        first, second = os.path.join(d, "..2026_01"), os.path.join(d, "..2026_02")
        os.mkdir(first)
        os.mkdir(second)
        os.symlink("..2026_01", os.path.join(d, "..data"))
        path = os.path.join(d, "gpumeter.yaml")
        os.symlink(os.path.join("..data", "gpumeter.yaml"), path)
        # Written through the symlinks into ..2026_01; the agent reads it through them too.
        node, agent = self.start(path, ["--config.reload-interval", "1s"])
        wait_until(lambda: self.project_of(agent) == "nlp", 30, what="process 51001 named nlp")

        with open(os.path.join(second, "gpumeter.yaml"), "w") as f:
            f.write(config_text(node, "cm-$0"))
        tmp = os.path.join(d, "..data_tmp")
        os.symlink("..2026_02", tmp)
        os.rename(tmp, os.path.join(d, "..data"))  # atomic, as the kubelet does it
        wait_until(lambda: self.project_of(agent) == "cm-nlp", 20, what="process 51001 named by the swapped file")
        self.assertIn("trigger=\"file change\"", agent.process.log())


if __name__ == "__main__":
    import unittest
    unittest.main()
