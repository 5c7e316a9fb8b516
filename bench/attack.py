#!/usr/bin/python3
"""Good scrapes while the port is under attack: gpumeter serve against nginx in the same run.

Both servers require basic auth with the same bcrypt hash (cost 10): the agent through a web
config (`basic_auth_users`), nginx through `auth_basic` with an htpasswd file. nginx serves the
agent's own /metrics body, byte for byte, as a static file, with the same limits as the agent
where it has the same setting (see NGINX_CONF). The agent runs on the 64-process node of
bench/bench.py (deploy/scenarios/bench-8x-64proc.yaml).

For each server and each of four conditions, a scraper holding the right credentials makes up to
--scrapes sequential scrapes (a new connection each, `Connection: close`, no gzip), stopping early
after --budget seconds, and times each from connect() to the last byte of the body. A scrape
fails on a status other than 200, a short body, or no whole answer within --timeout. The
conditions add attackers one group at a time:

1. no attack;
2. 1000 idle connections;
3. the same, and 50 slowloris clients: a request header started, then one byte a second;
4. the same, and 100 clients sending a wrong password, each on a new connection as soon as the
   previous answer (or failure) arrives.

In two modes, one after the other: "sustained", where an idle or slowloris connection that the
server closes is reopened at once, so that the attack keeps its size for the whole measurement;
and "once", where it is not, as in tests/integration/test_http_hardening.py, so that the attack
fades as the server closes connections.

The attackers run in a separate process (this file with --attacker: asyncio, one thread) started
for each measurement and stopped after it. Everything is on 127.0.0.1, bounded in count and time.
Prints, for each mode, one table of latencies and one of what the attackers had and got.
"""
import argparse
import asyncio
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import cpu_seconds, free_port, print_table, stop  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
USER, PASSWORD, WRONG = "prometheus", "s3cret", "guess"
CONDITIONS = [
    ("no attack", 0, 0, 0),
    ("1000 idle connections", 1000, 0, 0),
    ("+ 50 slowloris clients (1 byte/s)", 1000, 50, 0),
    ("+ 100 wrong-password clients", 1000, 50, 100),
]

# The agent's limits (docs/security.md) where nginx has the same setting; nginx's defaults are
# in the comments. worker_connections (--nginx-connections, default 1024) is per worker, one
# worker per core: 2048 connections on 2 cores, against the agent's 512. nginx checks the
# password with bcrypt on every request, right or wrong, in the worker's event loop; it has no
# cache of good credentials.
NGINX_CONF = """\
worker_processes auto;
worker_rlimit_nofile 8192;
daemon off;
pid {work}/nginx.pid;
error_log {work}/nginx.err;
events {{ worker_connections {connections}; }}
http {{
  access_log off;
  client_header_timeout 10s;          # default 60s; the agent: 10 s for the whole request
  keepalive_timeout 5s;               # default 75s; the agent: 5 s
  keepalive_requests 100;             # default 1000; the agent: 100
  send_timeout 10s;                   # default 60s; the agent: 10 s for the whole response
  large_client_header_buffers 4 8k;   # the default; the agent: 16 KiB for all header fields
  server {{
    listen 127.0.0.1:{port};
    location / {{
      root {www};
      default_type text/plain;
      auth_basic "gpumeter";
      auth_basic_user_file {htpasswd};
    }}
  }}
}}
"""


def basic(user, password):
    import base64
    return base64.b64encode(("%s:%s" % (user, password)).encode()).decode()


def request(password):
    return ("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Basic %s\r\nConnection: close\r\n\r\n"
            % basic(USER, password)).encode()


def raise_fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


# ---- the attackers (a process of their own) -------------------------------------------------

