"""GPM and NVLink read through ctypes the way pynvml reads them (CDLL on the simulated library,
nvmlGpmSampleAlloc into a c_void_p, a c_nvmlGpmMetricsGet_t with version 1 and a metrics array,
nvmlGpmMetricsGet by reference), on the profiling scenarios: on the H100 node the metrics of a
constant load match `gpumeter sim truth`; on the A100 node GPM is unsupported and NVLink present. On
mig-h100.yaml each MIG GPU instance's samples (nvmlGpmMigSampleGet on the parent, nvmlGpmSampleGet on
the MIG device handle) match the truth's per-instance GPM, and PCIe/NVLink answer NOT_SUPPORTED."""
import ctypes
import os
import sys
import time
import unittest

import sanitizer_preload
from ctypes import byref, c_int, c_uint, c_void_p


sanitizer_preload.preload(__name__)

import harness

# The GPM structs as the self-check kit's ctypes client declares them (scripts/gpu_check/nvml.py):
# one declaration, checked here against the simulator and there against real drivers.
sys.path.insert(0, os.path.join(harness.SOURCE_DIR, "scripts"))
from gpu_check.nvml import GpmMetricsGet, GpmSupport  # noqa: E402

SUCCESS, INVALID_ARGUMENT, NOT_SUPPORTED, NOT_FOUND = 0, 2, 3, 6
GPM_METRICS_GET_VERSION, GPM_SUPPORT_VERSION = 1, 1
GRAPHICS_UTIL, SM_UTIL, SM_OCCUPANCY, ANY_TENSOR_UTIL, DRAM_BW_UTIL, FP32_UTIL, FP16_UTIL = 1, 2, 3, 5, 10, 12, 13
PCIE_TX_PER_SEC, NVLINK_TOTAL_RX_PER_SEC, NVLINK_TOTAL_TX_PER_SEC = 20, 60, 61
FI_NVLINK_LINK_COUNT, FI_NVLINK_GET_STATE = 91, 165
MIB = 1024.0 * 1024.0


class FieldValue(ctypes.Structure):  # nvmlFieldValue_t
    _fields_ = [("fieldId", c_uint), ("scopeId", c_uint), ("timestamp", ctypes.c_longlong),
                ("latencyUsec", ctypes.c_longlong), ("valueType", c_uint), ("nvmlReturn", c_int),
                ("value", ctypes.c_ulonglong)]


