"""A pynvml-style client on the simulator: the calls pynvml 11.5.3's nvidia_smi.DeviceQuery()
makes, for every GPU of a scenario, through ctypes as pynvml makes them (CDLL, versioned symbol
names, Structures with nvml.h's layouts, the size handshakes). Each call must answer as a real
driver would: SUCCESS with values that match the scenario, or NOT_SUPPORTED where nvml.h says so,
never a missing symbol or FUNCTION_NOT_FOUND.

Debian has no pynvml package, so the client is written here, after pynvml's conventions."""
import ctypes
import os
import tempfile
import time
import unittest

import sanitizer_preload
from ctypes import byref, c_uint, c_ulonglong, c_void_p, create_string_buffer


sanitizer_preload.preload(__name__)

import harness

SUCCESS, INVALID_ARGUMENT, NOT_SUPPORTED, NOT_FOUND, INSUFFICIENT_SIZE = 0, 2, 3, 6, 7
FUNCTION_NOT_FOUND, ARGUMENT_VERSION_MISMATCH = 13, 25

CLOCK_GRAPHICS, CLOCK_SM, CLOCK_MEM = 0, 1, 2
TEMPERATURE_GPU = 0
THRESHOLD_SHUTDOWN, THRESHOLD_SLOWDOWN = 0, 1
INFOROM_OEM, INFOROM_ECC, INFOROM_POWER = 0, 1, 2
PCIE_UTIL_TX_BYTES, PCIE_UTIL_RX_BYTES = 0, 1
VOLATILE_ECC, AGGREGATE_ECC = 0, 1
CORRECTED, UNCORRECTED = 0, 1
LOCATION_L1, LOCATION_L2, LOCATION_DEVICE_MEMORY, LOCATION_REGISTER_FILE, LOCATION_TEXTURE = 0, 1, 2, 3, 4
RETIREMENT_CAUSES = (0, 1)
BRAND_GEFORCE, BRAND_NVIDIA = 5, 14
ARCH_ADA, ARCH_HOPPER = 8, 9
SIZE_QUERIES = ("nvmlDeviceGetRetiredPages", "nvmlDeviceGetSupportedMemoryClocks",
                "nvmlDeviceGetSupportedGraphicsClocks", "nvmlDeviceGetComputeRunningProcesses_v3")


class PciInfo(ctypes.Structure):
    _fields_ = [("busIdLegacy", ctypes.c_char * 16), ("domain", c_uint), ("bus", c_uint), ("device", c_uint),
                ("pciDeviceId", c_uint), ("pciSubSystemId", c_uint), ("busId", ctypes.c_char * 32)]


class Memory(ctypes.Structure):
    _fields_ = [("total", c_ulonglong), ("free", c_ulonglong), ("used", c_ulonglong)]


class Bar1Memory(ctypes.Structure):
    _fields_ = [("bar1Total", c_ulonglong), ("bar1Free", c_ulonglong), ("bar1Used", c_ulonglong)]


class Utilization(ctypes.Structure):
    _fields_ = [("gpu", c_uint), ("memory", c_uint)]


class ProcessInfo(ctypes.Structure):  # nvmlProcessInfo_v2_t, what pynvml passes to the _v3 call
    _fields_ = [("pid", c_uint), ("usedGpuMemory", c_ulonglong), ("gpuInstanceId", c_uint),
                ("computeInstanceId", c_uint)]


class ProcessUtilizationSample(ctypes.Structure):  # nvmlProcessUtilizationSample_t
    _fields_ = [("pid", c_uint), ("timeStamp", c_ulonglong), ("smUtil", c_uint), ("memUtil", c_uint),
                ("encUtil", c_uint), ("decUtil", c_uint)]


class ProcessUtilizationInfo(ctypes.Structure):  # nvmlProcessUtilizationInfo_v1_t
    _fields_ = [("timeStamp", c_ulonglong), ("pid", c_uint), ("smUtil", c_uint), ("memUtil", c_uint),
                ("encUtil", c_uint), ("decUtil", c_uint), ("jpgUtil", c_uint), ("ofaUtil", c_uint)]


class ProcessesUtilizationInfo(ctypes.Structure):  # nvmlProcessesUtilizationInfo_v1_t
    _fields_ = [("version", c_uint), ("processSamplesCount", c_uint), ("lastSeenTimeStamp", c_ulonglong),
                ("procUtilArray", ctypes.POINTER(ProcessUtilizationInfo))]


