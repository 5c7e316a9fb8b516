#pragma once
// One loaded scenario, from nvmlInit to the matching nvmlShutdown: the simulated GPUs, the
// clock that maps wall time to scenario time, and the fault schedule. Calls on different
// GPUs never share a lock; a hang sleeps before any lock is taken, so it stalls only the
// calling thread.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "abi/nvml_api.h"
#include "sim/scenario/scenario_clock.h"
#include "sim/scenario/env_config.h"
#include "sim/physics/gpu_sim.h"
#include "sim/physics/live.h"
#include "sim/scenario/nvml_functions.h"
#include "sim/scenario/scenario.h"
#include "sim/nvml/live_logs.h"

namespace gpumeter::sim {

struct DeviceState {
  DeviceState(const Scenario& s, unsigned index, const LiveTable* live) : gpu(s, index, live) {}
  std::mutex mu;  // guards gpu's caches
  SimGpu gpu;
};

class Session {
 public:
  // default_epoch_ns: the unix time (ns) of scenario time 0 when `env` names no epoch (file).
  Session(Scenario scenario, const SimEnv& env, std::int64_t default_epoch_ns);

  const Scenario& scenario() const { return scenario_; }
  // The driver this session runs on: the scenario's, or that of the last driver_upgrade due
  // when the session began.
  const std::string& driver_version() const { return driver_version_; }
  unsigned driver_major() const { return driver_major_; }
  // From this scenario time on, the driver was upgraded under the session: every call fails
  // with LIB_RM_VERSION_MISMATCH until NVML is initialized again.
  Micros stale_from() const { return stale_from_; }
  bool stale(Micros t) const { return t >= stale_from_; }
  unsigned device_count() const { return static_cast<unsigned>(devices_.size()); }
  DeviceState& device(unsigned i) { return *devices_[i]; }
  const ScenarioClock& clock() const { return clock_; }
  double time_scale() const { return clock_.scale(); }
  Micros now() const { return clock_.now(); }
  std::int64_t unix_micros(Micros t) const { return clock_.unix_micros(t); }
  std::int64_t wall_ns_at(Micros t) const { return clock_.wall_ns_at(t); }

  bool unsupported(NvmlFunction f) const { return unsupported_.test(static_cast<std::size_t>(f)); }
  bool field_unsupported(unsigned field_id) const;

  // The fault gate every device call passes: blocks for a due hang, then reports a driver
  // upgraded under the session, a lost GPU, an unknown-error burst, a call_error quirk, then
  // an unsupported function.
  nvmlReturn_t enter(NvmlFunction f, unsigned gpu);

  // The first quirk of `kind` in force on `gpu` at t, or null.
  const Quirk* quirk(QuirkKind kind, unsigned gpu, Micros t) const;
  // Whether a call that needs CAP_SYS_ADMIN on a MIG GPU answers NO_PERMISSION: `gpu` is in MIG
  // mode and a no_capability quirk is in force on it at t (docs/nvml-behaviour.md, "MIG without
  // CAP_SYS_ADMIN").
  bool refuses_unprivileged(unsigned gpu, Micros t) const {
    return scenario_.mig.enabled(gpu) && quirk(QuirkKind::no_capability, gpu, t) != nullptr;
  }

  // Whether `gpu` is in a lost window at t, and when its next lost window starts after t.
  bool lost(unsigned gpu, Micros t) const;
  Micros next_lost_start(unsigned gpu, Micros t) const;

  // GPUMETER_SIM_LIE: the offset this process is told on `metric`, or 0.
  double lie(std::string_view metric) const { return lie_.metric == metric ? lie_.offset : 0.0; }

  // Xid events of one GPU, by time.
  const std::vector<XidFault>& xids(unsigned gpu) const { return xids_[gpu]; }

 private:
  Scenario scenario_;
  ScenarioClock clock_;
  SimLie lie_;
  // Processes of programs on the simulated CUDA driver, declared before devices_, whose
  // timelines read them.
  LiveTable live_;
  LiveLogReader live_reader_;
  std::string driver_version_;
  unsigned driver_major_ = 0;
  Micros stale_from_ = kForever;
  std::bitset<kNvmlFunctionCount> unsupported_;
  std::vector<unsigned> unsupported_fields_;
  std::vector<std::unique_ptr<DeviceState>> devices_;
  std::vector<std::vector<XidFault>> xids_;
  std::unique_ptr<std::atomic<bool>[]> hang_fired_;  // one per scenario_.hangs entry
};

}  // namespace gpumeter::sim
