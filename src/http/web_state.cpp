#include "http/web_state.h"

#include "http/http_server.h"
#include "http/tls_context.h"

namespace gpumeter {

Result<std::shared_ptr<WebState>> build_web_state(const WebConfig* web, size_t max_concurrent_bcrypt) {
  auto state = std::make_shared<WebState>();
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
