#include "fake_nvml.h"

#include <cstdio>
#include <cstring>
#include <vector>

namespace gpumeter::fake {

namespace {

Script* g_script = new Script();  // never freed: functions may run on threads a test left
// Every script made, kept reachable (so not a leak) for the same reason.
std::vector<Script*>* g_old_scripts = new std::vector<Script*>();
int g_handles[kMaxGpus];
int g_sets[64];
int g_set_count = 0;

unsigned index_of(nvmlDevice_t h) { return static_cast<unsigned>(reinterpret_cast<int*>(h) - g_handles); }

// The scripted answer of a device call; counts the call and blocks where the script says so.
nvmlReturn_t answer(const char* name, nvmlDevice_t h) {
  Script& s = *g_script;
  s.calls[name]++;
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
  if (s.init_rc) return *s.init_rc;
  return NVML_SUCCESS;
}
nvmlReturn_t Shutdown() {
  ++g_script->shutdowns;
  return NVML_SUCCESS;
}
const char* ErrorString(nvmlReturn_t rc) {
  switch (rc) {
    case NVML_ERROR_UNKNOWN: return "Unknown Error";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch.";
    default: return "fake error";
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
  std::snprintf(buf, size, "GPU-fake-%u", index_of(h));
  return NVML_SUCCESS;
}
nvmlReturn_t Utilization(nvmlDevice_t h, nvmlUtilization_t* u) {
  if (nvmlReturn_t rc = answer("nvmlDeviceGetUtilizationRates", h)) return rc;
  u->gpu = 40;
  u->memory = 10;
  return NVML_SUCCESS;
}
nvmlReturn_t MemoryV2(nvmlDevice_t h, nvmlMemory_v2_t* m) {
  if (nvmlReturn_t rc = answer("nvmlDeviceGetMemoryInfo_v2", h)) return rc;
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
nvmlReturn_t ComputeProcesses(nvmlDevice_t h, unsigned* count, void* buf) {
  if (nvmlReturn_t rc = answer("nvmlDeviceGetComputeRunningProcesses_v3", h)) return rc;
  const auto& procs = g_script->processes[index_of(h)];
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
}

nvmlDevice_t handle(unsigned gpu) { return reinterpret_cast<nvmlDevice_t>(&g_handles[gpu]); }
int current_set() { return g_set_count - 1; }

void* FakeSymbols::symbol(const char* name) const {
  if (hidden_.count(name) != 0) return nullptr;
  if (std::strcmp(name, "nvmlDeviceGetProcessesUtilizationInfo") == 0 &&
      !g_script->has_processes_utilization_info) {
    return nullptr;
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
      {"nvmlDeviceGetComputeRunningProcesses_v3", reinterpret_cast<void*>(&ComputeProcesses)},
      {"nvmlDeviceGetSamples", reinterpret_cast<void*>(&Samples)},
      {"nvmlDeviceGetProcessUtilization", reinterpret_cast<void*>(&ProcessUtilization)},
      {"nvmlDeviceGetProcessesUtilizationInfo", reinterpret_cast<void*>(&ProcessesUtilizationInfo)},
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
