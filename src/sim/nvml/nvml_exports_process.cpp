// NVML entry points for running processes and the sample buffers, with NVML's size-query
// protocols. Per-process utilization is in nvml_exports_process_util.cpp.

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "sim/physics/periods.h"
#include "sim/nvml/nvml_call.h"
#include "sim/nvml/nvml_exports_mig.h"

using gpumeter::sim::device_call;
using gpumeter::sim::DeviceState;
using gpumeter::sim::JobShare;
using gpumeter::sim::list_records;
using gpumeter::sim::Micros;
using gpumeter::sim::Period;
using gpumeter::sim::PeriodHistory;
using gpumeter::sim::Session;
using Fn = gpumeter::sim::NvmlFunction;

namespace {

// The ids of the process's MIG instance, or 0xFFFFFFFF outside MIG.
void fill_v2(const gpumeter::sim::Scenario& s, nvmlProcessInfo_t& info, const JobShare& j) {
  info = nvmlProcessInfo_t{};
  info.pid = j.pid;
  info.usedGpuMemory = j.memory_bytes;
  gpumeter::sim::mig::instance_ids(s, j, info.gpuInstanceId, info.computeInstanceId);
}

// Records in another stride than nvmlProcessInfo_t's 24 bytes, as some drivers wrote them
// for the _v3 calls: 32 bytes (the v2 fields, then an 8-byte usedGpuCcProtectedMemory; R535,
// pynvml PR#48, nvitop PR#79) or 16 bytes (pid and usedGpuMemory, nvitop PR#226). The driver
// writes n records of its own stride, whatever the caller allocated, as those drivers did.
void write_record(unsigned char* base, unsigned stride, unsigned i, const JobShare& j) {
  unsigned char* r = base + static_cast<std::size_t>(stride) * i;
  std::memset(r, 0, stride);
  const std::uint32_t pid = j.pid;
  const std::uint64_t used = j.memory_bytes;
  std::memcpy(r, &pid, sizeof pid);
  std::memcpy(r + 8, &used, sizeof used);
  if (stride == 32) {
    const std::uint32_t no_instance = 0xFFFFFFFFU;
    std::memcpy(r + 16, &no_instance, sizeof no_instance);
    std::memcpy(r + 20, &no_instance, sizeof no_instance);
  }
}

nvmlReturn_t compute_processes(Fn fn, nvmlDevice_t device, unsigned int* count, nvmlProcessInfo_t* infos) {
  if (gpumeter::sim::is_mig_handle(device)) return gpumeter::sim::mig::compute_processes(fn, device, count, infos);
  return device_call(fn, device, [&](Session& s, DeviceState& d, Micros now) -> nvmlReturn_t {
    if (s.refuses_unprivileged(d.gpu.index(), now)) return NVML_ERROR_NO_PERMISSION;
    const auto& jobs = d.gpu.processes(now);
    const gpumeter::sim::Quirk* layout =
        fn == Fn::nvmlDeviceGetComputeRunningProcesses_v3
            ? s.quirk(gpumeter::sim::QuirkKind::process_record_layout, d.gpu.index(), now)
            : nullptr;
    if (layout == nullptr) {
      return list_records(jobs, count, infos,
                          [&](nvmlProcessInfo_t& info, const JobShare& j) { fill_v2(s.scenario(), info, j); });
    }
    return list_records(jobs, count, infos, [&, i = 0U](nvmlProcessInfo_t&, const JobShare& j) mutable {
      write_record(reinterpret_cast<unsigned char*>(infos), layout->record_bytes, i++, j);
    });
  });
}

nvmlReturn_t no_processes(Fn fn, nvmlDevice_t device, unsigned int* count) {
  if (gpumeter::sim::is_mig_handle(device)) return gpumeter::sim::mig::no_processes(fn, device, count);
  return device_call(fn, device, [&](Session& s, DeviceState& d, Micros now) {
    if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (s.refuses_unprivileged(d.gpu.index(), now)) return NVML_ERROR_NO_PERMISSION;
    *count = 0;
    return NVML_SUCCESS;
  });
}

}  // namespace

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* info_count,
                                                                          nvmlProcessInfo_t* infos) {
  return compute_processes(Fn::nvmlDeviceGetComputeRunningProcesses_v3, device, info_count, infos);
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int* info_count,
                                                                          nvmlProcessInfo_t* infos) {
  return compute_processes(Fn::nvmlDeviceGetComputeRunningProcesses_v2, device, info_count, infos);
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int* info_count,
                                                                       nvmlProcessInfo_v1_t* infos) {
  if (gpumeter::sim::is_mig_handle(device)) return gpumeter::sim::mig::compute_processes_v1(device, info_count, infos);
  return device_call(Fn::nvmlDeviceGetComputeRunningProcesses, device, [&](Session&, DeviceState& d, Micros now) {
    return list_records(d.gpu.processes(now), info_count, infos, [](nvmlProcessInfo_v1_t& info, const JobShare& j) {
      info = nvmlProcessInfo_v1_t{};
      info.pid = j.pid;
      info.usedGpuMemory = j.memory_bytes;
    });
  });
}

