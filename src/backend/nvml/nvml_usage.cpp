// What the usage ledger reads from a GPU: process lists, the device sample buffers and
// per-process utilization, with the checks real drivers need (record strides that differ from
// nvml.h, garbage records, a capacity answered instead of a count).

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "backend/nvml/nvml_internal.h"

namespace gpumeter {

unsigned detect_record_stride(const unsigned char* buf, size_t size, unsigned count, unsigned nominal) {
  if (count == 0) return nominal;
  size_t end = size;
  while (end > 0 && buf[end - 1] == kRecordSentinel) --end;
  if (end == 0) return nominal;
  // The narrowest layout whose `count` records reach as far as the driver wrote. A wider
  // stride would need the last record's tail to equal the sentinel over 8 bytes per record.
  for (unsigned stride : {16u, 24u, 32u}) {
    if (static_cast<size_t>(count) * stride >= end) return stride;
  }
  return nominal;  // written past `count` records: the buffer says nothing reliable
}

namespace {
constexpr unsigned kWidestProcessRecord = 32;
}  // namespace

// Reads one process list: size query, then a call with headroom, growing while the list grows
// between calls. The buffer is pre-filled with a sentinel so the stride the driver used can be
// seen: some R535 drivers write 32-byte records from the _v3 calls, one R550 report 16.
nvmlReturn_t read_process_list(const nvmlDeviceGetProcessesRaw_fn (&fns)[3], nvmlDevice_t h, unsigned type_bit,
                               std::vector<GpuProcess>& out) {
  int generation = -1;
  for (int i = 0; i < 3; ++i) {
    if (fns[i] != nullptr) {
      generation = i;
      break;
    }
  }
  if (generation < 0) return NVML_ERROR_FUNCTION_NOT_FOUND;
  const unsigned nominal = generation == 2 ? sizeof(nvmlProcessInfo_v1_t) : sizeof(nvmlProcessInfo_t);
  unsigned count = 0;
  nvmlReturn_t rc = fns[generation](h, &count, nullptr);
  if (rc == NVML_SUCCESS) return rc;  // nothing running
  std::vector<unsigned char> buf;
  for (int attempt = 0; attempt < 4 && rc == NVML_ERROR_INSUFFICIENT_SIZE; ++attempt) {
    count += 8 + count / 4;
    buf.assign(static_cast<size_t>(count) * kWidestProcessRecord, kRecordSentinel);
    rc = fns[generation](h, &count, buf.data());
  }
  if (rc != NVML_SUCCESS) return rc;
  const unsigned stride = detect_record_stride(buf.data(), buf.size(), count, nominal);
  count = std::min<unsigned>(count, static_cast<unsigned>(buf.size() / stride));
  for (unsigned i = 0; i < count; ++i) {
    const unsigned char* rec = buf.data() + static_cast<size_t>(i) * stride;
    unsigned pid;
    unsigned long long mem;
    // pid and usedGpuMemory sit at the same offsets in every layout.
    std::memcpy(&pid, rec + offsetof(nvmlProcessInfo_t, pid), sizeof pid);
    std::memcpy(&mem, rec + offsetof(nvmlProcessInfo_t, usedGpuMemory), sizeof mem);
    auto it = std::find_if(out.begin(), out.end(), [pid](const GpuProcess& p) { return p.pid == pid; });
    if (it == out.end()) it = out.insert(out.end(), GpuProcess{pid, std::nullopt, 0});
    it->types |= type_bit;
    // ~0 is NVML_VALUE_NOT_AVAILABLE; a pid in two lists reports the same allocation twice.
    if (mem != ~0ULL) it->memory_bytes = std::max(it->memory_bytes.value_or(0), static_cast<double>(mem));
  }
  return NVML_SUCCESS;
}

namespace {

double sample_as_double(unsigned type, const nvmlValue_t& v) {
  switch (type) {
    case NVML_VALUE_TYPE_DOUBLE:
      return v.dVal;
    case NVML_VALUE_TYPE_UNSIGNED_LONG:
      return static_cast<double>(v.ulVal);
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
      return static_cast<double>(v.ullVal);
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
      return static_cast<double>(v.sllVal);
    case NVML_VALUE_TYPE_SIGNED_INT:
      return v.siVal;
    case NVML_VALUE_TYPE_UNSIGNED_SHORT:
      return v.usVal;
    default:
      return v.uiVal;
  }
}

struct RawProcessSample {
  unsigned pid;
  unsigned long long timestamp;
  unsigned sm;
  unsigned memory;
};

// Both per-process calls answer the size query with a capacity (100 on the drivers seen), and
// NOT_FOUND when no process has a sample newer than `since`.
nvmlReturn_t read_processes_utilization_info(nvmlDeviceGetProcessesUtilizationInfo_fn fn, nvmlDevice_t h,
                                             unsigned long long since, std::vector<RawProcessSample>& out) {
  nvmlProcessesUtilizationInfo_t info{};
  info.version = nvmlProcessesUtilizationInfo_v1;
  info.lastSeenTimeStamp = since;
  nvmlReturn_t rc = fn(h, &info);
  if (rc == NVML_SUCCESS && info.processSamplesCount == 0) return rc;
  std::vector<nvmlProcessUtilizationInfo_v1_t> buf;
  for (int attempt = 0; attempt < 3 && (rc == NVML_ERROR_INSUFFICIENT_SIZE || (rc == NVML_SUCCESS && buf.empty()));
       ++attempt) {
    buf.assign(static_cast<size_t>(info.processSamplesCount) + 8, nvmlProcessUtilizationInfo_v1_t{});
    info.version = nvmlProcessesUtilizationInfo_v1;
    info.processSamplesCount = static_cast<unsigned>(buf.size());
    info.lastSeenTimeStamp = since;
    info.procUtilArray = buf.data();
    rc = fn(h, &info);
  }
  if (rc != NVML_SUCCESS) return rc;
  for (size_t i = 0; i < std::min<size_t>(info.processSamplesCount, buf.size()); ++i) {
    out.push_back({buf[i].pid, buf[i].timeStamp, buf[i].smUtil, buf[i].memUtil});
  }
  return NVML_SUCCESS;
}

nvmlReturn_t read_process_utilization(nvmlDeviceGetProcessUtilization_fn fn, nvmlDevice_t h, unsigned long long since,
                                      std::vector<RawProcessSample>& out) {
  unsigned count = 0;
  nvmlReturn_t rc = fn(h, nullptr, &count, since);
  if (rc == NVML_SUCCESS && count == 0) return rc;
  std::vector<nvmlProcessUtilizationSample_t> buf;
  for (int attempt = 0; attempt < 3 && (rc == NVML_ERROR_INSUFFICIENT_SIZE || (rc == NVML_SUCCESS && buf.empty()));
       ++attempt) {
    buf.assign(static_cast<size_t>(count) + 8, nvmlProcessUtilizationSample_t{});
    count = static_cast<unsigned>(buf.size());
    rc = fn(h, buf.data(), &count, since);
  }
  if (rc != NVML_SUCCESS) return rc;
  for (size_t i = 0; i < std::min<size_t>(count, buf.size()); ++i) {
    out.push_back({buf[i].pid, buf[i].timeStamp, buf[i].smUtil, buf[i].memUtil});
  }
  return NVML_SUCCESS;
}

// Reads what a device sample buffer (utilization or power) holds newer than `seen` into `out`,
// scaled to base units and in time order, and moves `seen` to the newest; `supported` is set
// when the driver has the buffer. After a step back of the wall clock, only the samples after
// the buffer's last step back in time are new.
void read_sample_buffer(const NvmlSymbols& s, nvmlDevice_t h, Call call, unsigned type, double scale,
                        bool after_step_back, NvmlCollection& c, unsigned long long& seen, bool& supported,
                        std::vector<TimedSample>& out) {
  if (!c.wanted(s.samples, call)) return;
  unsigned value_type = 0;
  unsigned count = 0;
  nvmlReturn_t rc = s.samples(h, type, seen, &value_type, &count, nullptr);
  if (rc == NVML_ERROR_NOT_FOUND) {
    c.answered();
    supported = true;  // no new samples yet
    return;
  }
  if ((rc != NVML_SUCCESS && rc != NVML_ERROR_INSUFFICIENT_SIZE) || count == 0) {
    if (c.ok(call, rc, "nvmlDeviceGetSamples")) supported = true;
    return;
  }
  std::vector<nvmlSample_t> buf(count + 8);
  count = static_cast<unsigned>(buf.size());
  rc = s.samples(h, type, seen, &value_type, &count, buf.data());
  if (rc == NVML_ERROR_NOT_FOUND) {
    c.answered();
    supported = true;
    return;
  }
  if (!c.ok(call, rc, "nvmlDeviceGetSamples")) return;
  supported = true;
  unsigned first = 0;
  if (after_step_back) {
    for (unsigned i = 1; i < count && i < buf.size(); ++i) {
      if (buf[i].timeStamp < buf[i - 1].timeStamp) first = i;
    }
  }
  for (unsigned i = first; i < count && i < buf.size(); ++i) {
    const auto ts = buf[i].timeStamp;
    if (ts <= seen) continue;  // drivers have been seen to repeat old samples
    out.push_back({static_cast<std::int64_t>(ts), sample_as_double(value_type, buf[i].sampleValue) * scale});
  }
  std::sort(out.begin(), out.end(),
            [](const TimedSample& a, const TimedSample& b) { return a.timestamp_us < b.timestamp_us; });
  if (!out.empty()) seen = static_cast<unsigned long long>(out.back().timestamp_us);
}

// Reads the compute, graphics and MPS process lists, merged by pid into `out`; false when no
// list could be read.
bool read_process_lists(const NvmlSymbols& s, nvmlDevice_t h, NvmlCollection& c, std::vector<GpuProcess>& out) {
  bool any_list = false;
  struct List {
    const nvmlDeviceGetProcessesRaw_fn (&fns)[3];
    Call call;
    unsigned bit;
    const char* name;
  };
  for (const List& l :
       {List{s.compute_processes, kComputeProcesses, kProcessCompute, "nvmlDeviceGetComputeRunningProcesses_v3"},
        List{s.graphics_processes, kGraphicsProcesses, kProcessGraphics, "nvmlDeviceGetGraphicsRunningProcesses_v3"},
        List{s.mps_processes, kMpsProcesses, kProcessMps, "nvmlDeviceGetMPSComputeRunningProcesses_v3"}}) {
    if (c.fatal() || c.unsupported(l.call)) continue;
    if (c.ok(l.call, read_process_list(l.fns, h, l.bit, out), l.name)) any_list = true;
  }
  return any_list;
}

// What one per-process utilization query answered, and which call answered it.
struct ProcessUtilizationAnswer {
  Call call;
  nvmlReturn_t rc;
  const char* name;
};

// Asks for the per-process utilization records newer than `cursor`, into `raw`: the R550 call
// where the driver has it (the legacy one reads zeros on some newer GPUs), else the legacy one.
// Nullopt when neither call was made.
std::optional<ProcessUtilizationAnswer> query_process_utilization(const NvmlSymbols& s, nvmlDevice_t h,
                                                                  unsigned long long cursor, NvmlCollection& c,
                                                                  std::vector<RawProcessSample>& raw) {
  if (c.wanted(s.processes_utilization_info, kProcessesUtilizationInfo)) {
    const char* name = "nvmlDeviceGetProcessesUtilizationInfo";
    nvmlReturn_t rc = read_processes_utilization_info(s.processes_utilization_info, h, cursor, raw);
    if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_FUNCTION_NOT_FOUND) {
      c.ok(kProcessesUtilizationInfo, rc, name);  // remembered: the legacy call from now on
    } else {
      return ProcessUtilizationAnswer{kProcessesUtilizationInfo, rc, name};
    }
  }
  if (c.wanted(s.process_utilization, kProcessUtilization)) {
    return ProcessUtilizationAnswer{kProcessUtilization,
                                    read_process_utilization(s.process_utilization, h, cursor, raw),
                                    "nvmlDeviceGetProcessUtilization"};
  }
  return std::nullopt;
}

}  // namespace

