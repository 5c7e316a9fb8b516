"""The other AMD models through the real ROCm SMI (Debian's librocm-smi64-1 and rocm-smi, 5.2.3).

`gpumeter sim sysfs` writes the tree of tests/integration/scenarios/amd-models.yaml: an AMD
Instinct MI250X, whose two graphics compute dies are two GPUs (cards 0 and 1), and an AMD Radeon
RX 7900 XTX (card 2: a fan, no ECC), with a job on each. In a private mount namespace
(rocm_namespace.py) the agent and the real `rocm-smi --json` read that tree, and every value
rocm-smi prints, the fan included (-f), is compared with the agent's, as test_rocm does for the
MI300X node.
"""
import os
import subprocess
import sys
import unittest

import harness
import test_rocm
from harness import AgentTestCase, sample

SCENARIO = os.path.join(harness.SOURCE_DIR, "tests", "integration", "scenarios", "amd-models.yaml")
AT = "20m"
GPUS = 3
MODELS = ["AMD Instinct MI250X", "AMD Instinct MI250X", "AMD Radeon RX 7900 XTX"]
RADEON = 2
SMI_FLAGS = ["-f"] + test_rocm.ROCM_SMI_FLAGS
# -f's values: the fan level (pwm1) and its percentage are compared; the RPM is not exported
# (the schema has the ratio only) and is checked against the tree's fan1_input.
FAN_KEYS = {"Fan speed (level)", "Fan speed (%)", "Fan RPM"}


def gpu_metrics_header(tree, card):
    with open(os.path.join(tree, "class", "drm", "card%d" % card, "device", "gpu_metrics"), "rb") as f:
        data = f.read()
    return int.from_bytes(data[0:2], "little"), data[2], data[3], len(data)