class Attack:
    def __init__(self, port, reopen):
        self.port = port
        self.reopen = reopen
        self.stopping = asyncio.Event()
        self.c = {"idle_connects": 0, "idle_closed_by_server": 0, "idle_errors": 0, "idle_open": 0,
                  "slow_connects": 0, "slow_cut": 0, "slow_errors": 0, "slow_open": 0, "slow_lifetimes": [],
                  "guess_401": 0, "guess_429": 0, "guess_503": 0, "guess_other": 0, "guess_failed": 0}
        self.mark = None

    async def connect(self):
        return await asyncio.open_connection("127.0.0.1", self.port)

    async def idle(self):
        while not self.stopping.is_set():
            try:
                reader, writer = await self.connect()
            except OSError:
                self.c["idle_errors"] += 1
                await asyncio.sleep(0.05)
                continue
            self.c["idle_connects"] += 1
            self.c["idle_open"] += 1
            try:
                await reader.read(1)  # sends nothing: returns when the server closes
                self.c["idle_closed_by_server"] += 1
            except OSError:
                self.c["idle_closed_by_server"] += 1
            finally:
                self.c["idle_open"] -= 1
                writer.close()
            if not self.reopen:
                return

    async def slowloris(self):
        while not self.stopping.is_set():
            try:
                reader, writer = await self.connect()
            except OSError:
                self.c["slow_errors"] += 1
                await asyncio.sleep(0.05)
                continue
            self.c["slow_connects"] += 1
            self.c["slow_open"] += 1
            t0 = time.monotonic()
            try:
                writer.write(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                while True:
                    await writer.drain()
                    try:
                        await asyncio.wait_for(reader.read(1), 1.0)  # an answer or the close
                        break
                    except asyncio.TimeoutError:
                        writer.write(b"a")  # one byte a second
            except OSError:
                pass
            finally:
                self.c["slow_open"] -= 1
                writer.close()
            self.c["slow_cut"] += 1
            self.c["slow_lifetimes"].append(time.monotonic() - t0)
            if not self.reopen:
                return

    async def guesser(self):
        wrong = request(WRONG)
        while not self.stopping.is_set():
            try:
                reader, writer = await self.connect()
                try:
                    writer.write(wrong)
                    await writer.drain()
                    line = await reader.readline()
                    await reader.read()  # Connection: close
                finally:
                    writer.close()
            except OSError:
                self.c["guess_failed"] += 1
                await asyncio.sleep(0.01)
                continue
            status = line[9:12]
            key = {b"401": "guess_401", b"429": "guess_429", b"503": "guess_503"}.get(status, "guess_other")
            self.c[key] += 1

    def snapshot(self):
        return {k: v for k, v in self.c.items() if k != "slow_lifetimes"}


def read_commands(loop, attack):
    """stdin: 'mark' when the measurement starts, then 'stop' (or end of file)."""
    for line in sys.stdin:
        if line.strip() == "mark":
            loop.call_soon_threadsafe(lambda: setattr(attack, "mark", attack.snapshot()))
        elif line.strip() == "stop":
            break
    loop.call_soon_threadsafe(attack.stopping.set)


async def attacker_main(args):
    attack = Attack(args.port, args.mode == "sustained")
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, attack.stopping.set)
    threading.Thread(target=read_commands, args=(loop, attack), daemon=True).start()
    tasks = ([asyncio.create_task(attack.idle()) for _ in range(args.idle)] +
             [asyncio.create_task(attack.slowloris()) for _ in range(args.slowloris)] +
             [asyncio.create_task(attack.guesser()) for _ in range(args.guessers)])
    try:
        await asyncio.wait_for(attack.stopping.wait(), args.max_seconds)
    except asyncio.TimeoutError:
        pass  # bounded in time even if the parent is gone
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    lifetimes = sorted(attack.c["slow_lifetimes"])
    out = {"at_mark": attack.mark, "total": attack.snapshot(),
           "slow_lifetime_median": lifetimes[len(lifetimes) // 2] if lifetimes else None}
    print(json.dumps(out), flush=True)


class Attackers:
    """The attacker process against one port."""

    def __init__(self, port, mode, idle, slowloris, guessers, max_seconds):
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--attacker", "--port", str(port), "--idle", str(idle),
             "--slowloris", str(slowloris), "--guessers", str(guessers), "--max-seconds", str(max_seconds),
             "--modes", mode],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def mark(self):
        self.proc.stdin.write("mark\n")
        self.proc.stdin.flush()

    def stop(self):
        cpu = cpu_seconds(self.proc.pid)
        try:
            out, _ = self.proc.communicate("stop\n", timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise SystemExit("attack: the attacker process did not stop")
        result = json.loads(out.strip().splitlines()[-1])
        result["cpu_seconds"] = cpu
        return result


# ---- the scraper --------------------------------------------------------------------------

def scrape(port, req, timeout):
    """One good scrape on a new connection: (ok, seconds, what went wrong, phases), where phases
    are the seconds to connect (the handshake: a full listen queue drops SYNs, and the client
    retries after 1 s, then 2 s more, ...), from then to the answer's first byte (waiting to be
    accepted, then served), and from there to the end of the body."""
    t0 = time.monotonic()
    deadline = t0 + timeout
    data = b""
    marks = []
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            marks.append(time.monotonic())
            s.sendall(req)
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise socket.timeout()
                s.settimeout(left)
                chunk = s.recv(65536)
                if not chunk:
                    break
                if not data:
                    marks.append(time.monotonic())
                data += chunk
    except socket.timeout:
        return False, time.monotonic() - t0, "timeout " + ("waiting for the answer" if marks else "connecting"), None
    except OSError as e:
        return False, time.monotonic() - t0, type(e).__name__, None
    t1 = time.monotonic()
    took = t1 - t0
    phases = (marks[0] - t0, marks[1] - marks[0], t1 - marks[1]) if len(marks) == 2 else None
    head, _, body = data.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200 "):
        return False, took, ("status " + head[9:12].decode(errors="replace")) if head else "no answer", phases
    length = None
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    if length is None or len(body) != length or not body.startswith(b"# HELP"):
        return False, took, "short body", phases
    return True, took, "", phases


def listen_overflows():
    """The host's TcpExt ListenOverflows: SYNs or handshakes dropped because a listen queue was full."""
    with open("/proc/net/netstat") as f:
        lines = f.read().splitlines()
    for names, values in zip(lines[::2], lines[1::2]):
        if names.startswith("TcpExt:"):
            return int(dict(zip(names.split()[1:], values.split()[1:]))["ListenOverflows"])
    return 0


def percentile(sorted_values, p):
    """Nearest rank."""
    if not sorted_values:
        return float("nan")
    k = max(0, min(len(sorted_values) - 1, int(-(-p * len(sorted_values) // 100)) - 1))
    return sorted_values[k]


def measure(port, scrapes, budget, timeout):
    req = request(PASSWORD)
    took, errors = [], {}
    worst = (0.0, None)
    overflows = listen_overflows()
    end = time.monotonic() + budget
    while len(took) < scrapes and time.monotonic() < end:
        ok, seconds, why, phases = scrape(port, req, timeout)
        took.append(seconds)  # a failed scrape counts with the time it took to fail
        if not ok:
            errors[why] = errors.get(why, 0) + 1
        worst = max(worst, (seconds, phases), key=lambda x: x[0])
    s = sorted(took)
    return {"scrapes": len(took), "failures": sum(errors.values()), "errors": errors,
            "p50": percentile(s, 50), "p90": percentile(s, 90), "p99": percentile(s, 99), "max": s[-1],
            "slowest_phases": worst[1], "listen_overflows": listen_overflows() - overflows}


# ---- the servers --------------------------------------------------------------------------

def server_cpu_seconds(pid):
    """The process's CPU, and its children's (nginx's workers)."""
    total = cpu_seconds(pid)
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/stat" % name) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        total += cpu_seconds(int(name))
            except (OSError, ValueError, IndexError):
                pass
    return total


def wait_scrape(port, what, proc, timeout=30):
    req = request(PASSWORD)
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit("attack: %s exited with %s" % (what, proc.returncode))
        if scrape(port, req, 5)[0]:
            return
        time.sleep(0.2)
    raise SystemExit("attack: %s did not answer a good scrape within %ss" % (what, timeout))


def start_agent(args, work, hashed):
    web = os.path.join(work, "web.yml")
    with open(web, "w") as f:
        f.write("basic_auth_users:\n  %s: '%s'\n" % (USER, hashed))
    empty = os.path.join(work, "empty")
    os.makedirs(os.path.join(empty, "proc"))
    port = free_port()
    with open(os.path.join(work, "agent.log"), "wb") as log:
        agent = subprocess.Popen([os.path.join(args.build, "bin", "gpumeter"), "serve", "--sim.scenario", args.scenario,
                                  "--web.listen-address", "127.0.0.1:%d" % port, "--collect.interval", "1s",
                                  "--log.level", "warn", "--path.procfs", os.path.join(empty, "proc"),
                                  "--path.rootfs", empty, "--ledger.state-file", "", "--web.config.file", web],
                                 stdout=subprocess.DEVNULL, stderr=log)
    wait_scrape(port, "gpumeter", agent)  # the first good scrape: its bcrypt check is then cached
    time.sleep(2)  # a few collection rounds, so every GPU and process is in the snapshot
    return agent, port


def agent_body(port):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request(PASSWORD))
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return data.partition(b"\r\n\r\n")[2]


def start_nginx(work, body, hashed, connections):
    www = os.path.join(work, "www")
    os.makedirs(www)
    with open(os.path.join(www, "metrics"), "wb") as f:
        f.write(body)
    htpasswd = os.path.join(work, "htpasswd")
    with open(htpasswd, "w") as f:
        f.write("%s:%s\n" % (USER, hashed))
    for p in (www, os.path.join(www, "metrics"), htpasswd):
        os.chmod(p, 0o755 if os.path.isdir(p) else 0o644)  # the workers drop root privileges
    port = free_port()
    conf = os.path.join(work, "nginx.conf")
    with open(conf, "w") as f:
        f.write(NGINX_CONF.format(work=work, connections=connections, port=port, www=www, htpasswd=htpasswd))
    nginx = subprocess.Popen(["nginx", "-c", conf, "-p", work], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        wait_scrape(port, "nginx", nginx)
    except BaseException:
        stop(nginx, signal.SIGQUIT)
        raise
    return nginx, port


# ---- the run ------------------------------------------------------------------------------

def ms(seconds):
    return "%.2f ms" % (seconds * 1000)


def run_cell(args, mode, condition, server, proc, port):
    name, idle, slowloris, guessers = condition
    attackers = None
    cpu0 = None
    try:
        if idle or slowloris or guessers:
            attackers = Attackers(port, mode, idle, slowloris, guessers, args.warmup + args.budget + 60)
            time.sleep(args.warmup)  # every attacker connected and sending
            attackers.mark()
        cpu0, t0 = server_cpu_seconds(proc.pid), time.monotonic()
        r = measure(port, args.scrapes, args.budget, args.timeout)
        r["seconds"] = time.monotonic() - t0
        r["server_cpu"] = (server_cpu_seconds(proc.pid) - cpu0) / r["seconds"]
        if attackers:
            a = attackers.stop()
            attackers = None
            r["attack"] = a
            r["attacker_cpu"] = a["cpu_seconds"] / (args.warmup + r["seconds"])
        if proc.poll() is not None:
            raise SystemExit("attack: %s exited during '%s'" % (server, name))
    finally:
        if attackers:
            attackers.proc.kill()
            attackers.proc.wait()
    print("attack: %-9s %-34s %-8s %3d scrapes in %4.1f s: p50 %s, p99 %s, max %s, %d failed %s" %
          (mode, name, server, r["scrapes"], r["seconds"], ms(r["p50"]), ms(r["p99"]), ms(r["max"]), r["failures"],
           r["errors"] or ""), file=sys.stderr)
    settle(proc)
    return r


def settle(proc, limit=30):
    """Waits until the server has worked off what the attackers left (nginx still checks the
    passwords of requests whose clients are gone): under 10 % of a core over half a second."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        c0 = server_cpu_seconds(proc.pid)
        time.sleep(0.5)
        if server_cpu_seconds(proc.pid) - c0 < 0.05:
            return
    print("attack: the server was still busy %d s after the attackers stopped" % limit, file=sys.stderr)


def slowest(r):
    p = r["slowest_phases"]
    phases = " (%.0f + %.0f + %.0f ms)" % tuple(x * 1000 for x in p) if p else " (failed)"
    return "%s%s" % (ms(r["max"]), phases)


def server_cpu(r):
    # CPU time is counted in ticks of 10 ms: a share over a shorter window than 2 s says little.
    return "%.0f%%" % (r["server_cpu"] * 100) if r["seconds"] >= 2 else "(%.1f s)" % r["seconds"]


def attack_row(name, server, r):
    a = r.get("attack")
    if not a:
        return (name, server, slowest(r), "%d" % r["listen_overflows"], "", "", "", "", server_cpu(r), "")
    m, t = a["at_mark"] or {}, a["total"]
    guesses = "401: %d, 429: %d, 503: %d, other: %d, failed: %d" % (
        t["guess_401"] - m.get("guess_401", 0), t["guess_429"] - m.get("guess_429", 0),
        t["guess_503"] - m.get("guess_503", 0), t["guess_other"] - m.get("guess_other", 0),
        t["guess_failed"] - m.get("guess_failed", 0))
    life = a["slow_lifetime_median"]
    return (name, server, slowest(r), "%d" % r["listen_overflows"],
            "%d / %.0f/s" % (m.get("idle_open", 0), (t["idle_connects"] - m.get("idle_connects", 0)) / r["seconds"]),
            "%d / %d" % (m.get("slow_open", 0), t["slow_cut"] - m.get("slow_cut", 0)),
            "%.1f s" % life if life is not None else "",
            guesses if t["guess_401"] + t["guess_429"] + t["guess_503"] + t["guess_other"] + t["guess_failed"] else "",
            server_cpu(r), "%.0f%%" % (r["attacker_cpu"] * 100))


MODES = {
    "sustained": "idle and slowloris connections reopened as soon as the server closes them",
    "once": "idle and slowloris connections opened once, not reopened (as tests/integration/test_http_hardening.py)",
}


def print_mode(args, mode, results, body_bytes):
    print("Good scrapes under attack, %s: %s (%d bytes), basic auth (bcrypt, cost 10), a new connection per scrape; "
          "nginx worker_connections %d" % (mode, os.path.basename(args.scenario), body_bytes, args.nginx_connections))
    print("Attackers: %s" % MODES[mode])
    print()
    rows = []
    for condition in CONDITIONS:
        for server in ("gpumeter", "nginx"):
            r = results[(mode, condition[0], server)]
            rows.append((condition[0], server, "%d" % r["scrapes"], ms(r["p50"]), ms(r["p90"]), ms(r["p99"]),
                         ms(r["max"]), "%d" % r["failures"] + (" (%s)" % ", ".join(
                             "%d %s" % (n, why) for why, n in sorted(r["errors"].items())) if r["errors"] else "")))
    print_table(("condition", "server", "scrapes", "p50", "p90", "p99", "max", "failures"), rows)
    print()
    print("What the attackers had and got while the good scrapes were measured (%s)" % mode)
    print()
    print_table(("condition", "server", "slowest scrape (connect + first byte + body)",
                 "listen queue overflows (host)", "idle open at start / connects per s", "slowloris open at start / cut",
                 "slowloris median life", "wrong-password answers", "server CPU (or the time measured)",
                 "attackers' CPU"),
                [attack_row(c[0], s, results[(mode, c[0], s)]) for c in CONDITIONS for s in ("gpumeter", "nginx")])
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--scenario", default=os.path.join(ROOT, "deploy", "scenarios", "bench-8x-64proc.yaml"))
    ap.add_argument("--scrapes", type=int, default=200, help="good scrapes per condition and server")
    ap.add_argument("--modes", default="sustained,once",
                    help="comma-separated attack modes: sustained (connections reopened), once (not reopened)")
    ap.add_argument("--budget", type=float, default=20, help="seconds per condition and server at most")
    ap.add_argument("--timeout", type=float, default=10, help="a scrape fails after this many seconds")
    ap.add_argument("--warmup", type=float, default=3, help="seconds between starting the attackers and measuring")
    ap.add_argument("--nginx-connections", type=int, default=1024,
                    help="nginx's worker_connections (per worker; one worker per core)")
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--attacker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--idle", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--slowloris", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--guessers", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--max-seconds", type=float, default=120, help=argparse.SUPPRESS)
    args = ap.parse_args()
    raise_fd_limit()
    if args.attacker:
        args.mode = args.modes
        asyncio.run(attacker_main(args))
        return
    args.build = os.path.abspath(args.build)
    args.modes = args.modes.split(",")
    if not args.modes or set(args.modes) - set(MODES):
        raise SystemExit("attack: --modes takes sustained, once or both")
    if not shutil.which("nginx") and not os.path.exists("/usr/sbin/nginx"):
        raise SystemExit("attack: nginx is missing; run scripts/install-deps.sh bench")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # crypt: deprecated, still in Debian 12's Python
        import crypt
        hashed = crypt.crypt(PASSWORD, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 10))
    work = tempfile.mkdtemp(prefix="gpumeter-attack-")
    os.chmod(work, 0o755)  # nginx workers drop root privileges and must still read the files
    agent = nginx = None
    results = {}
    try:
        print("attack: starting gpumeter and nginx (basic auth, bcrypt cost 10) ...", file=sys.stderr)
        agent, aport = start_agent(args, work, hashed)
        body = agent_body(aport)
        nginx, nport = start_nginx(os.path.join(work, "nginx"), body, hashed, args.nginx_connections)
        servers = (("gpumeter", agent, aport), ("nginx", nginx, nport))
        settle(agent)
        for mode in args.modes:
            for condition in CONDITIONS:
                for server, proc, port in servers:
                    results[(mode, condition[0], server)] = run_cell(args, mode, condition, server, proc, port)
    except SystemExit:
        if os.path.exists(os.path.join(work, "agent.log")):
            with open(os.path.join(work, "agent.log"), errors="replace") as f:
                sys.stderr.write(f.read()[-4000:])
        raise
    finally:
        stop(agent)
        stop(nginx, signal.SIGQUIT)
        shutil.rmtree(work, ignore_errors=True)

    for mode in args.modes:
        print_mode(args, mode, results, len(body))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({" / ".join(k): v for k, v in results.items()}, f, indent=2)


if __name__ == "__main__":
    main()
