#include "http/web_state.h"

#include <strings.h>

#include <algorithm>

#include "http/http_server.h"
#include "http/tls_context.h"

namespace gpumeter {

Result<std::shared_ptr<WebState>> build_web_state(const WebConfig* web, size_t max_concurrent_bcrypt) {
  auto state = std::make_shared<WebState>();
  // Every answer is read as its Content-Type says, never sniffed: label values users chose are
  // in the text answers. The web config may set the header itself, and then it is sent once.
  constexpr const char* kNoSniff = "X-Content-Type-Options: nosniff\r\n";
  const bool configured = web != nullptr && std::any_of(web->headers.begin(), web->headers.end(), [](const auto& h) {
                            return strcasecmp(h.first.c_str(), "X-Content-Type-Options") == 0;
                          });
  if (!configured) state->extra_headers = kNoSniff;
  if (web == nullptr) return state;
  if (!web->basic_auth_users.empty()) {
    state->auth = std::make_unique<BasicAuth>(web->basic_auth_users, max_concurrent_bcrypt);
  }
  for (const auto& [k, v] : web->headers) state->extra_headers += k + ": " + v + "\r\n";
  if (web->tls) {
    state->tls.emplace(boost::asio::ssl::context::tls_server);
    if (auto r = configure_tls_context(state->tls->native_handle(), *web->tls); !r) {
      return Error{0, web->path + ": " + r.error().message};
    }
  }
  return state;
}

Result<void> check_web_config(const WebConfig& config) {
  auto state = build_web_state(&config, 1);
  if (!state) return state.error();
  return {};
}

}  // namespace gpumeter
