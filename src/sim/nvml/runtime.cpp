#include "sim/nvml/runtime.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace gpumeter::sim {

Runtime& Runtime::instance() {
  // Never destroyed: a thread still inside an NVML call (a hang, an event wait) at process
  // exit must not find the state gone.
  static Runtime* runtime = new Runtime();
  return *runtime;
}

Runtime::Runtime() {
  for (unsigned i = 0; i < handles_.size(); ++i) handles_[i].index = i;
  for (unsigned i = 0; i < mig_handles_.size(); ++i) mig_handles_[i].index = i;
  for (unsigned i = 0; i < gi_handles_.size(); ++i) gi_handles_[i].index = i;
}

nvmlReturn_t Runtime::init() {
  std::lock_guard lock(mu_);
  const std::int64_t now_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (refcount_ > 0) {
    ++refcount_;
    return NVML_SUCCESS;
  }
  auto setup = load_sim_setup([](const char* name) { return std::getenv(name); });
  if (!setup) {
    std::fprintf(stderr, "gpumeter-sim: %s\n", setup.error().message.c_str());
    return NVML_ERROR_DRIVER_NOT_LOADED;
  }
  if (!first_init_ns_) first_init_ns_ = now_ns;
  auto session = std::make_shared<Session>(std::move(setup->scenario), setup->env, *first_init_ns_);
  // A real driver upgrade replaces the library on disk and the kernel module, never the copy a
  // running process mapped: its nvmlInit answers "Driver/library version mismatch" until the
  // process is restarted (docs/nvml-behaviour.md).
  const std::string machine = session->scenario().source + "\n" + session->scenario().driver_version;
  if (!loaded_driver_ || loaded_driver_->first != machine) loaded_driver_ = {machine, session->driver_version()};
  if (session->driver_version() != loaded_driver_->second) return NVML_ERROR_LIB_RM_VERSION_MISMATCH;
  // The device files, held open until the last nvmlShutdown (device_files.h); a driver that
  // cannot open /dev/nvidiactl answers NO_PERMISSION.
  auto hold = DeviceFileHold::open(setup->env.scenario_path);
  if (!hold) {
    std::fprintf(stderr, "gpumeter-sim: %s\n", hold.error().message.c_str());
    return NVML_ERROR_NO_PERMISSION;
  }
  device_files_ = std::move(hold).value();
  session_ = std::move(session);
  refcount_ = 1;
  return NVML_SUCCESS;
}

nvmlReturn_t Runtime::shutdown() {
  std::lock_guard lock(mu_);
  if (refcount_ == 0) return NVML_ERROR_UNINITIALIZED;
  if (--refcount_ == 0) {
    session_.reset();
    event_sets_.clear();
    device_files_.reset();
  }
  return NVML_SUCCESS;
}

std::shared_ptr<Session> Runtime::session() const {
  std::lock_guard lock(mu_);
  return session_;
}

std::optional<unsigned> Runtime::index_of(nvmlDevice_t device) const {
  // Compared as integers: the pointer may be garbage from the caller.
  const auto p = reinterpret_cast<std::uintptr_t>(device);
  const auto base = reinterpret_cast<std::uintptr_t>(handles_.data());
  if (p < base || p >= base + sizeof(handles_) || (p - base) % sizeof(nvmlDevice_st) != 0) return std::nullopt;
  return static_cast<unsigned>((p - base) / sizeof(nvmlDevice_st));
}

std::optional<std::size_t> Runtime::mig_index_of(nvmlDevice_t device) const {
  const auto p = reinterpret_cast<std::uintptr_t>(device);
  const auto base = reinterpret_cast<std::uintptr_t>(mig_handles_.data());
  if (p < base || p >= base + sizeof(mig_handles_) || (p - base) % sizeof(nvmlDevice_st) != 0) return std::nullopt;
  return static_cast<std::size_t>((p - base) / sizeof(nvmlDevice_st));
}

std::optional<std::size_t> Runtime::gpu_instance_index_of(nvmlGpuInstance_t handle) const {
  const auto p = reinterpret_cast<std::uintptr_t>(handle);
  const auto base = reinterpret_cast<std::uintptr_t>(gi_handles_.data());
  if (p < base || p >= base + sizeof(gi_handles_) || (p - base) % sizeof(nvmlGpuInstance_st) != 0) return std::nullopt;
  return static_cast<std::size_t>((p - base) / sizeof(nvmlGpuInstance_st));
}

nvmlEventSet_t Runtime::create_event_set() {
  auto set = std::make_shared<nvmlEventSet_st>();
  std::lock_guard lock(mu_);
  event_sets_.emplace(reinterpret_cast<std::uintptr_t>(set.get()), set);
  return set.get();
}

std::shared_ptr<nvmlEventSet_st> Runtime::event_set(nvmlEventSet_t set) const {
  std::lock_guard lock(mu_);
  auto it = event_sets_.find(reinterpret_cast<std::uintptr_t>(set));
  return it == event_sets_.end() ? nullptr : it->second;
}

bool Runtime::free_event_set(nvmlEventSet_t set) {
  std::lock_guard lock(mu_);
  return event_sets_.erase(reinterpret_cast<std::uintptr_t>(set)) > 0;
}

}  // namespace gpumeter::sim
