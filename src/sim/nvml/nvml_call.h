#pragma once
// The frame every exported NVML function runs in: look up the session and the device, pass
// the fault gate, then run the body under the device's lock. No C++ exception may cross the
// C boundary, so anything thrown becomes NVML_ERROR_UNKNOWN.

#include <cstring>
#include <string_view>
#include <vector>

#include "abi/nvml_api.h"
#include "sim/nvml/runtime.h"
#include "sim/nvml/session.h"

#define GPUMETER_NVML_EXPORT extern "C" __attribute__((visibility("default")))

namespace gpumeter::sim {

template <typename Body>
nvmlReturn_t system_call(NvmlFunction fn, Body&& body) noexcept {
  try {
    auto session = Runtime::instance().session();
    if (!session) return NVML_ERROR_UNINITIALIZED;
    if (session->stale(session->now())) return NVML_ERROR_LIB_RM_VERSION_MISMATCH;
    if (session->unsupported(fn)) return NVML_ERROR_NOT_SUPPORTED;
    return body(*session);
  } catch (...) {
    return NVML_ERROR_UNKNOWN;
  }
}

// Body: nvmlReturn_t(Session&, DeviceState&, Micros now), run with the device locked.
template <typename Body>
nvmlReturn_t device_call(NvmlFunction fn, nvmlDevice_t device, Body&& body) noexcept {
  try {
    auto session = Runtime::instance().session();
    if (!session) return NVML_ERROR_UNINITIALIZED;
    auto index = Runtime::instance().index_of(device);
    if (!index) {
      // A MIG device handle where the function takes none (see mig_call): NOT_SUPPORTED while
      // its instance lives, INVALID_ARGUMENT once it is destroyed.
      auto mig = Runtime::instance().mig_index_of(device);
      const auto& instances = session->scenario().mig.instances;
      if (!mig || *mig >= instances.size()) return NVML_ERROR_INVALID_ARGUMENT;
      const MigInstance& m = instances[*mig];
      const Micros now = session->now();
      if (now < m.start || now >= m.end) return NVML_ERROR_INVALID_ARGUMENT;
      if (nvmlReturn_t r = session->enter(fn, m.gpu); r != NVML_SUCCESS) return r;
      return NVML_ERROR_NOT_SUPPORTED;
    }
    if (*index >= session->device_count()) return NVML_ERROR_INVALID_ARGUMENT;
    if (nvmlReturn_t r = session->enter(fn, *index); r != NVML_SUCCESS) return r;
    DeviceState& d = session->device(*index);
    std::lock_guard lock(d.mu);
    return body(*session, d, session->now());
  } catch (...) {
    return NVML_ERROR_UNKNOWN;
  }
}

inline bool is_mig_handle(nvmlDevice_t device) { return Runtime::instance().mig_index_of(device).has_value(); }

// A call on a MIG device handle. Body: nvmlReturn_t(Session&, DeviceState& parent, const
// MigInstance&, std::size_t instance, Micros now), run with the parent locked. A handle whose
// instance is not alive (destroyed by a layout change) is invalid: nvml.h says it "would remain
// invalid and must be requested again" (nvmlDeviceGetMigDeviceHandleByIndex).
template <typename Body>
nvmlReturn_t mig_call(NvmlFunction fn, nvmlDevice_t device, Body&& body) noexcept {
  try {
    auto session = Runtime::instance().session();
    if (!session) return NVML_ERROR_UNINITIALIZED;
    auto mig = Runtime::instance().mig_index_of(device);
    const auto& instances = session->scenario().mig.instances;
    if (!mig || *mig >= instances.size()) return NVML_ERROR_INVALID_ARGUMENT;
    const MigInstance& m = instances[*mig];
    if (session->now() < m.start || session->now() >= m.end) {
      if (session->stale(session->now())) return NVML_ERROR_LIB_RM_VERSION_MISMATCH;
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (nvmlReturn_t r = session->enter(fn, m.gpu); r != NVML_SUCCESS) return r;
    DeviceState& d = session->device(m.gpu);
    std::lock_guard lock(d.mu);
    return body(*session, d, m, *mig, session->now());
  } catch (...) {
    return NVML_ERROR_UNKNOWN;
  }
}

inline nvmlReturn_t copy_string(std::string_view value, char* out, unsigned length) {
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (length < value.size() + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(out, value.data(), value.size());
  out[value.size()] = '\0';
  return NVML_SUCCESS;
}

// NVML's size query for a list of records (the running processes): a count below the number
// there are (0 included) answers INSUFFICIENT_SIZE with the number; an empty list answers
// SUCCESS with 0 whatever the buffer.
template <typename Item, typename Info, typename Fill>
nvmlReturn_t list_records(const std::vector<Item>& items, unsigned* count, Info* infos, Fill&& fill) {
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const auto n = static_cast<unsigned>(items.size());
  if (*count < n) {
    *count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  if (n > 0 && infos == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  for (unsigned i = 0; i < n; ++i) fill(infos[i], items[i]);
  *count = n;
  return NVML_SUCCESS;
}

}  // namespace gpumeter::sim
