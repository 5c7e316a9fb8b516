#include <gtest/gtest.h>

#include "util/duration.h"
#include "util/log.h"
#include "util/split.h"
#include "util/terminal_text.h"

namespace gpumeter {
namespace {

TEST(Duration, ParsesPrometheusStyle) {
  EXPECT_EQ(parse_duration("1s").value().count(), 1000);
  EXPECT_EQ(parse_duration("500ms").value().count(), 500);
  EXPECT_EQ(parse_duration("1m30s").value().count(), 90'000);
  EXPECT_EQ(parse_duration("2h").value().count(), 7'200'000);
  EXPECT_EQ(parse_duration("1d").value().count(), 86'400'000);
  EXPECT_EQ(parse_duration("1w").value().count(), 7 * 86'400'000LL);
  EXPECT_EQ(parse_duration("1y").value().count(), 365 * 86'400'000LL);
  EXPECT_EQ(parse_duration("0").value().count(), 0);
  EXPECT_EQ(parse_duration("1y2w3d4h5m6s7ms").value().count(),
            365 * 86'400'000LL + 2 * 7 * 86'400'000LL + 3 * 86'400'000LL + 4 * 3'600'000 + 5 * 60'000 + 6007);
  EXPECT_EQ(parse_duration("1h0m").value().count(), 3'600'000);
}

// Prometheus' ParseDuration takes each unit at most once, largest first (y?w?d?h?m?s?ms?).
TEST(Duration, UnitsGoFromLargestToSmallestEachOnce) {
  for (const char* bad : {"30s1m", "1ms1s", "1m1h", "1s1s", "1m30s1m", "1d1w"}) {
    auto r = parse_duration(bad);
    ASSERT_FALSE(r.ok()) << bad << " gave " << r.value().count();
    EXPECT_NE(r.error().message.find("units go from the largest to the smallest, each once"), std::string::npos)
        << r.error().message;
  }
  EXPECT_NE(parse_duration("30s1m").error().message.find("unit \"m\" after \"s\""), std::string::npos);
  EXPECT_NE(parse_duration("1s1s").error().message.find("unit \"s\" after \"s\""), std::string::npos);
}

TEST(Duration, FractionsAreRejectedAsFractions) {
  for (const char* bad : {"1.5s", "0.5m", "1,5s", "1.5", "1m1.5s"}) {
    auto r = parse_duration(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message.find("no fractions"), std::string::npos) << r.error().message;
    EXPECT_EQ(r.error().message.find("missing unit"), std::string::npos) << r.error().message;
  }
}

TEST(Duration, RejectsBadInputWithAReason) {
  for (const char* bad : {"", "1", "90", "s", "1x", "-1s", "1.5s", "10000000000s", "1500us", "00x"}) {
    auto r = parse_duration(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message.find("invalid duration"), std::string::npos) << r.error().message;
  }
  EXPECT_NE(parse_duration("1x").error().message.find("unknown unit \"x\""), std::string::npos);
  EXPECT_NE(parse_duration("90").error().message.find("missing unit"), std::string::npos);
}

// Found by fuzz_duration: a number below the cap times a large unit, or many terms, overflowed
// (undefined behaviour; in practice a negative duration).
TEST(Duration, TooLargeIsAnErrorNotAnOverflow) {
  for (const char* big : {"1000000000y", "999999999y999999999y", "300000000y"}) {
    auto r = parse_duration(big);
    ASSERT_FALSE(r.ok()) << big << " gave " << r.value().count();
    EXPECT_NE(r.error().message.find("too large"), std::string::npos) << r.error().message;
  }
  EXPECT_EQ(parse_duration("290000000y").value().count(), 290000000LL * 365 * 86'400'000);
}

TEST(Log, ParsesLevelsAndFormats) {
  EXPECT_EQ(parse_log_level("debug"), LogLevel::kDebug);
  EXPECT_EQ(parse_log_level("error"), LogLevel::kError);
  EXPECT_FALSE(parse_log_level("verbose").has_value());
  EXPECT_EQ(parse_log_format("json"), LogFormat::kJson);
  EXPECT_FALSE(parse_log_format("xml").has_value());
}

TEST(Log, LogfmtQuotesOnlyWhatNeedsIt) {
  auto line = Logger::format_line(LogFormat::kLogfmt, "T", LogLevel::kWarn, "GPU collection failed",
                                  {{"gpu", "3"}, {"err", "GPU is \"lost\""}});
  EXPECT_EQ(line, "ts=T level=warn msg=\"GPU collection failed\" gpu=3 err=\"GPU is \\\"lost\\\"\"");
}

TEST(Log, JsonIsOneObjectPerLine) {
  auto line = Logger::format_line(LogFormat::kJson, "T", LogLevel::kInfo, "a\nb", {{"k", "v"}});
  EXPECT_EQ(line, R"({"ts":"T","level":"info","msg":"a\nb","k":"v"})");
}

TEST(Log, DropsMessagesBelowTheLevel) {
  char buf[256] = {};
  FILE* f = fmemopen(buf, sizeof buf, "w");
  ASSERT_NE(f, nullptr);
  {
    Logger log(LogLevel::kWarn, LogFormat::kLogfmt, f);
    log.info("hidden");
    log.error("shown");
  }
  std::fclose(f);
  std::string out(buf);
  EXPECT_EQ(out.find("hidden"), std::string::npos);
  EXPECT_NE(out.find("msg=shown"), std::string::npos);
}

TEST(TerminalText, TruncateUtf8) {
  EXPECT_EQ(truncate_utf8("abc", 3), "abc");
  EXPECT_EQ(truncate_utf8("abcd", 3), "ab\xE2\x80\xA6");
  EXPECT_EQ(truncate_utf8("\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9", 3), "\xC3\xA9\xC3\xA9\xE2\x80\xA6");
  EXPECT_EQ(truncate_utf8("\xE2\x82\xAC\xE2\x82\xAC", 2), "\xE2\x82\xAC\xE2\x82\xAC");
  EXPECT_EQ(truncate_utf8("abc", 0), "");
  EXPECT_EQ(text_width("\xC3\xA9t\xC3\xA9"), 3u);
}

// What could split a table's row, move the cursor or reorder a line becomes '?'; the rest of a
// name, UTF-8 included, is kept.
TEST(TerminalText, PrintableReplacesWhatControlsTheTerminal) {
  EXPECT_EQ(printable("team-a"), "team-a");
  EXPECT_EQ(printable("\xC3\xA9quipe \xE2\x82\xAC"), "\xC3\xA9quipe \xE2\x82\xAC");
  EXPECT_EQ(printable("line1\nline2\r\tx"), "line1?line2??x");
  EXPECT_EQ(printable("\x1b[2Jred\x7f"), "?[2Jred?");
  EXPECT_EQ(printable("a\xC2\x85"
                      "b\xC2\x9B"
                      "c"),
            "a?b?c");  // NEL and CSI, C1 controls
  // Bidi overrides, embeddings, isolates and marks, and the line and paragraph separators.
  EXPECT_EQ(printable("abc\xE2\x80\xAE"
                      "fed"),
            "abc?fed");  // U+202E RLO
  for (const char* bidi :
       {"\xE2\x80\xAA", "\xE2\x80\xAB", "\xE2\x80\xAC", "\xE2\x80\xAD", "\xE2\x81\xA6", "\xE2\x81\xA7", "\xE2\x81\xA8",
        "\xE2\x81\xA9", "\xE2\x80\x8E", "\xE2\x80\x8F", "\xD8\x9C", "\xE2\x80\xA8", "\xE2\x80\xA9"}) {
    EXPECT_EQ(printable(std::string("x") + bidi + "y"), "x?y") << bidi;
  }
  EXPECT_EQ(printable("\xE2\x80\x94"), "\xE2\x80\x94");  // U+2014, beside them, is text
  EXPECT_EQ(printable("bad\xFFutf\xC3"), "bad?utf?");
  EXPECT_EQ(printable(std::string("nul\0x", 5)), "nul?x");
}

TEST(Split, KeepsEveryPartEmptyOnesIncluded) {
  using V = std::vector<std::string_view>;
  EXPECT_EQ(split("0,1", ','), (V{"0", "1"}));
  EXPECT_EQ(split("a,,b", ','), (V{"a", "", "b"}));
  EXPECT_EQ(split("x,", ','), (V{"x", ""}));
  EXPECT_EQ(split("", ','), (V{""}));
  EXPECT_EQ(split("one", ','), (V{"one"}));
}

}  // namespace
}  // namespace gpumeter
