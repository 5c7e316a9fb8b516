#include "report/remote_read.h"

#include <array>
#include <bit>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "report/proto/remote_read.pb.h"

namespace gpumeter::report {
namespace {

// Prometheus' staleness marker (model/value.StaleNaN): written when a series leaves a target.
constexpr std::uint64_t kStaleNaN = 0x7ff0000000000002ULL;
// The largest frame accepted. Prometheus sends at most --storage.remote.read-max-bytes-in-frame,
// 1 MiB by default; a frame that announces more than this is a broken or hostile answer.
constexpr std::uint64_t kMaxFrameBytes = std::uint64_t{64} << 20;

std::int64_t wrapping_add(std::int64_t a, std::int64_t b) {
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
}

// Bits of a chunk, most significant first, with varints read byte-wise from any bit position
// as xor.go writes them. A read past the end sets `failed` and returns zeros.
class BitReader {
 public:
  explicit BitReader(std::string_view data) : data_(data) {}

  std::uint64_t bits(int n) {  // 1..64
    if (pos_ + static_cast<std::size_t>(n) > data_.size() * 8) {
      failed = true;
      pos_ = data_.size() * 8;
      return 0;
    }
    const int off = static_cast<int>(pos_ & 7);
    const std::size_t byte = pos_ >> 3;
    if (off + n <= 64 && byte + 8 <= data_.size()) {  // one big-endian word holds them all
      std::uint64_t word = 0;
      std::memcpy(&word, data_.data() + byte, 8);
      if constexpr (std::endian::native == std::endian::little) word = __builtin_bswap64(word);
      pos_ += static_cast<std::size_t>(n);
      return (word << off) >> (64 - n);
    }
    std::uint64_t out = 0;
    while (n > 0) {
      const int avail = 8 - static_cast<int>(pos_ & 7);
      const int take = avail < n ? avail : n;
      const auto b = static_cast<unsigned char>(data_[pos_ >> 3]);
      out = (out << take) | ((b >> (avail - take)) & ((1U << take) - 1));
      n -= take;
      pos_ += static_cast<std::size_t>(take);
    }
    return out;
  }
  bool bit() { return bits(1) != 0; }

  std::uint64_t uvarint() {
    std::uint64_t out = 0;
    for (int shift = 0; shift < 64 && !failed; shift += 7) {
      const std::uint64_t b = bits(8);
      out |= (b & 0x7f) << shift;
      if ((b & 0x80) == 0) return out;
    }
    failed = true;
    return 0;
  }
  std::int64_t varint() {  // zigzag
    const std::uint64_t u = uvarint();
    return static_cast<std::int64_t>(u >> 1) ^ -static_cast<std::int64_t>(u & 1);
  }

  bool failed = false;

 private:
  std::string_view data_;
  std::size_t pos_ = 16;  // after the two-byte sample count
};

// A value after the first: unchanged, or XORed with the previous one in the window of
// significant bits that the previous value set or that this one sets anew.
struct XorValue {
  std::uint64_t bits = 0;
  int leading = 0, trailing = 0;

  bool read(BitReader& r) {
    if (!r.bit()) return true;
    if (r.bit()) {
      leading = static_cast<int>(r.bits(5));
      int significant = static_cast<int>(r.bits(6));
      if (significant == 0) significant = 64;
      trailing = 64 - leading - significant;
      if (trailing < 0) return false;
    }
    const int significant = 64 - leading - trailing;
    if (significant <= 0) return false;
    bits ^= r.bits(significant) << trailing;
    return !r.failed;
  }
};

// A delta-of-delta timestamp: 0, or 14, 17 or 20 bits in two's complement, or 64 bits.
std::int64_t read_dod(BitReader& r) {
  int prefix = 0;
  while (prefix < 4 && r.bit()) ++prefix;
  static constexpr std::array<int, 5> kWidth = {0, 14, 17, 20, 64};
  const int n = kWidth[static_cast<std::size_t>(prefix)];
  if (n == 0) return 0;
  const std::uint64_t raw = r.bits(n);
  if (n == 64) return static_cast<std::int64_t>(raw);
  const std::uint64_t half = std::uint64_t{1} << (n - 1);
  return raw > half ? static_cast<std::int64_t>(raw) - static_cast<std::int64_t>(std::uint64_t{1} << n)
                    : static_cast<std::int64_t>(raw);
}

// Eight tables, so that the checksum takes eight bytes a step (slicing-by-8): every byte of
// every answer passes through it.
using Crc32cTables = std::array<std::array<std::uint32_t, 256>, 8>;
constexpr Crc32cTables crc32c_tables() {
  Crc32cTables t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78U : c >> 1;
    t[0][i] = c;
  }
  for (std::size_t k = 1; k < 8; ++k) {
    for (std::size_t i = 0; i < 256; ++i) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFF];
  }
  return t;
}

