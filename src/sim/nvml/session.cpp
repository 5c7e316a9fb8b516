#include "sim/nvml/session.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "sim/scenario/driver.h"

namespace gpumeter::sim {

namespace {

bool in_window(const WindowFault& f, unsigned gpu, Micros t) {
  return f.gpu == gpu && t >= f.at && t - f.at < f.duration;
}

}  // namespace

Session::Session(Scenario scenario, const SimEnv& env, std::int64_t default_epoch_ns)
    : scenario_(std::move(scenario)),
      clock_(scenario_clock(env, env.time_scale.value_or(scenario_.time_scale), default_epoch_ns)),
      lie_(env.lie),
      live_reader_(env.cuda_dir),
      unsupported_(env.unsupported),
      unsupported_fields_(env.unsupported_fields),
      xids_(scenario_.gpus.size()),
      hang_fired_(std::make_unique<std::atomic<bool>[]>(scenario_.hangs.size())) {
  // A driver upgraded before this session began is the driver it runs on; the first one due
  // later pulls the driver from under it.
  driver_version_ = scenario_.driver_version;
  const Micros begin = clock_.now();
  for (const DriverUpgrade& u : scenario_.driver_upgrades) {
    if (u.at <= begin) {
      driver_version_ = u.to;
    } else {
      stale_from_ = u.at;
      break;
    }
  }
  driver_major_ = gpumeter::sim::driver_major(driver_version_).value_or(0);
  // NVML sees the NVIDIA GPUs only; the scenario lists them before any AMD GPU, so an NVML
  // index is the scenario index.
  for (unsigned i = 0; i < scenario_.gpus.size(); ++i) {
    if (!scenario_.is_amd(i)) devices_.push_back(std::make_unique<DeviceState>(scenario_, i, &live_));
  }
  for (const XidFault& x : scenario_.xids) xids_[x.gpu].push_back(x);
}

bool Session::field_unsupported(unsigned field_id) const {
  return std::find(unsupported_fields_.begin(), unsupported_fields_.end(), field_id) != unsupported_fields_.end();
}

const Quirk* Session::quirk(QuirkKind kind, unsigned gpu, Micros t) const {
  for (const Quirk& q : scenario_.quirks) {
    if (q.kind == kind && q.applies(gpu, t)) return &q;
  }
  return nullptr;
}

bool Session::lost(unsigned gpu, Micros t) const {
  return std::any_of(scenario_.lost.begin(), scenario_.lost.end(),
                     [&](const WindowFault& w) { return in_window(w, gpu, t); });
}

Micros Session::next_lost_start(unsigned gpu, Micros t) const {
  Micros next = kForever;
  for (const WindowFault& w : scenario_.lost) {
    if (w.gpu == gpu && w.at > t) next = std::min(next, w.at);
  }
  return next;
}

nvmlReturn_t Session::enter(NvmlFunction f, unsigned gpu) {
  const std::string_view name = nvml_function_name(f);
  for (std::size_t i = 0; i < scenario_.hangs.size(); ++i) {
    const HangFault& h = scenario_.hangs[i];
    if (h.gpu != gpu || (!h.call.empty() && h.call != name)) continue;
    if (now() < h.at || hang_fired_[i].load(std::memory_order_relaxed)) continue;
    if (hang_fired_[i].exchange(true)) continue;  // another thread took this hang
    std::this_thread::sleep_for(std::chrono::duration<double>(h.wall_seconds));
  }
  live_reader_.refresh(clock_, live_);
  const Micros t = now();
  if (stale(t)) return NVML_ERROR_LIB_RM_VERSION_MISMATCH;
  if (lost(gpu, t)) return NVML_ERROR_GPU_IS_LOST;
  for (const WindowFault& w : scenario_.unknown_errors) {
    if (in_window(w, gpu, t)) return NVML_ERROR_UNKNOWN;
  }
  for (const Quirk& q : scenario_.quirks) {
    if (q.kind != QuirkKind::call_error || q.call != name || !q.applies(gpu, t)) continue;
    switch (q.error) {
      case CallErrorCode::unknown:
        return NVML_ERROR_UNKNOWN;
      case CallErrorCode::not_supported:
        return NVML_ERROR_NOT_SUPPORTED;
      case CallErrorCode::no_permission:
        return NVML_ERROR_NO_PERMISSION;
      case CallErrorCode::timeout:
        return NVML_ERROR_TIMEOUT;
    }
  }
  if (unsupported(f)) return NVML_ERROR_NOT_SUPPORTED;
  return NVML_SUCCESS;
}

}  // namespace gpumeter::sim
