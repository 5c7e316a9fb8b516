// The remote read protocol's pieces: the request's snappy block, CRC32C, the XOR chunk decoder
// and the frame reader, against an answer a real Prometheus (2.42) gave for two days of one
// GPU's busy seconds, and the same series' raw samples as its query API gave them
// (testdata/remote-read-busy.{bin,json}).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "report/remote_read.h"

namespace gpumeter::report {
namespace {

std::string file(const std::string& name) {
  std::ifstream in(std::string(GPUMETER_SOURCE_DIR) + "/tests/unit/report/testdata/" + name, std::ios::binary);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

struct Recorded {
  std::string body;
  std::int64_t start_ms = 0, end_ms = 0;
  std::vector<Series> series;  // as the query API answered, in label order
};

const Recorded& recorded() {
  static const Recorded r = [] {
    Recorded out;
    out.body = file("remote-read-busy.bin");
    auto doc = nlohmann::json::parse(file("remote-read-busy.json"));
    out.start_ms = doc["start_ms"];
    out.end_ms = doc["end_ms"];
    for (const auto& s : doc["series"]) {
      Series x;
      for (const auto& [k, v] : s["labels"].items()) x.labels.emplace(k, v.get<std::string>());
      for (const auto& p : s["samples"]) x.samples.push_back(Sample{p[0].get<double>(), p[1].get<double>()});
      out.series.push_back(std::move(x));
    }
    std::sort(out.series.begin(), out.series.end(),
              [](const Series& a, const Series& b) { return a.labels < b.labels; });
    return out;
  }();
  return r;
}

std::vector<Series> read_in_pieces(std::string_view body, std::int64_t start_ms, std::int64_t end_ms,
                                   std::size_t piece) {
  std::vector<Series> out;
  ChunkedReader reader(start_ms, end_ms, [&](Series&& s) -> Result<void> {
    out.push_back(std::move(s));
    return {};
  });
  for (std::size_t i = 0; i < body.size(); i += piece) {
    auto ok = reader.feed(body.substr(i, piece));
    EXPECT_TRUE(ok.ok()) << ok.error().message;
  }
  auto ok = reader.finish();
  EXPECT_TRUE(ok.ok()) << ok.error().message;
  return out;
}

void expect_same(const std::vector<Series>& got, const std::vector<Series>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].labels, want[i].labels);
    ASSERT_EQ(got[i].samples.size(), want[i].samples.size()) << i;
    for (std::size_t k = 0; k < got[i].samples.size(); ++k) {
      EXPECT_EQ(got[i].samples[k].t, want[i].samples[k].t) << i << " " << k;
      EXPECT_EQ(got[i].samples[k].v, want[i].samples[k].v) << i << " " << k;
    }
  }
}

TEST(RemoteRead, Crc32cOfTheStandardCheckString) { EXPECT_EQ(crc32c("123456789"), 0xE3069283U); }

TEST(RemoteRead, SnappyLiteralBlock) {
  EXPECT_EQ(snappy_literal_block("abc"), std::string("\x03\xf4\x02\x00"
                                                     "abc",
                                                     7));
  const std::string big(70000, 'x');
  const std::string block = snappy_literal_block(big);
  // uvarint 70000, then literals of 65536 and 4464 bytes, each after a tag and two length bytes.
  EXPECT_EQ(block.substr(0, 3), std::string("\xf0\xa2\x04", 3));
  EXPECT_EQ(block.substr(3, 3), std::string("\xf4\xff\xff", 3));
  EXPECT_EQ(block.substr(3 + 3 + 65536, 3), std::string("\xf4\x6f\x11", 3));
  EXPECT_EQ(block.size(), 3 + 3 + 65536 + 3 + 4464u);
}

TEST(RemoteRead, AnswerOfARealPrometheusDecodesToItsRawSamples) {
  const auto& r = recorded();
  ASSERT_FALSE(r.series.empty());
  auto whole = read_in_pieces(r.body, r.start_ms, r.end_ms, r.body.size());
  expect_same(whole, r.series);
  // Fed as a network delivers it, in pieces that cut frames anywhere.
  for (std::size_t piece : {1U, 7U, 1000U}) expect_same(read_in_pieces(r.body, r.start_ms, r.end_ms, piece), r.series);
}

