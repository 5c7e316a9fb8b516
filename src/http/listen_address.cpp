#include "http/listen_address.h"

#include <charconv>

namespace gpumeter {

namespace {

Error bad(std::string_view address, std::string_view why) {
  return Error{0, "invalid listen address \"" + std::string(address) + "\": " + std::string(why)};
}

}  // namespace

std::string ListenAddress::to_string() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return h + ":" + std::to_string(port);
}

Result<ListenAddress> parse_listen_address(std::string_view address) {
  ListenAddress out;
  std::string_view port_text;
  if (address.starts_with('[')) {
    const size_t close = address.find(']');
    if (close == std::string_view::npos) return bad(address, "missing ']'");
    out.host = std::string(address.substr(1, close - 1));
    if (out.host.empty()) return bad(address, "empty IPv6 host");
    if (close + 1 >= address.size() || address[close + 1] != ':') return bad(address, "missing port after ']'");
    port_text = address.substr(close + 2);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == std::string_view::npos) return bad(address, "missing port (use \":9400\" for all interfaces)");
    out.host = std::string(address.substr(0, colon));
    if (out.host.find(':') != std::string::npos) return bad(address, "IPv6 hosts must be in brackets");
    port_text = address.substr(colon + 1);
  }
  if (out.host.find_first_of(" \t[]/") != std::string::npos) return bad(address, "bad character in host");
  if (port_text.empty()) return bad(address, "missing port");
  unsigned port = 0;
  auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || ptr != port_text.data() + port_text.size() || port > 65535) {
    return bad(address, "port must be a number from 0 to 65535");
  }
  out.port = static_cast<int>(port);
  return out;
}

}  // namespace gpumeter
