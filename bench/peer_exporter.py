#!/usr/bin/python3
"""The GPU exporter a user writes in an afternoon, as the benchmark's peer.

Python 3, ctypes over libnvidia-ml.so.1 (the calls pynvml makes, with its size handshakes) and
python3-prometheus-client from Debian. Every second it reads, for each GPU: utilization, memory,
temperature, power, energy, clocks, PCIe throughput, fan speed where the board has a fan, ECC
error totals where ECC is on, and the memory and SM utilization of each compute process; it
serves them on /metrics with prometheus_client's HTTP server (default registry, so with the
client's own process and Python collectors, as users get it).

It keeps no ledger, attributes nothing to owners and watches no events: bench/peer_bench.py
measures it beside gpumeter on the same simulated node.

Usage: peer_exporter.py [--nvml-library PATH] [--port 9800] [--address 127.0.0.1] [--interval 1]
"""
import argparse
import ctypes
import sys
import time
from ctypes import byref, c_uint, c_ulonglong, c_void_p

from prometheus_client import Gauge, start_http_server

SUCCESS, NOT_SUPPORTED, NOT_FOUND, INSUFFICIENT_SIZE = 0, 3, 6, 7
TEMPERATURE_GPU = 0
CLOCKS = (("graphics", 0), ("sm", 1), ("memory", 2), ("video", 3))
PCIE_TX, PCIE_RX = 0, 1
CORRECTED, UNCORRECTED = 0, 1
VOLATILE_ECC = 0


class Memory(ctypes.Structure):
    _fields_ = [("total", c_ulonglong), ("free", c_ulonglong), ("used", c_ulonglong)]


class Utilization(ctypes.Structure):
    _fields_ = [("gpu", c_uint), ("memory", c_uint)]


class ProcessInfo(ctypes.Structure):  # nvmlProcessInfo_t as the _v3 call fills it
    _fields_ = [("pid", c_uint), ("usedGpuMemory", c_ulonglong), ("gpuInstanceId", c_uint),
                ("computeInstanceId", c_uint)]


class ProcessUtilizationSample(ctypes.Structure):  # nvmlProcessUtilizationSample_t
    _fields_ = [("pid", c_uint), ("timeStamp", c_ulonglong), ("smUtil", c_uint), ("memUtil", c_uint),
                ("encUtil", c_uint), ("decUtil", c_uint)]


class NVMLError(Exception):
    def __init__(self, fn, ret):
        super().__init__("%s returned %d" % (fn, ret))
        self.ret = ret


class NVML:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)

    def __call__(self, fn, *args):
        ret = getattr(self.lib, fn)(*args)
        if ret != SUCCESS:
            raise NVMLError(fn, ret)

    def uint(self, fn, handle, *args):
        v = c_uint()
        self(fn, handle, *args, byref(v))
        return v.value

    def ulonglong(self, fn, handle, *args):
        v = c_ulonglong()
        self(fn, handle, *args, byref(v))
        return v.value

    def text(self, fn, handle, size=96):
        buf = ctypes.create_string_buffer(size)
        self(fn, handle, buf, c_uint(size))
        return buf.value.decode()

    def processes(self, handle):
        """nvmlDeviceGetComputeRunningProcesses_v3 with pynvml's handshake: {pid: bytes}."""
        count = c_uint(0)
        ret = self.lib.nvmlDeviceGetComputeRunningProcesses_v3(handle, byref(count), None)
        if ret == SUCCESS:
            return {}
        if ret != INSUFFICIENT_SIZE:
            raise NVMLError("nvmlDeviceGetComputeRunningProcesses_v3", ret)
        count.value = count.value * 2 + 5
        buf = (ProcessInfo * count.value)()
        self("nvmlDeviceGetComputeRunningProcesses_v3", handle, byref(count), buf)
        return {p.pid: p.usedGpuMemory for p in buf[:count.value]}

    def process_utilization(self, handle, last_seen):
        """nvmlDeviceGetProcessUtilization with pynvml's handshake: the samples after last_seen."""
        count = c_uint(0)
        ret = self.lib.nvmlDeviceGetProcessUtilization(handle, None, byref(count), c_ulonglong(last_seen))
        if ret == NOT_FOUND:
            return []
        if ret != INSUFFICIENT_SIZE:
            raise NVMLError("nvmlDeviceGetProcessUtilization", ret)
        buf = (ProcessUtilizationSample * count.value)()
        ret = self.lib.nvmlDeviceGetProcessUtilization(handle, buf, byref(count), c_ulonglong(last_seen))
        if ret == NOT_FOUND:
            return []
        if ret != SUCCESS:
            raise NVMLError("nvmlDeviceGetProcessUtilization", ret)
        return buf[:count.value]


