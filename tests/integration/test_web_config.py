"""--web.config.file: TLS and basic auth, checked with a real Prometheus scraping over https."""
import base64
import crypt
import os
import ssl
import subprocess
import tempfile
import urllib.error
import urllib.request

from harness import AgentTestCase, Agent, BIN, DEPLOY_SCENARIOS, Prometheus, wait_until

SCENARIO = os.path.join(DEPLOY_SCENARIOS, "h100-8x-three-teams.yaml")


def make_cert(d):
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-keyout", os.path.join(d, "server.key"), "-out", os.path.join(d, "server.crt"),
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)


def https_get(url, ca, user=None, password=None):
    ctx = ssl.create_default_context(cafile=ca)
    req = urllib.request.Request(url)
    if user:
        req.add_header("Authorization", "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode())
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


class WebConfig(AgentTestCase):
    def test_tls_and_basic_auth_with_prometheus(self):
        d = tempfile.mkdtemp(prefix="gpumeter-web-")
        make_cert(d)
        hashed = crypt.crypt("s3cret", crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 10))
        self.assertTrue(hashed.startswith("$2"), hashed)
        with open(os.path.join(d, "web.yml"), "w") as f:
            # Relative paths resolve against the config file's directory, as in exporter-toolkit.
            f.write("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
                    "basic_auth_users:\n  prometheus: '%s'\n" % hashed)
        # The file is also valid for Prometheus' own checker.
        r = subprocess.run(["promtool", "check", "web-config", os.path.join(d, "web.yml")], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

        agent = self.track(Agent(scenario=SCENARIO, extra_args=["--web.config.file", os.path.join(d, "web.yml")]))
        ca = os.path.join(d, "server.crt")
        base = "https://127.0.0.1:%d" % agent.port
        wait_until(lambda: https_get(base + "/-/healthy", ca, "prometheus", "s3cret")[0] == 200, 30, what="https up")
        self.assertEqual(https_get(base + "/metrics", ca)[0], 401)
        self.assertEqual(https_get(base + "/metrics", ca, "prometheus", "wrong")[0], 401)
        status, body = https_get(base + "/metrics", ca, "prometheus", "s3cret")
        self.assertEqual(status, 200)
        self.assertIn(b"gpu_up", body)

        prom = self.track(Prometheus(["127.0.0.1:%d" % agent.port], job_config=(
            "    scheme: https\n    tls_config: {ca_file: '%s'}\n"
            "    basic_auth: {username: prometheus, password: s3cret}\n" % ca)))
        wait_until(lambda: len(prom.query("gpu_up == 1")) == 8, 60, what="Prometheus scraping over https")
        self.assertEqual(prom.targets()[0]["health"], "up")

    def test_bad_web_config_is_rejected_with_its_location(self):
        d = tempfile.mkdtemp(prefix="gpumeter-web-")
        path = os.path.join(d, "web.yml")
        with open(path, "w") as f:
            f.write("basic_auth_users:\n  alice: not-a-hash\n")
        r = subprocess.run([BIN, "serve", "--web.config.file", path, "--nvml.library", "/nonexistent.so"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2)
        self.assertIn(path + ":2", r.stderr)
