#include "http/negotiation.h"

#include <gtest/gtest.h>

namespace gpumeter {
namespace {

constexpr auto kText = ExpositionFormat::kText004;
constexpr auto kOm = ExpositionFormat::kOpenMetrics100;

TEST(NegotiateFormat, PrometheusAcceptHeaderGetsOpenMetrics) {
  EXPECT_EQ(negotiate_format("application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
                             "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"),
            kOm);
}

TEST(NegotiateFormat, DefaultsToText) {
  EXPECT_EQ(negotiate_format(""), kText);
  EXPECT_EQ(negotiate_format("*/*"), kText);
  EXPECT_EQ(negotiate_format("text/plain"), kText);
  EXPECT_EQ(negotiate_format("application/json"), kText);
  EXPECT_EQ(negotiate_format("garbage;;;,,=q"), kText);
  // The Prometheus 2.x default without OpenMetrics scraping enabled.
  EXPECT_EQ(negotiate_format("text/plain;version=0.0.4;q=1,*/*;q=0.1"), kText);
}

TEST(NegotiateFormat, OpenMetricsVersions) {
  EXPECT_EQ(negotiate_format("application/openmetrics-text"), kOm);
  EXPECT_EQ(negotiate_format("application/openmetrics-text; version=\"1.0.0\""), kOm);
  EXPECT_EQ(negotiate_format("Application/OpenMetrics-Text;Version=1.0.0"), kOm);
  EXPECT_EQ(negotiate_format("application/openmetrics-text;version=0.0.1"), kText);
  EXPECT_EQ(negotiate_format("application/openmetrics-text;version=2.0.0"), kText);
}

TEST(NegotiateFormat, QValues) {
  EXPECT_EQ(negotiate_format("application/openmetrics-text;q=0"), kText);
  EXPECT_EQ(negotiate_format("application/openmetrics-text;q=0.2,text/plain;q=0.9"), kText);
  EXPECT_EQ(negotiate_format("text/plain;q=0.3,application/openmetrics-text;q=0.4"), kOm);
  EXPECT_EQ(negotiate_format("application/openmetrics-text;q=0.05,*/*;q=0.1"), kText);
  EXPECT_EQ(negotiate_format("application/openmetrics-text;q=bogus"), kText);
  EXPECT_EQ(negotiate_format("application/openmetrics-text;q=1.5"), kText);
  // Ties go to the entry listed first.
  EXPECT_EQ(negotiate_format("application/openmetrics-text,text/plain"), kOm);
  EXPECT_EQ(negotiate_format("text/plain,application/openmetrics-text"), kText);
  // The most specific text range decides: text/plain;q=0.1 outranks */* even though */* has q=1.
  EXPECT_EQ(negotiate_format("*/*,application/openmetrics-text;q=0.5,text/plain;q=0.1"), kOm);
}

TEST(AcceptsGzip, Codings) {
  EXPECT_TRUE(accepts_gzip("gzip"));
  EXPECT_TRUE(accepts_gzip("gzip, deflate, br"));
  EXPECT_TRUE(accepts_gzip("br;q=1.0, GZIP;q=0.5"));
  EXPECT_TRUE(accepts_gzip("x-gzip"));
  EXPECT_TRUE(accepts_gzip("*"));
  EXPECT_TRUE(accepts_gzip("identity, *;q=0.5"));
  EXPECT_FALSE(accepts_gzip(""));
  EXPECT_FALSE(accepts_gzip("identity"));
  EXPECT_FALSE(accepts_gzip("deflate, br"));
  EXPECT_FALSE(accepts_gzip("gzip;q=0"));
  EXPECT_FALSE(accepts_gzip("gzip;q=0.000"));
  EXPECT_FALSE(accepts_gzip("gzip;q=0, identity"));
  EXPECT_FALSE(accepts_gzip("*;q=0"));
  EXPECT_FALSE(accepts_gzip("gzip;q=0, *"));  // naming gzip overrides the wildcard
  EXPECT_FALSE(accepts_gzip("*;q=0.5, gzip;q=0"));
}

}  // namespace
}  // namespace gpumeter
