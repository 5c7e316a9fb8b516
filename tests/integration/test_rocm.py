"""AMD GPUs through the real ROCm SMI (Debian's librocm-smi64-1 and rocm-smi, 5.2.3).

`gpumeter sim sysfs` writes the amdgpu sysfs tree of a simulated 8x MI300X node. ROCm SMI reads
fixed paths under /sys, so each check runs in a private mount namespace (unshare -m, as root)
with the tree bind-mounted over /sys/class and /sys/module. There the agent and the real
`rocm-smi --json` read the same tree, and every value rocm-smi prints is compared with the
agent's. The library's own behaviour without a tree, with no library and with a library that is
not ROCm SMI is checked outside the namespace.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import harness
import rocm_namespace
from harness import AgentTestCase, Agent, http_get, parse_text, sample

SCENARIO = os.path.join(harness.SOURCE_DIR, "deploy", "scenarios", "mi300x-8x-three-teams.yaml")
AT = "50m"
ROCM_SMI_FLAGS = ["--showuse", "--showmemuse", "--showmeminfo", "vram", "--showtemp", "--showpower", "--showid",
                  "-i", "-v", "--showdriverversion", "--showproductname", "--showserial", "--showuniqueid",
                  "--showbus", "-P", "-M", "--showenergycounter", "-c", "-b", "-p", "--showreplaycount",
                  "--showpids", "--json"]
# What rocm-smi prints that the agent does not export, each for a reason (docs/rocm-behaviour.md).
NOT_EXPORTED = {
    "GPU ID",                # the PCI device id: gpu_info names the model instead
    "Card vendor", "Card model", "Card SKU",  # PCI ids and the VBIOS part number
    "Serial Number",         # the serial is on the landing page, not in gpu_info
    "Voltage (mV)",          # no voltage metric in the schema
    "Energy counter",        # the raw count behind Accumulated Energy, which is compared
    "GFX Activity", "Memory Activity",  # gpu_metrics accumulators the agent does not read
    "mclk clock level:", "sclk clock level:", "sclk clock level",  # DPM level indices
    "Temperature (Sensor HBM 0) (C)", "Temperature (Sensor HBM 1) (C)",
    "Temperature (Sensor HBM 2) (C)", "Temperature (Sensor HBM 3) (C)",  # per-stack HBM
}


def matches(samples, name, **labels):
    """How many samples of `name` have `labels`."""
    return sum(1 for (n, ls) in samples if n == name and set(labels.items()) <= set(ls))


def in_namespace(tree, argv, timeout=120):
    """Runs argv with `tree` over /sys/class and /sys/module and a private /dev/shm."""
    return subprocess.run(rocm_namespace.argv(tree, argv), capture_output=True, text=True, timeout=timeout)


def inner(out_dir, scenario=None, gpus=8, smi_flags=ROCM_SMI_FLAGS):
    """In the namespace: the agent's metrics and rocm-smi's JSON, written to out_dir. With a
    scenario, NVIDIA GPUs come from the simulated NVML playing it; without, NVML is missing and
    all `gpus` GPUs are AMD's."""
    if scenario:
        agent = Agent(scenario=scenario)
    else:
        agent = Agent(nvml_library=os.path.join(out_dir, "no-such-libnvidia-ml.so.1"))
    try:
        agent.wait_ready()
        def complete():
            body = agent.metrics()[1]
            # PCIe throughput comes from the backend's own reader thread (AMD GPUs only; NVIDIA's
            # is GPM, off by default): on the mixed node the AMD GPUs are 4..7.
            amd = range(4, 8) if scenario else range(gpus)
            return ('pid="' in body and all('gpu_allocated_seconds_total{gpu="%d"' % g in body for g in range(gpus)) and
                    all('gpu_pcie_throughput_bytes_per_second{gpu="%d"' % g in body for g in amd))
        harness.wait_until(complete, what="process series and every GPU's ledger and PCIe throughput series")
        _, body = agent.metrics()
    finally:
        agent.stop()
    with open(os.path.join(out_dir, "metrics.txt"), "w") as f:
        f.write(body)
    with open(os.path.join(out_dir, "agent.log"), "w") as f:
        f.write(agent.process.log())
    smi = subprocess.run(["rocm-smi"] + list(smi_flags), capture_output=True, text=True, timeout=60)
    with open(os.path.join(out_dir, "rocm-smi.json"), "w") as f:
        f.write(smi.stdout)
    # --showrasinfo prints no JSON at 5.2.3 (printTableLog returns under --json): its table.
    ras = subprocess.run(["rocm-smi", "--showrasinfo", "all"], capture_output=True, text=True, timeout=60)
    with open(os.path.join(out_dir, "rocm-smi-ras.txt"), "w") as f:
        f.write(ras.stdout)
    return 0


