#include "cli/agent_setup.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include "sim/model/scenario_parse.h"

namespace gpumeter::cli {

namespace fs = std::filesystem;

namespace {

// The simulator is installed beside the binary as ../lib/gpumeter/libnvidia-ml.so.1, and the
// build tree uses the same layout.
std::string bundled_simulator_library() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "libnvidia-ml.so.1";
  return (exe.parent_path().parent_path() / "lib" / "gpumeter" / "libnvidia-ml.so.1").string();
}

}  // namespace

Result<void> check_sim_scenario(const std::string& path) {
  auto scenario = sim::load_scenario(path);
  if (!scenario) return scenario.error();
  return {};
}

std::unique_ptr<NvmlBackend> create_nvml_backend(const NvmlSelection& selection, Logger& log) {
  NvmlBackendOptions nvml_options;
  if (!selection.sim_scenario.empty()) {
    // The simulator reads its scenario from the environment, like any NVML program would.
    setenv("GPUMETER_SIM_SCENARIO", selection.sim_scenario.c_str(), 1);
    nvml_options.library_candidates = {selection.library.empty() ? bundled_simulator_library()
                                                                 : selection.library};
    log.info("running on the fleet simulator",
             {{"scenario", selection.sim_scenario}, {"library", nvml_options.library_candidates[0]}});
  } else if (!selection.library.empty()) {
    nvml_options.library_candidates = {selection.library};
  }
  auto nvml = NvmlBackend::create(nvml_options, log);
  if (nvml->status().up) {
    log.info("NVML backend up", {{"detail", nvml->status().detail}});
    if (!nvml->missing_symbols().empty()) {
      std::string names;
      for (const auto& n : nvml->missing_symbols()) names += (names.empty() ? "" : ",") + n;
      log.info("NVML entry points absent; the metrics they feed are left out", {{"symbols", names}});
    }
  }
  return nvml;
}

std::unique_ptr<RocmBackend> create_rocm_backend(const std::string& library, Logger& log) {
  RocmBackendOptions options;
  if (!library.empty()) options.library_candidates = {library};
  auto rocm = RocmBackend::create(options, log);
  if (rocm->status().up) {
    log.info("ROCm SMI backend up", {{"detail", rocm->status().detail}});
  } else {
    log.info("ROCm SMI backend down; serving gpumeter_backend_up{backend=\"rocm_smi\"} 0",
             {{"reason", rocm->status().detail}});
  }
  return rocm;
}

Result<Config> load_agent_config(const std::string& path) {
  if (path.empty()) return Config{};
  return load_config(path);
}

HostOwnerResolverOptions owner_resolver_options(const Config& config, const std::string& procfs,
                                                const std::string& rootfs) {
  HostOwnerResolverOptions ro;
  ro.procfs = procfs;
  ro.rootfs = rootfs;
  ro.environment = config.attribution.environment;
  ro.hpc_job_mapping_dir = config.attribution.hpc_job_mapping_dir;
  ro.kubelet_socket = config.attribution.kubelet.effective_socket(rootfs);
  ro.kubelet.refresh_interval = config.attribution.kubelet.refresh_interval;
  ro.kubelet.timeout = config.attribution.kubelet.timeout;
  ro.kubelet.max_message_bytes = config.attribution.kubelet.max_message_size;
  ro.kubelet.resource_names = config.attribution.kubelet.resource_names;
  ro.rules = config.project.resolver;
  return ro;
}

UsageTrackerOptions usage_tracker_options(const Config& config, std::chrono::milliseconds interval) {
  UsageTrackerOptions to;
  to.labels = {config.ledger.labels.begin(), config.ledger.labels.end()};
  to.owner_retention = config.ledger.owner_retention;
  to.max_process_series = config.processes.max_series;
  to.process_retention = config.processes.retention;
  to.idle_power_watts = config.ledger.idle_power_watts;
  to.checkpoint_interval = config.ledger.checkpoint_interval;
  to.max_gap = std::max(std::chrono::milliseconds(10'000), 5 * interval);
  return to;
}

}  // namespace gpumeter::cli
