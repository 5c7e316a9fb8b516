// build_report against an in-memory API: grouping, prices, idle policies, budgets,
// reconciliation and the warnings about gaps, resets and missing data.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

#include <fmt/format.h>

#include "fake_prom_api.h"
#include "pricing/pricing.h"
#include "report/report_builder.h"

namespace gpumeter::report {
namespace {

using testing::FakePromApi;
using testing::RawSeries;

constexpr double kEnd = 3600;

// A counter growing at `rate` per second from t=0, sampled every 15 s up to kEnd.
std::vector<Sample> linear(double rate, double from = 0, double to = kEnd) {
  std::vector<Sample> out;
  for (double t = from; t <= to; t += 15) out.push_back({t, rate * (t - from)});
  return out;
}

struct Owner {
  std::string uuid, node, project, user;
  double share;  // of the GPU's time
};

// Two GPUs on two nodes; GPU-a: team-a 75 %, idle 25 %; GPU-b: team-b 50 %, team-a 25 %, idle 25 %.
FakePromApi fleet() {
  FakePromApi api;
  const std::vector<Owner> owners = {{"GPU-a", "n1:9400", "team-a", "ann", 0.75},
                                     {"GPU-a", "n1:9400", "__idle__", "", 0.25},
                                     {"GPU-b", "n2:9400", "team-b", "bob", 0.5},
                                     {"GPU-b", "n2:9400", "team-a", "ann", 0.25},
                                     {"GPU-b", "n2:9400", "__idle__", "", 0.25}};
  for (const auto& o : owners) {
    Labels l{{"uuid", o.uuid}, {"gpu", "0"}, {"instance", o.node}, {"project", o.project}, {"user", o.user}};
    const bool idle = o.project == "__idle__";
    api.data.push_back({"gpu_allocated_seconds_total", l, linear(o.share)});
    api.data.push_back({"gpu_busy_seconds_total", l, linear(idle ? 0 : o.share / 2)});
    api.data.push_back({"gpu_memory_byte_seconds_total", l, linear(idle ? 0 : 1e9)});
    api.data.push_back({"gpu_attributed_energy_joules_total", l, linear(idle ? 50 : 400 * o.share)});
  }
  for (const auto& [uuid, node] : {std::pair<std::string, std::string>{"GPU-a", "n1:9400"}, {"GPU-b", "n2:9400"}}) {
    Labels l{{"uuid", uuid}, {"gpu", "0"}, {"instance", node}};
    api.data.push_back({"gpumeter_ledger_covered_seconds_total", l, linear(1)});
    api.data.push_back({"gpumeter_ledger_gap_seconds_total", l, linear(0)});
    Labels info = l;
    info["model"] = "NVIDIA H100 80GB HBM3";
    api.data.push_back({"gpu_info", info, linear(0)});
  }
  return api;
}

ReportRequest request(std::vector<std::string> by, const pricing::Pricing* p = nullptr) {
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

pricing::Pricing prices(std::string extra = "") {
  auto p = pricing::parse_pricing(
      "currency: USD\ngpu_models:\n  \"NVIDIA H100 80GB HBM3\": {gpu_hour: 4.0, busy_gpu_hour: 2.0}\n"
      "energy: {kwh: 0.5, pue: 1.2}\n" +
          extra,
      "test.yaml");
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

TEST(BuildReport, GroupsAndReconciles) {
  auto api = fleet();
  auto r = build_report(api, request({"project"}));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_DOUBLE_EQ(row(*r, {"team-a"}).usage.allocated_seconds, 3600 * (0.75 + 0.25));
  EXPECT_DOUBLE_EQ(row(*r, {"team-b"}).usage.allocated_seconds, 3600 * 0.5);
  EXPECT_TRUE(row(*r, {"__idle__"}).idle);
  EXPECT_DOUBLE_EQ(row(*r, {"team-a"}).usage.busy_seconds, 3600 * 0.5);
  EXPECT_TRUE(r->reconciliation.ok);
  EXPECT_DOUBLE_EQ(r->reconciliation.covered_seconds, 7200);
  EXPECT_DOUBLE_EQ(r->reconciliation.idle_seconds, 1800);
  EXPECT_DOUBLE_EQ(r->reconciliation.owners_seconds, 5400);
  EXPECT_EQ(r->rows.front().key, std::vector<std::string>{"team-a"});  // most used first
  EXPECT_EQ(r->timeline.starts.size(), 12u);
  EXPECT_TRUE(r->warnings.empty()) << r->warnings.front().message;

  auto by_node = build_report(api, request({"node", "user"}));
  ASSERT_TRUE(by_node.ok());
  EXPECT_DOUBLE_EQ(row(*by_node, {"n2:9400", "ann"}).usage.allocated_seconds, 900);
  EXPECT_DOUBLE_EQ(row(*by_node, {"n1:9400", "__idle__"}).usage.allocated_seconds, 900);
  auto by_model = build_report(api, request({"model"}));
  ASSERT_TRUE(by_model.ok());
  // Idle time stays a row of its own even when no owner dimension is asked for.
  ASSERT_EQ(by_model->rows.size(), 2u);
  EXPECT_FALSE(by_model->rows[0].idle);
  EXPECT_DOUBLE_EQ(by_model->rows[0].usage.allocated_seconds, 5400);
  EXPECT_TRUE(by_model->rows[1].idle);
  EXPECT_DOUBLE_EQ(by_model->rows[1].usage.allocated_seconds, 1800);
}

// An HA pair's two copies of every series in one store, told apart by `replica`: the report is
// the one-copy report, and says what it left out.
TEST(BuildReport, AnHaPairsCopiesAreBilledOnce) {
  const auto one = fleet();
  auto two = fleet();
  two.data.clear();
  for (const char* replica : {"a", "b"}) {
    for (auto s : one.data) {
      s.labels["replica"] = replica;
      two.data.push_back(s);
    }
  }
  auto api = one;
  auto want = build_report(api, request({"project", "node"}));
  auto got = build_report(two, request({"project", "node"}));
  ASSERT_TRUE(want.ok() && got.ok());
  ASSERT_EQ(got->rows.size(), want->rows.size());
  for (std::size_t i = 0; i < want->rows.size(); ++i) {
    EXPECT_EQ(got->rows[i].key, want->rows[i].key);
    EXPECT_EQ(got->rows[i].usage.allocated_seconds, want->rows[i].usage.allocated_seconds);
    EXPECT_EQ(got->rows[i].usage.energy_joules, want->rows[i].usage.energy_joules);
  }
  EXPECT_TRUE(got->reconciliation.ok);
  EXPECT_EQ(got->reconciliation.covered_seconds, want->reconciliation.covered_seconds);
  ASSERT_EQ(got->warnings.size(), 1u);
  EXPECT_EQ(got->warnings[0].kind, "replica");
  EXPECT_NE(got->warnings[0].message.find("2 copies"), std::string::npos) << got->warnings[0].message;

  // Told there are no replicas, the report adds both copies up.
  auto request_none = request({"project"});
  request_none.replica_labels.clear();
  auto doubled = build_report(two, request_none);
  ASSERT_TRUE(doubled.ok());
  EXPECT_DOUBLE_EQ(row(*doubled, {"team-b"}).usage.allocated_seconds, 2 * 3600 * 0.5);
}

// Each cluster's Prometheus sets its `cluster` label; idle time keeps its cluster too.
TEST(BuildReport, GroupsByCluster) {
  auto api = fleet();
  for (auto& s : api.data) s.labels["cluster"] = s.labels.at("uuid") == "GPU-a" ? "east" : "west";
  auto r = build_report(api, request({"cluster", "project"}));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_DOUBLE_EQ(row(*r, {"east", "team-a"}).usage.allocated_seconds, 3600 * 0.75);
  EXPECT_DOUBLE_EQ(row(*r, {"west", "team-a"}).usage.allocated_seconds, 3600 * 0.25);
  EXPECT_DOUBLE_EQ(row(*r, {"west", "__idle__"}).usage.allocated_seconds, 3600 * 0.25);
  EXPECT_EQ(r->rows.size(), 5u);
}

TEST(BuildReport, PricesEveryComponent) {
  auto api = fleet();
  auto p = prices();
  auto r = build_report(api, request({"project"}, &p));
  ASSERT_TRUE(r.ok()) << r.error().message;
  const Row& a = row(*r, {"team-a"});
  EXPECT_NEAR(a.cost.allocation, 1.0 * 4.0, 1e-12);                   // 1 GPU-h allocated
  EXPECT_NEAR(a.cost.utilization, 0.5 * 2.0, 1e-12);                  // 0.5 GPU-h busy
  EXPECT_NEAR(a.cost.energy, 400 * 3600 / 3.6e6 * 0.5 * 1.2, 1e-12);  // 400 W for 1 GPU-h
  const Row& idle = row(*r, {"__idle__"});
  EXPECT_NEAR(idle.cost.allocation, 0.5 * 4.0, 1e-12);
  EXPECT_NEAR(r->total.cost.total(), a.cost.total() + row(*r, {"team-b"}).cost.total() + idle.cost.total(), 1e-9);
}

// Each series' energy at its site's PUE and carbon intensity in force at the time: the
// cluster label names the site, "*" covers the others (docs/chargeback.md, "Energy and carbon").
TEST(BuildReport, EnergyAtTheFacilityAndItsCarbonPerSiteAndDate) {
  auto api = fleet();
  for (auto& s : api.data) s.labels["cluster"] = s.labels.at("uuid") == "GPU-a" ? "east" : "west";
  auto p = prices(
      "sites:\n"
      "  east: [{pue: 1.1, gco2e_per_kwh: 100}, {from: \"1970-01-01T00:30:00Z\", pue: 1.1, gco2e_per_kwh: 300}]\n"
      "  \"*\": {pue: 1.5, gco2e_per_kwh: 500}\n");
  auto r = build_report(api, request({"project"}, &p));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->footprint);
  const Row& a = row(*r, {"team-a"});
  // 300 W on east for an hour (half at 100 g/kWh, half at 300), 100 W on west at "*".
  EXPECT_NEAR(a.usage.facility_energy_joules, 300 * 3600 * 1.1 + 100 * 3600 * 1.5, 1e-6);
  EXPECT_NEAR(a.usage.co2e_kg, (0.15 * 1.1 * 100 + 0.15 * 1.1 * 300 + 0.1 * 1.5 * 500) / 1000, 1e-12);
  double co2e = 0, facility = 0, energy = 0;
  for (const Row& x : r->rows) {
    co2e += x.usage.co2e_kg;
    facility += x.usage.facility_energy_joules;
    energy += x.usage.energy_joules;
  }
  EXPECT_NEAR(r->total.usage.co2e_kg, co2e, 1e-12);
  EXPECT_NEAR(r->total.usage.facility_energy_joules, facility, 1e-6);
  EXPECT_NEAR(r->total.usage.energy_joules, energy, 1e-6);
  // Without sites nothing is computed; a cluster no entry covers fails, naming it.
  auto plain = prices();
  auto none = build_report(api, request({"project"}, &plain));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->footprint);
  EXPECT_EQ(row(*none, {"team-a"}).usage.co2e_kg, 0);
  auto east_only = prices("sites: {east: {gco2e_per_kwh: 100}}\n");
  auto missing = build_report(api, request({"project"}, &east_only));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, 2);
  EXPECT_NE(missing.error().message.find("\"west\""), std::string::npos) << missing.error().message;
}

TEST(BuildReport, IdleSpreadByNodeMovesIdleCostToThatNodesOwners) {
  auto api = fleet();
  auto separate = prices();
  auto spread = prices("idle: {policy: spread-by-node}\n");
  auto s = build_report(api, request({"project"}, &separate));
  auto r = build_report(api, request({"project"}, &spread));
  ASSERT_TRUE(s.ok() && r.ok());
  EXPECT_NEAR(r->total.cost.total(), s->total.cost.total(), 1e-9);  // moved, not created
  EXPECT_NEAR(row(*r, {"__idle__"}).cost.total(), 0, 1e-12);
  EXPECT_DOUBLE_EQ(row(*r, {"__idle__"}).usage.allocated_seconds, 1800);  // idle time still shown
  // Node n1's idle cost goes to team-a alone; n2's is split 2:1 between team-b and team-a.
  const double idle_n1 = row(*s, {"__idle__"}).cost.total() / 2, idle_n2 = idle_n1;
  EXPECT_NEAR(row(*r, {"team-a"}).cost.idle, idle_n1 + idle_n2 / 3, 1e-9);
  EXPECT_NEAR(row(*r, {"team-b"}).cost.idle, idle_n2 * 2 / 3, 1e-9);
}

TEST(BuildReport, IdleSpreadByPoolWarnsAboutNodesInNoPool) {
  auto api = fleet();
  auto p = prices("idle:\n  policy: spread-by-pool\n  pools: {first: \"n1:.*\"}\n");
  auto r = build_report(api, request({"project"}, &p));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_GT(row(*r, {"__idle__"}).cost.total(), 0);  // n2's idle stays
  bool warned = false;
  for (const auto& w : r->warnings) warned |= w.kind == "pricing" && w.message.find("n2:9400") != std::string::npos;
  EXPECT_TRUE(warned);
}

// GPU-b was faulty for its last quarter hour: its owners' series then carry fault="true".
FakePromApi fleet_with_a_faulty_gpu() {
  FakePromApi api = fleet();
  for (const auto& [project, user, share] :
       {std::tuple<std::string, std::string, double>{"team-b", "bob", 0.5}, {"__idle__", "", 0.5}}) {
    Labels l{{"uuid", "GPU-b"},    {"gpu", "0"},   {"instance", "n2:9400"},
             {"project", project}, {"user", user}, {"fault", "true"}};
    const bool idle = project == "__idle__";
    api.data.push_back({"gpu_allocated_seconds_total", l, linear(share, 2700)});
    api.data.push_back({"gpu_busy_seconds_total", l, linear(idle ? 0 : share / 2, 2700)});
    api.data.push_back({"gpu_memory_byte_seconds_total", l, linear(idle ? 0 : 1e9, 2700)});
    api.data.push_back({"gpu_attributed_energy_joules_total", l, linear(idle ? 50 : 400 * share, 2700)});
  }
  // Its healthy series stop growing then, and its covered seconds count on.
  for (auto& s : api.data) {
    if (s.labels["uuid"] != "GPU-b" || s.labels.count("fault") || !s.labels.count("project")) continue;
    for (auto& sample : s.samples) sample.v = std::min(sample.v, s.samples[2700 / 15].v);
  }
  return api;
}

TEST(BuildReport, FaultyTimeIsBilledOrKeptApartByPolicy) {
  auto api = fleet_with_a_faulty_gpu();
  const auto bill = prices();
  EXPECT_EQ(bill.faulty_policy, pricing::FaultyPolicy::kBill);
  auto billed = build_report(api, request({"project"}, &bill));
  ASSERT_TRUE(billed.ok()) << billed.error().message;
  // Billed: the faulty quarter hour is team-b's like the rest.
  EXPECT_DOUBLE_EQ(row(*billed, {"team-b"}).usage.allocated_seconds, 2700 * 0.5 + 900 * 0.5);
  EXPECT_EQ(billed->faulty_policy, "bill");
  EXPECT_EQ(billed->reconciliation.faulty_seconds, 0);
  EXPECT_TRUE(billed->reconciliation.ok);

  const auto exclude = prices("faulty: exclude\n");
  auto kept = build_report(api, request({"project", "node"}, &exclude));
  ASSERT_TRUE(kept.ok()) << kept.error().message;
  const Row& b = row(*kept, {"team-b", "n2:9400"});
  EXPECT_DOUBLE_EQ(b.usage.allocated_seconds, 2700 * 0.5);
  const Row& faulty = row(*kept, {"__faulty__", "n2:9400"});  // a node is no owner: it stays
  EXPECT_TRUE(faulty.faulty);
  EXPECT_FALSE(faulty.idle);
  // team-b's and idle's quarter hour on GPU-b, priced as any time is.
  EXPECT_DOUBLE_EQ(faulty.usage.allocated_seconds, 900);
  EXPECT_NEAR(faulty.cost.allocation, 900 / 3600.0 * 4.0, 1e-12);
  EXPECT_NEAR(b.cost.allocation + faulty.cost.allocation,
              row(*billed, {"team-b"}).cost.allocation + 900 * 0.5 / 3600 * 4.0, 1e-9);
  // Owners + idle + faulty = capacity.
  const auto& rec = kept->reconciliation;
  EXPECT_TRUE(rec.ok);
  EXPECT_DOUBLE_EQ(rec.faulty_seconds, 900);
  EXPECT_DOUBLE_EQ(rec.owners_seconds + rec.idle_seconds + rec.faulty_seconds, rec.covered_seconds);
  EXPECT_DOUBLE_EQ(rec.idle_seconds, 1800 - 0.25 * 900);
  // Spread idle never lands on the faulty line.
  const auto spread = prices("faulty: exclude\nidle: {policy: spread-by-node}\n");
  auto spread_report = build_report(api, request({"project"}, &spread));
  ASSERT_TRUE(spread_report.ok());
  EXPECT_EQ(row(*spread_report, {"__faulty__"}).cost.idle, 0);
}

TEST(BuildReport, AnUnknownFaultyPolicyIsRefused) {
  auto p = pricing::parse_pricing("gpu_models: {\"*\": {gpu_hour: 1}}\nfaulty: forgive\n", "test.yaml");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("expected bill or exclude, got 'forgive'"), std::string::npos) << p.error().message;
}

