#include "http/request_target.h"

namespace gpumeter {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool valid_request_target(std::string_view target) {
  if (target.empty() || target.front() != '/') return false;
  bool in_path = true;
  for (size_t i = 0; i < target.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(target[i]);
    if (c <= 0x20 || c >= 0x7f) return false;
    if (c == '?' || c == '#') in_path = false;
    if (c != '%') continue;
    if (i + 2 >= target.size()) return false;
    const int hi = hex_value(target[i + 1]), lo = hex_value(target[i + 2]);
    if (hi < 0 || lo < 0) return false;
    const int decoded = hi * 16 + lo;
    if (in_path && (decoded < 0x20 || decoded == 0x7f)) return false;  // a control byte or NUL in the path
    i += 2;
  }
  return true;
}

}  // namespace gpumeter
