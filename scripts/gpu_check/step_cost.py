"""Step 7: what the agent costs on this node, against the exporter users write
(bench/peer_exporter.py: Python, ctypes, prometheus_client). They run in turn, never together:
agent, peer, agent, peer, each for --cost.window after --cost.warmup, at the same 1 s cadence,
with no scrapes. CPU is each process's threads' run time (schedstat, in ns) over the window,
and utime + stime (/proc/<pid>/stat, in clock ticks) beside it; divided by GPUs x rounds it is
the CPU per GPU sample. Reported; it fails only when the agent costs more than 3x the peer."""
import os
import statistics
import time

from .agent import Agent, free_port, http_get
from .procs import cpu_seconds
from .results import NOT_COMPARED, REPORT

STEP = 7
LIMIT = 3.0  # the agent's CPU per GPU sample, as a multiple of the peer's, that fails the step


def run(ctx):
    if not ctx.peer or not os.path.exists(ctx.peer):
        return ctx.results.add(STEP, "CPU per GPU sample, agent vs peer", NOT_COMPARED,
                               note="no peer exporter found (--peer PATH)")
    runs = []
    for i, kind in enumerate(("agent", "peer", "agent", "peer")):
        runs.append((kind, measure(ctx, kind, i)))
    summarize(ctx, runs)


def start(ctx, kind, i):
    name = "step7-%s-%d" % (kind, i)
    if kind == "agent":
        a = Agent(ctx.procs, name, ctx.gpumeter, ctx.config, ctx.interval, ctx.agent_args)
        a.wait_ready()
        return a.proc
    port = free_port()
    p = ctx.procs.start(name, [ctx.python, ctx.peer, "--nvml-library", ctx.nvml_library, "--address", "127.0.0.1",
                               "--port", port, "--interval", ctx.interval])
    deadline = time.time() + 30
    while time.time() < deadline:
        if not p.alive():
            raise RuntimeError("the peer exited: %s" % p.log_tail(600))
        try:
            if http_get("http://127.0.0.1:%d/metrics" % port, timeout=2)[0] == 200:
                return p
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("the peer did not answer within 30 s: %s" % p.log_tail(600))


def measure(ctx, kind, i):
    try:
        p = start(ctx, kind, i)
    except RuntimeError as e:
        return {"error": str(e)}
    try:
        time.sleep(ctx.d.cost_warmup)
        s0, t0 = cpu_seconds(p.pid), time.time()
        time.sleep(ctx.d.cost_window)
        s1, t1 = cpu_seconds(p.pid), time.time()
    finally:
        p.stop()
    samples = ctx.gpu_count * (t1 - t0) / ctx.interval
    return {"window_s": t1 - t0, "gpu_samples": samples,
            "cpu_ms_per_gpu_sample": 1000 * (s1[1] - s0[1]) / samples,
            "cpu_ms_per_gpu_sample_ticks": 1000 * (s1[0] - s0[0]) / samples,
            "cpu_percent_of_core": 100 * (s1[1] - s0[1]) / (t1 - t0)}


def summarize(ctx, runs):
    for n, (kind, r) in enumerate(runs):
        ctx.results.add(STEP, "run %d: %s" % (n + 1, kind), REPORT, r, note=r.get("error", ""))
    per = {k: [r["cpu_ms_per_gpu_sample"] for kind, r in runs if kind == k and "error" not in r]
           for k in ("agent", "peer")}
    name = "CPU per GPU sample, agent vs peer"
    if not per["agent"] or not per["peer"] or statistics.median(per["peer"]) <= 0:
        return ctx.results.add(STEP, name, NOT_COMPARED, per, note="a run failed: see the runs above")
    agent, peer = statistics.median(per["agent"]), statistics.median(per["peer"])
    ctx.results.check(STEP, name, agent <= LIMIT * peer,
                      {"agent_ms": agent, "peer_ms": peer, "ratio": agent / peer, "gpus": ctx.gpu_count},
                      "reported; fails above %gx the peer" % LIMIT, "medians of the runs, schedstat CPU")
