"""Step 5: energy. Over a window under a 100 % burn and one on the idle GPU, the agent's
gpu_energy_joules_total and the ledger's energy (gpu_attributed_energy_joules_total over all
owners, __idle__ included) against the increase of the driver's energy counter
(nvmlDeviceGetTotalEnergyConsumption), read just before and just after each scrape and
interpolated to the scrape's snapshot. Then the
power-sample cadence nvidia-smi -q -d POWER prints against the spacing of the samples
nvmlDeviceGetSamples returns."""
import statistics
import time

from . import nvml
from .burn import Burn, wait_present
from .results import NOT_COMPARED

STEP = 5


def run(ctx):
    if ctx.require_burn(STEP, "loaded window"):
        burn = Burn(ctx, "step5-burn", "check-energy", 100, ctx.d.energy_loaded + 2 * ctx.interval + 6)
        try:
            wait_present(ctx.device, burn.pid, 60)
            time.sleep(2 * ctx.interval + 1)
            window(ctx, "loaded", ctx.d.energy_loaded)
            cadence(ctx)
        finally:
            burn.wait(ctx)
    window(ctx, "idle", ctx.d.energy_idle)


class Bracket:
    """The energy counter read just before and just after a scrape whose snapshot lies between,
    and its value at the snapshot, interpolated (the load is steady over the bracket)."""

    def __init__(self, ctx):
        self.t0, self.e0 = time.time(), ctx.device.energy_mj() / 1000.0
        self.scrape = ctx.agent.scrape_after(time.time())
        self.t1, self.e1 = time.time(), ctx.device.energy_mj() / 1000.0
        t = min(max(self.scrape.snapshot_time, self.t0), self.t1)
        share = (t - self.t0) / (self.t1 - self.t0) if self.t1 > self.t0 else 0.0
        self.at_snapshot = self.e0 + (self.e1 - self.e0) * share


def window(ctx, name, seconds):
    try:
        first = Bracket(ctx)
        time.sleep(seconds)
        last = Bracket(ctx)
    except nvml.NvmlError as e:
        return ctx.results.add(STEP, "%s: energy" % name, NOT_COMPARED, note="energy counter: %s" % e)
    s0, s1 = first.scrape, last.scrape
    nvml_j = last.at_snapshot - first.at_snapshot
    dt = s1.snapshot_time - s0.snapshot_time
    power = nvml_j / dt if dt > 0 else 0.0
    measured = {"nvml_j": nvml_j, "nvml_low_j": last.e0 - first.e1, "nvml_high_j": last.e1 - first.e0,
                "window_s": dt, "mean_power_w": power}
    counter = delta(s0, s1, ctx, "gpu_energy_joules_total")
    tol = 0.005 * nvml_j + 0.1 * power + 1.0
    ctx.results.check(STEP, "%s: gpu_energy_joules_total vs the NVML energy counter" % name,
                      counter is not None and abs(counter - nvml_j) <= tol, dict(measured, agent_j=counter),
                      "± (0.5 %% + 0.1 s at the mean power + 1 J) = ± %.1f J" % tol,
                      "the counter at each snapshot, interpolated between the reads around its scrape")
    ledger = delta(s0, s1, ctx, "gpu_attributed_energy_joules_total")
    period = power_period(ctx)
    tol = 0.02 * nvml_j + 2 * period * power
    ctx.results.check(STEP, "%s: ledger energy (all owners) vs the NVML energy counter" % name,
                      ledger is not None and abs(ledger - nvml_j) <= tol, dict(measured, ledger_j=ledger,
                                                                               power_sample_period_s=period),
                      "± (2 %% + two power-sample periods at the mean power) = ± %.1f J" % tol)


def power_period(ctx):
    """The median spacing of the driver's power samples (1 s where it keeps none)."""
    try:
        stamps = [ts / 1e6 for ts, _ in ctx.device.samples(nvml.TOTAL_POWER_SAMPLES, 0)]
    except nvml.NvmlError:
        stamps = []
    return statistics.median(b - a for a, b in zip(stamps, stamps[1:])) if len(stamps) > 1 else 1.0


def delta(s0, s1, ctx, metric):
    v0, v1 = s0.samples.find(metric, gpu=ctx.gpu), s1.samples.find(metric, gpu=ctx.gpu)
    if not v1:
        return None
    return sum(v for _, v in v1) - sum(v for _, v in v0)


def cadence(ctx):
    name = "power-sample spacing: nvidia-smi -q -d POWER vs nvmlDeviceGetSamples"
    smi = ctx.smi.power_samples(ctx.gpu)
    try:
        stamps = [ts / 1e6 for ts, _ in ctx.device.samples(nvml.TOTAL_POWER_SAMPLES, 0)]
    except nvml.NvmlError as e:
        stamps, error = [], str(e)
    else:
        error = "fewer than two samples"
    if smi is None or smi["samples"] < 2:
        return ctx.results.add(STEP, name, NOT_COMPARED, {"nvidia_smi": smi},
                               note="this nvidia-smi prints no Power Samples section")
    if len(stamps) < 2:
        return ctx.results.add(STEP, name, NOT_COMPARED, {"nvidia_smi": smi}, note=error)
    smi_spacing = smi["duration_s"] / (smi["samples"] - 1)
    nvml_spacing = statistics.median(b - a for a, b in zip(stamps, stamps[1:]))
    measured = dict(smi, nvidia_smi_spacing_s=smi_spacing,
                    nvidia_smi_duration_per_sample_s=smi["duration_s"] / smi["samples"],
                    nvml_samples=len(stamps), nvml_median_spacing_s=nvml_spacing)
    ctx.results.check(STEP, name, abs(smi_spacing - nvml_spacing) <= 0.1 * nvml_spacing, measured, "± 10 %",
                      "spacing = duration / (samples − 1)")
