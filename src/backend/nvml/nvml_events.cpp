// Xid events: one NVML event set for every GPU, watched by the collector's event thread.
// nvmlEventSetWait_v2 answers GPU_IS_LOST while any GPU in the set is off the bus, so a lost
// GPU is left out of a rebuilt set until its handle is acquired again; the others' events
// keep arriving.

#include "backend/nvml/nvml_internal.h"

namespace gpumeter {

bool NvmlBackend::supports_events() const {
  return loaded_ && symbols_.event_set_create != nullptr && symbols_.register_events != nullptr &&
         symbols_.event_set_wait != nullptr && symbols_.event_set_free != nullptr;
}

nvmlReturn_t NvmlBackend::register_events_locked(unsigned index, nvmlDevice_t handle) {
  Device& d = *devices_[index];
  {
    std::lock_guard lock(handles_mu_);
    if (d.events_registered || d.handle != handle) return NVML_SUCCESS;
  }
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
    std::lock_guard lock(handles_mu_);
    if (d.handle == handle) d.events_registered = true;  // not replaced meanwhile
  } else if (!invalidates_handle(rc)) {
    log_.warn("cannot watch Xid events", {{"gpu", std::to_string(index)}, {"err", error_text(rc)}});
  }
  return rc;
}

void NvmlBackend::free_event_set_locked() {
  if (event_set_ != nullptr && symbols_.event_set_free != nullptr) symbols_.event_set_free(event_set_);
  event_set_ = nullptr;
  std::lock_guard lock(handles_mu_);
  for (auto& d : devices_) d->events_registered = false;
}

std::vector<NvmlBackend::EventDevice> NvmlBackend::event_devices() {
  std::vector<EventDevice> out;
  const auto now = steady_now();
  std::lock_guard lock(handles_mu_);
  for (const auto& d : devices_) {
    out.push_back({d->index, d->handle, d->events_registered, d->events_excluded || now < d->events_retry_at});
  }
  return out;
}

// [H] nvmlDeviceRegisterEvents: an UNKNOWN leaves the event set "in undefined state and should be
// freed". It is freed, and the next wait makes a new one at once without this GPU, which is tried
// again in a minute: the other GPUs' events keep arriving meanwhile.
void NvmlBackend::defer_events_locked(unsigned index) {
  log_.warn("event registration failed; the event set is made again without the GPU for a minute",
            {{"gpu", std::to_string(index)}});
  {
    std::lock_guard lock(handles_mu_);
    devices_[index]->events_retry_at = steady_now() + std::chrono::minutes(1);
  }
  free_event_set_locked();
}

Result<std::optional<DeviceEvent>> NvmlBackend::rebuild_event_set_locked() {
  const std::vector<EventDevice> before = event_devices();
  free_event_set_locked();
  nvmlReturn_t rc = symbols_.event_set_create(&event_set_);
  if (rc != NVML_SUCCESS) {
    event_set_ = nullptr;
    return Error{rc, "nvmlEventSetCreate: " + error_text(rc)};
  }
  bool left_out = false;
  for (const EventDevice& d : before) {
    if (d.excluded) continue;
    const nvmlReturn_t registered = d.handle == nullptr ? NVML_SUCCESS : register_events_locked(d.index, d.handle);
    if (registered == NVML_ERROR_UNKNOWN) {  // the new set is undefined too: made again at the next wait
      defer_events_locked(d.index);
      return std::optional<DeviceEvent>{};
    }
    const bool lost = d.handle == nullptr || invalidates_handle(registered);
    if (!lost) continue;
    if (d.handle == nullptr && !d.registered) continue;  // never was in the set
    {
      std::lock_guard lock(handles_mu_);
      // A worker that found the GPU again meanwhile brings it back in itself.
      if (devices_[d.index]->handle != d.handle) continue;
      devices_[d.index]->events_excluded = true;
    }
    left_out = true;
    log_.warn("GPU is lost: left out of the event set until it is found again", {{"gpu", std::to_string(d.index)}});
  }
  // Nothing to leave out: the set would answer GPU_IS_LOST again at once.
  if (!left_out) return Error{NVML_ERROR_GPU_IS_LOST, "nvmlEventSetWait_v2: " + error_text(NVML_ERROR_GPU_IS_LOST)};
  return std::optional<DeviceEvent>{};
}

namespace {

bool xid_kills_work(unsigned long long xid) {
  // NVIDIA's Xid catalog (docs/nvml-behaviour.md, "Xid events"): a double-bit ECC error (48),
  // an NVLink error (74), the GPU fallen off the bus (79), a contained ECC error, which kills the
  // application that hit it (94), an uncontained one (95), and GSP firmware timeouts and errors
  // (119, 120), each of which leaves the GPU to be reset.
  switch (xid) {
    case 48:
    case 74:
    case 79:
    case 94:
    case 95:
    case 119:
    case 120:
      return true;
    default:
      return false;
  }
}

}  // namespace

Result<std::optional<DeviceEvent>> NvmlBackend::wait_event(std::chrono::milliseconds timeout) {
  if (!supports_events()) return Error{NVML_ERROR_NOT_SUPPORTED, "NVML events are not available"};
  maybe_reinitialize();
  std::shared_lock calls(calls_mu_);
  if (reinit_needed_) return closed_error();
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
    for (const EventDevice& d : event_devices()) {
      if (d.handle == nullptr || d.excluded || d.registered) continue;
      if (register_events_locked(d.index, d.handle) == NVML_ERROR_UNKNOWN) {
        defer_events_locked(d.index);
        return std::optional<DeviceEvent>{};
      }
    }
    set = event_set_;
  }
  nvmlEventData_t data{};
  nvmlReturn_t rc = symbols_.event_set_wait(set, &data, static_cast<unsigned>(timeout.count()));
  if (rc == NVML_ERROR_TIMEOUT) return std::optional<DeviceEvent>{};
  if (rc == NVML_ERROR_GPU_IS_LOST) {
    std::lock_guard lock(events_mu_);
    return rebuild_event_set_locked();
  }
  if (rc == NVML_ERROR_LIB_RM_VERSION_MISMATCH) request_reinit("nvmlEventSetWait_v2: " + error_text(rc));
  if (rc != NVML_SUCCESS) return Error{rc, "nvmlEventSetWait_v2: " + error_text(rc)};
  if ((data.eventType & nvmlEventTypeXidCriticalError) == 0) return std::optional<DeviceEvent>{};
  for (const EventDevice& d : event_devices()) {
    if (d.handle == data.device) {
      DeviceEvent e{d.index, DeviceEventKind::kXid, data.eventData, std::nullopt, xid_kills_work(data.eventData)};
      if (data.gpuInstanceId != GPUMETER_NVML_WHOLE_GPU_EVENT) e.gpu_instance = data.gpuInstanceId;
      return std::optional<DeviceEvent>{e};
    }
  }
  log_.warn("Xid event for an unknown device", {{"xid", std::to_string(data.eventData)}});
  return std::optional<DeviceEvent>{};
}

}  // namespace gpumeter
