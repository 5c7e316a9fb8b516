// NVML entry points: init and shutdown, system queries, enumeration, identity and events.
// Device metrics are in nvml_exports_device.cpp, processes and samples in
// nvml_exports_process.cpp, per-process utilization in nvml_exports_process_util.cpp.

#include <algorithm>
#include <chrono>
#include <thread>
#include <type_traits>

#include <fmt/format.h>

#include "sim/nvml/event_sets.h"
#include "sim/scenario/identifiers.h"
#include "sim/nvml/nvml_call.h"
#include "sim/nvml/nvml_exports_mig.h"

using gpumeter::sim::copy_string;
using gpumeter::sim::device_call;
using gpumeter::sim::DeviceState;
using gpumeter::sim::Micros;
using gpumeter::sim::Runtime;
using gpumeter::sim::Session;
using gpumeter::sim::system_call;
using Fn = gpumeter::sim::NvmlFunction;

// ---- init and shutdown ----

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlInit_v2(void) { return Runtime::instance().init(); }
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlInit(void) { return Runtime::instance().init(); }
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int /*flags*/) { return Runtime::instance().init(); }
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlShutdown(void) { return Runtime::instance().shutdown(); }

// The texts real drivers return, so logs read the same against the simulator.
GPUMETER_NVML_EXPORT const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
      return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED:
      return "Already Initialized";
    case NVML_ERROR_NOT_FOUND:
      return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER:
      return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT:
      return "Timeout";
    case NVML_ERROR_IRQ_ISSUE:
      return "Interrupt request issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND:
      return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
      return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM:
      return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED:
      return "GPU requires restart";
    case NVML_ERROR_OPERATING_SYSTEM:
      return "The operating system has blocked the request.";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
      return "RM has detected an NVML/RM version mismatch.";
    case NVML_ERROR_IN_USE:
      return "In use by another client";
    case NVML_ERROR_MEMORY:
      return "Insufficient Memory";
    case NVML_ERROR_NO_DATA:
      return "No data";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
      return "Argument version mismatch";
    case NVML_ERROR_UNKNOWN:
      return "Unknown Error";
    default:
      return "Unknown Error";
  }
}

