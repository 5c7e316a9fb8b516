#include "http/http_server.h"

#include <httplib.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "http/basic_auth.h"
#include "http/bounded_pool.h"
#include "http/listen_address.h"
#include "http/negotiation.h"
#include "http/request_target.h"
#include "http/tls_context.h"
#include "render/landing_page.h"

namespace gpumeter {

namespace {

constexpr const char* kTextPlain = "text/plain; charset=utf-8";
constexpr const char* kHealthyPath = "/-/healthy";
constexpr const char* kReadyPath = "/-/ready";

// Two protected members of httplib::Server that its public API handles badly, reachable for both
// the plain and the TLS server.
class ListenerControl {
 public:
  virtual ~ListenerControl() = default;
  virtual httplib::Server& server() = 0;
  virtual void widen_backlog(int backlog) = 0;
  virtual void close_listener() = 0;
};

template <class Base>
class Listening final : public Base, public ListenerControl {
 public:
  using Base::Base;
  httplib::Server& server() override { return *this; }

  // httplib listens with a backlog of 5; Linux lets listen() be called again to enlarge it.
  void widen_backlog(int backlog) override { ::listen(this->svr_sock_, backlog); }

  // httplib's stop() does nothing until the accept loop has started, so a stop() right after
  // start() would be lost and the join would hang. Taking the socket away works in every state.
  void close_listener() override {
    const socket_t s = this->svr_sock_.exchange(INVALID_SOCKET);
    if (s != INVALID_SOCKET) {
      ::shutdown(s, SHUT_RDWR);
      ::close(s);
    }
  }
};

const char* reason_phrase(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 416: return "Range Not Satisfiable";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return status < 500 ? "Client Error" : "Server Error";
  }
}

// Every body goes out through a content provider with a known length: on that path httplib neither
// copies nor compresses. Its own compression of set_content() bodies ignores q-values, so a client
// sending "gzip;q=0" would still get gzip.
void set_body(httplib::Response& res, std::string body, const char* content_type) {
  if (body.empty()) {  // a zero-length provider would leave out Content-Length
    res.set_content("", content_type);
    return;
  }
  auto owned = std::make_shared<const std::string>(std::move(body));
  res.set_content_provider(
      owned->size(), content_type, [owned](size_t offset, size_t length, httplib::DataSink& sink) {
        if (offset >= owned->size()) return false;
        return sink.write(owned->data() + offset, std::min(length, owned->size() - offset));
      });
}

// Header values of a field that may be repeated, joined as RFC 9110 5.3 allows.
std::string joined_header(const httplib::Request& req, const char* name) {
  const size_t n = req.get_header_value_count(name);
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) out.push_back(',');
    out += req.get_header_value(name, i);
  }
  return out;
}

}  // namespace

Result<void> validate_options(const HttpServerOptions& o) {
  const std::string& p = o.telemetry_path;
  if (p.empty() || p.front() != '/')
    return Error{0, "--web.telemetry-path must start with '/': \"" + p + "\""};
  for (char c : p) {
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f || c == '?' ||
        c == '#') {
      return Error{0, "--web.telemetry-path has a character not allowed in a URL path: \"" + p + "\""};
    }
  }
  if (p == "/" || p == kHealthyPath || p == kReadyPath) {
    return Error{0, "--web.telemetry-path \"" + p + "\" collides with a built-in endpoint"};
  }
  if (o.max_threads == 0) return Error{0, "HTTP worker thread count must be at least 1"};
  if (auto addr = parse_listen_address(o.listen_address); !addr) return addr.error();
  return {};
}

struct HttpServer::Impl {
  Impl(const ExpositionStore& s, HttpServerOptions o, Logger* l) : store(s), opt(std::move(o)), log(l) {}

  double now() const {
    if (opt.clock) return opt.clock();
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  }

