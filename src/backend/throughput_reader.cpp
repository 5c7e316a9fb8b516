#include "backend/throughput_reader.h"

#include <algorithm>
#include <utility>

namespace gpumeter {

ThroughputReader::ThroughputReader(ThroughputReaderOptions options, ReadFn read)
    : options_(options), read_(std::move(read)), devices_(options.devices) {}

ThroughputReader::~ThroughputReader() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

const Clock& ThroughputReader::clock() const { return options_.clock != nullptr ? *options_.clock : system_clock(); }

ThroughputRates ThroughputReader::serve(unsigned device) {
  std::lock_guard lock(mu_);
  if (device >= devices_.size()) return {};
  Device& d = devices_[device];
  if (!d.active) {
    d.active = true;
    if (!thread_.joinable() && !stop_) thread_ = std::thread([this] { run(); });
    cv_.notify_all();
  }
  return d.rates;
}

void ThroughputReader::pause(unsigned device) {
  std::lock_guard lock(mu_);
  if (device >= devices_.size()) return;
  devices_[device].active = false;
  devices_[device].rates = {};
}

bool ThroughputReader::any_active() const {
  return std::any_of(devices_.begin(), devices_.end(), [](const Device& d) { return d.active && !d.unsupported; });
}

void ThroughputReader::run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    const auto begin = clock().now();
    for (unsigned i = 0; i < devices_.size() && !stop_; ++i) {
      if (!devices_[i].active || devices_[i].unsupported) continue;
      lock.unlock();
      const ThroughputRead got = read_(i);
      lock.lock();
      Device& d = devices_[i];
      if (!d.active) continue;  // paused while it was read: nothing to keep
      d.unsupported = got.unsupported;
      d.rates = got.rates;
    }
    // The rest of the round; with no GPU to read, until one is served.
    const bool idle = !any_active();
    const auto until = idle ? clock().now() + std::chrono::hours(1) : begin + options_.min_round;
    clock().wait_until(cv_, lock, until, [&] { return stop_ || (idle && any_active()); });
  }
}

}  // namespace gpumeter
