"""The chat and on-call receivers in deploy/alertmanager/receivers (Discord, Slack, WeCom, e-mail):
with-receivers.sh puts each file's receivers into the shipped alertmanager.yml, keeping its routes
and inhibitions; `amtool check-config` passes on the result (and loads the templates); and a real
Alertmanager 0.25 delivers alerts shaped like gpumeter's (labels and annotations taken from the
shipped rules) to a fake of each service on loopback, speaking its protocol as Alertmanager uses
it: firing, to the receiver the alert's severity and category call for, with the summary, the GPU,
the node and the owner in the text, then resolved.

What the tests change in the shipped files, and only that:
* the base config: group_wait/group_interval are 1 s in every route (as test_alertmanager does);
* the receivers file: the service's address (webhook URLs, the WeCom API URL, the SMTP relay) and
  the secrets, now on loopback and in temporary files, the templates' path (absolute, since the
  config is written elsewhere), and for e-mail require_tls (the fake relay has no STARTTLS)."""
import email
import email.policy
import html
import http.server
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.parse

import yaml
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult

from harness import SOURCE_DIR, AgentTestCase, Alertmanager, free_port, wait_until

AM_DIR = os.path.join(SOURCE_DIR, "deploy", "alertmanager")
AM_CONFIG = os.path.join(AM_DIR, "alertmanager.yml")
SCRIPT = os.path.join(AM_DIR, "with-receivers.sh")
TEMPLATES = os.path.join(AM_DIR, "templates")
ALERTS = os.path.join(SOURCE_DIR, "deploy", "prometheus", "gpumeter-alerts.yml")
CHANNELS = {"discord": "discord_configs", "slack": "slack_configs", "wechat": "wechat_configs",
            "email": "email_configs"}
RECEIVERS = ["gpu-pager", "gpu-chat", "gpu-info", "finance-budget"]
CLUSTER = "it-cluster"


def receivers_file(channel):
    return os.path.join(AM_DIR, "receivers", channel + ".yml")


def with_receivers(*args):
    return subprocess.run(["sh", SCRIPT, *args], capture_output=True, text=True, timeout=30)


def amtool_check(text, template_edit=None):
    """amtool check-config on `text` written as Debian's /etc/prometheus would hold it: the config,
    and the folder alertmanager_templates beside it (gpumeter.tmpl passed through template_edit if
    given)."""
    with tempfile.TemporaryDirectory(prefix="gpumeter-amcheck-") as d:
        shutil.copytree(TEMPLATES, os.path.join(d, "alertmanager_templates"))
        if template_edit:
            tmpl = os.path.join(d, "alertmanager_templates", "gpumeter.tmpl")
            with open(tmpl) as f:
                edited = template_edit(f.read())
            with open(tmpl, "w") as f:
                f.write(edited)
        path = os.path.join(d, "alertmanager.yml")
        with open(path, "w") as f:
            f.write(text)
        return subprocess.run(["amtool", "check-config", path], capture_output=True, text=True, timeout=60)


def remove_after(test, *dirs):
    for d in dirs:
        test.addCleanup(shutil.rmtree, d, True)


