#include "http/http_server.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <list>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_set>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>

#include "http/basic_auth.h"
#include "http/listen_address.h"
#include "http/router.h"
#include "http/tls_context.h"
#include "http/web_state.h"
#include "util/thread_name.h"

namespace gpumeter {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

namespace {

constexpr size_t kMaxTargetBytes = 8192;
// After an error response the client may still be sending (a huge header block): reading and
// dropping a little of it, briefly, lets the client see the response instead of a reset.
constexpr size_t kLingerBytes = 64 * 1024;
constexpr auto kLingerTime = std::chrono::milliseconds(500);

std::string_view sv(beast::string_view s) { return {s.data(), s.size()}; }

bool served_method(std::string_view m) {
  return m == "GET" || m == "HEAD" || m == "POST" || m == "PUT" || m == "PATCH" || m == "DELETE" || m == "OPTIONS";
}

std::string joined(const http::fields& fields, http::field name) {
  std::string out;
  for (auto [it, end] = fields.equal_range(name); it != end; ++it) {
    if (!out.empty()) out.push_back(',');
    out += sv(it->value());
  }
  return out;
}

}  // namespace

Result<void> validate_options(const HttpServerOptions& o) {
  const std::string& p = o.telemetry_path;
  if (p.empty() || p.front() != '/') return Error{0, "--web.telemetry-path must start with '/': \"" + p + "\""};
  for (char c : p) {
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f || c == '?' || c == '#') {
      return Error{0, "--web.telemetry-path has a character not allowed in a URL path: \"" + p + "\""};
    }
  }
  if (p == "/" || p == "/-/healthy" || p == "/-/ready" || HttpRouter::is_lifecycle(p)) {
    return Error{0, "--web.telemetry-path \"" + p + "\" collides with a built-in endpoint"};
  }
  if (o.max_threads == 0) return Error{0, "HTTP worker thread count must be at least 1"};
  if (o.max_connections == 0) return Error{0, "HTTP connection limit must be at least 1"};
  if (auto addr = parse_listen_address(o.listen_address); !addr) return addr.error();
  return {};
}

// Everything below runs on the one event-loop thread, except the jobs given to `handlers`: those
// only compute an HttpResponse and post it back. So the connection lists need no lock.
class HttpConnection;

struct HttpServer::Impl {
  Impl(const ExpositionStore& s, HttpServerOptions o, Logger* l)
      : store(s), opt(std::move(o)), log(l), router(store, opt) {}

  Result<int> bind(const ListenAddress& addr);
  void accept();
  void admit(tcp::socket socket);
  void make_room();
  void connection_closed();
  void pause_accepting(std::chrono::milliseconds retry);

  const ExpositionStore& store;
  const HttpServerOptions opt;
  Logger* const log;
  const HttpRouter router;
  std::mutex web_mu;
  std::shared_ptr<WebState> web_state = std::make_shared<WebState>();  // guarded by web_mu
  std::shared_ptr<WebState> web() {
    std::lock_guard lock(web_mu);
    return web_state;
  }

  // Eviction order when the connection limit is reached: idle keep-alive connections first, oldest
  // first; then connections still sending their request, the slowest first. Declared before the
  // io_context so that connections it still holds when destroyed find them.
  std::list<HttpConnection*> idle;
  std::list<HttpConnection*> reading;
  std::unordered_set<HttpConnection*> open;
  size_t live = 0;  // open connections not yet closed

  asio::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  asio::steady_timer accept_retry{ioc};
  bool accept_paused = false;  // at the limit (or out of descriptors): new clients wait in the backlog
  std::optional<asio::thread_pool> handlers;
  std::atomic<size_t> handlers_busy{0};
  bool stopping = false;

  std::mutex lifecycle;
  std::thread loop;
  bool started = false;
  bool stopped = false;
  std::atomic<int> port{0};
};

// One client connection, plain or TLS. It waits for a request without any deadline but the
// keep-alive one, reads it under one deadline for the whole request, answers it, and repeats;
// bytes already read past one request are the start of the next (pipelining).
class HttpConnection : public std::enable_shared_from_this<HttpConnection> {
 public:
  enum class State { kHandshake, kIdle, kReading, kHandling, kWriting, kClosed };

