// `--collector.<name>` and `--no-collector.<name>`: one pair per collector, as node_exporter
// spells them; an unset switch leaves the config and the default to decide.

#include "cli/collector_flags.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpumeter::cli {
namespace {

CollectorSwitches parse(std::vector<std::string> args) {
  CLI::App app;
  CollectorSwitches switches;
  add_collector_flags(app, switches);
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
  app.parse(args);
  return switches;
}

TEST(CollectorFlags, EveryCollectorHasBothFlags) {
  CLI::App app;
  CollectorSwitches switches;
  add_collector_flags(app, switches);
  for (const auto& c : kCollectors) {
    EXPECT_NE(app.get_option_no_throw("--collector." + std::string(c.name)), nullptr) << c.name;
    EXPECT_NE(app.get_option_no_throw("--no-collector." + std::string(c.name)), nullptr) << c.name;
  }
}

TEST(CollectorFlags, SwitchesOnlyWhatIsGiven) {
  auto s = parse({"--collector.nvlink", "--no-collector.events", "--collector.profiling"});
  EXPECT_EQ(s[CollectorId::kNvlink], true);
  EXPECT_EQ(s[CollectorId::kProfiling], true);
  EXPECT_EQ(s[CollectorId::kEvents], false);
  EXPECT_FALSE(s[CollectorId::kDevice]);
  EXPECT_FALSE(s[CollectorId::kLedger]);
  auto plan = make_collection_plan(s, {});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->enabled_names(), "device,clocks,ecc,pcie,nvlink,profiling,mig,processes,ledger");
}

TEST(CollectorFlags, BothFlagsOfOneCollectorAreAnError) {
  EXPECT_THROW(parse({"--collector.clocks", "--no-collector.clocks"}), CLI::ExcludesError);
  EXPECT_THROW(parse({"--collector.gpm"}), CLI::ExtrasError);
}

}  // namespace
}  // namespace gpumeter::cli
