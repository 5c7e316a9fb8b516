#pragma once
// How the AMD backend turns what ROCm SMI answers into DeviceReading values, as pure functions
// (docs/rocm-behaviour.md has the sources).

#include <cstdint>
#include <optional>
#include <vector>

#include "model/reading.h"

namespace gpumeter::rocm {

// gpu_performance_level: one entry per rsmi_dev_perf_level_t 0..8, 1 on `level`; empty for
// RSMI_DEV_PERF_LEVEL_UNKNOWN or a value this build does not know.
std::vector<LabeledValue> performance_levels(int level);

// PCIe throughput from rsmi_dev_pci_throughput_get's three numbers, which are pcie_bw's: the
// messages counted over one second by the two PCIe performance counters and the maximum payload
// size. The kernel's first counter counts received messages and its second posted requests sent
// (amdgpu's *_get_pcie_usage), although ROCm SMI names them `sent` and `received`. Bytes are the
// documented estimate: messages x maximum payload size, an upper bound. Unset when the payload
// size is 0 (a reading that says nothing).
struct PcieRates {
  double transmit_bytes_per_second = 0;
  double receive_bytes_per_second = 0;
  bool operator==(const PcieRates&) const = default;
};
std::optional<PcieRates> pcie_rates(std::uint64_t first, std::uint64_t second, std::uint64_t max_payload_bytes);

// gpu_clock_event_active from gpu_metrics' throttle_status. Up to content revision 3, which is
// all ROCm SMI 5.x returns, it is the ASIC's own firmware mask of active throttlers, whose bits
// mean different things on different ASICs (the kernel added the ASIC-independent
// indep_throttle_status in gpu_metrics_v1_3 for this reason). What holds on every ASIC is
// "non-zero: a throttler holds the clocks down": one series, reason "throttled".
std::vector<LabeledValue> throttle_events(std::uint32_t throttle_status);

}  // namespace gpumeter::rocm