  HttpConnection(HttpServer::Impl& server, tcp::socket socket)
      : s_(server), web_(server.web()), timer_(server.ioc), buffer_(server.opt.max_header_bytes + 4096) {
    if (web_->tls) {
      tls_.emplace(std::move(socket), *web_->tls);
    } else {
      plain_.emplace(std::move(socket));
    }
    s_.open.insert(this);
    ++s_.live;
  }
  ~HttpConnection() {
    unlist();
    s_.open.erase(this);
    if (state_ != State::kClosed) {
      --s_.live;
      s_.connection_closed();
    }
  }

  // When the connection entered its current list; the eviction order's age.
  std::chrono::steady_clock::time_point listed_since() const { return listed_since_; }

  tcp::socket& socket() { return tls_ ? tls_->next_layer() : *plain_; }

  void start() {
    if (!tls_) return wait_for_request();
    state_ = State::kHandshake;
    list(s_.reading);
    arm(s_.opt.read_timeout);
    tls_->async_handshake(asio::ssl::stream_base::server, [self = shared_from_this()](error_code ec) {
      if (ec) return self->close();
      self->wait_for_request();
    });
  }

  // Closes at once; pending operations end with operation_aborted and drop their reference.
  void close() {
    if (state_ == State::kClosed) return;
    state_ = State::kClosed;
    --s_.live;
    s_.connection_closed();
    unlist();
    timer_.cancel();
    error_code ignored;
    socket().shutdown(tcp::socket::shutdown_both, ignored);
    socket().close(ignored);
  }

  // Called by the server when stopping: an idle or unfinished request is dropped, a request being
  // answered still gets its response.
  void close_if_waiting() {
    if (state_ == State::kIdle || state_ == State::kReading || state_ == State::kHandshake) close();
  }

 private:
  template <class Fn>
  void with_stream(Fn&& fn) {
    if (tls_) {
      fn(*tls_);
    } else {
      fn(*plain_);
    }
  }

  void list(std::list<HttpConnection*>& where) {
    unlist();
    where.push_back(this);
    listed_since_ = std::chrono::steady_clock::now();
    listed_in_ = &where;
    listed_at_ = std::prev(where.end());
  }
  void unlist() {
    if (listed_in_) listed_in_->erase(listed_at_);
    listed_in_ = nullptr;
  }

  // One deadline for the whole of what follows; bytes arriving do not renew it.
  void arm(std::chrono::steady_clock::duration d) {
    timer_.expires_after(d);
    timer_.async_wait([weak = weak_from_this()](error_code ec) {
      if (ec) return;  // cancelled or re-armed
      if (auto self = weak.lock()) self->close();
    });
  }

