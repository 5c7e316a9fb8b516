"""gpu-check: checks, on a node with NVIDIA GPUs, that what gpumeter reports and bills is what the
GPU did. Run it through scripts/gpu-check.sh (in the bundle, share/gpumeter/gpu-check/gpu-check.sh),
which finds python3 and gpumeter.

It starts the agent (`gpumeter serve`) on a loopback port and known loads (`gpumeter burn`), and
compares the agent's /metrics with nvidia-smi, the burns' own reports and NVML read directly:

  1  agent vs nvidia-smi: every device value, idle and under a 100 % burn
  2  bill two owners: a 100 % and a 30 % burn, overlapping; allocated and busy seconds per owner
  3  idle sample buffers: nvmlDeviceGetSamples over an idle stretch, and the agent's gap seconds
  4  per-process records: a 20 % and an 80 % burn; nvmlDeviceGetProcessUtilization per pid
  5  energy: the ledger's joules against the driver's energy counter, loaded and idle
  6  GPM: one 12-metric nvmlGpmMetricsGet against single calls and nvidia-smi dmon
  7  cost: the agent's CPU per GPU sample against a Python exporter, in turns

It never changes a GPU setting: no MIG, persistence, accounting or compute mode, clocks, power
limits or resets. Every process it starts is stopped on every exit path.

Exit status: 0 every comparison within its tolerance; 1 one or more outside it (each is named on
stderr and in report.md); 2 no NVIDIA GPU (nvidia-smi missing or listing none) without --sim,
or bad arguments.

Output (--out DIR): report.md, results.json (every comparison: name, step, measured values,
tolerance, status, note), recording.jsonl (the agent's NVML recording, anonymized) and
replay.yaml (a scenario that replays it: gpumeter serve --sim.scenario replay.yaml), agent.yaml
(the agent's generated config), burns/*.json (the burns' reports), logs/ (every process it
started, and every nvidia-smi invocation with its output). Progress goes to stderr.

With --sim every step runs against the fleet simulator instead: the agent, the burns, the NVML
client and sim-nvidia-smi (a stand-in for nvidia-smi) all play one scenario on one clock.

Each step's comparisons and tolerances are described in docs/real-hardware.md.
"""
import argparse
import os
import socket
import sys
import time

from . import check

PACKAGE = os.path.dirname(os.path.abspath(__file__))
# name: (flag help, default seconds, --quick seconds)
DURATIONS = {
    "load": ("step 1: the 100 %% burn of the loaded round", 15, 8),
    "billing": ("step 2: each of the two burns", 60, 16),
    "billing-offset": ("step 2: how long after the first the second starts", 20, 8),
    "idle": ("step 3: the idle stretch", 60, 8),
    "process": ("step 4: the 20 %% and 80 %% burns", 30, 8),
    "energy-loaded": ("step 5: the window under a 100 %% burn", 30, 8),
    "energy-idle": ("step 5: the idle window", 20, 6),
    "gpm": ("step 6: the 100 %% burn the samples are taken under", 10, 8),
    "cost-window": ("step 7: each run's CPU window", 20, 5),
    "cost-warmup": ("step 7: each run's warm-up before its window", 3, 2),
}


def seconds(text):
    """A duration: 60s, 1m, 1m30s, 500ms, or a plain number of seconds."""
    import re
    t = text.strip()
    if re.fullmatch(r"\d+(\.\d+)?", t):
        return float(t)
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", t)
    if not parts or "".join(n + u for n, u in parts) != t:
        raise argparse.ArgumentTypeError("not a duration: %r (write 60s, 1m30s, 500ms)" % text)
    unit = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    return sum(float(n) * unit[u] for n, u in parts)


def steps(text):
    try:
        chosen = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError("--steps takes numbers 1-7, e.g. 1,2")
    if not chosen or not all(1 <= s <= 7 for s in chosen):
        raise argparse.ArgumentTypeError("--steps takes numbers 1-7, e.g. 1,2")
    return chosen


