#include "sim/scenario/units.h"

#include <gtest/gtest.h>

namespace gpumeter::sim {
namespace {

TEST(Units, ByteSizes) {
  EXPECT_EQ(parse_byte_size("81559MiB"), 81559ULL << 20);
  EXPECT_EQ(parse_byte_size("80GiB"), 80ULL << 30);
  EXPECT_EQ(parse_byte_size("1.5GiB"), 3ULL << 29);
  EXPECT_EQ(parse_byte_size("4GB"), 4'000'000'000ULL);
  EXPECT_EQ(parse_byte_size("1024"), 1024ULL);
  EXPECT_EQ(parse_byte_size("2TiB"), 2ULL << 40);
  EXPECT_FALSE(parse_byte_size("1.5"));  // half a byte
  EXPECT_FALSE(parse_byte_size("80 GiBs"));
  EXPECT_FALSE(parse_byte_size("-1GiB"));
  EXPECT_FALSE(parse_byte_size(""));
  EXPECT_FALSE(parse_byte_size("99999999999TiB"));  // overflows 64 bits
}

TEST(Units, DurationsAreExactMicroseconds) {
  EXPECT_EQ(parse_duration("0.2"), 200'000);
  EXPECT_EQ(parse_duration("90"), 90'000'000);
  EXPECT_EQ(parse_duration("1h30m"), 5'400'000'000);
  EXPECT_EQ(parse_duration("1.5h"), 5'400'000'000);
  EXPECT_EQ(parse_duration("500ms"), 500'000);
  EXPECT_EQ(parse_duration("250us"), 250);
  EXPECT_EQ(parse_duration("2d"), 172'800'000'000);
  EXPECT_EQ(parse_duration("0"), 0);
  EXPECT_FALSE(parse_duration("0.0000001"));  // finer than a microsecond
  EXPECT_FALSE(parse_duration("-5"));
  EXPECT_FALSE(parse_duration("5 minutes"));
  EXPECT_FALSE(parse_duration("1e3"));
  EXPECT_FALSE(parse_duration("h"));
}

TEST(Units, RatiosMustBeWholePercents) {
  EXPECT_EQ(parse_ratio_percent("0.95"), 95);
  EXPECT_EQ(parse_ratio_percent("1"), 100);
  EXPECT_EQ(parse_ratio_percent("0"), 0);
  EXPECT_EQ(parse_ratio_percent("0.5"), 50);
  EXPECT_EQ(parse_ratio_percent("35%"), 35);
  EXPECT_FALSE(parse_ratio_percent("0.955"));
  EXPECT_FALSE(parse_ratio_percent("1.01"));
  EXPECT_FALSE(parse_ratio_percent("101%"));
  EXPECT_FALSE(parse_ratio_percent("-0.1"));
}

TEST(Units, NumbersAndHex) {
  EXPECT_EQ(parse_double("1.5"), 1.5);
  EXPECT_EQ(parse_double("1700000000.25"), 1700000000.25);
  EXPECT_FALSE(parse_double("1.5x"));
  EXPECT_FALSE(parse_double("nan"));
  EXPECT_EQ(parse_unsigned("0x2330"), 0x2330U);
  EXPECT_EQ(parse_unsigned("42"), 42U);
  EXPECT_FALSE(parse_unsigned("42a"));
}

}  // namespace
}  // namespace gpumeter::sim
