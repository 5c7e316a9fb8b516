// The transport of the query API's client: one connection driven by Asio's asynchronous
// operations on a private io_context, run to completion on the calling thread. The deadline is
// the stream's expiry (beast::tcp_stream::expires_at): it is absolute, so a server that trickles
// its answer a byte at a time is cut off at it, as one that sends nothing is.
#include "report/http_client.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <exception>
#include <optional>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <zlib.h>

#include "util/ascii.h"

namespace gpumeter::report {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace ssl = boost::asio::ssl;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using beast::error_code;

Error failure(HttpFailure kind, std::string detail) { return Error{static_cast<int>(kind), std::move(detail)}; }

// The body of an answer, decoded as its Content-Encoding says and appended to `out` (or handed
// to `sink`) up to the cap: a gzip bomb stops at the cap, not at the end of its output.
class BodyDecoder {
 public:
  using Sink = std::function<Result<void>(std::string_view)>;
  BodyDecoder(std::string& out, std::size_t cap, const Sink* sink) : out_(out), cap_(cap), sink_(sink) {}
  ~BodyDecoder() {
    if (inflating_) inflateEnd(&z_);
  }
  BodyDecoder(const BodyDecoder&) = delete;
  BodyDecoder& operator=(const BodyDecoder&) = delete;

  Result<void> start(std::string_view encoding) {
    if (encoding.empty() || iequals_ascii(encoding, "identity")) return {};
    // gzip, and deflate as the zlib format: 32 + 15 detects either header.
    if (iequals_ascii(encoding, "gzip") || iequals_ascii(encoding, "x-gzip") || iequals_ascii(encoding, "deflate")) {
      if (inflateInit2(&z_, 32 + MAX_WBITS) != Z_OK) return failure(HttpFailure::kEncoding, "zlib cannot start");
      inflating_ = true;
      return {};
    }
    return failure(HttpFailure::kEncoding, "the answer has Content-Encoding \"" + std::string(encoding) +
                                               "\", which gpumeter cannot decode (it asks for gzip)");
  }

  Result<void> feed(const char* data, std::size_t n) {
    if (!inflating_) return append(data, n);
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
    z_.avail_in = static_cast<uInt>(n);
    while (z_.avail_in > 0) {
      if (ended_) {  // a further gzip member follows
        if (inflateReset(&z_) != Z_OK) return corrupt();
        ended_ = false;
      }
      std::array<char, 16384> chunk;
      z_.next_out = reinterpret_cast<Bytef*>(chunk.data());
      z_.avail_out = static_cast<uInt>(chunk.size());
      const int rc = inflate(&z_, Z_NO_FLUSH);
      if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) return corrupt();
      const std::size_t produced = chunk.size() - z_.avail_out;
      if (auto r = append(chunk.data(), produced); !r) return r;
      ended_ = rc == Z_STREAM_END;
      if (rc == Z_BUF_ERROR && produced == 0) return corrupt();  // no progress: zlib is stuck
    }
    return {};
  }

  // After the last byte of the body: compressed data must have come to its end.
  Result<void> finish() {
    if (inflating_ && !ended_) return corrupt();
    return {};
  }

 private:
  Result<void> append(const char* data, std::size_t n) {
    if (size_ + n > cap_) return failure(HttpFailure::kTooLarge, "");
    size_ += n;
    if (sink_ == nullptr) {
      out_.append(data, n);
      return {};
    }
    if (auto taken = (*sink_)(std::string_view(data, n)); !taken) {
      return failure(HttpFailure::kRejected, taken.error().message);
    }
    return {};
  }
  static Error corrupt() {
    return failure(HttpFailure::kEncoding, "the answer's compressed body is corrupt or cut short");
  }

  std::string& out_;
  std::size_t cap_;
  const Sink* sink_;
  std::size_t size_ = 0;
  z_stream z_{};
  bool inflating_ = false;
  bool ended_ = false;
};

