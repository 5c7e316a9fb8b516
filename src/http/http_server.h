#pragma once
// The agent's HTTP endpoint: the telemetry path (default /metrics), the landing page "/",
// "/-/healthy", "/-/ready", "/-/reload" and "/-/release". The telemetry handler only reads the latest
// PreparedExposition from the ExpositionStore and appends the per-scrape trailer; it never renders or compresses the
// body.
//
// One event-loop thread (Boost.Beast on Asio) owns every connection, so an idle keep-alive
// connection or a client sending slowly costs a pending read, not a thread. Each limit a client
// could push on is bounded (see docs/security.md): open connections (the oldest idle, then the
// slowest unfinished request, are closed to make room), total request-header bytes (431), one
// deadline for a whole request that arriving bytes do not renew, concurrent bcrypt checks (429),
// and the handlers that run off the loop (503 when all are busy). Pipelined requests are answered
// in order.
//
// Status codes: unknown paths 404; POST/PUT/PATCH/DELETE/OPTIONS on a known path 405 with
// "Allow: GET, HEAD" (on /-/reload and /-/release, GET and the others get 405 with "Allow: POST, PUT"); other methods,
// malformed request lines, HTTP versions other than 1.0 and 1.1, invalid percent-encoding and chunked request bodies
// 400; request targets over 8192 bytes 414; declared bodies over max_payload_bytes 413; header blocks over
// max_header_bytes 431. With basic_auth_users configured, every request without valid credentials gets 401 with
// "WWW-Authenticate: Basic". A plain-HTTP request to a TLS listener fails the handshake and is closed without a
// response (Go answers it with a 400).

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "http/exposition_store.h"
#include "http/web_config.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/result.h"

namespace gpumeter {

struct Readiness {
  bool ready = false;
  std::string reason;  // why not, shown in the 503 body
};

struct HttpServerOptions {
  std::string listen_address = ":9400";  // Prometheus style; see listen_address.h
  std::string telemetry_path = "/metrics";
  // Handlers that run off the event loop at once (bcrypt, readiness, landing page); beyond, 503.
  size_t max_threads = 16;
  size_t max_connections = 512;      // open at once; an idle plain one costs about 6 KiB
  size_t max_concurrent_bcrypt = 2;  // password checks at once; beyond, 429
  int listen_backlog = 1024;         // clients waiting while every place is taken; capped by net.core.somaxconn
  size_t max_header_bytes = 16384;   // request line and all header fields together; beyond, 431
  std::chrono::milliseconds read_timeout{10000};   // for a whole request, from its first byte
  std::chrono::milliseconds write_timeout{10000};  // for a whole response
  size_t keep_alive_max_count = 100;
  std::chrono::milliseconds keep_alive_timeout{5000};  // idle between requests
  size_t max_payload_bytes = 4096;                     // only GET/HEAD are served; any body is unexpected
  // Answers /-/ready. Unset: ready once the first snapshot is published.
  std::function<Readiness()> readiness;
  // The wall clock, for the snapshot age. Null: the system clock. Must outlive the server.
  const Clock* clock = nullptr;
  // From --web.config.file (see web_config.h): TLS, basic auth on every endpoint, extra response
  // headers. Null: plain HTTP without authentication. Replaced at run time by set_web_config().
  std::shared_ptr<const WebConfig> web_config;
  // --web.enable-lifecycle: POST (or PUT) /-/reload calls `reload`; without it, 403.
  bool enable_lifecycle = false;
  // Reloads the configuration (run off the event loop): 200 on success, 500 with the error.
  std::function<Result<void>()> reload;
  // --web.enable-lifecycle: POST (or PUT) /-/release calls `release` with the query string (run
  // off the event loop): 200 with the text it returns; its error's message with status 400 when
  // the error's code is 400 (a bad query), else 500.
  std::function<Result<std::string>(std::string_view query)> release;
};

// Whether `config` can be served: its TLS certificate, key and CA load and its settings are
// accepted by OpenSSL. What start() and set_web_config() check before using it.
Result<void> check_web_config(const WebConfig& config);

// Checks the options without binding: the telemetry path, the listen address, the thread count.
// start() runs it too; callers use it to reject bad flags before starting anything.
Result<void> validate_options(const HttpServerOptions& options);

class HttpServer {
 public:
  // `store` and `logger` (may be null) must outlive the server.
  HttpServer(const ExpositionStore& store, HttpServerOptions options, Logger* logger = nullptr);
  ~HttpServer();  // stops and joins
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Validates the options, binds (so "address in use" is reported here, not later) and serves on a
  // background thread. Fails if called twice.
  Result<void> start();
  // The bound port, useful with port 0; 0 before start().
  int port() const;
  // Serves `config` (null: plain HTTP without authentication) from now on: TLS to connections
  // accepted from now on, basic auth and response headers to every request from now on. An error
  // (a certificate that does not load) leaves the configuration in force unchanged.
  Result<void> set_web_config(std::shared_ptr<const WebConfig> config);
  // Stops accepting, closes idle connections, lets responses being written finish and joins every
  // thread. Safe from any thread other than a request handler, and more than once.
  void stop();

  struct Impl;  // opaque; named here so that the connections in the .cpp can refer to it

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpumeter
