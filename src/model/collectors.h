#pragma once
// The agent's collectors: the groups of work `--collector.<name>` and `--no-collector.<name>`
// switch on and off, as node_exporter's collectors are. Device collectors are groups of driver
// queries on each GPU; the others run beside them. docs/configuration.md#collectors says what
// each one reads and why its default is what it is.

#include <array>
#include <bitset>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string_view>

namespace gpumeter {

enum class CollectorId : unsigned {
  kDevice,     // utilization, memory, temperature, power, energy, fan, power limit
  kClocks,     // clocks, performance state, clock event (throttle) reasons
  kEcc,        // ECC error counters and remapped rows
  kPcie,       // PCIe link, replay counter, traffic counters
  kNvlink,     // per-link state, speed, traffic and errors
  kProfiling,  // GPM activity of the GPU and of its MIG instances
  kMig,        // MIG mode and instances
  kProcesses,  // per-process series
  kLedger,     // owner attribution and the usage ledger
  kEvents,     // Xid events
};
inline constexpr std::size_t kCollectorCount = 10;

struct CollectorInfo {
  CollectorId id;
  std::string_view name;
  bool default_enabled;
  bool per_device;  // a group of driver queries made on each GPU's worker
};

// In the order they are listed in --help and the docs.
inline constexpr std::array<CollectorInfo, kCollectorCount> kCollectors = {{
    {CollectorId::kDevice, "device", true, true},
    {CollectorId::kClocks, "clocks", true, true},
    {CollectorId::kEcc, "ecc", true, true},
    {CollectorId::kPcie, "pcie", true, true},
    // NVLink's per-link calls were measured costly (docs/benchmarks.md): off unless asked for.
    {CollectorId::kNvlink, "nvlink", false, true},
    // GPM's SM and tensor activity are what users mean by utilization, and dcgm-exporter's
    // defaults export them; a GPU without GPM costs one call and exports nothing.
    {CollectorId::kProfiling, "profiling", true, true},
    {CollectorId::kMig, "mig", true, true},
    {CollectorId::kProcesses, "processes", true, false},
    {CollectorId::kLedger, "ledger", true, false},
    {CollectorId::kEvents, "events", true, false},
}};

constexpr const CollectorInfo& collector_info(CollectorId id) { return kCollectors[static_cast<std::size_t>(id)]; }
constexpr std::string_view collector_name(CollectorId id) { return collector_info(id).name; }

constexpr std::optional<CollectorId> parse_collector_name(std::string_view name) {
  for (const auto& c : kCollectors) {
    if (c.name == name) return c.id;
  }
  return std::nullopt;
}

// A set of collectors, e.g. those enabled, or the device groups one collection reads.
class CollectorSet {
 public:
  static CollectorSet all() {
    CollectorSet s;
    s.bits_.set();
    return s;
  }
  static CollectorSet defaults() {
    CollectorSet s;
    for (const auto& c : kCollectors) s.set(c.id, c.default_enabled);
    return s;
  }
  bool has(CollectorId id) const { return bits_.test(static_cast<std::size_t>(id)); }
  CollectorSet& set(CollectorId id, bool on = true) {
    bits_.set(static_cast<std::size_t>(id), on);
    return *this;
  }
  bool operator==(const CollectorSet&) const = default;

 private:
  std::bitset<kCollectorCount> bits_;
};

// One device collector's part of a collection, as node_exporter reports each collector's scrape.
struct CollectorRun {
  CollectorId collector = CollectorId::kDevice;
  bool success = false;
  double duration_seconds = 0;
  bool operator==(const CollectorRun&) const = default;
};

// Runs `read`, one collector's part of a collection, and times it; `read` returns whether the
// part succeeded.
template <typename Read>
CollectorRun timed_run(CollectorId id, Read&& read) {
  const auto begin = std::chrono::steady_clock::now();
  const bool success = read();
  return {id, success, std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count()};
}

}  // namespace gpumeter
