#include "backend/rocm/rocm_values.h"

#include <iterator>

#include "abi/rocm_smi_api.h"

namespace gpumeter::rocm {

std::vector<LabeledValue> performance_levels(int level) {
  constexpr int kCount = static_cast<int>(std::size(kRsmiPerfLevels));
  if (level < 0 || level >= kCount) return {};
  std::vector<LabeledValue> out;
  out.reserve(kCount);
  for (int i = 0; i < kCount; ++i) out.push_back({kRsmiPerfLevels[i], i == level ? 1.0 : 0.0});
  return out;
}

std::optional<PcieRates> pcie_rates(std::uint64_t first, std::uint64_t second, std::uint64_t max_payload_bytes) {
  if (max_payload_bytes == 0) return std::nullopt;
  const auto mps = static_cast<double>(max_payload_bytes);
  return PcieRates{static_cast<double>(second) * mps, static_cast<double>(first) * mps};
}

std::vector<LabeledValue> throttle_events(std::uint32_t throttle_status) {
  return {{"throttled", throttle_status != 0 ? 1.0 : 0.0}};
}

}  // namespace gpumeter::rocm
