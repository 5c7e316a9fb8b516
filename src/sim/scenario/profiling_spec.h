#pragma once
// The scenario's profiling (GPM) and NVLink parts: a model's NVLink links, a job's profile
// fractions and NVLink traffic, and the NVLink faults. Parsed by scenario_parse_profiling.cpp,
// played by profiling.h.

#include <cstdint>
#include <optional>

#include "sim/scenario/time.h"

namespace gpumeter::sim {

// A model's NVLink links (`models.<id>.nvlink`); none on boards without NVLink.
struct NvlinkSpec {
  unsigned links = 0;       // NVML_FI_DEV_NVLINK_LINK_COUNT; 0: no NVLink
  unsigned speed_mbps = 0;  // per link and direction, NVML_FI_DEV_NVLINK_GET_SPEED
  unsigned version = 0;     // nvmlNvlinkVersion_t (6 = NVLink 4.0)
  // Traffic at 100% utilization of a job that gives none, in bytes per second over all links.
  double tx_bytes_per_second = 0;
  double rx_bytes_per_second = 0;
};

// What a job does while it is busy (`jobs[].profile`), each a fraction of its busy time
// (see profiling.h). The defaults are an assumption, documented in docs/simulator.md.
struct JobProfile {
  double sm = 1.0;
  double occupancy = 0.5;
  double tensor = 0.0;
  double dram = 0.5;
  double fp64 = 0.0;
  double fp32 = 0.5;
  double fp16 = 0.0;
  // The video engines (NVENC, NVDEC), not GPM: busy this fraction of the job's busy time.
  double encoder = 0.0;
  double decoder = 0.0;
};

// A job's NVLink traffic at 100% utilization (`jobs[].nvlink`), over all links of the GPU,
// bytes per second; unset: the model's.
struct JobNvlink {
  double tx_bytes_per_second = 0;
  double rx_bytes_per_second = 0;
};

enum class NvlinkErrorType { replay = 0, recovery = 1, crc = 2 };

// `nvlink_down`: one link inactive during [at, at + duration). `nvlink_errors`: `count`
// errors of one type added to the link's counter at `at`.
struct NvlinkFault {
  bool down = true;
  unsigned gpu = 0;
  unsigned link = 0;
  Micros at = 0;
  Micros duration = kForever;
  NvlinkErrorType type = NvlinkErrorType::replay;
  std::uint64_t count = 0;
};

}  // namespace gpumeter::sim
