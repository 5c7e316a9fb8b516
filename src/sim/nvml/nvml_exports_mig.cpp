// NVML entry points of MIG (Multi-Instance GPU): enumeration of MIG devices under a parent,
// their ids and attributes, GPU instance profiles and GPU instances; and the MIG device handle
// side of the calls that take either handle (nvml_exports_mig.h). MIG device handles are
// entries of the Runtime's table, one per instance of the scenario. docs/nvml-behaviour.md
// ("MIG") gives the source of every choice.

#include "sim/nvml/nvml_exports_mig.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

using gpumeter::sim::device_call;
using gpumeter::sim::DeviceState;
using gpumeter::sim::JobShare;
using gpumeter::sim::kNoMigInstance;
using gpumeter::sim::list_records;
using gpumeter::sim::Micros;
using gpumeter::sim::mig_call;
using gpumeter::sim::mig_profiles;
using gpumeter::sim::MigInstance;
using gpumeter::sim::MigProfile;
using gpumeter::sim::Runtime;
using gpumeter::sim::Session;
using Fn = gpumeter::sim::NvmlFunction;

namespace gpumeter::sim::mig {

namespace {

std::vector<JobShare> jobs_of(DeviceState& d, std::size_t instance, Micros now) {
  std::vector<JobShare> out;
  for (const JobShare& j : d.gpu.processes(now)) {
    if (j.mig == instance) out.push_back(j);
  }
  return out;
}

std::uint64_t used_bytes(DeviceState& d, std::size_t instance, Micros now) {
  std::uint64_t used = 0;
  for (const JobShare& j : jobs_of(d, instance, now)) used += j.memory_bytes;
  return used;
}

}  // namespace

void instance_ids(const Scenario& scenario, const JobShare& job, unsigned& gpu_instance, unsigned& compute_instance) {
  if (job.mig == kNoMigInstance) {
    gpu_instance = compute_instance = 0xFFFFFFFFU;
    return;
  }
  const MigInstance& m = scenario.mig.instances[job.mig];
  gpu_instance = m.gpu_instance_id;
  compute_instance = m.compute_instance_id;
}

nvmlReturn_t uuid(nvmlDevice_t device, char* out, unsigned length) {
  return mig_call(Fn::nvmlDeviceGetUUID, device,
                  [&](Session&, DeviceState&, const MigInstance& m, std::size_t, Micros) {
                    return copy_string(m.uuid, out, length);
                  });
}

// The parent's name and the profile, as drivers name MIG devices (e.g. "NVIDIA A100-SXM4-40GB
// MIG 1g.5gb"; an assumption for the simulated models).
nvmlReturn_t name(nvmlDevice_t device, char* out, unsigned length) {
  return mig_call(Fn::nvmlDeviceGetName, device,
                  [&](Session&, DeviceState& d, const MigInstance& m, std::size_t, Micros) {
                    return copy_string(fmt::format("{} MIG {}", d.gpu.model().name, m.profile_name), out, length);
                  });
}

// nvml.h: on MIG device handles, "indices that can be passed to nvmlDeviceGetMigDeviceHandleByIndex".
nvmlReturn_t index(nvmlDevice_t device, unsigned* out) {
  return mig_call(Fn::nvmlDeviceGetIndex, device,
                  [&](Session&, DeviceState&, const MigInstance& m, std::size_t, Micros) {
                    if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
                    *out = m.mig_index;
                    return NVML_SUCCESS;
                  });
}

// Per instance: its memory, and what its processes hold; no reserve of its own (an assumption).
nvmlReturn_t memory_info(nvmlDevice_t device, nvmlMemory_t* memory) {
  return mig_call(Fn::nvmlDeviceGetMemoryInfo, device,
                  [&](Session&, DeviceState& d, const MigInstance& m, std::size_t i, Micros now) {
                    if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
                    memory->total = m.memory_bytes;
                    memory->used = used_bytes(d, i, now);
                    memory->free = memory->total - memory->used;
                    return NVML_SUCCESS;
                  });
}

nvmlReturn_t memory_info_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  return mig_call(Fn::nvmlDeviceGetMemoryInfo_v2, device,
                  [&](Session&, DeviceState& d, const MigInstance& m, std::size_t i, Micros now) {
                    if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
                    if (memory->version != nvmlMemory_v2) return NVML_ERROR_FUNCTION_NOT_FOUND;
                    memory->total = m.memory_bytes;
                    memory->reserved = 0;
                    memory->used = used_bytes(d, i, now);
                    memory->free = memory->total - memory->used;
                    return NVML_SUCCESS;
                  });
}