TEST(BuildReport, BudgetsAreProratedToThePeriod) {
  auto api = fleet();
  auto p = prices("budgets: {team-a: 1000}\n");
  auto r = build_report(api, request({"project"}, &p));
  ASSERT_TRUE(r.ok());
  const Row& a = row(*r, {"team-a"});
  ASSERT_TRUE(a.budget);
  EXPECT_NEAR(a.budget->for_period, 1000 * 3600 / (30.4375 * 86400), 1e-12);
  EXPECT_NEAR(a.budget->used_ratio, a.cost.total() / a.budget->for_period, 1e-12);
  EXPECT_FALSE(row(*r, {"team-b"}).budget);
}

TEST(BuildReport, AModelWithoutAPriceFailsNamingIt) {
  auto api = fleet();
  auto p = pricing::parse_pricing("gpu_models:\n  \"NVIDIA A100-SXM4-80GB\": {gpu_hour: 2}\n", "p.yaml");
  ASSERT_TRUE(p.ok()) << p.error().message;
  auto r = build_report(api, request({"project"}, &*p));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, 2);
  EXPECT_NE(r.error().message.find("p.yaml: no price for GPU model \"NVIDIA H100 80GB HBM3\" (2 GPUs"),
            std::string::npos)
      << r.error().message;
}