// A statically linked OpenSSL looks for trusted certificates under the directory it was built
// with (Debian's /usr/lib/ssl), which RHEL, Amazon Linux and SUSE do not have. So, unless
// SSL_CERT_FILE or SSL_CERT_DIR say where they are, the first of the distributions' bundles that
// exists is loaded: the list Go's crypto/x509 searches on Linux (root_linux.go).
constexpr const char* kCaBundles[] = {
    "/etc/ssl/certs/ca-certificates.crt",                 // Debian, Ubuntu, Gentoo, Alpine
    "/etc/pki/tls/certs/ca-bundle.crt",                   // RHEL, Fedora, Amazon Linux
    "/etc/ssl/ca-bundle.pem",                             // SUSE
    "/etc/pki/tls/cacert.pem",                            // OpenELEC
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",  // CentOS, RHEL 7
    "/etc/ssl/cert.pem",                                  // Alpine
};

void load_trust_store(ssl::context& ctx) {
  error_code ec;
  if (std::getenv("SSL_CERT_FILE") == nullptr && std::getenv("SSL_CERT_DIR") == nullptr) {
    for (const char* path : kCaBundles) {
      if (::access(path, R_OK) != 0) continue;
      ctx.load_verify_file(path, ec);
      if (!ec) break;
    }
  }
  ctx.set_default_verify_paths(ec);  // the environment's, and OpenSSL's built-in directory
}

bool is_ip_address(const std::string& host) {
  error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

bool is_certificate_failure(const error_code& ec, SSL* ssl) {
  if (SSL_get_verify_result(ssl) != X509_V_OK) return true;
  return ec.category() == asio::error::get_ssl_category() &&
         ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == SSL_R_CERTIFICATE_VERIFY_FAILED;
}

}  // namespace

bool HttpAnswer::has_header(std::string_view name) const {
  return std::any_of(headers.begin(), headers.end(), [&](const auto& h) { return iequals_ascii(h.first, name); });
}

std::string HttpAnswer::header(std::string_view name) const {
  auto it = std::find_if(headers.begin(), headers.end(), [&](const auto& h) { return iequals_ascii(h.first, name); });
  return it == headers.end() ? std::string() : it->second;
}