void NvmlBackend::collect_usage(Device& d, nvmlDevice_t h, NvmlCollection& c, UsageReading& u) {
  const NvmlSymbols& s = symbols_;
  const std::int64_t wall = wall_now_us();
  const bool after_step_back = follow_clock_steps(d, wall, u);

  // Device sample buffers: utilization and power, only what is newer than last time.
  read_sample_buffer(s, h, kUtilizationSamples, NVML_GPU_UTILIZATION_SAMPLES, 0.01, after_step_back, c,
                     d.utilization_seen_us, u.utilization_samples_supported, u.utilization_samples);
  read_sample_buffer(s, h, kPowerSamples, NVML_TOTAL_POWER_SAMPLES, 0.001, after_step_back, c, d.power_seen_us,
                     u.power_samples_supported, u.power_samples);
  std::erase_if(u.power_samples, [&](const TimedSample& p) { return !c.plausible_power(p.value); });

  // Processes: compute, graphics and MPS lists merged by pid. Read after the sample buffers, so
  // the list is at least as new as every sample the ledger integrates from this reading: a
  // process that started before the newest sample is listed (with its start time from the
  // host), however long the reads took. Read before them, a slow collection would integrate
  // samples past the list's instant with the process missing, and bill its first moments to
  // nobody.
  std::vector<GpuProcess> procs;
  const bool any_list = read_process_lists(s, h, c, procs);
  std::vector<unsigned> pids;
  if (any_list) {
    for (const auto& p : procs) pids.push_back(p.pid);
    std::sort(pids.begin(), pids.end());
    u.processes = std::move(procs);
  }

  read_process_samples(d, h, wall, pids, c, u);
  if (any_list) d.previous_pids = std::move(pids);
}

