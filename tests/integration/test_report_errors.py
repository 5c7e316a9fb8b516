"""`gpumeter report` on bad input: an unreachable API, HTTP errors, answers that are not JSON or
not the expected JSON, no data, bad dates, bad flags and a bad pricing file; a buildinfo answer
without end or that is a gzip bomb. Each gets one clear line and a non-zero exit code, and no
output file is written: never a silently partial invoice."""
import http.server
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import zlib

from harness import BIN, free_port, report


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

    def __init__(self, status, body, content_type="application/json", delay=0.0):
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
                self.end_headers()
                try:
                    self.wfile.write(data)
                except BrokenPipeError:  # the client gave up first (the timeout test)
                    pass

            do_GET = do_POST = answer

        self.status, self.body, self.content_type, self.delay = status, body, content_type, delay
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

    def with_stub(self, status, body, expected, content_type="application/json", args=()):
        stub = StubApi(status, body, content_type)
        try:
            return self.fails(1, expected, *args, url=stub.url)
        finally:
            stub.stop()

    def test_unreachable_api(self):
        port = free_port()  # nothing listens there
        self.fails(1, "cannot reach http://127.0.0.1:%d/api/v1/query" % port, url="http://127.0.0.1:%d" % port)

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

    def test_connection_refused_reads_as_such(self):
        port = free_port()
        err = self.fails(1, "cannot reach", url="http://127.0.0.1:%d" % port)
        self.assertIn("cannot connect", err)

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

    def test_a_gzip_bomb_as_buildinfo_is_cut_at_the_answer_size(self):
        # The cap is on the body as decoded: 512 MiB from half a megabyte on the wire took as much memory.
        flood = BuildinfoFlood("gzip")
        try:
            out = subprocess.run([sys.executable, "-c", PEAK_RSS, BIN, "report", "--url", flood.url, "--from", "-1d",
                                  "--to", "-1h", "--max-answer-size", "1MiB"], capture_output=True, text=True,
                                 timeout=300)
        finally:
            flood.stop()
        code, peak_kib = map(int, out.stdout.split())
        self.assertEqual(code, 1, out.stderr)
        self.assertIn("has no gpumeter ledger data", out.stderr)
        self.assertLess(peak_kib, 256 << 10, "peak RSS %d MiB with a 1 MiB answer cap" % (peak_kib >> 10))

    def test_bad_dates(self):
        self.fails(2, '--from "yesterday": not a time', "--from", "yesterday")
        self.fails(2, '--to "2026-02-30": not a time, or no such date', "--to", "2026-02-30")
        self.fails(2, "is not before --to", "--from", "2026-11-02", "--to", "2026-11-01")
        self.fails(2, "is in the future", "--from", "-1h", "--to", "2999-01-01")

    def test_bad_flags(self):
        self.fails(2, '--by "team": expected project, user', "--by", "team")
        self.fails(2, '--format "pdf": expected table, csv, json or html', "--format", "pdf")
        self.fails(2, '--url "localhost:9090": no scheme', url="localhost:9090")
        self.fails(2, "--step 1s: more than 10,000 steps", "--step", "1s")
        self.fails(2, "--lookback: invalid duration", "--lookback", "forever")
        self.fails(2, "--max-answer-size: expected a byte size of at least 1MiB", "--max-answer-size", "10kB")

    def test_bad_pricing_file(self):
        path = os.path.join(self.dir, "pricing.yaml")
        with open(path, "w") as f:
            f.write("gpu_models:\n  \"NVIDIA H100 80GB HBM3\": {gpu_hour: -1}\n")
        self.fails(2, path + ":2:", "--pricing", path)
        self.fails(2, os.path.join(self.dir, "missing.yaml"), "--pricing", os.path.join(self.dir, "missing.yaml"))


if __name__ == "__main__":
    unittest.main()
