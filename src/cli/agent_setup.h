#pragma once
// What `gpumeter serve` and `gpumeter snapshot` set up the same way: the NVML backend (real
// or the bundled simulator), the config file, and the attribution and ledger options derived
// from them, so that a snapshot attributes processes exactly as the agent does.

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "backend/nvml/nvml_backend.h"
#include "backend/rocm/rocm_backend.h"
#include "config/config.h"
#include "ledger/host_owner_resolver.h"
#include "ledger/usage_tracker.h"
#include "render/compat.h"
#include "transcript/recorder.h"
#include "util/log.h"
#include "util/result.h"

namespace gpumeter::cli {

struct NvmlSelection {
  std::string library;       // --nvml.library; "" for the default candidates
  std::string sim_scenario;  // --sim.scenario; "" for real GPUs (a scenario may name a recording)
  std::optional<transcript::RecordOptions> record;  // --nvml.record
  // A failed nvmlInit_v2 is tried again over 15 s (serve: the driver may load after the agent
  // at boot); a one-shot command answers at once.
  bool retry_init = true;
};

// A library of the simulator (libnvidia-ml.so.1, libcuda.so.1), installed beside the binary as
// ../lib/gpumeter/<soname>; the build tree uses the same layout.
std::string bundled_simulator_library(const std::string& soname);

// Loads NVML: with a scenario, the simulator installed beside the binary (unless a library is
// named) playing that scenario, or the replay of the recording it names; with `record`, every
// call goes through the transcript recorder. Logs which library runs the simulator, and when the
// backend is up, its detail and the optional entry points it lacks. Fails only when the recording
// cannot be written or the replay read: a backend that is down says why in status().detail, and
// the caller decides how to report it.
Result<std::unique_ptr<NvmlBackend>> create_nvml_backend(const NvmlSelection& selection, Logger& log);

// Loads ROCm SMI (`library`, or the default sonames when empty) where `sysfs`/class/drm has an
// AMD GPU. Logs one line: the backend up with its detail, or down with the reason (no library,
// not ROCm SMI, no AMD GPU). Never fails.
std::unique_ptr<RocmBackend> create_rocm_backend(const std::string& library, const std::string& sysfs, Logger& log);

// A --sim.scenario file, read and validated by the simulator library that will play it
// (`library`, else the bundled one), so that a bad scenario is a bad flag at start (exit 2) rather
// than an agent serving no GPU. A recording it names is read whole. Errors read
// "file:line:col: ...".
Result<void> check_sim_scenario(const std::string& path, const std::string& library);

// The config file, or the defaults when `path` is empty. Errors read "file:line:col: ...".
Result<Config> load_agent_config(const std::string& path);

// Owner attribution as configured, reading the host under `procfs` and `rootfs`, for a
// collection every `interval` (the sources read on the collection thread are due at the
// collection nearest their refresh interval).
HostOwnerResolverOptions owner_resolver_options(const Config& config, const std::string& procfs,
                                                const std::string& rootfs, std::chrono::milliseconds interval);

// The ledger and per-process options for a collection `interval`, with the allocation policy
// the resolver was set up for. state_file is left empty.
UsageTrackerOptions usage_tracker_options(const Config& config, std::chrono::milliseconds interval,
                                          const HostOwnerResolverOptions& resolver);

// The compat sets to serve: those of --compat and of the config's compat.sets, in that order;
// the counters file of --compat.collectors, else compat.collectors, else dcgm-exporter's default
// list; the Hostname label from compat.hostname, else $NODE_NAME, else the host's name, as
// dcgm-exporter chooses it. Errors name the flag or file at fault.
Result<CompatOptions> compat_options(const Config& config, const std::vector<std::string>& flag_sets,
                                     const std::string& flag_collectors);

// The collectors the compat sets need: those that read the counters file's fields.
CollectorSet compat_collectors(const CompatOptions& compat);

// Logs the sets, the collectors switched on for the counters file's fields, and the fields that
// cannot be served with the `enabled` collectors: at start (`in_force` null), and at a reload
// only what differs from `in_force` (the compat options and collectors in force).
void log_compat(const CompatOptions& compat, const CollectorSet& enabled, Logger& log,
                const std::pair<const CompatOptions*, CollectorSet>* in_force = nullptr);

}  // namespace gpumeter::cli
