#include "cli/agent_setup.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>

#include "backend/dynamic_library.h"
#include "transcript/replay.h"

namespace gpumeter::cli {

namespace fs = std::filesystem;

std::string bundled_simulator_library(const std::string& soname) {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return soname;
  return (exe.parent_path().parent_path() / "lib" / "gpumeter" / soname).string();
}

Result<void> check_sim_scenario(const std::string& path, const std::string& library) {
  auto replay = transcript::replay_of_scenario(path);
  if (!replay) return replay.error();
  if (!replay->empty()) {
    // The whole recording is read, so that a broken one is a bad flag at start.
    auto recording = transcript::describe_recording(*replay);
    if (!recording) return Error{0, fmt::format("{}: {}", path, recording.error().message)};
    return {};
  }
  // The simulator library checks the scenario: the agent holds no simulator code. A library that
  // cannot be loaded, or has no check (a real NVML named by --nvml.library), is left to the
  // backend's start to report.
  auto sim = DynamicLibrary::open_first({library.empty() ? bundled_simulator_library("libnvidia-ml.so.1") : library});
  if (!sim) return {};
  using Check = int (*)(const char*, char*, std::size_t);
  auto check = reinterpret_cast<Check>((*sim)->symbol("gpumeter_sim_check_scenario"));
  if (check == nullptr) return {};
  char message[4096] = {};
  if (check(path.c_str(), message, sizeof message) != 0) return Error{0, message};
  return {};
}

namespace {

// The library NVML calls go to: the replay a scenario names, else the library (or the simulator)
// to load; behind the recorder when asked.
Result<std::unique_ptr<SymbolSource>> nvml_library(const NvmlSelection& selection, const NvmlBackendOptions& options,
                                                   Logger& log) {
  std::unique_ptr<SymbolSource> source;
  if (!selection.sim_scenario.empty()) {
    auto replay = transcript::replay_of_scenario(selection.sim_scenario);
    if (!replay) return replay.error();
    if (!replay->empty()) {
      auto r = transcript::replay_source(*replay);
      if (!r) return r.error();
      log.info("replaying an NVML recording", {{"scenario", selection.sim_scenario}, {"recording", *replay}});
      source = std::move(r).value();
    }
  }
  if (!source) {
    auto lib = DynamicLibrary::open_first(options.library_candidates);
    if (!lib) return std::unique_ptr<SymbolSource>();  // the backend reports the library absent
    source = std::move(lib).value();
  }
  if (selection.record) {
    auto recording = transcript::recording_source(std::move(source), *selection.record);
    if (!recording) return recording.error();
    log.info("recording every NVML call",
             {{"file", selection.record->path}, {"anonymized", selection.record->anonymize ? "true" : "false"}});
    source = std::move(recording).value();
  }
  return source;
}

}  // namespace

Result<std::unique_ptr<NvmlBackend>> create_nvml_backend(const NvmlSelection& selection, Logger& log) {
  NvmlBackendOptions nvml_options;
  if (!selection.retry_init) nvml_options.init_retry_delays.clear();
  if (!selection.sim_scenario.empty()) {
    // The simulator reads its scenario from the environment, like any NVML program would.
    setenv("GPUMETER_SIM_SCENARIO", selection.sim_scenario.c_str(), 1);
    nvml_options.library_candidates = {selection.library.empty() ? bundled_simulator_library("libnvidia-ml.so.1")
                                                                 : selection.library};
    log.info("running on the fleet simulator",
             {{"scenario", selection.sim_scenario}, {"library", nvml_options.library_candidates[0]}});
  } else if (!selection.library.empty()) {
    nvml_options.library_candidates = {selection.library};
  }
  auto library = nvml_library(selection, nvml_options, log);
  if (!library) return library.error();
  auto nvml = *library ? NvmlBackend::create(std::move(library).value(), nvml_options, log)
                       : NvmlBackend::create(nvml_options, log);
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

std::unique_ptr<RocmBackend> create_rocm_backend(const std::string& library, const std::string& sysfs, Logger& log) {
  RocmBackendOptions options;
  if (!library.empty()) options.library_candidates = {library};
  options.drm_class_dir = sysfs + "/class/drm";
  auto rocm = RocmBackend::create(options, log);
  if (rocm->status().up) {
    log.info("ROCm SMI backend up", {{"detail", rocm->status().detail}});
  } else if (rocm->status().absent) {
    log.info("ROCm SMI backend absent", {{"reason", rocm->status().detail}});
  } else {
    log.warn("ROCm SMI backend down; serving gpumeter_backend_up{backend=\"rocm_smi\"} 0",
             {{"reason", rocm->status().detail}});
  }
  return rocm;
}

Result<Config> load_agent_config(const std::string& path) {
  if (path.empty()) return Config{};
  return load_config(path);
}

HostOwnerResolverOptions owner_resolver_options(const Config& config, const std::string& procfs,
                                                const std::string& rootfs, std::chrono::milliseconds interval) {
  HostOwnerResolverOptions ro;
  ro.procfs = procfs;
  ro.rootfs = rootfs;
  ro.environment = config.attribution.environment;
  ro.hpc_job_mapping_dir = config.attribution.hpc_job_mapping_dir;
  ro.hpc_refresh = config.attribution.slurm_refresh_interval;
  ro.refresh_slack = interval / 2;
  ro.kubelet_socket = config.attribution.kubelet.effective_socket(rootfs);
  ro.kubelet.refresh_interval = config.attribution.kubelet.refresh_interval;
  ro.kubelet.timeout = config.attribution.kubelet.timeout;
  ro.kubelet.max_message_bytes = config.attribution.kubelet.max_message_size;
  ro.kubelet.resource_names = config.attribution.kubelet.resource_names;
  ro.rules = config.project.resolver;
  ro.slurm_cgroups = SlurmCgroupOptions{config.attribution.slurm_cgroup_root(rootfs), procfs, ro.environment};
  ro.allocations = effective_allocation(config, ro.kubelet_socket) == AllocationPolicy::kScheduler;
  return ro;
}

UsageTrackerOptions usage_tracker_options(const Config& config, std::chrono::milliseconds interval,
                                          const HostOwnerResolverOptions& resolver) {
  UsageTrackerOptions to;
  to.scheduler = resolver.allocations;
  to.labels = {config.ledger.labels.begin(), config.ledger.labels.end()};
  to.owner_retention = config.ledger.owner_retention;
  to.max_process_series = config.processes.max_series;
  to.process_retention = config.processes.retention;
  to.idle_power_watts = config.ledger.idle_power_watts;
  to.checkpoint_interval = config.ledger.checkpoint_interval;
  to.max_gap = std::max(std::chrono::milliseconds(10'000), 5 * interval);
  return to;
}

Result<CompatOptions> compat_options(const Config& config, const std::vector<std::string>& flag_sets,
                                     const std::string& flag_collectors) {
  CompatOptions o;
  auto add = [&](const std::string& name, const std::string& where) -> Result<void> {
    auto set = parse_compat_set(name);
    if (!set) return Error{0, where + ": " + set.error().message};
    if (!o.has(*set)) o.sets.push_back(*set);
    return {};
  };
  for (const auto& name : flag_sets) {
    if (auto ok = add(name, "--compat"); !ok) return ok.error();
  }
  for (const auto& name : config.compat.sets) {
    if (auto ok = add(name, "compat.sets"); !ok) return ok.error();
  }
  if (config.compat.hostname_set) {
    o.hostname = config.compat.hostname;
  } else if (const char* node = std::getenv("NODE_NAME"); node != nullptr && *node != '\0') {
    o.hostname = node;  // as dcgm-exporter: its DaemonSet sets NODE_NAME from spec.nodeName
  } else {
    char name[HOST_NAME_MAX + 1] = {};
    if (::gethostname(name, sizeof name - 1) == 0) o.hostname = name;
  }
  const std::string& file = flag_collectors.empty() ? config.compat.collectors : flag_collectors;
  if (!file.empty()) {
    auto counters = load_dcgm_counters(file);
    if (!counters) return counters.error();
    o.counters = std::move(counters).value();
  }
  return o;
}

CollectorSet compat_collectors(const CompatOptions& compat) {
  return compat.has(CompatSet::kDcgmExporter) ? dcgm_field_collectors(compat.counters) : CollectorSet{};
}

void log_compat(const CompatOptions& compat, const CollectorSet& enabled, Logger& log,
                const std::pair<const CompatOptions*, CollectorSet>* in_force) {
  // Said when it changes, not at every reload that keeps it.
  auto unserved_of = [](const CompatOptions& c, const CollectorSet& on) {
    return c.has(CompatSet::kDcgmExporter) ? unserved_dcgm_fields(c.counters, on) : std::vector<std::string>{};
  };
  auto switched_on = [](const CompatOptions& c, const CollectorSet& on) {
    std::string names;
    const CollectorSet wanted = compat_collectors(c);
    for (const auto& info : kCollectors) {
      if (!info.default_enabled && wanted.has(info.id) && on.has(info.id)) {
        names += (names.empty() ? "" : ",") + std::string(info.name);
      }
    }
    return names;
  };
  if (auto on = switched_on(compat, enabled);
      !on.empty() && (in_force == nullptr || on != switched_on(*in_force->first, in_force->second))) {
    log.info("collectors switched on for the dcgm-exporter counters file's fields",
             {{"counters", compat.counters.source}, {"collectors", on}});
  }
  if (auto unserved = unserved_of(compat, enabled);
      in_force == nullptr || unserved != unserved_of(*in_force->first, in_force->second)) {
    if (!unserved.empty()) {
      std::string list;
      for (const auto& f : unserved) list += (list.empty() ? "" : "; ") + f;
      log.warn("dcgm-exporter fields not served; they are left out of the exposition",
               {{"counters", compat.counters.source}, {"fields", list}});
    }
  }
  if (!compat.sets.empty() && (in_force == nullptr || in_force->first->sets != compat.sets)) {
    std::string names;
    for (CompatSet set : compat.sets) names += (names.empty() ? "" : ",") + std::string(compat_set_name(set));
    log.info("serving other exporters' names beside gpumeter's", {{"compat", names}});
  }
}

}  // namespace gpumeter::cli
