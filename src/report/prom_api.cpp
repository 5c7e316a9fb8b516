#include "report/prom_api.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <cctype>
#include <charconv>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <cmath>
#include <optional>
#include <set>
#include <fmt/format.h>

namespace gpumeter::report {
namespace {

std::string format_labels(const Labels& labels) {
  std::string out = "{";
  for (const auto& [k, v] : labels) out += fmt::format("{}{}=\"{}\"", out.size() > 1 ? "," : "", k, v);
  return out + "}";
}

std::optional<std::string> check_series(std::vector<Series>& series) {
  // A series is one label set: two answers for it would be counted twice.
  std::set<Labels> seen;
  for (auto& s : series) {
    if (!seen.insert(s.labels).second) {
      return fmt::format("the answer holds the series {} twice", format_labels(s.labels));
    }
    // Samples in time order, one per instant. The same sample twice is harmless and dropped;
    // two values at one instant, or time going back, mean the data cannot be trusted.
    std::vector<Sample> kept;
    kept.reserve(s.samples.size());
    for (const Sample& x : s.samples) {
      if (!kept.empty() && x.t <= kept.back().t) {
        if (x.t == kept.back().t && (x.v == kept.back().v || (std::isnan(x.v) && std::isnan(kept.back().v)))) continue;
        if (x.t == kept.back().t) {
          return fmt::format("the series {} has two values at {:.3f} ({} and {})", format_labels(s.labels), x.t,
                             kept.back().v, x.v);
        }
        return fmt::format("the samples of {} go back in time ({:.3f} after {:.3f})", format_labels(s.labels), x.t,
                           kept.back().t);
      }
      kept.push_back(x);
    }
    s.samples = std::move(kept);
  }
  return std::nullopt;
}


using nlohmann::json;

// Printable excerpt of a body for an error message: no control characters, bounded length.
std::string excerpt(std::string_view body, std::size_t max = 160) {
  std::string out;
  for (char c : body.substr(0, max)) out += (static_cast<unsigned char>(c) < 0x20) ? ' ' : c;
  if (body.size() > max) out += "...";
  return out;
}

// Reads a query, query_range or series answer in one pass over the body with nlohmann's SAX
// interface, straight into Series and Labels. A range answer of one counter over 30 days of a
// 1000-GPU fleet holds hundreds of thousands of samples. Built as the library's DOM first, every
// sample cost allocations for its pair, its value string and its number; reading through SAX took
// that report from 19.1 s of CPU to 6.3 s with the same output (bench/report_bench.py,
// docs/report-accuracy.md#performance).
// Problems are noted as they are met, and ordered at the end the way a reader would check them:
// not JSON, no envelope, an error status, no data, the wrong data shape or result type, then the
// first malformed result.
class AnswerReader {
 public:
  enum class Mode { kQuery, kSeries };
  AnswerReader(Mode mode, std::string_view what) : mode_(mode), what_(what) {}

