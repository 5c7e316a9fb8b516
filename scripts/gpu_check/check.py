"""The run: set up the output folder, the environment, the NVML client, nvidia-smi and the agent
under test; run the steps chosen; always stop every process and write the results."""
import os
import socket
import subprocess
import sys
import time
import traceback

from . import agent as agent_mod
from . import nvml, report, smi
from . import step_billing, step_cost, step_devices, step_energy, step_gpm, step_idle, step_process
from .procs import ProcessSet, exit_on_signals
from .results import FAIL, Results

STEPS = [(1, "Agent vs nvidia-smi", step_devices), (2, "Bill two owners", step_billing),
         (3, "Idle sample buffers", step_idle), (4, "Per-process records", step_process),
         (5, "Energy", step_energy), (6, "GPM", step_gpm), (7, "Cost against the peer exporter", step_cost)]
PACKAGE = os.path.dirname(os.path.abspath(__file__))
FAULTS = {"sim-lie": ("agent", {"GPUMETER_SIM_LIE": "temperature:+7"}),
          "burn-half-duty": ("burn", {"GPUMETER_TEST_BURN_FAULT": "half-duty"})}


def log(message):
    sys.stderr.write("gpu-check: %s\n" % message)
    sys.stderr.flush()


class Context:
    def __init__(self, args, paths):
        self.args, self.sim, self.d = args, args.sim, args.durations
        self.out, self.gpumeter, self.scenario = paths["out"], paths["gpumeter"], paths["scenario"]
        self.peer, self.nvml_library, self.python = paths["peer"], paths["nvml_library"], sys.executable
        self.gpu, self.interval = str(args.gpu), args.interval
        self.results = Results([(n, t) for n, t, _ in STEPS if n in args.steps])
        self.agent_env, self.burn_env = {}, {}
        if args.plant_fault:
            who, env = FAULTS[args.plant_fault]
            (self.agent_env if who == "agent" else self.burn_env).update(env)
        # What every agent of the run is given (step 7 starts more), besides the recording.
        self.agent_args = ["--sim.scenario", self.scenario] if self.sim else []
        self.procs = self.agent = self.nvml = self.device = None
        self.burn_ok = False

    def require_burn(self, step, what):
        if not self.burn_ok:
            self.results.add(step, "gpumeter burn, for the %s" % what, FAIL,
                             note="`%s burn --help` failed: this build of gpumeter has no burn command" % self.gpumeter)
        return self.burn_ok

    def setup(self):
        self.procs = ProcessSet(os.path.join(self.out, "logs"), dict(os.environ))
        self.nvml = nvml.Nvml(self.nvml_library)
        self.gpu_count = self.nvml.count()
        if int(self.gpu) >= self.gpu_count:
            raise RuntimeError("--gpu %s: NVML has %d GPUs" % (self.gpu, self.gpu_count))
        self.device = self.nvml.device(int(self.gpu))
        self.uuid = self.device.uuid()
        smi_cmd = [self.python, os.path.join(PACKAGE, "sim-nvidia-smi")] if self.sim else [self.args.nvidia_smi]
        self.smi = smi.Smi(smi_cmd, dict(os.environ), os.path.join(self.out, "logs", "nvidia-smi.log"))
        self.burn_ok = subprocess.run([self.gpumeter, "burn", "--help"], capture_output=True).returncode == 0
        self.config = agent_mod.write_config(os.path.join(self.out, "agent.yaml"))
        self.start_agent()
        self.describe()

    def start_agent(self):
        if not self.sim and self.args.nvml_library:
            self.agent_args += ["--nvml.library", self.args.nvml_library]
        args = list(self.agent_args)
        self.recording = os.path.join(self.out, "recording.jsonl")
        self.records = agent_mod.has_flag(self.gpumeter, ["serve"], "--nvml.record")
        if self.records:
            args += ["--nvml.record", self.recording, "--nvml.record-anonymize"]
        self.agent = agent_mod.Agent(self.procs, "agent", self.gpumeter, self.config, self.interval, args,
                                     self.agent_env)
        self.agent.wait_ready()

    def describe(self):
        version = subprocess.run([self.gpumeter, "--version"], capture_output=True, text=True).stdout.strip()
        self.results.info.update({
            "host": socket.gethostname(), "mode": "simulator" if self.sim else "real GPUs",
            "scenario": self.scenario if self.sim else None, "gpu": int(self.gpu), "uuid": self.uuid,
            "gpu_name": self.device.name(), "driver_version": self.nvml.driver_version(),
            "gpumeter": version, "gpumeter_path": self.gpumeter, "collect_interval_s": self.interval,
            "quick": self.args.quick, "planted_fault": self.args.plant_fault, "steps": self.args.steps,
            "burn_available": self.burn_ok, "recording_flag": self.records})


