"""Step 4: per-process records. A 20 % and an 80 % burn run together; nvmlDeviceGetProcessUtilization
is read every second with lastSeenTimeStamp advancing, and the GPU's utilization samples beside it.
Each pid's mean smUtil is compared with the duty its burn achieved, the pids' sum with the GPU's
utilization, and the records' timestamps and cadence are reported.

Two burns that together ask for the whole GPU still collide: their busy periods overlap part of
the time, and the driver splits a collision between them in a way no public source fixes. So a
pid may show anything from its duty less the other's to its duty (expect.py), within the
tolerance; the sum of the two is what the GPU did, and is compared tightly."""
import statistics
import time

from . import nvml
from .burn import Burn, wait_present
from .results import NOT_COMPARED, REPORT

STEP = 4
LOADS = (("check-c", 20), ("check-d", 80))
TOLERANCE = 5  # percentage points, beyond what a collision may take


def run(ctx):
    if not ctx.require_burn(STEP, "per-process records"):
        return
    burns = [Burn(ctx, "step4-" + p, p, duty, ctx.d.process) for p, duty in LOADS]
    try:
        for b in burns:
            wait_present(ctx.device, b.pid, 60)
        records, util, error = poll(ctx.device, time.time(), ctx.d.process)
    finally:
        reports = [b.wait(ctx) for b in burns]
    duties = [r.get("duty_achieved_percent", r["duty_percent"]) for r in reports]
    means = []
    for i, (b, report) in enumerate(zip(burns, reports)):
        means.append(compare(ctx, b, report, steady(records.get(b.pid, []), report), duties[i],
                             sum(duties) - duties[i], error))
    compare_sum(ctx, means, util, reports)
    report_cadence(ctx, burns, records)


def poll(device, t0, seconds):
    """Records by pid and utilization samples, read each second until the burns end."""
    last, last_u, records, util, error = int(t0 * 1e6), int(t0 * 1e6), {}, [], None
    while time.time() < t0 + seconds + 1:
        time.sleep(1.0)
        try:
            got = device.process_utilization(last)
            new_u = device.samples(nvml.GPU_UTILIZATION_SAMPLES, last_u)
        except nvml.NvmlError as e:
            error = str(e)
            continue
        for pid, ts, sm, mem in got:
            records.setdefault(pid, []).append((ts / 1e6, sm, mem))
        util += [(ts / 1e6, v) for ts, v in new_u]
        last = max([last] + [ts for _, ts, _, _ in got])
        last_u = max([last_u] + [ts for ts, _ in new_u])
    return records, util, error


def steady(records, report):
    """The records inside the burn's timed loop, without the first (its window began before)."""
    inside = [r for r in records if report["start_unix"] <= r[0] <= report["end_unix"]]
    return inside[1:] if len(inside) > 1 else inside


def compare(ctx, burn, report, use, duty, others, error):
    name = "smUtil of the %d %% burn vs its duty" % burn.duty
    if not use:
        return ctx.results.add(STEP, name, NOT_COMPARED,
                               note="no per-process records" + (": %s" % error if error else ""))
    mean = statistics.mean(sm for _, sm, _ in use)
    low = max(0.0, duty - others)
    measured = {"pid": burn.pid, "records": len(use), "mean_smUtil": mean, "min_smUtil": min(sm for _, sm, _ in use),
                "max_smUtil": max(sm for _, sm, _ in use), "duty_percent": report["duty_percent"],
                "duty_achieved_percent": report.get("duty_achieved_percent"), "allowed": [low, duty]}
    ctx.results.check(STEP, name, low - TOLERANCE <= mean <= duty + TOLERANCE, measured,
                      "[duty − the other's duty, duty] ± %d points" % TOLERANCE,
                      "a collision with the other burn may take up to the other's duty")
    return mean


def compare_sum(ctx, means, util, reports):
    name = "smUtil of both pids vs the GPU's utilization"
    start, end = max(r["start_unix"] for r in reports), min(r["end_unix"] for r in reports)
    inside = [v for ts, v in util if start + 1 <= ts <= end]
    if None in means or not inside:
        return ctx.results.add(STEP, name, NOT_COMPARED, note="no records or no utilization samples")
    gpu = statistics.mean(inside)
    ctx.results.check(STEP, name, abs(sum(means) - gpu) <= TOLERANCE,
                      {"sum_mean_smUtil": sum(means), "gpu_mean_utilization": gpu, "utilization_samples": len(inside)},
                      "± %d points" % TOLERANCE)


def report_cadence(ctx, burns, records):
    out = {}
    for b in burns:
        stamps = sorted({ts for ts, _, _ in records.get(b.pid, [])})
        spacing = [y - x for x, y in zip(stamps, stamps[1:])]
        out[str(b.pid)] = {"records": len(records.get(b.pid, [])), "distinct_timestamps": len(stamps),
                           "median_spacing_s": statistics.median(spacing) if spacing else None,
                           "first_timestamps": [round(t, 6) for t in stamps[:5]]}
    ctx.results.add(STEP, "record timestamps and cadence", REPORT, out,
                    note="each pid's records carry their own timestamps; a query a second sees one record per pid")