  Readiness readiness() const {
    if (opt.readiness) return opt.readiness();
    if (store.latest()) return {true, ""};
    return {false, "no snapshot has been collected yet"};
  }

  bool known_path(const std::string& path) const {
    return path == opt.telemetry_path || path == "/" || path == kHealthyPath || path == kReadyPath;
  }

  Result<void> create_server();
  void configure();
  Result<int> bind(const ListenAddress& addr);
  httplib::Server::HandlerResponse pre_route(const httplib::Request& req, httplib::Response& res);
  void serve_get(const httplib::Request& req, httplib::Response& res);
  void serve_metrics(const httplib::Request& req, httplib::Response& res);
  void serve_landing(httplib::Response& res);
  void reject_method(const httplib::Request& req, httplib::Response& res);

  const ExpositionStore& store;
  const HttpServerOptions opt;
  Logger* const log;
  std::unique_ptr<ListenerControl> control;  // created by start(): plain or TLS
  std::unique_ptr<BasicAuth> auth;           // set when the web config lists users
  std::mutex lifecycle;                      // serializes start() and stop()
  std::thread listener;
  bool started = false;
  std::atomic<int> port{0};
};

Result<void> HttpServer::Impl::create_server() {
  const WebConfig* web = opt.web_config.get();
  if (web && !web->basic_auth_users.empty()) auth = std::make_unique<BasicAuth>(web->basic_auth_users);
  if (!web || !web->tls) {
    control = std::make_unique<Listening<httplib::Server>>();
    return {};
  }
  Result<void> tls_result;
  auto tls = std::make_unique<Listening<httplib::SSLServer>>([&](SSL_CTX& ctx) {
    tls_result = configure_tls_context(&ctx, *web->tls);
    return tls_result.ok();
  });
  if (!tls_result) return Error{0, web->path + ": " + tls_result.error().message};
  if (!tls->is_valid()) return Error{0, web->path + ": cannot create the TLS context"};
  control = std::move(tls);
  return {};
}

void HttpServer::Impl::configure() {
  httplib::Server& server = control->server();
  if (opt.web_config) {
    httplib::Headers headers;
    for (const auto& [k, v] : opt.web_config->headers) headers.emplace(k, v);
    server.set_default_headers(std::move(headers));
  }
  const size_t threads = opt.max_threads, pending = opt.max_pending_connections;
  server.new_task_queue = [threads, pending] { return new BoundedPool(threads, pending); };
  // Without TCP_NODELAY the small trailer write waits for the body's ACK (Nagle + delayed ACK):
  // measured p50 of 44 ms per scrape. Accepted sockets inherit the option from the listener.
  server.set_tcp_nodelay(true);
  // httplib's default sets SO_REUSEPORT, which lets a second agent bind the same port silently and
  // steal half the scrapes. SO_REUSEADDR alone allows quick restarts and still reports a conflict.
  server.set_socket_options([](socket_t s) {
    int yes = 1;
    ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  server.set_read_timeout(opt.read_timeout.count(), 0);
  server.set_write_timeout(opt.write_timeout.count(), 0);
  server.set_keep_alive_max_count(std::max<size_t>(1, opt.keep_alive_max_count));
  server.set_keep_alive_timeout(opt.keep_alive_timeout.count());
  server.set_payload_max_length(opt.max_payload_bytes);

  server.set_pre_routing_handler(
      [this](const httplib::Request& req, httplib::Response& res) { return pre_route(req, res); });
  // Reached only for requests with a declared body, after httplib has read it within the payload limit.
  auto reject = [this](const httplib::Request& req, httplib::Response& res) { reject_method(req, res); };
  server.Post(".*", reject);
  server.Put(".*", reject);
  server.Patch(".*", reject);
  server.Delete(".*", reject);
  server.Options(".*", reject);
  // Gives every error a short text body; httplib's own errors (400, 414, ...) have none.
  server.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty() && !res.content_provider_) {
      set_body(res, std::to_string(res.status) + " " + reason_phrase(res.status) + "\n", kTextPlain);
    }
  });
}

