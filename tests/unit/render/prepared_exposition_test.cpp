#include "render/prepared_exposition.h"

#include <gtest/gtest.h>

#include <cmath>

#include "fixture_snapshot.h"
#include "inflate.h"
#include "render/families.h"
#include "render/text_writer.h"

namespace gpumeter {
namespace {

constexpr ExpositionFormat kFormats[] = {ExpositionFormat::kText004, ExpositionFormat::kOpenMetrics100};

PreparedExposition prepared_fixture() {
  auto p = prepare_exposition(build_families(testing::fixture_snapshot()), testing::kFixtureTakenUnix);
  EXPECT_TRUE(p.ok());
  return std::move(p).value();
}

TEST(Trailer, Text004) {
  EXPECT_EQ(render_trailer(ExpositionFormat::kText004, 1.25),
            "# HELP gpumeter_snapshot_age_seconds Seconds between the assembly of the served snapshot and "
            "this scrape.\n# TYPE gpumeter_snapshot_age_seconds gauge\ngpumeter_snapshot_age_seconds 1.25\n");
}

TEST(Trailer, OpenMetricsEndsWithEofAfterTheAgeFamily) {
  EXPECT_EQ(
      render_trailer(ExpositionFormat::kOpenMetrics100, 2),
      "# TYPE gpumeter_snapshot_age_seconds gauge\n# HELP gpumeter_snapshot_age_seconds Seconds between "
      "the assembly of the served snapshot and this scrape.\ngpumeter_snapshot_age_seconds 2\n# EOF\n");
}

TEST(Trailer, AgeIsRoundedAndNeverNegative) {
  auto sample_line = [](double age) {
    std::string t = render_trailer(ExpositionFormat::kText004, age);
    return t.substr(t.rfind("gpumeter_snapshot_age_seconds "));
  };
  EXPECT_EQ(sample_line(1700000001.5 - 1700000000.25), "gpumeter_snapshot_age_seconds 1.25\n");
  EXPECT_EQ(sample_line(0.1234567), "gpumeter_snapshot_age_seconds 0.123457\n");
  EXPECT_EQ(sample_line(-3), "gpumeter_snapshot_age_seconds 0\n");
  EXPECT_EQ(sample_line(std::nan("")), "gpumeter_snapshot_age_seconds 0\n");
}

TEST(PreparedExposition, BodiesMatchTheRenderer) {
  auto fams = build_families(testing::fixture_snapshot());
  auto p = prepared_fixture();
  EXPECT_EQ(p.taken_unix, testing::kFixtureTakenUnix);
  for (auto f : kFormats) {
    EXPECT_EQ(p.body(f).text, render(fams, f));
    EXPECT_EQ(p.body(f).gzip.body_size, p.body(f).text.size());
  }
  EXPECT_EQ(p.body(ExpositionFormat::kText004).text.find("# EOF"), std::string::npos);
  EXPECT_EQ(p.body(ExpositionFormat::kOpenMetrics100).text.find("# EOF"), std::string::npos);
}

TEST(ScrapeBody, PlainIsBodyViewPlusTrailer) {
  auto p = prepared_fixture();
  for (auto f : kFormats) {
    ScrapeBody b = make_scrape_body(p, f, false, testing::kFixtureNowUnix);
    EXPECT_EQ(b.head.data(), p.body(f).text.data()) << "the body must be a view, not a copy";
    EXPECT_EQ(b.tail, render_trailer(f, 1.25));
    EXPECT_EQ(b.size(), p.body(f).text.size() + b.tail.size());
  }
  std::string om =
      make_scrape_body(p, ExpositionFormat::kOpenMetrics100, false, testing::kFixtureNowUnix).flatten();
  EXPECT_TRUE(om.ends_with("gpumeter_snapshot_age_seconds 1.25\n# EOF\n"));
  EXPECT_EQ(om.find("# EOF"), om.size() - 6) << "exactly one EOF, at the very end";
}

TEST(ScrapeBody, GzipInflatesToExactlyBodyPlusTrailerForBothFormats) {
  auto p = prepared_fixture();
  for (auto f : kFormats) {
    for (double now : {testing::kFixtureNowUnix, testing::kFixtureNowUnix + 1000.125}) {
      ScrapeBody b = make_scrape_body(p, f, true, now);
      EXPECT_EQ(b.head.data(), p.body(f).gzip.bytes.data());
      auto got = testing::gunzip(b.flatten());
      ASSERT_TRUE(got.ok) << got.error;
      EXPECT_EQ(got.data, p.body(f).text + render_trailer(f, now - testing::kFixtureTakenUnix));
    }
  }
}

TEST(ScrapeBody, ForRangeCrossesPieces) {
  ScrapeBody b{"hello ", "world"};
  auto collect = [&](size_t off, size_t len) {
    std::string s;
    b.for_range(off, len, [&](const char* d, size_t n) { s.append(d, n); });
    return s;
  };
  EXPECT_EQ(collect(0, b.size()), "hello world");
  EXPECT_EQ(collect(4, 4), "o wo");
  EXPECT_EQ(collect(6, 5), "world");
  EXPECT_EQ(collect(8, 100), "rld");
  EXPECT_EQ(collect(11, 3), "");
}

}  // namespace
}  // namespace gpumeter
