"""Step 6: GPU Performance Monitoring under a 100 % burn. One nvmlGpmMetricsGet of 12 metrics
against 12 single-metric calls over the same two samples (they must agree exactly), no NaN
anywhere, and the 12 values against `nvidia-smi dmon --gpm-metrics` taken right after (its own
one-second window, so within a tolerance). Where nvmlGpmQueryDeviceSupport says no, GPM is
"not compared"."""
import math
import time

from . import nvml, smi
from .burn import Burn, wait_present
from .results import NOT_COMPARED

STEP = 6
METRICS = {1: "graphics_util", 2: "sm_util", 3: "sm_occupancy", 5: "any_tensor_util", 10: "dram_bw_util",
           11: "fp64_util", 12: "fp32_util", 13: "fp16_util", 20: "pcie_tx_per_sec", 21: "pcie_rx_per_sec",
           60: "nvlink_total_rx_per_sec", 61: "nvlink_total_tx_per_sec"}
IDS = list(METRICS)
PERCENT = {1, 2, 3, 5, 10, 11, 12, 13}  # the others are MiB/s (metricInfo may carry no unit)


def run(ctx):
    try:
        supported = ctx.device.gpm_supported()
    except nvml.NvmlError as e:
        supported, why = False, str(e)
    else:
        why = "nvmlGpmQueryDeviceSupport: not supported on this GPU"
    if not supported:
        return ctx.results.add(STEP, "GPM", NOT_COMPARED, note=why)
    burn = None
    if ctx.require_burn(STEP, "GPM under load"):
        burn = Burn(ctx, "step6-burn", "check-gpm", 100, ctx.d.gpm)
        wait_present(ctx.device, burn.pid, 60)
        time.sleep(1.5)
    try:
        together, single = sample_twice(ctx)
        dmon, names = ctx.smi.dmon_gpm(ctx.gpu, IDS)
    finally:
        if burn:
            burn.wait(ctx)
    compare_calls(ctx, together, single)
    compare_dmon(ctx, together, dmon, names)


def sample_twice(ctx):
    first, second = ctx.nvml.gpm_sample(), ctx.nvml.gpm_sample()
    try:
        first.take(ctx.device)
        time.sleep(1.0)
        second.take(ctx.device)
        together = {m: (rc, v, unit) for m, rc, v, unit in ctx.nvml.gpm_metrics(first, second, IDS)}
        single = {}
        for m in IDS:
            (_, rc, v, unit), = ctx.nvml.gpm_metrics(first, second, [m])
            single[m] = (rc, v, unit)
        return together, single
    finally:
        first.free()
        second.free()


def compare_calls(ctx, together, single):
    for m in IDS:
        (rc12, v12, unit), (rc1, v1, _) = together[m], single[m]
        name = "GPM %d %s: 12 at once vs alone" % (m, METRICS[m])
        measured = {"together": v12, "alone": v1, "status_together": rc12, "status_alone": rc1, "unit": unit}
        if rc12 != nvml.SUCCESS and rc12 == rc1:
            ctx.results.add(STEP, name, NOT_COMPARED, measured, note="the driver answers %d for this metric" % rc12)
            continue
        nan = any(isinstance(v, float) and math.isnan(v) for v in (v12, v1))
        same = rc12 == rc1 and not nan and abs(v12 - v1) <= 1e-9 * max(1.0, abs(v1))
        ctx.results.check(STEP, name, same, measured, "the same value, no NaN", "NaN" if nan else "")


def compare_dmon(ctx, together, dmon, names):
    if dmon is None:
        return ctx.results.add(STEP, "GPM vs nvidia-smi dmon", NOT_COMPARED, note="dmon: %s" % names)
    for (m, (rc, v, unit)), column in zip(together.items(), names):
        name = "GPM %d %s vs nvidia-smi dmon" % (m, METRICS[m])
        shown = dmon.get(m)
        measured = {"nvml": v, "dmon": shown.text if isinstance(shown, smi.Absent) else shown,
                    "dmon_column": column, "unit": unit}
        if rc != nvml.SUCCESS or not isinstance(shown, float):
            ctx.results.add(STEP, name, NOT_COMPARED, measured, note="not answered by one of the two")
            continue
        tol = 5.0 if m in PERCENT else 0.1 * abs(v) + 1.0
        ctx.results.check(STEP, name, abs(shown - v) <= tol, measured,
                          "± 5 points" if m in PERCENT else "± (10 % + 1 MiB/s)",
                          "dmon averages its own second of the same steady load")