class Config(unittest.TestCase):
    def test_each_channel_passes_amtool_with_the_shipped_routes(self):
        with open(AM_CONFIG) as f:
            shipped = yaml.safe_load(f)
        for channel, key in CHANNELS.items():
            with self.subTest(channel=channel):
                r = with_receivers(receivers_file(channel))
                self.assertEqual(r.returncode, 0, r.stderr)
                check = amtool_check(r.stdout)
                self.assertEqual(check.returncode, 0, check.stdout + check.stderr)
                for line in ("SUCCESS", "3 inhibit rules", "4 receivers", "1 templates"):
                    self.assertIn(line, check.stdout)
                doc = yaml.safe_load(r.stdout)
                # One routing tree: the base's route, inhibitions and globals, unchanged.
                for part in ("global", "route", "inhibit_rules"):
                    self.assertEqual(doc[part], shipped[part], part)
                self.assertEqual(doc["templates"], ["alertmanager_templates/gpumeter.tmpl"])
                self.assertEqual([x["name"] for x in doc["receivers"]], RECEIVERS)
                for x in doc["receivers"]:
                    self.assertEqual(set(x), {"name", key}, x["name"])
                    self.assertEqual(len(x[key]), 1)
                    # Resolved messages everywhere but the quiet info channel, as in the base.
                    self.assertEqual(x[key][0]["send_resolved"], x["name"] != "gpu-info", x["name"])

    def test_secrets_come_from_files_where_alertmanager_025_has_them(self):
        for channel, key in CHANNELS.items():
            with open(receivers_file(channel)) as f:
                configs = [c for x in yaml.safe_load(f)["receivers"] for c in x[key]]
            with self.subTest(channel=channel):
                for c in configs:
                    if channel == "slack":
                        self.assertTrue(c["api_url_file"].startswith("/etc/prometheus/alertmanager_secrets/"))
                        self.assertNotIn("api_url", c)
                    elif channel == "email":
                        self.assertTrue(c["auth_password_file"].startswith("/etc/prometheus/alertmanager_secrets/"))
                        self.assertNotIn("auth_password", c)
                    elif channel == "discord":  # no webhook_url_file before 0.27
                        self.assertIn("REPLACE_WITH_", c["webhook_url"])
                    else:  # no api_secret_file in 0.25
                        self.assertIn("REPLACE_WITH_", c["api_secret"])
                r = with_receivers(receivers_file(channel))
                self.assertEqual("placeholder" in r.stderr, channel in ("discord", "wechat"), r.stderr)

    def test_amtool_loads_the_templates(self):
        # The check above means something for the templates: a copy with an unclosed action fails.
        r = with_receivers(receivers_file("slack"))
        check = amtool_check(r.stdout, lambda t: t.replace("{{ end }}", "{{ end ", 1))
        self.assertNotEqual(check.returncode, 0, check.stdout)
        self.assertIn("gpumeter.tmpl", check.stdout + check.stderr)

    def test_the_script_refuses_what_it_cannot_merge(self):
        with tempfile.TemporaryDirectory() as d:
            bad = os.path.join(d, "bad.yml")
            with open(bad, "w") as f:
                f.write("route:\n  receiver: x\nreceivers:\n  - name: x\n")
            r = with_receivers(bad)
            self.assertEqual(r.returncode, 1)
            self.assertIn("only receivers: and templates:", r.stderr)
            base = os.path.join(d, "base.yml")
            with open(AM_CONFIG) as f:
                text = f.read()
            with open(base, "w") as f:  # receivers: no longer last: cutting there would lose a section
                f.write(text + "\ntime_intervals: []\n")
            r = with_receivers(receivers_file("slack"), base)
            self.assertEqual(r.returncode, 1)
            self.assertIn("its last", r.stderr)
            self.assertEqual(with_receivers().returncode, 2)


# --- alerts shaped like gpumeter's -----------------------------------------------------------------

def render(text, labels, value):
    """Prometheus' expansion of a rule's annotation, for the subset the shipped rules use:
    {{ $labels.x }}, {{ $value | ... }} and {{ if $labels.x }}..{{ else }}..{{ end }} (nested)."""
    text = re.sub(r"{{ \$labels\.(\w+) }}", lambda m: labels.get(m.group(1), ""), text)
    text = re.sub(r"{{ \$value[^}]*}}", value, text)
    cond = re.compile(r"{{ if \$labels\.(\w+) }}((?:(?!{{ if |{{ end }}).)*?)(?:{{ else }}((?:(?!{{ if |{{ end }}).)*?))?{{ end }}")
    while True:
        new = cond.sub(lambda m: m.group(2) if labels.get(m.group(1)) else (m.group(3) or ""), text)
        if new == text:
            break
        text = new
    if "{{" in text:
        raise AssertionError("cannot render %r" % text)
    return text


def gpumeter_alert(name, value, **series):
    """The alert the shipped rule `name` makes for a series with these labels."""
    with open(ALERTS) as f:
        rule = [r for g in yaml.safe_load(f)["groups"] for r in g["rules"] if r.get("alert") == name][0]
    labels = dict(series, **rule["labels"], alertname=name, cluster=CLUSTER)
    return {"labels": labels, "annotations": {k: render(v, labels, value) for k, v in rule["annotations"].items()}}


