"""Step 2: two owners billed. A burn at 100 % (project check-a) and one at 30 % duty (check-b)
started --billing.offset later, partly overlapping; each owner's increase of
gpu_allocated_seconds_total and gpu_busy_seconds_total against what the burns report of
themselves (expect.py), and the busy seconds against `nvidia-smi pmon`'s sm % per pid."""
import time

from . import expect
from .burn import Burn, Presence
from .results import NOT_COMPARED

STEP = 2
OWNERS = (("check-a", 100), ("check-b", 30))
POLL = 0.2  # the presence watcher's period


def run(ctx):
    if not ctx.require_burn(STEP, "two owners"):
        return
    before = ctx.agent.scrape_after(time.time())
    pmon, presence = ctx.smi.pmon(ctx.gpu), Presence(ctx.device, POLL)
    try:
        reports = run_burns(ctx)
        time.sleep(2 * ctx.interval + 1)  # the ledger reaches past the last end
        after = ctx.agent.scrape_after(time.time())
    finally:
        rows, seen = pmon.stop(), presence.stop()
    compare(ctx, before, after, reports, seen, rows)


def run_burns(ctx):
    first = Burn(ctx, "step2-" + OWNERS[0][0], OWNERS[0][0], OWNERS[0][1], ctx.d.billing)
    burns = [first]
    try:
        time.sleep(ctx.d.billing_offset)
        burns.append(Burn(ctx, "step2-" + OWNERS[1][0], OWNERS[1][0], OWNERS[1][1], ctx.d.billing))
    finally:
        reports = {b.project: b.wait(ctx) for b in burns}
    return reports


def delta(ctx, before, after, metric, project):
    return (after.samples.total(metric, gpu=ctx.gpu, project=project)
            - before.samples.total(metric, gpu=ctx.gpu, project=project))


def presence_interval(report, seen):
    """The burn's own span, widened to when its pid was in the GPU's process list (the CUDA
    context exists before its timed loop starts and after it ends)."""
    first, last = seen.get(report["pid"], (report["start_unix"], report["end_unix"]))
    return min(report["start_unix"], first), max(report["end_unix"], last + POLL)


def compare(ctx, before, after, reports, seen, pmon_rows):
    intervals = {p: presence_interval(r, seen) for p, r in reports.items()}
    alloc = expect.allocated(intervals)
    loads = {p: (r["start_unix"], r["end_unix"], r["busy_seconds"] / r["seconds"]) for p, r in reports.items()}
    busy = expect.busy(loads)
    for project, report in reports.items():
        compare_allocated(ctx, project, delta(ctx, before, after, "gpu_allocated_seconds_total", project),
                          alloc[project], report, intervals[project])
        got_busy = delta(ctx, before, after, "gpu_busy_seconds_total", project)
        compare_busy(ctx, "busy seconds of %s vs burn" % project, got_busy, busy[project], report)
        compare_pmon(ctx, project, got_busy, report, pmon_rows, loads[project][2])
    total = sum(delta(ctx, before, after, "gpu_busy_seconds_total", p) for p in reports)
    compare_busy(ctx, "busy seconds of both owners vs burns", total, busy["__total__"], None)


def compare_allocated(ctx, project, got, expected, report, interval):
    want, variation = expected
    tol = 0.005 * want + variation * ctx.interval + 2 * POLL
    ctx.results.check(STEP, "allocated seconds of %s vs burn" % project, abs(got - want) <= tol,
                      {"agent": got, "expected": want, "burn_seconds": report["seconds"],
                       "on_gpu_from": interval[0], "on_gpu_to": interval[1]},
                      "0.5 %% + one collection interval per edge of its share + 2 polls = %.3f s" % tol,
                      "expected: each second split evenly among the burns on the GPU")


def compare_busy(ctx, name, got, bounds, report):
    lo, mid, hi, variation = bounds
    tol = 0.005 * mid + variation * ctx.interval
    measured = {"agent": got, "expected": mid, "expected_low": lo, "expected_high": hi}
    if report is not None:
        measured.update(burn_busy_seconds=report["busy_seconds"], burn_seconds=report["seconds"],
                        duty_percent=report["duty_percent"], duty_achieved_percent=report.get("duty_achieved_percent"))
    note = "" if lo == hi else "where the burns share the GPU any split of it is allowed (expect.py)"
    ctx.results.check(STEP, name, lo - tol <= got <= hi + tol, measured,
                      "[%.3f, %.3f] ± (0.5 %% + one collection interval per edge of its rate) = ± %.3f s"
                      % (lo, hi, tol), note)


def compare_pmon(ctx, project, got, report, rows, rate):
    name = "busy seconds of %s vs nvidia-smi pmon" % project
    mine = [sm for _, pid, sm in rows if pid == report["pid"]]
    if not mine:
        return ctx.results.add(STEP, name, NOT_COMPARED, {"agent": got, "pmon_lines": len(rows)},
                               note="pmon printed no sm %% for pid %d" % report["pid"])
    pmon = sum(mine) / 100.0  # one line a second
    tol = 0.05 * got + 2 * rate
    ctx.results.check(STEP, name, abs(got - pmon) <= tol, {"agent": got, "pmon": pmon, "pmon_lines": len(mine)},
                      "5 %% + two pmon seconds at its rate = %.3f s" % tol)
