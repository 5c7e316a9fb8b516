#include "sim/nvml/gpm_samples.h"

namespace gpumeter::sim {

nvmlGpmSample_t GpmSampleTable::allocate() {
  auto sample = std::make_unique<nvmlGpmSample_st>();
  nvmlGpmSample_t p = sample.get();
  std::lock_guard lock(mu_);
  samples_.emplace(reinterpret_cast<std::uintptr_t>(p), std::move(sample));
  return p;
}

bool GpmSampleTable::free(nvmlGpmSample_t sample) {
  std::lock_guard lock(mu_);
  return samples_.erase(reinterpret_cast<std::uintptr_t>(sample)) > 0;
}

bool GpmSampleTable::store(nvmlGpmSample_t sample, const nvmlGpmSample_st& value) {
  std::lock_guard lock(mu_);
  auto it = samples_.find(reinterpret_cast<std::uintptr_t>(sample));
  if (it == samples_.end()) return false;
  *it->second = value;
  return true;
}

std::optional<nvmlGpmSample_st> GpmSampleTable::load(nvmlGpmSample_t sample) const {
  std::lock_guard lock(mu_);
  auto it = samples_.find(reinterpret_cast<std::uintptr_t>(sample));
  if (it == samples_.end()) return std::nullopt;
  return *it->second;
}

}  // namespace gpumeter::sim