// ---- system ----

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  return system_call(Fn::nvmlSystemGetDriverVersion,
                     [&](Session& s) { return copy_string(s.driver_version(), version, length); });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
  return system_call(Fn::nvmlSystemGetNVMLVersion, [&](Session& s) {
    // NVML's own version is the CUDA major version followed by the driver version.
    const auto& sc = s.scenario();
    return copy_string(fmt::format("{}.{}", sc.cuda_driver_version / 1000, s.driver_version()), version, length);
  });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* cuda_driver_version) {
  return system_call(Fn::nvmlSystemGetCudaDriverVersion, [&](Session& s) {
    if (cuda_driver_version == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *cuda_driver_version = s.scenario().cuda_driver_version;
    return NVML_SUCCESS;
  });
}

// ---- enumeration ----

namespace {

nvmlReturn_t device_count(Fn fn, unsigned int* count) {
  return system_call(fn, [&](Session& s) {
    if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *count = s.device_count();
    return NVML_SUCCESS;
  });
}

nvmlReturn_t handle_by_index(Fn fn, unsigned int index, nvmlDevice_t* device) {
  try {
    auto session = Runtime::instance().session();
    if (!session) return NVML_ERROR_UNINITIALIZED;
    if (device == nullptr || index >= session->device_count()) return NVML_ERROR_INVALID_ARGUMENT;
    if (nvmlReturn_t r = session->enter(fn, index); r != NVML_SUCCESS) return r;
    *device = Runtime::instance().handle(index);
    return NVML_SUCCESS;
  } catch (...) {
    return NVML_ERROR_UNKNOWN;
  }
}

}  // namespace

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  return device_count(Fn::nvmlDeviceGetCount_v2, count);
}
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int* count) {
  return device_count(Fn::nvmlDeviceGetCount, count);
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  return handle_by_index(Fn::nvmlDeviceGetHandleByIndex_v2, index, device);
}
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  return handle_by_index(Fn::nvmlDeviceGetHandleByIndex, index, device);
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  try {
    auto session = Runtime::instance().session();
    if (!session) return NVML_ERROR_UNINITIALIZED;
    if (session->stale(session->now())) return NVML_ERROR_LIB_RM_VERSION_MISMATCH;
    if (uuid == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const auto& gpus = session->scenario().gpus;
    auto it = std::find_if(gpus.begin(), gpus.end(), [&](const auto& g) { return g.uuid == uuid; });
    if (it == gpus.end()) {
      // nvml.h: also a MIG device's UUID, while its instance lives.
      if (auto mig = gpumeter::sim::mig::instance_by_uuid(*session, uuid)) {
        const unsigned parent = session->scenario().mig.instances[*mig].gpu;
        if (nvmlReturn_t r = session->enter(Fn::nvmlDeviceGetHandleByUUID, parent); r != NVML_SUCCESS) return r;
        *device = Runtime::instance().mig_handle(*mig);
        return NVML_SUCCESS;
      }
      return NVML_ERROR_NOT_FOUND;
    }
    auto index = static_cast<unsigned>(it - gpus.begin());
    if (nvmlReturn_t r = session->enter(Fn::nvmlDeviceGetHandleByUUID, index); r != NVML_SUCCESS) return r;
    *device = Runtime::instance().handle(index);
    return NVML_SUCCESS;
  } catch (...) {
    return NVML_ERROR_UNKNOWN;
  }
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) {
  if (gpumeter::sim::is_mig_handle(device)) return gpumeter::sim::mig::index(device, index);
  return device_call(Fn::nvmlDeviceGetIndex, device, [&](Session&, DeviceState& d, Micros) {
    if (index == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *index = d.gpu.index();
    return NVML_SUCCESS;
  });
}

// ---- identity ----

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  if (gpumeter::sim::is_mig_handle(device)) return gpumeter::sim::mig::uuid(device, uuid, length);
  return device_call(Fn::nvmlDeviceGetUUID, device,
                     [&](Session&, DeviceState& d, Micros) { return copy_string(d.gpu.spec().uuid, uuid, length); });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  if (gpumeter::sim::is_mig_handle(device)) return gpumeter::sim::mig::name(device, name, length);
  return device_call(Fn::nvmlDeviceGetName, device,
                     [&](Session&, DeviceState& d, Micros) { return copy_string(d.gpu.model().name, name, length); });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char* serial, unsigned int length) {
  return device_call(Fn::nvmlDeviceGetSerial, device, [&](Session&, DeviceState& d, Micros) -> nvmlReturn_t {
    // GeForce boards have no board serial: nvidia-smi prints "Serial Number: N/A" for them
    // (netdata/netdata#4892, TheTumultuousUnicornOfDarkness/CPU-X#115).
    if (d.gpu.model().profile == "geforce") return NVML_ERROR_NOT_SUPPORTED;
    return copy_string(d.gpu.spec().serial, serial, length);
  });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t device, char* version, unsigned int length) {
  return device_call(Fn::nvmlDeviceGetVbiosVersion, device, [&](Session&, DeviceState& d, Micros) {
    return copy_string(d.gpu.model().vbios_version, version, length);
  });
}

namespace {

nvmlReturn_t pci_info(Fn fn, nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return device_call(fn, device, [&](Session&, DeviceState& d, Micros) {
    if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const auto& a = d.gpu.spec().pci;
    *pci = nvmlPciInfo_t{};
    std::string legacy = gpumeter::sim::format_pci_bus_id_legacy(a);
    std::string full = gpumeter::sim::format_pci_bus_id(a);
    std::memcpy(pci->busIdLegacy, legacy.c_str(), std::min(legacy.size() + 1, sizeof(pci->busIdLegacy)));
    std::memcpy(pci->busId, full.c_str(), std::min(full.size() + 1, sizeof(pci->busId)));
    pci->busIdLegacy[sizeof(pci->busIdLegacy) - 1] = '\0';
    pci->busId[sizeof(pci->busId) - 1] = '\0';
    pci->domain = a.domain;
    pci->bus = a.bus;
    pci->device = a.device;
    pci->pciDeviceId = d.gpu.model().pci_device_id;
    pci->pciSubSystemId = d.gpu.model().pci_subsystem_id;
    return NVML_SUCCESS;
  });
}

}  // namespace

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return pci_info(Fn::nvmlDeviceGetPciInfo_v3, device, pci);
}
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return pci_info(Fn::nvmlDeviceGetPciInfo_v2, device, pci);
}

