// The ledgers of a GPU in MIG mode: each MIG device bills its slices of the GPU, the GPU's own
// ledger the free slices; power is split by slice share and activity; a layout change creates
// and drops units without anything going backwards; the state round-trips.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ledger/mig_ledgers.h"

namespace gpumeter {
namespace {

constexpr std::int64_t kT0 = 1'700'000'000'000'000;  // µs
constexpr std::int64_t kSecond = 1'000'000;

OwnerLabels pod(std::string name) {
  OwnerLabels o;
  o.namespace_ = "team";
  o.pod = std::move(name);
  o.container = "main";
  return o;
}

MigUnitTick unit(std::string uuid, unsigned slices, std::optional<double> activity, std::vector<LedgerProcess> procs) {
  MigUnitTick t;
  t.labels = {uuid, "1", "0", std::to_string(slices) + "g.10gb"};
  t.weight = slices / 7.0;
  t.activity = activity;
  t.processes = std::move(procs);
  return t;
}

LedgerProcess proc(unsigned pid, std::string name, double memory = 0) {
  return {pid, pod(std::move(name)), memory, kT0 - 100 * kSecond};
}

// A GPU at `power` watts (its energy counter moving accordingly), read every second.
struct Gpu {
  GpuLedger own;
  MigLedgers mig;
  double energy = 1000;
  std::int64_t at = kT0;
  GpuLedgerOptions options{70.0, 10 * kSecond, false};

