// The HTTP client of the query API: URLs, credentials, a deadline per request, and the answer's
// status and body handed to the readers of prom_answer.cpp.
#include "report/prom_api.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <condition_variable>
#include <mutex>
#include <thread>

#include <fmt/format.h>

namespace gpumeter::report {

namespace {

using nlohmann::json;

struct ParsedUrl {
  std::string scheme_host_port;
  std::string prefix;  // no trailing slash
  std::string user, password;
};

Result<ParsedUrl> parse_url(const std::string& url) {
  auto bad = [&](std::string_view why) {
    return Error{0, fmt::format("--url \"{}\": {} (expected http://host:port or https://host[:port][/prefix])", url, why)};
  };
  auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return bad("no scheme");
  std::string scheme = url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") return bad("the scheme must be http or https");
  std::string rest = url.substr(scheme_end + 3);
  auto slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  ParsedUrl out;
  out.prefix = slash == std::string::npos ? "" : rest.substr(slash);
  while (!out.prefix.empty() && out.prefix.back() == '/') out.prefix.pop_back();
  if (out.prefix.find_first_of("?#") != std::string::npos) return bad("no query or fragment is allowed");
  if (auto at = authority.rfind('@'); at != std::string::npos) {
    std::string userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    auto colon = userinfo.find(':');
    out.user = userinfo.substr(0, colon);
    if (colon != std::string::npos) out.password = userinfo.substr(colon + 1);
  }
  if (authority.empty()) return bad("no host");
  out.scheme_host_port = scheme + "://" + authority;
  return out;
}

// Ends a request that is still running at its deadline. cpp-httplib's timeouts apply to each
// read, so a server sending one byte at a time would otherwise renew them for ever;
// Client::stop() is its thread-safe way to abort the request in flight.
class Watchdog {
 public:
  explicit Watchdog(httplib::Client& client) : client_(client), thread_([this] { run(); }) {}
  ~Watchdog() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void arm(std::chrono::steady_clock::time_point deadline) {
    {
      std::lock_guard lock(mu_);
      deadline_ = deadline;
      armed_ = true;
      fired_ = false;
    }
    cv_.notify_all();
  }
  // True when the deadline passed and the request was stopped.
  bool disarm() {
    std::lock_guard lock(mu_);
    armed_ = false;
    return fired_;
  }

 private:
  void run() {
    std::unique_lock lock(mu_);
    while (!stopping_) {
      if (!armed_) {
        cv_.wait(lock);
      } else if (std::chrono::steady_clock::now() >= deadline_) {
        client_.stop();
        fired_ = true;
        armed_ = false;
      } else {
        cv_.wait_until(lock, deadline_);
      }
    }
  }

  httplib::Client& client_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool armed_ = false;
  bool fired_ = false;
  std::chrono::steady_clock::time_point deadline_;
  std::thread thread_;
};

std::string form_encode(const httplib::Params& params) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const auto& [k, v] : params) {
    if (!out.empty()) out += '&';
    for (const std::string* part : {&k, &v}) {
      for (unsigned char c : *part) {
        if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
          out += static_cast<char>(c);
        } else {
          out += '%';
          out += kHex[c >> 4];
          out += kHex[c & 15];
        }
      }
      if (part == &k) out += '=';
    }
  }
  return out;
}

std::string describe_failure(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection: return "cannot connect";
    case httplib::Error::ConnectionTimeout: return "no connection within the timeout";
    case httplib::Error::Read: return "the connection failed while reading the answer";
    case httplib::Error::Write: return "the connection failed while sending the query";
    case httplib::Error::SSLConnection: return "the TLS handshake failed";
    case httplib::Error::SSLServerVerification: return "the server's TLS certificate was not accepted";
    default: return httplib::to_string(e);
  }
}

