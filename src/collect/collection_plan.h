#pragma once
// Which collectors run and how often: the switches of the command line (`--collector.<name>`,
// `--no-collector.<name>`) over the config file's `collectors:` section over the defaults, and
// the values a collection that skipped a collector (not due yet) carries over from the last one.

#include <array>
#include <chrono>
#include <optional>
#include <string>

#include "model/collectors.h"
#include "model/reading.h"
#include "util/result.h"

namespace gpumeter {

// The command line's switches: unset where neither flag was given.
struct CollectorSwitches {
  std::array<std::optional<bool>, kCollectorCount> on{};
  std::optional<bool>& operator[](CollectorId id) { return on[static_cast<size_t>(id)]; }
  const std::optional<bool>& operator[](CollectorId id) const { return on[static_cast<size_t>(id)]; }
};

// The config file's `collectors.<name>` entries.
struct CollectorSettings {
  std::optional<bool> enabled;            // unset: the flag's or the default
  std::chrono::milliseconds interval{0};  // device collectors: at most this often; 0: every collection
  bool operator==(const CollectorSettings&) const = default;
};
using CollectorsConfig = std::array<CollectorSettings, kCollectorCount>;

struct CollectionPlan {
  CollectorSet enabled = CollectorSet::all();
  std::array<std::chrono::milliseconds, kCollectorCount> interval{};
  bool has(CollectorId id) const { return enabled.has(id); }
  std::chrono::milliseconds interval_of(CollectorId id) const { return interval[static_cast<size_t>(id)]; }
  // "device,clocks,...": the enabled collectors, in kCollectors order.
  std::string enabled_names() const;
  bool operator==(const CollectionPlan&) const = default;
};

// A flag wins over the config, the config over the default. `wanted` are collectors something
// else needs (the fields of dcgm-exporter's counters file): on unless a flag or the config
// switches them off. Refused: the ledger on without the device collector, whose utilization,
// power and energy it bills from.
Result<CollectionPlan> make_collection_plan(const CollectorSwitches& flags, const CollectorsConfig& config,
                                            const CollectorSet& wanted = {});

// Copies what collector `id` reads from `previous` into `next`, for a collection that did not
// read it (its interval had not passed).
void carry_forward(CollectorId id, const DeviceReading& previous, DeviceReading& next);

// Removes what collector `id` reads from `reading`: a switched-off collector exports nothing,
// whatever a backend read beyond what it was asked for.
void clear_collector(CollectorId id, DeviceReading& reading);

}  // namespace gpumeter
