"""Step 3: the driver's sample buffers over an idle stretch. nvmlDeviceGetSamples is read for
utilization and power every second with lastSeenTimeStamp advancing, as the agent reads them;
what it returns is reported, and its holes are compared with the agent's gap seconds. The
agent's covered and gap seconds together must account for the stretch."""
import statistics
import time

from . import nvml
from .results import NOT_COMPARED, REPORT

STEP = 3


def run(ctx):
    start = ctx.agent.scrape_after(time.time())
    t0 = time.time()
    streams = poll(ctx.device, t0, ctx.d.idle)
    t1 = time.time()
    end = ctx.agent.scrape_after(time.time())
    report_streams(ctx, streams, t0, t1)
    compare_ledger(ctx, start, end, streams["utilization"], t0, t1)


def poll(device, t0, seconds):
    last = {"utilization": int(t0 * 1e6), "power": int(t0 * 1e6)}
    kinds = {"utilization": nvml.GPU_UTILIZATION_SAMPLES, "power": nvml.TOTAL_POWER_SAMPLES}
    got = {k: [] for k in kinds}
    errors = {}
    while time.time() < t0 + seconds:
        time.sleep(1.0)
        for k, kind in kinds.items():
            try:
                new = device.samples(kind, last[k])
            except nvml.NvmlError as e:
                errors[k] = str(e)
                continue
            got[k] += new
            if new:
                last[k] = max(ts for ts, _ in new)
    return {k: Stream(got[k], errors.get(k)) for k in kinds}


class Stream:
    def __init__(self, samples, error):
        self.samples, self.error = samples, error
        stamps = [ts / 1e6 for ts, _ in samples]
        self.spacing = [b - a for a, b in zip(stamps, stamps[1:])]
        self.period = statistics.median(self.spacing) if self.spacing else None
        self.stamps = stamps

    def holes(self, t0, t1):
        """Seconds not covered: spacings over 1.5 periods (less one period each), and the
        stretch's ends beyond the first and last sample."""
        if not self.stamps or not self.period:
            return t1 - t0
        inner = sum(s - self.period for s in self.spacing if s > 1.5 * self.period)
        ends = [self.stamps[0] - t0, t1 - self.stamps[-1]]
        return inner + sum(e for e in ends if e > 1.5 * self.period)

    def summary(self, t0, t1):
        return {"samples": len(self.samples), "period_s": self.period,
                "largest_spacing_s": max(self.spacing) if self.spacing else None,
                "first_s": self.stamps[0] - t0 if self.stamps else None,
                "last_s": t1 - self.stamps[-1] if self.stamps else None,
                "holes_s": self.holes(t0, t1), "stretch_s": t1 - t0,
                "values": sorted({v for _, v in self.samples})[:10]}


def report_streams(ctx, streams, t0, t1):
    for kind, s in streams.items():
        name = "%s samples over the idle stretch" % kind
        if s.error and not s.samples:
            ctx.results.add(STEP, name, NOT_COMPARED, note="nvmlDeviceGetSamples: %s" % s.error)
            continue
        note = "samples kept coming" if s.holes(t0, t1) == 0 else "the driver left holes in the stream"
        ctx.results.add(STEP, name, REPORT, s.summary(t0, t1), note=note)


def ledger(scrape, ctx, metric):
    return scrape.samples.value(metric, gpu=ctx.gpu)


def compare_ledger(ctx, start, end, util, t0, t1):
    gap = (ledger(end, ctx, "gpumeter_ledger_gap_seconds_total")
           - ledger(start, ctx, "gpumeter_ledger_gap_seconds_total"))
    covered = (ledger(end, ctx, "gpumeter_ledger_covered_seconds_total")
               - ledger(start, ctx, "gpumeter_ledger_covered_seconds_total"))
    wall = end.snapshot_time - start.snapshot_time
    tol = 2 * ctx.interval
    ctx.results.check(STEP, "covered + gap seconds vs the idle stretch", abs(covered + gap - wall) <= tol,
                      {"covered_s": covered, "gap_s": gap, "wall_s": wall}, "± 2 collection intervals = %.3f s" % tol,
                      "the ledger accounts for every second of the stretch, billed or counted as gap")
    if util.error and not util.samples:
        return ctx.results.add(STEP, "gap seconds vs utilization-sample holes", NOT_COMPARED,
                               note="no utilization samples: %s" % util.error)
    holes = util.holes(t0, t1)
    tol = 2 * ctx.interval + 1.5 * (util.period or 0)
    ctx.results.check(STEP, "gap seconds vs utilization-sample holes", abs(gap - holes) <= tol,
                      {"agent_gap_s": gap, "sample_holes_s": holes},
                      "± (2 collection intervals + 1.5 sample periods) = %.3f s" % tol)
