// build_report on a MIG GPU against an in-memory API: GPU-seconds per instance priced by their
// share of the GPU's price or by the profile's price per instance-hour, --by mig_profile, and
// the slice figures the outputs show.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "fake_prom_api.h"
#include "pricing/pricing.h"
#include "report/format.h"
#include "report/report_builder.h"

namespace gpumeter::report {
namespace {

using testing::FakePromApi;

constexpr double kEnd = 3600;
constexpr const char* kH100 = "NVIDIA H100 80GB HBM3";
constexpr const char* kA30 = "NVIDIA A30";

std::vector<Sample> linear(double rate) {
  std::vector<Sample> out;
  for (double t = 0; t <= kEnd; t += 15) out.push_back({t, rate * t});
  return out;
}

struct Slice {
  std::string project, profile, gi;
  double gpus;  // GPU-seconds per second: slices / the GPU's slices
};

// The ledger's series of one GPU in MIG mode whose instances hold all its slices, its gpu_info
// and, where `mig_slices` is not 0, its gpu_mig_slices.
void add_mig_gpu(FakePromApi& api, const std::string& uuid, const std::string& model, int mig_slices,
                 const std::vector<Slice>& slices) {
  for (const auto& s : slices) {
    Labels l{{"uuid", uuid},
             {"gpu", "0"},
             {"instance", "n1:9400"},
             {"project", s.project},
             {"mig_profile", s.profile},
             {"gpu_instance", s.gi},
             {"compute_instance", "0"},
             {"mig_uuid", "MIG-" + uuid + s.gi}};
    const bool idle = s.project == "__idle__";
    api.data.push_back({"gpu_allocated_seconds_total", l, linear(s.gpus)});
    api.data.push_back({"gpu_busy_seconds_total", l, linear(idle ? 0 : s.gpus / 2)});
    api.data.push_back({"gpu_memory_byte_seconds_total", l, linear(idle ? 0 : 1e9)});
    api.data.push_back({"gpu_attributed_energy_joules_total", l, linear(idle ? 10 : 100)});
  }
  Labels l{{"uuid", uuid}, {"gpu", "0"}, {"instance", "n1:9400"}};
  api.data.push_back({"gpumeter_ledger_covered_seconds_total", l, linear(1)});
  api.data.push_back({"gpumeter_ledger_gap_seconds_total", l, linear(0)});
  if (mig_slices > 0) {
    std::vector<Sample> constant;
    for (const Sample& x : linear(0)) constant.push_back({x.t, static_cast<double>(mig_slices)});
    api.data.push_back({"gpu_mig_slices", l, constant});
  }
  Labels info = l;
  info["model"] = model;
  api.data.push_back({"gpu_info", info, linear(0)});
}

// One H100 cut 3g + 2g + 1g + 1g: team-a on the 3g, team-b on the 2g and one 1g, the other 1g
// unused (its own __idle__ series), no unallocated slices left on the parent. Its agent exports
// no gpu_mig_slices: the report takes 7.
FakePromApi mig_gpu() {
  FakePromApi api;
  add_mig_gpu(api, "GPU-m", kH100, 0,
              {{"team-a", "3g.40gb", "2", 3.0 / 7},
               {"team-b", "2g.20gb", "3", 2.0 / 7},
               {"team-b", "1g.10gb", "7", 1.0 / 7},
               {"__idle__", "1g.10gb", "8", 1.0 / 7}});
  return api;
}

ReportRequest request(std::vector<std::string> by, const pricing::Pricing* p) {
  ReportRequest r;
  r.from = 0;
  r.to = kEnd;
  r.step = 300;
  r.lookback = 86400;
  r.now = 1e10;
  r.by = std::move(by);
  r.pricing = p;
  r.url = "http://fake";
  return r;
}

pricing::Pricing prices(const std::string& extra) {
  auto p = pricing::parse_pricing(std::string("gpu_models:\n  \"") + kH100 + "\": {gpu_hour: 7.0}\n" + extra, "t.yaml");
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
  return p.ok() ? *p : pricing::Pricing{};
}

const Row& row(const Report& r, std::vector<std::string> key) {
  for (const auto& x : r.rows) {
    if (x.key == key) return x;
  }
  ADD_FAILURE() << "no row " << ::testing::PrintToString(key);
  static Row none;
  return none;
}

TEST(MigReport, SlicesCostTheirShareOfTheGpuPrice) {
  auto api = mig_gpu();
  auto p = prices("");
  auto r = build_report(api, request({"project"}, &p));
  ASSERT_TRUE(r.ok()) << r.error().message;
  // An hour of 3/7 of a GPU at 7.0 per GPU-hour.
  EXPECT_NEAR(row(*r, {"team-a"}).usage.allocated_seconds, 3600.0 * 3 / 7, 1e-9);
  EXPECT_NEAR(row(*r, {"team-a"}).cost.allocation, 3.0, 1e-9);
  EXPECT_NEAR(row(*r, {"team-b"}).cost.allocation, 3.0, 1e-9);
  EXPECT_NEAR(row(*r, {"__idle__"}).cost.allocation, 1.0, 1e-9);
  EXPECT_NEAR(r->total.cost.allocation, 7.0, 1e-9);
  EXPECT_TRUE(r->reconciliation.ok);
  EXPECT_EQ(row(*r, {"team-b"}).mig_profiles, (std::set<std::string>{"1g.10gb", "2g.20gb"}));
  EXPECT_NEAR(row(*r, {"team-b"}).usage.mig_allocated_seconds, 3600.0 * 3 / 7, 1e-9);
  // Busy time on MIG instances is SM activity, kept apart so it is not read as time busy.
  EXPECT_NEAR(row(*r, {"team-b"}).usage.mig_sm_active_seconds, 3600.0 * 3 / 14, 1e-9);
  EXPECT_NEAR(row(*r, {"team-b"}).usage.mig_sm_active_seconds, row(*r, {"team-b"}).usage.busy_seconds, 1e-9);
}

TEST(MigReport, ProfilePriceIsPerInstanceHour) {
  auto api = mig_gpu();
  // The model's own 1g price wins over "*"; the 2g has none and costs its share.
  auto p = prices(
      "mig_profiles:\n  \"*\": {3g.40gb: {instance_hour: 2.5}, 1g.10gb: {instance_hour: 9}}\n"
      "  \"NVIDIA H100 80GB HBM3\": {1g.10gb: {instance_hour: 0.8}}\n");
  auto r = build_report(api, request({"project"}, &p));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_NEAR(row(*r, {"team-a"}).cost.allocation, 2.5, 1e-9);
  EXPECT_NEAR(row(*r, {"team-b"}).cost.allocation, 2.0 + 0.8, 1e-9);
  EXPECT_NEAR(row(*r, {"__idle__"}).cost.allocation, 0.8, 1e-9);
  // Busy time and energy are priced as on any GPU.
  EXPECT_NEAR(row(*r, {"team-a"}).usage.busy_seconds, 3600.0 * 3 / 14, 1e-9);
}

TEST(MigReport, AProfilePriceOnAnA30IsConvertedWithItsFourSlices) {
  // Beside the H100, an A30 (gpu_mig_slices 4) cut 2g + 1g + 1g: team-c on the 2g and a 1g, the
  // other 1g unused.
  auto api = mig_gpu();
  add_mig_gpu(
      api, "GPU-q", kA30, 4,
      {{"team-c", "2g.12gb", "1", 2.0 / 4}, {"team-c", "1g.6gb", "6", 1.0 / 4}, {"__idle__", "1g.6gb", "5", 1.0 / 4}});
  auto p = prices(
      "  \"NVIDIA A30\": {gpu_hour: 4.0}\n"
      "mig_profiles:\n  \"*\": {1g.6gb: {instance_hour: 1.2}, 1g.10gb: {instance_hour: 0.8}}\n");
  auto r = build_report(api, request({"project"}, &p));
  ASSERT_TRUE(r.ok()) << r.error().message;
  // An hour of a 1g.6gb costs its instance-hour price (by 7 slices it would cost 2.1); the 2g
  // its share, 2/4 of 4.0.
  EXPECT_NEAR(row(*r, {"team-c"}).usage.allocated_seconds, 3600.0 * 3 / 4, 1e-9);
  EXPECT_NEAR(row(*r, {"team-c"}).cost.allocation, 1.2 + 2.0, 1e-9);
  // The H100's 1g.10gb still converts with 7: an hour of it costs 0.8.
  EXPECT_NEAR(row(*r, {"team-b"}).cost.allocation, 2.0 + 0.8, 1e-9);
  EXPECT_NEAR(row(*r, {"__idle__"}).cost.allocation, 1.2 + 0.8, 1e-9);
}

TEST(MigReport, GroupsByProfile) {
  auto api = mig_gpu();
  auto p = prices("mig_profiles:\n  \"*\": {3g.40gb: {instance_hour: 2.5}}\n");
  auto r = build_report(api, request({"mig_profile"}, &p));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_NEAR(row(*r, {"3g.40gb"}).cost.allocation, 2.5, 1e-9);
  EXPECT_NEAR(row(*r, {"2g.20gb"}).cost.allocation, 2.0, 1e-9);
  // The unused 1g keeps its profile in an idle row of its own.
  EXPECT_NEAR(row(*r, {"1g.10gb"}).usage.allocated_seconds, 3600.0 / 7, 1e-9);
  const Row* idle = nullptr;
  for (const auto& x : r->rows) {
    if (x.idle) idle = &x;
  }
  ASSERT_NE(idle, nullptr);
  EXPECT_EQ(idle->key, std::vector<std::string>{"1g.10gb"});
  EXPECT_EQ(r->rows.size(), 4u);

  auto j = nlohmann::json::parse(render_json(*r));
  EXPECT_EQ(j["rows"][0]["key"]["mig_profile"], "3g.40gb");
  EXPECT_EQ(j["rows"][0]["mig_profiles"], nlohmann::json::array({"3g.40gb"}));
  EXPECT_NEAR(j["total"]["mig_allocated_seconds"].get<double>(), 3600, 1e-9);
  EXPECT_NE(render_table(*r, false).find("MIG SLICE GPU-H"), std::string::npos);
  EXPECT_NE(render_csv(*r).find(",mig_allocated_gpu_hours,mig_profiles,mig_sm_active_gpu_hours"), std::string::npos);
  // Every busy second of this GPU is on an instance.
  EXPECT_NEAR(j["total"]["mig_sm_active_seconds"].get<double>(), j["total"]["busy_seconds"].get<double>(), 1e-9);
  EXPECT_NE(render_table(*r, false).find("MIG SM-ACTIVE GPU-H"), std::string::npos);
}

TEST(MigReport, ProfileDimensionIsKnown) {
  EXPECT_TRUE(is_dimension("mig_profile"));
  EXPECT_FALSE(is_dimension("mig_uuid"));
}

}  // namespace
}  // namespace gpumeter::report