  void wait_for_request() {
    if (s_.stopping) return close();
    if (buffer_.size() > 0) return read_request();  // a pipelined request is already here
    state_ = State::kIdle;
    list(s_.idle);
    arm(s_.opt.keep_alive_timeout);
    // An idle connection costs one pending read and no thread, however many there are.
    with_stream([&](auto& stream) {
      stream.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](error_code ec, size_t n) {
        if (ec) return self->close();
        self->buffer_.commit(n);
        self->read_request();
      });
    });
  }

  void read_request() {
    state_ = State::kReading;
    list(s_.reading);
    arm(s_.opt.read_timeout);
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(s_.opt.max_header_bytes));
    parser_->body_limit(s_.opt.max_payload_bytes);
    with_stream([&](auto& stream) {
      http::async_read_header(stream, buffer_, *parser_,
                              [self = shared_from_this()](error_code ec, size_t) { self->on_header(ec); });
    });
  }

  void on_header(error_code ec) {
    if (state_ == State::kClosed) return;
    if (ec) return fail_read(ec);
    const auto& req = parser_->get();
    if (req.version() != 11 && req.version() != 10) return reject(400, "unsupported HTTP version");
    if (!served_method(sv(req.method_string()))) return reject(400, "method not served");
    if (req.target().size() > kMaxTargetBytes) return reject(414);
    if (parser_->chunked()) return reject(400, "chunked request bodies are not accepted");
    if (parser_->is_done()) return dispatch();
    // A declared body is read (within max_payload_bytes) so that its bytes are not taken for the
    // next request on this connection.
    with_stream([&](auto& stream) {
      http::async_read(stream, buffer_, *parser_, [self = shared_from_this()](error_code ec, size_t) {
        if (self->state_ == State::kClosed) return;
        if (ec) return self->fail_read(ec);
        self->dispatch();
      });
    });
  }

  void fail_read(error_code ec) {
    if (ec == http::error::header_limit) return reject(431);
    if (ec == http::error::body_limit) return reject(413);
    if (ec == http::error::buffer_overflow) return reject(431);
    if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::operation_aborted ||
        ec == asio::error::connection_reset || ec == http::error::partial_message) {
      return close();
    }
    if (ec.category() == http::make_error_code(http::error::bad_target).category()) return reject(400);
    close();
  }

  void dispatch() {
    const auto& msg = parser_->get();
    keep_alive_ = msg.keep_alive() && !s_.stopping;
    head_ = msg.method_string() == "HEAD";
    auto req = std::make_shared<HttpRequest>();
    req->method = std::string(sv(msg.method_string()));
    req->target = std::string(sv(msg.target()));
    req->accept = joined(msg, http::field::accept);
    req->accept_encoding = joined(msg, http::field::accept_encoding);
    req->authorization = std::string(sv(msg[http::field::authorization]));
    parser_.reset();

    // The web config in force now, which a reload may have replaced since this connection began.
    std::shared_ptr<WebState> web = s_.web();
    extra_headers_ = web->extra_headers;
    std::optional<AuthVerdict> verdict = AuthVerdict::kGranted;
    if (web->auth) {
      verdict = web->auth->check_without_bcrypt(req->authorization);
      // Refused here, without a trip through the handler pool, so that guesses cannot fill the pool.
      if (!verdict && !web->auth->bcrypt_slot_free()) verdict = AuthVerdict::kBusy;
    }
    state_ = State::kHandling;
    unlist();
    timer_.cancel();
    // The scrape path (cached or no credentials, the telemetry and health endpoints) is answered on
    // the event loop: it only takes the latest snapshot. bcrypt, readiness callbacks and the landing
    // page go to the bounded handler pool.
    if (verdict && (*verdict != AuthVerdict::kGranted || !s_.router.is_slow(req->path()))) {
      return respond(s_.router.handle(*req, *verdict));
    }
    if (s_.handlers_busy.fetch_add(1) >= s_.opt.max_threads) {
      s_.handlers_busy.fetch_sub(1);
      HttpResponse busy = error_response(503, "every request handler is busy");
      busy.headers.emplace_back("Retry-After", "1");
      return respond(std::move(busy));
    }
    asio::post(*s_.handlers, [self = shared_from_this(), req, verdict, web = std::move(web),
                              work = asio::make_work_guard(s_.ioc)]() mutable {
      const AuthVerdict v = verdict ? *verdict : web->auth->check(req->authorization);
      HttpResponse res = self->s_.router.handle(*req, v);
      self->s_.handlers_busy.fetch_sub(1);
      // The reference moves to the loop: the connection must never be destroyed on this thread,
      // since its destructor edits the loop's connection lists.
      asio::io_context& loop = self->s_.ioc;
      asio::post(loop, [self = std::move(self), res = std::move(res)]() mutable { self->respond(std::move(res)); });
    });
  }

  void reject(int status, std::string_view detail = {}) {
    extra_headers_ = s_.web()->extra_headers;
    keep_alive_ = false;
    head_ = false;
    linger_ = true;
    parser_.reset();
    unlist();
    respond(error_response(status, detail));
  }

  void respond(HttpResponse res) {
    if (state_ == State::kClosed) return;
    state_ = State::kWriting;
    // The last response a connection gets says so, or the client's next request would meet a close.
    if (s_.stopping || ++served_ >= std::max<size_t>(1, s_.opt.keep_alive_max_count)) keep_alive_ = false;
    res_ = std::move(res);
    head_text_ = "HTTP/1.1 " + std::to_string(res_.status) + " " + reason_phrase(res_.status) + "\r\n";
    if (!res_.content_type.empty()) head_text_ += "Content-Type: " + res_.content_type + "\r\n";
    head_text_ += "Content-Length: " + std::to_string(res_.body_size()) + "\r\n";
    for (const auto& [k, v] : res_.headers) head_text_ += k + ": " + v + "\r\n";
    head_text_ += extra_headers_;
    if (!keep_alive_) head_text_ += "Connection: close\r\n";
    head_text_ += "\r\n";
    std::array<asio::const_buffer, 3> out{asio::buffer(head_text_)};
    if (!head_) {
      if (res_.keep) {
        out[1] = asio::buffer(res_.pieces[0].data(), res_.pieces[0].size());
        out[2] = asio::buffer(res_.pieces[1].data(), res_.pieces[1].size());
      } else {
        out[1] = asio::buffer(res_.owned);
      }
    }
    arm(s_.opt.write_timeout);
    with_stream([&](auto& stream) {
      asio::async_write(stream, out, [self = shared_from_this()](error_code ec, size_t) {
        if (self->state_ == State::kClosed) return;
        self->res_ = HttpResponse{};
        if (ec) return self->close();
        if (self->linger_) return self->linger();
        if (!self->keep_alive_) return self->close();
        self->wait_for_request();
      });
    });
  }

  void linger() {
    if (tls_) return close();
    error_code ignored;
    socket().shutdown(tcp::socket::shutdown_send, ignored);
    arm(kLingerTime);
    buffer_.clear();
    socket().async_read_some(buffer_.prepare(4096), [self = shared_from_this()](error_code ec, size_t n) {
      self->lingered_ += n;
      if (ec || self->lingered_ >= kLingerBytes) return self->close();
      self->linger_read();
    });
  }
  void linger_read() {
    if (state_ == State::kClosed) return;
    socket().async_read_some(buffer_.prepare(4096), [self = shared_from_this()](error_code ec, size_t n) {
      self->lingered_ += n;
      if (ec || self->lingered_ >= kLingerBytes) return self->close();
      self->linger_read();
    });
  }

  HttpServer::Impl& s_;
  std::shared_ptr<WebState> web_;  // as accepted: its TLS context outlives the stream
  std::string extra_headers_;      // of the web config in force when the request arrived
  std::optional<tcp::socket> plain_;
  std::optional<asio::ssl::stream<tcp::socket>> tls_;
  asio::steady_timer timer_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  HttpResponse res_;
  std::string head_text_;
  State state_ = State::kIdle;
  bool keep_alive_ = true;
  bool head_ = false;
  bool linger_ = false;
  size_t lingered_ = 0;
  size_t served_ = 0;
  std::list<HttpConnection*>* listed_in_ = nullptr;
  std::list<HttpConnection*>::iterator listed_at_;
  std::chrono::steady_clock::time_point listed_since_;
};