def ras_tables(text):
    """rocm-smi --showrasinfo's text: {gpu: {block: (status, first count, second count) or (status,)}}.
    At 5.2.3 the header names the third column 'uncorrectable err' but the rows hold the
    correctable count there and the uncorrectable one after it (showRasInfo appends
    correctable_err first)."""
    out, gpu = {}, None
    for line in text.splitlines():
        if line.startswith("GPU["):
            gpu = int(line[4:line.index("]")])
            out[gpu] = {}
            continue
        words = line.split()
        if gpu is None or not words or words[0] == "Block" or not words[0].isupper() or len(words) not in (2, 4):
            continue
        out[gpu][words[0].lower()] = tuple([words[1]] + [int(w) for w in words[2:]])
    return out


def mhz_of(text):
    """'(2100Mhz)' -> 2100"""
    return int(text.strip("()").lower().replace("mhz", ""))


def device_file(tree, card, name):
    """The bytes of `name` under card `card`'s device folder in the tree, or None."""
    path = os.path.join(tree, "class", "drm", "card%d" % card, "device", name)
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        return f.read()


def hwmon_file(tree, card, name):
    """The text of hwmon `name` of card `card` in the tree, or None (the tree writes one hwmon
    per card, hwmon<card>)."""
    data = device_file(tree, card, os.path.join("hwmon", "hwmon%d" % card, name))
    return None if data is None else data.decode()


def tree_power(tc, tree, card):
    """The power of a card without power1_average (MI300X), in watts, from its power1_input;
    checks that gpu_metrics' socket power (byte 22) says the same."""
    tc.assertIsNone(hwmon_file(tree, card, "power1_average"), "card %d has power1_average" % card)
    watts = int(hwmon_file(tree, card, "power1_input")) / 1e6
    tc.assertEqual(int.from_bytes(device_file(tree, card, "gpu_metrics")[22:24], "little"), watts)
    return watts


