#pragma once
// --web.listen-address in the form Prometheus exporters accept: "host:port", "[v6]:port", ":port".

#include <string>
#include <string_view>

#include "util/result.h"

namespace gpumeter {

struct ListenAddress {
  std::string host;  // empty: all interfaces (IPv6 and IPv4 where the host has both)
  int port = 0;      // 0: any free port, for tests

  bool all_interfaces() const { return host.empty(); }
  std::string to_string() const;  // back in listen-address form, IPv6 hosts bracketed
};

Result<ListenAddress> parse_listen_address(std::string_view address);

}  // namespace gpumeter
