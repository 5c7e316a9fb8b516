#include "ledger/gpu_ledgers.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace gpumeter {

void GpuLedgers::reset(const GpuLedgerOptions& options) {
  ledger_ = GpuLedger(options);
  mig_ = MigLedgers();
}

Result<void> GpuLedgers::restore(const nlohmann::json& entry, const GpuLedgerOptions& options) {
  auto restored = GpuLedger::from_json(entry["ledger"], options);
  auto mig = entry.contains("mig") ? MigLedgers::from_json(entry["mig"], options) : Result<MigLedgers>(MigLedgers());
  if (!restored) return restored.error();
  if (!mig) return mig.error();
  ledger_ = std::move(restored).value();
  mig_ = std::move(mig).value();
  return {};
}

AdvanceResult GpuLedgers::advance(const LedgerTick& tick, const std::optional<MigRound>& mig,
                                  const GpuLedgerOptions& options) {
  ledger_.set_options(options);
  if (mig) return mig_.advance(ledger_, *mig, options);
  mig_.leave();
  return ledger_.advance(tick);
}

void GpuLedgers::interrupt() {
  ledger_.interrupt();
  mig_.interrupt();
}

std::size_t GpuLedgers::prune(std::int64_t before_wall_us) {
  return ledger_.prune(before_wall_us) + mig_.prune(before_wall_us);
}

std::shared_ptr<const GpuLedgerSnapshot> GpuLedgers::snapshot(bool scheduler) const {
  auto ls = std::make_shared<GpuLedgerSnapshot>();
  ls->scheduler = scheduler;
  ls->idle_power = ledger_.options().idle_power_watts > 0;
  ls->covered_seconds = ledger_.covered_seconds();
  ls->gap_seconds = ledger_.gap_seconds();
  ls->foreign_seconds = ledger_.foreign_seconds();
  for (const auto& [owner, t] : ledger_.owners()) {
    ls->owners.push_back(ledger_entry(owner, t));
  }
  mig_.append(*ls);
  return ls;
}

void GpuLedgers::save(nlohmann::json& entry) const {
  entry["ledger"] = ledger_.to_json();
  if (!mig_.empty()) entry["mig"] = mig_.to_json();
}

LedgerTick ledger_tick(const DeviceReading& reading, std::int64_t wall_us, std::vector<LedgerProcess> processes,
                       std::optional<AllocationState> allocation) {
  LedgerTick tick;
  tick.wall_us = wall_us;
  tick.processes = std::move(processes);
  tick.utilization_samples_supported = reading.usage.utilization_samples_supported;
  tick.utilization_samples = reading.usage.utilization_samples;
  tick.power_samples_supported = reading.usage.power_samples_supported;
  tick.power_samples = reading.usage.power_samples;
  tick.process_samples_supported = reading.usage.process_samples_supported;
  tick.process_samples = reading.usage.process_samples;
  tick.process_samples_asked_us = reading.usage.process_samples_asked_us;
  tick.utilization_ratio = reading.device.utilization_ratio;
  tick.power_watts = reading.device.power_watts;
  tick.energy_joules = reading.device.energy_joules;
  tick.clock_step_us = reading.usage.clock_step_us;
  tick.allocation = std::move(allocation);
  return tick;
}

MigRound mig_round(const DeviceReading& reading, std::int64_t wall_us, bool scheduler) {
  MigRound round;
  round.wall_us = wall_us;
  round.clock_step_us = reading.usage.clock_step_us;
  round.energy_joules = reading.device.energy_joules;
  round.power_watts = reading.device.power_watts;
  round.scheduler = scheduler;
  return round;
}

DeviceIdentity mig_unit_identity(const DeviceIdentity& gpu, const std::string& mig_uuid) {
  DeviceIdentity unit = gpu;
  unit.uuid = mig_uuid;
  unit.parent_uuid = gpu.uuid;
  unit.device_minor.reset();  // the parent's: it names the whole GPU
  return unit;
}

MigUnitTick mig_unit_tick(const MigInstanceReading& m, double gpu_slices) {
  MigUnitTick t;
  t.labels = {m.uuid, std::to_string(m.gpu_instance), std::to_string(m.compute_instance), m.profile};
  const unsigned slices = m.compute_slices > 0 ? m.compute_slices : m.slices;
  t.weight = gpu_slices > 0 ? std::min(1.0, slices / gpu_slices) : 0.0;
  if (m.profiling) t.activity = m.profiling->sm_active_ratio;
  return t;
}

}  // namespace gpumeter
