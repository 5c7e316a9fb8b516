// The HTTP client of the query API: URLs, credentials, a deadline per request, and the answer's
// status and body handed to the readers of prom_answer.cpp.
#include "report/prom_api.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "report/http_client.h"
#include "report/remote_read.h"

namespace gpumeter::report {

namespace {

using nlohmann::json;

struct ParsedUrl {
  HttpEndpoint endpoint;
  std::string prefix;  // no trailing slash
  std::string user, password;

  // As messages and reports show it: without user:password@.
  std::string display() const { return (endpoint.tls ? "https://" : "http://") + endpoint.authority + prefix; }
};

Result<ParsedUrl> parse_url(const std::string& url) {
  auto bad = [&](std::string_view why) {
    return Error{0,
                 fmt::format("--url \"{}\": {} (expected http://host:port or https://host[:port][/prefix])", url, why)};
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
  out.endpoint = split_authority(authority, scheme == "https");
  return out;
}

using FormParams = std::vector<std::pair<std::string, std::string>>;

std::string form_encode(const FormParams& params) {
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

std::string describe_failure(HttpFailure f) {
  switch (f) {
    case HttpFailure::kConnect:
      return "cannot connect";
    case HttpFailure::kConnectTimeout:
      return "no connection within the timeout";
    case HttpFailure::kRead:
      return "the connection failed while reading the answer";
    case HttpFailure::kWrite:
      return "the connection failed while sending the query";
    case HttpFailure::kTlsHandshake:
      return "the TLS handshake failed";
    case HttpFailure::kTlsCertificate:
      return "the server's TLS certificate was not accepted";
    default:
      return "the request failed";
  }
}

class HttpPromApi final : public PromApi {
 public:
  HttpPromApi(ParsedUrl url, std::chrono::milliseconds timeout, std::size_t max_answer_bytes)
      : url_(std::move(url)),
        display_(url_.display()),
        timeout_(timeout),
        max_answer_bytes_(max_answer_bytes),
        client_(url_.endpoint, std::min<std::chrono::milliseconds>(timeout, std::chrono::seconds(10)),
                max_answer_bytes) {
    if (!url_.user.empty()) authorization_ = basic_authorization(url_.user, url_.password);
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
    const std::string expr = fmt::format("{}[{}]", selector, promql_range(upto - after + 2 * kPastTheEnd));
    FormParams p{{"query", expr}, {"time", number(upto + kPastTheEnd)}};
    auto body = post("/api/v1/query", p, fmt::format("query {}", expr));
    if (!body) return body.error();
    auto r = parse_query_response(*body, describe("/api/v1/query", expr));
    if (!r) return r.error();
    return samples_between(std::move(*r), after, upto);
  }

  Result<void> read_raw(std::string_view metric, const std::vector<std::string>& uuids, double after, double upto,
                        const std::function<Result<void>(Series&&)>& each) override {
    std::vector<RawMatcher> matchers{{"__name__", std::string(metric), false}};
    if (!uuids.empty()) matchers.push_back({"uuid", exact_alternation(uuids), true});
    // Whole milliseconds, the store's resolution: (after, upto] is [after + 1 ms, upto].
    const std::int64_t start_ms = std::llround(after * 1000) + 1, end_ms = std::llround(upto * 1000);
    ChunkedReader reader(start_ms, end_ms, each);
    HttpRequest req{"POST",
                    url_.prefix + std::string(kReadPath),
                    {{"Content-Type", "application/x-protobuf"},
                     {"Content-Encoding", "snappy"},
                     {"X-Prometheus-Remote-Read-Version", "0.1.0"}},
                    remote_read_request(matchers, start_ms, end_ms),
                    [&reader](std::string_view piece) { return reader.feed(piece); },
                    std::string(kStreamedType)};
    const std::string what = uuids.empty() ? fmt::format("remote read {}", metric)
                                           : fmt::format("remote read {} of {} GPUs", metric, uuids.size());
    const std::string where = fmt::format("{}{} [{}]", display_, kReadPath, what);
    auto answer = exchange(std::move(req), what);
    if (!answer) return answer.error();
    if (answer->status != 200) {
      return Error{kNoRemoteRead,
                   fmt::format("{} answered HTTP {}: \"{}\"", where, answer->status, excerpt(answer->body))};
    }
    if (!answer->streamed) {
      return Error{kNoRemoteRead, fmt::format("{} did not answer with streamed chunks (Content-Type \"{}\", not {})",
                                              where, answer->header("Content-Type"), kStreamedType)};
    }
    if (auto ok = reader.finish(); !ok) return Error{0, fmt::format("{}: {}", where, ok.error().message)};
    return {};
  }

  Result<std::vector<Labels>> series(std::string_view match, double start, double end) override {
    FormParams p{{"match[]", std::string(match)}, {"start", number(start)}, {"end", number(end + kPastTheEnd)}};
    auto body = post("/api/v1/series", p, fmt::format("series {}", match));
    if (!body) return body.error();
    return parse_series_response(*body, describe("/api/v1/series", match));
  }

  // Prometheus serves this endpoint to GET only.
  Result<std::vector<std::string>> label_values(std::string_view name, const std::vector<std::string>& matches,
                                                double start, double end) override {
    FormParams p{{"start", number(start)}, {"end", number(end + kPastTheEnd)}};
    for (const auto& m : matches) p.emplace_back("match[]", m);
    const std::string path = fmt::format("/api/v1/label/{}/values", name);
    HttpRequest req{"GET", url_.prefix + path + "?" + form_encode(p), {}, {}};
    const std::string what = fmt::format("label values {}", name);
    auto body = answer_body(exchange(std::move(req), what), path);
    if (!body) return body.error();
    return parse_label_values_response(*body, describe(path, name));
  }

  std::unique_ptr<PromApi> another() override {
    auto other = std::make_unique<HttpPromApi>(url_, timeout_, max_answer_bytes_);
    other->requests_ = requests_;
    other->on_request_ = on_request_;
    return other;
  }

  // Through exchange() as every query is: the same size cap and deadline, so a server that
  // answers buildinfo with gigabytes, a gzip bomb or an endless stream is cut off as a query is.
  std::string backend() override {
    HttpRequest req{"GET", url_.prefix + "/api/v1/status/buildinfo", {}, {}};
    auto res = exchange(std::move(req), "buildinfo");
    if (!res) return "unknown";
    json doc = json::parse(res->body, nullptr, false);
    if (res->status == 200 && doc.is_object() && doc.contains("data") && doc["data"].is_object() &&
        doc["data"].contains("version") && doc["data"]["version"].is_string()) {
      return "Prometheus " + doc["data"]["version"].get<std::string>();
    }
    // VictoriaMetrics answers buildinfo with empty data and names itself in a header.
    if (res->has_header("X-Server-Hostname") || res->has_header("X-Victoriametrics-Version")) {
      return "VictoriaMetrics";
    }
    return "unknown";
  }

 private:
  static constexpr double kPastTheEnd = 1e-3;
  static constexpr std::string_view kReadPath = "/api/v1/read";
  static constexpr std::string_view kStreamedType = "application/x-streamed-protobuf";

  static std::string number(double v) { return fmt::format("{:.3f}", v); }

  Result<std::vector<Series>> post_range(std::string_view expr, double start, double end, double step,
                                         std::string_view verb) {
    FormParams p{{"query", std::string(expr)},
                 {"start", number(start)},
                 {"end", number(end)},
                 {"step", number(step)},
                 {"nocache", "1"}};
    auto body = post("/api/v1/query_range", p, fmt::format("{} {}", verb, expr));
    if (!body) return body.error();
    return parse_query_response(*body, describe("/api/v1/query_range", expr));
  }

  std::string describe(std::string_view path, std::string_view expr) const {
    return fmt::format("{}{} [{}]", display_, path, excerpt(expr, 120));
  }

  // Sends one request under the deadline (--timeout) and the size cap (--max-answer-size, on
  // the body as decoded, so a gzip bomb is capped too), counts it and reports it for progress.
  // Every request of the report goes through here. The answer comes whatever its status.
  Result<HttpAnswer> exchange(HttpRequest req, std::string what) {
    const auto started = std::chrono::steady_clock::now();
    const std::string where = display_ + req.target.substr(url_.prefix.size());
    if (!authorization_.empty()) req.headers.emplace_back("Authorization", authorization_);
    auto res = client_.send(req, started + timeout_);
    count_request();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (on_request_) on_request_(RequestInfo{std::move(what), seconds});
    if (res) return res;
    const auto failure = static_cast<HttpFailure>(res.error().code);
    // Whatever ends a request at its deadline, its failure is the deadline's.
    if (failure == HttpFailure::kDeadline || seconds >= std::chrono::duration<double>(timeout_).count()) {
      return Error{0, fmt::format("{}: no complete answer within the timeout of {:.0f} s (--timeout)", where,
                                  std::chrono::duration<double>(timeout_).count())};
    }
    if (failure == HttpFailure::kTooLarge) {
      return Error{0, fmt::format("{}: the answer is larger than {} MiB (--max-answer-size); query a shorter "
                                  "period or a longer --step",
                                  where, max_answer_bytes_ >> 20)};
    }
    if (failure == HttpFailure::kEncoding || failure == HttpFailure::kRejected) {
      return Error{0, fmt::format("{}: {}", where, res.error().message)};
    }
    return Error{0, fmt::format("cannot reach {}: {}", where, describe_failure(failure))};
  }

  Result<std::string> post(const std::string& path, const FormParams& params, std::string what) {
    HttpRequest req{
        "POST", url_.prefix + path, {{"Content-Type", "application/x-www-form-urlencoded"}}, form_encode(params)};
    return answer_body(exchange(std::move(req), std::move(what)), path);
  }

  // The body of an answer with status 200; else the reason the server gave.
  Result<std::string> answer_body(Result<HttpAnswer> answer, const std::string& path) {
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
  std::string display_;  // url_.display(), made once
  std::chrono::milliseconds timeout_;
  std::size_t max_answer_bytes_;
  std::string authorization_;  // the Authorization header's value, empty without credentials
  HttpClient client_;          // one kept-alive connection
};

}  // namespace

Result<void> PromApi::read_raw(std::string_view metric, const std::vector<std::string>&, double, double,
                               const std::function<Result<void>(Series&&)>&) {
  return Error{kNoRemoteRead, fmt::format("remote read {}: this API client has no remote read", metric)};
}

std::string url_for_display(const std::string& url) {
  auto parsed = parse_url(url);
  return parsed ? parsed->display() : url;
}

Result<std::unique_ptr<PromApi>> PromApi::connect(const ApiOptions& options) {
  auto url = parse_url(options.url);
  if (!url) return url.error();
  std::unique_ptr<PromApi> api =
      std::make_unique<HttpPromApi>(std::move(*url), options.timeout, options.max_answer_bytes);
  return api;
}

}  // namespace gpumeter::report
