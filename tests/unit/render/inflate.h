#pragma once
// Test helper: decompresses a complete gzip stream with zlib and insists that it is exactly one
// member with nothing after it, so framing mistakes cannot hide behind a lenient reader.

#include <zlib.h>

#include <string>
#include <string_view>

namespace gpumeter::testing {

struct Inflated {
  bool ok = false;
  std::string data;
  std::string error;
};

inline Inflated gunzip(std::string_view in) {
  Inflated out;
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {
    out.error = "inflateInit2";
    return out;
  }
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  char buf[16384];
  int rc;
  do {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof buf;
    rc = inflate(&zs, Z_NO_FLUSH);
    out.data.append(buf, sizeof buf - zs.avail_out);
  } while (rc == Z_OK);
  if (rc != Z_STREAM_END) {
    out.error = "inflate rc=" + std::to_string(rc) + (zs.msg ? std::string(": ") + zs.msg : "");
  } else if (zs.avail_in != 0) {
    out.error = std::to_string(zs.avail_in) + " bytes after the end of the gzip member";
  } else {
    out.ok = true;
  }
  inflateEnd(&zs);
  return out;
}

}  // namespace gpumeter::testing
