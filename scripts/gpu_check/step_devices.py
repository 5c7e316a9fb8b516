"""Step 1: every device value of the agent's /metrics against nvidia-smi --query-gpu, read just
before and just after a scrape whose snapshot was taken between them, on the idle GPU and
under a 100 % burn. A value passes when it lies within the two readings' span plus the
field's tolerance."""
import time

from . import smi
from .burn import Burn, wait_present
from .results import NOT_COMPARED, REPORT, within

STEP = 1
MIB = 1024.0 * 1024.0

# (nvidia-smi field, agent metric, its labels, agent value x scale = nvidia-smi's unit, unit,
#  tolerance beyond the span in that unit)
FIELDS = [
    ("utilization.gpu", "gpu_utilization_ratio", {}, 100, "%", 5),
    ("utilization.memory", "gpu_memory_utilization_ratio", {}, 100, "%", 5),
    ("memory.total", "gpu_memory_total_bytes", {}, 1 / MIB, "MiB", 1),
    ("memory.used", "gpu_memory_used_bytes", {}, 1 / MIB, "MiB", 1),
    ("memory.free", "gpu_memory_free_bytes", {}, 1 / MIB, "MiB", 1),
    ("temperature.gpu", "gpu_temperature_celsius", {"sensor": "gpu"}, 1, "°C", 1),
    ("temperature.memory", "gpu_temperature_celsius", {"sensor": "memory"}, 1, "°C", 1),
    ("clocks.sm", "gpu_clock_hertz", {"clock": "sm"}, 1e-6, "MHz", 1),
    ("clocks.mem", "gpu_clock_hertz", {"clock": "memory"}, 1e-6, "MHz", 1),
    ("clocks.gr", "gpu_clock_hertz", {"clock": "graphics"}, 1e-6, "MHz", 1),
    ("pstate", "gpu_performance_state", {}, 1, "P-state", 0),
    ("pcie.link.gen.current", "gpu_pcie_link_generation", {}, 1, "", 0),
    ("pcie.link.width.current", "gpu_pcie_link_width", {}, 1, "lanes", 0),
    ("ecc.errors.corrected.volatile.total", "gpu_ecc_errors_total", {"severity": "corrected"}, 1, "errors", 0),
    ("ecc.errors.uncorrected.volatile.total", "gpu_ecc_errors_total", {"severity": "uncorrected"}, 1, "errors", 0),
]
# nvml.h's clock event reason bits, by the agent's `reason` label.
REASON_BITS = {"gpu_idle": 0x1, "applications_clocks_setting": 0x2, "sw_power_cap": 0x4, "hw_slowdown": 0x8,
               "sync_boost": 0x10, "sw_thermal_slowdown": 0x20, "hw_thermal_slowdown": 0x40,
               "hw_power_brake_slowdown": 0x80, "display_clock_setting": 0x100}


def run(ctx):
    idle_processes(ctx)
    compare_round(ctx, "idle")
    if not ctx.require_burn(STEP, "loaded round"):
        return
    burn = Burn(ctx, "step1-burn", "check-load", 100, ctx.d.load)
    try:
        if wait_present(ctx.device, burn.pid, 60) is None:
            raise RuntimeError("the burn never appeared in the GPU's process list")
        time.sleep(2 * ctx.interval + 1)  # the 1 s averages and the agent's next collection
        compare_round(ctx, "loaded")
    finally:
        burn.wait(ctx)


def idle_processes(ctx):
    others = ctx.device.processes()
    ctx.results.add(STEP, "GPU free of other processes at the start", REPORT,
                    {"processes": [{"pid": p, "used_bytes": m} for p, m in others]},
                    note="" if not others else "other processes share the GPU: billing comparisons may be off")


def agent_value(scrape, ctx, metric, labels):
    return scrape.samples.value(metric, gpu=ctx.gpu, mig_uuid="", **labels)


def compare_round(ctx, name):
    known = ctx.smi.known_fields()
    before, apps_before = ctx.smi.query(ctx.gpu), ctx.smi.compute_apps(ctx.uuid)
    scrape = ctx.agent.scrape_after(time.time())
    after, apps_after = ctx.smi.query(ctx.gpu), ctx.smi.compute_apps(ctx.uuid)
    for field, metric, labels, scale, unit, tol in FIELDS:
        if field not in known:
            ctx.results.add(STEP, "%s: %s" % (name, field), NOT_COMPARED,
                            note="this nvidia-smi has no field %s" % field)
            continue
        v = agent_value(scrape, ctx, metric, labels)
        span(ctx, name, field, None if v is None else v * scale, before.values[field], after.values[field],
             tol, unit)
    compare_reserved(ctx, name, scrape, before, after, known)
    compare_power(ctx, name, scrape, before, after, known)
    compare_reasons(ctx, name, scrape, before, after, known)
    compare_processes(ctx, name, scrape, apps_before, apps_after)


def span(ctx, rnd, field, agent, before, after, tol, unit, tol_text=None):
    """One comparison: the agent's value within [min, max] of the two readings, plus `tol`."""
    name = "%s: %s" % (rnd, field)
    measured = {"agent": agent, "nvidia-smi before": _shown(before), "nvidia-smi after": _shown(after), "unit": unit}
    tolerance = tol_text or ("within the two readings, exactly" if tol == 0
                             else "within the two readings ± %g %s" % (tol, unit))
    absent = [x for x in (before, after) if isinstance(x, smi.Absent)]
    if absent:
        note = "nvidia-smi printed %s" % absent[0].text
        if agent is not None:
            note += "; the agent reports %g" % agent
        return ctx.results.add(STEP, name, NOT_COMPARED, measured, tolerance, note)
    if agent is None:
        return ctx.results.check(STEP, name, False, measured, tolerance,
                                 "the agent leaves out a value nvidia-smi reports")
    return ctx.results.check(STEP, name, within(agent, min(before, after), max(before, after), tol), measured,
                             tolerance)


