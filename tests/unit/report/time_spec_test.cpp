#include <gtest/gtest.h>

#include "report/time_spec.h"

namespace gpumeter::report {
namespace {

constexpr double kNow = 1795257720;  // 2026-11-21T06:42:00Z

double at(std::string_view text) {
  auto r = parse_time(text, kNow);
  EXPECT_TRUE(r.ok()) << text << ": " << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : -1;
}

TEST(ParseTime, Forms) {
  EXPECT_EQ(at("now"), kNow);
  EXPECT_EQ(at("-30d"), kNow - 30 * 86400);
  EXPECT_EQ(at("now-1h30m"), kNow - 5400);
  EXPECT_EQ(at("-2w"), kNow - 14 * 86400);
  EXPECT_EQ(at("1795257720"), 1795257720);
  EXPECT_EQ(at("1795257720.25"), 1795257720.25);
  EXPECT_EQ(at("2026-11-01"), 1793491200);
  EXPECT_EQ(at("2026-11-01T08:00:00Z"), 1793491200 + 8 * 3600);
  EXPECT_EQ(at("2026-11-01T10:00:00+02:00"), 1793491200 + 8 * 3600);
  EXPECT_EQ(at("2026-11-01T03:30:00-04:30"), 1793491200 + 8 * 3600);
  EXPECT_EQ(at("2026-11-01T08:00:00.5Z"), 1793491200 + 8 * 3600 + 0.5);
  EXPECT_EQ(at("2024-02-29"), 1709164800);
}

TEST(ParseTime, Rejects) {
  for (const char* bad : {"", "yesterday", "2026-02-29", "2026-13-01", "2026-11-01T25:00:00Z", "2026-11-01T08:00:00",
                          "-3x", "-", "2026/11/01", "1e9"}) {
    auto r = parse_time(bad, kNow);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.error().message.find("expected now, -30d"), std::string::npos) << r.error().message;
    }
  }
}

TEST(FormatUtc, WholeAndFractional) {
  EXPECT_EQ(format_utc(1793491200), "2026-11-01T00:00:00Z");
  EXPECT_EQ(format_utc(1793491200.25), "2026-11-01T00:00:00.250Z");
  EXPECT_EQ(format_utc(1793491200.9996), "2026-11-01T00:00:01Z");
}

}  // namespace
}  // namespace gpumeter::report