bool NvmlBackend::follow_clock_steps(Device& d, std::int64_t wall, UsageReading& u) {
  // A step of the wall clock moves the driver's timestamps with it: the cursors move by the
  // same amount, or a step back would hide every new sample until the clock caught up (and a
  // step forward would read as a hole). After a step back the buffers still hold samples
  // stamped before it, "newer" than the moved cursors: until they have left the buffers (the
  // longest holds 120 samples of at most 1 s), only the samples after the buffer's last step
  // back in time are new.
  const auto steady = steady_now();
  if (const std::int64_t step = d.clock_steps.observe(wall, steady); step != 0) {
    u.clock_step_us = step;
    if (step < 0) d.skip_before_step_back_until = steady + std::chrono::minutes(3);
    for (unsigned long long* seen : {&d.utilization_seen_us, &d.power_seen_us, &d.process_seen_us}) {
      if (*seen == 0) continue;  // nothing read yet: the whole buffer is new anyway
      const std::int64_t moved = static_cast<std::int64_t>(*seen) + step;
      *seen = moved > 0 ? static_cast<unsigned long long>(moved) : 0;
    }
  }
  return steady < d.skip_before_step_back_until;
}

void NvmlBackend::read_process_samples(Device& d, nvmlDevice_t h, std::int64_t wall, const std::vector<unsigned>& pids,
                                       NvmlCollection& c, UsageReading& u) {
  // Per-process utilization, windowed by this GPU's cursor.
  const unsigned long long cursor = d.process_seen_us;
  // What the records of this query cover: since the cursor; on the first query (cursor 0, the
  // whole buffer) since the oldest instant the utilization buffer holds, one period before its
  // oldest sample. Unknown (0) when there is no utilization buffer to tell.
  unsigned long long covers_from = cursor;
  if (cursor == 0 && u.utilization_samples.size() >= 2) {
    const auto& first = u.utilization_samples[0];
    const std::int64_t period = u.utilization_samples[1].timestamp_us - first.timestamp_us;
    covers_from = static_cast<unsigned long long>(std::max<std::int64_t>(first.timestamp_us - period, 1));
  }
  // The device's newest sample: the driver's "now" as far as this collection knows it.
  const unsigned long long device_now =
      u.utilization_samples.empty() ? 0 : static_cast<unsigned long long>(u.utilization_samples.back().timestamp_us);
  std::vector<RawProcessSample> raw;
  u.process_samples_asked_us = wall_now_us();
  const std::optional<ProcessUtilizationAnswer> answer = query_process_utilization(symbols_, h, cursor, c, raw);
  if (answer && answer->rc == NVML_ERROR_NOT_FOUND) {
    c.answered();
    u.process_samples_supported = true;
    // No process ran since the cursor, up to the driver's now: the next records need not reach
    // back past it (a window reaching back over idle time would dilute their averages).
    d.process_seen_us = std::max(d.process_seen_us, std::max(covers_from, device_now));
    return;
  }
  if (!answer || !c.ok(answer->call, answer->rc, answer->name)) return;
  u.process_samples_supported = true;
  // Real drivers hand back unused entries and garbage: a record is taken only when it can be
  // true. The driver's clock can run ahead of ours, so "the future" is measured against the
  // newest device sample as well as the wall clock.
  const auto wall_now = static_cast<unsigned long long>(std::max<std::int64_t>(wall, 0));
  const unsigned long long horizon = std::max(d.utilization_seen_us, wall_now) + 1'000'000;
  unsigned long long newest = cursor;
  for (const RawProcessSample& r : raw) {
    const char* drop = nullptr;
    if (r.pid == 0) {
      drop = "pid_zero";
    } else if (r.sm > 100 || r.memory > 100) {
      drop = "over_100_percent";
    } else if (r.timestamp <= cursor) {
      drop = "stale_timestamp";
    } else if (r.timestamp > horizon) {
      drop = "future_timestamp";
    } else if (!std::binary_search(pids.begin(), pids.end(), r.pid) &&
               !std::binary_search(d.previous_pids.begin(), d.previous_pids.end(), r.pid)) {
      drop = "unknown_pid";
    }
    if (drop != nullptr) {
      c.drop_record(drop);
      continue;
    }
    u.process_samples.push_back({r.pid, static_cast<std::int64_t>(r.timestamp), r.sm / 100.0, r.memory / 100.0,
                                 static_cast<std::int64_t>(covers_from)});
    newest = std::max(newest, r.timestamp);
  }
  d.process_seen_us = newest;
  std::sort(u.process_samples.begin(), u.process_samples.end(),
            [](const ProcessSample& a, const ProcessSample& b) { return a.timestamp_us < b.timestamp_us; });
}

}  // namespace gpumeter