def _shown(v):
    return v.text if isinstance(v, smi.Absent) else v


def compare_reserved(ctx, rnd, scrape, before, after, known):
    """nvidia-smi's memory.reserved against what the agent's total − used − free leaves."""
    if "memory.reserved" not in known:
        return ctx.results.add(STEP, "%s: memory.reserved" % rnd, NOT_COMPARED,
                               note="this nvidia-smi has no field memory.reserved")
    parts = [agent_value(scrape, ctx, "gpu_memory_%s_bytes" % p, {}) for p in ("total", "used", "free")]
    agent = None if None in parts else (parts[0] - parts[1] - parts[2]) / MIB
    span(ctx, rnd, "memory.reserved", agent, before.values["memory.reserved"], after.values["memory.reserved"], 2,
         "MiB", "within the two readings ± 2 MiB (the agent's total − used − free)")


def power_tol(before, after):
    values = [v for v in (before, after) if isinstance(v, float)]
    return max([1.0] + [0.02 * v for v in values])


def compare_power(ctx, rnd, scrape, before, after, known):
    """power.draw is what the agent reads (nvmlDeviceGetPowerUsage); it is the 1 s average
    (power.draw.average) on Ampere and newer but GA100, the instant (power.draw.instant) before."""
    agent = agent_value(scrape, ctx, "gpu_power_watts", {})
    text = "within the two readings ± max(1 W, 2 %)"
    for field in ("power.draw", "power.draw.average"):
        if field not in known:
            ctx.results.add(STEP, "%s: %s" % (rnd, field), NOT_COMPARED, note="this nvidia-smi has no field " + field)
            continue
        b, a = before.values[field], after.values[field]
        span(ctx, rnd, field, agent, b, a, power_tol(b, a), "W", text)
    if "power.draw.instant" not in known:
        return ctx.results.add(STEP, "%s: power.draw.instant" % rnd, NOT_COMPARED,
                               note="this nvidia-smi has no field power.draw.instant")
    average = before.values.get("power.draw.average")
    b, a = before.values["power.draw.instant"], after.values["power.draw.instant"]
    if isinstance(average, float):
        return ctx.results.add(STEP, "%s: power.draw.instant" % rnd, REPORT,
                               {"agent": agent, "nvidia-smi before": _shown(b), "nvidia-smi after": _shown(a)},
                               note="the agent's gpu_power_watts is the 1 s average on this GPU; "
                                    "the instant is shown only")
    tol = max([5.0] + [0.05 * v for v in (b, a) if isinstance(v, float)])
    span(ctx, rnd, "power.draw.instant", agent, b, a, tol, "W", "within the two readings ± max(5 W, 5 %)")


def compare_reasons(ctx, rnd, scrape, before, after, known):
    """Each reason the agent exports, against its bit in nvidia-smi's active mask."""
    name = "%s: clocks_event_reasons.active" % rnd
    if "clocks_event_reasons.active" not in known:
        return ctx.results.add(STEP, name, NOT_COMPARED, note="this nvidia-smi has no clock event reasons field")
    b, a = before.values["clocks_event_reasons.active"], after.values["clocks_event_reasons.active"]
    series = {ls.get("reason"): v for ls, v in scrape.samples.find("gpu_clock_event_active", gpu=ctx.gpu)}
    measured = {"agent": series, "nvidia-smi before": _hex(b), "nvidia-smi after": _hex(a)}
    if isinstance(b, smi.Absent) or isinstance(a, smi.Absent):
        return ctx.results.add(STEP, name, NOT_COMPARED, measured, note="nvidia-smi printed %s" % _shown(b))
    if not series:
        return ctx.results.check(STEP, name, False, measured, "", "the agent exports no gpu_clock_event_active")
    wrong = [r for r, v in series.items() if r in REASON_BITS
             and bool(v) not in (bool(b & REASON_BITS[r]), bool(a & REASON_BITS[r]))]
    ctx.results.check(STEP, name, not wrong, measured, "each reason as one of the two readings' bits",
                      "differs: " + ", ".join(wrong) if wrong else "")


def _hex(v):
    return "0x%x" % v if isinstance(v, int) else _shown(v)


def compare_processes(ctx, rnd, scrape, before, after):
    agent = {int(ls["pid"]): v / MIB for ls, v in scrape.samples.find("gpu_process_memory_used_bytes", gpu=ctx.gpu)
             if ls.get("pid", "").isdigit()}
    running = {p for p, v in agent.items() if v > 0}
    missing = sorted(set(before) & set(after) - set(agent))
    extra = sorted(running - set(before) - set(after))
    measured = {"agent": sorted(running), "nvidia-smi before": sorted(before), "nvidia-smi after": sorted(after)}
    note = "; ".join(x for x in ("missing from the agent: %s" % missing if missing else "",
                                 "not in nvidia-smi: %s" % extra if extra else "") if x)
    ctx.results.check(STEP, "%s: compute processes" % rnd, not missing and not extra, measured,
                      "the same pids (a pid in only one reading may be either way)", note)
    for pid in sorted(set(agent) & (set(before) | set(after))):
        readings = [r.get(pid) for r in (before, after)]
        b, a = [r if r is not None else readings[1 - i] for i, r in enumerate(readings)]
        span(ctx, rnd, "process %d used_memory" % pid, agent[pid], b, a, 1, "MiB")