// ---- events ----

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  return system_call(Fn::nvmlEventSetCreate, [&](Session&) {
    if (set == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *set = Runtime::instance().create_event_set();
    return NVML_SUCCESS;
  });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device,
                                                                   unsigned long long* event_types) {
  return device_call(Fn::nvmlDeviceGetSupportedEventTypes, device, [&](Session&, DeviceState& d, Micros) {
    if (event_types == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *event_types = gpumeter::sim::supported_event_types(d.gpu.model());
    return NVML_SUCCESS;
  });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long event_types,
                                                           nvmlEventSet_t set) {
  return device_call(Fn::nvmlDeviceRegisterEvents, device, [&](Session& s, DeviceState& d, Micros now) {
    auto es = Runtime::instance().event_set(set);
    if (!es) return NVML_ERROR_INVALID_ARGUMENT;
    if ((event_types & ~gpumeter::sim::supported_event_types(d.gpu.model())) != 0) return NVML_ERROR_NOT_SUPPORTED;
    gpumeter::sim::register_events(*es, s, d.gpu.index(), event_types, now);
    return NVML_SUCCESS;
  });
}

// Waits as the kernel does: one timed wait until the next instant anything can change (the
// next scheduled event or lost window of a registered GPU, on the wall clock, or a new
// registration in the set) or the timeout, whichever is first. The simulator's CPU is billed
// to the process that loads it, so it never wakes just to look.
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data,
                                                      unsigned int timeoutms) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeoutms);
  return system_call(Fn::nvmlEventSetWait_v2, [&](Session& s) {
    auto es = Runtime::instance().event_set(set);
    if (!es || data == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    while (true) {
      const unsigned long long generation = gpumeter::sim::registration_generation(*es);
      const Micros t = s.now();
      if (s.stale(t)) return NVML_ERROR_LIB_RM_VERSION_MISMATCH;
      // nvml.h: GPU_IS_LOST "if any GPU in the set fell off the bus".
      if (gpumeter::sim::any_registered_gpu_lost(*es, s, t)) return NVML_ERROR_GPU_IS_LOST;
      if (auto e = gpumeter::sim::take_due_event(*es, s, t)) {
        *data = nvmlEventData_t{};
        data->device = Runtime::instance().handle(e->gpu);
        data->eventType = nvmlEventTypeXidCriticalError;
        data->eventData = e->code;
        data->gpuInstanceId = e->gpu_instance_id;
        data->computeInstanceId = e->compute_instance_id;
        return NVML_SUCCESS;
      }
      const auto now = Clock::now();
      if (now >= deadline) return NVML_ERROR_TIMEOUT;
      auto wake = deadline;
      const Micros next =
          std::min({gpumeter::sim::next_event_time(*es, s), gpumeter::sim::next_lost_start(*es, s, t), s.stale_from()});
      if (next != gpumeter::sim::kForever) {
        const auto wall_now = std::chrono::system_clock::now().time_since_epoch();
        const auto until_due = std::chrono::nanoseconds(s.wall_ns_at(next)) - wall_now;
        // A due time already past (rounding between the clocks) waits a microsecond, not a spin.
        wake = std::min(wake, now + std::max<Clock::duration>(until_due, std::chrono::microseconds(1)));
      }
      gpumeter::sim::wait_for_change(*es, generation, wake);
    }
  });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  return system_call(Fn::nvmlEventSetFree, [&](Session&) {
    return Runtime::instance().free_event_set(set) ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
  });
}

// The exported signatures must match the pointer types the agent's dlsym() casts to.
static_assert(std::is_same_v<decltype(&nvmlInit_v2), nvmlInit_fn>);
static_assert(std::is_same_v<decltype(&nvmlShutdown), nvmlShutdown_fn>);
static_assert(std::is_same_v<decltype(&nvmlErrorString), nvmlErrorString_fn>);
static_assert(std::is_same_v<decltype(&nvmlSystemGetDriverVersion), nvmlSystemGetDriverVersion_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetCount_v2), nvmlDeviceGetCount_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetHandleByIndex_v2), nvmlDeviceGetHandleByIndex_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetHandleByUUID), nvmlDeviceGetHandleByUUID_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetUUID), nvmlDeviceGetString_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetPciInfo_v3), nvmlDeviceGetPciInfo_fn>);
static_assert(std::is_same_v<decltype(&nvmlEventSetCreate), nvmlEventSetCreate_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetSupportedEventTypes), nvmlDeviceGetULongLong_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceRegisterEvents), nvmlDeviceRegisterEvents_fn>);
static_assert(std::is_same_v<decltype(&nvmlEventSetWait_v2), nvmlEventSetWait_fn>);
static_assert(std::is_same_v<decltype(&nvmlEventSetFree), nvmlEventSetFree_fn>);
