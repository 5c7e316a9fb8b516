#include "cli/collector_flags.h"

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace gpumeter::cli {

void add_collector_flags(CLI::App& cmd, CollectorSwitches& switches) {
  static constexpr std::array<std::string_view, kCollectorCount> kWhat = {
      "utilization, memory, temperature, power, energy, fan speed and power limit",
      "clocks, performance state and clock event (throttling) reasons",
      "ECC error counters and remapped rows",
      "PCIe link generation and width, replay counter and traffic counters",
      "per-link NVLink state, speed, traffic and errors (one field-values call per link: measured costly)",
      "GPM profiling activity of each GPU and MIG instance (Hopper and newer; nothing elsewhere)",
      "MIG mode, instances, their memory and processes",
      "per-process series (gpu_process_*)",
      "owner attribution and the usage ledger (gpu_allocated_seconds_total and the other ledger counters)",
      "Xid events (gpu_xid_errors_total)"};
  for (const auto& c : kCollectors) {
    const std::string name(c.name);
    const std::string what(kWhat[static_cast<size_t>(c.id)]);
    std::optional<bool>& slot = switches[c.id];
    auto* on = cmd.add_flag_callback(
        "--collector." + name, [&slot] { slot = true; },
        "Enable the " + name + " collector: " + what + (c.default_enabled ? " (on by default)" : " (off by default)"));
    auto* off = cmd.add_flag_callback(
        "--no-collector." + name, [&slot] { slot = false; }, "Disable the " + name + " collector");
    on->excludes(off);
  }
}

}  // namespace gpumeter::cli
