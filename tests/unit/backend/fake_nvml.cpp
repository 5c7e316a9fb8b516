#include "fake_nvml.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <vector>

namespace gpumeter::fake {

namespace {

Script* g_script = new Script();  // never freed: functions may run on threads a test left
// Every script made, kept reachable (so not a leak) for the same reason.
std::vector<Script*>* g_old_scripts = new std::vector<Script*>();
int g_handles[kMaxGpus];
int g_mig_handles[kMaxGpus][kMaxMigSlots];
int g_gpu_instances[kMaxGpus][32];
int g_sets[64];
int g_set_count = 0;

bool is_mig(nvmlDevice_t h) {
  auto* p = reinterpret_cast<int*>(h);
  return p >= &g_mig_handles[0][0] && p < &g_mig_handles[0][0] + kMaxGpus * kMaxMigSlots;
}
unsigned mig_slot(nvmlDevice_t h) {
  return static_cast<unsigned>(reinterpret_cast<int*>(h) - &g_mig_handles[0][0]) % kMaxMigSlots;
}
// The GPU of a device or MIG device handle.
unsigned index_of(nvmlDevice_t h) {
  if (is_mig(h)) return static_cast<unsigned>(reinterpret_cast<int*>(h) - &g_mig_handles[0][0]) / kMaxMigSlots;
  return static_cast<unsigned>(reinterpret_cast<int*>(h) - g_handles);
}
// The MIG device a MIG handle stands for; null when the slot is empty now.
const FakeMig* mig_of(nvmlDevice_t h) {
  if (!is_mig(h)) return nullptr;
  const auto& slots = g_script->mig[index_of(h)];
  const unsigned slot = mig_slot(h);
  return slot < slots.size() && slots[slot] ? &*slots[slot] : nullptr;
}
bool mig_enabled(nvmlDevice_t h) {
  return !is_mig(h) && g_script->mig_capable[index_of(h)] && g_script->mig_mode[index_of(h)] == NVML_DEVICE_MIG_ENABLE;
}

// A GPM sample: which target it was taken of, and its number among that target's samples.
struct FakeGpmSample {
  unsigned gpu = kWholeGpu;
  unsigned gpu_instance = kWholeGpu;
  int number = -1;
};
std::map<std::pair<unsigned, unsigned>, int> g_gpm_taken;  // samples taken per target

// The scripted answer of a device call; counts the call and blocks where the script says so.
nvmlReturn_t answer(const char* name, nvmlDevice_t h) {
  Script& s = *g_script;
  {
    std::lock_guard lock(s.calls_mu);
    s.calls[name]++;
  }
  if (s.block_call == name) {
    std::unique_lock lock(s.block_mu);
    s.blocked = true;
    s.block_cv.notify_all();
    s.block_cv.wait(lock, [&] { return s.release; });
  }
  if (s.all_rc) return *s.all_rc;
  if (h != nullptr) {
    auto it = s.gpu_rc.find({name, index_of(h)});
    if (it != s.gpu_rc.end()) return it->second;
  }
  auto it = s.rc.find(name);
  return it == s.rc.end() ? NVML_SUCCESS : it->second;
}

nvmlReturn_t Init() {
  Script& s = *g_script;
  s.calls["nvmlInit_v2"]++;
  ++s.inits;
  if (!s.init_answers.empty()) {
    const nvmlReturn_t rc = s.init_answers.front();
    s.init_answers.pop_front();
    return rc;
  }
  if (s.init_rc) return *s.init_rc;
  return NVML_SUCCESS;
}
nvmlReturn_t Shutdown() {
  ++g_script->shutdowns;
  return NVML_SUCCESS;
}
const char* ErrorString(nvmlReturn_t rc) {
  switch (rc) {
    case NVML_ERROR_UNKNOWN:
      return "Unknown Error";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
      return "RM has detected an NVML/RM version mismatch.";
    default:
      return "fake error";
  }
}
nvmlReturn_t DriverVersion(char* buf, unsigned size) {
  std::strncpy(buf, g_script->driver.c_str(), size);
  return NVML_SUCCESS;
}
nvmlReturn_t Count(unsigned* n) {
  if (nvmlReturn_t rc = answer("nvmlDeviceGetCount_v2", nullptr)) return rc;
  *n = g_script->device_count;
  return NVML_SUCCESS;
}
nvmlReturn_t HandleByIndex(unsigned i, nvmlDevice_t* h) {
  if (nvmlReturn_t rc = answer("nvmlDeviceGetHandleByIndex_v2", nullptr)) return rc;
  if (i >= g_script->device_count) return NVML_ERROR_INVALID_ARGUMENT;
  if (g_script->lost.count(i) != 0) return NVML_ERROR_GPU_IS_LOST;
  *h = handle(i);
  return NVML_SUCCESS;
}
nvmlReturn_t Uuid(nvmlDevice_t h, char* buf, unsigned size) {
  if (nvmlReturn_t rc = answer("nvmlDeviceGetUUID", h)) return rc;
  if (is_mig(h)) {
    const FakeMig* m = mig_of(h);
    if (m == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    std::snprintf(buf, size, "%s", m->uuid.c_str());
    return NVML_SUCCESS;
  }
  std::snprintf(buf, size, "GPU-fake-%u", index_of(h));
  return NVML_SUCCESS;
}
nvmlReturn_t Utilization(nvmlDevice_t h, nvmlUtilization_t* u) {
  if (nvmlReturn_t rc = answer("nvmlDeviceGetUtilizationRates", h)) return rc;
  if (mig_enabled(h)) return NVML_ERROR_NOT_SUPPORTED;  // [H] nvmlDeviceGetUtilizationRates
  u->gpu = 40;
  u->memory = 10;
  return NVML_SUCCESS;
}
nvmlReturn_t MemoryV2(nvmlDevice_t h, nvmlMemory_v2_t* m) {
  if (nvmlReturn_t rc = answer("nvmlDeviceGetMemoryInfo_v2", h)) return rc;
  if (is_mig(h)) {
    const FakeMig* mig = mig_of(h);
    if (mig == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    m->total = mig->memory_total;
    m->used = mig->memory_used;
    m->free = mig->memory_total - mig->memory_used;
    return NVML_SUCCESS;
  }
  m->total = 1000;
  m->used = 100;
  m->free = 900;
  return NVML_SUCCESS;
}
nvmlReturn_t Temperature(nvmlDevice_t h, unsigned, unsigned* t) {
  if (nvmlReturn_t rc = answer("nvmlDeviceGetTemperature", h)) return rc;
  *t = 50;
  return NVML_SUCCESS;
}
nvmlReturn_t PowerUsage(nvmlDevice_t h, unsigned* mw) {
  if (nvmlReturn_t rc = answer("nvmlDeviceGetPowerUsage", h)) return rc;
  *mw = 120000;
  return NVML_SUCCESS;
}
nvmlReturn_t PowerLimit(nvmlDevice_t h, unsigned* mw) {
  if (nvmlReturn_t rc = answer("nvmlDeviceGetEnforcedPowerLimit", h)) return rc;
  *mw = 300000;
  return NVML_SUCCESS;
}
nvmlReturn_t Energy(nvmlDevice_t h, unsigned long long* mj) {
  if (nvmlReturn_t rc = answer("nvmlDeviceGetTotalEnergyConsumption", h)) return rc;
  *mj = 5000;
  return NVML_SUCCESS;
}
nvmlReturn_t Clock(nvmlDevice_t h, unsigned, unsigned* mhz) {
  if (nvmlReturn_t rc = answer("nvmlDeviceGetClockInfo", h)) return rc;
  *mhz = 1000;
  return NVML_SUCCESS;
}
nvmlReturn_t FanSpeed(nvmlDevice_t h, unsigned* pct) {
  if (nvmlReturn_t rc = answer("nvmlDeviceGetFanSpeed", h)) return rc;
  *pct = 30;
  return NVML_SUCCESS;
}
nvmlReturn_t EncoderUtilization(nvmlDevice_t h, unsigned* pct, unsigned* period_us) {
  if (nvmlReturn_t rc = answer("nvmlDeviceGetEncoderUtilization", h)) return rc;
  *pct = 25;
  *period_us = 167'000;
  return NVML_SUCCESS;
}
nvmlReturn_t DecoderUtilization(nvmlDevice_t h, unsigned* pct, unsigned* period_us) {
  if (nvmlReturn_t rc = answer("nvmlDeviceGetDecoderUtilization", h)) return rc;
  *pct = 5;
  *period_us = 167'000;
  return NVML_SUCCESS;
}
nvmlReturn_t ComputeProcesses(nvmlDevice_t h, unsigned* count, void* buf) {
  if (nvmlReturn_t rc = answer("nvmlDeviceGetComputeRunningProcesses_v3", h)) return rc;
  if (is_mig(h) && mig_of(h) == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const auto& procs = is_mig(h) ? mig_of(h)->processes : g_script->processes[index_of(h)];
  if (buf == nullptr || *count < procs.size()) {
    bool empty = procs.empty();
    *count = static_cast<unsigned>(procs.size());
    return empty ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
  }
  auto* out = static_cast<unsigned char*>(buf);
  for (size_t i = 0; i < procs.size(); ++i) {
    unsigned char rec[32] = {};  // every byte of the record written, padding included
    std::memcpy(rec, &procs[i].pid, sizeof(unsigned));
    std::memcpy(rec + 8, &procs[i].memory, sizeof(unsigned long long));
    std::memcpy(out + i * g_script->process_stride, rec, g_script->process_stride);
  }
  *count = static_cast<unsigned>(procs.size());
  return NVML_SUCCESS;
}
nvmlReturn_t Samples(nvmlDevice_t h, unsigned type, unsigned long long since, unsigned* value_type, unsigned* count,
                     nvmlSample_t* buf) {
  if (nvmlReturn_t rc = answer("nvmlDeviceGetSamples", h)) return rc;
  if (mig_enabled(h) && type == NVML_GPU_UTILIZATION_SAMPLES) return NVML_ERROR_NOT_SUPPORTED;  // [H]
  if (type != NVML_GPU_UTILIZATION_SAMPLES) return NVML_ERROR_NOT_FOUND;
  std::vector<nvmlSample_t> newer;
  for (const auto& smp : g_script->utilization_samples[index_of(h)]) {
    if (smp.timeStamp > since) newer.push_back(smp);
  }
  if (newer.empty()) return NVML_ERROR_NOT_FOUND;
  *value_type = NVML_VALUE_TYPE_UNSIGNED_INT;
  if (buf == nullptr) {
    *count = static_cast<unsigned>(newer.size());
    return NVML_SUCCESS;
  }
  if (*count < newer.size()) return NVML_ERROR_INSUFFICIENT_SIZE;
  for (size_t i = 0; i < newer.size(); ++i) buf[i] = newer[i];
  *count = static_cast<unsigned>(newer.size());
  return NVML_SUCCESS;
}
// Both per-process calls hand back the script's records as they are (garbage included): the
// size query answers the capacity, an empty script NOT_FOUND.
nvmlReturn_t ProcessUtilization(nvmlDevice_t h, nvmlProcessUtilizationSample_t* buf, unsigned* count,
                                unsigned long long since) {
  if (nvmlReturn_t rc = answer("nvmlDeviceGetProcessUtilization", h)) return rc;
  if (mig_enabled(h)) return NVML_ERROR_NOT_SUPPORTED;  // [H] nvmlDeviceGetProcessUtilization
  const auto& recs = g_script->process_samples[index_of(h)];
  if (recs.empty()) return NVML_ERROR_NOT_FOUND;
  if (buf == nullptr || *count < g_script->capacity) {
    *count = g_script->capacity;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  g_script->last_seen_passed.push_back(since);
  for (size_t i = 0; i < recs.size(); ++i) buf[i] = recs[i];
  *count = static_cast<unsigned>(recs.size());
  return NVML_SUCCESS;
}
nvmlReturn_t ProcessesUtilizationInfo(nvmlDevice_t h, nvmlProcessesUtilizationInfo_t* info) {
  if (nvmlReturn_t rc = answer("nvmlDeviceGetProcessesUtilizationInfo", h)) return rc;
  if (info->version != nvmlProcessesUtilizationInfo_v1) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  const auto& recs = g_script->process_samples[index_of(h)];
  if (recs.empty()) return NVML_ERROR_NOT_FOUND;
  if (info->procUtilArray == nullptr || info->processSamplesCount < g_script->capacity) {
    info->processSamplesCount = g_script->capacity;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  g_script->last_seen_passed.push_back(info->lastSeenTimeStamp);
  for (size_t i = 0; i < recs.size(); ++i) {
    nvmlProcessUtilizationInfo_v1_t& o = info->procUtilArray[i];
    o = {};
    o.pid = recs[i].pid;
    o.timeStamp = recs[i].timeStamp;
    o.smUtil = recs[i].smUtil;
    o.memUtil = recs[i].memUtil;
  }
  info->processSamplesCount = static_cast<unsigned>(recs.size());
  return NVML_SUCCESS;
}
nvmlReturn_t PcieThroughput(nvmlDevice_t h, unsigned counter, unsigned* value) {
  if (nvmlReturn_t rc = answer("nvmlDeviceGetPcieThroughput", h)) return rc;
  if (counter > NVML_PCIE_UTIL_RX_BYTES || value == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *value = g_script->pcie_kb_per_second[index_of(h)][counter];
  return NVML_SUCCESS;
}
nvmlReturn_t FieldValues(nvmlDevice_t h, int count, nvmlFieldValue_t* values) {
  if (nvmlReturn_t rc = answer("nvmlDeviceGetFieldValues", h)) return rc;
  const Script& s = *g_script;
  const auto& links = s.links[index_of(h)];
  for (int i = 0; i < count; ++i) {
    nvmlFieldValue_t& f = values[i];
    f.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    if (auto it = s.field_rc.find({f.fieldId, f.scopeId}); it != s.field_rc.end()) {
      f.nvmlReturn = it->second;
      continue;
    }
    auto set = [&f](unsigned long long v) {
      f.nvmlReturn = NVML_SUCCESS;
      f.valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
      f.value.ullVal = v;
    };
    if (f.fieldId == NVML_FI_DEV_NVLINK_LINK_COUNT) {
      if (!links.empty()) {
        f.nvmlReturn = NVML_SUCCESS;
        f.valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
        f.value.uiVal = static_cast<unsigned>(links.size());
      }
      continue;
    }
    if (f.scopeId >= links.size()) continue;
    const FakeLink& l = links[f.scopeId];
    switch (f.fieldId) {
      case NVML_FI_DEV_NVLINK_GET_STATE:
        f.nvmlReturn = NVML_SUCCESS;
        f.valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
        f.value.uiVal = l.state;
        break;
      case NVML_FI_DEV_NVLINK_GET_SPEED:
        f.nvmlReturn = NVML_SUCCESS;
        f.valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
        f.value.uiVal = l.speed_mbps;
        break;
      case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX:
        set(l.tx_kib);
        break;
      case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX:
        set(l.rx_kib);
        break;
      case NVML_FI_DEV_NVLINK_ERROR_DL_REPLAY:
        set(l.replay);
        break;
      case NVML_FI_DEV_NVLINK_ERROR_DL_RECOVERY:
        set(l.recovery);
        break;
      case NVML_FI_DEV_NVLINK_ERROR_DL_CRC:
        set(l.crc);
        break;
      default:
        break;
    }
  }
  return NVML_SUCCESS;
}

// ---- GPM ----
nvmlReturn_t GpmQueryDeviceSupport(nvmlDevice_t h, nvmlGpmSupport_t* support) {
  if (nvmlReturn_t rc = answer("nvmlGpmQueryDeviceSupport", h)) return rc;
  if (support->version != NVML_GPM_SUPPORT_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  support->isSupportedDevice = g_script->gpm_supported[index_of(h)] ? 1 : 0;
  return NVML_SUCCESS;
}
nvmlReturn_t GpmSampleAlloc(nvmlGpmSample_t* smp) {
  if (nvmlReturn_t rc = answer("nvmlGpmSampleAlloc", nullptr)) return rc;
  ++g_script->gpm_allocated;
  *smp = reinterpret_cast<nvmlGpmSample_t>(new FakeGpmSample());
  return NVML_SUCCESS;
}
nvmlReturn_t GpmSampleFree(nvmlGpmSample_t smp) {
  ++g_script->gpm_freed;
  delete reinterpret_cast<FakeGpmSample*>(smp);
  return NVML_SUCCESS;
}
nvmlReturn_t take_sample(unsigned gpu, unsigned gi, nvmlGpmSample_t smp) {
  if (!g_script->gpm_supported[gpu]) return NVML_ERROR_NOT_SUPPORTED;
  auto* f = reinterpret_cast<FakeGpmSample*>(smp);
  f->gpu = gpu;
  f->gpu_instance = gi;
  f->number = g_gpm_taken[{gpu, gi}]++;
  return NVML_SUCCESS;
}
nvmlReturn_t GpmSampleGet(nvmlDevice_t h, nvmlGpmSample_t smp) {
  if (nvmlReturn_t rc = answer("nvmlGpmSampleGet", h)) return rc;
  if (is_mig(h)) {
    const FakeMig* m = mig_of(h);
    if (m == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    return take_sample(index_of(h), m->gpu_instance, smp);
  }
  return take_sample(index_of(h), kWholeGpu, smp);
}
nvmlReturn_t GpmMigSampleGet(nvmlDevice_t h, unsigned gi, nvmlGpmSample_t smp) {
  if (nvmlReturn_t rc = answer("nvmlGpmMigSampleGet", h)) return rc;
  bool exists = false;
  for (const auto& m : g_script->mig[index_of(h)]) exists = exists || (m && m->gpu_instance == gi);
  if (!exists) return NVML_ERROR_NOT_FOUND;
  return take_sample(index_of(h), gi, smp);
}
// Two samples of different targets, or one taken before the other, cannot give a rate: an
// assumption (the header says only that the user "calls nvmlGpmSampleGet() API twice").
nvmlReturn_t GpmMetricsGet(nvmlGpmMetricsGet_t* get) {
  if (nvmlReturn_t rc = answer("nvmlGpmMetricsGet", nullptr)) return rc;
  if (get->version != NVML_GPM_METRICS_GET_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  const auto* a = reinterpret_cast<const FakeGpmSample*>(get->sample1);
  const auto* b = reinterpret_cast<const FakeGpmSample*>(get->sample2);
  if (a == nullptr || b == nullptr || a->number < 0 || b->number <= a->number || a->gpu != b->gpu ||
      a->gpu_instance != b->gpu_instance) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  g_script->metrics_calls.push_back({a->gpu, a->gpu_instance, a->number, b->number, get->numMetrics});
  const auto& values = g_script->gpm_values[{a->gpu, a->gpu_instance}];
  for (unsigned i = 0; i < get->numMetrics && i < GPUMETER_NVML_GPM_METRIC_MAX; ++i) {
    nvmlGpmMetric_t& m = get->metrics[i];
    auto rc = g_script->gpm_metric_rc.find(m.metricId);
    auto v = values.find(m.metricId);
    if (rc != g_script->gpm_metric_rc.end()) {
      m.nvmlReturn = rc->second;
    } else if (v == values.end()) {
      m.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    } else {
      m.nvmlReturn = NVML_SUCCESS;
      m.value = v->second;
    }
  }
  return NVML_SUCCESS;
}

// ---- MIG ----
nvmlReturn_t MigMode(nvmlDevice_t h, unsigned* current, unsigned* pending) {
  if (nvmlReturn_t rc = answer("nvmlDeviceGetMigMode", h)) return rc;
  if (!g_script->mig_capable[index_of(h)]) return NVML_ERROR_NOT_SUPPORTED;
  *current = *pending = g_script->mig_mode[index_of(h)];
  return NVML_SUCCESS;
}
nvmlReturn_t MaxMigDeviceCount(nvmlDevice_t h, unsigned* count) {
  if (nvmlReturn_t rc = answer("nvmlDeviceGetMaxMigDeviceCount", h)) return rc;
  *count = mig_enabled(h) ? static_cast<unsigned>(g_script->mig[index_of(h)].size()) : 0;  // [H]: zero otherwise
  return NVML_SUCCESS;
}
nvmlReturn_t MigDeviceHandleByIndex(nvmlDevice_t h, unsigned i, nvmlDevice_t* out) {
  if (nvmlReturn_t rc = answer("nvmlDeviceGetMigDeviceHandleByIndex", h)) return rc;
  if (!mig_enabled(h)) return NVML_ERROR_NOT_SUPPORTED;
  const auto& slots = g_script->mig[index_of(h)];
  if (i >= slots.size() || i >= kMaxMigSlots) return NVML_ERROR_INVALID_ARGUMENT;
  if (!slots[i]) return NVML_ERROR_NOT_FOUND;
  *out = reinterpret_cast<nvmlDevice_t>(&g_mig_handles[index_of(h)][i]);
  return NVML_SUCCESS;
}
nvmlReturn_t GpuInstanceId(nvmlDevice_t h, unsigned* id) {
  if (nvmlReturn_t rc = answer("nvmlDeviceGetGpuInstanceId", h)) return rc;
  const FakeMig* m = mig_of(h);
  if (m == nullptr) return is_mig(h) ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_NOT_SUPPORTED;
  *id = m->gpu_instance;
  return NVML_SUCCESS;
}
nvmlReturn_t ComputeInstanceId(nvmlDevice_t h, unsigned* id) {
  if (nvmlReturn_t rc = answer("nvmlDeviceGetComputeInstanceId", h)) return rc;
  const FakeMig* m = mig_of(h);
  if (m == nullptr) return is_mig(h) ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_NOT_SUPPORTED;
  *id = m->compute_instance;
  return NVML_SUCCESS;
}
nvmlReturn_t Attributes(nvmlDevice_t h, nvmlDeviceAttributes_t* a) {
  if (nvmlReturn_t rc = answer("nvmlDeviceGetAttributes_v2", h)) return rc;
  const FakeMig* m = mig_of(h);
  if (m == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  *a = {};
  a->gpuInstanceSliceCount = m->gi_slices;
  a->computeInstanceSliceCount = m->ci_slices;
  a->memorySizeMB = m->memory_total / (1024 * 1024);
  return NVML_SUCCESS;
}
nvmlReturn_t GpuInstanceProfileInfoV(nvmlDevice_t h, unsigned profile, nvmlGpuInstanceProfileInfo_v2_t* info) {
  if (nvmlReturn_t rc = answer("nvmlDeviceGetGpuInstanceProfileInfoV", h)) return rc;
  if (info->version != nvmlGpuInstanceProfileInfo_v2) return NVML_ERROR_INVALID_ARGUMENT;  // [H]
  if (!mig_enabled(h)) return NVML_ERROR_NOT_SUPPORTED;
  for (const auto& p : g_script->profiles) {
    if (p.profile != profile) continue;
    info->id = p.id;
    info->sliceCount = p.slices;
    info->memorySizeMB = p.memory_mb;
    std::snprintf(info->name, sizeof info->name, "%s", p.name.c_str());
    return NVML_SUCCESS;
  }
  return NVML_ERROR_NOT_SUPPORTED;  // [H]: "profile isn't supported"
}
nvmlReturn_t GpuInstanceById(nvmlDevice_t h, unsigned id, nvmlGpuInstance_t* gi) {
  if (nvmlReturn_t rc = answer("nvmlDeviceGetGpuInstanceById", h)) return rc;
  if (!mig_enabled(h) || id >= 32) return NVML_ERROR_NOT_SUPPORTED;
  for (const auto& m : g_script->mig[index_of(h)]) {
    if (m && m->gpu_instance == id) {
      *gi = reinterpret_cast<nvmlGpuInstance_t>(&g_gpu_instances[index_of(h)][id]);
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}
nvmlReturn_t GpuInstanceGetInfo(nvmlGpuInstance_t gi, nvmlGpuInstanceInfo_t* info) {
  if (nvmlReturn_t rc = answer("nvmlGpuInstanceGetInfo", nullptr)) return rc;
  const auto off = static_cast<unsigned>(reinterpret_cast<int*>(gi) - &g_gpu_instances[0][0]);
  const unsigned gpu = off / 32, id = off % 32;
  for (const auto& m : g_script->mig[gpu]) {
    if (m && m->gpu_instance == id) {
      *info = {};
      info->device = handle(gpu);
      info->id = id;
      info->profileId = m->profile_id;
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t EventSetCreate(nvmlEventSet_t* set) {
  if (nvmlReturn_t rc = answer("nvmlEventSetCreate", nullptr)) return rc;
  int id = g_set_count++;
  ++g_script->sets_created;
  *set = reinterpret_cast<nvmlEventSet_t>(&g_sets[id]);
  return NVML_SUCCESS;
}
nvmlReturn_t SupportedEventTypes(nvmlDevice_t h, unsigned long long* mask) {
  if (g_script->lost.count(index_of(h)) != 0) return NVML_ERROR_GPU_IS_LOST;
  *mask = nvmlEventTypeXidCriticalError;
  return NVML_SUCCESS;
}
nvmlReturn_t RegisterEvents(nvmlDevice_t h, unsigned long long, nvmlEventSet_t set) {
  if (g_script->lost.count(index_of(h)) != 0) return NVML_ERROR_GPU_IS_LOST;
  if (nvmlReturn_t rc = answer("nvmlDeviceRegisterEvents", h)) return rc;
  g_script->registered[static_cast<int>(reinterpret_cast<int*>(set) - g_sets)].insert(index_of(h));
  return NVML_SUCCESS;
}
nvmlReturn_t EventSetWait(nvmlEventSet_t, nvmlEventData_t* data, unsigned) {
  Script& s = *g_script;
  if (s.all_rc) return *s.all_rc;
  if (s.wait_answers.empty()) return NVML_ERROR_TIMEOUT;
  auto [rc, d] = s.wait_answers.front();
  s.wait_answers.pop_front();
  *data = d;
  return rc;
}
nvmlReturn_t EventSetFree(nvmlEventSet_t) {
  ++g_script->sets_freed;
  return NVML_SUCCESS;
}

}  // namespace

Script& script() { return *g_script; }

void reset() {
  // Not destroyed: a thread of a previous test may still be on its way out of a call.
  g_old_scripts->push_back(g_script);
  g_script = new Script();
  g_set_count = 0;
  g_gpm_taken.clear();
}

nvmlDevice_t handle(unsigned gpu) { return reinterpret_cast<nvmlDevice_t>(&g_handles[gpu]); }
nvmlDevice_t mig_handle(unsigned gpu, unsigned slot) {
  return reinterpret_cast<nvmlDevice_t>(&g_mig_handles[gpu][slot]);
}

std::vector<FakeProfile> h100_profiles() {
  // Profile ids as nvidia-smi mig -lgip lists them; names of the H100 80GB (NVIDIA MIG user guide).
  return {
      {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, 1, 9856, "MIG 1g.10gb"},
      {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, 1, 9856, "MIG 1g.10gb+me"},
      {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, 1, 19968, "MIG 1g.20gb"},
      {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, 2, 19968, "MIG 2g.20gb"},
      {NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, 3, 40192, "MIG 3g.40gb"},
      {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, 4, 40192, "MIG 4g.40gb"},
      {NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, 7, 80512, "MIG 7g.80gb"},
  };
}
int current_set() { return g_set_count - 1; }
std::unique_ptr<NvmlBackend> backend_on(const gpumeter::Clock& clock, Logger& log) {
  NvmlBackendOptions o;
  o.clock = &clock;
  auto b = NvmlBackend::create(std::make_unique<FakeSymbols>(), o, log);
  EXPECT_TRUE(b->status().up) << b->status().detail;
  return b;
}
int calls_of(const std::string& name) {
  std::lock_guard lock(g_script->calls_mu);
  auto it = g_script->calls.find(name);
  return it == g_script->calls.end() ? 0 : it->second;
}

void* FakeSymbols::symbol(const char* name) const {
  if (hidden_.count(name) != 0) return nullptr;
  if (std::strcmp(name, "nvmlDeviceGetProcessesUtilizationInfo") == 0 && !g_script->has_processes_utilization_info) {
    return nullptr;
  }
  if (std::strcmp(name, "nvmlDeviceGetPcieThroughput") == 0) {
    return g_script->has_pcie_throughput ? reinterpret_cast<void*>(&PcieThroughput) : nullptr;
  }
  static const std::map<std::string, void*> table = {
      {"nvmlInit_v2", reinterpret_cast<void*>(&Init)},
      {"nvmlShutdown", reinterpret_cast<void*>(&Shutdown)},
      {"nvmlErrorString", reinterpret_cast<void*>(&ErrorString)},
      {"nvmlSystemGetDriverVersion", reinterpret_cast<void*>(&DriverVersion)},
      {"nvmlDeviceGetCount_v2", reinterpret_cast<void*>(&Count)},
      {"nvmlDeviceGetHandleByIndex_v2", reinterpret_cast<void*>(&HandleByIndex)},
      {"nvmlDeviceGetUUID", reinterpret_cast<void*>(&Uuid)},
      {"nvmlDeviceGetUtilizationRates", reinterpret_cast<void*>(&Utilization)},
      {"nvmlDeviceGetMemoryInfo_v2", reinterpret_cast<void*>(&MemoryV2)},
      {"nvmlDeviceGetTemperature", reinterpret_cast<void*>(&Temperature)},
      {"nvmlDeviceGetPowerUsage", reinterpret_cast<void*>(&PowerUsage)},
      {"nvmlDeviceGetEnforcedPowerLimit", reinterpret_cast<void*>(&PowerLimit)},
      {"nvmlDeviceGetTotalEnergyConsumption", reinterpret_cast<void*>(&Energy)},
      {"nvmlDeviceGetClockInfo", reinterpret_cast<void*>(&Clock)},
      {"nvmlDeviceGetFanSpeed", reinterpret_cast<void*>(&FanSpeed)},
      {"nvmlDeviceGetEncoderUtilization", reinterpret_cast<void*>(&EncoderUtilization)},
      {"nvmlDeviceGetDecoderUtilization", reinterpret_cast<void*>(&DecoderUtilization)},
      {"nvmlDeviceGetComputeRunningProcesses_v3", reinterpret_cast<void*>(&ComputeProcesses)},
      {"nvmlDeviceGetSamples", reinterpret_cast<void*>(&Samples)},
      {"nvmlDeviceGetProcessUtilization", reinterpret_cast<void*>(&ProcessUtilization)},
      {"nvmlDeviceGetProcessesUtilizationInfo", reinterpret_cast<void*>(&ProcessesUtilizationInfo)},
      {"nvmlDeviceGetFieldValues", reinterpret_cast<void*>(&FieldValues)},
      {"nvmlGpmQueryDeviceSupport", reinterpret_cast<void*>(&GpmQueryDeviceSupport)},
      {"nvmlGpmSampleAlloc", reinterpret_cast<void*>(&GpmSampleAlloc)},
      {"nvmlGpmSampleFree", reinterpret_cast<void*>(&GpmSampleFree)},
      {"nvmlGpmSampleGet", reinterpret_cast<void*>(&GpmSampleGet)},
      {"nvmlGpmMigSampleGet", reinterpret_cast<void*>(&GpmMigSampleGet)},
      {"nvmlGpmMetricsGet", reinterpret_cast<void*>(&GpmMetricsGet)},
      {"nvmlDeviceGetMigMode", reinterpret_cast<void*>(&MigMode)},
      {"nvmlDeviceGetMaxMigDeviceCount", reinterpret_cast<void*>(&MaxMigDeviceCount)},
      {"nvmlDeviceGetMigDeviceHandleByIndex", reinterpret_cast<void*>(&MigDeviceHandleByIndex)},
      {"nvmlDeviceGetGpuInstanceId", reinterpret_cast<void*>(&GpuInstanceId)},
      {"nvmlDeviceGetComputeInstanceId", reinterpret_cast<void*>(&ComputeInstanceId)},
      {"nvmlDeviceGetAttributes_v2", reinterpret_cast<void*>(&Attributes)},
      {"nvmlDeviceGetGpuInstanceProfileInfoV", reinterpret_cast<void*>(&GpuInstanceProfileInfoV)},
      {"nvmlDeviceGetGpuInstanceById", reinterpret_cast<void*>(&GpuInstanceById)},
      {"nvmlGpuInstanceGetInfo", reinterpret_cast<void*>(&GpuInstanceGetInfo)},
      {"nvmlEventSetCreate", reinterpret_cast<void*>(&EventSetCreate)},
      {"nvmlDeviceGetSupportedEventTypes", reinterpret_cast<void*>(&SupportedEventTypes)},
      {"nvmlDeviceRegisterEvents", reinterpret_cast<void*>(&RegisterEvents)},
      {"nvmlEventSetWait_v2", reinterpret_cast<void*>(&EventSetWait)},
      {"nvmlEventSetFree", reinterpret_cast<void*>(&EventSetFree)},
  };
  auto it = table.find(name);
  return it == table.end() ? nullptr : it->second;
}

}  // namespace gpumeter::fake