void append_uvarint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

Labels labels_of(const remote::ChunkedSeries& s) {
  Labels out;
  for (const auto& l : s.labels()) {
    if (l.name() != "__name__") out.emplace(l.name(), l.value());
  }
  return out;
}

}  // namespace

std::uint32_t crc32c(std::string_view data) {
  static constexpr Crc32cTables kT = crc32c_tables();
  std::uint32_t c = 0xFFFFFFFFU;
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  std::size_t n = data.size();
  for (; n >= 8; n -= 8, p += 8) {
    const std::uint32_t lo =
        c ^ (std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 | std::uint32_t{p[2]} << 16 | std::uint32_t{p[3]} << 24);
    c = kT[7][lo & 0xFF] ^ kT[6][(lo >> 8) & 0xFF] ^ kT[5][(lo >> 16) & 0xFF] ^ kT[4][lo >> 24] ^ kT[3][p[4]] ^
        kT[2][p[5]] ^ kT[1][p[6]] ^ kT[0][p[7]];
  }
  for (; n > 0; --n, ++p) c = kT[0][(c ^ *p) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFU;
}

std::string snappy_literal_block(std::string_view data) {
  std::string out;
  append_uvarint(out, data.size());
  // Literals of up to 65536 bytes: tag 61 << 2 (a two-byte length follows), then length - 1.
  for (std::size_t i = 0; i < data.size(); i += 65536) {
    const std::size_t n = std::min<std::size_t>(65536, data.size() - i);
    out += static_cast<char>(61 << 2);
    out += static_cast<char>((n - 1) & 0xff);
    out += static_cast<char>(((n - 1) >> 8) & 0xff);
    out.append(data.substr(i, n));
  }
  return out;
}

std::string remote_read_request(const std::vector<RawMatcher>& matchers, std::int64_t start_ms, std::int64_t end_ms) {
  remote::ReadRequest req;
  auto* q = req.add_queries();
  q->set_start_timestamp_ms(start_ms);
  q->set_end_timestamp_ms(end_ms);
  for (const auto& m : matchers) {
    auto* pm = q->add_matchers();
    pm->set_type(m.regex ? remote::LabelMatcher::RE : remote::LabelMatcher::EQ);
    pm->set_name(m.name);
    pm->set_value(m.value);
  }
  req.add_accepted_response_types(remote::ReadRequest::STREAMED_XOR_CHUNKS);
  return snappy_literal_block(req.SerializeAsString());
}

Result<void> decode_xor_chunk(std::string_view data, std::int64_t start_ms, std::int64_t end_ms,
                              std::vector<Sample>& out) {
  if (data.size() < 2) return Error{0, "an XOR chunk shorter than its header"};
  const unsigned count =
      (static_cast<unsigned>(static_cast<unsigned char>(data[0])) << 8) | static_cast<unsigned char>(data[1]);
  BitReader r(data);
  std::int64_t t = 0, delta = 0;
  XorValue v;
  auto emit = [&] {
    if (t >= start_ms && t <= end_ms && v.bits != kStaleNaN) {
      out.push_back(Sample{static_cast<double>(t) / 1000.0, std::bit_cast<double>(v.bits)});
    }
  };
  for (unsigned i = 0; i < count; ++i) {
    if (i == 0) {
      t = r.varint();
      v.bits = r.bits(64);
    } else {
      // In two's complement, wrapping: a hostile chunk may make any of them overflow, which
      // signed arithmetic leaves undefined; the order check catches what it makes of time.
      if (i == 1) {
        delta = static_cast<std::int64_t>(r.uvarint());
      } else {
        delta = wrapping_add(delta, read_dod(r));
      }
      t = wrapping_add(t, delta);
      if (!v.read(r)) return Error{0, fmt::format("an XOR chunk with a malformed value at sample {} of {}", i, count)};
    }
    if (r.failed) return Error{0, fmt::format("an XOR chunk that ends at sample {} of {}", i, count)};
    emit();
  }
  return {};
}

struct ChunkedReader::Parsed {
  remote::ChunkedReadResponse message;
};

ChunkedReader::ChunkedReader(std::int64_t start_ms, std::int64_t end_ms, Each each)
    : start_ms_(start_ms), end_ms_(end_ms), each_(std::move(each)), parsed_(std::make_unique<Parsed>()) {}

ChunkedReader::~ChunkedReader() = default;

Result<void> ChunkedReader::feed(std::string_view piece) {
  pending_.append(piece);
  std::size_t pos = 0;
  while (true) {
    // uvarint size, four bytes of checksum, the message: complete, or wait for more.
    std::uint64_t size = 0;
    std::size_t p = pos;
    bool sized = false;
    for (int shift = 0; p < pending_.size(); shift += 7) {
      if (shift > 63) return Error{0, fmt::format("frame {}: its size is not a number", frames_ + 1)};
      const auto b = static_cast<unsigned char>(pending_[p++]);
      size |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        sized = true;
        break;
      }
    }
    if (sized && size > kMaxFrameBytes) {
      return Error{0, fmt::format("frame {}: it announces {} bytes, more than the {} a frame may have", frames_ + 1,
                                  size, kMaxFrameBytes)};
    }
    if (!sized || pending_.size() - p < 4 || pending_.size() - p - 4 < size) break;
    std::uint32_t sum = 0;
    for (int k = 0; k < 4; ++k) sum = (sum << 8) | static_cast<unsigned char>(pending_[p++]);
    const std::string_view message = std::string_view(pending_).substr(p, size);
    ++frames_;
    if (crc32c(message) != sum) return Error{0, fmt::format("frame {}: its checksum does not match", frames_)};
    if (auto ok = frame(message); !ok) return ok;
    pos = p + size;
  }
  pending_.erase(0, pos);
  return {};
}

