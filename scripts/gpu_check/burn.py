"""Known load: `gpumeter burn` processes, each owned by the project in its GPUMETER_PROJECT, and
a watcher that notes when each pid is in the GPU's process list."""
import json
import os
import threading
import time

from .nvml import NvmlError


def duration_arg(seconds):
    return "%ds" % seconds if float(seconds).is_integer() else "%dms" % round(seconds * 1000)


class Burn:
    def __init__(self, ctx, name, project, duty, seconds, memory="1GiB"):
        self.name, self.project, self.duty, self.seconds = name, project, duty, seconds
        self.report_path = os.path.join(ctx.out, "burns", name + ".json")
        os.makedirs(os.path.dirname(self.report_path), exist_ok=True)
        args = [ctx.gpumeter, "burn", "--gpus", "0", "--duration", duration_arg(seconds),
                "--duty", duty, "--memory", memory, "--report", self.report_path]
        if ctx.sim:
            args += ["--sim.scenario", ctx.scenario]
        # CUDA numbers GPUs its own way: the one CUDA device it sees is the GPU under test.
        env = dict(ctx.burn_env, GPUMETER_PROJECT=project, CUDA_VISIBLE_DEVICES=ctx.uuid,
                   CUDA_DEVICE_ORDER="PCI_BUS_ID")
        self.proc = ctx.procs.start(name, args, env)
        self.pid = self.proc.pid

    def wait(self, ctx):
        """Waits for the burn to end; returns its report's entry for the GPU under test."""
        rc = self.proc.wait(self.seconds + 120)
        if rc is None:
            self.proc.stop()
            raise RuntimeError("%s did not end within %d s of its duration" % (self.name, 120))
        self.proc.stop()
        if rc != 0:
            raise RuntimeError("%s exited %d: %s" % (self.name, rc, self.proc.log_tail(600)))
        with open(self.report_path) as f:
            report = json.load(f)
        for g in report.get("gpus", []):
            if g.get("uuid") == ctx.uuid:
                g = dict(g, pid=report.get("pid", self.pid), duty_percent=report.get("duty_percent", self.duty))
                return g
        raise RuntimeError("%s's report has no GPU %s: %s" % (self.name, ctx.uuid, report))


class Presence:
    """Polls the GPU's compute process list every `period` seconds from a thread of its own:
    when each pid was first and last seen."""

    def __init__(self, device, period=0.2):
        self.device, self.period = device, period
        self.seen = {}
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self._stop.is_set():
            t = time.time()
            try:
                pids = [pid for pid, _ in self.device.processes()]
            except NvmlError:
                pids = []
            for pid in pids:
                first, _ = self.seen.get(pid, (t, t))
                self.seen[pid] = (first, t)
            self._stop.wait(self.period)

    def stop(self):
        self._stop.set()
        self.thread.join(5)
        return self.seen


def wait_present(device, pid, timeout):
    """Waits until `pid` is in the GPU's process list; returns the time it was seen, or None."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if pid in [p for p, _ in device.processes()]:
                return time.time()
        except NvmlError:
            pass
        time.sleep(0.1)
    return None
