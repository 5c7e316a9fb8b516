#pragma once
// Throughput the driver measures inside the call that reads it, so that each read blocks for the
// measuring window: ROCm SMI's rsmi_dev_pci_throughput_get (amdgpu's pcie_bw, one second) and
// NVML's nvmlDeviceGetPcieThroughput (20 ms per direction). No collection waits that long: a
// thread of the reader's own reads the GPUs in turn, and a collection serves the last rates read.
// Both backends use it, each with its read function and its pace.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "util/clock.h"

namespace gpumeter {

// Bytes per second each way; unset: not known.
struct ThroughputRates {
  std::optional<double> transmit;
  std::optional<double> receive;
  bool operator==(const ThroughputRates&) const = default;
};

// What one read of one GPU found: its rates (unset after an error), or that the GPU cannot
// measure them, and is then not asked again.
struct ThroughputRead {
  ThroughputRates rates;
  bool unsupported = false;
};

struct ThroughputReaderOptions {
  unsigned devices = 0;
  // The least time between two reads of a GPU: a round over the GPUs that took less waits out
  // the rest before the next.
  std::chrono::milliseconds min_round{1000};
  const Clock* clock = nullptr;  // null: the system clock; must outlive the reader
};

class ThroughputReader {
 public:
  // Reads one GPU, blocking for its measuring window. Called on the reader's thread only, never
  // under the reader's lock.
  using ReadFn = std::function<ThroughputRead(unsigned device)>;

  ThroughputReader(ThroughputReaderOptions options, ReadFn read);
  ~ThroughputReader();  // stops the thread after the read in progress
  ThroughputReader(const ThroughputReader&) = delete;
  ThroughputReader& operator=(const ThroughputReader&) = delete;

  // The last rates read of `device`. The first call for a GPU has the thread read it from then
  // on (the thread starts with the first call of all): its rates come with the next round.
  ThroughputRates serve(unsigned device);
  // Stops reading `device`, until it is served again, and forgets its rates.
  void pause(unsigned device);

 private:
  struct Device {
    bool active = false;       // served, not paused since
    bool unsupported = false;  // not asked again
    ThroughputRates rates;
  };
  void run();
  bool any_active() const;  // mu_ held
  const Clock& clock() const;

  ThroughputReaderOptions options_;
  ReadFn read_;
  std::mutex mu_;  // guards the members below
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<Device> devices_;
  std::thread thread_;  // started by the first serve()
};

}  // namespace gpumeter
