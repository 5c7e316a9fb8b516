#pragma once
// `gpumeter burn`: a load generator made for metering. On each GPU asked for it creates a
// context, holds the memory asked for, and for the duration asked keeps the GPU busy for `duty`
// percent of every period with the spin kernel (spin_kernel.h), one thread per GPU. It measures
// what it did, which is the ground truth a check compares the ledger with: when its context
// existed (the process is on the GPU), how long its kernels ran, what memory it held.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "burn/cuda_driver.h"
#include "util/result.h"

namespace gpumeter::burn {

struct BurnOptions {
  std::vector<int> gpus{0};  // CUDA device ordinals
  std::chrono::nanoseconds duration = std::chrono::seconds(60);
  unsigned duty_percent = 100;
  std::chrono::nanoseconds period = std::chrono::milliseconds(100);
  std::uint64_t memory_bytes = 1ULL << 30;
  // A planted fault for self-checks (GPUMETER_TEST_BURN_FAULT=half-duty): run each kernel for
  // half its time but report the whole, as a broken load generator would.
  bool half_duty_fault = false;
};

struct GpuBurn {
  int ordinal = 0;
  std::string uuid;  // "GPU-..." as NVML prints it
  std::string name;
  double start_unix = 0;    // the context was created: the process is on the GPU from here
  double end_unix = 0;      // the context was destroyed
  double run_seconds = 0;   // the busy loop's length (the duration asked, unless stopped)
  double busy_seconds = 0;  // the kernels' run time on the GPU (events around each), summed
  std::uint64_t memory_bytes = 0;
  std::uint64_t kernels = 0;
};

struct BurnReport {
  int driver_version = 0;  // cuDriverGetVersion, e.g. 12040
  bool interrupted = false;
  std::vector<GpuBurn> gpus;
};

// Progress lines, at most one per GPU every 10 seconds.
using BurnProgress = std::function<void(const std::string&)>;

// Runs the load on every GPU of `options` at once; `stop` ends it early (a signal). An error
// names the GPU and the call that failed; GPUs already started are stopped first.
Result<BurnReport> run_burn(const CudaSymbols& cuda, const BurnOptions& options, const std::atomic<bool>& stop,
                            const BurnProgress& progress);

// "GPU-" and the 16 bytes in NVML's 8-4-4-4-12 grouping.
std::string format_uuid(const CUuuid& uuid);

}  // namespace gpumeter::burn