def parser():
    ap = argparse.ArgumentParser(prog="gpu-check.sh", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sim", action="store_true", help="run every step against the fleet simulator")
    ap.add_argument("--quick", action="store_true",
                    help="shorten every duration (about 2 minutes in all; the defaults take about 6.5)")
    ap.add_argument("--out", metavar="DIR", help="output folder, empty or new (default ./gpu-check-<host>-<UTC time>)")
    ap.add_argument("--gpu", type=int, default=0, metavar="INDEX", help="the GPU to check, by NVML index (default 0)")
    ap.add_argument("--steps", type=steps, default=list(range(1, 8)), metavar="LIST",
                    help="the steps to run, e.g. 1,2 (default all: 1-7)")
    ap.add_argument("--gpumeter", metavar="PATH", required=True,
                    help="the gpumeter binary (gpu-check.sh passes it: the bundle's bin/gpumeter, "
                         "else the repository's build/bin/gpumeter)")
    ap.add_argument("--interval", type=seconds, default=1.0, metavar="DURATION",
                    help="the agent's --collect.interval (default 1s); tolerances scale with it")
    ap.add_argument("--nvidia-smi", default="nvidia-smi", metavar="PATH", help="the nvidia-smi to compare with")
    ap.add_argument("--nvml-library", metavar="PATH",
                    help="NVML for the check's own reads and the agent (default libnvidia-ml.so.1; with --sim, "
                         "the simulator beside gpumeter: <bin>/../lib/gpumeter/libnvidia-ml.so.1)")
    ap.add_argument("--peer", metavar="PATH", help="the peer exporter of step 7 (default peer_exporter.py beside "
                    "gpu-check.sh, else the repo's bench/peer_exporter.py)")
    ap.add_argument("--scenario", metavar="FILE", help="with --sim: the scenario (default gpu-check-h100.yaml)")
    ap.add_argument("--plant-fault", choices=sorted(check.FAULTS), help="with --sim only, to test the check: "
                    "sim-lie makes the simulator tell the agent alone a temperature 7 °C high (step 1 fails); "
                    "burn-half-duty makes the burns run at half the duty they report (step 2 fails)")
    for name, (text, full, quick) in DURATIONS.items():
        ap.add_argument("--" + name, type=seconds, metavar="DURATION",
                        help="%s (default %gs, --quick %gs)" % (text, full, quick))
    return ap


class Durations:
    def __init__(self, args):
        for name, (_, full, quick) in DURATIONS.items():
            given = getattr(args, name.replace("-", "_"))
            setattr(self, name.replace("-", "_"), given if given is not None else (quick if args.quick else full))


def first_existing(*paths):
    for p in paths:
        if p and os.path.exists(p):
            return os.path.abspath(p)
    return None


def resolve(args):
    """Paths of the run: the output folder, the simulator, the scenario, the peer exporter."""
    gpumeter = os.path.abspath(args.gpumeter)
    sim_lib = os.path.join(os.path.dirname(os.path.dirname(gpumeter)), "lib", "gpumeter", "libnvidia-ml.so.1")
    up = os.path.dirname(PACKAGE)  # the folder of gpu-check.sh
    scenario = args.scenario or first_existing(
        os.path.join(up, "..", "scenarios", "gpu-check-h100.yaml"),  # bundle: share/gpumeter/scenarios
        os.path.join(up, "..", "deploy", "scenarios", "gpu-check-h100.yaml"))  # the repository
    peer = args.peer or first_existing(os.path.join(up, "peer_exporter.py"),
                                       os.path.join(up, "..", "bench", "peer_exporter.py"))
    out = args.out or "gpu-check-%s-%s" % (socket.gethostname(), time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
    library = args.nvml_library or (sim_lib if args.sim else "libnvidia-ml.so.1")
    return {"gpumeter": gpumeter, "out": os.path.abspath(out), "peer": peer,
            "scenario": os.path.abspath(scenario) if scenario else None, "nvml_library": library}


def usage_errors(args, paths):
    if args.plant_fault and not args.sim:
        return "--plant-fault needs --sim"
    if not os.access(paths["gpumeter"], os.X_OK):
        return "no gpumeter binary at %s (--gpumeter PATH)" % paths["gpumeter"]
    if args.sim and not paths["scenario"]:
        return "no scenario found (--scenario FILE)"
    if args.sim and not os.path.exists(paths["nvml_library"]):
        return "no simulator library at %s (--nvml-library PATH)" % paths["nvml_library"]
    if os.path.isdir(paths["out"]) and os.listdir(paths["out"]):
        return "the output folder %s is not empty" % paths["out"]
    return None


def no_gpu(args):
    """Why there is no GPU to check, or None."""
    import shutil
    from . import smi
    if not shutil.which(args.nvidia_smi):
        return "nvidia-smi not found (%s): no NVIDIA driver on this node" % args.nvidia_smi
    count = smi.Smi([args.nvidia_smi], dict(os.environ), os.devnull).gpu_count()
    if count == 0:
        return "nvidia-smi lists no GPU"
    if args.gpu >= count:
        return "--gpu %d: nvidia-smi lists %d GPU(s)" % (args.gpu, count)
    return None


def main(argv=None):
    args = parser().parse_args(argv)
    args.durations = Durations(args)
    paths = resolve(args)
    problem = usage_errors(args, paths)
    if problem:
        check.log(problem)
        return 2
    if not args.sim:
        problem = no_gpu(args)
        if problem:
            check.log("%s; nothing to check (use --sim to run every step on the simulator)" % problem)
            return 2
    os.makedirs(os.path.join(paths["out"], "logs"), exist_ok=True)
    check.log("output in %s" % paths["out"])
    return check.run(args, paths)


if __name__ == "__main__":
    sys.exit(main())
