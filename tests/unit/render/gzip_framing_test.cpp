#include "render/gzip_framing.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "inflate.h"

namespace gpumeter {
namespace {

std::string framed(std::string_view body, std::string_view trailer) {
  auto prefix = make_gzip_prefix(body);
  EXPECT_TRUE(prefix.ok());
  std::string out = prefix->bytes;
  append_gzip_tail(out, *prefix, trailer);
  EXPECT_EQ(out.size(), prefix->bytes.size() + gzip_tail_size(trailer.size()));
  return out;
}

std::string repetitive_body(size_t lines) {
  std::string s;
  for (size_t i = 0; i < lines; ++i) {
    s += "gpu_clock_hertz{gpu=\"" + std::to_string(i % 8) + "\",clock=\"sm\"} " + std::to_string(1980000000 + i) + "\n";
  }
  return s;
}

TEST(GzipFraming, InflatesToBodyPlusTrailer) {
  const std::string body = repetitive_body(500);
  const std::string trailer = "gpumeter_snapshot_age_seconds 1.25\n# EOF\n";
  auto got = testing::gunzip(framed(body, trailer));
  ASSERT_TRUE(got.ok) << got.error;
  EXPECT_EQ(got.data, body + trailer);
}

TEST(GzipFraming, PrefixIsReusableAcrossScrapes) {
  const std::string body = repetitive_body(100);
  auto prefix = make_gzip_prefix(body);
  ASSERT_TRUE(prefix.ok());
  for (std::string trailer : {"a 1\n", "a 22\n", "a 333\n"}) {
    std::string stream = prefix->bytes;
    append_gzip_tail(stream, *prefix, trailer);
    auto got = testing::gunzip(stream);
    ASSERT_TRUE(got.ok) << got.error;
    EXPECT_EQ(got.data, body + trailer);
  }
}

TEST(GzipFraming, PrefixIsGzipHeaderAndCompresses) {
  const std::string body = repetitive_body(1000);
  auto prefix = make_gzip_prefix(body);
  ASSERT_TRUE(prefix.ok());
  ASSERT_GE(prefix->bytes.size(), 10u);
  EXPECT_EQ(static_cast<unsigned char>(prefix->bytes[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(prefix->bytes[1]), 0x8b);
  EXPECT_EQ(prefix->bytes[2], 8);  // deflate
  EXPECT_LT(prefix->bytes.size(), body.size() / 4);
  // Z_SYNC_FLUSH ends with an empty stored block: 00 00 ff ff.
  EXPECT_EQ(prefix->bytes.substr(prefix->bytes.size() - 4), std::string("\x00\x00\xff\xff", 4));
  EXPECT_EQ(prefix->body_size, body.size());
}

TEST(GzipFraming, EmptyBodyAndEmptyTrailer) {
  for (auto [body, trailer] : {std::pair<std::string, std::string>{"", ""}, {"", "t\n"}, {"b\n", ""}}) {
    auto got = testing::gunzip(framed(body, trailer));
    ASSERT_TRUE(got.ok) << got.error;
    EXPECT_EQ(got.data, body + trailer);
  }
}

TEST(GzipFraming, TrailerLongerThanOneStoredBlock) {
  std::mt19937 rng(7);
  std::string trailer(65535 * 2 + 17, '\0');
  for (auto& c : trailer) c = static_cast<char>(rng());
  const std::string body = repetitive_body(10);
  auto got = testing::gunzip(framed(body, trailer));
  ASSERT_TRUE(got.ok) << got.error;
  EXPECT_EQ(got.data, body + trailer);
  EXPECT_EQ(gzip_tail_size(trailer.size()), 3 * 5 + trailer.size() + 8);
}

TEST(GzipFraming, CorruptCrcIsDetected) {
  // Guards the test helper itself: a wrong footer must not inflate cleanly.
  std::string stream = framed("body\n", "trailer\n");
  stream[stream.size() - 6] ^= 0x01;  // inside the CRC32
  EXPECT_FALSE(testing::gunzip(stream).ok);
}

TEST(GzipFraming, GnuGzipAcceptsTheStream) {
  // GNU gzip has its own inflate implementation, independent of zlib.
  const std::string body = repetitive_body(300);
  const std::string trailer = "# EOF\n";
  const auto dir = std::filesystem::temp_directory_path();
  const auto in = dir / ("gpumeter-gz-" + std::to_string(::getpid()) + ".gz");
  {
    std::ofstream f(in, std::ios::binary);
    f << framed(body, trailer);
  }
  const std::string cmd = "gzip -dc '" + in.string() + "'";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = ::pclose(p);
  std::filesystem::remove(in);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(out, body + trailer);
}

}  // namespace
}  // namespace gpumeter