PROCESSES_UTILIZATION_INFO_V1 = ctypes.sizeof(ProcessesUtilizationInfo) | 1 << 24  # nvml.h's NVML_STRUCT_VERSION


class BridgeChipInfo(ctypes.Structure):
    _fields_ = [("type", c_uint), ("fwVersion", c_uint)]


class BridgeChipHierarchy(ctypes.Structure):
    _fields_ = [("bridgeCount", ctypes.c_ubyte), ("bridgeChipInfo", BridgeChipInfo * 128)]


assert ctypes.sizeof(PciInfo) == 68 and ctypes.sizeof(ProcessInfo) == 24
assert ctypes.sizeof(BridgeChipHierarchy) == 1028
assert ctypes.sizeof(ProcessUtilizationSample) == 32 and ctypes.sizeof(ProcessUtilizationInfo) == 40
assert PROCESSES_UTILIZATION_INFO_V1 == 0x01000018

MiB = 1 << 20

# GPU 0 and 1: an H100 running a job each. GPU 2: a GeForce RTX 4090 (Ada), idle. The GeForce
# profile brings its defaults: a fan and no ECC memory.
SCENARIO = """
driver_version: "550.90.07"
models:
  h100:
    name: NVIDIA H100 80GB HBM3
    memory: 81559MiB
    memory_reserved: 512MiB
    power: {limit: 700, idle: 70, max: 650}
    clocks:
      graphics: {idle: 345, max: 1980}
      sm: {idle: 345, max: 1980}
      memory: {idle: 2619, max: 2619}
      video: {idle: 765, max: 1755}
    vbios_version: 96.00.74.00.0D
    pcie: {generation: 5, width: 16, device_id: 0x2330}
  rtx:
    name: NVIDIA GeForce RTX 4090
    memory: 24564MiB
    profile: geforce
    architecture: ada
    power: {limit: 450, idle: 20, max: 440}
    clocks:
      graphics: {idle: 210, max: 3120}
      sm: {idle: 210, max: 3120}
      memory: {idle: 405, max: 10501}
      video: {idle: 1185, max: 2415}
    pcie: {generation: 4, width: 16, device_id: 0x2684}
gpus:
  - {model: h100, uuid: GPU-6f1c2a7e-3b9d-4c8e-9a41-2d7f5e8b0c13, serial: "1654922006394",
     pci_bus_id: "00000000:18:00.0"}
  - {model: h100, pci_bus_id: "00000000:2A:00.0"}
  - {model: rtx, pci_bus_id: "00000000:5D:00.0"}
jobs:
  - {name: train, gpus: [0], pid: 7001, memory: 20GiB, utilization: 0.8}
  - {name: notebook-of-a-user, gpus: [1], pid: 7002, memory: 2GiB, utilization: 0.1}
"""

EXPECTED = [  # per GPU: what the scenario says
    dict(name=b"NVIDIA H100 80GB HBM3", bus_id=b"00000000:18:00.0", memory=81559 * MiB, limit=700000,
         clocks=(1980, 1980, 2619), vbios=b"96.00.74.00.0D", device_id=0x233010DE, ecc=True, fan=False,
         geforce=False, processes=[(7001, 20 << 30, b"train")], utilization=80),
    dict(name=b"NVIDIA H100 80GB HBM3", bus_id=b"00000000:2A:00.0", memory=81559 * MiB, limit=700000,
         clocks=(1980, 1980, 2619), vbios=b"96.00.74.00.0D", device_id=0x233010DE, ecc=True, fan=False,
         geforce=False, processes=[(7002, 2 << 30, b"notebook-of-a-user")], utilization=10),
    dict(name=b"NVIDIA GeForce RTX 4090", bus_id=b"00000000:5D:00.0", memory=24564 * MiB, limit=450000,
         clocks=(3120, 3120, 10501), idle_memory_clock=405, vbios=b"00.00.00.00.00", device_id=0x268410DE,
         ecc=False, fan=True, geforce=True, processes=[], utilization=0),
]


