// Per-process utilization: nvmlDeviceGetProcessUtilization and its R550 successor
// nvmlDeviceGetProcessesUtilizationInfo, which report the same records.

#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#include "sim/scenario/driver.h"
#include "sim/physics/process_utilization.h"
#include "sim/nvml/nvml_call.h"

using gpumeter::sim::device_call;
using gpumeter::sim::DeviceState;
using gpumeter::sim::Micros;
using gpumeter::sim::ProcessRecord;
using gpumeter::sim::Session;
using Fn = gpumeter::sim::NvmlFunction;

namespace {

// What the size query (a NULL buffer) answers: the driver's fixed capacity, the same with or
// without load (NVIDIA/go-nvml#11 and PR#12).
constexpr unsigned kSizeQueryCapacity = 100;

struct Record {
  std::uint32_t pid = 0;
  unsigned long long timestamp = 0;  // simulated unix us
  unsigned sm = 0;
  unsigned mem = 0;
};

// A pid no job of the scenario uses, for a garbage record of a process that is not running.
std::uint32_t unused_pid(const gpumeter::sim::Scenario& s) {
  std::uint32_t max_pid = 0;
  for (const auto& j : s.jobs) {
    for (unsigned p : j.pids) max_pid = std::max<std::uint32_t>(max_pid, p);
  }
  return max_pid + 1;
}

// The records of one query. The garbage_process_records quirk adds the entries real drivers
// were seen to return beside the real ones (Syllo/nvtop#110): pid 0, a utilization over 100,
// a timestamp an hour ahead, and a pid that is not running.
std::vector<Record> records_at(const Session& s, DeviceState& d, Micros now, unsigned long long last_seen) {
  const std::int64_t epoch_us = s.unix_micros(0);
  Micros since = std::numeric_limits<Micros>::min();
  if (last_seen != 0) {
    since = last_seen >= static_cast<unsigned long long>(std::numeric_limits<Micros>::max() / 2)
                ? std::numeric_limits<Micros>::max() / 2
                : static_cast<Micros>(last_seen) - epoch_us;
  }
  std::vector<Record> out;
  const bool active_only =
      s.quirk(gpumeter::sim::QuirkKind::active_only_process_samples, d.gpu.index(), now) != nullptr;
  for (const ProcessRecord& r : d.gpu.process_records(now, since, active_only)) {
    out.push_back(
        Record{r.pid, static_cast<unsigned long long>(s.unix_micros(r.time)), r.sm_percent, r.memory_percent});
  }
  if (s.quirk(gpumeter::sim::QuirkKind::garbage_process_records, d.gpu.index(), now) != nullptr) {
    const auto stamp = static_cast<unsigned long long>(s.unix_micros(now));
    const std::uint32_t real_pid = out.empty() ? unused_pid(s.scenario()) : out.front().pid;
    out.push_back(Record{0, stamp, 3, 1});
    out.push_back(Record{real_pid, stamp, 4294967295U, 4294967295U});
    out.push_back(Record{real_pid, stamp + 3'600'000'000ULL, 12, 5});
    out.push_back(Record{unused_pid(s.scenario()), stamp, 7, 2});
  }
  return out;
}

// nvml.h's "fully supported devices" do not include GeForce boards (an assumption: many
// GeForce drivers do answer).
bool per_process_supported(const DeviceState& d) { return d.gpu.model().profile != "geforce"; }

}  // namespace

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                                                  nvmlProcessUtilizationSample_t* utilization,
                                                                  unsigned int* process_samples_count,
                                                                  unsigned long long last_seen_time_stamp) {
  return device_call(Fn::nvmlDeviceGetProcessUtilization, device, [&](Session& s, DeviceState& d, Micros now) {
    if (process_samples_count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!per_process_supported(d) || s.scenario().mig.enabled(d.gpu.index())) return NVML_ERROR_NOT_SUPPORTED;
    const std::vector<Record> records = records_at(s, d, now, last_seen_time_stamp);
    const auto n = static_cast<unsigned>(records.size());
    if (utilization == nullptr) {
      *process_samples_count = std::max(kSizeQueryCapacity, n);
      return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (n == 0) {
      *process_samples_count = 0;
      return NVML_ERROR_NOT_FOUND;
    }
    if (*process_samples_count < n) {
      *process_samples_count = n;
      return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned i = 0; i < n; ++i) {
      utilization[i] = nvmlProcessUtilizationSample_t{};
      utilization[i].pid = records[i].pid;
      utilization[i].timeStamp = records[i].timestamp;
      utilization[i].smUtil = records[i].sm;
      utilization[i].memUtil = records[i].mem;
    }
    *process_samples_count = n;
    return NVML_SUCCESS;
  });
}

// R550 and later (NVML change log, "Changes between v545 and v550"); on an older driver the
// symbol would not exist, which a caller resolving it lazily sees as FUNCTION_NOT_FOUND.
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetProcessesUtilizationInfo(nvmlDevice_t device,
                                                                        nvmlProcessesUtilizationInfo_t* info) {
  try {
    auto session = gpumeter::sim::Runtime::instance().session();
    if (session && session->driver_major() < gpumeter::sim::kBranchProcessesUtilInfo)
      return NVML_ERROR_FUNCTION_NOT_FOUND;
  } catch (...) {
    return NVML_ERROR_UNKNOWN;
  }
  return device_call(Fn::nvmlDeviceGetProcessesUtilizationInfo, device, [&](Session& s, DeviceState& d, Micros now) {
    if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (info->version != nvmlProcessesUtilizationInfo_v1) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (!per_process_supported(d) || s.scenario().mig.enabled(d.gpu.index())) return NVML_ERROR_NOT_SUPPORTED;
    const std::vector<Record> records = records_at(s, d, now, info->lastSeenTimeStamp);
    const auto n = static_cast<unsigned>(records.size());
    if (n == 0) {
      info->processSamplesCount = 0;
      return NVML_ERROR_NOT_FOUND;
    }
    if (info->procUtilArray == nullptr || info->processSamplesCount < n) {
      info->processSamplesCount = n;
      return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned i = 0; i < n; ++i) {
      nvmlProcessUtilizationInfo_v1_t& out = info->procUtilArray[i];
      out = nvmlProcessUtilizationInfo_v1_t{};
      out.pid = records[i].pid;
      out.timeStamp = records[i].timestamp;
      out.smUtil = records[i].sm;
      out.memUtil = records[i].mem;
    }
    info->processSamplesCount = n;
    return NVML_SUCCESS;
  });
}

static_assert(std::is_same_v<decltype(&nvmlDeviceGetProcessUtilization), nvmlDeviceGetProcessUtilization_fn>);
static_assert(
    std::is_same_v<decltype(&nvmlDeviceGetProcessesUtilizationInfo), nvmlDeviceGetProcessesUtilizationInfo_fn>);