Result<void> ChunkedReader::frame(std::string_view message) {
  auto& m = parsed_->message;
  if (!m.ParseFromArray(message.data(), static_cast<int>(message.size()))) {
    return Error{0, fmt::format("frame {}: not a ChunkedReadResponse", frames_)};
  }
  for (const auto& s : m.chunked_series()) {
    Labels labels = labels_of(s);
    if (!have_ || labels != current_.labels) {
      if (auto ok = flush(); !ok) return ok;
      current_ = Series{std::move(labels), {}};
      have_ = true;
      last_t_ = -std::numeric_limits<double>::infinity();
    }
    for (const auto& c : s.chunks()) {
      if (c.type() != remote::Chunk::XOR) {
        return Error{0, fmt::format("frame {}: a chunk of encoding {}, not a float counter's XOR chunk", frames_,
                                    static_cast<int>(c.type()))};
      }
      if (c.max_time_ms() < start_ms_ || c.min_time_ms() > end_ms_) continue;
      const std::size_t before = current_.samples.size();
      if (auto ok = decode_xor_chunk(c.data(), start_ms_, end_ms_, current_.samples); !ok) {
        return Error{0, fmt::format("frame {}: {}", frames_, ok.error().message)};
      }
      for (std::size_t i = before; i < current_.samples.size(); ++i) {
        const double t = current_.samples[i].t;
        if (t <= last_t_) return Error{0, fmt::format("frame {}: a series' time goes backwards at {:.3f}", frames_, t)};
        last_t_ = t;
      }
    }
  }
  return {};
}

Result<void> ChunkedReader::flush() {
  const bool had = have_;
  have_ = false;
  if (!had || current_.samples.empty()) return {};
  return each_(std::move(current_));
}

Result<void> ChunkedReader::finish() {
  if (!pending_.empty()) {
    return Error{0, fmt::format("the answer ends inside frame {} ({} bytes of it came)", frames_ + 1, pending_.size())};
  }
  return flush();
}

Result<void> read_chunked_response(std::string_view body, std::int64_t start_ms, std::int64_t end_ms,
                                   const ChunkedReader::Each& each) {
  ChunkedReader reader(start_ms, end_ms, each);
  if (auto ok = reader.feed(body); !ok) return ok;
  return reader.finish();
}

}  // namespace gpumeter::report
