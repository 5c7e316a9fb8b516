#pragma once
// Gzip without compressing on the scrape path.
//
// The body is deflated once per snapshot and the stream is ended with Z_SYNC_FLUSH, which leaves it
// byte-aligned but not final. Per scrape only the small trailer is appended as one final STORED
// deflate block (0x01, LEN, NLEN, raw bytes), followed by the gzip footer whose CRC32 is combined
// from the body's precomputed CRC and the trailer's. The result is one valid single-member gzip stream.

#include <cstdint>
#include <string>
#include <string_view>

#include "util/result.h"

namespace gpumeter {

struct GzipPrefix {
  std::string bytes;       // gzip header + raw deflate of the body, sync-flushed, not final
  uint32_t body_crc = 0;   // CRC32 of the uncompressed body
  uint64_t body_size = 0;  // uncompressed body length
};

Result<GzipPrefix> make_gzip_prefix(std::string_view body, int level = 6);

// Appends the final stored block(s) holding `trailer` and the gzip footer (CRC32 and ISIZE of
// body + trailer). Bytes written: gzip_tail_size(trailer.size()).
void append_gzip_tail(std::string& out, const GzipPrefix& prefix, std::string_view trailer);
size_t gzip_tail_size(size_t trailer_size);

}  // namespace gpumeter
