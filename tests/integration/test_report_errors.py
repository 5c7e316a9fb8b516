"""`gpumeter report` on bad input: an unreachable API, HTTP errors, answers that are not JSON or
not the expected JSON, no data, bad dates, bad flags and a bad pricing file; answers that say they
are partial, and data no ledger can have written (a dip that is no restart from zero, totals that
are not finite, busy time with no allocated time); a buildinfo answer without end. Each gets one
clear line and a non-zero exit code, and no output file is written: never a silently partial
invoice."""
import http.server
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse
import zlib

from harness import BIN, free_port, report

# The period the ledger API's history covers: one hour, on a 5-minute timeline.
START = 1_700_000_000
END = START + 3600
PERIOD = ("--from", str(START), "--to", str(END), "--step", "5m")


class QuietHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass


class LocalServer:
    """A threading HTTP server on a free loopback port, serving `handler` in the background."""

    def serve(self, handler):
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class StubApi(LocalServer):
    """A local HTTP server answering every request with the given status and body."""

    def __init__(self, status, body, content_type="application/json", delay=0.0, headers=()):
        stub = self

        class Handler(QuietHandler):
            def answer(self):
                length = int(self.headers.get("Content-Length", 0))
                if length:
                    self.rfile.read(length)
                time.sleep(stub.delay)
                data = stub.body.encode()
                self.send_response(stub.status)
                self.send_header("Content-Type", stub.content_type)
                self.send_header("Content-Length", str(len(data)))
                for name, value in stub.headers:
                    self.send_header(name, value)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up first (timeout, size cap)
                    pass

            do_GET = do_POST = answer

        self.status, self.body, self.content_type, self.delay, self.headers = status, body, content_type, delay, headers
        self.serve(Handler)


class TrickleApi:
    """Answers every request with headers at once, then its body one byte every 0.2 s: each
    byte renews a per-read timeout. Stops by itself after 30 s."""

    def __init__(self):
        import socket
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = "http://127.0.0.1:%d" % self.sock.getsockname()[1]
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        deadline = time.time() + 30
        self.sock.settimeout(0.5)
        while not self.done.is_set() and time.time() < deadline:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                try:
                    conn.recv(65536)
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
                    while not self.done.is_set() and time.time() < deadline:
                        conn.sendall(b" ")
                        time.sleep(0.2)
                except OSError:
                    pass

    def stop(self):
        self.done.set()
        self.thread.join()
        self.sock.close()


