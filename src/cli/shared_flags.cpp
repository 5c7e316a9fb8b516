#include "cli/shared_flags.h"

namespace gpumeter::cli {

void add_source_flags(CLI::App& cmd, SourceFlags f, const std::string& scenario_help) {
  cmd.add_option("--nvml.library", f.nvml_library,
                 "Path of the NVML library to load (default: libnvidia-ml.so.1, then libnvidia-ml.so, from "
                 "the dynamic linker's search path)");
  cmd.add_option("--sim.scenario", f.sim_scenario,
                 "Use the fleet simulator playing this scenario file instead of real GPUs (loads the bundled "
                 "simulator library unless --nvml.library is given)" +
                     scenario_help)
      ->check(CLI::ExistingFile);
  cmd.add_option("--path.procfs", f.procfs,
                 "procfs mountpoint: /proc/<pid>/cgroup, status and environ of GPU processes name their owners")
      ->capture_default_str();
  cmd.add_option("--path.rootfs", f.rootfs,
                 "Where the host's root file system is (\"/host\" in a container): etc/passwd for user names, "
                 "the kubelet's pod-resources socket")
      ->capture_default_str();
}

}  // namespace gpumeter::cli