class RocmModels(AgentTestCase):
    @classmethod
    def setUpClass(cls):
        test_rocm.read_tree(cls, SCENARIO, AT, __file__, "gpumeter-rocm-models-")

    def infos(self):
        out = {}
        for (name, labels), _ in self.samples.items():
            if name == "gpu_info":
                out[int(dict(labels)["gpu"])] = dict(labels)
        return out

    def series(self, family, gpu):
        return {l: v for (n, l), v in self.samples.items() if n == family and dict(l)["gpu"] == str(gpu)}

    def test_every_value_rocm_smi_prints_matches_the_agent(self):
        cards = sorted(k for k in self.smi if k.startswith("card"))
        self.assertEqual(cards, ["card%d" % i for i in range(GPUS)])
        infos = self.infos()
        for card in cards:
            g = int(card[4:])
            c = self.smi[card]
            with self.subTest(card=card):
                checked = test_rocm.compare_card(self, self.samples, g, c, infos[g])
                if g == RADEON:
                    ratio = sample(self.samples, "gpu_fan_speed_ratio", gpu=str(g))
                    self.assertEqual(round(ratio * 255), int(c["Fan speed (level)"]))  # pwm1 of pwm1_max 255
                    self.assertEqual(round(ratio * 100), int(c["Fan speed (%)"]))
                    hwmon = os.path.join(self.tree, "class", "drm", card, "device", "hwmon", "hwmon%d" % g)
                    with open(os.path.join(hwmon, "fan1_input")) as f:
                        self.assertEqual(int(c["Fan RPM"]), int(f.read()))
                    self.assertGreater(ratio, 0, "a fan standing still would make the check vacuous")
                    checked |= FAN_KEYS
                else:
                    # No fan on an Instinct OAM: rocm-smi prints no fan values, the agent no series.
                    self.assertFalse(FAN_KEYS & set(c), c)
                    self.assertEqual(self.series("gpu_fan_speed_ratio", g), {})
                unexplained = set(c) - checked - test_rocm.NOT_EXPORTED
                self.assertFalse(unexplained, "rocm-smi prints values the test does not compare")

    def test_each_model_in_gpu_info(self):
        infos = self.infos()
        self.assertEqual(sorted(infos), list(range(GPUS)))
        self.assertEqual([infos[g]["model"] for g in range(GPUS)], MODELS)
        self.assertEqual({infos[g]["vendor"] for g in range(GPUS)}, {"amd"})
        # The two GCDs of one MI250X are two GPUs with their own identity and bus address.
        self.assertNotEqual(infos[0]["uuid"], infos[1]["uuid"])
        self.assertNotEqual(infos[0]["pci_bus_id"], infos[1]["pci_bus_id"])
        # Per GCD: 64 GiB, 110 CUs (the KFD node's simd_count / simd_per_cu); the Radeon 24 GiB, 96 CUs.
        for g, gib, cus, device_id in ((0, 64, 110, 0x740C), (1, 64, 110, 0x740C), (2, 24, 96, 0x744C)):
            with self.subTest(gpu=g):
                self.assertEqual(sample(self.samples, "gpu_memory_total_bytes", gpu=str(g)), gib << 30)
                self.assertEqual(int(self.smi["card%d" % g]["GPU ID"], 16), device_id)
                props = {}
                with open(os.path.join(self.tree, "class", "kfd", "kfd", "topology", "nodes", str(g + 1),
                                       "properties")) as f:
                    for line in f:
                        k, v = line.split()
                        props[k] = int(v)
                self.assertEqual(props["simd_count"] // props["simd_per_cu"], cus)
                self.assertEqual(props["device_id"], device_id)

    def test_gpu_metrics_revision_of_each_model(self):
        # amdgpu writes gpu_metrics_v1_3 for both (aldebaran_ppt.c, smu_v13_0_0_ppt.c), which
        # 5.2.3 reads: the energy counter and throttle status the agent takes from it are present.
        for g in range(GPUS):
            with self.subTest(gpu=g):
                self.assertEqual(gpu_metrics_header(self.tree, g), (120, 1, 3, 120))
                self.assertGreater(sample(self.samples, "gpu_energy_joules_total", gpu=str(g)), 0)
                self.assertEqual(len(self.series("gpu_clock_event_active", g)), 1)
        # Navi 31 sets no HBM temperatures or activity accumulators: they keep the 0xFF the
        # kernel fills the table with, which 5.2.3 prints as N/A; the MI250X's HBM reads.
        hbm = ["Temperature (Sensor HBM %d) (C)" % i for i in range(4)]
        radeon = self.smi["card%d" % RADEON]
        self.assertEqual([radeon[k] for k in hbm + ["GFX Activity", "Memory Activity"]], ["N/A"] * 6)
        for g in (0, 1):
            self.assertEqual([float(self.smi["card%d" % g][k]) for k in hbm],
                             [sample(self.samples, "gpu_temperature_celsius", gpu=str(g), sensor="memory")] * 4)

    def test_radeon_has_no_ecc(self):
        # No ras/ folder: rocm-smi prints the Radeon's RAS table with no block in it.
        self.assertEqual(sorted(self.ras), list(range(GPUS)))
        self.assertEqual(self.ras[RADEON], {})
        enabled = {g: {b for b, row in blocks.items() if row[0] == "ENABLED"} for g, blocks in self.ras.items()}
        self.assertEqual(self.series("gpu_ecc_errors_total", RADEON), {})
        # The MI250X's GCDs have RAS: the Radeon's empty set is not the reader's failure.
        for g in (0, 1):
            self.assertEqual(enabled[g], {"umc", "sdma", "gfx", "mmhub"})
            self.assertEqual({dict(l)["block"] for l in self.series("gpu_ecc_errors_total", g)}, enabled[g])

    def test_jobs_on_both_models_and_promtool(self):
        pids = {dict(l)["pid"]: dict(l)["gpu"] for (n, l), _ in self.samples.items()
                if n == "gpu_process_memory_used_bytes"}
        self.assertEqual(pids, {"41001": "0", "41002": "1", "42001": "2"})
        self.assertEqual(sample(self.samples, "gpumeter_backend_up", backend="rocm_smi"), 1)
        r = subprocess.run(["promtool", "check", "metrics"], input=self.body, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


if __name__ == "__main__" and sys.argv[1:2] == ["--inner"]:
    sys.exit(test_rocm.inner(sys.argv[2], gpus=GPUS, smi_flags=SMI_FLAGS))