  // nlohmann::json SAX events.
  bool null() { return scalar(Scalar::kOther); }
  bool boolean(bool) { return scalar(Scalar::kOther); }
  bool number_integer(json::number_integer_t v) { return number(static_cast<double>(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return number(static_cast<double>(v)); }
  bool number_float(json::number_float_t v, const std::string&) { return number(v); }
  bool binary(json::binary_t&) { return scalar(Scalar::kOther); }
  bool string(std::string& v) {
    text_ = &v;
    return scalar(Scalar::kString);
  }
  bool start_object(std::size_t) { return open(true); }
  bool start_array(std::size_t) { return open(false); }
  bool key(std::string& k) {
    stack_.back().key = std::move(k);
    return true;
  }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    syntax_error_ = true;
    return false;
  }

  Result<std::vector<Series>> series_result(std::string_view body) {
    if (auto e = envelope_error(body)) return *e;
    if (!data_ok_ || !result_type_ || !result_list_) {
      return fail("unexpected JSON: data has no resultType and result list");
    }
    if (*result_type_ != "vector" && *result_type_ != "matrix") {
      return Error{0, fmt::format("{}: unexpected result type \"{}\" (vector or matrix expected)", what_, *result_type_)};
    }
    if (problem_) return fail(*problem_);
    const bool vector = *result_type_ == "vector";
    for (std::size_t i = 0; i < series_.size(); ++i) {
      const Shape& shape = shapes_[i];
      if (vector) {
        if (!shape.value) return fail("unexpected JSON: a sample is not [time, \"value\"]");
        series_[i].samples.assign(1, shape.instant);
      } else if (!shape.values) {
        return fail("unexpected JSON: a matrix result has no values");
      }
    }
    if (auto bad = check_series(series_)) return fail(*bad);
    return std::move(series_);
  }

  Result<std::vector<Labels>> labels_result(std::string_view body) {
    if (auto e = envelope_error(body)) return *e;
    if (!data_ok_) return fail("unexpected JSON: data is not a list");
    if (problem_) return fail(*problem_);
    return std::move(label_sets_);
  }

 private:
  // What a container or a value is, from where it sits.
  enum class Role { kSkip, kTop, kData, kResults, kResult, kMetric, kInstant, kValues, kPair, kSeriesList };
  enum class Scalar { kString, kNumber, kOther };
  struct Frame {
    Role role;
    std::string key;    // the key the current member came with, in an object
    std::size_t index;  // members seen so far, in an array
  };
  // What one result held, checked against resultType at the end (it may come last).
  struct Shape {
    bool metric = false, value = false, values = false;
    Sample instant;
  };

  Error fail(std::string_view why) const { return Error{0, fmt::format("{}: {}", what_, why)}; }
  void note(std::string why) {
    if (!problem_) problem_ = std::move(why);
  }

  std::optional<Error> envelope_error(std::string_view body) const {
    if (syntax_error_) return Error{0, fmt::format("{}: the answer is not JSON: \"{}\"", what_, excerpt(body))};
    if (!status_) return Error{0, fmt::format("{}: unexpected JSON: no \"status\" field: \"{}\"", what_, excerpt(body))};
    if (*status_ != "success") {
      return Error{0, fmt::format("{}: the API answered status \"{}\" ({}): {}", what_, *status_,
                                  error_type_.value_or("unknown"), error_.value_or("no error message"))};
    }
    if (!data_) return fail("unexpected JSON: no \"data\" field");
    return std::nullopt;
  }

  // The role of a value arriving now in the innermost open container.
  Role role_here(bool object, bool array) {
    if (stack_.empty()) return object ? Role::kTop : Role::kSkip;
    Frame& f = stack_.back();
    switch (f.role) {
      case Role::kSkip:
        return Role::kSkip;
      case Role::kTop:
        if (f.key == "status") status_ = "?";
        if (f.key == "data") {
          data_ = true;
          if (mode_ == Mode::kQuery ? object : array) {
            data_ok_ = true;
            return mode_ == Mode::kQuery ? Role::kData : Role::kSeriesList;
          }
        }
        return Role::kSkip;
      case Role::kData:
        if (f.key == "result" && array) {
          result_list_ = true;
          return Role::kResults;
        }
        return Role::kSkip;
      case Role::kResults:
        if (object) {
          series_.emplace_back();
          shapes_.emplace_back();
          return Role::kResult;
        }
        note("unexpected JSON: a result has no \"metric\"");
        return Role::kSkip;
      case Role::kResult:
        if (f.key == "metric") {
          shapes_.back().metric = true;
          if (object) return Role::kMetric;
          note("unexpected JSON: \"metric\" is not an object");
        } else if (f.key == "value") {
          shapes_.back().value = true;
          if (array) return Role::kInstant;
          note("unexpected JSON: a sample is not [time, \"value\"]");
        } else if (f.key == "values") {
          shapes_.back().values = true;
          if (array) return Role::kValues;
          note("unexpected JSON: a matrix result has no values");
        }
        return Role::kSkip;
      case Role::kMetric:
        note(fmt::format("unexpected JSON: label {} is not a string", f.key));
        return Role::kSkip;
      case Role::kValues:
        if (array) {
          series_.back().samples.emplace_back();
          return Role::kPair;
        }
        note("unexpected JSON: a sample is not [time, \"value\"]");
        return Role::kSkip;
      case Role::kInstant:
      case Role::kPair:
        note("unexpected JSON: a sample is not [time, \"value\"]");
        return Role::kSkip;
      case Role::kSeriesList:
        if (object) {
          label_sets_.emplace_back();
          return Role::kMetric;
        }
        note("unexpected JSON: \"metric\" is not an object");
        return Role::kSkip;
    }
    return Role::kSkip;
  }

  bool open(bool object) {
    Role role = role_here(object, !object);
    stack_.push_back(Frame{role, {}, 0});
    return true;
  }

  bool close() {
    const Frame f = std::move(stack_.back());
    stack_.pop_back();
    if ((f.role == Role::kPair || f.role == Role::kInstant) && f.index != 2) {
      note("unexpected JSON: a sample is not [time, \"value\"]");
    } else if (f.role == Role::kResult && !shapes_.back().metric) {
      note("unexpected JSON: a result has no \"metric\"");
    }
    if (!stack_.empty()) ++stack_.back().index;
    return true;
  }

  bool number(double v) {
    number_ = v;
    return scalar(Scalar::kNumber);
  }

  // The sample a pair being read fills.
  Sample& pair_target(Role role) { return role == Role::kInstant ? shapes_.back().instant : series_.back().samples.back(); }

  // A string, number, boolean or null. Where only a container belongs, role_here() notes the
  // same problem it notes for a container out of place.
  bool scalar(Scalar kind) {
    if (stack_.empty()) return true;  // a bare value: no envelope
    Frame& f = stack_.back();
    const bool string = kind == Scalar::kString;
    if (f.role == Role::kTop && f.key == "status") {
      status_ = string ? *text_ : std::string("?");
    } else if (f.role == Role::kTop && (f.key == "errorType" || f.key == "error")) {
      if (string) (f.key == "error" ? error_ : error_type_) = *text_;
    } else if (f.role == Role::kData && f.key == "resultType") {
      result_type_ = string ? *text_ : std::string();
    } else if (f.role == Role::kMetric && string) {
      if (f.key != "__name__" || mode_ == Mode::kSeries) {
        Labels& labels = mode_ == Mode::kSeries ? label_sets_.back() : series_.back().labels;
        labels.insert_or_assign(std::move(f.key), std::move(*text_));
      }
    } else if ((f.role == Role::kPair || f.role == Role::kInstant) && f.index == 0 && kind == Scalar::kNumber) {
      pair_target(f.role).t = number_;
    } else if ((f.role == Role::kPair || f.role == Role::kInstant) && f.index == 1) {
      if (string) {
        sample_value(*text_, pair_target(f.role));
      } else {
        note("unexpected JSON: a sample value is not a string");
      }
    } else if ((f.role != Role::kPair && f.role != Role::kInstant) || f.index == 0) {
      role_here(false, false);  // a third member of a pair is noted when the pair closes
    }
    ++f.index;
    return true;
  }

  void sample_value(const std::string& s, Sample& out) {
    double v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) {
      note(fmt::format("unexpected sample value \"{}\" (a finite number was expected)", excerpt(s)));
      return;
    }
    out.v = v;
  }