def compare_card(tc, samples, g, c, info, tree=None):
    """Compares every value rocm-smi printed for card `g` (`c`, its JSON object) that the agent
    exports with the agent's `samples` (parse_text); `info` is the card's gpu_info labels. Where
    rocm-smi 5.2.3 prints no power (it reads only power1_average, which amdgpu hides on MI300X),
    the agent's is compared with the `tree`'s power1_input. Returns the keys compared."""
    def value(name, **labels):
        return sample(samples, name, gpu=str(g), **labels)

    checked = set()

    def check(key, agent_value, smi_value=None):
        checked.add(key)
        tc.assertEqual(agent_value, smi_value if smi_value is not None else c[key], key)

    tc.assertEqual(info["vendor"], "amd")
    check("Unique ID", info["uuid"])
    check("VBIOS version", info["vbios_version"])
    check("PCI Bus", info["pci_bus_id"].upper(), c["PCI Bus"].upper())
    check("Card series", info["model"])
    check("GPU use (%)", round(value("gpu_utilization_ratio") * 100), int(c["GPU use (%)"]))
    check("GPU memory use (%)", round(value("gpu_memory_utilization_ratio") * 100),
          int(c["GPU memory use (%)"]))
    check("VRAM Total Memory (B)", int(value("gpu_memory_total_bytes")),
          int(c["VRAM Total Memory (B)"]))
    check("VRAM Total Used Memory (B)", int(value("gpu_memory_used_bytes")),
          int(c["VRAM Total Used Memory (B)"]))
    for key, sensor in (("Temperature (Sensor edge) (C)", "gpu"),
                        ("Temperature (Sensor junction) (C)", "junction"),
                        ("Temperature (Sensor memory) (C)", "memory")):
        check(key, value("gpu_temperature_celsius", sensor=sensor), float(c[key]))
    power = c["Average Graphics Package Power (W)"]
    tc.assertTrue(power != "N/A" or tree, "rocm-smi printed no power for card %d and there is no tree" % g)
    check("Average Graphics Package Power (W)", value("gpu_power_watts"),
          tree_power(tc, tree, g) if power == "N/A" else float(power))
    check("Max Graphics Package Power (W)", value("gpu_power_limit_watts"),
          float(c["Max Graphics Package Power (W)"]))
    # rocm-smi prints µJ with two decimals; the agent's joules carry the same count.
    check("Accumulated Energy (uJ)", round(value("gpu_energy_joules_total") * 1e6, 2),
          float(c["Accumulated Energy (uJ)"]))
    check("sclk clock speed:", value("gpu_clock_hertz", clock="graphics"),
          mhz_of(c["sclk clock speed:"]) * 1e6)
    check("mclk clock speed:", value("gpu_clock_hertz", clock="memory"),
          mhz_of(c["mclk clock speed:"]) * 1e6)
    gts, width = c["pcie clock level"].split("(")[1].rstrip(")").split(" x")
    gen = {"2.5GT/s": 1, "5.0GT/s": 2, "8.0GT/s": 3, "16.0GT/s": 4, "32.0GT/s": 5}[gts]
    check("pcie clock level", (value("gpu_pcie_link_generation"),
                               value("gpu_pcie_link_width")), (gen, int(width)))
    check("PCIe Replay Count", value("gpu_pcie_replay_errors_total"),
          float(c["PCIe Replay Count"]))
    check("Performance Level", value("gpu_performance_level", level=c["Performance Level"]), 1)
    tc.assertEqual(sum(v for (n, l), v in samples.items()
                       if n == "gpu_performance_level" and dict(l)["gpu"] == str(g)), 1)
    # rocm-smi: (sent + received) x max payload / 2^20, printed with three decimals.
    tx = value("gpu_pcie_throughput_bytes_per_second", direction="transmit")
    rx = value("gpu_pcie_throughput_bytes_per_second", direction="receive")
    key = "Estimated maximum PCIe bandwidth over the last second (MB/s)"
    check(key, "%.3f" % ((tx + rx) / 1024.0 / 1024.0))
    return checked


def run_on_tree(scenario, at, script, mode, prefix, *args):
    """Writes the scenario's amdgpu tree at `at` in a new directory, and runs `script mode <dir>
    args...` in the namespace with that tree over /sys; returns the directory, where the run
    wrote its files."""
    work = tempfile.mkdtemp(prefix=prefix)
    tree = os.path.join(work, "tree")
    subprocess.run([harness.BIN, "sim", "sysfs", tree, "--scenario", scenario, "--at", at], check=True,
                   capture_output=True)
    r = in_namespace(tree, [sys.executable, os.path.abspath(script), mode, work, *args], timeout=240)
    if r.returncode != 0:
        raise AssertionError("namespace run failed:\n" + r.stdout + r.stderr)
    return work


def read_tree(cls, scenario, at, script, prefix):
    """Writes the scenario's tree at `at`, runs `script --inner` on it in the namespace (the agent
    and rocm-smi), and keeps what they printed on `cls`: dir, tree, body, samples, smi, log, ras."""
    cls.dir = run_on_tree(scenario, at, script, "--inner", prefix)
    cls.tree = os.path.join(cls.dir, "tree")
    with open(os.path.join(cls.dir, "metrics.txt")) as f:
        cls.body = f.read()
    cls.samples = parse_text(cls.body)
    with open(os.path.join(cls.dir, "rocm-smi.json")) as f:
        cls.smi = json.load(f)
    with open(os.path.join(cls.dir, "agent.log")) as f:
        cls.log = f.read()
    with open(os.path.join(cls.dir, "rocm-smi-ras.txt")) as f:
        cls.ras = ras_tables(f.read())