  void round(double power, std::vector<MigUnitTick> units) {
    energy += power;  // over the second since the last round
    MigRound r;
    r.wall_us = at;
    r.energy_joules = energy;
    r.power_watts = power;
    r.units = std::move(units);
    mig.advance(own, r, options);
    at += kSecond;
  }
  GpuLedgerSnapshot snapshot() const {
    GpuLedgerSnapshot s;
    s.covered_seconds = own.covered_seconds();
    for (const auto& [o, t] : own.owners()) {
      s.owners.push_back({o, t.allocated_seconds, t.busy_seconds, t.memory_byte_seconds, t.energy_joules});
    }
    mig.append(s);
    return s;
  }
};

const LedgerEntry* find(const GpuLedgerSnapshot& s, const std::string& uuid, const std::string& project,
                        const std::string& pod_name = "") {
  for (const auto& e : s.owners) {
    if (e.mig.mig_uuid == uuid && e.owner.project == project && e.owner.pod == pod_name) return &e;
  }
  return nullptr;
}

TEST(MigPowerSplit, IdleBySliceShareTheRestByActivity) {
  // 3g at 100% and 1g at 50%: activity weights 3/7 and 0.5/7; 3 slices free.
  const auto s = split_mig_power(300, 70, {unit("a", 3, 1.0, {}), unit("b", 1, 0.5, {})}, 3 / 7.0);
  ASSERT_EQ(s.unit_watts.size(), 2u);
  EXPECT_NEAR(s.unit_watts[0], 70 * 3 / 7.0 + 230 * 3 / 3.5, 1e-9);
  EXPECT_NEAR(s.unit_watts[1], 70 * 1 / 7.0 + 230 * 0.5 / 3.5, 1e-9);
  EXPECT_NEAR(s.free_watts, 70 * 3 / 7.0, 1e-9);
  EXPECT_NEAR(s.unit_watts[0] + s.unit_watts[1] + s.free_watts, 300, 1e-9);
}

TEST(MigPowerSplit, NoActivityOrNoGpmSplitsEverythingBySliceShare) {
  const auto s = split_mig_power(140, 70, {unit("a", 3, std::nullopt, {}), unit("b", 2, 0.0, {})}, 2 / 7.0);
  EXPECT_NEAR(s.unit_watts[0], 140 * 3 / 7.0, 1e-9);
  EXPECT_NEAR(s.unit_watts[1], 140 * 2 / 7.0, 1e-9);
  EXPECT_NEAR(s.free_watts, 140 * 2 / 7.0, 1e-9);
}

TEST(MigPowerSplit, PowerBelowTheConfiguredIdleIsAllIdle) {
  const auto s = split_mig_power(35, 70, {unit("a", 7, 1.0, {})}, 0);
  EXPECT_NEAR(s.unit_watts[0], 35, 1e-9);
  EXPECT_NEAR(s.free_watts, 0, 1e-12);
}

TEST(MigLedgers, EachInstanceBillsItsSlicesAndTheFreeSlicesAreIdle) {
  Gpu g;
  auto layout = [](double util_a) {
    return std::vector<MigUnitTick>{unit("MIG-a", 3, util_a, {proc(11, "train", 4e9)}),
                                    unit("MIG-b", 2, 0.5, {proc(12, "serve"), proc(13, "asr")}),
                                    unit("MIG-c", 1, 0.0, {})};
  };
  g.round(200, layout(0.9));  // starts the clocks
  for (int i = 0; i < 10; ++i) g.round(200, layout(0.9));
  const GpuLedgerSnapshot s = g.snapshot();

  // Seconds are GPU-seconds: 10 s of a 3g instance are 30/7.
  const LedgerEntry* train = find(s, "MIG-a", "", "train");
  ASSERT_NE(train, nullptr);
  EXPECT_NEAR(train->allocated_seconds, 10 * 3 / 7.0, 1e-9);
  EXPECT_NEAR(train->busy_seconds, 10 * 0.9 * 3 / 7.0, 1e-9);
  EXPECT_NEAR(train->memory_byte_seconds, 10 * 4e9, 1e-3);
  EXPECT_EQ(train->mig.mig_profile, "3g.10gb");
  // Two processes on one instance share its time; their activity cannot be told apart (no
  // per-process utilization on MIG), so the busy time is unattributed, on the instance.
  const LedgerEntry* serve = find(s, "MIG-b", "", "serve");
  ASSERT_NE(serve, nullptr);
  EXPECT_NEAR(serve->allocated_seconds, 10 * 2 / 7.0 / 2, 1e-9);
  EXPECT_NEAR(serve->busy_seconds, 0, 1e-12);
  const LedgerEntry* unattributed = find(s, "MIG-b", "__unattributed__");
  ASSERT_NE(unattributed, nullptr);
  EXPECT_NEAR(unattributed->busy_seconds, 10 * 0.5 * 2 / 7.0, 1e-9);
  // An instance nobody uses, and the slice no instance holds, are idle: each on its own series.
  const LedgerEntry* idle_c = find(s, "MIG-c", "__idle__");
  ASSERT_NE(idle_c, nullptr);
  EXPECT_NEAR(idle_c->allocated_seconds, 10 / 7.0, 1e-9);
  const LedgerEntry* idle_free = find(s, "", "__idle__");
  ASSERT_NE(idle_free, nullptr);
  EXPECT_NEAR(idle_free->allocated_seconds, 10 / 7.0, 1e-9);

  // The invariants: Σ allocated = covered = the GPU's seconds; Σ energy = the GPU's energy.
  double allocated = 0, energy = 0;
  for (const auto& e : s.owners) {
    allocated += e.allocated_seconds;
    energy += e.energy_joules;
  }
  EXPECT_NEAR(s.covered_seconds, 10, 1e-9);
  EXPECT_NEAR(allocated, 10, 1e-9);
  EXPECT_NEAR(energy, 10 * 200, 1e-6);
  // Energy: idle power by slice share, the rest by activity.
  const double active = 3 / 7.0 * 0.9 + 2 / 7.0 * 0.5;
  EXPECT_NEAR(train->energy_joules, 10 * (70 * 3 / 7.0 + 130 * (3 / 7.0 * 0.9) / active), 1e-6);
  EXPECT_NEAR(idle_free->energy_joules, 10 * 70 / 7.0, 1e-6);
}

TEST(MigLedgers, ALayoutChangeCreatesAndKeepsUnitsAndNothingGoesBack) {
  Gpu g;
  auto before = std::vector<MigUnitTick>{unit("MIG-a", 3, 0.9, {proc(11, "train")}),
                                         unit("MIG-s1", 1, 1.0, {proc(14, "nb")}), unit("MIG-s2", 1, 0.0, {})};
  g.round(200, before);
  for (int i = 0; i < 5; ++i) g.round(200, before);
  const GpuLedgerSnapshot s1 = g.snapshot();
  // The two 1g instances are destroyed and one 2g created in their slices.
  auto after =
      std::vector<MigUnitTick>{unit("MIG-a", 3, 0.9, {proc(11, "train")}), unit("MIG-m", 2, 0.6, {proc(16, "merged")})};
  for (int i = 0; i < 5; ++i) g.round(200, after);
  const GpuLedgerSnapshot s2 = g.snapshot();

  for (const auto& e : s1.owners) {
    const LedgerEntry* now = find(s2, e.mig.mig_uuid, e.owner.project, e.owner.pod);
    ASSERT_NE(now, nullptr) << e.mig.mig_uuid << " " << e.owner.pod;  // kept: its counters still served
    EXPECT_GE(now->allocated_seconds, e.allocated_seconds);
    EXPECT_GE(now->energy_joules, e.energy_joules);
  }
  // The new instance bills from the round before it was first seen (it was created in between).
  const LedgerEntry* merged = find(s2, "MIG-m", "", "merged");
  ASSERT_NE(merged, nullptr);
  EXPECT_NEAR(merged->allocated_seconds, 5 * 2 / 7.0, 1e-9);
  EXPECT_NEAR(find(s2, "MIG-s1", "", "nb")->allocated_seconds, 5 / 7.0, 1e-9);
  double allocated = 0;
  for (const auto& e : s2.owners) allocated += e.allocated_seconds;
  EXPECT_NEAR(s2.covered_seconds, 10, 1e-9);
  EXPECT_NEAR(allocated, 10, 1e-9);
}

TEST(MigLedgers, StateRoundTripsAndBadStateIsRefused) {
  Gpu g;
  for (int i = 0; i < 3; ++i) g.round(150, {unit("MIG-a", 3, 0.5, {proc(11, "train")})});
  auto back = MigLedgers::from_json(g.mig.to_json(), g.options);
  ASSERT_TRUE(back.ok()) << back.error().message;
  GpuLedgerSnapshot a, b;
  g.mig.append(a);
  back->append(b);
  ASSERT_EQ(a.owners.size(), b.owners.size());
  for (size_t i = 0; i < a.owners.size(); ++i) {
    EXPECT_EQ(a.owners[i].mig, b.owners[i].mig);
    EXPECT_EQ(a.owners[i].allocated_seconds, b.owners[i].allocated_seconds);
  }
  EXPECT_FALSE(MigLedgers::from_json(nlohmann::json::object(), {}).ok());
  nlohmann::json bad = g.mig.to_json();
  bad[0]["weight"] = 1.5;
  EXPECT_FALSE(MigLedgers::from_json(bad, {}).ok());
  nlohmann::json twice = g.mig.to_json();
  twice.push_back(twice[0]);
  EXPECT_FALSE(MigLedgers::from_json(twice, {}).ok());
}

TEST(MigLedgers, PruneDropsUnitsLeftWithNoOwner) {
  Gpu g;
  g.round(100, {unit("MIG-a", 3, 0.5, {proc(11, "train")})});
  g.round(100, {unit("MIG-a", 3, 0.5, {proc(11, "train")})});
  g.round(100, {unit("MIG-b", 3, 0.5, {})});  // MIG-a destroyed
  g.round(100, {unit("MIG-b", 3, 0.5, {})});
  EXPECT_GT(g.mig.prune(kT0 + 2 * kSecond + 1), 0u);  // MIG-a's owners were last charged at 1 s
  GpuLedgerSnapshot s;
  g.mig.append(s);
  for (const auto& e : s.owners) EXPECT_EQ(e.mig.mig_uuid, "MIG-b");
}

}  // namespace
}  // namespace gpumeter
