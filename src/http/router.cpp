#include "http/router.h"

#include <chrono>

#include "http/negotiation.h"
#include "http/request_target.h"
#include "render/api_v1.h"
#include "render/landing_page.h"

namespace gpumeter {

namespace {

constexpr const char* kTextPlain = "text/plain; charset=utf-8";
constexpr const char* kHealthyPath = "/-/healthy";
constexpr const char* kReadyPath = "/-/ready";
constexpr std::string_view kApiGpus = "/api/v1/gpus";

HttpResponse api_json(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.content_type = "application/json";
  r.headers.emplace_back("Cache-Control", "no-store");
  r.owned = std::move(body);
  return r;
}

HttpResponse text(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.content_type = kTextPlain;
  r.owned = std::move(body);
  return r;
}

}  // namespace

const char* reason_phrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Payload Too Large";
    case 414:
      return "URI Too Long";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return status < 500 ? "Client Error" : "Server Error";
  }
}

HttpResponse error_response(int status, std::string_view detail) {
  std::string body = std::to_string(status) + " " + reason_phrase(status);
  if (!detail.empty()) body += ": " + std::string(detail);
  return text(status, body + "\n");
}

double HttpRouter::now() const { return (opt_.clock ? *opt_.clock : system_clock()).wall_seconds(); }

Readiness HttpRouter::readiness() const {
  if (opt_.readiness) return opt_.readiness();
  if (store_.latest()) return {true, ""};
  return {false, "no snapshot has been collected yet"};
}

// "/api/v1/gpus/" too: a UUID that is empty is not on this node, and the answer says so in JSON.
bool HttpRouter::is_api(std::string_view path) { return path == kApiGpus || path.starts_with("/api/v1/gpus/"); }

bool HttpRouter::known_path(std::string_view path) const {
  return path == opt_.telemetry_path || path == "/" || path == kHealthyPath || path == kReadyPath ||
         is_lifecycle(path) || is_api(path);
}

HttpResponse HttpRouter::handle(const HttpRequest& req, AuthVerdict verdict) const {
  if (verdict == AuthVerdict::kBusy) {
    HttpResponse r = error_response(429, "too many password checks at once");
    r.headers.emplace_back("Retry-After", "1");
    return r;
  }
  if (verdict == AuthVerdict::kDenied) {
    HttpResponse r = error_response(401);
    r.headers.emplace_back("WWW-Authenticate", "Basic");
    return r;
  }
  if (!valid_request_target(req.target)) return error_response(400, "invalid request target");
  if (is_lifecycle(req.path())) return serve_lifecycle(req);
  if (req.method == "GET" || req.method == "HEAD") return serve_get(req);
  if (!known_path(req.path())) return error_response(404);
  HttpResponse r = error_response(405, "only GET and HEAD are served");
  r.headers.emplace_back("Allow", "GET, HEAD");
  return r;
}

// As Prometheus answers its /-/reload: POST or PUT, and only with --web.enable-lifecycle.
HttpResponse HttpRouter::serve_lifecycle(const HttpRequest& req) const {
  const bool reload = req.path() == kReloadPath;
  if (req.method != "POST" && req.method != "PUT") {
    HttpResponse r = error_response(405, reload ? "use POST to reload" : "use POST to release");
    r.headers.emplace_back("Allow", "POST, PUT");
    return r;
  }
  if (!opt_.enable_lifecycle || !(reload ? static_cast<bool>(opt_.reload) : static_cast<bool>(opt_.release))) {
    return text(403, "Lifecycle API is not enabled.\n");
  }
  if (reload) {
    if (auto done = opt_.reload(); !done) return text(500, "failed to reload config: " + done.error().message + "\n");
    return text(200, "");
  }
  auto done = opt_.release(req.query());
  if (!done) return text(done.error().code == 400 ? 400 : 500, done.error().message + "\n");
  return text(200, *done);
}

HttpResponse HttpRouter::serve_get(const HttpRequest& req) const {
  const std::string_view path = req.path();
  if (path == opt_.telemetry_path) return serve_metrics(req);
  if (path == "/") return serve_landing();
  if (path == kHealthyPath) return text(200, "Healthy\n");
  if (is_api(path)) return serve_api(path);
  if (path == kReadyPath) {
    Readiness r = readiness();
    return r.ready ? text(200, "Ready\n") : text(503, "Not ready: " + r.reason + "\n");
  }
  return error_response(404);
}

HttpResponse HttpRouter::serve_metrics(const HttpRequest& req) const {
  std::shared_ptr<const Published> published = store_.latest();
  if (!published) {
    HttpResponse r = error_response(503, "no metrics snapshot has been collected yet");
    r.headers.emplace_back("Retry-After", "1");
    return r;
  }
  const ExpositionFormat format = negotiate_format(req.accept);
  const bool gzip = accepts_gzip(req.accept_encoding);
  // The body is a view into `published`; `keep` holds both until the response is written.
  struct Scrape {
    std::shared_ptr<const Published> published;
    ScrapeBody body;
  };
  auto scrape =
      std::make_shared<const Scrape>(Scrape{published, make_scrape_body(published->exposition, format, gzip, now())});
  HttpResponse r;
  r.content_type = std::string(content_type(format));
  r.headers.emplace_back("Vary", "Accept, Accept-Encoding");
  if (scrape->body.gzipped) r.headers.emplace_back("Content-Encoding", "gzip");
  r.pieces = scrape->body.pieces();
  r.keep = scrape;
  return r;
}

HttpResponse HttpRouter::serve_api(std::string_view path) const {
  std::shared_ptr<const Published> published = store_.latest();
  if (!published) {
    HttpResponse r = api_json(503, render_api_error("no snapshot has been collected yet"));
    r.headers.emplace_back("Retry-After", "1");
    return r;
  }
  const std::optional<std::string_view> body =
      path == kApiGpus ? published->api.gpus() : published->api.gpu(path.substr(kApiGpus.size() + 1));
  if (!body) {
    const std::string uuid(path.substr(kApiGpus.size() + 1));
    return api_json(404, render_api_error("no GPU with UUID " + uuid + " on this node"));
  }
  // The body is a view into `published`, as a scrape's is; `keep` holds both until it is written.
  struct Answer {
    std::shared_ptr<const Published> published;
    std::string tail;
  };
  auto answer =
      std::make_shared<const Answer>(Answer{published, render_api_tail(now() - published->snapshot->taken_unix)});
  HttpResponse r = api_json(200, "");
  r.pieces = {*body, answer->tail};
  r.keep = std::move(answer);
  return r;
}

HttpResponse HttpRouter::serve_landing() const {
  std::shared_ptr<const Published> published = store_.latest();
  LandingPageOptions page;
  page.telemetry_path = opt_.telemetry_path;
  page.now_unix = now();
  if (!published) {
    page.notice = "No snapshot has been collected yet.";
  } else if (Readiness r = readiness(); !r.ready) {
    page.notice = "Not ready: " + r.reason;
  }
  static const Snapshot kEmpty;
  HttpResponse r;
  r.content_type = "text/html; charset=utf-8";
  r.owned = render_landing_page(published ? *published->snapshot : kEmpty, page);
  return r;
}

}  // namespace gpumeter
