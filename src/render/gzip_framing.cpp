#include "render/gzip_framing.h"

#include <zlib.h>

#include <algorithm>
#include <climits>

namespace gpumeter {

namespace {

// Header with no name, comment or mtime (a zero mtime keeps the output reproducible); OS = Unix.
constexpr unsigned char kGzipHeader[10] = {0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03};
constexpr size_t kMaxStoredBlock = 65535;
constexpr size_t kStoredBlockHeader = 5;
constexpr size_t kGzipFooter = 8;

void append_le32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void append_le16(std::string& out, uint16_t v) {
  out.push_back(static_cast<char>(v & 0xff));
  out.push_back(static_cast<char>(v >> 8));
}

}  // namespace

Result<GzipPrefix> make_gzip_prefix(std::string_view body, int level) {
  if (body.size() > UINT_MAX) return Error{0, "gzip: body too large for one deflate call"};
  z_stream zs{};
  // Negative window bits: raw deflate, because the gzip header and footer are written here by hand.
  int rc = deflateInit2(&zs, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
  if (rc != Z_OK) return Error{rc, "gzip: deflateInit2 failed"};

  GzipPrefix prefix;
  prefix.body_size = body.size();
  prefix.body_crc = static_cast<uint32_t>(
      crc32(crc32(0, nullptr, 0), reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size())));

  // deflateBound covers a finished stream; the sync flush adds at most an empty stored block.
  const size_t bound = deflateBound(&zs, static_cast<uLong>(body.size())) + 16;
  prefix.bytes.resize(sizeof kGzipHeader + bound);
  std::copy(std::begin(kGzipHeader), std::end(kGzipHeader), prefix.bytes.begin());

  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(body.data()));
  zs.avail_in = static_cast<uInt>(body.size());
  zs.next_out = reinterpret_cast<Bytef*>(prefix.bytes.data() + sizeof kGzipHeader);
  zs.avail_out = static_cast<uInt>(bound);
  rc = deflate(&zs, Z_SYNC_FLUSH);
  const bool complete = (rc == Z_OK || rc == Z_BUF_ERROR) && zs.avail_in == 0 && zs.avail_out > 0;
  const size_t produced = bound - zs.avail_out;
  deflateEnd(&zs);
  if (!complete) return Error{rc, "gzip: deflate did not consume the body"};
  prefix.bytes.resize(sizeof kGzipHeader + produced);
  return prefix;
}

size_t gzip_tail_size(size_t trailer_size) {
  const size_t blocks = std::max<size_t>(1, (trailer_size + kMaxStoredBlock - 1) / kMaxStoredBlock);
  return blocks * kStoredBlockHeader + trailer_size + kGzipFooter;
}

void append_gzip_tail(std::string& out, const GzipPrefix& prefix, std::string_view trailer) {
  out.reserve(out.size() + gzip_tail_size(trailer.size()));
  // The prefix ends byte-aligned, so each stored block header is exactly one byte of
  // BFINAL/BTYPE bits (plus padding) followed by LEN and NLEN. An empty trailer still needs a final block.
  size_t pos = 0;
  do {
    const size_t n = std::min(kMaxStoredBlock, trailer.size() - pos);
    const bool last = pos + n == trailer.size();
    out.push_back(last ? '\x01' : '\x00');
    append_le16(out, static_cast<uint16_t>(n));
    append_le16(out, static_cast<uint16_t>(~n & 0xffff));
    out.append(trailer.substr(pos, n));
    pos += n;
  } while (pos < trailer.size());

  const auto trailer_crc =
      crc32(crc32(0, nullptr, 0), reinterpret_cast<const Bytef*>(trailer.data()), static_cast<uInt>(trailer.size()));
  const auto crc = crc32_combine(prefix.body_crc, trailer_crc, static_cast<z_off_t>(trailer.size()));
  append_le32(out, static_cast<uint32_t>(crc));
  append_le32(out, static_cast<uint32_t>((prefix.body_size + trailer.size()) & 0xffffffffu));
}

}  // namespace gpumeter