NODE_A, NODE_B = "node-a:9400", "node-b:9400"
# One alert per receiver: (alert, receiver it must reach, GPU text, owner text or None).
SENT = [
    (gpumeter_alert("GpuLost", "0", job="gpumeter", instance=NODE_A, gpu="1", uuid="GPU-1111"),
     "gpu-pager", "GPU 1 (GPU-1111) on node-a:9400", None),
    (gpumeter_alert("GpuMemoryUsageHigh", "91.2%", job="gpumeter", instance=NODE_B, gpu="0", uuid="GPU-2222"),
     "gpu-chat", "GPU 0 (GPU-2222) on node-b:9400", None),
    (gpumeter_alert("GpuPowerCapped", "100%", job="gpumeter", instance=NODE_B, gpu="3", uuid="GPU-3333"),
     "gpu-info", "GPU 3 (GPU-3333) on node-b:9400", None),
    (gpumeter_alert("GpuAllocatedUnderused", "12.5%", job="gpumeter", instance=NODE_A, gpu="2", uuid="GPU-4444",
                    project="vision", user="alice", namespace="ml", pod="train-0", hpc_job="4242"),
     "finance-budget", "GPU 2 (GPU-4444) on node-a:9400", "Owner: project vision, user alice, pod ml/train-0, job 4242"),
]


def check_message(test, text, alert, where, owner, status):
    """What every channel's message about one alert must say."""
    a = alert["labels"]
    test.assertIn(a["alertname"], text)
    test.assertIn(alert["annotations"]["summary"], text)
    test.assertIn(where, text)
    if owner:
        test.assertIn(owner, text)
    test.assertIn("[%s" % status.upper(), text)
    if status == "firing":
        test.assertIn("Runbook: " + alert["annotations"]["runbook"], text)


# --- fakes of the services ---------------------------------------------------------------------------

class FakeService:
    """An HTTP server in a thread of the test that records every request (method, path, query,
    JSON body) and answers with respond(method, path, query, doc) -> (status, JSON or None)."""

    def __init__(self, respond):
        self.dir = tempfile.mkdtemp(prefix="gpumeter-fake-")
        self.log_path = os.path.join(self.dir, "requests.log")
        open(self.log_path, "w").close()
        self.requests = []
        self._lock = threading.Lock()
        service = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def handle_any(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                url = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(url.query))
                doc = json.loads(body) if body else None
                with service._lock:
                    service.requests.append((self.command, url.path, query, doc))
                    status, answer = respond(self.command, url.path, query, doc)
                    with open(service.log_path, "a") as f:
                        f.write("%s %s %s -> %d\n" % (self.command, self.path, body.decode()[:2000], status))
                out = json.dumps(answer).encode() if answer is not None else b""
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)
            do_GET = do_POST = handle_any

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self._stopped = False

    def posts(self, path_prefix=""):
        with self._lock:
            return [(p, q, d) for (m, p, q, d) in self.requests if m == "POST" and p.startswith(path_prefix)]

    def log(self):
        with open(self.log_path) as f:
            return f.read()

    def stop(self):
        if not self._stopped:
            self._stopped = True
            self.server.shutdown()
            self.server.server_close()
        return 0


class FakeSmtp:
    """aiosmtpd on loopback, with AUTH over the plain connection (loopback only), recording every
    message it accepts."""

    def __init__(self, username, password):
        self.dir = tempfile.mkdtemp(prefix="gpumeter-smtp-")
        self.log_path = os.path.join(self.dir, "smtp.log")
        open(self.log_path, "w").close()
        self.messages = []  # (envelope recipients, login, email.message.EmailMessage)
        self.logins = []
        smtp = self

        class Handler:
            async def handle_DATA(self, server, session, envelope):
                msg = email.message_from_bytes(envelope.original_content, policy=email.policy.default)
                smtp.messages.append((list(envelope.rcpt_tos), session.auth_data, msg))
                with open(smtp.log_path, "a") as f:
                    f.write("%s -> %s: %s\n" % (envelope.mail_from, envelope.rcpt_tos, msg["Subject"]))
                return "250 OK"

        def authenticate(server, session, envelope, mechanism, auth_data):
            ok = (auth_data.login, auth_data.password) == (username.encode(), password.encode())
            smtp.logins.append((mechanism, auth_data.login.decode(), ok))
            return AuthResult(success=ok, auth_data=auth_data.login.decode() if ok else None)

        self.port = free_port()
        self.controller = Controller(Handler(), hostname="127.0.0.1", port=self.port, authenticator=authenticate,
                                     auth_require_tls=False, auth_exclude_mechanism=["LOGIN"])
        self.controller.start()
        self._stopped = False

    def log(self):
        with open(self.log_path) as f:
            return f.read()

    def stop(self):
        if not self._stopped:
            self._stopped = True
            self.controller.stop()
        return 0


