// NVML entry points for running processes, per-process utilization and the sample buffer,
// with NVML's size-query protocols.

#include <type_traits>
#include <vector>

#include "sim/nvml/nvml_call.h"
#include "sim/model/periods.h"

using gpumeter::sim::device_call;
using gpumeter::sim::DeviceState;
using gpumeter::sim::JobShare;
using gpumeter::sim::Micros;
using gpumeter::sim::Period;
using gpumeter::sim::PeriodHistory;
using gpumeter::sim::Session;
using Fn = gpumeter::sim::NvmlFunction;

namespace {

// infoCount below the number running (0 included) answers INSUFFICIENT_SIZE with the number;
// nothing running answers SUCCESS with 0 whatever the buffer.
template <typename Info, typename Fill>
nvmlReturn_t list_processes(const std::vector<JobShare>& jobs, unsigned int* count, Info* infos,
                            Fill&& fill) {
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const auto n = static_cast<unsigned>(jobs.size());
  if (*count < n) {
    *count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  if (n > 0 && infos == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  for (unsigned i = 0; i < n; ++i) fill(infos[i], jobs[i]);
  *count = n;
  return NVML_SUCCESS;
}

void fill_v2(nvmlProcessInfo_t& info, const JobShare& j) {
  info = nvmlProcessInfo_t{};
  info.pid = j.pid;
  info.usedGpuMemory = j.memory_bytes;
  info.gpuInstanceId = 0xFFFFFFFFU;  // not a MIG instance
  info.computeInstanceId = 0xFFFFFFFFU;
}

nvmlReturn_t compute_processes(Fn fn, nvmlDevice_t device, unsigned int* count, nvmlProcessInfo_t* infos) {
  return device_call(fn, device, [&](Session&, DeviceState& d, Micros now) {
    return list_processes(d.gpu.processes(now), count, infos, fill_v2);
  });
}

nvmlReturn_t no_processes(Fn fn, nvmlDevice_t device, unsigned int* count) {
  return device_call(fn, device, [&](Session&, DeviceState&, Micros) {
    if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *count = 0;
    return NVML_SUCCESS;
  });
}

}  // namespace

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                                          unsigned int* info_count,
                                                                          nvmlProcessInfo_t* infos) {
  return compute_processes(Fn::nvmlDeviceGetComputeRunningProcesses_v3, device, info_count, infos);
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device,
                                                                          unsigned int* info_count,
                                                                          nvmlProcessInfo_t* infos) {
  return compute_processes(Fn::nvmlDeviceGetComputeRunningProcesses_v2, device, info_count, infos);
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device,
                                                                       unsigned int* info_count,
                                                                       nvmlProcessInfo_v1_t* infos) {
  return device_call(Fn::nvmlDeviceGetComputeRunningProcesses, device,
                     [&](Session&, DeviceState& d, Micros now) {
                       return list_processes(d.gpu.processes(now), info_count, infos,
                                             [](nvmlProcessInfo_v1_t& info, const JobShare& j) {
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

// One sample per process and 200 ms period in the buffer that is newer than lastSeenTimeStamp.
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                                                  nvmlProcessUtilizationSample_t* utilization,
                                                                  unsigned int* process_samples_count,
                                                                  unsigned long long last_seen_time_stamp) {
  return device_call(
      Fn::nvmlDeviceGetProcessUtilization, device, [&](Session& s, DeviceState& d, Micros now) {
        if (process_samples_count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
        unsigned n = 0;
        const auto& periods = d.gpu.periods(now);
        for (const Period& p : periods) {
          const auto ts = static_cast<unsigned long long>(s.unix_micros(PeriodHistory::end_of(p)));
          if (ts > last_seen_time_stamp) n += static_cast<unsigned>(p.processes.size());
        }
        if (n == 0) {
          *process_samples_count = 0;
          return NVML_ERROR_NOT_FOUND;
        }
        if (utilization == nullptr || *process_samples_count < n) {
          *process_samples_count = n;
          return NVML_ERROR_INSUFFICIENT_SIZE;
        }
        unsigned i = 0;
        for (const Period& p : periods) {
          const auto ts = static_cast<unsigned long long>(s.unix_micros(PeriodHistory::end_of(p)));
          if (ts <= last_seen_time_stamp) continue;
          for (const auto& share : p.processes) {
            utilization[i] = nvmlProcessUtilizationSample_t{};
            utilization[i].pid = share.pid;
            utilization[i].timeStamp = ts;
            utilization[i].smUtil = share.sm_percent;
            utilization[i].memUtil = share.memory_percent;
            ++i;
          }
        }
        *process_samples_count = n;
        return NVML_SUCCESS;
      });
}

// Samples are stamped with the end of their 200 ms period. A short buffer gets the oldest
// samples first, so a caller that passes the last timestamp it saw pages through them all.
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetSamples(nvmlDevice_t device, unsigned int type,
                                                       unsigned long long last_seen_time_stamp,
                                                       unsigned int* sample_val_type,
                                                       unsigned int* sample_count, nvmlSample_t* samples) {
  return device_call(Fn::nvmlDeviceGetSamples, device, [&](Session& s, DeviceState& d, Micros now) {
    if (sample_val_type == nullptr || sample_count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (type != NVML_TOTAL_POWER_SAMPLES && type != NVML_GPU_UTILIZATION_SAMPLES &&
        type != NVML_MEMORY_UTILIZATION_SAMPLES) {
      return NVML_ERROR_NOT_SUPPORTED;
    }
    if (samples != nullptr && *sample_count == 0) return NVML_ERROR_INVALID_ARGUMENT;
    *sample_val_type = NVML_VALUE_TYPE_UNSIGNED_INT;
    const auto& periods = d.gpu.periods(now);
    unsigned available = 0;
    for (const Period& p : periods) {
      if (static_cast<unsigned long long>(s.unix_micros(PeriodHistory::end_of(p))) > last_seen_time_stamp) {
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
      const auto ts = static_cast<unsigned long long>(s.unix_micros(PeriodHistory::end_of(p)));
      if (ts <= last_seen_time_stamp) continue;
      if (written == *sample_count) break;
      nvmlSample_t& out = samples[written++];
      out = nvmlSample_t{};
      out.timeStamp = ts;
      out.sampleValue.uiVal = type == NVML_TOTAL_POWER_SAMPLES       ? p.power_mw
                              : type == NVML_GPU_UTILIZATION_SAMPLES ? p.util_percent
                                                                     : p.memory_util_percent;
    }
    *sample_count = written;
    return NVML_SUCCESS;
  });
}

static_assert(
    std::is_same_v<decltype(&nvmlDeviceGetComputeRunningProcesses_v3), nvmlDeviceGetProcesses_v3_fn>);
static_assert(
    std::is_same_v<decltype(&nvmlDeviceGetGraphicsRunningProcesses_v3), nvmlDeviceGetProcesses_v3_fn>);
static_assert(
    std::is_same_v<decltype(&nvmlDeviceGetMPSComputeRunningProcesses_v3), nvmlDeviceGetProcesses_v3_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetProcessUtilization), nvmlDeviceGetProcessUtilization_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetSamples), nvmlDeviceGetSamples_fn>);
