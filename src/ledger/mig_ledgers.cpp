#include "ledger/mig_ledgers.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

namespace gpumeter {

MigPowerSplit split_mig_power(double power_w, double idle_w, const std::vector<MigUnitTick>& units,
                              double free_weight) {
  MigPowerSplit out;
  const double power = std::max(0.0, power_w);
  const double idle = std::clamp(idle_w, 0.0, power);
  const double dynamic = power - idle;
  double active = 0;  // Σ w_k U_k
  for (const auto& u : units) active += u.weight * std::clamp(u.activity.value_or(0.0), 0.0, 1.0);
  for (const auto& u : units) {
    const double a = u.weight * std::clamp(u.activity.value_or(0.0), 0.0, 1.0);
    out.unit_watts.push_back(idle * u.weight + (active > 0 ? dynamic * a / active : dynamic * u.weight));
  }
  out.free_watts = idle * free_weight + (active > 0 ? 0.0 : dynamic * free_weight);
  return out;
}

AdvanceResult MigLedgers::advance(GpuLedger& gpu, const MigRound& round, const GpuLedgerOptions& options) {
  if (last_wall_us_) *last_wall_us_ += round.clock_step_us;
  double used = 0;
  for (const auto& u : round.units) used += u.weight;
  const double free = std::max(0.0, 1.0 - used);
  const std::optional<double> power = average_power(round);
  const MigPowerSplit split = split_mig_power(power.value_or(0.0), options.idle_power_watts, round.units, free);
  const AdvanceResult result =
      advance_free(gpu, round, options, free, power ? std::optional(split.free_watts) : std::nullopt);
  for (auto& entry : units_) {
    const std::string& uuid = entry.first;
    const bool listed = std::any_of(round.units.begin(), round.units.end(),
                                    [&](const MigUnitTick& u) { return u.labels.mig_uuid == uuid; });
    if (!listed) entry.second.ledger.rebase(round.clock_step_us);  // destroyed, or not read this round
  }
  for (std::size_t k = 0; k < round.units.size(); ++k) {
    advance_unit(round.units[k], round, options, power ? std::optional(split.unit_watts[k]) : std::nullopt);
  }
  last_wall_us_ = round.wall_us;
  last_energy_ = round.energy_joules;
  return result;
}

std::optional<double> MigLedgers::average_power(const MigRound& round) const {
  // The GPU's average power since the last round: its energy counter's increase where it has
  // one (a counter that went back was reset), else the polled power.
  std::optional<double> power = round.power_watts;
  if (last_wall_us_ && round.wall_us > *last_wall_us_ && round.energy_joules && last_energy_ &&
      *round.energy_joules >= *last_energy_) {
    power = (*round.energy_joules - *last_energy_) / (static_cast<double>(round.wall_us - *last_wall_us_) / 1e6);
  }
  return power;
}

AdvanceResult MigLedgers::advance_free(GpuLedger& gpu, const MigRound& round, const GpuLedgerOptions& options,
                                       double free, std::optional<double> watts) {
  GpuLedgerOptions own = options;
  own.idle_power_watts = options.idle_power_watts * free;
  gpu.set_options(own);
  LedgerTick tick;
  tick.wall_us = round.wall_us;
  tick.clock_step_us = round.clock_step_us;
  tick.power_watts = watts;
  tick.weight = free;
  tick.faults = round.faults;
  if (round.scheduler) tick.allocation = AllocationState{{}, round.wall_us};
  return gpu.advance(tick);
}

void MigLedgers::advance_unit(const MigUnitTick& u, const MigRound& round, const GpuLedgerOptions& options,
                              std::optional<double> watts) {
  GpuLedgerOptions unit_options = options;
  unit_options.idle_power_watts = options.idle_power_watts * u.weight;
  auto [it, created] = units_.try_emplace(u.labels.mig_uuid);
  Unit& unit = it->second;
  unit.labels = u.labels;
  unit.weight = u.weight;
  LedgerTick t;
  t.wall_us = round.wall_us;
  t.weight = u.weight;
  if (created) {
    // Created since the last round: billed from it on, so that the instances and the free
    // slices cover the same time (what it did not use of it is its own __idle__).
    unit.ledger = GpuLedger(unit_options);
    if (last_wall_us_) {
      LedgerTick start;
      start.wall_us = *last_wall_us_;
      start.weight = u.weight;
      unit.ledger.advance(start);
    }
  } else {
    t.clock_step_us = round.clock_step_us;
  }
  unit.ledger.set_options(unit_options);
  t.processes = u.processes;
  t.utilization_ratio = u.activity;
  t.power_watts = watts;
  t.allocation = u.allocation;
  t.faults = round.faults;
  unit.ledger.advance(t);
}

void MigLedgers::interrupt() {
  for (auto& [uuid, unit] : units_) unit.ledger.interrupt();
}

void MigLedgers::leave() {
  last_wall_us_.reset();
  last_energy_.reset();
}

void MigLedgers::rebase(std::int64_t step_us) {
  for (auto& [uuid, unit] : units_) unit.ledger.rebase(step_us);
  if (last_wall_us_) *last_wall_us_ += step_us;
}

std::size_t MigLedgers::prune(std::int64_t before_wall_us) {
  std::size_t pruned = 0;
  for (auto it = units_.begin(); it != units_.end();) {
    pruned += it->second.ledger.prune(before_wall_us);
    it = it->second.ledger.owners().empty() ? units_.erase(it) : std::next(it);
  }
  return pruned;
}

void MigLedgers::append(GpuLedgerSnapshot& out) const {
  for (const auto& [uuid, unit] : units_) {
    out.covered_seconds += unit.ledger.covered_seconds();
    out.gap_seconds += unit.ledger.gap_seconds();
    out.foreign_seconds += unit.ledger.foreign_seconds();
    for (const auto& [owner, t] : unit.ledger.owners()) {
      out.owners.push_back(ledger_entry(owner, t, unit.labels));
    }
  }
}

nlohmann::json MigLedgers::to_json() const {
  nlohmann::json units = nlohmann::json::array();
  for (const auto& [uuid, unit] : units_) {
    units.push_back({{"mig_uuid", unit.labels.mig_uuid},
                     {"gpu_instance", unit.labels.gpu_instance},
                     {"compute_instance", unit.labels.compute_instance},
                     {"mig_profile", unit.labels.mig_profile},
                     {"weight", unit.weight},
                     {"ledger", unit.ledger.to_json()}});
  }
  return units;
}

Result<MigLedgers> MigLedgers::from_json(const nlohmann::json& j, const GpuLedgerOptions& options,
                                         std::vector<std::string>* dropped) {
  if (!j.is_array()) return Error{1, "\"mig\" is not a list"};
  MigLedgers out;
  for (const auto& e : j) {
    if (!e.is_object()) return Error{1, "a MIG device's ledger is not an object"};
    Unit unit;
    for (auto [key, field] :
         {std::pair{"mig_uuid", &unit.labels.mig_uuid}, std::pair{"gpu_instance", &unit.labels.gpu_instance},
          std::pair{"compute_instance", &unit.labels.compute_instance},
          std::pair{"mig_profile", &unit.labels.mig_profile}}) {
      auto it = e.find(key);
      if (it == e.end() || !it->is_string())
        return Error{1, std::string("a MIG device's ledger has no \"") + key + "\""};
      *field = it->get<std::string>();
    }
    auto w = e.find("weight");
    if (w == e.end() || !w->is_number() || !std::isfinite(w->get<double>()) || w->get<double>() < 0 ||
        w->get<double>() > 1) {
      return Error{1, "MIG device " + unit.labels.mig_uuid + ": \"weight\" is not a number in [0, 1]"};
    }
    unit.weight = w->get<double>();
    auto l = e.find("ledger");
    if (l == e.end()) return Error{1, "MIG device " + unit.labels.mig_uuid + ": no \"ledger\""};
    std::vector<std::string> unit_dropped;
    auto ledger = GpuLedger::from_json(*l, options, &unit_dropped);
    if (!ledger) return Error{1, "MIG device " + unit.labels.mig_uuid + ": " + ledger.error().message};
    if (dropped != nullptr) {
      for (const auto& d : unit_dropped) dropped->push_back("MIG device " + unit.labels.mig_uuid + ": " + d);
    }
    unit.ledger = std::move(ledger).value();
    if (unit.labels.mig_uuid.empty() || !out.units_.emplace(unit.labels.mig_uuid, std::move(unit)).second) {
      return Error{1, "a MIG device's ledger has an empty or repeated \"mig_uuid\""};
    }
  }
  return out;
}

}  // namespace gpumeter
