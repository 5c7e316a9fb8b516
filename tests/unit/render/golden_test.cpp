// Compares the full scrape output for the fixture snapshot with tests/golden/*. With
// GPUMETER_UPDATE_GOLDEN=1 in the environment the files are rewritten instead; review the diff.

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "fixture_snapshot.h"
#include "render/families.h"
#include "render/prepared_exposition.h"

namespace gpumeter {
namespace {

std::string golden_path(const std::string& name) { return std::string(GPUMETER_SOURCE_DIR) + "/tests/golden/" + name; }

bool update_mode() {
  const char* v = std::getenv("GPUMETER_UPDATE_GOLDEN");
  return v != nullptr && std::string(v) == "1";
}

std::string scrape(ExpositionFormat format, const Snapshot& snap = testing::fixture_snapshot()) {
  auto prepared = prepare_exposition(build_families(snap), testing::kFixtureTakenUnix);
  return make_scrape_body(*prepared, format, false, testing::kFixtureNowUnix).flatten();
}

void check_golden(const std::string& name, const std::string& actual) {
  const std::string path = golden_path(name);
  if (update_mode()) {
    std::ofstream(path, std::ios::binary) << actual;
    std::cout << "GPUMETER_UPDATE_GOLDEN=1: rewrote " << path << "\n";
    return;
  }
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << "missing golden file " << path << " (create it with GPUMETER_UPDATE_GOLDEN=1)";
  std::stringstream expected;
  expected << in.rdbuf();
  EXPECT_EQ(actual, expected.str()) << "output differs from " << path
                                    << "; if the change is intended, rerun with GPUMETER_UPDATE_GOLDEN=1";
}

TEST(Golden, Text004) { check_golden("metrics.txt", scrape(ExpositionFormat::kText004)); }

TEST(Golden, OpenMetrics100) { check_golden("metrics.om.txt", scrape(ExpositionFormat::kOpenMetrics100)); }

TEST(Golden, MigAndProfilingText004) {
  check_golden("metrics-mig.txt", scrape(ExpositionFormat::kText004, testing::mig_fixture_snapshot()));
}

TEST(Golden, MigAndProfilingOpenMetrics100) {
  check_golden("metrics-mig.om.txt", scrape(ExpositionFormat::kOpenMetrics100, testing::mig_fixture_snapshot()));
}

}  // namespace
}  // namespace gpumeter
