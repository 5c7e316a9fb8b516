// MIG: the mode of a GPU and, while it is enabled, its MIG devices (one per compute instance),
// enumerated at every collection (the usage ones too: the ledger bills each MIG device), so a
// new layout needs no restart.

#include <algorithm>
#include <cstring>
#include <set>

#include "backend/nvml/nvml_internal.h"

namespace gpumeter {

namespace {

std::string c_str(const char* buf, size_t size) { return std::string(buf, strnlen(buf, size)); }

// "MIG 3g.40gb" -> "3g.40gb".
std::string profile_name(const char* buf, size_t size) {
  std::string n = c_str(buf, size);
  constexpr std::string_view kPrefix = "MIG ";
  if (n.compare(0, kPrefix.size(), kPrefix) == 0) n.erase(0, kPrefix.size());
  return n;
}

// "NVIDIA H100 80GB HBM3 MIG 3g.40gb" -> "3g.40gb"; "" for a name without " MIG ".
std::string profile_from_device_name(const char* name) {
  const std::string n(name);
  const auto at = n.rfind(" MIG ");
  return at == std::string::npos ? std::string() : n.substr(at + 5);
}

// The MIG device's uuid and ids; false when it lacks one, and so cannot be told from another.
bool read_mig_identity(const NvmlSymbols& s, nvmlDevice_t mh, NvmlCollection& c, MigInstanceReading& m) {
  if (c.wanted(s.uuid, kMigDeviceIdentity)) {
    char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (c.ok(kMigDeviceIdentity, s.uuid(mh, buf, sizeof buf), "nvmlDeviceGetUUID")) m.uuid = c_str(buf, sizeof buf);
  }
  bool have_ids = false;
  if (c.wanted(s.gpu_instance_id, kMigDeviceIdentity) && s.compute_instance_id != nullptr) {
    unsigned gi = 0, ci = 0;
    if (c.ok(kMigDeviceIdentity, s.gpu_instance_id(mh, &gi), "nvmlDeviceGetGpuInstanceId") &&
        c.ok(kMigDeviceIdentity, s.compute_instance_id(mh, &ci), "nvmlDeviceGetComputeInstanceId")) {
      m.gpu_instance = gi;
      m.compute_instance = ci;
      have_ids = true;
    }
  }
  return !m.uuid.empty() && have_ids;
}

// The MIG device's slices from its attributes, and its profile: the GPU instance's profile id,
// asked once per GPU instance and round (`asked` holds the round's answers), named by the GPU's
// profiles. Returns the profile id.
std::optional<unsigned> read_mig_profile(const NvmlSymbols& s, nvmlDevice_t h, nvmlDevice_t mh,
                                         const std::optional<std::vector<MigProfile>>& profiles,
                                         std::map<unsigned, std::optional<unsigned>>& asked, NvmlCollection& c,
                                         MigInstanceReading& m) {
  unsigned ci_slices = 0;
  if (c.wanted(s.attributes, kMigAttributes)) {
    nvmlDeviceAttributes_t a{};
    if (c.ok(kMigAttributes, s.attributes(mh, &a), "nvmlDeviceGetAttributes_v2")) {
      m.slices = a.gpuInstanceSliceCount;
      ci_slices = a.computeInstanceSliceCount;
      m.memory_total_bytes = static_cast<double>(a.memorySizeMB) * 1024 * 1024;
    }
  }
  auto known = asked.find(m.gpu_instance);
  if (known == asked.end()) {
    std::optional<unsigned> id;
    if (c.wanted(s.gpu_instance_by_id, kMigGpuInstance) && s.gpu_instance_info != nullptr) {
      nvmlGpuInstance_t gih = nullptr;
      nvmlGpuInstanceInfo_t info{};
      if (c.ok(kMigGpuInstance, s.gpu_instance_by_id(h, m.gpu_instance, &gih), "nvmlDeviceGetGpuInstanceById") &&
          c.ok(kMigGpuInstance, s.gpu_instance_info(gih, &info), "nvmlGpuInstanceGetInfo")) {
        id = info.profileId;
      }
    }
    known = asked.emplace(m.gpu_instance, id).first;
  }
  const std::optional<unsigned> profile_id = known->second;
  if (profile_id && profiles) {
    for (const auto& p : *profiles) {
      if (p.id != *profile_id) continue;
      m.profile = p.name;
      if (m.slices == 0) m.slices = p.slices;
    }
  }
  // Without the GPU instance's profile (its query needs CAP_SYS_ADMIN), the MIG device's name
  // ends with it: "NVIDIA H100 80GB HBM3 MIG 3g.40gb".
  if (m.profile.empty() && c.wanted(s.name, kMigName)) {
    char buf[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
    if (c.ok(kMigName, s.name(mh, buf, sizeof buf), "nvmlDeviceGetName")) m.profile = profile_from_device_name(buf);
  }
  // A compute instance smaller than its GPU instance: "1c.3g.40gb", as nvidia-smi names it (and
  // as a MIG device's name already does).
  if (ci_slices > 0 && ci_slices < m.slices) {
    m.compute_slices = ci_slices;
    if (!m.profile.empty() && m.profile.find("c.") == std::string::npos) {
      m.profile = std::to_string(ci_slices) + "c." + m.profile;
    }
  }
  return profile_id;
}

// Memory of the MIG device (the GPU instance's memory), then its processes.
void read_mig_memory_and_processes(const NvmlSymbols& s, nvmlDevice_t mh, NvmlCollection& c, MigInstanceReading& m) {
  if (c.wanted(s.memory_v2, kMigMemory)) {
    nvmlMemory_v2_t mem{};
    mem.version = nvmlMemory_v2;
    if (c.ok(kMigMemory, s.memory_v2(mh, &mem), "nvmlDeviceGetMemoryInfo_v2")) {
      m.memory_total_bytes = static_cast<double>(mem.total);
      m.memory_used_bytes = static_cast<double>(mem.used);
    }
  } else if (c.wanted(s.memory_v1, kMigMemory)) {
    nvmlMemory_t mem{};
    if (c.ok(kMigMemory, s.memory_v1(mh, &mem), "nvmlDeviceGetMemoryInfo")) {
      m.memory_total_bytes = static_cast<double>(mem.total);
      m.memory_used_bytes = static_cast<double>(mem.used);
    }
  }
  if (c.unsupported(kMigProcesses) || c.fatal()) return;
  std::vector<GpuProcess> procs;
  bool any = false;
  struct List {
    const nvmlDeviceGetProcessesRaw_fn (&fns)[3];
    unsigned bit;
    const char* name;
  };
  for (const List& l : {List{s.compute_processes, kProcessCompute, "nvmlDeviceGetComputeRunningProcesses_v3"},
                        List{s.graphics_processes, kProcessGraphics, "nvmlDeviceGetGraphicsRunningProcesses_v3"}}) {
    if (l.fns[0] == nullptr && l.fns[1] == nullptr && l.fns[2] == nullptr) continue;
    if (c.fatal()) break;
    if (c.ok(kMigProcesses, read_process_list(l.fns, mh, l.bit, procs), l.name)) any = true;
  }
  if (any) m.processes = std::move(procs);
}

}  // namespace

void NvmlBackend::collect_mig(Device& d, nvmlDevice_t h, bool profiling, NvmlCollection& c, DeviceReading& r) {
  if (!read_mig_mode(d, h, c, r)) return;
  read_mig_profiles(d, h, c, r);
  read_mig_devices(d, h, profiling, c, r);
}

bool NvmlBackend::read_mig_mode(Device& d, nvmlDevice_t h, NvmlCollection& c, DeviceReading& r) {
  const NvmlSymbols& s = symbols_;
  if (!c.wanted(s.mig_mode, kMigMode)) return false;
  unsigned current = 0, pending = 0;
  if (!c.ok(kMigMode, s.mig_mode(h, &current, &pending), "nvmlDeviceGetMigMode")) return false;
  const bool enabled = current == NVML_DEVICE_MIG_ENABLE;
  r.mig.enabled = enabled;
  if (d.mig_enabled && *d.mig_enabled != enabled) {
    // The mode changes what the parent answers ([H] nvmlDeviceGetUtilizationRates: not supported
    // on MIG-enabled GPUs): every remembered NOT_SUPPORTED is asked again.
    d.unsupported.reset();
    d.slow.valid.reset();
    d.mig_profiles.reset();
    d.not_permitted_logged = false;
    {
      std::lock_guard lock(status_mu_);
      std::erase_if(status_.counters.not_permitted, [&](const auto& e) { return e.first == d.index; });
    }
    free_gpm_pair(d.gpm);
    for (auto& [gi, m] : d.mig_gpm) free_gpm_pair(m.pair);
    d.mig_gpm.clear();
  }
  d.mig_enabled = enabled;
  return enabled;
}

void NvmlBackend::read_mig_profiles(Device& d, nvmlDevice_t h, NvmlCollection& c, DeviceReading& r) {
  const NvmlSymbols& s = symbols_;
  // The GPU instance profiles, once: their ids name the profile of each GPU instance, and the
  // largest is the whole GPU.
  if (!d.mig_profiles && c.wanted(s.gpu_instance_profile_info, kMigProfiles)) {
    std::vector<MigProfile> profiles;
    bool complete = true;
    for (unsigned p = 0; p < NVML_GPU_INSTANCE_PROFILE_COUNT && !c.fatal(); ++p) {
      nvmlGpuInstanceProfileInfo_v2_t info{};
      info.version = nvmlGpuInstanceProfileInfo_v2;
      const nvmlReturn_t rc = s.gpu_instance_profile_info(h, p, &info);
      // [H]: NOT_SUPPORTED when the profile is not supported, INVALID_ARGUMENT for a profile
      // this driver does not know.
      if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_INVALID_ARGUMENT) continue;
      if (rc != NVML_SUCCESS) {
        c.ok(kMigProfiles, rc, "nvmlDeviceGetGpuInstanceProfileInfoV");
        complete = false;
        break;
      }
      c.answered();
      profiles.push_back({info.id, info.sliceCount, profile_name(info.name, sizeof info.name)});
    }
    if (complete) d.mig_profiles = std::move(profiles);
  }
  if (d.mig_profiles) {
    unsigned whole = 0;
    for (const auto& p : *d.mig_profiles) whole = std::max(whole, p.slices);
    if (whole > 0) r.mig.slices = whole;
  }
}

void NvmlBackend::read_mig_devices(Device& d, nvmlDevice_t h, bool profiling, NvmlCollection& c, DeviceReading& r) {
  const NvmlSymbols& s = symbols_;
  if (!c.wanted(s.max_mig_device_count, kMigDevices) || s.mig_device_handle_by_index == nullptr) return;
  unsigned max_count = 0;
  if (!c.ok(kMigDevices, s.max_mig_device_count(h, &max_count), "nvmlDeviceGetMaxMigDeviceCount")) return;
  const bool gpm = profiling && s.has_gpm() && d.gpm_supported == true;
  std::map<unsigned, std::optional<ProfilingReading>> gi_profiling;  // this round's, by GPU instance
  std::set<unsigned> gpu_instances_seen;
  std::map<unsigned, std::optional<unsigned>> gi_profile_ids;
  for (unsigned i = 0; i < max_count && !c.fatal(); ++i) {
    nvmlDevice_t mh = nullptr;
    const nvmlReturn_t rc = s.mig_device_handle_by_index(h, i, &mh);
    if (rc == NVML_ERROR_NOT_FOUND) {  // [H]: no MIG device at this index
      c.answered();
      continue;
    }
    if (!c.ok(kMigDevices, rc, "nvmlDeviceGetMigDeviceHandleByIndex")) continue;

    MigInstanceReading m;
    // Without its uuid and ids an instance cannot be told from another: left out.
    if (!read_mig_identity(s, mh, c, m)) continue;
    const std::optional<unsigned> profile_id = read_mig_profile(s, h, mh, d.mig_profiles, gi_profile_ids, c, m);
    read_mig_memory_and_processes(s, mh, c, m);
    // GPM of the GPU instance: one sample pair per GPU instance, shared by its compute instances.
    if (gpm) {
      auto done = gi_profiling.find(m.gpu_instance);
      if (done == gi_profiling.end()) {
        done = gi_profiling.emplace(m.gpu_instance, step_mig_gpm(d, h, mh, m, profile_id.value_or(~0U), c)).first;
      }
      m.profiling = done->second;
    }
    gpu_instances_seen.insert(m.gpu_instance);
    r.mig.instances.push_back(std::move(m));
  }
  // GPU instances gone from the layout give their samples back.
  if (!c.fatal()) {
    for (auto it = d.mig_gpm.begin(); it != d.mig_gpm.end();) {
      if (gpu_instances_seen.count(it->first) != 0) {
        ++it;
        continue;
      }
      free_gpm_pair(it->second.pair);
      it = d.mig_gpm.erase(it);
    }
  }
}

std::optional<ProfilingReading> NvmlBackend::step_mig_gpm(Device& d, nvmlDevice_t h, nvmlDevice_t mh,
                                                          const MigInstanceReading& m, unsigned profile_id,
                                                          NvmlCollection& c) {
  const NvmlSymbols& s = symbols_;
  MigGpm& g = d.mig_gpm[m.gpu_instance];
  if (g.profile_id != profile_id || g.uuid != m.uuid) {
    g.pair.previous = -1;  // another instance under the same id: start a new pair
    g.profile_id = profile_id;
    g.uuid = m.uuid;
  }
  const unsigned gi = m.gpu_instance;
  std::function<nvmlReturn_t(nvmlGpmSample_t)> take;
  Call call = kGpmMigSample;
  const char* name = "nvmlGpmMigSampleGet";
  if (s.gpm_mig_sample_get != nullptr) {
    take = [&, gi](nvmlGpmSample_t smp) { return s.gpm_mig_sample_get(h, gi, smp); };
  } else {
    take = [&, mh](nvmlGpmSample_t smp) { return s.gpm_sample_get(mh, smp); };
    name = "nvmlGpmSampleGet";
  }
  return gpm_step(g.pair, take, call, name, c);
}

}  // namespace gpumeter
