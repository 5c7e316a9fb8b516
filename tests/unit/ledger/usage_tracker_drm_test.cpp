// The tracker with DRM clients (attribution/drm_fdinfo.h): graphics clients' engine counters
// become exact busy time between readings, beside the backend's processes.

#include <gtest/gtest.h>

#include "fake_clock.h"
#include "ledger/usage_tracker.h"

namespace gpumeter {
namespace {

class Resolver : public OwnerResolver {
 public:
  OwnerLabels resolve(unsigned pid, const DeviceIdentity&) override {
    OwnerLabels o;
    o.project = "p" + std::to_string(pid);
    return o;
  }
  void retain(const std::vector<unsigned>& live) override { retained = live; }
  void contribute(AttributionStatus&) const override {}
  std::vector<unsigned> retained;
};

class FakeClients : public DrmClientSource {
 public:
  Result<std::vector<DrmClient>> clients(const std::string& pdev) override {
    asked.push_back(pdev);
    if (fail) return Error{5, "cannot list /proc"};
    std::vector<DrmClient> out;
    for (const auto& c : now) {
      if (c.pdev == pdev) out.push_back(c);
    }
    return out;
  }
  std::vector<DrmClient> now;
  std::vector<std::string> asked;
  bool fail = false;
};

constexpr const char* kPdev = "0000:c1:00.0";

struct Fixture {
  Fixture() {
    clock.set_wall_us(1'800'000'000'000'000);
    options.clock = &clock;
    options.boot_id = [] { return std::string("boot"); };
    options.drm_clients = &clients;
    id.uuid = "0x1234";
    id.model = "AMD Instinct MI300X";
    id.pci_bus_id = kPdev;
  }
  // A polled reading (as ROCm SMI's) with KFD process 10, whose sampled share is the whole
  // utilization, then one second later.
  void read(UsageTracker& t, double util) {
    DeviceReading r;
    r.device.utilization_ratio = util;
    r.device.power_watts = 200;
    r.usage.processes.emplace();
    r.usage.processes->push_back({10, 1e9, kProcessCompute});
    r.usage.process_samples_supported = true;
    r.usage.process_samples.push_back({10, clock.wall_us(), util, 0, clock.wall_us() - 1'000'000});
    t.on_reading(0, id, r);
    clock.advance(std::chrono::seconds(1));
    clock.advance_wall(std::chrono::seconds(1));
  }
  const LedgerEntry* owner(const Snapshot& s, const std::string& project) {
    for (const auto& o : s.gpus[0].ledger->owners) {
      if (o.owner.project == project) return &o;
    }
    return nullptr;
  }
  Snapshot snapshot(UsageTracker& t) {
    Snapshot s;
    GpuSnapshot g;
    g.identity = id;
    g.up = true;
    s.gpus.push_back(g);
    t.contribute(s);
    return s;
  }
  testing::FakeClock clock;
  FakeClients clients;
  Resolver res;
  Logger log{LogLevel::kError};
  UsageTrackerOptions options;
  DeviceIdentity id;
};

TEST(UsageTrackerDrm, GraphicsClientsGetTheirEngineTimeAndKfdProcessesTheRest) {
  Fixture f;
  UsageTracker t(f.options, f.res, f.log);
  // Client 7 of pid 20 on this GPU (5 s used before the agent started), another GPU's client.
  f.clients.now = {{20, kPdev, 7, 5'000'000'000, 3u << 30}, {30, "0000:c2:00.0", 8, 9'000'000'000, 0}};
  f.read(t, 0.9);  // the ledger starts; the counters are where billing starts
  f.clients.now[0].busy_ns += 300'000'000;
  f.read(t, 0.9);
  f.clients.now[0].busy_ns += 400'000'000;
  f.read(t, 0.9);
  Snapshot s = f.snapshot(t);
  const auto* graphics = f.owner(s, "p20");
  const auto* compute = f.owner(s, "p10");
  ASSERT_NE(graphics, nullptr);
  ASSERT_NE(compute, nullptr);
  EXPECT_NEAR(graphics->busy_seconds, 0.7, 1e-9);
  EXPECT_NEAR(compute->busy_seconds, 1.8 - 0.7, 1e-9);
  EXPECT_NEAR(graphics->allocated_seconds, 1.0, 1e-9);  // listed at both ends of the second interval
  EXPECT_NEAR(graphics->memory_byte_seconds, 2.0 * (3u << 30), 1.0);
  EXPECT_EQ(f.owner(s, "p30"), nullptr);  // another GPU's client
  EXPECT_EQ(f.clients.asked.front(), kPdev);
  // Its per-process series: memory from fdinfo, utilization over the last interval.
  auto p = std::find_if(s.gpus[0].processes.begin(), s.gpus[0].processes.end(),
                        [](const ProcessSnapshot& x) { return x.pid == 20; });
  ASSERT_NE(p, s.gpus[0].processes.end());
  EXPECT_EQ(p->memory_bytes, static_cast<double>(3u << 30));
  EXPECT_NEAR(p->utilization_ratio.value_or(-1), 0.4, 1e-9);
  EXPECT_NE(std::find(f.res.retained.begin(), f.res.retained.end(), 20u), f.res.retained.end());
}

TEST(UsageTrackerDrm, AClientOpenedBetweenReadingsIsBilledAllItsTimeAndEachClientOnce) {
  Fixture f;
  UsageTracker t(f.options, f.res, f.log);
  f.read(t, 0.5);
  f.read(t, 0.5);
  // Pid 20 opened two DRM files (two clients) since the previous reading.
  f.clients.now = {{20, kPdev, 7, 100'000'000, std::nullopt}, {20, kPdev, 9, 50'000'000, std::nullopt}};
  f.read(t, 0.5);
  Snapshot s = f.snapshot(t);
  EXPECT_NEAR(f.owner(s, "p20")->busy_seconds, 0.15, 1e-9);
  EXPECT_NEAR(f.owner(s, "p10")->busy_seconds, 1.0 - 0.15, 1e-9);
}

TEST(UsageTrackerDrm, ACounterThatGoesBackIsHeldAtItsLargestValue) {
  Fixture f;
  UsageTracker t(f.options, f.res, f.log);
  f.clients.now = {{20, kPdev, 7, 1'000'000'000, std::nullopt}};
  f.read(t, 0.5);
  f.clients.now[0].busy_ns = 1'200'000'000;
  f.read(t, 0.5);
  f.clients.now[0].busy_ns = 1'100'000'000;  // lags (drm-usage-stats.rst allows it)
  f.read(t, 0.5);
  f.clients.now[0].busy_ns = 1'300'000'000;
  f.read(t, 0.5);
  Snapshot s = f.snapshot(t);
  EXPECT_NEAR(f.owner(s, "p20")->busy_seconds, 0.3, 1e-9);  // not 0.2 + 0 + 0.2
}

TEST(UsageTrackerDrm, AKfdProcessWithADrmFileIsOneProcess) {
  // ROCm processes open the render node too; their fdinfo holds no engine time.
  Fixture f;
  UsageTracker t(f.options, f.res, f.log);
  f.clients.now = {{10, kPdev, 7, 0, 1u << 20}};
  f.read(t, 0.6);
  f.read(t, 0.6);
  f.read(t, 0.6);
  Snapshot s = f.snapshot(t);
  EXPECT_NEAR(f.owner(s, "p10")->busy_seconds, 1.2, 1e-9);
  EXPECT_NEAR(f.owner(s, "p10")->allocated_seconds, 2.0, 1e-9);
  EXPECT_NEAR(f.owner(s, "p10")->memory_byte_seconds, 2e9, 1.0);  // the backend's memory
  EXPECT_EQ(s.gpus[0].processes.size(), 1u);
}

TEST(UsageTrackerDrm, AFailedScanLosesNothing) {
  Fixture f;
  UsageTracker t(f.options, f.res, f.log);
  f.clients.now = {{20, kPdev, 7, 0, std::nullopt}};
  f.read(t, 0.8);
  f.clients.now[0].busy_ns = 200'000'000;
  f.read(t, 0.8);
  f.clients.fail = true;
  f.clients.now[0].busy_ns = 500'000'000;
  f.read(t, 0.8);
  f.clients.fail = false;
  f.clients.now[0].busy_ns = 600'000'000;
  f.read(t, 0.8);
  Snapshot s = f.snapshot(t);
  EXPECT_NEAR(f.owner(s, "p20")->busy_seconds, 0.6, 1e-9);
}

}  // namespace
}  // namespace gpumeter