  Mode mode_;
  std::string_view what_;
  std::vector<Frame> stack_;
  std::string* text_ = nullptr;
  double number_ = 0;

  bool syntax_error_ = false;
  std::optional<std::string> status_, error_type_, error_, result_type_;
  bool data_ = false, data_ok_ = false, result_list_ = false;
  std::optional<std::string> problem_;

  std::vector<Series> series_;
  std::vector<Shape> shapes_;
  std::vector<Labels> label_sets_;
};

}  // namespace

Result<std::vector<Series>> parse_query_response(std::string_view body, std::string_view what) {
  AnswerReader reader(AnswerReader::Mode::kQuery, what);
  json::sax_parse(body.begin(), body.end(), &reader);
  return reader.series_result(body);
}

Result<std::vector<Labels>> parse_series_response(std::string_view body, std::string_view what) {
  AnswerReader reader(AnswerReader::Mode::kSeries, what);
  json::sax_parse(body.begin(), body.end(), &reader);
  return reader.labels_result(body);
}

std::string promql_range(double seconds) {
  auto ms = static_cast<long long>(std::ceil(seconds * 1000.0 - 1e-6));
  return fmt::format("{}ms", std::max(1LL, ms));
}

std::vector<Series> samples_between(std::vector<Series> series, double after, double upto) {
  constexpr double kHalfMs = 0.5e-3;
  std::vector<Series> out;
  for (auto& s : series) {
    std::erase_if(s.samples, [&](const Sample& x) { return x.t <= after + kHalfMs || x.t > upto + kHalfMs; });
    if (!s.samples.empty()) out.push_back(std::move(s));
  }
  return out;
}

std::string promql_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string exact_alternation(const std::vector<std::string>& values) {
  std::string out;
  for (const auto& v : values) {
    if (!out.empty()) out += '|';
    for (char c : v) {
      if (std::string_view("\\.+*?()|[]{}^$").find(c) != std::string_view::npos) out += '\\';
      out += c;
    }
  }
  return out;
}

namespace {

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

  std::string backend() override {
    watchdog_.arm(std::chrono::steady_clock::now() + timeout_);
    auto res = client_.Get(url_.prefix + "/api/v1/status/buildinfo");
    watchdog_.disarm();
    count_request();
    if (!res) return "unknown";
    json doc = json::parse(res->body, nullptr, false);
    if (res->status == 200 && doc.is_object() && doc.contains("data") && doc["data"].is_object() &&
        doc["data"].contains("version") && doc["data"]["version"].is_string()) {
      return "Prometheus " + doc["data"]["version"].get<std::string>();
    }
    // VictoriaMetrics answers buildinfo with empty data and names itself in a header.
    if (res->has_header("X-Server-Hostname") || res->has_header("X-Victoriametrics-Version")) return "VictoriaMetrics";
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

  Result<std::string> post(const std::string& path, const httplib::Params& params, std::string what) {
    const auto started = std::chrono::steady_clock::now();
    httplib::Request req;
    req.method = "POST";
    req.path = url_.prefix + path;
    req.headers.emplace("Content-Type", "application/x-www-form-urlencoded");
    req.body = form_encode(params);
    std::string body;
    bool too_big = false;
    req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
      if (body.size() + n > max_answer_bytes_) {
        too_big = true;
        return false;
      }
      body.append(data, n);
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
    const std::string where = display_ + path;
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
    if (res->status != 200) {
      // Prometheus and VictoriaMetrics put the reason in a JSON envelope; proxies send HTML.
      json doc = json::parse(body, nullptr, false);
      if (doc.is_object() && doc.contains("error") && doc["error"].is_string()) {
        return Error{0, fmt::format("{} answered HTTP {} ({}): {}", where, res->status,
                                    doc.value("errorType", std::string("error")), doc["error"].get<std::string>())};
      }
      return Error{0, fmt::format("{} answered HTTP {}: \"{}\"", where, res->status, excerpt(body))};
    }
    return body;
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
