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

Result<CollectionPlan> make_collection_plan(const CollectorSwitches& flags, const CollectorsConfig& config,
                                            const CollectorSet& wanted) {
  CollectionPlan plan;
  for (const auto& c : kCollectors) {
    const auto i = static_cast<size_t>(c.id);
    bool on = c.default_enabled || wanted.has(c.id);
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
  auto it = std::find_if(r.mig.instances.begin(), r.mig.instances.end(),
                         [&](const MigInstanceReading& m) { return m.uuid == uuid; });
  return it == r.mig.instances.end() ? nullptr : &*it;
}

// The device collector's values kept from `previous`, except what `fresh` read: utilization,
// power and energy are read every collection while the ledger is on.
DeviceValues carried_device(const DeviceValues& previous, const DeviceValues& fresh) {
  DeviceValues v = previous;
  if (fresh.utilization_ratio) v.utilization_ratio = fresh.utilization_ratio;
  if (fresh.memory_utilization_ratio) v.memory_utilization_ratio = fresh.memory_utilization_ratio;
  if (fresh.power_watts) v.power_watts = fresh.power_watts;
  if (fresh.energy_joules) v.energy_joules = fresh.energy_joules;
  return v;
}

}  // namespace

void carry_forward(CollectorId id, const DeviceReading& p, DeviceReading& n) {
  switch (id) {
    case CollectorId::kDevice:
      n.device = carried_device(p.device, n.device);
      break;
    case CollectorId::kClocks:
      n.clocks = p.clocks;
      break;
    case CollectorId::kEcc:
      n.ecc = p.ecc;
      break;
    case CollectorId::kPcie:
      n.pcie = p.pcie;
      break;
    case CollectorId::kNvlink:
      n.nvlinks = p.nvlinks;
      break;
    case CollectorId::kProfiling:
      n.profiling = p.profiling;
      n.profiling_supported = p.profiling_supported;
      // The MIG devices' GPM is read for the ledger anyway: keep what was read.
      for (auto& m : n.mig.instances) {
        if (const MigInstanceReading* old = find_instance(p, m.uuid); old != nullptr && !m.profiling) {
          m.profiling = old->profiling;
        }
      }
      break;
    case CollectorId::kMig:
      if (!n.mig.enabled) n.mig = p.mig;  // read anyway, for the ledger: keep what was read
      break;
    default:
      break;
  }
}

void clear_collector(CollectorId id, DeviceReading& r) {
  switch (id) {
    case CollectorId::kDevice:
      r.device = {};
      break;
    case CollectorId::kClocks:
      r.clocks = {};
      break;
    case CollectorId::kEcc:
      r.ecc = {};
      break;
    case CollectorId::kPcie:
      r.pcie = {};
      break;
    case CollectorId::kNvlink:
      r.nvlinks.clear();
      break;
    case CollectorId::kProfiling:
      r.profiling.reset();
      r.profiling_supported.reset();
      for (auto& m : r.mig.instances) m.profiling.reset();  // read for the ledger, not exported
      break;
    case CollectorId::kMig:
      r.mig = {};
      break;
    default:
      break;
  }
}

}  // namespace gpumeter
