// Compares the full scrape output for the fixture snapshot with tests/golden/*. With
// GPUMETER_UPDATE_GOLDEN=1 in the environment the files are rewritten instead; review the diff.

#include <gtest/gtest.h>

#include "fixture_snapshot.h"
#include "golden.h"
#include "render/families.h"
#include "render/prepared_exposition.h"

namespace gpumeter {
namespace {

using testing::check_golden;

std::string scrape(ExpositionFormat format, const Snapshot& snap = testing::fixture_snapshot()) {
  auto prepared = prepare_exposition(build_families(snap), testing::kFixtureTakenUnix);
  return make_scrape_body(*prepared, format, false, testing::kFixtureNowUnix).flatten();
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