// A connection gets this long in its list (waiting for a request, or sending one) before a newer
// client may take its place: time for the loop to read a request that is already on its way, so
// that a burst of new clients does not close each other before their requests are read. Any
// longer, and an attacker who reopens every connection it loses holds the places, and the listen
// backlog, long enough to keep good clients out.
constexpr std::chrono::milliseconds kEvictionGrace{100};

void HttpServer::Impl::make_room() {
  while (live >= opt.max_connections) {
    const auto now = std::chrono::steady_clock::now();
    auto aged = [&](const std::list<HttpConnection*>& l) {
      return !l.empty() && now - l.front()->listed_since() >= kEvictionGrace;
    };
    // Idle keep-alive connections first, oldest first; then the slowest requests.
    HttpConnection* victim = aged(idle) ? idle.front() : aged(reading) ? reading.front() : nullptr;
    if (!victim) return;  // every place is new or being answered; they finish or age soon
    victim->close();      // unlists itself
  }
}

void HttpServer::Impl::pause_accepting(std::chrono::milliseconds retry) {
  accept_paused = true;
  accept_retry.expires_after(retry);
  accept_retry.async_wait([this](error_code e) {
    if (e || !accept_paused || stopping) return;  // cancelled, or a closing connection resumed it
    accept_paused = false;
    accept();
  });
}

void HttpServer::Impl::connection_closed() {
  if (!accept_paused || stopping) return;
  accept_paused = false;
  accept_retry.cancel();
  asio::post(ioc, [this] {
    if (!stopping && acceptor.is_open()) accept();
  });
}

void HttpServer::Impl::admit(tcp::socket socket) {
  error_code ignored;
  // Without TCP_NODELAY the small trailer write waits for the body's ACK (Nagle + delayed ACK).
  socket.set_option(tcp::no_delay(true), ignored);
  std::make_shared<HttpConnection>(*this, std::move(socket))->start();
}