class HttpPromApi final : public PromApi {
 public:
  HttpPromApi(ParsedUrl url, std::string display, std::chrono::milliseconds timeout, std::size_t max_answer_bytes)
      : url_(std::move(url)),
        display_(std::move(display)),
        timeout_(timeout),
        max_answer_bytes_(max_answer_bytes),
        client_(url_.scheme_host_port),
        watchdog_(client_) {
    client_.set_connection_timeout(std::chrono::duration_cast<std::chrono::seconds>(timeout).count() > 10
                                       ? std::chrono::seconds(10)
                                       : std::chrono::duration_cast<std::chrono::seconds>(timeout));
    client_.set_read_timeout(timeout);
    client_.set_write_timeout(timeout);
    client_.set_keep_alive(true);
    // Small requests on a kept-alive connection otherwise wait for Nagle's algorithm and the
    // server's delayed acknowledgement: about 40 ms each, most of a month's report.
    client_.set_tcp_nodelay(true);
    if (!url_.user.empty()) client_.set_basic_auth(url_.user, url_.password);
  }

  // Every request's time range ends at least 1 ms after the last instant it asks about.
  // VictoriaMetrics looks series up in a per-day index and takes a range's end as exclusive
  // (lib/storage TimeRange.DateRange: the last day is that of end - 1 ms). A request ending at
  // exactly 00:00 UTC (a report from the first of the month) would search only the day before,
  // and miss every series whose first sample is at that instant, although the sample is inside
  // the evaluated window. Prometheus answers the same either way.

  // As the one point at t of a range query to t + 1 ms: the same evaluation, with the wider end.
  Result<std::vector<Series>> query(std::string_view expr, double t) override {
    auto r = post_range(expr, t, t + kPastTheEnd, 1.0, "query");
    if (!r) return r.error();
    for (const auto& s : *r) {
      if (s.samples.size() != 1) {
        return Error{0, fmt::format("{}: {} points for the one instant {:.3f}", describe("/api/v1/query_range", expr),
                                    s.samples.size(), t)};
      }
    }
    return r;
  }

  Result<std::vector<Series>> query_range(std::string_view expr, double start, double end, double step) override {
    // The grid is unchanged: the step is far longer than a millisecond.
    return post_range(expr, start, end + kPastTheEnd, step, "query_range");
  }

  // The window (after - 1 ms, upto + 1 ms] at upto + 1 ms, trimmed to (after, upto].
  Result<std::vector<Series>> raw_samples(std::string_view selector, double after, double upto) override {
    const std::string expr =
        fmt::format("{}[{}]", selector, promql_range(upto - after + 2 * kPastTheEnd));
    httplib::Params p{{"query", expr}, {"time", number(upto + kPastTheEnd)}};
    auto body = post("/api/v1/query", p, fmt::format("query {}", expr));
    if (!body) return body.error();
    auto r = parse_query_response(*body, describe("/api/v1/query", expr));
    if (!r) return r.error();
    return samples_between(std::move(*r), after, upto);
  }

  Result<std::vector<Labels>> series(std::string_view match, double start, double end) override {
    httplib::Params p{{"match[]", std::string(match)}, {"start", number(start)}, {"end", number(end + kPastTheEnd)}};
    auto body = post("/api/v1/series", p, fmt::format("series {}", match));
    if (!body) return body.error();
    return parse_series_response(*body, describe("/api/v1/series", match));
  }

  std::unique_ptr<PromApi> another() override {
    auto other = std::make_unique<HttpPromApi>(url_, display_, timeout_, max_answer_bytes_);
    other->requests_ = requests_;
    other->on_request_ = on_request_;
    return other;
  }

  // Through exchange() as every query is: the same size cap and deadline, so a server that
  // answers buildinfo with gigabytes, a gzip bomb or an endless stream is cut off as a query is.
  std::string backend() override {
    httplib::Request req;
    req.method = "GET";
    req.path = url_.prefix + "/api/v1/status/buildinfo";
    auto res = exchange(std::move(req), "buildinfo");
    if (!res) return "unknown";
    json doc = json::parse(res->body, nullptr, false);
    if (res->status == 200 && doc.is_object() && doc.contains("data") && doc["data"].is_object() &&
        doc["data"].contains("version") && doc["data"]["version"].is_string()) {
      return "Prometheus " + doc["data"]["version"].get<std::string>();
    }
    // VictoriaMetrics answers buildinfo with empty data and names itself in a header.
    if (res->headers.count("X-Server-Hostname") || res->headers.count("X-Victoriametrics-Version")) {
      return "VictoriaMetrics";
    }
    return "unknown";
  }

 private:
  static constexpr double kPastTheEnd = 1e-3;

  static std::string number(double v) { return fmt::format("{:.3f}", v); }

