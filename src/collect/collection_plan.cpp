#include "collect/collection_plan.h"

#include <algorithm>

namespace gpumeter {

std::string CollectionPlan::enabled_names() const {
  std::string names;
  for (const auto& c : kCollectors) {
    if (!enabled.has(c.id)) continue;
    if (!names.empty()) names += ',';
    names += c.name;
  }
  return names;
}

Result<CollectionPlan> make_collection_plan(const CollectorSwitches& flags, const CollectorsConfig& config) {
  CollectionPlan plan;
  for (const auto& c : kCollectors) {
    const auto i = static_cast<size_t>(c.id);
    bool on = c.default_enabled;
    if (config[i].enabled) on = *config[i].enabled;
    if (flags.on[i]) on = *flags.on[i];
    plan.enabled.set(c.id, on);
    plan.interval[i] = config[i].interval;
  }
  if (plan.has(CollectorId::kLedger) && !plan.has(CollectorId::kDevice)) {
    return Error{0,
                 "the ledger bills from the device collector's utilization, power and energy: switching the "
                 "device collector off needs the ledger off too (--no-collector.ledger or collectors.ledger.enabled: "
                 "false)"};
  }
  return plan;
}

namespace {

const MigInstanceReading* find_instance(const DeviceReading& r, const std::string& uuid) {
  auto it = std::find_if(r.mig_instances.begin(), r.mig_instances.end(),
                         [&](const MigInstanceReading& m) { return m.uuid == uuid; });
  return it == r.mig_instances.end() ? nullptr : &*it;
}

}  // namespace

void carry_forward(CollectorId id, const DeviceReading& p, DeviceReading& n) {
  switch (id) {
    case CollectorId::kDevice:
      // Utilization, power and energy are read every collection while the ledger is on: keep
      // what was read.
      if (!n.utilization_ratio) n.utilization_ratio = p.utilization_ratio;
      if (!n.memory_utilization_ratio) n.memory_utilization_ratio = p.memory_utilization_ratio;
      if (!n.power_watts) n.power_watts = p.power_watts;
      if (!n.energy_joules) n.energy_joules = p.energy_joules;
      n.memory_total_bytes = p.memory_total_bytes;
      n.memory_used_bytes = p.memory_used_bytes;
      n.memory_free_bytes = p.memory_free_bytes;
      n.temperature_celsius = p.temperature_celsius;
      n.power_limit_watts = p.power_limit_watts;
      n.fan_speed_ratio = p.fan_speed_ratio;
      break;
    case CollectorId::kClocks:
      n.clock_hertz = p.clock_hertz;
      n.performance_state = p.performance_state;
      n.clock_event_active = p.clock_event_active;
      n.performance_level = p.performance_level;
      break;
    case CollectorId::kEcc:
      n.ecc_errors = p.ecc_errors;
      n.ecc_block_errors = p.ecc_block_errors;
      n.remapped_rows = p.remapped_rows;
      break;
    case CollectorId::kPcie:
      n.pcie_link_generation = p.pcie_link_generation;
      n.pcie_link_width = p.pcie_link_width;
      n.pcie_replay_errors = p.pcie_replay_errors;
      n.pcie_transmit_bytes = p.pcie_transmit_bytes;
      n.pcie_receive_bytes = p.pcie_receive_bytes;
      n.pcie_transmit_bytes_per_second = p.pcie_transmit_bytes_per_second;
      n.pcie_receive_bytes_per_second = p.pcie_receive_bytes_per_second;
      break;
    case CollectorId::kNvlink:
      n.nvlinks = p.nvlinks;
      break;
    case CollectorId::kProfiling:
      n.profiling = p.profiling;
      for (auto& m : n.mig_instances) {
        if (const MigInstanceReading* old = find_instance(p, m.uuid); old != nullptr && !m.profiling) {
          m.profiling = old->profiling;
        }
      }
      break;
    case CollectorId::kMig:
      if (n.mig_enabled) break;  // read anyway, for the ledger
      n.mig_enabled = p.mig_enabled;
      n.mig_slices = p.mig_slices;
      n.mig_instances = p.mig_instances;
      break;
    default:
      break;
  }
}

void clear_collector(CollectorId id, DeviceReading& r) {
  if (id == CollectorId::kDevice) {
    r.utilization_ratio.reset();
    r.memory_utilization_ratio.reset();
    r.power_watts.reset();
    r.energy_joules.reset();
  }
  if (id == CollectorId::kProfiling) {  // the MIG devices' GPM is read for the ledger anyway
    r.profiling.reset();
    for (auto& m : r.mig_instances) m.profiling.reset();
    return;
  }
  if (id == CollectorId::kMig) {
    r.mig_enabled.reset();
    r.mig_slices.reset();
    r.mig_instances.clear();
    return;
  }
  carry_forward(id, DeviceReading{}, r);
}

}  // namespace gpumeter