// Simulated jobs are compute (CUDA) processes; graphics and MPS lists are always empty.
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device,
                                                                           unsigned int* info_count,
                                                                           nvmlProcessInfo_t* /*infos*/) {
  return no_processes(Fn::nvmlDeviceGetGraphicsRunningProcesses_v3, device, info_count);
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v3(nvmlDevice_t device,
                                                                             unsigned int* info_count,
                                                                             nvmlProcessInfo_t* /*infos*/) {
  return no_processes(Fn::nvmlDeviceGetMPSComputeRunningProcesses_v3, device, info_count);
}

// Utilization and memory utilization come from the utilization buffer, power from the power
// buffer; samples are stamped with the end of their period. A short buffer gets the oldest
// samples first, so a caller that passes the last timestamp it saw pages through them all.
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetSamples(nvmlDevice_t device, unsigned int type,
                                                       unsigned long long last_seen_time_stamp,
                                                       unsigned int* sample_val_type, unsigned int* sample_count,
                                                       nvmlSample_t* samples) {
  return device_call(Fn::nvmlDeviceGetSamples, device, [&](Session& s, DeviceState& d, Micros now) {
    if (sample_val_type == nullptr || sample_count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (type != NVML_TOTAL_POWER_SAMPLES && type != NVML_GPU_UTILIZATION_SAMPLES &&
        type != NVML_MEMORY_UTILIZATION_SAMPLES) {
      return NVML_ERROR_NOT_SUPPORTED;
    }
    // nvml.h: GPU and memory utilization samples are not supported on a GPU in MIG mode.
    if (type != NVML_TOTAL_POWER_SAMPLES && s.scenario().mig.enabled(d.gpu.index())) return NVML_ERROR_NOT_SUPPORTED;
    if (samples != nullptr && *sample_count == 0) return NVML_ERROR_INVALID_ARGUMENT;
    *sample_val_type = NVML_VALUE_TYPE_UNSIGNED_INT;
    PeriodHistory& buffer = type == NVML_TOTAL_POWER_SAMPLES ? d.gpu.power_samples() : d.gpu.utilization_samples();
    const auto& periods = buffer.complete_until(now);
    // The silent_while_idle quirk: the utilization buffers record no period the GPU spent idle
    // (polarsignals/gpu-metrics-agent#37), so a GPU idle since the last query answers NOT_FOUND.
    auto recorded = [&](const Period& p) {
      if (type == NVML_TOTAL_POWER_SAMPLES || p.util_percent > 0) return true;
      return s.quirk(gpumeter::sim::QuirkKind::silent_while_idle, d.gpu.index(), p.end) == nullptr;
    };
    unsigned available = 0;
    for (const Period& p : periods) {
      if (static_cast<unsigned long long>(s.unix_micros(p.end)) > last_seen_time_stamp && recorded(p)) {
        ++available;
      }
    }
    if (available == 0) {
      *sample_count = 0;
      return NVML_ERROR_NOT_FOUND;
    }
    if (samples == nullptr) {
      *sample_count = available;
      return NVML_SUCCESS;
    }
    unsigned written = 0;
    for (const Period& p : periods) {
      const auto ts = static_cast<unsigned long long>(s.unix_micros(p.end));
      if (ts <= last_seen_time_stamp || !recorded(p)) continue;
      if (written == *sample_count) break;
      nvmlSample_t& out = samples[written++];
      out = nvmlSample_t{};
      out.timeStamp = ts;
      out.sampleValue.uiVal = type == NVML_TOTAL_POWER_SAMPLES       ? p.power_mw
                              : type == NVML_GPU_UTILIZATION_SAMPLES ? p.util_percent
                                                                     : p.memory_util_percent;
      // The impossible_power_samples quirk: every tenth power sample (by its period's place on
      // the buffer's grid) is all ones, a value no board can draw.
      if (type == NVML_TOTAL_POWER_SAMPLES && p.end / buffer.grid() % 10 == 0 &&
          s.quirk(gpumeter::sim::QuirkKind::impossible_power_samples, d.gpu.index(), p.end) != nullptr) {
        out.sampleValue.uiVal = 0xFFFFFFFFU;
      }
    }
    *sample_count = written;
    return NVML_SUCCESS;
  });
}

static_assert(std::is_same_v<decltype(&nvmlDeviceGetComputeRunningProcesses_v3), nvmlDeviceGetProcesses_v3_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetGraphicsRunningProcesses_v3), nvmlDeviceGetProcesses_v3_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetMPSComputeRunningProcesses_v3), nvmlDeviceGetProcesses_v3_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetSamples), nvmlDeviceGetSamples_fn>);
