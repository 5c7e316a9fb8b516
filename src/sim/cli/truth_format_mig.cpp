#include "sim/cli/truth_format_mig.h"

#include <fmt/format.h>

namespace gpumeter::sim {

nlohmann::ordered_json mig_truth_to_json(const MigTruth& truth) {
  nlohmann::ordered_json gpus = nlohmann::ordered_json::array();
  for (const MigGpuTruth& g : truth.gpus) {
    nlohmann::ordered_json j;
    j["gpu"] = g.gpu;
    j["uuid"] = g.uuid;
    j["slices"] = g.slices;
    j["slice_seconds"] = g.slice_seconds;
    j["unallocated_slice_seconds"] = g.unallocated_slice_seconds;
    j["energy_joules"] = g.energy_joules;
    j["unallocated_energy_joules"] = g.unallocated_energy_joules;
    gpus.push_back(std::move(j));
  }
  nlohmann::ordered_json instances = nlohmann::ordered_json::array();
  for (const MigInstanceTruth& m : truth.instances) {
    nlohmann::ordered_json j;
    j["name"] = m.name;
    j["mig_uuid"] = m.uuid;
    j["gpu"] = m.gpu;
    j["uuid"] = m.gpu_uuid;
    j["gpu_instance"] = m.gpu_instance_id;
    j["compute_instance"] = m.compute_instance_id;
    j["profile"] = m.profile;
    j["slices"] = m.slices;
    j["start"] = to_seconds(m.start);
    j["end"] = to_seconds(m.end);
    j["seconds"] = m.seconds;
    j["slice_seconds"] = m.slice_seconds;
    j["allocated_seconds"] = m.allocated_seconds;
    j["idle_seconds"] = m.idle_seconds;
    j["busy_seconds"] = m.busy_seconds;
    j["sm_active_seconds"] = m.sm_active_seconds;
    j["memory_byte_seconds"] = m.memory_byte_seconds;
    j["energy_joules"] = m.energy_joules;
    j["idle_energy_joules"] = m.idle_energy_joules;
    nlohmann::ordered_json owners = nlohmann::ordered_json::array();
    for (const MigOwnerTruth& o : m.owners) {
      nlohmann::ordered_json oj;
      oj["owner"] = o.name;
      oj["kind"] = o.is_allocation ? "allocation" : "job";
      oj["allocated_seconds"] = o.allocated_seconds;
      oj["busy_seconds"] = o.busy_seconds;
      oj["sm_active_seconds"] = o.sm_active_seconds;
      oj["memory_byte_seconds"] = o.memory_byte_seconds;
      oj["energy_joules"] = o.energy_joules;
      owners.push_back(std::move(oj));
    }
    j["owners"] = std::move(owners);
    if (m.gpm_supported) {
      const ProfileAverages& p = m.profiling;
      j["profiling"] = {{"graphics_util_percent", p.graphics}, {"sm_util_percent", p.sm},
                        {"sm_occupancy_percent", p.occupancy}, {"tensor_util_percent", p.tensor},
                        {"dram_bw_util_percent", p.dram},      {"fp64_util_percent", p.fp64},
                        {"fp32_util_percent", p.fp32},         {"fp16_util_percent", p.fp16}};
    }
    instances.push_back(std::move(j));
  }
  nlohmann::ordered_json out;
  out["gpus"] = std::move(gpus);
  out["instances"] = std::move(instances);
  return out;
}

std::string mig_truth_to_table(const MigTruth& truth) {
  std::string out = "\nMIG instances\n";
  out += fmt::format("{:<16} {:>3} {:>3} {:<8} {:>9} {:>9} {:>9} {:>11}  {}\n", "instance", "gpu", "gi", "profile",
                     "seconds", "alloc_s", "busy_s", "energy_J", "mig_uuid");
  for (const MigInstanceTruth& m : truth.instances) {
    out += fmt::format("{:<16} {:>3} {:>3} {:<8} {:>9.3f} {:>9.3f} {:>9.3f} {:>11.3f}  {}\n", m.name, m.gpu,
                       m.gpu_instance_id, m.profile, m.seconds, m.allocated_seconds, m.busy_seconds, m.energy_joules,
                       m.uuid);
    for (const MigOwnerTruth& o : m.owners) {
      out += fmt::format("  {:<24} {:>9.3f} {:>9.3f} {:>11.3f}\n", o.name, o.allocated_seconds, o.busy_seconds,
                         o.energy_joules);
    }
  }
  for (const MigGpuTruth& g : truth.gpus) {
    out += fmt::format("GPU {}: {:.3f} slice-seconds, {:.3f} unallocated\n", g.gpu, g.slice_seconds,
                       g.unallocated_slice_seconds);
  }
  return out;
}

}  // namespace gpumeter::sim