nvmlReturn_t compute_processes(Fn fn, nvmlDevice_t device, unsigned* count, nvmlProcessInfo_t* infos) {
  return mig_call(fn, device, [&](Session&, DeviceState& d, const MigInstance& m, std::size_t i, Micros now) {
    return list_records(jobs_of(d, i, now), count, infos, [&](nvmlProcessInfo_t& info, const JobShare& j) {
      info = nvmlProcessInfo_t{};
      info.pid = j.pid;
      info.usedGpuMemory = j.memory_bytes;
      info.gpuInstanceId = m.gpu_instance_id;
      info.computeInstanceId = m.compute_instance_id;
    });
  });
}

nvmlReturn_t compute_processes_v1(nvmlDevice_t device, unsigned* count, nvmlProcessInfo_v1_t* infos) {
  return mig_call(Fn::nvmlDeviceGetComputeRunningProcesses, device,
                  [&](Session&, DeviceState& d, const MigInstance&, std::size_t i, Micros now) {
                    return list_records(jobs_of(d, i, now), count, infos,
                                        [](nvmlProcessInfo_v1_t& info, const JobShare& j) {
                                          info = nvmlProcessInfo_v1_t{};
                                          info.pid = j.pid;
                                          info.usedGpuMemory = j.memory_bytes;
                                        });
                  });
}