void HttpServer::Impl::accept() {
  // A place is made before accepting, not after: at the limit, new clients wait in the listen
  // backlog until a connection closes or ages, instead of being accepted and closed at once.
  make_room();
  if (live >= opt.max_connections) return pause_accepting(kEvictionGrace / 4);
  acceptor.async_accept([this](error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
    // Out of file descriptors: accepting again at once would spin; try a little later.
    if (ec) return pause_accepting(std::chrono::milliseconds(50));
    admit(std::move(socket));
    accept();
  });
}

Result<int> HttpServer::Impl::bind(const ListenAddress& addr) {
  // ":port" means every interface: "::" with IPV6_V6ONLY off takes IPv4 too; hosts without IPv6
  // fall back to 0.0.0.0.
  std::vector<std::string> hosts =
      addr.all_interfaces() ? std::vector<std::string>{"::", "0.0.0.0"} : std::vector<std::string>{addr.host};
  error_code last;
  for (const std::string& host : hosts) {
    tcp::resolver resolver(ioc);
    auto endpoints = resolver.resolve(host, std::to_string(addr.port),
                                      tcp::resolver::passive | tcp::resolver::numeric_service, last);
    if (last) continue;
    for (const auto& entry : endpoints) {
      error_code ec;
      tcp::acceptor a(ioc);
      a.open(entry.endpoint().protocol(), ec);
      if (!ec && entry.endpoint().address().is_v6()) a.set_option(asio::ip::v6_only(false), ec);
      // SO_REUSEADDR allows quick restarts; unlike SO_REUSEPORT it still reports a second agent.
      if (!ec) a.set_option(tcp::acceptor::reuse_address(true), ec);
      if (!ec) a.bind(entry.endpoint(), ec);
      if (!ec) a.listen(opt.listen_backlog, ec);
      if (ec) {
        last = ec;
        continue;
      }
      const int bound = a.local_endpoint().port();
      acceptor = std::move(a);
      return bound;
    }
  }
  const std::string why = last ? last.message() : "cannot resolve or bind";
  return Error{last.value(), "cannot listen on " + opt.listen_address + ": " + why};
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

  auto web = build_web_state(m.opt.web_config.get(), m.opt.max_concurrent_bcrypt);
  if (!web) return web.error();
  {
    std::lock_guard web_lock(m.web_mu);
    m.web_state = std::move(web).value();
  }
  // Each connection is a file descriptor; the usual soft limit of 1024 would end accepting long
  // before max_connections. The hard limit is the operator's to set.
  rlimit nofile{};
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &nofile);
  }
  auto port = m.bind(*addr);
  if (!port) return port.error();
  m.port = *port;
  m.started = true;
  m.handlers.emplace(m.opt.max_threads);
  asio::post(m.ioc, [&m] { m.accept(); });
  m.loop = std::thread([&m] {
    name_this_thread("gm-http");
    m.ioc.run();
  });
  if (m.log) {
    // The one start-up line that says where the agent serves; with port 0 it names the bound port.
    m.log->info("listening", {{"address", m.opt.listen_address},
                              {"port", std::to_string(*port)},
                              {"telemetry_path", m.opt.telemetry_path},
                              {"tls", m.web()->tls ? "true" : "false"},
                              {"basic_auth", m.web()->auth ? "true" : "false"}});
  }
  return {};
}

Result<void> HttpServer::set_web_config(std::shared_ptr<const WebConfig> config) {
  Impl& m = *impl_;
  auto web = build_web_state(config.get(), m.opt.max_concurrent_bcrypt);
  if (!web) return web.error();
  std::lock_guard lock(m.web_mu);
  m.web_state = std::move(web).value();
  return {};
}

void HttpServer::stop() {
  Impl& m = *impl_;
  std::lock_guard lock(m.lifecycle);
  if (!m.started || m.stopped) return;
  m.stopped = true;
  asio::post(m.ioc, [&m] {
    m.stopping = true;
    error_code ignored;
    m.acceptor.close(ignored);
    m.accept_retry.cancel();
    std::vector<HttpConnection*> all(m.open.begin(), m.open.end());
    for (HttpConnection* c : all) c->close_if_waiting();
  });
  // The loop ends once the connections still being answered have written their responses.
  if (m.loop.joinable()) m.loop.join();
  m.handlers->join();
}

}  // namespace gpumeter
