#pragma once
// A scriptable Backend for collector tests: devices can be told to fail or to hang inside
// collect() until released, and events can be queued.

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

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
    devices_[d].identifies++;
    DeviceIdentity id;
    {
      std::lock_guard lock(mu_);
      id.driver_version = driver_version_;
    }
    id.index = d;
    id.uuid = "GPU-fake-" + std::to_string(d);
    id.vendor = "nvidia";
    id.model = "Fake GPU";
    return id;
  }

  Result<DeviceReading> collect(unsigned d, CollectScope scope = CollectScope::kFull,
                                CollectorSet groups = CollectorSet::all()) override {
    Device& dev = devices_[d];
    std::unique_lock lock(mu_);
    dev.scopes.push_back(scope);
    dev.groups.push_back(groups);
    dev.calls++;
    if (dev.hang) {
      dev.hanging = true;
      cv_.wait(lock, [&] { return !dev.hang; });
      dev.hanging = false;
    }
    if (dev.fail || (scope == CollectScope::kUsage && dev.fail_usage)) return Error{15, "GPU is lost"};
    DeviceReading r;
    // A usage-only reading has what the ledger needs and nothing else.
    r.device.utilization_ratio = scope == CollectScope::kUsage ? 0.25 : 0.5;
    // The processes, read for the ledger and the per-process series alike, as a run.
    if (groups.has(CollectorId::kLedger) || groups.has(CollectorId::kProcesses)) {
      r.runs.push_back({CollectorId::kProcesses, true, 0.002});
    }
    if (scope == CollectScope::kUsage) return r;
    r.device.power_watts = 100.0 + d;
    // A value per device collector asked for, numbered by the call, and the collector's run.
    const double n = dev.calls;
    if (groups.has(CollectorId::kClocks)) r.clocks.hertz = {{"sm", n}};
    if (groups.has(CollectorId::kPcie)) r.pcie.link_generation = n;
    if (groups.has(CollectorId::kNvlink)) r.nvlinks = {NvlinkReading{0, true}};
    for (const auto& c : kCollectors) {
      if (c.per_device && groups.has(c.id)) r.runs.push_back({c.id, c.id != dev.failing_collector, 0.001});
    }
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
  void set_fail_usage(unsigned d, bool fail) {
    std::lock_guard lock(mu_);
    devices_[d].fail_usage = fail;
  }
  void set_driver_version(std::string v) {
    std::lock_guard lock(mu_);
    driver_version_ = std::move(v);
  }
  std::vector<CollectorSet> groups(unsigned d) {
    std::lock_guard lock(mu_);
    return devices_[d].groups;
  }
  // The device collector whose run reports failure (one query failed; the GPU stays up).
  void set_failing_collector(unsigned d, CollectorId id) {
    std::lock_guard lock(mu_);
    devices_[d].failing_collector = id;
  }
  std::vector<CollectScope> scopes(unsigned d) {
    std::lock_guard lock(mu_);
    return devices_[d].scopes;
  }
  int identifies(unsigned d) const { return devices_[d].identifies.load(); }
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
    std::atomic<int> identifies{0};
    std::vector<CollectScope> scopes;  // every collect() call, in order
    std::vector<CollectorSet> groups;  // the collectors each call asked for
    std::optional<CollectorId> failing_collector;
    bool fail_usage = false;
    bool hang = false;
    bool hanging = false;
    bool fail = false;
  };
  BackendStatus status_;
  std::string driver_version_ = "550.54.15";
  std::deque<Device> devices_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<DeviceEvent> events_;
};

}  // namespace gpumeter::testing