LABELS = ["gpu", "uuid"]
utilization = Gauge("nvidia_gpu_utilization_percent", "GPU utilization (%)", LABELS)
memory_utilization = Gauge("nvidia_gpu_memory_utilization_percent", "Memory controller utilization (%)", LABELS)
memory_used = Gauge("nvidia_gpu_memory_used_bytes", "GPU memory used", LABELS)
memory_total = Gauge("nvidia_gpu_memory_total_bytes", "GPU memory total", LABELS)
temperature = Gauge("nvidia_gpu_temperature_celsius", "GPU temperature", LABELS)
power = Gauge("nvidia_gpu_power_watts", "Power draw", LABELS)
energy = Gauge("nvidia_gpu_energy_joules_total", "Energy since the driver was loaded", LABELS)
clock = Gauge("nvidia_gpu_clock_mhz", "Current clocks", LABELS + ["clock"])
pcie = Gauge("nvidia_gpu_pcie_throughput_bytes_per_second", "PCIe throughput", LABELS + ["direction"])
fan = Gauge("nvidia_gpu_fan_speed_percent", "Fan speed (%)", LABELS)
ecc = Gauge("nvidia_gpu_ecc_errors_total", "ECC errors since the driver was loaded", LABELS + ["type"])
process_memory = Gauge("nvidia_gpu_process_memory_used_bytes", "GPU memory used by a process", LABELS + ["pid"])
process_sm = Gauge("nvidia_gpu_process_sm_utilization_percent", "SM utilization of a process (%)",
                   LABELS + ["pid"])


class Device:
    def __init__(self, nvml, index):
        self.handle = c_void_p()
        nvml("nvmlDeviceGetHandleByIndex_v2", c_uint(index), byref(self.handle))
        self.labels = (str(index), nvml.text("nvmlDeviceGetUUID", self.handle))
        try:
            nvml.uint("nvmlDeviceGetFanSpeed", self.handle)
            self.has_fan = True
        except NVMLError:
            self.has_fan = False
        current, pending = c_uint(), c_uint()
        try:
            nvml("nvmlDeviceGetEccMode", self.handle, byref(current), byref(pending))
            self.has_ecc = current.value == 1
        except NVMLError:
            self.has_ecc = False
        self.last_seen = 0
        self.pids = set()

    def collect(self, nvml):
        h, labels = self.handle, self.labels
        u = Utilization()
        nvml("nvmlDeviceGetUtilizationRates", h, byref(u))
        utilization.labels(*labels).set(u.gpu)
        memory_utilization.labels(*labels).set(u.memory)
        m = Memory()
        nvml("nvmlDeviceGetMemoryInfo", h, byref(m))
        memory_used.labels(*labels).set(m.used)
        memory_total.labels(*labels).set(m.total)
        temperature.labels(*labels).set(nvml.uint("nvmlDeviceGetTemperature", h, c_uint(TEMPERATURE_GPU)))
        power.labels(*labels).set(nvml.uint("nvmlDeviceGetPowerUsage", h) / 1000)
        energy.labels(*labels).set(nvml.ulonglong("nvmlDeviceGetTotalEnergyConsumption", h) / 1000)
        for name, kind in CLOCKS:
            clock.labels(*labels, name).set(nvml.uint("nvmlDeviceGetClockInfo", h, c_uint(kind)))
        for name, counter in (("tx", PCIE_TX), ("rx", PCIE_RX)):
            pcie.labels(*labels, name).set(nvml.uint("nvmlDeviceGetPcieThroughput", h, c_uint(counter)) * 1024)
        if self.has_fan:
            fan.labels(*labels).set(nvml.uint("nvmlDeviceGetFanSpeed", h))
        if self.has_ecc:
            for name, kind in (("corrected", CORRECTED), ("uncorrected", UNCORRECTED)):
                ecc.labels(*labels, name).set(nvml.ulonglong("nvmlDeviceGetTotalEccErrors", h, c_uint(kind),
                                                             c_uint(VOLATILE_ECC)))

        used = nvml.processes(h)
        sm = {}
        for s in nvml.process_utilization(h, self.last_seen):
            sm[s.pid] = s.smUtil
            self.last_seen = max(self.last_seen, s.timeStamp)
        for pid, nbytes in used.items():
            process_memory.labels(*labels, str(pid)).set(nbytes)
            if pid in sm:  # no new sample this round: keep the last one
                process_sm.labels(*labels, str(pid)).set(sm[pid])
        for pid in self.pids - used.keys():
            process_memory.remove(*labels, str(pid))
            try:
                process_sm.remove(*labels, str(pid))
            except KeyError:  # it never had a utilization sample
                pass
        self.pids = set(used)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nvml-library", default="libnvidia-ml.so.1")
    ap.add_argument("--address", default="0.0.0.0")
    ap.add_argument("--port", type=int, default=9800)
    ap.add_argument("--interval", type=float, default=1.0)
    args = ap.parse_args()

    nvml = NVML(args.nvml_library)
    nvml("nvmlInit_v2")
    count = c_uint()
    nvml("nvmlDeviceGetCount_v2", byref(count))
    devices = [Device(nvml, i) for i in range(count.value)]
    start_http_server(args.port, addr=args.address)
    print("serving %d GPUs on http://%s:%d/metrics" % (len(devices), args.address, args.port), file=sys.stderr)
    next_round = time.monotonic()
    while True:
        for d in devices:
            try:
                d.collect(nvml)
            except NVMLError as e:
                print("GPU %s: %s" % (d.labels[0], e), file=sys.stderr)
        next_round += args.interval
        time.sleep(max(0.0, next_round - time.monotonic()))


if __name__ == "__main__":
    main()