class Client:
    """The ctypes side of pynvml: one CDLL, symbols looked up by their versioned names."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.returns = []  # (symbol, nvmlReturn_t) of every call

    def __call__(self, name, *args):
        try:
            fn = getattr(self.lib, name)
        except AttributeError:
            raise AssertionError("%s is not exported: pynvml would raise NVMLError_FunctionNotFound" % name)
        ret = fn(*args)
        if ret == FUNCTION_NOT_FOUND:
            raise AssertionError("%s answered FUNCTION_NOT_FOUND" % name)
        self.returns.append((name, ret))
        return ret

    def uint(self, name, handle, *args):
        v = c_uint(0xDEAD)
        return self(name, handle, *args, byref(v)), v.value

    def pair(self, name, handle):
        a, b = c_uint(0xDEAD), c_uint(0xDEAD)
        return self(name, handle, byref(a), byref(b)), (a.value, b.value)

    def text(self, name, *args, size=96):
        buf = create_string_buffer(size)
        return self(name, *args, buf, c_uint(size)), buf.value

    def listing(self, name, handle, *args, ctype=c_uint):
        """pynvml's size handshake: count 0 and no buffer first, then a buffer of that size."""
        count = c_uint(0)
        ret = self(name, handle, *args, byref(count), None)
        if ret == SUCCESS:
            return SUCCESS, []
        if ret != INSUFFICIENT_SIZE:
            return ret, None
        count.value = count.value * 2 + 5
        buf = (ctype * count.value)()
        ret = self(name, handle, *args, byref(count), buf)
        return ret, list(buf[:count.value]) if ret == SUCCESS else None


