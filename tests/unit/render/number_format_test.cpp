#include "render/number_format.h"

#include <gtest/gtest.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace gpumeter {
namespace {

std::string fmt(double v) {
  std::string s;
  append_sample_value(s, v);
  return s;
}

TEST(NumberFormat, ExactIntegersHaveNoExponentOrPoint) {
  EXPECT_EQ(fmt(0), "0");
  EXPECT_EQ(fmt(-0.0), "0");
  EXPECT_EQ(fmt(1), "1");
  EXPECT_EQ(fmt(-5), "-5");
  EXPECT_EQ(fmt(85520809984.0), "85520809984");
  EXPECT_EQ(fmt(1980e6), "1980000000");
  EXPECT_EQ(fmt(9007199254740992.0), "9007199254740992");  // 2^53, the last exact one
  EXPECT_EQ(fmt(-9007199254740992.0), "-9007199254740992");
}

TEST(NumberFormat, OtherValuesAreShortestRoundTrip) {
  EXPECT_EQ(fmt(0.1), "0.1");
  EXPECT_EQ(fmt(0.53), "0.53");
  EXPECT_EQ(fmt(312.457), "312.457");
  EXPECT_EQ(fmt(1.0 / 3), "0.3333333333333333");
  EXPECT_EQ(fmt(0.000125), "0.000125");
  EXPECT_EQ(fmt(1.5e-7), "1.5e-07");
  EXPECT_EQ(fmt(1e300), "1e+300");
  EXPECT_EQ(fmt(1e16), "1e+16");  // beyond 2^53: integer-looking output would overstate precision
  EXPECT_EQ(fmt(std::numeric_limits<double>::denorm_min()), "5e-324");
  EXPECT_EQ(fmt(std::numeric_limits<double>::max()), "1.7976931348623157e+308");
}

TEST(NumberFormat, SpecialValues) {
  EXPECT_EQ(fmt(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(fmt(-std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(fmt(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(fmt(-std::numeric_limits<double>::infinity()), "-Inf");
}

TEST(NumberFormat, RandomValuesRoundTripExactly) {
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<uint64_t> bits;
  int checked = 0;
  for (int i = 0; i < 20000; ++i) {
    double v;
    uint64_t b = bits(rng);
    std::memcpy(&v, &b, sizeof v);
    if (!std::isfinite(v)) continue;
    std::string s = fmt(v);
    double back = 0;
    auto r = std::from_chars(s.data(), s.data() + s.size(), back);
    ASSERT_EQ(r.ec, std::errc()) << s;
    ASSERT_EQ(r.ptr, s.data() + s.size()) << s;
    ASSERT_EQ(back, v) << s;
    ++checked;
  }
  EXPECT_GT(checked, 19000);
}

TEST(NumberFormat, Fixed) {
  std::string s;
  append_fixed(s, 42.26, 1);
  s.push_back(' ');
  append_fixed(s, 3.0, 0);
  s.push_back(' ');
  append_fixed(s, std::nan(""), 1);
  EXPECT_EQ(s, "42.3 3 NaN");
}

}  // namespace
}  // namespace gpumeter
