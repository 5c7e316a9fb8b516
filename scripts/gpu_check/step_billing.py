"""Step 2: two owners billed. A burn at 100 % (project check-a) and one at 30 % duty (check-b)
started --billing-offset later, partly overlapping; each owner's increase of
gpu_allocated_seconds_total and gpu_busy_seconds_total against what the burns report of
themselves (expect.py), over the whole run and over each stretch between the scrapes taken
when the second starts and the first ends; and the busy seconds against `nvidia-smi pmon`'s
sm % per pid."""
import time

from . import expect
from .burn import Burn, Presence
from .results import NOT_COMPARED

STEP = 2
OWNERS = (("check-a", 100), ("check-b", 30))
POLL = 0.2  # the presence watcher's period


# The three stretches between the four scrapes: each owner's busy seconds in each is compared
# too, so that a burn alone on the GPU is held to its own rate (where both run, any split of a
# collision is allowed, expect.py).
STRETCHES = ("before check-b started", "while both ran", "after check-a ended")


def run(ctx):
    if not ctx.require_burn(STEP, "two owners"):
        return
    scrapes = [ctx.agent.scrape_after(time.time())]
    pmon, presence = ctx.smi.pmon(ctx.gpu), Presence(ctx.device, POLL)
    try:
        reports = run_burns(ctx, scrapes)
    finally:
        rows, seen = pmon.stop(), presence.stop()
    compare(ctx, scrapes, reports, seen, rows)


def run_burns(ctx, scrapes):
    """Runs the burns, scraping when the second starts, when the first ends and after the last
    has ended and the ledger has passed its end."""
    (a, duty_a), (b, duty_b) = OWNERS
    first = Burn(ctx, "step2-" + a, a, duty_a, ctx.d.billing)
    reports, second = {}, None
    try:
        time.sleep(ctx.d.billing_offset)
        scrapes.append(ctx.agent.scrape_after(time.time()))
        second = Burn(ctx, "step2-" + b, b, duty_b, ctx.d.billing)
        reports[a] = first.wait(ctx)
        scrapes.append(ctx.agent.scrape_after(time.time()))
        reports[b] = second.wait(ctx)
        time.sleep(2 * ctx.interval + 1)  # the ledger reaches past the last end
        scrapes.append(ctx.agent.scrape_after(time.time()))
    finally:
        for burn in (first, second):
            if burn:
                burn.proc.stop()
    return reports


def delta(ctx, before, after, metric, project):
    return (after.samples.total(metric, gpu=ctx.gpu, project=project)
            - before.samples.total(metric, gpu=ctx.gpu, project=project))


def presence_interval(report, seen):
    """The burn's own span, widened to when its pid was in the GPU's process list (the CUDA
    context exists before its timed loop starts and after it ends)."""
    first, last = seen.get(report["pid"], (report["start_unix"], report["end_unix"]))
    return min(report["start_unix"], first), max(report["end_unix"], last + POLL)


def compare(ctx, scrapes, reports, seen, pmon_rows):
    before, after = scrapes[0], scrapes[-1]
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
    for label, s0, s1 in zip(STRETCHES, scrapes, scrapes[1:]):
        compare_stretch(ctx, label, s0, s1, loads)


def compare_stretch(ctx, label, s0, s1, loads):
    """Each owner's busy seconds between two scrapes, against its load clipped to the snapshots."""
    t0, t1 = s0.snapshot_time, s1.snapshot_time
    clipped = {p: (max(s, t0), min(e, t1), r) for p, (s, e, r) in loads.items() if max(s, t0) < min(e, t1)}
    expected = expect.busy(clipped)
    for project in clipped:
        got = delta(ctx, s0, s1, "gpu_busy_seconds_total", project)
        compare_busy(ctx, "busy seconds of %s %s vs burn" % (project, label), got, expected[project], None)


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
                      "[%.3f, %.3f] ± (0.5 %% + at each edge one collection interval times the rate that "
                      "changes) = ± %.3f s" % (lo, hi, tol), note)


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