TEST(BuildReport, NoLedgerDataIsAnError) {
  FakePromApi api;
  auto r = build_report(api, request({"project"}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("has no gpumeter ledger data"), std::string::npos);
}

TEST(BuildReport, GapsHolesResetsAndMissingSeriesAreWarnings) {
  auto api = fleet();
  for (auto& s : api.data) {
    if (s.name == "gpumeter_ledger_gap_seconds_total" && s.labels.at("uuid") == "GPU-a") {
      for (auto& x : s.samples) x.v = x.t >= 1200 ? 120 : 0;  // 120 s lost around 20 min
    }
    if (s.labels.count("uuid") && s.labels.at("uuid") == "GPU-b") {
      std::erase_if(s.samples, [](const Sample& x) { return x.t > 1800 && x.t < 2700; });  // scrape gap
    }
  }
  Labels lone{{"uuid", "GPU-c"}, {"gpu", "1"}, {"instance", "n2:9400"}, {"model", "NVIDIA H100 80GB HBM3"}};
  api.data.push_back({"gpu_info", lone, linear(0)});
  auto r = build_report(api, request({"project"}));
  ASSERT_TRUE(r.ok()) << r.error().message;
  std::map<std::string, std::string> kinds;
  for (const auto& w : r->warnings) kinds[w.kind] += w.message + "\n";
  EXPECT_NE(kinds["gap"].find("GPU GPU-a on n1:9400: the agent came back between 1970-01-01T00:15:00Z and "
                              "1970-01-01T00:20:00Z from 120 s it could not integrate"),
            std::string::npos)
      << kinds["gap"];
  EXPECT_NE(kinds["missing-data"].find("no samples of GPU GPU-b on n2:9400 between 1970-01-01T00:35:00Z and "
                                       "1970-01-01T00:40:00Z"),
            std::string::npos)
      << kinds["missing-data"];
  EXPECT_NE(kinds["missing-series"].find("GPU GPU-c on n2:9400"), std::string::npos);
  EXPECT_DOUBLE_EQ(r->reconciliation.gap_seconds, 120);
  EXPECT_TRUE(r->reconciliation.ok);
  // The scrape gap loses nothing: the counters carry across it.
  EXPECT_DOUBLE_EQ(row(*r, {"team-b"}).usage.allocated_seconds, 1800);
}

TEST(BuildReport, ALedgerRestartIsCountedOnBothSidesAndNamed) {
  auto api = fleet();
  for (auto& s : api.data) {
    if (s.labels.count("uuid") && s.labels.at("uuid") == "GPU-a" && s.name != "gpu_info") {
      for (auto& x : s.samples) {
        if (x.t >= 2000) x.v = x.v * (x.t - 1995) / x.t;  // restarted from zero at 1995 s
      }
    }
  }
  auto r = build_report(api, request({"project"}));
  ASSERT_TRUE(r.ok()) << r.error().message;
  bool named = false;
  for (const auto& w : r->warnings) named |= w.kind == "reset" && w.gpu == "GPU-a";
  EXPECT_TRUE(named);
  // team-a on GPU-a: 0.75/s up to the last sample before the restart (1995 s), then from zero.
  const double a_on_gpu_a = 0.75 * 1995 + 0.75 * (3600 - 1995);
  EXPECT_NEAR(row(*r, {"team-a"}).usage.allocated_seconds, a_on_gpu_a + 900, 1e-9);
  EXPECT_TRUE(r->reconciliation.ok);
}

TEST(BuildReport, AnOwnerBackFromZeroAboveItsOldTotalWithinAStepIsCounted) {
  // Pruned after its retention, back ten minutes later from zero, and past its old total by
  // the next step's boundary: only resets() over the raw samples can see it.
  auto api = fleet();
  Labels l{{"uuid", "GPU-b"}, {"gpu", "0"}, {"instance", "n2:9400"}, {"project", "team-c"}, {"user", "cat"}};
  std::vector<Sample> samples = linear(0.25, 0, 600);                  // up to 150 s at 600 s
  for (const auto& x : linear(1.0, 1200, 1800)) samples.push_back(x);  // back from 0 at 1200 s: 600 s by 1800 s
  for (const char* m : {"gpu_allocated_seconds_total", "gpu_busy_seconds_total", "gpu_memory_byte_seconds_total",
                        "gpu_attributed_energy_joules_total"}) {
    api.data.push_back({m, l, samples});
  }
  auto req = request({"project"});
  req.step = 1800;  // one step holds the whole return
  auto r = build_report(api, req);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_DOUBLE_EQ(row(*r, {"team-c"}).usage.allocated_seconds, 150 + 600);
}

// Adds an owner's series of `metric` on GPU-b, growing at `rate` per second.
void add_owner_series(FakePromApi& api, const std::string& metric, const std::string& project, double rate) {
  Labels l{{"uuid", "GPU-b"}, {"gpu", "0"}, {"instance", "n2:9400"}, {"project", project}, {"user", "eve"}};
  api.data.push_back({metric, l, linear(rate)});
}

std::string error_message(FakePromApi& api, const ReportRequest& req) {
  auto r = build_report(api, req);
  if (r.ok()) return "no error";
  EXPECT_NE(r.error().code, 2) << r.error().message;  // exit 1: the data, not the input
  return r.error().message;
}

// A busy-only "ghost" owner in some answers was billed 10,080 busy seconds with nothing
// allocated, and exit 0. A process present is allocated time in the same window as its busy
// time, so an owner busy with no allocated second is an incomplete answer.
// Read by remote read, each batch's owners are judged as it is added and then dropped: the
// same finding, from a check that keeps no owner of a batch already read.
TEST(BuildReport, AnOwnerBusyWithNoAllocatedTimeFailsTheReport) {
  for (bool remote : {false, true}) {
    auto api = fleet();
    api.remote_read = remote;
    add_owner_series(api, "gpu_busy_seconds_total", "ghost", 0.1);
    EXPECT_NE(error_message(api, request({"project"}))
                  .find("GPU GPU-b on n2:9400: project=\"ghost\", user=\"eve\" has 360.000 busy seconds in the "
                        "period and no allocated second; the answers of http://fake are incomplete or inconsistent"),
              std::string::npos)
        << remote;
  }
}

// Busy time is the integral of a utilization of at most 1: the owners of a GPU cannot be busy
// longer than the ledger covered it.
TEST(BuildReport, MoreBusyTimeThanTheGpuWasCoveredFailsTheReport) {
  for (bool remote : {false, true}) {
    auto api = fleet();
    api.remote_read = remote;
    add_owner_series(api, "gpu_allocated_seconds_total", "team-c", 0.01);
    add_owner_series(api, "gpu_busy_seconds_total", "team-c", 0.9);  // beside 0.25 and 0.125: more than 1
    EXPECT_NE(error_message(api, request({"project"}))
                  .find("GPU GPU-b on n2:9400: its owners have 4590.000 busy seconds in the period, more than the "
                        "3600.000 s its ledger covered"),
              std::string::npos)
        << remote;
  }
}

// A fleet of 135 GPUs over 241 points is read in batches of 67 GPUs: every batch is billed,
// each exactly once, and a check fails the report whatever batch its GPU is in.
TEST(BuildReport, AFleetLargerThanOneBatchIsBilledWholeAndChecked) {
  auto many = [](bool overbusy) {
    FakePromApi api;
    for (int g = 0; g < 135; ++g) {
      const std::string uuid = fmt::format("GPU-{:03}", g), node = fmt::format("n{}:9400", g / 8);
      const Labels gpu{{"uuid", uuid}, {"gpu", std::to_string(g % 8)}, {"instance", node}};
      Labels owner = gpu, idle = gpu;
      owner.insert({{"project", fmt::format("p{}", g % 3)}, {"user", "u"}});
      idle.insert({{"project", "__idle__"}, {"user", ""}});
      const double busy = overbusy && g == 130 ? 1.5 : 0.25;
      api.data.push_back({"gpu_allocated_seconds_total", owner, linear(0.5)});
      api.data.push_back({"gpu_busy_seconds_total", owner, linear(busy)});
      api.data.push_back({"gpu_memory_byte_seconds_total", owner, linear(1e9)});
      api.data.push_back({"gpu_attributed_energy_joules_total", owner, linear(300)});
      api.data.push_back({"gpu_allocated_seconds_total", idle, linear(0.5)});
      api.data.push_back({"gpu_busy_seconds_total", idle, linear(0)});
      api.data.push_back({"gpu_memory_byte_seconds_total", idle, linear(0)});
      api.data.push_back({"gpu_attributed_energy_joules_total", idle, linear(50)});
      api.data.push_back({"gpumeter_ledger_covered_seconds_total", gpu, linear(1)});
      api.data.push_back({"gpumeter_ledger_gap_seconds_total", gpu, linear(0)});
      Labels info = gpu;
      info["model"] = "NVIDIA H100 80GB HBM3";
      api.data.push_back({"gpu_info", info, linear(0)});
    }
    return api;
  };
  for (bool remote : {false, true}) {
    auto api = many(false);
    api.remote_read = remote;
    auto every_sample = request({"project"});
    every_sample.step = 15;
    std::vector<std::string> batches;
    auto r = build_report(api, every_sample, [&](std::string_view line) {
      if (line.starts_with("owners' counters")) batches.emplace_back(line);
    });
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(batches, (std::vector<std::string>{"owners' counters of 67 of 135 GPUs read",
                                                 "owners' counters of 134 of 135 GPUs read",
                                                 "owners' counters of 135 of 135 GPUs read"}));
    for (int p = 0; p < 3; ++p) {
      const Row& x = row(*r, {fmt::format("p{}", p)});
      EXPECT_DOUBLE_EQ(x.usage.allocated_seconds, 45 * 0.5 * kEnd) << p;
      EXPECT_DOUBLE_EQ(x.usage.busy_seconds, 45 * 0.25 * kEnd) << p;
      EXPECT_DOUBLE_EQ(x.usage.energy_joules, 45 * 300 * kEnd) << p;
    }
    EXPECT_DOUBLE_EQ(row(*r, {"__idle__"}).usage.allocated_seconds, 135 * 0.5 * kEnd);
    EXPECT_TRUE(r->reconciliation.ok);
    EXPECT_DOUBLE_EQ(r->reconciliation.covered_seconds, 135 * kEnd);
    EXPECT_TRUE(r->warnings.empty()) << r->warnings.front().message;

    auto bad = many(true);
    bad.remote_read = remote;
    EXPECT_NE(error_message(bad, every_sample).find("GPU GPU-130 on n16:9400: its owners have"), std::string::npos);
  }
}

// VictoriaMetrics refuses a query longer than 16 KiB (-search.maxQueryLen): a short period of a
// 420-GPU fleet, whose owners all come back after a pause in the same step, once asked every
// GPU in one batch (17 KiB) and every GPU's raw samples of that step in one request.
TEST(BuildReport, NoQueryIsLongerThanVictoriaMetricsAccepts) {
  FakePromApi api;
  api.backend_name = "VictoriaMetrics";
  for (int g = 0; g < 420; ++g) {
    const std::string uuid = fmt::format("GPU-{:08x}-0000-0000-0000-{:012x}", g, g);
    const Labels gpu{{"uuid", uuid}, {"gpu", "0"}, {"instance", fmt::format("n{}:9400", g / 8)}};
    Labels owner = gpu;
    owner.insert({{"project", "p"}, {"user", "u"}});
    // Present, absent over the second step, back within the third.
    std::vector<Sample> s = linear(0.5, 0, 1000);
    const auto back = linear(0.5, 2500, kEnd);
    s.insert(s.end(), back.begin(), back.end());
    for (const char* m : {"gpu_allocated_seconds_total", "gpu_busy_seconds_total", "gpu_memory_byte_seconds_total",
                          "gpu_attributed_energy_joules_total"}) {
      api.data.push_back({m, owner, s});
    }
    api.data.push_back({"gpumeter_ledger_covered_seconds_total", gpu, linear(1)});
    api.data.push_back({"gpumeter_ledger_gap_seconds_total", gpu, linear(0)});
    Labels info = gpu;
    info["model"] = "NVIDIA H100 80GB HBM3";
    api.data.push_back({"gpu_info", info, linear(0)});
  }
  auto req = request({"project"});
  req.step = 1200;
  auto r = build_report(api, req);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_LE(api.longest_query, 16384u);
  EXPECT_GT(api.longest_query, 10000u);  // the batches are as large as the limit allows
  // The last samples before the pause and at the end: 990 s and 1095 s after each start.
  EXPECT_DOUBLE_EQ(row(*r, {"p"}).usage.allocated_seconds, 420 * 0.5 * (990 + 1095));
}

// Busy time above an owner's own allocated time is no error: allocation is split evenly between
// the processes present, busy time by their SM shares (a 90% process beside a 10% one).
TEST(BuildReport, BusyAboveAnOwnersOwnAllocationIsNoError) {
  auto api = fleet();
  for (auto& s : api.data) {
    if (s.name == "gpu_busy_seconds_total" && s.labels.at("uuid") == "GPU-b") {
      s.samples = linear(s.labels.at("project") == "team-b" ? 0.7 : 0.05);  // team-b holds 0.5 of GPU-b
    }
  }
  auto r = build_report(api, request({"project"}));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_DOUBLE_EQ(row(*r, {"team-b"}).usage.busy_seconds, 0.7 * 3600);
}

// The agent exports an owner's four counters in every scrape: one series missing from some
// answers while its siblings are there lost its usage with exit 0. A counter with no series at
// all (dropped by relabelling) is not compared.
TEST(BuildReport, AnOwnersCounterMissingWhereItsOthersArePresentFailsTheReport) {
  auto api = fleet();
  for (auto& s : api.data) {
    if (s.name == "gpu_busy_seconds_total" && s.labels.at("project") == "team-b") {
      std::erase_if(s.samples, [](const Sample& x) { return x.t >= 1500 && x.t <= 1800; });
    }
  }
  EXPECT_NE(error_message(api, request({"project"}))
                .find("GPU GPU-b on n2:9400: project=\"team-b\", user=\"bob\": gpu_busy_seconds_total has no sample "
                      "at 1970-01-01T00:30:00Z, where gpu_allocated_seconds_total has one"),
            std::string::npos);
  auto without_memory = fleet();
  std::erase_if(without_memory.data, [](const RawSeries& s) { return s.name == "gpu_memory_byte_seconds_total"; });
  auto r = build_report(without_memory, request({"project"}));
  EXPECT_TRUE(r.ok()) << r.error().message;
}

// 1e308 as the last sample of series that add up: the totals were inf and the JSON null, with
// exit 0. A total or an amount that is not finite fails the report, naming the row.
TEST(BuildReport, TotalsThatAreNotFiniteFailTheReport) {
  auto api = fleet();
  for (auto& s : api.data) {
    if (s.name == "gpu_allocated_seconds_total" && s.labels.at("project") == "team-a") s.samples.back().v = 1e308;
  }
  EXPECT_NE(error_message(api, request({"project"}))
                .find("the row team-a is not a finite number (allocated seconds inf): the answers of http://fake hold "
                      "counter values no ledger has"),
            std::string::npos);
  // One such sample is a finite usage, but priced at the largest price the pricing file takes it
  // is not a finite amount.
  auto one = fleet();
  for (auto& s : one.data) {
    if (s.name == "gpu_allocated_seconds_total" && s.labels.at("uuid") == "GPU-a" &&
        s.labels.at("project") == "team-a") {
      s.samples.back().v = 1e308;
    }
  }
  auto p = pricing::parse_pricing("gpu_models:\n  \"*\": {gpu_hour: 1e9}\n", "p.yaml");
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_NE(error_message(one, request({"project"}, &*p)).find("the row team-a is not a finite number (cost inf)"),
            std::string::npos);
}

// Memory and energy counters restart with their owner too, and are read by bounds of their
// own: the ledger restart of ALedgerRestartIsCountedOnBothSidesAndNamed passes, and a 10% dip of
// an energy counter that had counted a gigajoule fails.
TEST(BuildReport, ADipInAnEnergyCounterFailsTheReport) {
  auto api = fleet();
  for (auto& s : api.data) {
    if (s.name == "gpu_attributed_energy_joules_total" && s.labels.at("project") == "team-b") {
      for (auto& x : s.samples) x.v = (1e9 + x.v) * (x.t >= 1800 ? 0.9 : 1.0);
    }
  }
  EXPECT_NE(error_message(api, request({"project"})).find("gpu_attributed_energy_joules_total{"), std::string::npos);
}

}  // namespace
}  // namespace gpumeter::report