httplib::Server::HandlerResponse HttpServer::Impl::pre_route(const httplib::Request& req,
                                                             httplib::Response& res) {
  using HR = httplib::Server::HandlerResponse;
  const AuthVerdict verdict = auth ? auth->check(req.get_header_value("Authorization")) : AuthVerdict::kGranted;
  if (verdict == AuthVerdict::kBusy) {
    res.status = 429;
    res.set_header("Retry-After", "1");
    set_body(res, "429 Too Many Requests: too many password checks at once\n", kTextPlain);
    return HR::Handled;
  }
  if (verdict == AuthVerdict::kDenied) {
    res.status = 401;
    res.set_header("WWW-Authenticate", "Basic");
    set_body(res, "401 Unauthorized\n", kTextPlain);
    return HR::Handled;
  }
  if (!valid_request_target(req.target)) {
    res.status = 400;
    set_body(res, "400 Bad Request: invalid request target\n", kTextPlain);
    return HR::Handled;
  }
  // httplib reads chunked request bodies without any size limit; nothing here takes a body anyway.
  if (req.has_header("Transfer-Encoding")) {
    res.status = 400;
    set_body(res, "400 Bad Request: chunked request bodies are not accepted\n", kTextPlain);
    return HR::Handled;
  }
  if (req.method == "GET" || req.method == "HEAD") {
    serve_get(req, res);
    return HR::Handled;
  }
  // A declared body must be consumed (or refused with 413) by httplib first, or its bytes would be
  // read as the next request on this connection. Without one we answer right away: httplib would
  // otherwise wait for the client to close the connection to find the end of the body.
  const std::string length = req.get_header_value("Content-Length");
  if (!length.empty() && length != "0") return HR::Unhandled;
  reject_method(req, res);
  return HR::Handled;
}

void HttpServer::Impl::serve_get(const httplib::Request& req, httplib::Response& res) {
  const std::string& path = req.path;
  if (path == opt.telemetry_path) {
    serve_metrics(req, res);
  } else if (path == "/") {
    serve_landing(res);
  } else if (path == kHealthyPath) {
    set_body(res, "Healthy\n", kTextPlain);
  } else if (path == kReadyPath) {
    Readiness r = readiness();
    if (r.ready) {
      set_body(res, "Ready\n", kTextPlain);
    } else {
      res.status = 503;
      set_body(res, "Not ready: " + r.reason + "\n", kTextPlain);
    }
  } else {
    res.status = 404;
  }
}

void HttpServer::Impl::serve_metrics(const httplib::Request& req, httplib::Response& res) {
  std::shared_ptr<const Published> published = store.latest();
  if (!published) {
    res.status = 503;
    res.set_header("Retry-After", "1");
    set_body(res, "503 Service Unavailable: no metrics snapshot has been collected yet\n", kTextPlain);
    return;
  }
  const ExpositionFormat format = negotiate_format(joined_header(req, "Accept"));
  const bool gzip = accepts_gzip(joined_header(req, "Accept-Encoding"));

  // The body is a view into `published`; the provider keeps it alive until the response is sent.
  struct Scrape {
    std::shared_ptr<const Published> published;
    ScrapeBody body;
  };
  auto scrape = std::make_shared<const Scrape>(
      Scrape{published, make_scrape_body(published->exposition, format, gzip, now())});

  res.set_header("Vary", "Accept, Accept-Encoding");
  // A content provider with a known length is the one path on which httplib neither copies the body
  // nor compresses it again (it gzips any text/* body itself when the client accepts gzip).
  if (gzip) res.set_header("Content-Encoding", "gzip");
  res.set_content_provider(scrape->body.size(), std::string(content_type(format)),
                           [scrape](size_t offset, size_t length, httplib::DataSink& sink) {
                             bool ok = true;
                             scrape->body.for_range(offset, length, [&](const char* data, size_t n) {
                               if (ok) ok = sink.write(data, n);
                             });
                             return ok;
                           });
}

