// The ledger's scheduler policy: allocations without processes, processes inside and outside
// allocations, allocation edges inside a sample period, and the state it persists.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ledger/ledger.h"

namespace gpumeter {
namespace {

constexpr std::int64_t kT0 = 1'700'000'000'000'000;  // µs
constexpr std::int64_t kPeriod = 200'000;

OwnerLabels pod(std::string name, std::string user = "", std::string project = "") {
  OwnerLabels o;
  o.project = std::move(project);
  o.user = std::move(user);
  o.namespace_ = "team";
  o.pod = std::move(name);
  o.container = "main";
  return o;
}

OwnerLabels job(std::string id) {
  OwnerLabels o;
  o.hpc_job = std::move(id);
  return o;
}

OwnerLabels user_owner(std::string user) {
  OwnerLabels o;
  o.user = std::move(user);
  return o;
}

// Five sample periods after `start` with the given utilization and power; each process has an
// equal SM share of the utilization.
LedgerTick tick(std::int64_t start, double util, double power, std::vector<LedgerProcess> procs,
                std::optional<AllocationState> allocation) {
  LedgerTick t;
  t.wall_us = start + 5 * kPeriod;
  t.utilization_samples_supported = t.power_samples_supported = t.process_samples_supported = true;
  for (int i = 1; i <= 5; ++i) {
    const std::int64_t ts = start + i * kPeriod;
    t.utilization_samples.push_back({ts, util});
    t.power_samples.push_back({ts, power});
    for (const auto& p : procs) t.process_samples.push_back({p.pid, ts, util / static_cast<double>(procs.size()), 0});
  }
  t.processes = std::move(procs);
  t.allocation = std::move(allocation);
  return t;
}

GpuLedger started(bool scheduler, double idle_w = 70) {
  GpuLedgerOptions o;
  o.idle_power_watts = idle_w;
  o.scheduler = scheduler;
  GpuLedger l(o);
  LedgerTick first = tick(kT0 - kPeriod, 0, 0, {}, std::nullopt);
  first.utilization_samples.resize(1);
  first.power_samples.resize(1);
  l.advance(first);
  EXPECT_EQ(l.cursor_us(), kT0);
  return l;
}

AllocationState allocated(std::vector<OwnerLabels> owners, std::int64_t since_us = kT0 - 10'000'000) {
  std::sort(owners.begin(), owners.end());
  return AllocationState{std::move(owners), since_us};
}

TEST(AllocationOwns, EverySchedulerLabelOfTheAllocationMustMatch) {
  EXPECT_TRUE(allocation_owns(pod("nb"), pod("nb", "alice", "vision")));
  EXPECT_FALSE(allocation_owns(pod("nb"), pod("other", "alice")));
  OwnerLabels other_container = pod("nb");
  other_container.container = "sidecar";
  EXPECT_FALSE(allocation_owns(pod("nb"), other_container));
  OwnerLabels in_job = user_owner("carol");
  in_job.hpc_job = "51300";
  EXPECT_TRUE(allocation_owns(job("51300"), in_job));
  EXPECT_FALSE(allocation_owns(job("51300"), job("51301")));
  // An allocation with no scheduler label owns nothing, not everything.
  EXPECT_FALSE(allocation_owns(user_owner("alice"), user_owner("alice")));
}

TEST(SchedulerPolicy, AnAllocationWithNoProcessIsBilledAndCountedIdle) {
  GpuLedger l = started(true);
  l.advance(tick(kT0, 0, 100, {}, allocated({pod("notebook")})));
  ASSERT_EQ(l.owners().size(), 1u);
  const LedgerTotals& t = l.owners().at(pod("notebook"));
  EXPECT_DOUBLE_EQ(t.allocated_seconds, 1.0);
  EXPECT_DOUBLE_EQ(t.idle_allocated_seconds, 1.0);
  EXPECT_DOUBLE_EQ(t.busy_seconds, 0.0);
  EXPECT_DOUBLE_EQ(t.energy_joules, 100.0);  // idle power and the rest: nobody is busy
  EXPECT_DOUBLE_EQ(l.foreign_seconds(), 0.0);
}

TEST(SchedulerPolicy, TheProcessPolicyIgnoresAllocations) {
  GpuLedger l = started(false);
  l.advance(tick(kT0, 0, 100, {}, allocated({pod("notebook")})));
  ASSERT_EQ(l.owners().size(), 1u);
  EXPECT_DOUBLE_EQ(l.owners().at(idle_owner()).allocated_seconds, 1.0);
  EXPECT_TRUE(l.allocated().empty());
}

TEST(SchedulerPolicy, AProcessInsideItsAllocationIsChargedToTheAllocation) {
  GpuLedger l = started(true);
  l.advance(tick(kT0, 0.6, 300, {{7, pod("trainer", "alice", "vision"), 4e9}}, allocated({pod("trainer")})));
  ASSERT_EQ(l.owners().size(), 1u);
  const LedgerTotals& t = l.owners().at(pod("trainer"));
  EXPECT_DOUBLE_EQ(t.allocated_seconds, 1.0);
  EXPECT_DOUBLE_EQ(t.idle_allocated_seconds, 0.0);
  EXPECT_DOUBLE_EQ(t.busy_seconds, 0.6);
  EXPECT_DOUBLE_EQ(t.memory_byte_seconds, 4e9);
  EXPECT_DOUBLE_EQ(t.energy_joules, 300.0);
}

TEST(SchedulerPolicy, OwnersShareEvenlyAndAForeignProcessIsCounted) {
  // Two pods time-sliced on one GPU, one of them running; a process of nobody's allocation.
  GpuLedger l = started(true);
  l.advance(
      tick(kT0, 0.9, 370, {{7, pod("a", "alice"), 1e9}, {9, user_owner("bob"), 2e9}}, allocated({pod("a"), pod("b")})));
  EXPECT_DOUBLE_EQ(l.owners().at(pod("a")).allocated_seconds, 1.0 / 3);
  EXPECT_DOUBLE_EQ(l.owners().at(pod("a")).idle_allocated_seconds, 0.0);
  EXPECT_DOUBLE_EQ(l.owners().at(pod("b")).allocated_seconds, 1.0 / 3);
  EXPECT_DOUBLE_EQ(l.owners().at(pod("b")).idle_allocated_seconds, 1.0 / 3);
  EXPECT_DOUBLE_EQ(l.owners().at(user_owner("bob")).allocated_seconds, 1.0 / 3);
  EXPECT_DOUBLE_EQ(l.owners().at(user_owner("bob")).idle_allocated_seconds, 0.0);
  // Busy time comes from the processes only: b has none.
  EXPECT_NEAR(l.owners().at(pod("a")).busy_seconds, 0.45, 1e-12);
  EXPECT_NEAR(l.owners().at(user_owner("bob")).busy_seconds, 0.45, 1e-12);
  EXPECT_DOUBLE_EQ(l.owners().at(pod("b")).busy_seconds, 0.0);
  EXPECT_DOUBLE_EQ(l.foreign_seconds(), 1.0);
  double energy = 0;
  for (const auto& [o, t] : l.owners()) energy += t.energy_joules;
  EXPECT_NEAR(energy, l.energy_joules(), 1e-9);
}

TEST(SchedulerPolicy, AProcessOnAGpuNobodyHoldsIsNotForeign) {
  GpuLedger l = started(true);
  l.advance(tick(kT0, 0.5, 200, {{9, user_owner("bob"), 1e9}}, allocated({})));
  EXPECT_DOUBLE_EQ(l.owners().at(user_owner("bob")).allocated_seconds, 1.0);
  EXPECT_DOUBLE_EQ(l.foreign_seconds(), 0.0);
}

TEST(SchedulerPolicy, AnAllocationEdgeInsideASamplePeriodCutsIt) {
  GpuLedger l = started(true);
  // Allocated 300 ms into the tick, in the middle of its second sample period; released
  // 150 ms into the next tick's first period.
  l.advance(tick(kT0, 0, 100, {}, allocated({pod("nb")}, kT0 + 300'000)));
  EXPECT_NEAR(l.owners().at(pod("nb")).allocated_seconds, 0.7, 1e-12);
  EXPECT_NEAR(l.owners().at(idle_owner()).allocated_seconds, 0.3, 1e-12);
  l.advance(tick(kT0 + 1'000'000, 0, 100, {}, allocated({}, kT0 + 1'150'000)));
  EXPECT_NEAR(l.owners().at(pod("nb")).allocated_seconds, 0.85, 1e-12);
  EXPECT_NEAR(l.owners().at(pod("nb")).idle_allocated_seconds, 0.85, 1e-12);
  EXPECT_NEAR(l.owners().at(idle_owner()).allocated_seconds, 1.15, 1e-12);
  EXPECT_DOUBLE_EQ(l.covered_seconds(), 2.0);
}

TEST(SchedulerPolicy, AChangeSeenBeforeItsTimeWaitsForTheSamples) {
  // The source saw the change at a wall time the driver's samples have not reached yet.
  GpuLedger l = started(true);
  l.advance(tick(kT0, 0, 100, {}, allocated({pod("nb")}, kT0 + 1'400'000)));
  EXPECT_EQ(l.owners().count(pod("nb")), 0u);
  l.advance(tick(kT0 + 1'000'000, 0, 100, {}, allocated({pod("nb")}, kT0 + 1'400'000)));
  EXPECT_NEAR(l.owners().at(pod("nb")).allocated_seconds, 0.6, 1e-12);
  EXPECT_NEAR(l.owners().at(idle_owner()).allocated_seconds, 1.4, 1e-12);
}

TEST(SchedulerPolicy, TheStateKeepsTheAllocationAndItsCounters) {
  GpuLedger l = started(true);
  l.advance(tick(kT0, 0.5, 200, {{9, user_owner("bob"), 1e9}}, allocated({pod("nb")})));
  const nlohmann::json j = l.to_json();
  GpuLedgerOptions o;
  o.scheduler = true;
  auto back = GpuLedger::from_json(j, o);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->allocated(), std::vector<OwnerLabels>{pod("nb")});
  EXPECT_DOUBLE_EQ(back->foreign_seconds(), l.foreign_seconds());
  EXPECT_DOUBLE_EQ(back->owners().at(pod("nb")).idle_allocated_seconds, 1.0 / 2);
  EXPECT_EQ(back->to_json(), j);
  nlohmann::json twice = j;
  twice["allocated"].push_back(twice["allocated"][0]);
  EXPECT_FALSE(GpuLedger::from_json(twice, o));
  nlohmann::json negative = j;
  negative["owners"][0]["idle_allocated_seconds"] = -1;
  std::vector<std::string> dropped;
  auto repaired = GpuLedger::from_json(negative, o, &dropped);
  ASSERT_TRUE(repaired) << repaired.error().message;
  EXPECT_EQ(dropped.size(), 1u);
  EXPECT_DOUBLE_EQ(repaired->owners().at(pod("nb")).idle_allocated_seconds, 0);
}

}  // namespace
}  // namespace gpumeter