def sim_environment(out, scenario, library):
    """One scenario clock for every simulated process: set once, inherited by all."""
    for name in ("GPUMETER_SIM_TIME_SCALE", "GPUMETER_SIM_EPOCH_FILE", "GPUMETER_SIM_UNSUPPORTED",
                 "GPUMETER_SIM_LIE", "GPUMETER_TEST_BURN_FAULT"):
        os.environ.pop(name, None)
    cuda_dir = os.path.join(out, "sim-cuda")
    os.makedirs(cuda_dir, exist_ok=True)
    os.environ.update({"GPUMETER_SIM_SCENARIO": scenario, "GPUMETER_SIM_EPOCH": repr(time.time()),
                       "GPUMETER_SIM_CUDA_DIR": cuda_dir, "GPU_CHECK_NVML_LIBRARY": library})


def run_steps(ctx):
    for number, title, module in STEPS:
        if number not in ctx.args.steps:
            continue
        log("step %d: %s" % (number, title))
        start = time.time()
        try:
            module.run(ctx)
        except Exception as e:  # a step that breaks is a failed step; the others still run
            ctx.results.add(number, "step %d ran to its end" % number, FAIL,
                            note="%s: %s" % (type(e).__name__, e))
            with open(os.path.join(ctx.out, "logs", "gpu-check-errors.log"), "a") as f:
                f.write(traceback.format_exc() + "\n")
        items = ctx.results.of_step(number)
        log("step %d: %d compared, %d failed (%.0f s)" % (
            number, len(items), sum(1 for c in items if c.status == FAIL), time.time() - start))


def run(args, paths):
    exit_on_signals()
    if args.sim:
        sim_environment(paths["out"], paths["scenario"], paths["nvml_library"])
    ctx, started = Context(args, paths), time.time()
    ctx.results.info["started_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started))
    try:
        ctx.setup()
        run_steps(ctx)
    except Exception as e:
        ctx.results.add(0, "set-up", FAIL, note="%s: %s" % (type(e).__name__, e))
        log("set-up failed: %s" % e)
    except (KeyboardInterrupt, SystemExit) as e:
        ctx.results.add(0, "run", FAIL, note="interrupted (%s)" % type(e).__name__)
        log("interrupted; stopping every process")
    finally:
        if ctx.procs:
            ctx.procs.stop_all()
        if ctx.nvml:
            ctx.nvml.shutdown()
        finish(ctx, started)
    return 1 if ctx.results.failures() else 0


def finish(ctx, started):
    ctx.results.info["seconds"] = round(time.time() - started, 1)
    if ctx.results.of_step(0):
        ctx.results.steps.insert(0, (0, "Set-up and run"))
    ctx.results.write_json(os.path.join(ctx.out, "results.json"))
    recording = agent_mod.recording_summary(os.path.join(ctx.out, "recording.jsonl"))
    if recording:
        agent_mod.write_replay_scenario(os.path.join(ctx.out, "replay.yaml"), recording["path"])
    report.write(os.path.join(ctx.out, "report.md"), ctx.results, recording, ctx.out)
    failures = ctx.results.failures()
    log("%s in %.0f s; %s" % ("FAILED" if failures else "passed", time.time() - started,
                               os.path.join(ctx.out, "report.md")))
    for c in failures:
        log("  failed: step %d: %s" % (c.step, c.name))