def device_query(nvml, handle):
    """The NVML calls of nvidia_smi.DeviceQuery() for one GPU, in its order: name -> (ret, value)."""
    r = {}
    pci = PciInfo()
    r["pci"] = (nvml("nvmlDeviceGetPciInfo_v3", handle, byref(pci)), pci)
    r["name"] = nvml.text("nvmlDeviceGetName", handle)
    for key, fn in (("brand", "nvmlDeviceGetBrand"), ("display_mode", "nvmlDeviceGetDisplayMode"),
                    ("display_active", "nvmlDeviceGetDisplayActive"),
                    ("persistence", "nvmlDeviceGetPersistenceMode"), ("accounting", "nvmlDeviceGetAccountingMode"),
                    ("accounting_buffer", "nvmlDeviceGetAccountingBufferSize")):
        r[key] = nvml.uint(fn, handle)
    r["driver_model"] = nvml.pair("nvmlDeviceGetDriverModel", handle)
    r["serial"] = nvml.text("nvmlDeviceGetSerial", handle, size=30)
    r["uuid"] = nvml.text("nvmlDeviceGetUUID", handle)
    r["minor"] = nvml.uint("nvmlDeviceGetMinorNumber", handle)
    r["vbios"] = nvml.text("nvmlDeviceGetVbiosVersion", handle, size=32)
    r["multi_gpu"] = nvml.uint("nvmlDeviceGetMultiGpuBoard", handle)
    r["board_id"] = nvml.uint("nvmlDeviceGetBoardId", handle)
    r["inforom_image"] = nvml.text("nvmlDeviceGetInforomImageVersion", handle, size=16)
    for key, obj in (("inforom_oem", INFOROM_OEM), ("inforom_ecc", INFOROM_ECC), ("inforom_power", INFOROM_POWER)):
        r[key] = nvml.text("nvmlDeviceGetInforomVersion", handle, c_uint(obj), size=16)
    r["gom"] = nvml.pair("nvmlDeviceGetGpuOperationMode", handle)
    for key, fn in (("max_link_gen", "nvmlDeviceGetMaxPcieLinkGeneration"),
                    ("link_gen", "nvmlDeviceGetCurrPcieLinkGeneration"),
                    ("max_link_width", "nvmlDeviceGetMaxPcieLinkWidth"),
                    ("link_width", "nvmlDeviceGetCurrPcieLinkWidth")):
        r[key] = nvml.uint(fn, handle)
    bridges = BridgeChipHierarchy()
    r["bridge"] = (nvml("nvmlDeviceGetBridgeChipInfo", handle, byref(bridges)), bridges)
    r["replay"] = nvml.uint("nvmlDeviceGetPcieReplayCounter", handle)
    # nvmlDeviceGetPcieThroughput comes next in DeviceQuery; test_pcie_throughput covers it.
    r["fan"] = nvml.uint("nvmlDeviceGetFanSpeed", handle)
    r["power_state"] = nvml.uint("nvmlDeviceGetPowerState", handle)
    supported, current = c_ulonglong(0), c_ulonglong(0)
    r["throttle"] = (nvml("nvmlDeviceGetSupportedClocksThrottleReasons", handle, byref(supported)),
                     nvml("nvmlDeviceGetCurrentClocksThrottleReasons", handle, byref(current)))
    mem = Memory()
    r["memory"] = (nvml("nvmlDeviceGetMemoryInfo", handle, byref(mem)), mem)
    bar1 = Bar1Memory()
    r["bar1"] = (nvml("nvmlDeviceGetBAR1MemoryInfo", handle, byref(bar1)), bar1)
    r["compute_mode"] = nvml.uint("nvmlDeviceGetComputeMode", handle)
    util = Utilization()
    r["utilization"] = (nvml("nvmlDeviceGetUtilizationRates", handle, byref(util)), util)
    r["encoder"] = nvml.pair("nvmlDeviceGetEncoderUtilization", handle)
    r["decoder"] = nvml.pair("nvmlDeviceGetDecoderUtilization", handle)
    r["ecc_mode"] = nvml.pair("nvmlDeviceGetEccMode", handle)
    ecc = {}
    for counter in (VOLATILE_ECC, AGGREGATE_ECC):
        for error in (CORRECTED, UNCORRECTED):
            for location in (LOCATION_DEVICE_MEMORY, LOCATION_REGISTER_FILE, LOCATION_L1, LOCATION_L2,
                             LOCATION_TEXTURE):
                n = c_ulonglong(0xDEAD)
                ret = nvml("nvmlDeviceGetMemoryErrorCounter", handle, c_uint(error), c_uint(counter),
                           c_uint(location), byref(n))
                ecc[(counter, error, location)] = (ret, n.value)
            n = c_ulonglong(0xDEAD)
            ecc[(counter, error, "total")] = (nvml("nvmlDeviceGetTotalEccErrors", handle, c_uint(error),
                                                   c_uint(counter), byref(n)), n.value)
    r["ecc"] = ecc
    r["retired"] = [nvml.listing("nvmlDeviceGetRetiredPages", handle, c_uint(cause), ctype=c_ulonglong)
                    for cause in RETIREMENT_CAUSES]
    r["retired_pending"] = nvml.uint("nvmlDeviceGetRetiredPagesPendingStatus", handle)
    r["temperature"] = nvml.uint("nvmlDeviceGetTemperature", handle, c_uint(TEMPERATURE_GPU))
    r["shutdown_temp"] = nvml.uint("nvmlDeviceGetTemperatureThreshold", handle, c_uint(THRESHOLD_SHUTDOWN))
    r["slowdown_temp"] = nvml.uint("nvmlDeviceGetTemperatureThreshold", handle, c_uint(THRESHOLD_SLOWDOWN))
    for key, fn in (("power_management", "nvmlDeviceGetPowerManagementMode"), ("power", "nvmlDeviceGetPowerUsage"),
                    ("limit", "nvmlDeviceGetPowerManagementLimit"),
                    ("default_limit", "nvmlDeviceGetPowerManagementDefaultLimit"),
                    ("enforced_limit", "nvmlDeviceGetEnforcedPowerLimit")):
        r[key] = nvml.uint(fn, handle)
    r["limit_constraints"] = nvml.pair("nvmlDeviceGetPowerManagementLimitConstraints", handle)
    r["power_state_2"] = nvml.uint("nvmlDeviceGetPowerState", handle)
    for prefix, fn in (("clock", "nvmlDeviceGetClockInfo"), ("app_clock", "nvmlDeviceGetApplicationsClock"),
                       ("default_app_clock", "nvmlDeviceGetDefaultApplicationsClock"),
                       ("max_clock", "nvmlDeviceGetMaxClockInfo")):
        types = (CLOCK_GRAPHICS, CLOCK_MEM) if "app" in prefix else (CLOCK_GRAPHICS, CLOCK_SM, CLOCK_MEM)
        r[prefix] = [nvml.uint(fn, handle, c_uint(t)) for t in types]
    r["auto_boost"] = nvml.pair("nvmlDeviceGetAutoBoostedClocksEnabled", handle)
    ret, memory_clocks = nvml.listing("nvmlDeviceGetSupportedMemoryClocks", handle)
    r["memory_clocks"] = (ret, memory_clocks)
    r["graphics_clocks"] = [nvml.listing("nvmlDeviceGetSupportedGraphicsClocks", handle, c_uint(m))
                            for m in (memory_clocks or [])]
    ret, procs = nvml.listing("nvmlDeviceGetComputeRunningProcesses_v3", handle, ctype=ProcessInfo)
    named = []
    for p in procs or []:
        name_ret, name = nvml.text("nvmlSystemGetProcessName", c_uint(p.pid), size=1024)
        named.append((p.pid, p.usedGpuMemory, name_ret, name))
    r["processes"] = (ret, named)
    count = c_uint(0)
    r["accounting_pids"] = nvml("nvmlDeviceGetAccountingPids", handle, byref(count), None)
    return r


