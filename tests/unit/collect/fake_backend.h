#pragma once
// A scriptable Backend for collector tests: devices can be told to fail or to hang inside
// collect() until released, and events can be queued.

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>

#include "backend/backend.h"

namespace gpumeter::testing {

class FakeBackend : public Backend {
 public:
  explicit FakeBackend(unsigned n) : devices_(n) {
    status_.backend = "nvml";
    status_.up = true;
    status_.vendor = "nvidia";
  }
  BackendStatus status() const override { return status_; }
  unsigned device_count() const override { return static_cast<unsigned>(devices_.size()); }

  Result<DeviceIdentity> identify(unsigned d) override {
    DeviceIdentity id;
    id.index = d;
    id.uuid = "GPU-fake-" + std::to_string(d);
    id.vendor = "nvidia";
    id.model = "Fake GPU";
    return id;
  }

  Result<DeviceReading> collect(unsigned d, CollectScope = CollectScope::kFull) override {
    Device& dev = devices_[d];
    dev.calls++;
    std::unique_lock lock(mu_);
    if (dev.hang) {
      dev.hanging = true;
      cv_.wait(lock, [&] { return !dev.hang; });
      dev.hanging = false;
    }
    if (dev.fail) return Error{15, "GPU is lost"};
    DeviceReading r;
    r.utilization_ratio = 0.5;
    r.power_watts = 100.0 + d;
    return r;
  }

  bool supports_events() const override { return true; }
  Result<std::optional<DeviceEvent>> wait_event(std::chrono::milliseconds timeout) override {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return !events_.empty(); });
    if (events_.empty()) return std::optional<DeviceEvent>{};
    DeviceEvent e = events_.front();
    events_.pop_front();
    return std::optional<DeviceEvent>{e};
  }

  void set_hang(unsigned d, bool hang) {
    {
      std::lock_guard lock(mu_);
      devices_[d].hang = hang;
    }
    cv_.notify_all();
  }
  void set_fail(unsigned d, bool fail) {
    std::lock_guard lock(mu_);
    devices_[d].fail = fail;
  }
  void push_event(DeviceEvent e) {
    {
      std::lock_guard lock(mu_);
      events_.push_back(e);
    }
    cv_.notify_all();
  }
  int calls(unsigned d) const { return devices_[d].calls.load(); }
  bool hanging(unsigned d) {
    std::lock_guard lock(mu_);
    return devices_[d].hanging;
  }

 private:
  struct Device {
    std::atomic<int> calls{0};
    bool hang = false;
    bool hanging = false;
    bool fail = false;
  };
  BackendStatus status_;
  std::deque<Device> devices_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<DeviceEvent> events_;
};

}  // namespace gpumeter::testing