  Result<std::vector<Series>> post_range(std::string_view expr, double start, double end, double step,
                                         std::string_view verb) {
    httplib::Params p{{"query", std::string(expr)}, {"start", number(start)}, {"end", number(end)},
                      {"step", number(step)}, {"nocache", "1"}};
    auto body = post("/api/v1/query_range", p, fmt::format("{} {}", verb, expr));
    if (!body) return body.error();
    return parse_query_response(*body, describe("/api/v1/query_range", expr));
  }

  std::string describe(std::string_view path, std::string_view expr) const {
    return fmt::format("{}{} [{}]", display_, path, excerpt(expr, 120));
  }

  // An answer as it came, whatever its status.
  struct Answer {
    int status = 0;
    httplib::Headers headers;
    std::string body;
  };

  // Sends one request under the deadline (--timeout) and the size cap (--max-answer-size, on
  // the body as decoded, so a gzip bomb is capped too), counts it and reports it for progress.
  // Every request of the report goes through here.
  Result<Answer> exchange(httplib::Request req, std::string what) {
    const auto started = std::chrono::steady_clock::now();
    const std::string where = display_ + req.path.substr(url_.prefix.size());
    Answer answer;
    bool too_big = false;
    req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
      if (answer.body.size() + n > max_answer_bytes_) {
        too_big = true;
        return false;
      }
      answer.body.append(data, n);
      return true;
    };
    watchdog_.arm(started + timeout_);
    auto res = client_.send(req);
    const bool stopped = watchdog_.disarm();
    count_request();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    // The client's own read timeout equals the deadline: whichever ends the request first, a
    // failure at the deadline is the deadline's.
    const bool late = stopped || (!res && seconds >= std::chrono::duration<double>(timeout_).count());
    if (on_request_) on_request_(RequestInfo{std::move(what), seconds});
    if (late) {
      return Error{0, fmt::format("{}: no complete answer within the timeout of {:.0f} s (--timeout)", where,
                                  std::chrono::duration<double>(timeout_).count())};
    }
    if (too_big) {
      return Error{0, fmt::format("{}: the answer is larger than {} MiB (--max-answer-size); query a shorter "
                                  "period or a longer --step",
                                  where, max_answer_bytes_ >> 20)};
    }
    if (!res) return Error{0, fmt::format("cannot reach {}: {}", where, describe_failure(res.error()))};
    answer.status = res->status;
    answer.headers = res->headers;
    return answer;
  }

  Result<std::string> post(const std::string& path, const httplib::Params& params, std::string what) {
    httplib::Request req;
    req.method = "POST";
    req.path = url_.prefix + path;
    req.headers.emplace("Content-Type", "application/x-www-form-urlencoded");
    req.body = form_encode(params);
    auto answer = exchange(std::move(req), std::move(what));
    if (!answer) return answer.error();
    if (answer->status != 200) {
      const std::string where = display_ + path;
      // Prometheus and VictoriaMetrics put the reason in a JSON envelope; proxies send HTML.
      json doc = json::parse(answer->body, nullptr, false);
      if (doc.is_object() && doc.contains("error") && doc["error"].is_string()) {
        return Error{0, fmt::format("{} answered HTTP {} ({}): {}", where, answer->status,
                                    doc.value("errorType", std::string("error")), doc["error"].get<std::string>())};
      }
      return Error{0, fmt::format("{} answered HTTP {}: \"{}\"", where, answer->status, excerpt(answer->body))};
    }
    return std::move(answer->body);
  }

  ParsedUrl url_;
  std::string display_;
  std::chrono::milliseconds timeout_;
  std::size_t max_answer_bytes_;
  httplib::Client client_;
  Watchdog watchdog_;  // after client_: stopped before the client goes
};

}  // namespace

Result<std::unique_ptr<PromApi>> PromApi::connect(const ApiOptions& options) {
  auto url = parse_url(options.url);
  if (!url) return url.error();
  // The URL as shown in messages and reports: without the password.
  std::string display = url->scheme_host_port + url->prefix;
  std::unique_ptr<PromApi> api =
      std::make_unique<HttpPromApi>(std::move(*url), std::move(display), options.timeout, options.max_answer_bytes);
  return api;
}

}  // namespace gpumeter::report