std::string basic_authorization(std::string_view user, std::string_view password) {
  const std::string plain = std::string(user) + ":" + std::string(password);
  std::string encoded(4 * ((plain.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(encoded.data()),
                                reinterpret_cast<const unsigned char*>(plain.data()), static_cast<int>(plain.size()));
  encoded.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return "Basic " + encoded;
}

struct HttpClient::Impl {
  using TlsStream = beast::ssl_stream<beast::tcp_stream>;

  HttpEndpoint endpoint;
  std::chrono::milliseconds connect_timeout;
  std::size_t max_body_bytes;
  asio::io_context io{1};
  std::optional<ssl::context> tls_context;
  std::unique_ptr<beast::tcp_stream> plain;
  std::unique_ptr<TlsStream> tls;
  beast::flat_buffer buffer;
  std::array<char, 65536> chunk;  // a piece of the body as it came

  Impl(HttpEndpoint e, std::chrono::milliseconds ct, std::size_t cap)
      : endpoint(std::move(e)), connect_timeout(ct), max_body_bytes(cap) {}

  // Runs the operations started on the io_context to their end.
  void run() {
    io.restart();
    io.run();
  }

  beast::tcp_stream& lowest() { return tls ? beast::get_lowest_layer(*tls) : *plain; }
  bool open() { return (plain || tls) && lowest().socket().is_open(); }

  void close() {
    if (plain || tls) {
      error_code ec;
      lowest().socket().close(ec);
    }
    plain.reset();
    tls.reset();
    buffer.clear();
  }

  // An idle kept-alive connection has nothing to read: if it has, the server closed it (or sent
  // what nobody asked for), and it is not reused.
  bool idle_and_open() {
    if (!open()) return false;
    pollfd p{lowest().socket().native_handle(), POLLIN, 0};
    return ::poll(&p, 1, 0) == 0;
  }

  Error failed(const error_code& ec, HttpFailure phase, Clock::time_point deadline) {
    close();
    if (ec == beast::error::timeout || Clock::now() >= deadline) return failure(HttpFailure::kDeadline, ec.message());
    if (ec == http::error::body_limit) return failure(HttpFailure::kTooLarge, ec.message());
    return failure(phase, ec.message());
  }

  Result<tcp::resolver::results_type> resolve() {
    tcp::resolver resolver(io);
    error_code ec;
    tcp::resolver::results_type found;
    resolver.async_resolve(endpoint.host, endpoint.port, [&](error_code e, tcp::resolver::results_type r) {
      ec = e;
      found = std::move(r);
    });
    run();
    if (ec) return failure(HttpFailure::kConnect, ec.message());
    return found;
  }

  Result<void> connect(Clock::time_point deadline) {
    close();
    const auto connect_by = std::min(deadline, Clock::now() + connect_timeout);
    auto found = resolve();
    if (!found) return found.error();
    if (endpoint.tls) {
      auto made = make_tls_stream();
      if (!made) return made;
    } else {
      plain = std::make_unique<beast::tcp_stream>(io);
    }
    error_code ec;
    lowest().expires_at(connect_by);
    lowest().async_connect(*found, [&](error_code e, const tcp::endpoint&) { ec = e; });
    run();
    if (ec == beast::error::timeout && Clock::now() < deadline) {
      close();
      return failure(HttpFailure::kConnectTimeout, ec.message());
    }
    if (ec) return failed(ec, HttpFailure::kConnect, deadline);
    // Small requests on a kept-alive connection otherwise wait for Nagle's algorithm and the
    // server's delayed acknowledgement: about 40 ms each, most of a month's report.
    lowest().socket().set_option(tcp::no_delay(true), ec);
    return tls ? handshake(deadline) : Result<void>{};
  }

  Result<void> make_tls_stream() {
    if (!tls_context) {
      tls_context.emplace(ssl::context::tls_client);
      SSL_CTX_set_min_proto_version(tls_context->native_handle(), TLS1_2_VERSION);
      load_trust_store(*tls_context);
    }
    tls = std::make_unique<TlsStream>(io, *tls_context);
    SSL* native = tls->native_handle();
    // SNI names a host, never an address (RFC 6066, section 3).
    if (!is_ip_address(endpoint.host) && SSL_set_tlsext_host_name(native, endpoint.host.c_str()) != 1) {
      return failure(HttpFailure::kTlsHandshake, "cannot set the server name");
    }
    error_code ec;
    tls->set_verify_mode(ssl::verify_peer, ec);
    if (!ec) tls->set_verify_callback(ssl::host_name_verification(endpoint.host), ec);
    if (ec) return failure(HttpFailure::kTlsHandshake, ec.message());
    return {};
  }

  Result<void> handshake(Clock::time_point deadline) {
    error_code ec;
    lowest().expires_at(deadline);
    tls->async_handshake(ssl::stream_base::client, [&](error_code e) { ec = e; });
    run();
    if (!ec) return {};
    if (ec != beast::error::timeout && is_certificate_failure(ec, tls->native_handle())) {
      close();
      return failure(HttpFailure::kTlsCertificate, ec.message());
    }
    return failed(ec, HttpFailure::kTlsHandshake, deadline);
  }

  http::request<http::string_body> make_request(const HttpRequest& request) {
    http::request<http::string_body> req{http::string_to_verb(request.method), request.target, 11};
    req.set(http::field::host, endpoint.authority);
    req.set(http::field::user_agent, "gpumeter");
    req.set(http::field::accept, "*/*");
    req.set(http::field::accept_encoding, "gzip, deflate");
    for (const auto& [name, value] : request.headers) req.set(name, value);
    req.body() = request.body;
    req.prepare_payload();
    return req;
  }

  // One request and its answer on the open connection. `answer_began`: whether any byte of
  // the answer came, after which it is not sent again.
  template <class Stream>
  Result<HttpAnswer> exchange(Stream& stream, const HttpRequest& request, Clock::time_point deadline,
                              bool& answer_began) {
    lowest().expires_at(deadline);
    auto req = make_request(request);
    error_code ec;
    http::async_write(stream, req, [&](error_code e, std::size_t) { ec = e; });
    run();
    if (ec) return failed(ec, HttpFailure::kWrite, deadline);

    http::response_parser<http::buffer_body> parser;
    parser.header_limit(64 << 10);
    // On the wire; the cap on the body as decoded is BodyDecoder's. Compressed data that
    // decodes to less than itself is rare, and never much less.
    parser.body_limit(max_body_bytes + max_body_bytes / 2 + (1 << 20));
    http::async_read_header(stream, buffer, parser, [&](error_code e, std::size_t) { ec = e; });
    run();
    answer_began = parser.got_some();
    if (ec) return failed(ec, HttpFailure::kRead, deadline);

    HttpAnswer answer;
    const auto type = parser.get()[http::field::content_type];
    answer.streamed =
        request.on_body && parser.get().result_int() == 200 &&
        std::string_view(type.data(), type.size()).substr(0, request.stream_type.size()) == request.stream_type;
    auto body = read_body(stream, parser, answer.body, answer.streamed ? &request.on_body : nullptr, deadline);
    if (!body) return body.error();
    const auto& res = parser.get();
    answer.status = static_cast<int>(res.result_int());
    for (const auto& field : res) answer.headers.emplace_back(field.name_string(), field.value());
    if (!parser.keep_alive()) close();
    return answer;
  }

  template <class Stream>
  Result<void> read_body(Stream& stream, http::response_parser<http::buffer_body>& parser, std::string& out,
                         const BodyDecoder::Sink* sink, Clock::time_point deadline) {
    BodyDecoder decoder(out, max_body_bytes, sink);
    const auto& res = parser.get();
    const auto encoding = res[http::field::content_encoding];
    if (auto started = decoder.start(std::string_view(encoding.data(), encoding.size())); !started) {
      close();
      return started;
    }
    if (encoding.empty() && parser.content_length() && *parser.content_length() > max_body_bytes) {
      close();
      return failure(HttpFailure::kTooLarge, "");
    }
    while (!parser.is_done()) {
      parser.get().body().data = chunk.data();
      parser.get().body().size = chunk.size();
      error_code ec;
      http::async_read(stream, buffer, parser, [&](error_code e, std::size_t) { ec = e; });
      run();
      if (ec == http::error::need_buffer) ec = {};
      // A TLS server that ends the body with the connection may skip close_notify.
      if (ec == ssl::error::stream_truncated && parser.need_eof()) parser.put_eof(ec);
      if (ec) return failed(ec, HttpFailure::kRead, deadline);
      if (auto fed = decoder.feed(chunk.data(), chunk.size() - parser.get().body().size); !fed) {
        close();
        return fed;
      }
    }
    if (auto finished = decoder.finish(); !finished) {
      close();
      return finished;
    }
    return {};
  }

  Result<HttpAnswer> exchange(const HttpRequest& request, Clock::time_point deadline, bool& answer_began) {
    if (tls) return exchange(*tls, request, deadline, answer_began);
    return exchange(*plain, request, deadline, answer_began);
  }
};

HttpClient::HttpClient(HttpEndpoint endpoint, std::chrono::milliseconds connect_timeout, std::size_t max_body_bytes)
    : impl_(std::make_unique<Impl>(std::move(endpoint), connect_timeout, max_body_bytes)) {}

HttpClient::~HttpClient() = default;

Result<HttpAnswer> HttpClient::send(const HttpRequest& request, Clock::time_point deadline) {
  try {
    const bool reused = impl_->idle_and_open();
    if (!reused) {
      if (auto connected = impl_->connect(deadline); !connected) return connected.error();
    }
    bool answer_began = false;
    auto answer = impl_->exchange(request, deadline, answer_began);
    const auto failed = answer ? HttpFailure{} : static_cast<HttpFailure>(answer.error().code);
    const bool retry = reused && !answer_began && (failed == HttpFailure::kWrite || failed == HttpFailure::kRead);
    if (!retry) return answer;
    // The server closed the kept-alive connection as the request went out: once more on a new one.
    if (auto connected = impl_->connect(deadline); !connected) return connected.error();
    return impl_->exchange(request, deadline, answer_began);
  } catch (const std::exception& e) {  // Asio's and the allocator's; none leaves the module
    impl_->close();
    return failure(HttpFailure::kRead, e.what());
  }
}

// host[:port] or [v6]:port into the endpoint. A port that is no number fails at the first
// request, as "cannot connect".
HttpEndpoint split_authority(const std::string& authority, bool tls) {
  HttpEndpoint out;
  out.tls = tls;
  out.authority = authority;
  std::string port;
  if (authority.front() == '[') {
    const auto close = authority.find(']');
    out.host = authority.substr(1, close == std::string::npos ? std::string::npos : close - 1);
    if (close != std::string::npos && authority.compare(close + 1, 1, ":") == 0) port = authority.substr(close + 2);
  } else {
    const auto colon = authority.find(':');
    out.host = authority.substr(0, colon);
    if (colon != std::string::npos) port = authority.substr(colon + 1);
  }
  out.port = port.empty() ? (tls ? "443" : "80") : port;
  return out;
}

}  // namespace gpumeter::report
