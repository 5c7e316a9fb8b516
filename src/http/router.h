#pragma once
// What the agent answers to one parsed request, apart from the transport: the routes, the status
// codes, the bodies. The connection layer (http_server.cpp) reads the request, decides on
// authentication and writes the HttpResponse out.

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/basic_auth.h"
#include "http/exposition_store.h"
#include "http/http_server.h"

namespace gpumeter {

struct HttpRequest {
  std::string method;
  std::string target;
  std::string accept;           // every Accept field, joined with ','
  std::string accept_encoding;  // likewise
  std::string authorization;

  std::string_view path() const { return std::string_view(target).substr(0, target.find('?')); }
  // What follows the '?', empty without one.
  std::string_view query() const {
    const std::size_t q = target.find('?');
    return q == std::string::npos ? std::string_view() : std::string_view(target).substr(q + 1);
  }
};

struct HttpResponse {
  int status = 200;
  std::string content_type;
  std::vector<std::pair<std::string, std::string>> headers;  // besides Content-Type and -Length
  std::string owned;                                         // the body, unless `pieces` is set
  std::array<std::string_view, 2> pieces{};                  // a body borrowed from `keep`
  std::shared_ptr<const void> keep;

  size_t body_size() const { return keep ? pieces[0].size() + pieces[1].size() : owned.size(); }
};

// A short text body for an error status.
HttpResponse error_response(int status, std::string_view detail = {});
const char* reason_phrase(int status);

class HttpRouter {
 public:
  HttpRouter(const ExpositionStore& store, const HttpServerOptions& options) : store_(store), opt_(options) {}

  // The answer to `req` once authentication has given `verdict`.
  HttpResponse handle(const HttpRequest& req, AuthVerdict verdict) const;
  // Paths whose handler calls out to user code or renders: run off the event loop.
  bool is_slow(std::string_view path) const { return path == "/" || path == "/-/ready" || is_lifecycle(path); }
  static constexpr std::string_view kReloadPath = "/-/reload";
  static constexpr std::string_view kReleasePath = "/-/release";
  // The lifecycle endpoints, POST or PUT only, each served only with --web.enable-lifecycle.
  static bool is_lifecycle(std::string_view path) { return path == kReloadPath || path == kReleasePath; }
  // /api/v1/gpus and /api/v1/gpus/<uuid> (docs/api.md).
  static bool is_api(std::string_view path);

 private:
  HttpResponse serve_get(const HttpRequest& req) const;
  HttpResponse serve_metrics(const HttpRequest& req) const;
  HttpResponse serve_landing() const;
  HttpResponse serve_api(std::string_view path) const;
  HttpResponse serve_lifecycle(const HttpRequest& req) const;
  bool known_path(std::string_view path) const;
  double now() const;
  Readiness readiness() const;

  const ExpositionStore& store_;
  const HttpServerOptions& opt_;
};

}  // namespace gpumeter