class GpmClient(unittest.TestCase):
    lib = None

    def start(self, scenario, now):
        os.environ["GPUMETER_SIM_SCENARIO"] = os.path.join(harness.SCENARIOS, scenario)
        os.environ["GPUMETER_SIM_EPOCH"] = repr(time.time() - now)
        os.environ.pop("GPUMETER_SIM_TIME_SCALE", None)
        if GpmClient.lib is None:
            GpmClient.lib = ctypes.CDLL(harness.SIM_LIB)
        self.assertEqual(self.lib.nvmlInit_v2(), SUCCESS)
        self.addCleanup(self.lib.nvmlShutdown)

    def handle(self, i):
        h = c_void_p()
        self.assertEqual(self.lib.nvmlDeviceGetHandleByIndex_v2(c_uint(i), byref(h)), SUCCESS)
        return h

    def supported(self, h):
        s = GpmSupport(GPM_SUPPORT_VERSION, 7)
        self.assertEqual(self.lib.nvmlGpmQueryDeviceSupport(h, byref(s)), SUCCESS)
        return s.isSupportedDevice

    def alloc(self):
        s = c_void_p()
        self.assertEqual(self.lib.nvmlGpmSampleAlloc(byref(s)), SUCCESS)
        self.addCleanup(self.lib.nvmlGpmSampleFree, s)
        return s

    def test_h100_metrics_match_the_truth(self):
        self.start("profiling-h100.yaml", 20)
        h = self.handle(0)
        self.assertEqual(self.supported(h), 1)
        s1, s2 = self.alloc(), self.alloc()
        self.assertEqual(self.lib.nvmlGpmSampleGet(h, s1), SUCCESS)
        time.sleep(0.5)
        self.assertEqual(self.lib.nvmlGpmSampleGet(h, s2), SUCCESS)
        ids = [SM_UTIL, SM_OCCUPANCY, ANY_TENSOR_UTIL, DRAM_BW_UTIL, FP16_UTIL, PCIE_TX_PER_SEC,
               NVLINK_TOTAL_RX_PER_SEC, NVLINK_TOTAL_TX_PER_SEC]
        get = GpmMetricsGet()
        get.version = GPM_METRICS_GET_VERSION
        get.numMetrics = len(ids)
        get.sample1, get.sample2 = s1, s2
        for i, m in enumerate(ids):
            get.metrics[i].metricId = m
        self.assertEqual(self.lib.nvmlGpmMetricsGet(byref(get)), SUCCESS)
        # GPU 0 runs a constant 95 % from 3 s: the truth of any window after 3 s is its rate.
        g = harness.sim_truth(os.environ["GPUMETER_SIM_SCENARIO"], 10, 20)["gpus"][0]["profiling"]
        want = [g["sm_util_percent"], g["sm_occupancy_percent"], g["tensor_util_percent"],
                g["dram_bw_util_percent"], g["fp16_util_percent"], g["pcie_tx_mib_per_second"],
                g["nvlink_rx_mib_per_second"], g["nvlink_tx_mib_per_second"]]
        for i, m in enumerate(ids):
            self.assertEqual(get.metrics[i].nvmlReturn, SUCCESS, m)
            self.assertAlmostEqual(get.metrics[i].value, want[i], delta=want[i] * 0.01, msg=str(m))
        self.assertAlmostEqual(want[0], 95 * 0.9, places=6)
        self.assertAlmostEqual(want[7], 0.95 * 40e9 / MIB, places=3)
        self.assertEqual(get.metrics[0].metricInfo.unit, b"%")

    def test_a100_has_nvlink_but_no_gpm(self):
        self.start("profiling-a100.yaml", 45)
        h = self.handle(0)
        self.assertEqual(self.supported(h), 0)
        s = self.alloc()
        self.assertEqual(self.lib.nvmlGpmSampleGet(h, s), NOT_SUPPORTED)
        values = (FieldValue * 3)()
        values[0].fieldId = FI_NVLINK_LINK_COUNT
        values[1].fieldId, values[1].scopeId = FI_NVLINK_GET_STATE, 7  # down on [40, 55) s
        values[2].fieldId, values[2].scopeId = FI_NVLINK_GET_STATE, 6
        self.assertEqual(self.lib.nvmlDeviceGetFieldValues(h, c_int(3), values), SUCCESS)
        self.assertEqual([v.nvmlReturn for v in values], [SUCCESS] * 3)
        self.assertEqual(values[0].value & 0xFFFFFFFF, 12)
        self.assertEqual(values[1].value & 0xFFFFFFFF, 0)
        self.assertEqual(values[2].value & 0xFFFFFFFF, 1)

    def metrics(self, s1, s2, ids):
        get = GpmMetricsGet()
        get.version = GPM_METRICS_GET_VERSION
        get.numMetrics = len(ids)
        get.sample1, get.sample2 = s1, s2
        for i, m in enumerate(ids):
            get.metrics[i].metricId = m
        rc = self.lib.nvmlGpmMetricsGet(byref(get))
        return rc, get

    def test_mig_instance_samples_match_the_truth(self):
        # Scenario time 30 s of mig-h100.yaml: every job runs at a constant rate from 20 s to 40 s.
        self.start("mig-h100.yaml", 30)
        parent = self.handle(0)
        truth = {m["gpu_instance"]: m for m in
                 harness.sim_truth(os.environ["GPUMETER_SIM_SCENARIO"], 21, 39)["mig"]["instances"]}
        self.assertEqual(sorted(truth), [1, 6, 7, 8])
        # The MIG device handles, by GPU instance id.
        handles = {}
        for index in range(4):
            mh, gi = c_void_p(), c_uint()
            self.assertEqual(self.lib.nvmlDeviceGetMigDeviceHandleByIndex(parent, c_uint(index), byref(mh)), SUCCESS)
            self.assertEqual(self.lib.nvmlDeviceGetGpuInstanceId(mh, byref(gi)), SUCCESS)
            handles[gi.value] = mh
        self.assertEqual(sorted(handles), sorted(truth))
        first = {gi: (self.alloc(), self.alloc()) for gi in truth}
        second = {gi: (self.alloc(), self.alloc()) for gi in truth}
        for samples in (first, second):
            for gi, (by_id, by_handle) in samples.items():
                self.assertEqual(self.lib.nvmlGpmMigSampleGet(parent, c_uint(gi), by_id), SUCCESS, gi)
                self.assertEqual(self.lib.nvmlGpmSampleGet(handles[gi], by_handle), SUCCESS, gi)
            if samples is first:
                time.sleep(0.5)
        ids = [GRAPHICS_UTIL, SM_UTIL, SM_OCCUPANCY, ANY_TENSOR_UTIL, DRAM_BW_UTIL, FP32_UTIL, FP16_UTIL]
        fields = ["graphics_util_percent", "sm_util_percent", "sm_occupancy_percent", "tensor_util_percent",
                  "dram_bw_util_percent", "fp32_util_percent", "fp16_util_percent"]
        for gi, m in truth.items():
            want = [m["profiling"][f] for f in fields]
            # Each instance's own activity (min(100, its jobs' sum)), not its slice share of the GPU.
            self.assertAlmostEqual(want[0], 100 * m["busy_seconds"] / m["seconds"], places=6)
            for which in (0, 1):
                rc, get = self.metrics(first[gi][which], second[gi][which], ids)
                self.assertEqual(rc, SUCCESS)
                for i, metric in enumerate(ids):
                    self.assertEqual(get.metrics[i].nvmlReturn, SUCCESS, (gi, metric))
                    self.assertAlmostEqual(get.metrics[i].value, want[i], delta=max(want[i] * 0.01, 1e-9),
                                           msg="GPU instance %d, metric %d" % (gi, metric))
        self.assertAlmostEqual(truth[1]["profiling"]["graphics_util_percent"], 90, places=6)
        self.assertAlmostEqual(truth[6]["profiling"]["graphics_util_percent"], 80, places=6)
        # PCIe and NVLink belong to the whole GPU; two instances' samples make no interval.
        rc, get = self.metrics(first[1][0], second[1][0], [PCIE_TX_PER_SEC, NVLINK_TOTAL_TX_PER_SEC])
        self.assertEqual(rc, SUCCESS)
        self.assertEqual([get.metrics[0].nvmlReturn, get.metrics[1].nvmlReturn], [NOT_SUPPORTED] * 2)
        self.assertEqual(self.metrics(first[1][0], second[6][0], [SM_UTIL])[0], INVALID_ARGUMENT)
        # GPU instance 5 exists only after the re-partition at 45 s; GPU 1 is not in MIG mode.
        spare = self.alloc()
        self.assertEqual(self.lib.nvmlGpmMigSampleGet(parent, c_uint(5), spare), NOT_FOUND)
        self.assertEqual(self.lib.nvmlGpmMigSampleGet(self.handle(1), c_uint(0), spare), NOT_SUPPORTED)


if __name__ == "__main__":
    unittest.main()
