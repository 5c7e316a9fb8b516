#pragma once
// An immutable picture of the node at one moment. Collection workers produce it, the
// renderer and the landing page read it; scrapes never see anything else.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace gpumeter {

struct GpuSnapshot {
  DeviceIdentity identity;             // identity.index is the gpu label
  bool up = false;                     // last collection succeeded and is not overdue
  std::string down_reason;             // set when !up
  std::shared_ptr<const DeviceReading> reading;  // null when !up
  bool collect_success = false;        // outcome of the last finished collection
  double collect_duration_seconds = 0; // duration of the last finished collection
  double last_success_unix = 0;        // when the reading was taken; 0 if never
  std::map<uint64_t, uint64_t> xid_counts;  // Xid code -> events since the agent started
};

struct CollectorStatus {
  std::string collector;  // e.g. "events"
  bool success = false;
  double duration_seconds = 0;
};

struct BuildInfo {
  std::string version;
  std::string revision;
};

struct Snapshot {
  double taken_unix = 0;  // wall time the snapshot was assembled
  BuildInfo build;
  std::vector<BackendStatus> backends;
  std::vector<GpuSnapshot> gpus;
  std::vector<CollectorStatus> collectors;  // non-device collectors
};

}  // namespace gpumeter
