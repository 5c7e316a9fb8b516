// The collection plan: defaults, the switches over the config over the defaults, the ledger's
// rule, and the values a collection that skipped a collector carries over.

#include "collect/collection_plan.h"

#include <gtest/gtest.h>

namespace gpumeter {
namespace {

using namespace std::chrono_literals;

TEST(CollectionPlan, DefaultsLeaveOnlyNvlinkOff) {
  auto plan = make_collection_plan({}, {});
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ(plan->enabled_names(), "device,clocks,ecc,pcie,profiling,mig,processes,ledger,events");
  EXPECT_FALSE(plan->has(CollectorId::kNvlink));
  EXPECT_TRUE(plan->has(CollectorId::kProfiling));
  for (const auto& c : kCollectors) EXPECT_EQ(plan->interval_of(c.id), 0ms) << c.name;
}

TEST(CollectionPlan, AWantedCollectorIsOnUnlessAFlagOrTheConfigSwitchesItOff) {
  const CollectorSet wanted = CollectorSet().set(CollectorId::kNvlink).set(CollectorId::kProfiling);
  auto plan = make_collection_plan({}, {}, wanted);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_TRUE(plan->has(CollectorId::kNvlink));
  EXPECT_TRUE(plan->has(CollectorId::kProfiling));
  CollectorsConfig config{};
  config[static_cast<size_t>(CollectorId::kNvlink)].enabled = false;
  CollectorSwitches flags;
  flags[CollectorId::kProfiling] = false;
  auto off = make_collection_plan(flags, config, wanted);
  ASSERT_TRUE(off.ok()) << off.error().message;
  EXPECT_FALSE(off->has(CollectorId::kNvlink));
  EXPECT_FALSE(off->has(CollectorId::kProfiling));
}

TEST(CollectionPlan, AFlagWinsOverTheConfigAndTheConfigOverTheDefault) {
  CollectorsConfig config{};
  config[static_cast<size_t>(CollectorId::kNvlink)].enabled = true;
  config[static_cast<size_t>(CollectorId::kEcc)].enabled = false;
  config[static_cast<size_t>(CollectorId::kClocks)].enabled = false;
  config[static_cast<size_t>(CollectorId::kClocks)].interval = 30s;
  CollectorSwitches flags;
  flags[CollectorId::kClocks] = true;     // over the config's false
  flags[CollectorId::kProfiling] = true;  // over the default
  flags[CollectorId::kEvents] = false;
  auto plan = make_collection_plan(flags, config);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_TRUE(plan->has(CollectorId::kNvlink));
  EXPECT_FALSE(plan->has(CollectorId::kEcc));
  EXPECT_TRUE(plan->has(CollectorId::kClocks));
  EXPECT_TRUE(plan->has(CollectorId::kProfiling));
  EXPECT_FALSE(plan->has(CollectorId::kEvents));
  EXPECT_EQ(plan->interval_of(CollectorId::kClocks), 30s);
  EXPECT_EQ(plan->enabled_names(), "device,clocks,pcie,nvlink,profiling,mig,processes,ledger");
}

TEST(CollectionPlan, TheLedgerCannotLoseTheDeviceCollectorByAccident) {
  CollectorSwitches flags;
  flags[CollectorId::kDevice] = false;
  auto plan = make_collection_plan(flags, {});
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.error().message.find("--no-collector.ledger"), std::string::npos) << plan.error().message;
  // Also when the config switches the device off and the ledger is on by default.
  CollectorsConfig config{};
  config[static_cast<size_t>(CollectorId::kDevice)].enabled = false;
  EXPECT_FALSE(make_collection_plan({}, config).ok());
  // With the ledger off too, it is a plan.
  flags[CollectorId::kLedger] = false;
  auto both = make_collection_plan(flags, {});
  ASSERT_TRUE(both.ok()) << both.error().message;
  EXPECT_FALSE(both->has(CollectorId::kDevice));
  EXPECT_FALSE(both->has(CollectorId::kLedger));
}

TEST(CollectionPlan, CarryForwardCopiesOnlyTheSkippedCollectorsValues) {
  DeviceReading previous;
  previous.clocks.hertz = {{"sm", 1.5e9}};
  previous.clocks.performance_state = 2;
  previous.pcie.link_generation = 4;
  previous.ecc.errors = {{"corrected", 3}};
  previous.device.temperature_celsius = {{"gpu", 60}};
  previous.device.utilization_ratio = 0.9;
  previous.mig.instances = {MigInstanceReading{"MIG-a"}};
  previous.mig.instances[0].profiling = ProfilingReading{};
  previous.mig.instances[0].profiling->sm_active_ratio = 0.4;
  DeviceReading next;
  next.device.utilization_ratio = 0.1;  // read this time (the ledger's input)
  next.mig.instances = {MigInstanceReading{"MIG-a"}};
  carry_forward(CollectorId::kClocks, previous, next);
  carry_forward(CollectorId::kDevice, previous, next);
  carry_forward(CollectorId::kProfiling, previous, next);
  EXPECT_EQ(next.clocks.hertz, previous.clocks.hertz);
  EXPECT_EQ(next.clocks.performance_state, 2);
  EXPECT_EQ(next.device.temperature_celsius, previous.device.temperature_celsius);
  EXPECT_EQ(next.device.utilization_ratio, 0.1);  // what was read is kept
  ASSERT_TRUE(next.mig.instances[0].profiling);
  EXPECT_EQ(next.mig.instances[0].profiling->sm_active_ratio, 0.4);
  EXPECT_FALSE(next.pcie.link_generation);  // not carried: PCIe was read (or is off)
  EXPECT_TRUE(next.ecc.errors.empty());
}

TEST(CollectionPlan, ClearingACollectorRemovesAllItsValues) {
  DeviceReading r;
  r.device.utilization_ratio = 0.5;
  r.device.power_watts = 100;
  r.device.temperature_celsius = {{"gpu", 50}};
  r.clocks.hertz = {{"sm", 1e9}};
  clear_collector(CollectorId::kDevice, r);
  EXPECT_FALSE(r.device.utilization_ratio);
  EXPECT_FALSE(r.device.power_watts);
  EXPECT_TRUE(r.device.temperature_celsius.empty());
  EXPECT_EQ(r.clocks.hertz.size(), 1u);  // another collector's
  clear_collector(CollectorId::kClocks, r);
  EXPECT_TRUE(r.clocks.hertz.empty());
}

}  // namespace
}  // namespace gpumeter