void HttpServer::Impl::serve_landing(httplib::Response& res) {
  std::shared_ptr<const Published> published = store.latest();
  LandingPageOptions page;
  page.telemetry_path = opt.telemetry_path;
  page.now_unix = now();
  if (!published) {
    page.notice = "No snapshot has been collected yet.";
  } else if (Readiness r = readiness(); !r.ready) {
    page.notice = "Not ready: " + r.reason;
  }
  static const Snapshot kEmpty;
  set_body(res, render_landing_page(published ? *published->snapshot : kEmpty, page),
           "text/html; charset=utf-8");
}

void HttpServer::Impl::reject_method(const httplib::Request& req, httplib::Response& res) {
  if (!known_path(req.path)) {
    res.status = 404;
    return;
  }
  res.status = 405;
  res.set_header("Allow", "GET, HEAD");
  set_body(res, "405 Method Not Allowed: only GET and HEAD are served\n", kTextPlain);
}

Result<int> HttpServer::Impl::bind(const ListenAddress& addr) {
  // ":port" means every interface: "::" with IPV6_V6ONLY off (httplib clears it) takes IPv4 too;
  // hosts without IPv6 fall back to 0.0.0.0.
  std::vector<std::string> hosts =
      addr.all_interfaces() ? std::vector<std::string>{"::", "0.0.0.0"} : std::vector<std::string>{addr.host};
  int last_errno = 0;
  for (const std::string& host : hosts) {
    errno = 0;
    int bound = -1;
    if (addr.port == 0) {
      bound = control->server().bind_to_any_port(host, AI_PASSIVE);
    } else if (control->server().bind_to_port(host, addr.port, AI_PASSIVE)) {
      bound = addr.port;
    }
    if (bound > 0) return bound;
    last_errno = errno;
  }
  std::string why = last_errno != 0 ? std::strerror(last_errno) : "cannot resolve or bind";
  return Error{last_errno, "cannot listen on " + opt.listen_address + ": " + why};
}

HttpServer::HttpServer(const ExpositionStore& store, HttpServerOptions options, Logger* logger)
    : impl_(std::make_unique<Impl>(store, std::move(options), logger)) {}

HttpServer::~HttpServer() { stop(); }

int HttpServer::port() const { return impl_->port.load(); }

Result<void> HttpServer::start() {
  Impl& m = *impl_;
  std::lock_guard lock(m.lifecycle);
  if (m.started) return Error{0, "HTTP server already started"};
  if (auto ok = validate_options(m.opt); !ok) return ok.error();
  auto addr = parse_listen_address(m.opt.listen_address);
  if (!addr) return addr.error();

  if (auto created = m.create_server(); !created) return created.error();
  m.configure();
  auto port = m.bind(*addr);
  if (!port) return port.error();
  m.control->widen_backlog(m.opt.listen_backlog);
  m.port = *port;
  m.started = true;
  m.listener = std::thread([&m] {
    if (!m.control->server().listen_after_bind() && m.log) m.log->error("HTTP accept loop failed");
  });
  if (m.log) {
    // The one start-up line that says where the agent serves; with port 0 it names the bound port.
    m.log->info("listening", {{"address", m.opt.listen_address},
                              {"port", std::to_string(*port)},
                              {"telemetry_path", m.opt.telemetry_path},
                              {"tls", m.opt.web_config && m.opt.web_config->tls ? "true" : "false"},
                              {"basic_auth", m.auth ? "true" : "false"}});
  }
  return {};
}

void HttpServer::stop() {
  Impl& m = *impl_;
  std::lock_guard lock(m.lifecycle);
  if (m.control) m.control->close_listener();
  if (m.listener.joinable()) m.listener.join();
}

}  // namespace gpumeter
