#pragma once
// The agent's config file (`gpumeter serve --config.file`): owner attribution, project
// rules, the usage ledger and per-process series. Every key is optional; docs/configuration.md
// documents each one and deploy/config/gpumeter.yaml is a commented example.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "attribution/project_rules.h"
#include "collect/collection_plan.h"
#include "util/result.h"

namespace gpumeter {

struct KubeletConfig {
  enum class Mode { kAuto, kOff, kPath };
  Mode mode = Mode::kAuto;
  std::string socket;  // the path when mode is kPath
  std::chrono::milliseconds refresh_interval{10'000};
  std::chrono::milliseconds timeout{5'000};
  std::uint64_t max_message_size = 16ULL << 20;
  std::vector<std::string> resource_names = {"nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-*",
                                             "amd.com/gpu"};

  // The socket to dial, or "" when the kubelet is not used: kPath gives `socket`; kAuto gives
  // <rootfs>/var/lib/kubelet/pod-resources/kubelet.sock when that exists.
  std::string effective_socket(std::string_view rootfs) const;
};

inline constexpr std::string_view kDefaultKubeletSocket = "var/lib/kubelet/pod-resources/kubelet.sock";

struct AttributionConfig {
  std::vector<std::string> environment;  // allow-listed variable names
  std::string hpc_job_mapping_dir;       // "" when off
  KubeletConfig kubelet;
  // Slurm jobs' cgroups as a scheduler source: "" when off, "auto" for <rootfs>/sys/fs/cgroup,
  // else the cgroup mount to read.
  std::string slurm_cgroups;
  // The Slurm jobs' cgroups are read again this often, and the HPC job mapping at least this
  // often (it is read at once when its directory changes).
  std::chrono::milliseconds slurm_refresh_interval{10'000};

  // The cgroup root to read Slurm jobs from, "" when off.
  std::string slurm_cgroup_root(std::string_view rootfs) const;
};

struct ProjectConfig {
  std::vector<ProjectRuleSpec> rules;  // as written, for display
  std::string default_project;
  ProjectResolver resolver;  // ready to use
};

// Who a GPU's time is billed to (docs/ledger.md): kScheduler, the owners the scheduler allocated
// it to, with or without a process; kProcess, the owners of the processes on it. kAuto is
// kScheduler when a scheduler source (the kubelet, the HPC job mapping) is configured.
enum class AllocationPolicy { kAuto, kScheduler, kProcess };

struct LedgerConfig {
  AllocationPolicy allocation = AllocationPolicy::kAuto;
  std::chrono::milliseconds checkpoint_interval{5'000};
  // Owner labels kept on ledger series, always in kOwnerLabelNames order.
  std::vector<std::string> labels = {"project", "user", "namespace", "pod", "container", "hpc_job"};
  std::chrono::milliseconds owner_retention{24 * 3'600'000};
  std::map<std::string, double> idle_power_watts;  // NVML model name -> watts

  bool keeps_label(std::string_view name) const;
};

struct ProcessesConfig {
  unsigned max_series = 256;  // 0 disables per-process metrics
  std::chrono::milliseconds retention{5 * 60'000};
};

// The exposition's own bounds (render/series_cap.h).
struct ExpositionConfig {
  std::size_t max_series = 0;  // 0: no cap
};

// Other exporters' schemas served beside gpumeter's own (render/compat.h, docs/migrating.md).
struct CompatConfig {
  std::vector<std::string> sets;  // compat set names, each valid and listed once
  std::string collectors;         // dcgm-exporter counters file; "" for its default list
  bool hostname_set = false;      // hostname was given; otherwise the host's name is used
  std::string hostname;           // dcgm-exporter's Hostname label; "" leaves it out
};

struct Config {
  AttributionConfig attribution;
  ProjectConfig project;
  LedgerConfig ledger;
  ProcessesConfig processes;
  ExpositionConfig exposition;
  CompatConfig compat;
  // `collectors.<name>.enabled` and `.interval` (docs/configuration.md#collectors).
  CollectorsConfig collectors{};
};

// The policy in force: kAuto resolved against the sources that are on (`kubelet_socket` is the
// effective socket, "" when off).
AllocationPolicy effective_allocation(const Config& config, std::string_view kubelet_socket);
std::string_view to_string(AllocationPolicy policy);  // "auto", "scheduler", "process"

// Errors read "source:line:col: path.to.field: what is wrong".
Result<Config> parse_config(std::string_view yaml, std::string source_name);
Result<Config> load_config(const std::string& path);
// The file load_config parses: a regular file of at most 1 MiB (util/file_read.h); a reload
// reads it the same way.
Result<std::string> read_config_file(const std::string& path);

}  // namespace gpumeter