class LedgerApi(LocalServer):
    """A query API over a small ledger history, answering the requests `gpumeter report` makes as
    Prometheus 2.x evaluates them: last_over_time(), resets() > 0 and raw range selectors on
    /api/v1/query_range and /api/v1/query, /api/v1/series, /api/v1/label/uuid/values, and
    buildinfo. One GPU: team-a holds 75% of it, idle the rest; the agent had run for a day before
    the period, samples every 15 s.
    `tamper(doc, query)` may change each query answer before it goes out; `series` may be edited."""

    SHARES = {"team-a": 0.75, "__idle__": 0.25}

    def __init__(self, tamper=None):
        self.tamper = tamper or (lambda doc, query: doc)
        self.series = []  # (name, labels, [(t, v)])
        gpu = {"uuid": "GPU-a", "gpu": "0", "instance": "n1:9400", "job": "gpumeter"}

        def counter(name, labels, rate):
            times = range(START - 900, END + 1, 15)
            self.series.append((name, dict(gpu, **labels), [(t, rate * (86400 + t - START)) for t in times]))

        for project, share in self.SHARES.items():
            owner = {"project": project}
            counter("gpu_allocated_seconds_total", owner, share)
            counter("gpu_busy_seconds_total", owner, share / 2 if project == "team-a" else 0)
            counter("gpu_memory_byte_seconds_total", owner, 1e9 if project == "team-a" else 0)
            counter("gpu_attributed_energy_joules_total", owner, 300 * share)
        counter("gpumeter_ledger_covered_seconds_total", {}, 1)
        counter("gpumeter_ledger_gap_seconds_total", {}, 0)
        self.series.append(("gpu_info", dict(gpu, model="NVIDIA H100 80GB HBM3"), [(START, 1), (END, 1)]))
        api = self

        class Handler(QuietHandler):
            def do_GET(self):
                url = urllib.parse.urlsplit(self.path)
                if url.path == "/api/v1/label/uuid/values":
                    form = urllib.parse.parse_qs(url.query)
                    values = {labels["uuid"] for match in form["match[]"]
                              for labels in api.label_sets(match, float(form["start"][0]), float(form["end"][0]))}
                    api.send(self, {"status": "success", "data": sorted(values)})
                    return
                api.send(self, {"status": "success", "data": {"version": "2.42.0"}})

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                if self.path == "/api/v1/read":
                    # As a proxy that passes queries only: no remote read here.
                    self.rfile.read(length)
                    body = b"404 page not found\n"
                    self.send_response(404)
                    self.send_header("Content-Type", "text/plain")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                form = urllib.parse.parse_qs(self.rfile.read(length).decode())
                arg = lambda k: form[k][0]
                if self.path == "/api/v1/series":
                    query = arg("match[]")
                    data = api.label_sets(query, float(arg("start")), float(arg("end")))
                elif self.path == "/api/v1/query_range":
                    query = arg("query")
                    data = api.matrix(query, float(arg("start")), float(arg("end")), float(arg("step")))
                else:
                    query = arg("query")
                    data = api.matrix(query, float(arg("time")), float(arg("time")), 1)
                api.send(self, api.tamper({"status": "success", "data": data}, query))

        self.serve(Handler)

    @staticmethod
    def send(handler, doc):
        body = json.dumps(doc).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def select(self, selector):
        """The series a selector such as m{uuid=~"a|b",project="x"} matches."""
        name, _, body = re.fullmatch(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?', selector).groups()
        matchers = [(k, op, re.sub(r'\\(.)', r'\1', v))
                    for k, op, v in re.findall(r'([a-zA-Z_]+)(=~|=)"((?:[^"\\]|\\.)*)"', body or "")]
        return [s for s in self.series if s[0] == name and all(
            (re.fullmatch(v, s[1].get(k, "")) if op == "=~" else s[1].get(k, "") == v) for k, op, v in matchers)]

    def matrix(self, query, start, end, step):
        kind, selector, ms = next((k, *m.groups()) for k, m in (
            ("last", re.fullmatch(r"last_over_time\((.*)\[(\d+)ms\]\)", query)),
            ("resets", re.fullmatch(r"resets\((.*)\[(\d+)ms\]\) > 0", query)),
            ("raw", re.fullmatch(r"(.*)\[(\d+)ms\]", query))) if m)
        out = {}
        for name, labels, samples in self.select(selector):
            t = start
            while t <= end + 1e-9:
                window = [(x, v) for x, v in samples if t - int(ms) / 1000 - 1e-9 <= x <= t + 1e-9]
                if kind == "raw":
                    points = window
                elif kind == "last":
                    points = [(t, window[-1][1])] if window else []
                else:
                    n = sum(b[1] < a[1] for a, b in zip(window, window[1:]))
                    points = [(t, n)] if n else []
                key = json.dumps(labels, sort_keys=True)
                entry = out.setdefault(key, {"metric": dict(labels, __name__=name) if kind == "raw" else labels,
                                             "values": []})
                entry["values"] += [[round(x, 3), repr(float(v))] for x, v in points]
                t += step
        return {"resultType": "matrix", "result": [e for e in out.values() if e["values"]]}

    def label_sets(self, selector, start, end):
        return [dict(labels, __name__=name) for name, labels, samples in self.select(selector)
                if any(start <= t <= end for t, _ in samples)]

    def edit(self, name, project, change):
        """Applies change(t, v) -> v to the samples of `name` of `project` ("" for the GPU's own)."""
        for s in self.series:
            if s[0] == name and s[1].get("project", "") == project:
                s[2][:] = [(t, change(t, v)) for t, v in s[2]]


class KeepAliveLedgerApi(LedgerApi):
    """LedgerApi on kept-alive HTTP/1.1 connections that the server ends after one answer, never
    saying so (no "Connection: close"): at once after the answer ("after_answer", as an idle
    timeout does between two requests), or when the next request has come, unanswered
    ("next_request", as an idle timeout that strikes as the request goes out)."""

    def __init__(self, mode):
        super().__init__()
        self.lock = threading.Lock()
        self.connections = self.dropped = 0
        api, base = self, self.server.RequestHandlerClass

        class Handler(base):
            protocol_version = "HTTP/1.1"

            def handle(self):
                with api.lock:
                    api.connections += 1
                self.handle_one_request()
                if mode == "next_request" and self.rfile.readline():
                    with api.lock:
                        api.dropped += 1

        self.server.RequestHandlerClass = Handler


class TlsLedgerApi(LedgerApi):
    """LedgerApi over https, with a self-signed certificate for `name` made in `directory`."""

    def __init__(self, directory, name="localhost"):
        super().__init__()
        import ssl
        self.cert = os.path.join(directory, "cert.pem")
        key = os.path.join(directory, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                        "/CN=" + name, "-addext", "subjectAltName=DNS:" + name, "-keyout", key, "-out", self.cert],
                       check=True, capture_output=True)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = "https://localhost:%d" % self.server.server_address[1]