class PynvmlClient(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        path = os.path.join(tempfile.mkdtemp(), "pynvml-client.yaml")
        with open(path, "w") as f:
            f.write(SCENARIO)
        os.environ["GPUMETER_SIM_SCENARIO"] = path
        os.environ["GPUMETER_SIM_EPOCH"] = repr(time.time() - 60)  # both jobs are running
        cls.nvml = Client(harness.SIM_LIB)

    def setUp(self):
        self.assertEqual(self.nvml("nvmlInitWithFlags", c_uint(0)), SUCCESS)  # what pynvml's nvmlInit calls

    def tearDown(self):
        self.assertEqual(self.nvml("nvmlShutdown"), SUCCESS)

    def handles(self):
        count = c_uint(0)
        self.assertEqual(self.nvml("nvmlDeviceGetCount_v2", byref(count)), SUCCESS)
        self.assertEqual(count.value, len(EXPECTED))
        out = []
        for i in range(count.value):
            h = c_void_p()
            self.assertEqual(self.nvml("nvmlDeviceGetHandleByIndex_v2", c_uint(i), byref(h)), SUCCESS)
            out.append(h)
        return out

    def test_device_query_answers_every_call_as_a_driver_would(self):
        ret, version = self.nvml.text("nvmlSystemGetDriverVersion", size=80)
        self.assertEqual((ret, version), (SUCCESS, b"550.90.07"))
        for index, (handle, want) in enumerate(zip(self.handles(), EXPECTED)):
            with self.subTest(gpu=index):
                del self.nvml.returns[:]
                r = device_query(self.nvml, handle)
                self.check_every_return_is_a_driver_answer()
                self.check_identity(r, index, want)
                self.check_memory_power_clocks(r, want)
                self.check_ecc(r, want)
                self.check_processes(r, want)

    def check_every_return_is_a_driver_answer(self):
        self.assertGreater(len(self.nvml.returns), 80)
        for name, ret in self.nvml.returns:
            allowed = (SUCCESS, NOT_SUPPORTED)
            if name in SIZE_QUERIES:
                allowed += (INSUFFICIENT_SIZE,)  # the first half of the size handshake
            self.assertIn(ret, allowed, name)

    def check_identity(self, r, index, want):
        ret, pci = r["pci"]
        self.assertEqual(ret, SUCCESS)
        self.assertEqual(pci.busId, want["bus_id"])
        self.assertEqual(pci.busIdLegacy, want["bus_id"][4:])
        self.assertEqual(pci.pciDeviceId, want["device_id"])
        self.assertEqual(r["name"], (SUCCESS, want["name"]))
        self.assertEqual(r["vbios"], (SUCCESS, want["vbios"]))
        self.assertEqual(r["minor"], (SUCCESS, index))
        self.assertEqual(r["board_id"], (SUCCESS, pci.bus << 8 | pci.device))
        self.assertEqual(r["multi_gpu"], (SUCCESS, 0))
        ret, uuid = r["uuid"]
        self.assertEqual(ret, SUCCESS)
        self.assertRegex(uuid.decode(), r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
        if index == 0:
            self.assertEqual(uuid, b"GPU-6f1c2a7e-3b9d-4c8e-9a41-2d7f5e8b0c13")
            self.assertEqual(r["serial"], (SUCCESS, b"1654922006394"))
        # The brand follows the product name.
        self.assertEqual(r["brand"], (SUCCESS, BRAND_GEFORCE if b"GeForce" in want["name"] else BRAND_NVIDIA))
        if want["geforce"]:
            # nvidia-smi -q on GeForce boards: "Serial Number: N/A", "Persistence Mode: Disabled"
            # (no nvidia-persistenced), infoROM image G001.0000.02.04.
            self.assertEqual(r["serial"][0], NOT_SUPPORTED)
            self.assertEqual(r["persistence"], (SUCCESS, 0))
            self.assertEqual(r["inforom_image"], (SUCCESS, b"G001.0000.02.04"))
        else:
            self.assertEqual(r["serial"][0], SUCCESS)
            self.assertEqual(r["persistence"], (SUCCESS, 1))
        self.assertEqual(r["display_mode"], (SUCCESS, 1))
        self.assertEqual(r["display_active"], (SUCCESS, 0))
        self.assertEqual(r["compute_mode"], (SUCCESS, 0))
        self.assertEqual(r["accounting"], (SUCCESS, 0))
        self.assertEqual(r["accounting_buffer"], (SUCCESS, 4000))
        # Accounting is off, so its pids are not supported; driver model is Windows only; GPU
        # operation modes are Kepler-only; no simulated board has a bridge chip; Pascal and newer
        # boost through application clocks.
        for key in ("driver_model", "gom", "auto_boost"):
            self.assertEqual(r[key][0], NOT_SUPPORTED, key)
        self.assertEqual(r["accounting_pids"], NOT_SUPPORTED)
        self.assertEqual(r["bridge"][0], NOT_SUPPORTED)
        ret, image = r["inforom_image"]
        self.assertEqual(ret, SUCCESS)
        self.assertTrue(image.startswith(b"G"), image)
        self.assertEqual(r["inforom_oem"][0], SUCCESS)
        self.assertEqual(r["inforom_power"][0], NOT_SUPPORTED)
        self.assertEqual(r["max_link_gen"], r["link_gen"])
        self.assertEqual(r["link_width"], (SUCCESS, 16))
        self.assertEqual(r["replay"], (SUCCESS, 0))

    def check_memory_power_clocks(self, r, want):
        ret, mem = r["memory"]
        self.assertEqual(ret, SUCCESS)
        self.assertEqual(mem.total, want["memory"])
        self.assertEqual(mem.free + mem.used, mem.total)
        ret, bar1 = r["bar1"]
        self.assertEqual(ret, SUCCESS)
        if want["geforce"]:
            self.assertEqual(bar1.bar1Total, 256 * MiB)  # the legacy window, as on GeForce boards
        else:
            self.assertGreaterEqual(bar1.bar1Total, want["memory"])  # the whole framebuffer
        self.assertEqual(bar1.bar1Free + bar1.bar1Used, bar1.bar1Total)
        self.assertEqual(r["fan"][0], SUCCESS if want["fan"] else NOT_SUPPORTED)
        ret, power = r["power"]
        self.assertEqual(ret, SUCCESS)
        self.assertLessEqual(power, want["limit"])
        for key in ("limit", "default_limit", "enforced_limit"):
            self.assertEqual(r[key], (SUCCESS, want["limit"]), key)
        ret, (lo, hi) = r["limit_constraints"]
        self.assertEqual(ret, SUCCESS)
        self.assertLess(lo, want["limit"])
        # GeForce boards may be raised above their default limit; datacenter boards may not.
        self.assertEqual(hi, want["limit"] * 4 // 3 if want["geforce"] else want["limit"])
        self.assertEqual(r["power_management"], (SUCCESS, 1))
        self.assertEqual(r["power_state"][0], SUCCESS)
        self.assertEqual(r["power_state"], r["power_state_2"])
        ret, temp = r["temperature"]
        self.assertEqual(ret, SUCCESS)
        ret, slowdown = r["slowdown_temp"]
        self.assertEqual(ret, SUCCESS)
        self.assertGreater(slowdown, temp)
        self.assertGreater(r["shutdown_temp"][1], slowdown)
        self.assertEqual([v for _, v in r["max_clock"]], list(want["clocks"]))
        self.assertTrue(all(ret == SUCCESS for ret, _ in r["clock"]))
        graphics_max, _, memory_max = want["clocks"]
        if want["geforce"]:
            # GeForce boards have no application clocks (nvidia-smi -q: "Applications Clocks: N/A")
            # and list their idle memory clock beside the maximum.
            self.assertEqual(r["app_clock"], [(NOT_SUPPORTED, 0xDEAD)] * 2)
            self.assertEqual(r["default_app_clock"], r["app_clock"])
            self.assertEqual(r["memory_clocks"], (SUCCESS, [memory_max, want["idle_memory_clock"]]))
        else:
            self.assertEqual(r["app_clock"], [(SUCCESS, graphics_max), (SUCCESS, memory_max)])
            self.assertEqual(r["default_app_clock"], r["app_clock"])
            self.assertEqual(r["memory_clocks"], (SUCCESS, [memory_max]))
        self.assertEqual(len(r["graphics_clocks"]), len(r["memory_clocks"][1]))
        for ret, graphics in r["graphics_clocks"]:
            self.assertEqual(ret, SUCCESS)
            self.assertEqual(graphics[0], graphics_max)
            self.assertEqual(graphics, sorted(graphics, reverse=True))
        self.assertEqual(r["encoder"][0], SUCCESS)
        self.assertEqual(r["encoder"][1][0], 0)
        self.assertEqual(r["decoder"][1][0], 0)
        self.assertEqual(r["utilization"][0], SUCCESS)

    def check_ecc(self, r, want):
        if want["geforce"]:
            # No ECC memory: "Ecc Mode: N/A" in nvidia-smi -q, and no ECC infoROM object.
            self.assertEqual(r["ecc_mode"], (NOT_SUPPORTED, (0xDEAD, 0xDEAD)))
            self.assertEqual(r["inforom_ecc"][0], NOT_SUPPORTED)
        else:
            self.assertEqual(r["ecc_mode"], (SUCCESS, (1, 1) if want["ecc"] else (0, 0)))
            self.assertEqual(r["inforom_ecc"][0], SUCCESS)
        for (counter, error, location), (ret, n) in r["ecc"].items():
            if not want["ecc"] or location == LOCATION_TEXTURE:
                self.assertEqual(ret, NOT_SUPPORTED, (counter, error, location))
            else:
                self.assertEqual((ret, n), (SUCCESS, 0), (counter, error, location))
        # Hopper and Ada remap rows (if they have ECC) instead of retiring pages.
        self.assertEqual(r["retired"], [(NOT_SUPPORTED, None)] * 2)
        self.assertEqual(r["retired_pending"][0], NOT_SUPPORTED)

    def check_processes(self, r, want):
        ret, named = r["processes"]
        self.assertEqual(ret, SUCCESS)
        self.assertEqual([(pid, used, ret, name) for pid, used, ret, name in named],
                         [(pid, used, SUCCESS, name) for pid, used, name in want["processes"]])

    def test_architecture_compute_capability_and_mig_mode(self):
        # Not in DeviceQuery, but what most other clients ask first. The H100s are Hopper (9),
        # compute capability 9.0, with MIG present and off; the RTX 4090 is Ada (8), 8.9, and
        # has no MIG at all ("For Ampere or newer fully supported devices", which GeForce are not).
        for handle, want in zip(self.handles(), EXPECTED):
            arch, capability, mig = ((ARCH_ADA, (8, 9), (NOT_SUPPORTED, (0xDEAD, 0xDEAD))) if want["geforce"]
                                     else (ARCH_HOPPER, (9, 0), (SUCCESS, (0, 0))))
            self.assertEqual(self.nvml.uint("nvmlDeviceGetArchitecture", handle), (SUCCESS, arch))
            major, minor = ctypes.c_int(0), ctypes.c_int(-1)
            self.assertEqual(self.nvml("nvmlDeviceGetCudaComputeCapability", handle, byref(major), byref(minor)),
                             SUCCESS)
            self.assertEqual((major.value, minor.value), capability)
            self.assertEqual(self.nvml.pair("nvmlDeviceGetMigMode", handle), mig)

    def test_unknown_pid_has_no_name(self):
        ret, _ = self.nvml.text("nvmlSystemGetProcessName", c_uint(1), size=1024)
        self.assertEqual(ret, NOT_FOUND)

    def test_pcie_throughput(self):
        # The call of DeviceQuery after the replay counter: "a byte counter over a 20ms interval",
        # in KB/s, so it blocks about 20 ms. The model moves 2 GB/s out and 4 GB/s in at full
        # load (docs/simulator.md, `pcie`), in proportion to utilization; a KB is 1024 bytes.
        for handle, want in zip(self.handles(), EXPECTED):
            for counter, full_load in ((PCIE_UTIL_TX_BYTES, 2e9), (PCIE_UTIL_RX_BYTES, 4e9)):
                with self.subTest(gpu=want["bus_id"], counter=counter):
                    started = time.monotonic()
                    ret, kbps = self.nvml.uint("nvmlDeviceGetPcieThroughput", handle, c_uint(counter))
                    self.assertGreaterEqual(time.monotonic() - started, 0.019)
                    self.assertEqual(ret, SUCCESS)
                    self.assertAlmostEqual(kbps, want["utilization"] / 100 * full_load / 1024, delta=1)
        h = self.handles()[0]
        self.assertEqual(self.nvml.uint("nvmlDeviceGetPcieThroughput", h, c_uint(2))[0], INVALID_ARGUMENT)

    def process_utilization(self, handle, last_seen=0):
        """The legacy call as pynvml's nvmlDeviceGetProcessUtilization makes it: the size query
        first, then a buffer of that size."""
        count = c_uint(0)
        ret = self.nvml("nvmlDeviceGetProcessUtilization", handle, None, byref(count), c_ulonglong(last_seen))
        if ret != INSUFFICIENT_SIZE:
            return ret, count.value, None, None
        size = count.value
        samples = (ProcessUtilizationSample * size)()
        ret = self.nvml("nvmlDeviceGetProcessUtilization", handle, samples, byref(count), c_ulonglong(last_seen))
        return ret, size, count.value, list(samples[:count.value]) if ret == SUCCESS else None

    def test_legacy_process_utilization(self):
        for handle, want in zip(self.handles(), EXPECTED):
            with self.subTest(gpu=want["bus_id"]):
                ret, size, _, samples = self.process_utilization(handle)
                if want["geforce"]:
                    # GeForce boards are not "fully supported devices" (docs/simulator.md).
                    self.assertEqual(ret, NOT_SUPPORTED)
                    continue
                self.assertEqual(size, 100)  # the fixed capacity drivers answer a size query with
                self.assertEqual(ret, SUCCESS)
                # One record per running process, averaging its share over the 20 s the buffer
                # holds: each job has been running alone at its utilization for 60 s.
                ((pid, _, _),) = want["processes"]
                self.assertEqual([(s.pid, s.smUtil, s.encUtil, s.decUtil) for s in samples],
                                 [(pid, want["utilization"], 0, 0)])
                now_us = time.time() * 1e6
                self.assertLess(abs(samples[0].timeStamp - now_us), 5e6)
                # Nothing is newer than a timestamp in the future.
                ret, _, count, _ = self.process_utilization(handle, samples[0].timeStamp + 10 ** 7)
                self.assertEqual((ret, count), (NOT_FOUND, 0))

    def test_processes_utilization_info(self):
        # R550's call (the scenario's driver is 550.90.07): a versioned struct, with the size
        # handshake on procUtilArray.
        for handle, want in zip(self.handles(), EXPECTED):
            with self.subTest(gpu=want["bus_id"]):
                info = ProcessesUtilizationInfo(version=2)
                self.assertEqual(self.nvml("nvmlDeviceGetProcessesUtilizationInfo", handle, byref(info)),
                                 ARGUMENT_VERSION_MISMATCH)
                info = ProcessesUtilizationInfo(version=PROCESSES_UTILIZATION_INFO_V1)
                ret = self.nvml("nvmlDeviceGetProcessesUtilizationInfo", handle, byref(info))
                if want["geforce"]:
                    self.assertEqual(ret, NOT_SUPPORTED)
                    continue
                self.assertEqual((ret, info.processSamplesCount), (INSUFFICIENT_SIZE, 1))
                array = (ProcessUtilizationInfo * info.processSamplesCount)()
                info.procUtilArray = array
                self.assertEqual(self.nvml("nvmlDeviceGetProcessesUtilizationInfo", handle, byref(info)), SUCCESS)
                ((pid, _, _),) = want["processes"]
                self.assertEqual(info.processSamplesCount, 1)
                a = array[0]
                self.assertEqual((a.pid, a.smUtil, a.encUtil, a.decUtil, a.jpgUtil, a.ofaUtil),
                                 (pid, want["utilization"], 0, 0, 0, 0))
                info.lastSeenTimeStamp = a.timeStamp + 10 ** 7
                self.assertEqual(self.nvml("nvmlDeviceGetProcessesUtilizationInfo", handle, byref(info)), NOT_FOUND)
                self.assertEqual(info.processSamplesCount, 0)


if __name__ == "__main__":
    unittest.main()