class RocmSmiAgreement(AgentTestCase):
    @classmethod
    def setUpClass(cls):
        read_tree(cls, SCENARIO, AT, __file__, "gpumeter-rocm-")

    def value(self, name, gpu, **labels):
        return sample(self.samples, name, gpu=str(gpu), **labels)

    def info(self, gpu):
        for (name, labels), _ in self.samples.items():
            d = dict(labels)
            if name == "gpu_info" and d["gpu"] == str(gpu):
                return d
        raise AssertionError("no gpu_info for GPU %d" % gpu)

    def test_every_value_rocm_smi_prints_matches_the_agent(self):
        cards = sorted(k for k in self.smi if k.startswith("card"))
        self.assertEqual(cards, ["card%d" % i for i in range(8)])
        for card in cards:
            g = int(card[4:])
            c = self.smi[card]
            info = self.info(g)
            with self.subTest(card=card):
                checked = compare_card(self, self.samples, g, c, info, self.tree)
                unexplained = set(c) - checked - NOT_EXPORTED
                self.assertFalse(unexplained, "rocm-smi prints values the test does not compare")

    def test_pcie_directions_follow_the_kernels_counters(self):
        # rocm-smi prints only the sum; the directions are checked against pcie_bw itself, whose
        # first counter counts received messages and the second sent ones (amdgpu).
        busy = 0
        for g in range(8):
            link = os.path.join(self.tree, "class", "drm", "card%d" % g)
            with open(os.path.join(link, "device", "pcie_bw")) as f:
                received, sent, mps = (int(x) for x in f.read().split())
            with self.subTest(gpu=g):
                self.assertEqual(self.value("gpu_pcie_throughput_bytes_per_second", g, direction="receive"),
                                 received * mps)
                self.assertEqual(self.value("gpu_pcie_throughput_bytes_per_second", g, direction="transmit"),
                                 sent * mps)
            busy += received > 0
        self.assertGreater(busy, 0, "no GPU moved data over PCIe at %s: the check would be vacuous" % AT)

    def test_mi300x_power_without_power1_average(self):
        # MI300X has no average power sensor: amdgpu shows power1_input, not power1_average, and
        # Debian's 5.2.3 library, which reads power only from power1_average
        # (rsmi_dev_power_ave_get), answers NOT_SUPPORTED, so rocm-smi prints N/A. The agent
        # falls back to gpu_metrics' socket power, which the MI300X kernel fills with its current
        # socket power in whole watts, as power1_input has it (docs/rocm-behaviour.md, "Power").
        powers = set()
        for g in range(8):
            with self.subTest(gpu=g):
                self.assertEqual(self.smi["card%d" % g]["Average Graphics Package Power (W)"], "N/A")
                self.assertEqual(hwmon_file(self.tree, g, "power1_label"), "PPT\n")
                # gpu_metrics 1.3 (120 bytes), as smu_v13_0_6 wrote it before 1.4, which 5.2.3 cannot read.
                self.assertEqual(device_file(self.tree, g, "gpu_metrics")[:4], bytes([120, 0, 1, 3]))
                watts = tree_power(self, self.tree, g)
                self.assertEqual(self.value("gpu_power_watts", g), watts)
                self.assertIn('msg="GPU power read from gpu_metrics, in whole watts: no ROCm SMI power entry point '
                              'answered" backend=rocm_smi device=%d' % g, self.log)
                powers.add(watts)
        self.assertGreater(len(powers), 1, "every GPU draws the same power at %s: the check would be vacuous" % AT)
        # NOT_SUPPORTED is no call error.
        for call in ("rsmi_dev_power_ave_get", "rsmi_dev_gpu_metrics_info_get"):
            self.assertEqual(matches(self.samples, "gpumeter_backend_call_errors_total", call=call), 0, call)

    def test_throttle_status_from_gpu_metrics(self):
        # rocm-smi 5.2.3 prints no throttle status: the agent's is checked against gpu_metrics'
        # throttle_status (a u32 at byte 68 of content revision 3, as of 1) in the tree.
        for g in range(8):
            status = int.from_bytes(device_file(self.tree, g, "gpu_metrics")[68:72], "little")
            with self.subTest(gpu=g):
                self.assertEqual(self.value("gpu_clock_event_active", g, reason="throttled"), 1 if status else 0)
                reasons = {dict(l)["reason"] for (n, l), _ in self.samples.items()
                           if n == "gpu_clock_event_active" and dict(l)["gpu"] == str(g)}
                self.assertEqual(reasons, {"throttled"})

    def test_ecc_per_block_matches_rocm_smi_ras_info(self):
        self.assertEqual(sorted(self.ras), list(range(8)))
        for g, blocks in self.ras.items():
            with self.subTest(gpu=g):
                enabled = {b for b, row in blocks.items() if row[0] == "ENABLED"}
                self.assertEqual(enabled, {"umc", "sdma", "gfx", "mmhub"})
                agent = {}
                for (n, l), v in self.samples.items():
                    d = dict(l)
                    if n == "gpu_ecc_errors_total" and d["gpu"] == str(g):
                        agent[(d["block"], d["severity"])] = v
                self.assertEqual({b for b, _ in agent}, enabled)
                for b in enabled:
                    _, corrected, uncorrected = blocks[b]
                    self.assertEqual(agent[(b, "corrected")], corrected, b)
                    self.assertEqual(agent[(b, "uncorrected")], uncorrected, b)

    def test_driver_version_and_processes(self):
        system = self.smi["system"]
        self.assertEqual(self.info(0)["driver_version"], system["Driver version"])
        pids = {k[3:]: v.split(", ") for k, v in system.items() if k.startswith("PID")}
        self.assertEqual(len(pids), 8)
        for pid, (_, gpus, vram, _sdma, _cu) in pids.items():
            self.assertEqual(gpus, "1")
            found = [v for (n, labels), v in self.samples.items()
                     if n == "gpu_process_memory_used_bytes" and dict(labels)["pid"] == pid]
            self.assertEqual(found, [float(vram)], pid)

    def test_backends_and_promtool(self):
        self.assertEqual(sample(self.samples, "gpumeter_backend_up", backend="rocm_smi"), 1)
        # No NVML library on this AMD-only node: absent, not down.
        self.assertEqual(sample(self.samples, "gpumeter_backend_absent", backend="nvml"), 1)
        self.assertEqual(matches(self.samples, "gpumeter_backend_up", backend="nvml"), 0)
        r = subprocess.run(["promtool", "check", "metrics"], input=self.body, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("ROCm SMI backend up", self.log)


def inner_down(out_dir, library):
    """In the namespace, where the node has AMD GPUs: the agent with `--rocm.library library`
    beside the simulated NVIDIA node; its metrics and log, written to out_dir."""
    agent = Agent(scenario=os.path.join(harness.SOURCE_DIR, "deploy", "scenarios", "h100-8x-three-teams.yaml"),
                  extra_args=["--rocm.library", library])
    try:
        agent.wait_ready()
        body = agent.metrics()[1]
    finally:
        agent.stop()
    with open(os.path.join(out_dir, "metrics.txt"), "w") as f:
        f.write(body)
    with open(os.path.join(out_dir, "agent.log"), "w") as f:
        f.write(agent.process.log())
    return 0


class RocmMissing(AgentTestCase):
    """No usable ROCm SMI. On a node without AMD GPUs (this host) ROCm SMI is absent whatever the
    library: no gpumeter_backend_up series for it, one log line, and rsmi_init is not called, so
    the library prints nothing of its own. On a node with AMD GPUs (the simulated tree in the
    namespace), a missing library or one that is not ROCm SMI is down. NVIDIA is unaffected."""

    def agent_output(self, library, amd_gpus):
        if not amd_gpus:
            args = ["--rocm.library", library] if library else []
            agent = self.track(Agent(scenario=os.path.join(harness.SOURCE_DIR, "deploy", "scenarios",
                                                           "h100-8x-three-teams.yaml"), extra_args=args))
            agent.wait_ready()
            _, body = agent.metrics()
            self.assertEqual(agent.stop(), 0)
            return parse_text(body), agent.process.log()
        work = run_on_tree(SCENARIO, AT, __file__, "--inner-down", "gpumeter-rocm-down-", library)
        with open(os.path.join(work, "metrics.txt")) as f:
            samples = parse_text(f.read())
        with open(os.path.join(work, "agent.log")) as f:
            return samples, f.read()

    def check(self, library, amd_gpus, reason):
        samples, log = self.agent_output(library, amd_gpus)
        if amd_gpus:
            self.assertEqual(sample(samples, "gpumeter_backend_up", backend="rocm_smi"), 0)
            self.assertEqual(matches(samples, "gpumeter_backend_absent", backend="rocm_smi"), 0)
        else:
            self.assertEqual(matches(samples, "gpumeter_backend_up", backend="rocm_smi"), 0)
            self.assertEqual(sample(samples, "gpumeter_backend_absent", backend="rocm_smi"), 1)
        self.assertEqual(sample(samples, "gpumeter_backend_up", backend="nvml"), 1)
        self.assertEqual(sample(samples, "gpu_up", gpu="7", uuid=self.info_uuid(samples, 7)), 1)
        lines = [l for l in log.splitlines() if "ROCm SMI" in l]
        self.assertEqual(len(lines), 1, log)
        self.assertIn(reason, lines[0])
        self.assertIn("level=warn" if amd_gpus else "level=info", lines[0])
        # Only the agent's own lines: the library's stderr ("Exception caught: rsmi_init.") is
        # neither logfmt nor JSON.
        self.assertEqual([l for l in log.splitlines() if l.strip() and not l.startswith("ts=")], [], log)

    @staticmethod
    def info_uuid(samples, gpu):
        for (name, labels), _ in samples.items():
            d = dict(labels)
            if name == "gpu_info" and d["gpu"] == str(gpu):
                return d["uuid"]
        raise AssertionError("no GPU %d" % gpu)

    def test_no_amd_gpu_is_absent_whatever_the_library(self):
        missing = os.path.join(tempfile.mkdtemp(), "librocm_smi64.so.1")
        for library in ("", missing, "libz.so.1"):
            with self.subTest(library=library):
                self.check(library, False, "no AMD GPU in /sys/class/drm")

    def test_amd_gpus_without_a_library_are_down(self):
        missing = os.path.join(tempfile.mkdtemp(), "librocm_smi64.so.1")
        self.check(missing, True, "but no ROCm SMI library")

    def test_amd_gpus_with_a_library_that_is_not_rocm_smi_are_down(self):
        self.check("libz.so.1", True, "is not a ROCm SMI library")


class MixedNode(AgentTestCase):
    """4 simulated NVIDIA GPUs and 4 simulated AMD GPUs in one agent, on one schema."""

    def test_one_agent_serves_both_vendors(self):
        scenario = os.path.join(harness.SOURCE_DIR, "deploy", "scenarios", "mixed-4h100-4mi300x.yaml")
        work = run_on_tree(scenario, AT, __file__, "--inner", "gpumeter-mixed-", scenario)
        with open(os.path.join(work, "metrics.txt")) as f:
            body = f.read()
        samples = parse_text(body)
        infos = {}
        for (name, labels), _ in samples.items():
            d = dict(labels)
            if name == "gpu_info":
                infos[int(d["gpu"])] = d
        self.assertEqual(sorted(infos), list(range(8)))
        self.assertEqual([infos[g]["vendor"] for g in range(8)], ["nvidia"] * 4 + ["amd"] * 4)
        self.assertEqual([infos[g]["model"] for g in range(8)],
                         ["NVIDIA H100 80GB HBM3"] * 4 + ["AMD Instinct MI300X"] * 4)
        self.assertEqual(len({infos[g]["uuid"] for g in range(8)}), 8)
        # The same families for both vendors, the gpu label unique per GPU.
        for family in ("gpu_up", "gpu_utilization_ratio", "gpu_power_watts", "gpu_energy_joules_total",
                       "gpu_memory_used_bytes", "gpu_allocated_seconds_total"):
            gpus = {dict(l)["gpu"] for (n, l), _ in samples.items() if n == family}
            self.assertEqual(gpus, {str(g) for g in range(8)}, family)
        for g in range(4, 8):
            self.assertEqual(sample(samples, "gpu_temperature_celsius", gpu=str(g), uuid=infos[g]["uuid"],
                                    sensor="gpu") is not None, True)
        self.assertEqual(sample(samples, "gpumeter_backend_up", backend="nvml"), 1)
        self.assertEqual(sample(samples, "gpumeter_backend_up", backend="rocm_smi"), 1)
        r = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


if __name__ == "__main__" and sys.argv[1:2] == ["--inner"]:
    sys.exit(inner(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None))
if __name__ == "__main__" and sys.argv[1:2] == ["--inner-down"]:
    sys.exit(inner_down(sys.argv[2], sys.argv[3]))