class BuildinfoFlood(LocalServer):
    """Answers buildinfo without end (chunked, until the client goes or 256 MiB are out) or with a
    gzip bomb, and every query with no data; counts the bytes of buildinfo that went out."""

    def __init__(self, mode):
        self.mode, self.sent, self.aborted = mode, 0, False
        flood = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                try:
                    flood.buildinfo(self)
                except OSError:  # the client closed the connection: it stopped reading
                    flood.aborted = True
                self.close_connection = True

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                body = b'{"status":"success","data":{"resultType":"matrix","result":[]}}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.serve(Handler)

    def buildinfo(self, handler):
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        if self.mode == "gzip":
            body = self.bomb()
            handler.send_header("Content-Encoding", "gzip")
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
            self.sent = len(body)
            return
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        chunk = b"%x\r\n%s\r\n" % (1 << 20, b" " * (1 << 20))
        while self.sent < 256 << 20:
            handler.wfile.write(chunk)
            self.sent += 1 << 20
        handler.wfile.write(b"0\r\n\r\n")

    @staticmethod
    def bomb():
        """A gzip body of 512 MiB that is about half a megabyte on the wire."""
        z = zlib.compressobj(9, zlib.DEFLATED, 31)
        parts = [z.compress(b'{"status":"success","data":{"version":"')]
        parts += [z.compress(b"9" * (1 << 20)) for _ in range(512)]
        return b"".join(parts + [z.compress(b'"}}'), z.flush()])


# Runs a command and prints its peak resident memory in KiB: the report's own, alone.
PEAK_RSS = ("import resource, subprocess, sys\n"
            "r = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
            "sys.stderr.write(r.stderr)\n"
            "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")