TEST(RemoteRead, SamplesOutsideTheRangeAreLeftOut) {
  const auto& r = recorded();
  const std::int64_t mid = (r.start_ms + r.end_ms) / 2;
  std::vector<Series> want;
  for (const auto& s : r.series) {
    Series x{s.labels, {}};
    for (const auto& p : s.samples) {
      if (p.t * 1000 >= static_cast<double>(mid)) x.samples.push_back(p);
    }
    if (!x.samples.empty()) want.push_back(std::move(x));
  }
  expect_same(read_in_pieces(r.body, mid, r.end_ms, r.body.size()), want);
}

TEST(RemoteRead, ACorruptOrCutAnswerIsAnError) {
  const auto& r = recorded();
  auto fails = [&](std::string body, std::string_view want) {
    auto ok = read_chunked_response(body, r.start_ms, r.end_ms, [](Series&&) -> Result<void> { return {}; });
    ASSERT_FALSE(ok.ok()) << want;
    EXPECT_NE(ok.error().message.find(want), std::string::npos) << ok.error().message;
  };
  std::string flipped = r.body;
  flipped[flipped.size() / 2] = static_cast<char>(flipped[flipped.size() / 2] ^ 0x10);
  fails(flipped, "checksum does not match");
  fails(r.body.substr(0, r.body.size() - 5), "the answer ends inside frame");
  fails("<html>proxy error</html>", "inside frame 1");
  fails(std::string("\xff\xff\xff\xff\x0f", 5), "frame 1: it announces 4294967295 bytes");
  // An error of the caller's ends the reading with it.
  auto ok = read_chunked_response(r.body, r.start_ms, r.end_ms, [](Series&&) -> Result<void> {
    return Error{0, "enough"};
  });
  ASSERT_FALSE(ok.ok());
  EXPECT_EQ(ok.error().message, "enough");
}

// Chunks written bit by bit as Prometheus' xor.go writes them: a sample count, the first
// timestamp as a zigzag varint and value as 64 bits, the second timestamp's delta as a uvarint,
// then one control bit per unchanged value and delta-of-delta.
std::string chunk_of_unchanged(unsigned count) {
  std::string c{static_cast<char>(count >> 8), static_cast<char>(count & 0xff)};
  c += "\xd0\x0f";                              // t = 1000 ms, zigzag 2000
  c += std::string("\x3f\xf8\0\0\0\0\0\0", 8);  // 1.5
  if (count > 1) c += "\x98\x75";               // + 15000 ms
  if (count > 1) c += '\0';                     // value unchanged; for a third: dod 0, unchanged
  return c;
}

TEST(RemoteRead, XorChunkByHand) {
  std::vector<Sample> out;
  ASSERT_TRUE(decode_xor_chunk(chunk_of_unchanged(3), 0, 100000, out).ok());
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].t, 1.0);
  EXPECT_EQ(out[1].t, 16.0);
  EXPECT_EQ(out[2].t, 31.0);
  for (const auto& s : out) EXPECT_EQ(s.v, 1.5);
  // A chunk that claims more samples than it holds.
  out.clear();
  auto cut = decode_xor_chunk(chunk_of_unchanged(3).substr(0, 12), 0, 100000, out);
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.error().message.find("ends at sample"), std::string::npos) << cut.error().message;
  std::string more = chunk_of_unchanged(3);
  more[1] = 9;
  EXPECT_FALSE(decode_xor_chunk(more, 0, 100000, out).ok());
  // Prometheus' staleness marker is no sample.
  std::string stale = chunk_of_unchanged(1);
  stale.replace(4, 8, std::string("\x7f\xf0\0\0\0\0\0\x02", 8));
  out.clear();
  ASSERT_TRUE(decode_xor_chunk(stale, 0, 100000, out).ok());
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace gpumeter::report
