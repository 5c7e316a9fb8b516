#include "render/prepared_exposition.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <mutex>
#include <thread>
#include <vector>

#include "fixture_snapshot.h"
#include "inflate.h"
#include "render/families.h"
#include "render/text_writer.h"

namespace gpumeter {
namespace {

constexpr ExpositionFormat kFormats[] = {ExpositionFormat::kText004, ExpositionFormat::kOpenMetrics100};

std::unique_ptr<PreparedExposition> prepared_fixture() {
  return prepare_exposition(build_families(testing::fixture_snapshot()), testing::kFixtureTakenUnix);
}

TEST(Trailer, Text004) {
  EXPECT_EQ(render_trailer(ExpositionFormat::kText004, 1.25),
            "# HELP gpumeter_snapshot_age_seconds Seconds between the assembly of the served snapshot and "
            "this scrape.\n# TYPE gpumeter_snapshot_age_seconds gauge\ngpumeter_snapshot_age_seconds 1.25\n");
}

TEST(Trailer, OpenMetricsEndsWithEofAfterTheAgeFamily) {
  EXPECT_EQ(render_trailer(ExpositionFormat::kOpenMetrics100, 2),
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
  EXPECT_EQ(p->taken_unix(), testing::kFixtureTakenUnix);
  for (auto f : kFormats) {
    EXPECT_EQ(p->text(f), render(fams, f));
    ASSERT_TRUE(p->gzip(f).ok());
    EXPECT_EQ(p->gzip(f)->body_size, p->text(f).size());
  }
  EXPECT_EQ(p->text(ExpositionFormat::kText004).find("# EOF"), std::string::npos);
  EXPECT_EQ(p->text(ExpositionFormat::kOpenMetrics100).find("# EOF"), std::string::npos);
}

TEST(PreparedExposition, NothingIsRenderedUntilAskedAndThenOnce) {
  std::atomic<int> built{0};
  PreparedExposition p(
      [&] {
        ++built;
        return build_families(testing::fixture_snapshot());
      },
      testing::kFixtureTakenUnix);
  EXPECT_EQ(built.load(), 0) << "publishing renders nothing";
  const std::string* first = nullptr;
  std::vector<std::thread> scrapers;
  std::mutex mu;
  for (int i = 0; i < 8; ++i) {
    scrapers.emplace_back([&] {
      const std::string& t = p.text(ExpositionFormat::kOpenMetrics100);
      std::lock_guard lock(mu);
      if (first == nullptr) first = &t;
      EXPECT_EQ(first, &t) << "every scrape sees the one rendering";
    });
  }
  for (auto& t : scrapers) t.join();
  (void)p.text(ExpositionFormat::kText004);
  (void)p.gzip(ExpositionFormat::kText004);
  EXPECT_EQ(built.load(), 1) << "the families are built once for both formats";
}

TEST(ScrapeBody, PlainIsBodyViewPlusTrailer) {
  auto p = prepared_fixture();
  for (auto f : kFormats) {
    ScrapeBody b = make_scrape_body(*p, f, false, testing::kFixtureNowUnix);
    EXPECT_EQ(b.head.data(), p->text(f).data()) << "the body must be a view, not a copy";
    EXPECT_EQ(b.tail, render_trailer(f, 1.25));
    EXPECT_EQ(b.size(), p->text(f).size() + b.tail.size());
    EXPECT_FALSE(b.gzipped);
  }
  std::string om = make_scrape_body(*p, ExpositionFormat::kOpenMetrics100, false, testing::kFixtureNowUnix).flatten();
  EXPECT_TRUE(om.ends_with("gpumeter_snapshot_age_seconds 1.25\n# EOF\n"));
  EXPECT_EQ(om.find("# EOF"), om.size() - 6) << "exactly one EOF, at the very end";
}

TEST(ScrapeBody, GzipInflatesToExactlyBodyPlusTrailerForBothFormats) {
  auto p = prepared_fixture();
  for (auto f : kFormats) {
    for (double now : {testing::kFixtureNowUnix, testing::kFixtureNowUnix + 1000.125}) {
      ScrapeBody b = make_scrape_body(*p, f, true, now);
      EXPECT_TRUE(b.gzipped);
      EXPECT_EQ(b.head.data(), p->gzip(f)->bytes.data());
      auto got = testing::gunzip(b.flatten());
      ASSERT_TRUE(got.ok) << got.error;
      EXPECT_EQ(got.data, p->text(f) + render_trailer(f, now - testing::kFixtureTakenUnix));
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