class ReportErrors(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="gpumeter-report-errors-")
        self.output = os.path.join(self.dir, "invoice.csv")

    def fails(self, code, expected, *args, url=None):
        defaults = {"--from": "-1d", "--to": "-1h", "--format": "csv"}
        for flag, value in defaults.items():
            if flag not in args:
                args += (flag, value)
        out = report("--url", url or "http://127.0.0.1:1", "--output", self.output, *args, check=False)
        self.assertEqual(out.returncode, code, "stderr: %s" % out.stderr)
        self.assertIn(expected, out.stderr)
        self.assertTrue(out.stderr.startswith("gpumeter report: "), out.stderr)
        self.assertFalse(os.path.exists(self.output), "a failed report must not write its output")
        self.assertEqual(out.stdout, "")
        return out.stderr

    def with_stub(self, status, body, expected, content_type="application/json", args=(), headers=()):
        stub = StubApi(status, body, content_type, headers=headers)
        try:
            return self.fails(1, expected, *args, url=stub.url)
        finally:
            stub.stop()

    def test_unreachable_api(self):
        port = free_port()  # nothing listens there
        self.fails(1, "cannot reach http://127.0.0.1:%d/api/v1/read: cannot connect" % port,
                   url="http://127.0.0.1:%d" % port)

    def test_http_error_with_an_html_body(self):
        self.with_stub(502, "<html><body>Bad Gateway</body></html>", 'answered HTTP 502: "<html><body>Bad Gateway',
                       content_type="text/html")

    def test_http_error_with_the_api_envelope(self):
        self.with_stub(422, '{"status":"error","errorType":"execution","error":"query processing would load too many samples"}',
                       "answered HTTP 422 (execution): query processing would load too many samples")

    def test_answer_that_is_not_json(self):
        self.with_stub(200, "OK", 'the answer is not JSON: "OK"', content_type="text/plain")

    def test_unexpected_json(self):
        self.with_stub(200, '{"status":"success","data":{"rows":[]}}', "unexpected JSON: data has no resultType")
        self.with_stub(200, '{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"x"]}]}}',
                       'unexpected sample value "x"')

    def test_no_data_is_not_a_zero_invoice(self):
        self.with_stub(200, '{"status":"success","data":{"resultType":"vector","result":[]}}',
                       "has no gpumeter ledger data")

    def test_the_password_in_the_url_is_never_shown(self):
        stub = StubApi(200, '{"status":"success","data":{"resultType":"vector","result":[]}}')
        try:
            url = stub.url.replace("http://", "http://alice:s3cret@")
            err = self.fails(1, "has no gpumeter ledger data", url=url)
        finally:
            stub.stop()
        self.assertIn(stub.url, err)
        self.assertNotIn("s3cret", err)
        api = LedgerApi()
        try:
            out = report("--url", api.url.replace("http://", "http://alice:s3cret@"), *PERIOD, "--format", "json")
        finally:
            api.stop()
        self.assertNotIn("s3cret", out.stdout + out.stderr)
        self.assertEqual(json.loads(out.stdout)["source"]["url"], api.url)

    def test_timeout(self):
        stub = StubApi(200, '{"status":"success","data":{"resultType":"vector","result":[]}}', delay=3)
        try:
            started = time.time()
            self.fails(1, "no complete answer within the timeout of 1 s (--timeout)", "--timeout", "1s", url=stub.url)
            self.assertLess(time.time() - started, 3)
        finally:
            stub.stop()

    def test_timeout_covers_the_whole_request_not_each_read(self):
        # A byte every 0.2 s renews a per-read timeout for ever; the deadline is for the whole request.
        stub = TrickleApi()
        try:
            started = time.time()
            self.fails(1, "no complete answer within the timeout of 2 s (--timeout)", "--timeout", "2s", url=stub.url)
            self.assertLess(time.time() - started, 15)
        finally:
            stub.stop()

    def test_answer_larger_than_the_limit(self):
        big = '{"status":"success","data":{"resultType":"vector","result":[]},"pad":"%s"}' % ("x" * (3 << 20))
        self.with_stub(200, big, "the answer is larger than 2 MiB (--max-answer-size)", args=("--max-answer-size", "2MiB"))

    def test_an_answer_in_an_encoding_not_asked_for(self):
        self.with_stub(200, "\x0b\x02\x80{}\x03", 'the answer has Content-Encoding "br", which gpumeter cannot decode',
                       headers=[("Content-Encoding", "br")])

    def test_a_corrupt_gzip_answer(self):
        self.with_stub(200, '{"status":"success"}', "the answer's compressed body is corrupt or cut short",
                       headers=[("Content-Encoding", "gzip")])

    def test_connection_refused_reads_as_such(self):
        port = free_port()
        err = self.fails(1, "cannot reach", url="http://127.0.0.1:%d" % port)
        self.assertIn("cannot connect", err)

    def ledger_fails(self, api, expected, *args):
        try:
            return self.fails(1, expected, *(PERIOD + args), url=api.url)
        finally:
            api.stop()

    def test_the_ledger_api_untampered_gives_a_complete_report(self):
        # So that each failure below is its tampering's. It names itself Prometheus but answers
        # no remote read: the report says so and reads through the query API.
        api = LedgerApi()
        try:
            out = report("--url", api.url, *PERIOD, "--format", "json", "--progress", "always")
            doc = json.loads(out.stdout)
            forced = report("--url", api.url, *PERIOD, "--read", "remote", check=False)
        finally:
            api.stop()
        self.assertIn("no remote read here", out.stderr)
        self.assertIn("answered HTTP 404", out.stderr)
        self.assertEqual(forced.returncode, 1, forced.stderr)
        self.assertIn("/api/v1/read [remote read gpumeter_ledger_covered_seconds_total] answered HTTP 404",
                      forced.stderr)
        rows = {r["key"]["project"]: r for r in doc["rows"]}
        self.assertAlmostEqual(rows["team-a"]["allocated_seconds"], 2700, delta=1e-6)
        self.assertAlmostEqual(rows["team-a"]["busy_seconds"], 1350, delta=1e-6)
        self.assertTrue(doc["reconciliation"]["ok"], doc["reconciliation"])
        self.assertEqual(doc["source"]["backend"], "Prometheus 2.42.0")

    def test_an_answer_with_a_warning_is_not_billed(self):
        # Thanos and Mimir answer from the stores that answered, with a warning: 5.8% of a bill
        # went missing with exit 0.
        def warn(doc, query):
            doc["warnings"] = ["partial response: store 10.0.0.7:10901 unavailable"]
            return doc
        self.ledger_fails(LedgerApi(warn), 'the API answered with a warning, so the answer may be incomplete: '
                                           '"partial response: store 10.0.0.7:10901 unavailable"')

    def test_an_answer_marked_partial_is_not_billed(self):
        def partial(doc, query):
            doc["isPartial"] = True
            return doc
        self.ledger_fails(LedgerApi(partial), 'the API marked its answer as partial ("isPartial": true')

    def test_samples_that_add_up_to_infinity_are_not_billed(self):
        # 1e308 as the last sample of each range answer billed inf (JSON null, CSV inf) with exit 0.
        def huge(doc, query):
            for r in doc["data"]["result"] if isinstance(doc["data"], dict) else []:
                if len(r["values"]) > 1:
                    r["values"][-1][1] = "1e308"
            return doc
        self.ledger_fails(LedgerApi(huge), "is not a finite number", "--by", "model")

    def test_a_dip_is_not_a_restart_from_zero(self):
        # A 10% dip in the middle of every series was read as a restart from zero: +50% on the bill.
        api = LedgerApi()
        for name, labels, _ in api.series:
            api.edit(name, labels.get("project", ""), lambda t, v: v * 0.9 if START + 1200 <= t < START + 2400 else v)
        err = self.ledger_fails(api, "went down from")
        self.assertIn("a ledger counter only goes down when it restarts from zero", err)

    def test_busy_time_with_no_allocated_time_is_not_billed(self):
        api = LedgerApi()
        api.series.append(("gpu_busy_seconds_total", dict(api.series[0][1], project="ghost"),
                           [(t, (t - START + 900) / 3) for t in range(START - 900, END + 1, 15)]))
        self.ledger_fails(api, 'GPU GPU-a on n1:9400: project="ghost" has 1200.000 busy seconds in the period and '
                               'no allocated second')

    def test_a_series_missing_from_every_other_answer_is_not_billed(self):
        # One owner's busy series left out of every other answer to the busy counter's requests
        # took its busy time to 0, with exit 0 and no warning.
        answers = {"n": 0}

        def drop(doc, query):
            if "gpu_busy_seconds_total" not in query:
                return doc
            answers["n"] += 1
            if answers["n"] % 2 and isinstance(doc["data"], dict):
                doc["data"]["result"] = [r for r in doc["data"]["result"] if r["metric"].get("project") != "team-a"]
            return doc
        self.ledger_fails(LedgerApi(drop), 'GPU GPU-a on n1:9400: project="team-a": gpu_busy_seconds_total has no '
                                           'sample at 2023-11-14T22:13:20Z, where gpu_allocated_seconds_total has one')

    def complete_report(self, api, env=None):
        """The JSON report of the untampered ledger API, checked as above."""
        try:
            out = subprocess.run([BIN, "report", "--url", api.url, *PERIOD, "--format", "json"], capture_output=True,
                                 text=True, timeout=300, env=env)
        finally:
            api.stop()
        self.assertEqual(out.returncode, 0, out.stderr)
        rows = {r["key"]["project"]: r for r in json.loads(out.stdout)["rows"]}
        self.assertAlmostEqual(rows["team-a"]["allocated_seconds"], 2700, delta=1e-6)
        self.assertAlmostEqual(rows["team-a"]["busy_seconds"], 1350, delta=1e-6)

    def test_a_kept_alive_connection_the_server_closed_is_made_again(self):
        api = KeepAliveLedgerApi("after_answer")
        self.complete_report(api)
        self.assertGreater(api.connections, 1)

    def test_a_request_the_server_drops_on_a_kept_alive_connection_is_sent_again(self):
        # Every request that finds its connection reused is dropped unanswered; each goes again
        # on a fresh connection, once. (The report's parallel connections each end with one
        # connection that nothing more was asked of.)
        api = KeepAliveLedgerApi("next_request")
        self.complete_report(api)
        self.assertGreater(api.dropped, 0)
        self.assertGreater(api.connections, api.dropped)

    def tls_env(self, cert):
        env = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
        if cert:
            env["SSL_CERT_FILE"] = cert
        return env

    def test_https_with_a_certificate_trusted_through_ssl_cert_file(self):
        api = TlsLedgerApi(self.dir)
        self.complete_report(api, env=self.tls_env(api.cert))

    def test_https_with_an_untrusted_certificate_is_refused(self):
        api = TlsLedgerApi(self.dir)
        try:
            out = subprocess.run([BIN, "report", "--url", api.url, *PERIOD], capture_output=True, text=True,
                                 timeout=300, env=self.tls_env(None))
        finally:
            api.stop()
        self.assertEqual(out.returncode, 1, out.stderr)
        self.assertIn("cannot reach %s/api/v1/" % api.url, out.stderr)
        self.assertIn(": the server's TLS certificate was not accepted", out.stderr)

    def test_https_with_a_trusted_certificate_for_another_name_is_refused(self):
        api = TlsLedgerApi(self.dir, name="prometheus.example")
        try:
            out = subprocess.run([BIN, "report", "--url", api.url, *PERIOD], capture_output=True, text=True,
                                 timeout=300, env=self.tls_env(api.cert))
        finally:
            api.stop()
        self.assertEqual(out.returncode, 1, out.stderr)
        self.assertIn(": the server's TLS certificate was not accepted", out.stderr)

    def test_buildinfo_without_end_is_cut_at_the_answer_size(self):
        # buildinfo was read with no size cap: 8.4 GB in 20 s from an endless answer.
        flood = BuildinfoFlood("endless")
        try:
            self.fails(1, "has no gpumeter ledger data", "--max-answer-size", "1MiB", "--timeout", "20s",
                       url=flood.url)
        finally:
            flood.stop()
        self.assertTrue(flood.aborted, "the report read %d MiB of buildinfo" % (flood.sent >> 20))
        self.assertLess(flood.sent, 64 << 20)

    def peak_rss_kib(self, server):
        """The report's peak resident memory against `server`, which answers every query with no data."""
        try:
            out = subprocess.run([sys.executable, "-c", PEAK_RSS, BIN, "report", "--url", server.url, "--from", "-1d",
                                  "--to", "-1h", "--max-answer-size", "1MiB"], capture_output=True, text=True,
                                 timeout=300)
        finally:
            server.stop()
        code, peak_kib = map(int, out.stdout.split())
        self.assertEqual(code, 1, out.stderr)
        self.assertIn("has no gpumeter ledger data", out.stderr)
        return peak_kib

    def test_a_gzip_bomb_as_buildinfo_is_cut_at_the_answer_size(self):
        # The cap is on the body as decoded: 512 MiB from half a megabyte on the wire took 2 GiB.
        # Against the same report with a small buildinfo, since a sanitizer build starts at 200 MiB.
        bomb = self.peak_rss_kib(BuildinfoFlood("gzip"))
        plain = self.peak_rss_kib(StubApi(200, '{"status":"success","data":{"resultType":"matrix","result":[]}}'))
        self.assertLess(bomb - plain, 64 << 10, "peak RSS %d MiB, %d MiB with a small buildinfo, with a 1 MiB answer "
                                                "cap" % (bomb >> 10, plain >> 10))

    def test_bad_dates(self):
        self.fails(2, '--from "yesterday": not a time', "--from", "yesterday")
        self.fails(2, '--to "2026-02-30": not a time, or no such date', "--to", "2026-02-30")
        self.fails(2, "is not before --to", "--from", "2026-11-02", "--to", "2026-11-01")
        self.fails(2, "is in the future", "--from", "-1h", "--to", "2999-01-01")

    def test_bad_flags(self):
        self.fails(2, '--by "team": expected project, user', "--by", "team")
        self.fails(2, '--format "pdf": expected table, csv, json, html or focus', "--format", "pdf")
        self.fails(2, '--url "localhost:9090": no scheme', url="localhost:9090")
        self.fails(2, "--step 1s: more than 10,000 steps", "--step", "1s")
        self.fails(2, "--lookback: invalid duration", "--lookback", "forever")
        self.fails(2, "--max-answer-size: expected a byte size of at least 1MiB", "--max-answer-size", "10kB")
        self.fails(2, '--replica-label "prom-replica": not a label name', "--replica-label", "prom-replica")

    def test_bad_pricing_file(self):
        path = os.path.join(self.dir, "pricing.yaml")
        with open(path, "w") as f:
            f.write("gpu_models:\n  \"NVIDIA H100 80GB HBM3\": {gpu_hour: -1}\n")
        self.fails(2, path + ":2:", "--pricing", path)
        self.fails(2, os.path.join(self.dir, "missing.yaml"), "--pricing", os.path.join(self.dir, "missing.yaml"))


if __name__ == "__main__":
    unittest.main()