nvmlReturn_t no_processes(Fn fn, nvmlDevice_t device, unsigned* count) {
  return mig_call(fn, device, [&](Session&, DeviceState&, const MigInstance&, std::size_t, Micros) {
    if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *count = 0;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t compute_mode(nvmlDevice_t device, unsigned* mode) {
  return mig_call(Fn::nvmlDeviceGetComputeMode, device,
                  [&](Session&, DeviceState&, const MigInstance&, std::size_t, Micros) {
                    if (mode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
                    *mode = NVML_COMPUTEMODE_DEFAULT;
                    return NVML_SUCCESS;
                  });
}

std::optional<std::size_t> instance_by_uuid(const Session& session, const char* uuid) {
  const auto& instances = session.scenario().mig.instances;
  const Micros now = session.now();
  for (std::size_t i = 0; i < instances.size(); ++i) {
    const MigInstance& m = instances[i];
    if (m.uuid == uuid && m.start <= now && now < m.end) return i;
  }
  return std::nullopt;
}

}  // namespace gpumeter::sim::mig

namespace {

constexpr unsigned long long kMiB = 1024ULL * 1024ULL;

bool mig_enabled(const Session& s, const DeviceState& d) { return s.scenario().mig.enabled(d.gpu.index()); }

}  // namespace

// "Returns zero if MIG is not supported or enabled"; else the MIG devices the GPU can hold, one
// per compute slice (7 on A100 and H100, 4 on A30).
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int* count) {
  return device_call(Fn::nvmlDeviceGetMaxMigDeviceCount, device, [&](Session& s, DeviceState& d, Micros) {
    if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *count = mig_enabled(s, d) ? gpumeter::sim::mig_compute_slices(d.gpu.model()) : 0;
    return NVML_SUCCESS;
  });
}

// An index names a slot that a MIG device keeps for its life; a slot no live instance holds
// answers NOT_FOUND (so indices can have holes after a re-partition).
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                                      nvmlDevice_t* mig_device) {
  return device_call(Fn::nvmlDeviceGetMigDeviceHandleByIndex, device, [&](Session& s, DeviceState& d, Micros now) {
    if (mig_device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!mig_enabled(s, d)) return NVML_ERROR_NOT_SUPPORTED;
    if (index >= gpumeter::sim::mig_compute_slices(d.gpu.model())) return NVML_ERROR_INVALID_ARGUMENT;
    const auto& plan = s.scenario().mig;
    for (std::size_t i : plan.live(d.gpu.index(), now)) {
      if (plan.instances[i].mig_index == index) {
        *mig_device = Runtime::instance().mig_handle(i);
        return NVML_SUCCESS;
      }
    }
    return NVML_ERROR_NOT_FOUND;
  });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int* is_mig) {
  if (gpumeter::sim::is_mig_handle(device)) {
    return mig_call(Fn::nvmlDeviceIsMigDeviceHandle, device,
                    [&](Session&, DeviceState&, const MigInstance&, std::size_t, Micros) {
                      if (is_mig == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
                      *is_mig = 1;
                      return NVML_SUCCESS;
                    });
  }
  return device_call(Fn::nvmlDeviceIsMigDeviceHandle, device, [&](Session&, DeviceState&, Micros) {
    if (is_mig == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *is_mig = 0;
    return NVML_SUCCESS;
  });
}

// A GPU handle is not a MIG device handle: INVALID_ARGUMENT ("if migDevice ... is invalid").
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig_device,
                                                                               nvmlDevice_t* device) {
  if (!gpumeter::sim::is_mig_handle(mig_device)) {
    return device_call(Fn::nvmlDeviceGetDeviceHandleFromMigDeviceHandle, mig_device,
                       [](Session&, DeviceState&, Micros) { return NVML_ERROR_INVALID_ARGUMENT; });
  }
  return mig_call(Fn::nvmlDeviceGetDeviceHandleFromMigDeviceHandle, mig_device,
                  [&](Session&, DeviceState&, const MigInstance& m, std::size_t, Micros) {
                    if (device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
                    *device = Runtime::instance().handle(m.gpu);
                    return NVML_SUCCESS;
                  });
}

// On a GPU handle these have nothing to answer: NOT_SUPPORTED (an assumption).
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id) {
  if (!gpumeter::sim::is_mig_handle(device)) {
    return device_call(Fn::nvmlDeviceGetGpuInstanceId, device,
                       [](Session&, DeviceState&, Micros) { return NVML_ERROR_NOT_SUPPORTED; });
  }
  return mig_call(Fn::nvmlDeviceGetGpuInstanceId, device,
                  [&](Session&, DeviceState&, const MigInstance& m, std::size_t, Micros) {
                    if (id == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
                    *id = m.gpu_instance_id;
                    return NVML_SUCCESS;
                  });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int* id) {
  if (!gpumeter::sim::is_mig_handle(device)) {
    return device_call(Fn::nvmlDeviceGetComputeInstanceId, device,
                       [](Session&, DeviceState&, Micros) { return NVML_ERROR_NOT_SUPPORTED; });
  }
  return mig_call(Fn::nvmlDeviceGetComputeInstanceId, device,
                  [&](Session&, DeviceState&, const MigInstance& m, std::size_t, Micros) {
                    if (id == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
                    *id = m.compute_instance_id;
                    return NVML_SUCCESS;
                  });
}

// "This API currently only supports MIG device handles": NOT_SUPPORTED on a GPU handle.
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, nvmlDeviceAttributes_t* attributes) {
  if (!gpumeter::sim::is_mig_handle(device)) {
    return device_call(Fn::nvmlDeviceGetAttributes_v2, device,
                       [](Session&, DeviceState&, Micros) { return NVML_ERROR_NOT_SUPPORTED; });
  }
  return mig_call(Fn::nvmlDeviceGetAttributes_v2, device,
                  [&](Session&, DeviceState& d, const MigInstance& m, std::size_t, Micros) {
                    if (attributes == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
                    const MigProfile& p = mig_profiles(d.gpu.model()).at(m.profile);
                    *attributes = nvmlDeviceAttributes_t{};
                    attributes->multiprocessorCount = p.multiprocessors;
                    attributes->sharedCopyEngineCount = p.copy_engines;
                    attributes->sharedDecoderCount = p.decoders;
                    attributes->sharedEncoderCount = p.encoders;
                    attributes->sharedJpegCount = p.jpegs;
                    attributes->sharedOfaCount = p.ofas;
                    attributes->gpuInstanceSliceCount = m.slices;
                    attributes->computeInstanceSliceCount = m.slices;
                    attributes->memorySizeMB = m.memory_bytes / kMiB;
                    return NVML_SUCCESS;
                  });
}

// NOT_SUPPORTED "if device doesn't have MIG mode enabled or profile isn't supported".
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device, unsigned int profile,
                                                                       nvmlGpuInstanceProfileInfo_v2_t* info) {
  return device_call(Fn::nvmlDeviceGetGpuInstanceProfileInfoV, device, [&](Session& s, DeviceState& d, Micros) {
    if (info == nullptr || info->version != nvmlGpuInstanceProfileInfo_v2) return NVML_ERROR_INVALID_ARGUMENT;
    if (profile >= NVML_GPU_INSTANCE_PROFILE_COUNT) return NVML_ERROR_INVALID_ARGUMENT;
    if (!mig_enabled(s, d)) return NVML_ERROR_NOT_SUPPORTED;
    const auto& profiles = mig_profiles(d.gpu.model());
    auto p =
        std::find_if(profiles.begin(), profiles.end(), [&](const MigProfile& x) { return x.nvml_profile == profile; });
    if (p == profiles.end()) return NVML_ERROR_NOT_SUPPORTED;
    const unsigned version = info->version;
    *info = nvmlGpuInstanceProfileInfo_v2_t{};
    info->version = version;
    info->id = p->id;
    info->isP2pSupported = 0;
    info->sliceCount = p->slices;
    info->instanceCount = p->instance_count;
    info->multiprocessorCount = p->multiprocessors;
    info->copyEngineCount = p->copy_engines;
    info->decoderCount = p->decoders;
    info->encoderCount = p->encoders;
    info->jpegCount = p->jpegs;
    info->ofaCount = p->ofas;
    info->memorySizeMB = gpumeter::sim::mig_memory_slice_bytes(d.gpu.model()) * p->memory_slices / kMiB;
    const std::string name = "MIG " + p->name;
    std::snprintf(info->name, sizeof info->name, "%s", name.c_str());
    return NVML_SUCCESS;
  });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id,
                                                               nvmlGpuInstance_t* gpu_instance) {
  return device_call(Fn::nvmlDeviceGetGpuInstanceById, device, [&](Session& s, DeviceState& d, Micros now) {
    if (gpu_instance == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!mig_enabled(s, d)) return NVML_ERROR_NOT_SUPPORTED;
    if (s.refuses_unprivileged(d.gpu.index(), now)) return NVML_ERROR_NO_PERMISSION;  // [H] privileged
    const auto& plan = s.scenario().mig;
    for (std::size_t i : plan.live(d.gpu.index(), now)) {
      if (plan.instances[i].gpu_instance_id == id) {
        *gpu_instance = Runtime::instance().gpu_instance_handle(i);
        return NVML_SUCCESS;
      }
    }
    return NVML_ERROR_NOT_FOUND;
  });
}

// A GPU instance handle of a destroyed instance is invalid, as a MIG device handle is.
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpu_instance, nvmlGpuInstanceInfo_t* info) {
  auto index = Runtime::instance().gpu_instance_index_of(gpu_instance);
  if (!index) {
    return gpumeter::sim::system_call(Fn::nvmlGpuInstanceGetInfo, [](Session&) { return NVML_ERROR_INVALID_ARGUMENT; });
  }
  return mig_call(Fn::nvmlGpuInstanceGetInfo, Runtime::instance().mig_handle(*index),
                  [&](Session& s, DeviceState& d, const MigInstance& m, std::size_t, Micros now) {
                    if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
                    if (s.refuses_unprivileged(m.gpu, now)) return NVML_ERROR_NO_PERMISSION;  // [H] privileged
                    const MigProfile& p = mig_profiles(d.gpu.model()).at(m.profile);
                    *info = nvmlGpuInstanceInfo_t{};
                    info->device = Runtime::instance().handle(m.gpu);
                    info->id = m.gpu_instance_id;
                    info->profileId = p.id;
                    info->placement.start = m.placement;
                    info->placement.size = m.memory_slices;
                    return NVML_SUCCESS;
                  });
}

static_assert(std::is_same_v<decltype(&nvmlDeviceGetMaxMigDeviceCount), nvmlDeviceGetMaxMigDeviceCount_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetMigDeviceHandleByIndex), nvmlDeviceGetMigDeviceHandleByIndex_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetDeviceHandleFromMigDeviceHandle),
                             nvmlDeviceGetDeviceHandleFromMigDeviceHandle_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceIsMigDeviceHandle), nvmlDeviceGetUInt_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetGpuInstanceId), nvmlDeviceGetUInt_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetComputeInstanceId), nvmlDeviceGetUInt_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetAttributes_v2), nvmlDeviceGetAttributes_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetGpuInstanceProfileInfoV), nvmlDeviceGetGpuInstanceProfileInfoV_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetGpuInstanceById), nvmlDeviceGetGpuInstanceById_fn>);
static_assert(std::is_same_v<decltype(&nvmlGpuInstanceGetInfo), nvmlGpuInstanceGetInfo_fn>);