# --- delivery through a real Alertmanager ------------------------------------------------------------

def iso(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % int(t % 1 * 1000)


def short_base(folder):
    """The shipped alertmanager.yml with group_wait/group_interval 1 s in every route."""
    with open(AM_CONFIG) as f:
        cfg = yaml.safe_load(f)

    def shorten(route, root):
        for key in ("group_wait", "group_interval"):
            if root or key in route:
                route[key] = "1s"
        for child in route.get("routes", []):
            shorten(child, False)
    shorten(cfg["route"], True)
    path = os.path.join(folder, "alertmanager.yml")
    with open(path, "w") as f:
        yaml.safe_dump(cfg, f, sort_keys=False)
    return path


class Delivery(AgentTestCase):
    def start_alertmanager(self, channel, substitutions):
        """A real Alertmanager with the shipped routes and the channel's receivers file, each
        (regex, replacement) of `substitutions` applied to that file (every one must match)."""
        folder = tempfile.mkdtemp(prefix="gpumeter-receivers-")
        remove_after(self, folder)
        with open(receivers_file(channel)) as f:
            text = f.read()
        substitutions = [(r"- alertmanager_templates/gpumeter\.tmpl", "- " + os.path.join(TEMPLATES, "gpumeter.tmpl"))] + substitutions
        for old, new in substitutions:
            text, n = re.subn(old, new, text)
            self.assertGreater(n, 0, "%s matches nothing in %s.yml" % (old, channel))
        config_lines = "\n".join(x for x in text.splitlines() if not x.lstrip().startswith("#"))
        for left in ("REPLACE_WITH_", "/etc/prometheus", "example.com:"):
            self.assertNotIn(left, config_lines)
        path = os.path.join(folder, channel + ".yml")
        with open(path, "w") as f:
            f.write(text)
        r = with_receivers(path, short_base(folder))
        self.assertEqual(r.returncode, 0, r.stderr)
        am = self.track(Alertmanager(r.stdout))
        remove_after(self, am.dir)
        return am

    def fire_and_resolve(self, am, messages):
        """Posts SENT firing, then resolved. messages() -> [(receiver, status, text)] so far.
        Checks each message and returns them all."""
        began = time.time() - 60
        am.post_alerts([dict(a, startsAt=iso(began)) for a, *_ in SENT])

        def arrived(status, receivers):
            got = {rcv for rcv, st, _ in messages() if st == status}
            return got >= set(receivers)
        wait_until(lambda: arrived("firing", RECEIVERS), 30, interval=0.2, what="a firing message at every receiver")
        am.post_alerts([dict(a, startsAt=iso(began), endsAt=iso(time.time())) for a, *_ in SENT])
        resolving = [r for r in RECEIVERS if r != "gpu-info"]
        wait_until(lambda: arrived("resolved", resolving), 30, interval=0.2, what="a resolved message at every receiver")
        time.sleep(2)  # two more group intervals: the info receiver would have sent its resolved message
        got = messages()
        for alert, receiver, where, owner in SENT:
            for status in ("firing", "resolved"):
                with self.subTest(alert=alert["labels"]["alertname"], status=status):
                    texts = [t for rcv, st, t in got if rcv == receiver and st == status]
                    if status == "resolved" and receiver == "gpu-info":
                        self.assertEqual(texts, [])  # send_resolved: false
                        continue
                    self.assertEqual(len(texts), 1, got)
                    check_message(self, texts[0], alert, where, owner, status)
                    # Only this receiver's alert: the routes sent no other alert here.
                    for other, other_receiver, *_ in SENT:
                        if other_receiver != receiver:
                            self.assertNotIn(other["annotations"]["summary"], texts[0])
        self.assertEqual(len(got), 7, got)
        return got

    def test_discord(self):
        colors = {}

        def respond(method, path, query, doc):
            return (204, None) if method == "POST" and path.startswith("/api/webhooks/") else (404, {"message": "Unknown Webhook"})
        fake = self.track(FakeService(respond))
        remove_after(self, fake.dir)
        am = self.start_alertmanager("discord", [
            (r"https://discord\.com/api/webhooks/REPLACE_WITH_(\w+)_WEBHOOK_ID/REPLACE_WITH_TOKEN",
             fake.base + r"/api/webhooks/\1/token-\1")])
        by_path = {"/api/webhooks/%s/token-%s" % (k, k): r for k, r in
                   zip(["PAGER", "CHAT", "INFO", "BUDGET"], RECEIVERS)}

        def messages():
            out = []
            for path, _, doc in fake.posts():
                self.assertEqual(set(doc), {"content", "embeds"})
                self.assertEqual(len(doc["embeds"]), 1)
                embed = doc["embeds"][0]
                self.assertLessEqual(len(embed["title"]), 256)
                self.assertLessEqual(len(embed["description"]), 4096)
                status = "firing" if embed["title"].startswith("[FIRING") else "resolved"
                colors.setdefault(status, set()).add(embed["color"])
                out.append((by_path[path], status, embed["title"] + "\n" + embed["description"]))
            return out
        self.fire_and_resolve(am, messages)
        self.assertEqual(colors, {"firing": {0x992D22}, "resolved": {0x2ECC71}})

    def test_slack(self):
        fake = self.track(FakeService(lambda method, path, query, doc: (200, "ok")))
        remove_after(self, fake.dir)
        folder = tempfile.mkdtemp(prefix="gpumeter-secrets-")
        remove_after(self, folder)
        for name in ("pager", "chat", "info", "budget"):
            with open(os.path.join(folder, "slack-%s.url" % name), "w") as f:
                f.write(fake.base + "/services/T000/B000/%s\n" % name)  # api_url_file: the URL alone, a newline after
        am = self.start_alertmanager("slack", [(r"/etc/prometheus/alertmanager_secrets/", folder + "/")])
        by_path = {"/services/T000/B000/" + k: r for k, r in zip(["pager", "chat", "info", "budget"], RECEIVERS)}
        colors = {}

        def messages():
            out = []
            for path, _, doc in fake.posts():
                self.assertEqual(len(doc["attachments"]), 1)
                att = doc["attachments"][0]
                status = "firing" if att["title"].startswith("[FIRING") else "resolved"
                self.assertEqual(att["fallback"], att["title"])
                self.assertIn("/#/alerts?receiver=", att["title_link"])
                colors[(by_path[path], status)] = att["color"]
                out.append((by_path[path], status, att["title"] + "\n" + att["text"]))
            return out
        self.fire_and_resolve(am, messages)
        self.assertEqual(colors, {("gpu-pager", "firing"): "danger", ("gpu-chat", "firing"): "warning",
                                  ("gpu-info", "firing"): "warning", ("finance-budget", "firing"): "warning",
                                  ("gpu-pager", "resolved"): "good", ("gpu-chat", "resolved"): "good",
                                  ("finance-budget", "resolved"): "good"})

    def test_wecom(self):
        issued = []

        def respond(method, path, query, doc):
            if method == "GET" and path == "/cgi-bin/gettoken":
                if (query.get("corpid"), query.get("corpsecret")) != ("ww-test-corp", "test-app-secret"):
                    return 200, {"errcode": 40001, "errmsg": "invalid credential"}
                issued.append("token-%d" % (len(issued) + 1))
                return 200, {"errcode": 0, "errmsg": "ok", "access_token": issued[-1], "expires_in": 7200}
            if method == "POST" and path == "/cgi-bin/message/send":
                if query.get("access_token") not in issued:
                    return 200, {"errcode": 40014, "errmsg": "invalid access_token"}
                return 200, {"errcode": 0, "errmsg": "ok", "msgid": "msg-" + query["access_token"]}
            return 404, None
        fake = self.track(FakeService(respond))
        remove_after(self, fake.dir)
        parties = {"PAGER": "11", "CHAT": "12", "INFO": "13", "BUDGET": "14"}
        am = self.start_alertmanager("wechat", [
            (r"https://qyapi\.weixin\.qq\.com/cgi-bin/", fake.base + "/cgi-bin/"),
            (r"REPLACE_WITH_CORP_ID", "ww-test-corp"),
            (r"REPLACE_WITH_APPLICATION_SECRET", "test-app-secret"),
            (r"REPLACE_WITH_AGENT_ID", "1000002"),
            (r"REPLACE_WITH_(\w+)_DEPARTMENT_ID", lambda m: parties[m.group(1)])])
        by_party = {parties[k]: r for k, r in zip(["PAGER", "CHAT", "INFO", "BUDGET"], RECEIVERS)}
        tokens = {}

        def messages():
            out = []
            for _, query, doc in fake.posts("/cgi-bin/message/send"):
                self.assertIn(query["access_token"], issued)
                self.assertEqual(doc["msgtype"], "markdown")
                self.assertEqual(doc["agentid"], "1000002")
                self.assertNotIn("touser", doc)
                text = doc["markdown"]["content"]
                self.assertLessEqual(len(text.encode()), 4096)
                status = "firing" if text.startswith("[FIRING") else "resolved"
                tokens.setdefault(by_party[doc["toparty"]], set()).add(query["access_token"])
                out.append((by_party[doc["toparty"]], status, text))
            return out
        self.fire_and_resolve(am, messages)
        # The token flow: one gettoken per receiver (each keeps its token for 2 hours), with the
        # corp ID and secret, and every message sent with the token its receiver was given.
        gets = [(p, q) for (m, p, q, _) in fake.requests if m == "GET"]
        self.assertEqual(gets, [("/cgi-bin/gettoken", {"corpid": "ww-test-corp", "corpsecret": "test-app-secret"})] * 4)
        self.assertEqual(sorted(t for ts in tokens.values() for t in ts), sorted(issued))
        self.assertTrue(all(len(ts) == 1 for ts in tokens.values()), tokens)

    def test_email(self):
        secrets = tempfile.mkdtemp(prefix="gpumeter-secrets-")
        remove_after(self, secrets)
        with open(os.path.join(secrets, "smtp.password"), "w") as f:
            f.write("relay-password-for-test")
        smtp = self.track(FakeSmtp("gpumeter-alerts@example.com", "relay-password-for-test"))
        remove_after(self, smtp.dir)
        am = self.start_alertmanager("email", [
            (r"smtp\.example\.com:587", "127.0.0.1:%d" % smtp.port),
            (r"require_tls: true", "require_tls: false"),
            (r"/etc/prometheus/alertmanager_secrets/", secrets + "/")])
        by_to = dict(zip(["gpu-oncall@example.com", "gpu-team@example.com", "gpu-info@example.com",
                          "gpu-budget@example.com"], RECEIVERS))

        def messages():
            out = []
            for rcpts, login, msg in list(smtp.messages):
                self.assertEqual(len(rcpts), 1)
                self.assertEqual(msg["To"], rcpts[0])
                self.assertEqual(login, "gpumeter-alerts@example.com")  # logged in with the password file's secret
                self.assertEqual(msg["From"], "gpumeter alerts <gpumeter-alerts@example.com>")
                text = msg.get_body(("plain",)).get_content()
                page = msg.get_body(("html",)).get_content()
                subject = str(msg["Subject"])
                self.assertTrue(text.startswith(subject), (subject, text))
                self.assertIn("<h2>%s</h2>" % subject, page)
                status = "firing" if subject.startswith("[FIRING") else "resolved"
                plain_page = html.unescape(re.sub(r"<[^>]+>", "", page))
                for alert, receiver, where, owner in SENT:
                    if receiver == by_to[rcpts[0]]:
                        self.assertIn(alert["annotations"]["summary"], plain_page)
                        self.assertIn(where, plain_page)
                        if status == "firing":
                            self.assertIn(alert["annotations"]["description"], text)
                out.append((by_to[rcpts[0]], status, text))
            return out
        self.fire_and_resolve(am, messages)
        self.assertTrue(smtp.logins and all(ok for _, _, ok in smtp.logins), smtp.logins)


if __name__ == "__main__":
    unittest.main()
