#pragma once
// One kept-alive HTTP/1.1 connection to one server, over TCP or TLS, for the query API's client
// (prom_api.cpp): Boost.Beast and Asio, OpenSSL for https, zlib for compressed answers. Every
// request runs under one deadline, from connecting to the last byte of the answer, and its
// body is capped as decoded. Boost stays behind this header.

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/result.h"

namespace gpumeter::report {

// Why a request failed: the code of the Error that HttpClient::send returns. Its message holds
// the detail (Asio's or OpenSSL's words, or the Content-Encoding that was refused).
enum class HttpFailure : int {
  kConnect = 1,     // no connection: no such host, refused, unreachable
  kConnectTimeout,  // no connection within the connection timeout
  kWrite,           // the connection failed while sending the request
  kRead,            // the connection failed while reading the answer
  kTlsHandshake,    // the TLS handshake failed for another reason than the certificate
  kTlsCertificate,  // the server's certificate or its name was not accepted
  kDeadline,        // the exchange was still running at its deadline
  kTooLarge,        // the body, as decoded, is larger than the cap
  kEncoding,        // a Content-Encoding that cannot be decoded, or corrupt compressed data
  kRejected,        // HttpRequest::on_body refused the body; the message is its
};

struct HttpEndpoint {
  bool tls = false;
  std::string host;       // a name or an IP address, without brackets
  std::string port;       // "80" or "443" when the URL names none
  std::string authority;  // host[:port] as the URL has it, for the Host header
};

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // "GET" or "POST"
  std::string target;  // the path
  HttpHeaders headers;
  std::string body;
  // When set, an answer with status 200 and a Content-Type that begins with `stream_type` goes
  // to `on_body` piece by piece as it is decoded, instead of into HttpAnswer::body, so that it
  // is never held whole; the size cap still applies to the whole. An Error it returns ends the
  // exchange as HttpFailure::kRejected, with its message.
  std::function<Result<void>(std::string_view)> on_body;
  std::string stream_type;
};

struct HttpAnswer {
  int status = 0;
  HttpHeaders headers;                              // as received
  std::string body;                                 // decoded; empty when streamed
  bool streamed = false;                            // the body went to HttpRequest::on_body
  bool has_header(std::string_view name) const;     // names compare without case
  std::string header(std::string_view name) const;  // the first one's value, or empty
};

class HttpClient {
 public:
  // The connection is made on the first request, and made again when the server closed it.
  HttpClient(HttpEndpoint endpoint, std::chrono::milliseconds connect_timeout, std::size_t max_body_bytes);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends `request` and reads its answer, whatever its status, by `deadline`. A kept-alive
  // connection that fails before any byte of the answer came (the server closed it while idle)
  // is replaced once by a fresh one. Errors carry an HttpFailure as their code.
  Result<HttpAnswer> send(const HttpRequest& request, std::chrono::steady_clock::time_point deadline);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// host[:port] or [v6]:port into an endpoint; the port defaults to the scheme's. A port that is
// no number fails at the first request, as "cannot connect".
HttpEndpoint split_authority(const std::string& authority, bool tls);

// The value of an Authorization header for basic authentication.
std::string basic_authorization(std::string_view user, std::string_view password);

}  // namespace gpumeter::report
