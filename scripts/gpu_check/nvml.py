"""A small NVML client over ctypes: the calls the self-check makes, and those sim-nvidia-smi
makes to print what nvidia-smi prints. It reads, it never sets anything on a GPU.

Layouts follow nvml.h (the same subset as src/abi/nvml_api.h, which checks their sizes).
Every call raises NvmlError with NVML's return code when it fails; NOT_SUPPORTED is code 3.
"""
import ctypes
from ctypes import byref, c_char_p, c_double, c_int, c_longlong, c_uint, c_ulonglong, c_void_p

SUCCESS, INVALID_ARGUMENT, NOT_SUPPORTED, NO_PERMISSION = 0, 2, 3, 4
NOT_FOUND, INSUFFICIENT_SIZE, FUNCTION_NOT_FOUND = 6, 7, 13

TEMPERATURE_GPU = 0
CLOCK_GRAPHICS, CLOCK_SM, CLOCK_MEM = 0, 1, 2
ECC_CORRECTED, ECC_UNCORRECTED, VOLATILE_ECC = 0, 1, 0
TOTAL_POWER_SAMPLES, GPU_UTILIZATION_SAMPLES = 0, 1
FI_MEMORY_TEMP, FI_POWER_AVERAGE, FI_POWER_INSTANT = 82, 185, 186
GPM_METRIC_MAX = 333
MEMORY_V2_VERSION = 0x02000028


class NvmlError(Exception):
    def __init__(self, fn, rc):
        super().__init__("%s returned %d" % (fn, rc))
        self.fn, self.rc = fn, rc

    @property
    def not_supported(self):
        return self.rc in (NOT_SUPPORTED, FUNCTION_NOT_FOUND)


class PciInfo(ctypes.Structure):  # nvmlPciInfo_t, as nvmlDeviceGetPciInfo_v3 writes it
    _fields_ = [("busIdLegacy", ctypes.c_char * 16), ("domain", c_uint), ("bus", c_uint), ("device", c_uint),
                ("pciDeviceId", c_uint), ("pciSubSystemId", c_uint), ("busId", ctypes.c_char * 32)]


class Utilization(ctypes.Structure):
    _fields_ = [("gpu", c_uint), ("memory", c_uint)]


class Memory(ctypes.Structure):
    _fields_ = [("total", c_ulonglong), ("free", c_ulonglong), ("used", c_ulonglong)]


class MemoryV2(ctypes.Structure):
    _fields_ = [("version", c_uint), ("total", c_ulonglong), ("reserved", c_ulonglong),
                ("free", c_ulonglong), ("used", c_ulonglong)]


class ProcessInfo(ctypes.Structure):  # nvmlProcessInfo_t, as the _v3 and _v2 calls write it
    _fields_ = [("pid", c_uint), ("usedGpuMemory", c_ulonglong), ("gpuInstanceId", c_uint),
                ("computeInstanceId", c_uint)]


class ProcessUtilizationSample(ctypes.Structure):
    _fields_ = [("pid", c_uint), ("timeStamp", c_ulonglong), ("smUtil", c_uint), ("memUtil", c_uint),
                ("encUtil", c_uint), ("decUtil", c_uint)]


class Value(ctypes.Union):
    _fields_ = [("dVal", c_double), ("siVal", c_int), ("uiVal", c_uint), ("ulVal", ctypes.c_ulong),
                ("ullVal", c_ulonglong), ("sllVal", c_longlong), ("usVal", ctypes.c_ushort)]


class Sample(ctypes.Structure):
    _fields_ = [("timeStamp", c_ulonglong), ("sampleValue", Value)]


class FieldValue(ctypes.Structure):
    _fields_ = [("fieldId", c_uint), ("scopeId", c_uint), ("timestamp", c_longlong),
                ("latencyUsec", c_longlong), ("valueType", c_uint), ("nvmlReturn", c_int), ("value", Value)]


class MetricInfo(ctypes.Structure):
    _fields_ = [("shortName", c_char_p), ("longName", c_char_p), ("unit", c_char_p)]


class GpmMetric(ctypes.Structure):  # nvmlGpmMetric_t
    _fields_ = [("metricId", c_uint), ("nvmlReturn", c_int), ("value", c_double), ("metricInfo", MetricInfo)]


class GpmMetricsGet(ctypes.Structure):  # nvmlGpmMetricsGet_t
    _fields_ = [("version", c_uint), ("numMetrics", c_uint), ("sample1", c_void_p), ("sample2", c_void_p),
                ("metrics", GpmMetric * GPM_METRIC_MAX)]


class GpmSupport(ctypes.Structure):
    _fields_ = [("version", c_uint), ("isSupportedDevice", c_uint)]


def value_of(value_type, value):
    """An nvmlValue_t as a Python number, by its nvmlValueType_t."""
    return [value.dVal, value.uiVal, value.ulVal, value.ullVal, value.sllVal, value.siVal,
            value.usVal][value_type] if 0 <= value_type <= 6 else None


class Nvml:
    """One loaded NVML library, initialised once; devices by index."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.nvmlErrorString.restype = c_char_p
        self.call("nvmlInit_v2")

    def call(self, fn, *args):
        f = getattr(self.lib, fn, None)
        if f is None:
            raise NvmlError(fn, FUNCTION_NOT_FOUND)
        rc = f(*args)
        if rc != SUCCESS:
            raise NvmlError(fn, rc)

    def shutdown(self):
        self.lib.nvmlShutdown()

    def count(self):
        n = c_uint()
        self.call("nvmlDeviceGetCount_v2", byref(n))
        return n.value

    def device(self, index):
        h = c_void_p()
        self.call("nvmlDeviceGetHandleByIndex_v2", c_uint(index), byref(h))
        return Device(self, h, index)

    def driver_version(self):
        buf = ctypes.create_string_buffer(96)
        self.call("nvmlSystemGetDriverVersion", buf, c_uint(96))
        return buf.value.decode()

    def cuda_version(self):
        """The CUDA driver version as nvidia-smi prints it, e.g. "12.8"."""
        v = c_int()
        self.call("nvmlSystemGetCudaDriverVersion", byref(v))
        return "%d.%d" % (v.value // 1000, v.value % 1000 // 10)

    def gpm_sample(self):
        return GpmSample(self)

    def gpm_metrics(self, first, second, ids):
        """nvmlGpmMetricsGet over two samples: [(id, nvmlReturn, value, unit)]."""
        get = GpmMetricsGet()
        get.version, get.numMetrics = 1, len(ids)
        get.sample1, get.sample2 = first.handle, second.handle
        for i, m in enumerate(ids):
            get.metrics[i].metricId = m
        self.call("nvmlGpmMetricsGet", byref(get))
        out = []
        for i, m in enumerate(ids):
            unit = get.metrics[i].metricInfo.unit
            out.append((m, get.metrics[i].nvmlReturn, get.metrics[i].value, unit.decode() if unit else ""))
        return out


class GpmSample:
    def __init__(self, nvml):
        self.nvml, self.handle = nvml, c_void_p()
        nvml.call("nvmlGpmSampleAlloc", byref(self.handle))

    def take(self, device):
        self.nvml.call("nvmlGpmSampleGet", device.handle, self.handle)

    def free(self):
        self.nvml.lib.nvmlGpmSampleFree(self.handle)


class Device:
    def __init__(self, nvml, handle, index):
        self.nvml, self.handle, self.index = nvml, handle, index

    def _call(self, fn, *args):
        self.nvml.call(fn, self.handle, *args)

    def _string(self, fn, size=96):
        buf = ctypes.create_string_buffer(size)
        self._call(fn, buf, c_uint(size))
        return buf.value.decode()

    def _uint(self, fn, *args):
        v = c_uint()
        self._call(fn, *args, byref(v))
        return v.value

    def _ulonglong(self, fn, *args):
        v = c_ulonglong()
        self._call(fn, *args, byref(v))
        return v.value

    def uuid(self):
        return self._string("nvmlDeviceGetUUID")

    def name(self):
        return self._string("nvmlDeviceGetName")

    def pci_bus_id(self):
        p = PciInfo()
        self._call("nvmlDeviceGetPciInfo_v3", byref(p))
        return p.busId.decode()

    def power_limit_mw(self):
        return self._uint("nvmlDeviceGetEnforcedPowerLimit")

    def utilization(self):
        u = Utilization()
        self._call("nvmlDeviceGetUtilizationRates", byref(u))
        return u.gpu, u.memory

    def memory(self):
        """(total, reserved, used, free) in bytes; reserved is None where only v1 answers."""
        m = MemoryV2()
        m.version = MEMORY_V2_VERSION
        try:
            self._call("nvmlDeviceGetMemoryInfo_v2", byref(m))
            return m.total, m.reserved, m.used, m.free
        except NvmlError:
            v1 = Memory()
            self._call("nvmlDeviceGetMemoryInfo", byref(v1))
            return v1.total, None, v1.used, v1.free

    def power_mw(self):
        return self._uint("nvmlDeviceGetPowerUsage")

    def energy_mj(self):
        return self._ulonglong("nvmlDeviceGetTotalEnergyConsumption")

    def temperature(self):
        return self._uint("nvmlDeviceGetTemperature", c_uint(TEMPERATURE_GPU))

    def clock_mhz(self, clock):
        return self._uint("nvmlDeviceGetClockInfo", c_uint(clock))

    def performance_state(self):
        return self._uint("nvmlDeviceGetPerformanceState")

    def pcie_generation(self):
        return self._uint("nvmlDeviceGetCurrPcieLinkGeneration")

    def pcie_width(self):
        return self._uint("nvmlDeviceGetCurrPcieLinkWidth")

    def ecc_errors(self, error_type):
        return self._ulonglong("nvmlDeviceGetTotalEccErrors", c_uint(error_type), c_uint(VOLATILE_ECC))

    def clock_event_reasons(self):
        try:
            return self._ulonglong("nvmlDeviceGetCurrentClocksEventReasons")
        except NvmlError as e:
            if e.rc != FUNCTION_NOT_FOUND:
                raise
            return self._ulonglong("nvmlDeviceGetCurrentClocksThrottleReasons")

    def fields(self, ids):
        """nvmlDeviceGetFieldValues: {field id: value, or an NvmlError for a field that failed}."""
        values = (FieldValue * len(ids))()
        for i, f in enumerate(ids):
            values[i].fieldId = f
        self._call("nvmlDeviceGetFieldValues", c_int(len(ids)), values)
        out = {}
        for v in values:
            ok = v.nvmlReturn == SUCCESS
            out[v.fieldId] = value_of(v.valueType, v.value) if ok else NvmlError("field %d" % v.fieldId, v.nvmlReturn)
        return out

    def processes(self):
        """Compute processes: [(pid, used bytes or None)]."""
        for fn in ("nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"):
            try:
                return self._processes(fn)
            except NvmlError as e:
                if e.rc != FUNCTION_NOT_FOUND:
                    raise
        raise NvmlError("nvmlDeviceGetComputeRunningProcesses_v2", FUNCTION_NOT_FOUND)

    def _processes(self, fn):
        n = c_uint(0)
        try:
            self._call(fn, byref(n), None)
            return []
        except NvmlError as e:
            if e.rc != INSUFFICIENT_SIZE:
                raise
        n = c_uint(n.value + 8)  # room for processes that start meanwhile
        buf = (ProcessInfo * n.value)()
        self._call(fn, byref(n), buf)
        unknown = 0xFFFFFFFFFFFFFFFF
        return [(p.pid, None if p.usedGpuMemory == unknown else p.usedGpuMemory) for p in buf[:n.value]]

    def process_utilization(self, last_seen_us):
        """nvmlDeviceGetProcessUtilization since last_seen_us: [(pid, timestamp us, smUtil, memUtil)]."""
        n = c_uint(0)
        try:
            self._call("nvmlDeviceGetProcessUtilization", None, byref(n), c_ulonglong(last_seen_us))
        except NvmlError as e:
            if e.rc == NOT_FOUND:
                return []
            if e.rc != INSUFFICIENT_SIZE:
                raise
        buf = (ProcessUtilizationSample * max(n.value, 1))()
        try:
            self._call("nvmlDeviceGetProcessUtilization", buf, byref(n), c_ulonglong(last_seen_us))
        except NvmlError as e:
            if e.rc == NOT_FOUND:
                return []
            raise
        return [(s.pid, s.timeStamp, s.smUtil, s.memUtil) for s in buf[:n.value]]

    def samples(self, sample_type, last_seen_us):
        """nvmlDeviceGetSamples newer than last_seen_us: [(timestamp us, value)], oldest first."""
        vtype, n = c_uint(), c_uint(0)
        head = (c_uint(sample_type), c_ulonglong(last_seen_us), byref(vtype), byref(n))
        try:
            self._call("nvmlDeviceGetSamples", *head, None)
        except NvmlError as e:
            if e.rc == NOT_FOUND:
                return []
            raise
        if n.value == 0:
            return []
        buf = (Sample * n.value)()
        try:
            self._call("nvmlDeviceGetSamples", *head, buf)
        except NvmlError as e:
            if e.rc == NOT_FOUND:
                return []
            raise
        return [(s.timeStamp, value_of(vtype.value, s.sampleValue)) for s in buf[:n.value]]

    def gpm_supported(self):
        s = GpmSupport(1, 0)
        self._call("nvmlGpmQueryDeviceSupport", byref(s))
        return bool(s.isSupportedDevice)
