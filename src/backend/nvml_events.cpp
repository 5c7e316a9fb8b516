// Xid events: one NVML event set for every GPU, watched by the collector's event thread.

#include "backend/nvml_internal.h"

namespace gpumeter {

bool NvmlBackend::supports_events() const {
  return status().up && symbols_.event_set_create != nullptr && symbols_.register_events != nullptr &&
         symbols_.event_set_wait != nullptr && symbols_.event_set_free != nullptr;
}

nvmlReturn_t NvmlBackend::register_events_locked(unsigned index, nvmlDevice_t handle) {
  Device& d = *devices_[index];
  if (d.events_registered) return NVML_SUCCESS;
  unsigned long long mask = nvmlEventTypeXidCriticalError;
  if (symbols_.supported_event_types != nullptr) {
    unsigned long long supported = 0;
    nvmlReturn_t rc = symbols_.supported_event_types(handle, &supported);
    if (invalidates_handle(rc)) return rc;
    if (rc == NVML_SUCCESS) mask &= supported;
  }
  if (mask == 0) return NVML_ERROR_NOT_SUPPORTED;
  nvmlReturn_t rc = symbols_.register_events(handle, mask, event_set_);
  if (rc == NVML_SUCCESS) {
    d.events_registered = true;
  } else if (!invalidates_handle(rc)) {
    log_.warn("cannot watch Xid events", {{"gpu", std::to_string(index)}, {"err", error_text(rc)}});
  }
  return rc;
}

void NvmlBackend::free_event_set_locked() {
  if (event_set_ != nullptr && symbols_.event_set_free != nullptr) symbols_.event_set_free(event_set_);
  event_set_ = nullptr;
  for (auto& d : devices_) d->events_registered = false;
}

Result<std::optional<DeviceEvent>> NvmlBackend::wait_event(std::chrono::milliseconds timeout) {
  if (!supports_events()) return Error{NVML_ERROR_NOT_SUPPORTED, "NVML events are not available"};
  nvmlEventSet_t set;
  {
    std::lock_guard lock(events_mu_);
    if (event_set_ == nullptr) {
      nvmlReturn_t rc = symbols_.event_set_create(&event_set_);
      if (rc != NVML_SUCCESS) {
        event_set_ = nullptr;
        return Error{rc, "nvmlEventSetCreate: " + error_text(rc)};
      }
    }
    for (auto& d : devices_) {
      if (d->handle != nullptr) register_events_locked(d->index, d->handle);
    }
    set = event_set_;
  }
  nvmlEventData_t data{};
  nvmlReturn_t rc = symbols_.event_set_wait(set, &data, static_cast<unsigned>(timeout.count()));
  if (rc == NVML_ERROR_TIMEOUT) return std::optional<DeviceEvent>{};
  if (rc != NVML_SUCCESS) return Error{rc, "nvmlEventSetWait_v2: " + error_text(rc)};
  if ((data.eventType & nvmlEventTypeXidCriticalError) == 0) return std::optional<DeviceEvent>{};
  std::lock_guard lock(events_mu_);
  for (auto& d : devices_) {
    if (d->handle == data.device) {
      return std::optional<DeviceEvent>{DeviceEvent{d->index, DeviceEventKind::kXid, data.eventData}};
    }
  }
  log_.warn("Xid event for an unknown device", {{"xid", std::to_string(data.eventData)}});
  return std::optional<DeviceEvent>{};
}

}  // namespace gpumeter
