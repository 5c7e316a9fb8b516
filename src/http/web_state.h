#pragma once
// What a web config (web_config.h) turns into for the HTTP server: the basic-auth checker, the
// TLS context and the response headers, built whole so that a reload can swap them in at once.
// Internal to the http module: it exposes Boost.Asio.

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/ssl/context.hpp>

#include "http/basic_auth.h"
#include "http/web_config.h"
#include "util/result.h"

namespace gpumeter {

// A connection keeps the state it was accepted with for its TLS stream (which refers to the
// context); each request takes the current one for its authentication and headers.
struct WebState {
  std::unique_ptr<BasicAuth> auth;
  std::optional<boost::asio::ssl::context> tls;
  std::string extra_headers;  // ready to append to every response head
};

// The state for `web` (null: plain HTTP, no authentication), or why it cannot be served: a TLS
// certificate, key or CA that does not load, settings OpenSSL refuses.
Result<std::shared_ptr<WebState>> build_web_state(const WebConfig* web, size_t max_concurrent_bcrypt);

}  // namespace gpumeter
