#pragma once
// The agent's HTTP endpoint: the telemetry path (default /metrics), the landing page "/",
// "/-/healthy" and "/-/ready". The telemetry handler only reads the latest PreparedExposition from
// the ExpositionStore and appends the per-scrape trailer; it never renders or compresses the body.
//
// Status codes: unknown paths 404; POST/PUT/PATCH/DELETE/OPTIONS on a known path 405 with
// "Allow: GET, HEAD"; CONNECT/TRACE/PRI and unknown methods get cpp-httplib's 400; malformed
// request lines, oversized header lines (cpp-httplib's compiled-in limit is 8192 bytes), invalid
// percent-encoding and chunked request bodies 400; request targets over 8192 bytes 414; declared
// bodies over max_payload_bytes 413. With basic_auth_users configured, every request without valid
// credentials gets 401 with "WWW-Authenticate: Basic" first. A plain-HTTP request to a TLS listener
// fails the handshake and is closed without a response (Go answers it with a 400).

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "http/exposition_store.h"
#include "http/web_config.h"
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
  size_t max_threads = 16;              // workers serving connections
  size_t max_pending_connections = 64;  // accepted, waiting for a worker; beyond this accept() waits
  int listen_backlog = 128;             // cpp-httplib hard-codes 5, too few for bursts of scrapes
  std::chrono::seconds read_timeout{10};
  std::chrono::seconds write_timeout{10};
  size_t keep_alive_max_count = 100;
  std::chrono::seconds keep_alive_timeout{5};
  size_t max_payload_bytes = 4096;  // only GET/HEAD are served; any body is unexpected
  // Answers /-/ready. Unset: ready once the first snapshot is published.
  std::function<Readiness()> readiness;
  // Wall clock in Unix seconds, for the snapshot age. Unset: the system clock.
  std::function<double()> clock;
  // From --web.config.file (see web_config.h): TLS, basic auth on every endpoint, extra response
  // headers. Null: plain HTTP without authentication.
  std::shared_ptr<const WebConfig> web_config;
};

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
  // Stops accepting, lets in-flight requests finish and joins every thread. Safe from any thread
  // other than a request handler, and more than once. Idle keep-alive connections can hold it up to
  // keep_alive_timeout.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpumeter
