#pragma once
// What a driver branch and a GPU architecture decide about NVML's behaviour.

#include <optional>
#include <string>
#include <string_view>

namespace gpumeter::sim {

// The branch of a driver version: 550 for "550.90.07".
std::optional<unsigned> driver_major(std::string_view version);

// First branches that have a call or a field (NVML API reference, change log).
inline constexpr unsigned kBranchPowerFields = 535;        // NVML_FI_DEV_POWER_AVERAGE/_INSTANT
inline constexpr unsigned kBranchProcessesUtilInfo = 550;  // nvmlDeviceGetProcessesUtilizationInfo
inline constexpr unsigned kBranchPcieByteFields = 555;     // NVML_FI_DEV_PCIE_COUNT_TX/RX_BYTES

inline constexpr std::string_view kArchitectures[] = {"volta", "turing", "ampere",   "ga100",
                                                      "ada",   "hopper", "blackwell"};

// The architecture a product name plainly belongs to ("NVIDIA A100-SXM4-80GB" is ga100),
// or none when the name does not say.
std::optional<std::string> architecture_from_name(std::string_view name);

// nvmlDeviceGetPowerUsage is a 1 s average "on Ampere (except GA100) or newer", and
// instantaneous before (nvml.h).
bool power_usage_is_averaged(std::string_view architecture);

}  // namespace gpumeter::sim
