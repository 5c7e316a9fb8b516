#include "report/prom_api.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <charconv>
#include <cmath>
#include <fmt/format.h>

namespace gpumeter::report {
namespace {

using nlohmann::json;

// Printable excerpt of a body for an error message: no control characters, bounded length.
std::string excerpt(std::string_view body, std::size_t max = 160) {
  std::string out;
  for (char c : body.substr(0, max)) out += (static_cast<unsigned char>(c) < 0x20) ? ' ' : c;
  if (body.size() > max) out += "...";
  return out;
}

Result<double> parse_number(const json& v, std::string_view what) {
  if (!v.is_string()) return Error{0, fmt::format("{}: unexpected JSON: a sample value is not a string", what)};
  const auto& s = v.get_ref<const std::string&>();
  double out = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(out)) {
    return Error{0, fmt::format("{}: unexpected sample value \"{}\" (a finite number was expected)", what, excerpt(s))};
  }
  return out;
}

Result<Sample> parse_sample(const json& pair, std::string_view what) {
  if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number()) {
    return Error{0, fmt::format("{}: unexpected JSON: a sample is not [time, \"value\"]", what)};
  }
  auto v = parse_number(pair[1], what);
  if (!v) return v.error();
  return Sample{pair[0].get<double>(), *v};
}

Result<Labels> parse_labels(const json& metric, std::string_view what, bool keep_name) {
  if (!metric.is_object()) return Error{0, fmt::format("{}: unexpected JSON: \"metric\" is not an object", what)};
  Labels out;
  for (const auto& [k, v] : metric.items()) {
    if (!v.is_string()) return Error{0, fmt::format("{}: unexpected JSON: label {} is not a string", what, k)};
    if (k == "__name__" && !keep_name) continue;
    out.emplace(k, v.get<std::string>());
  }
  return out;
}

// The envelope shared by every endpoint; returns `data`.
Result<json> parse_envelope(std::string_view body, std::string_view what) {
  json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return Error{0, fmt::format("{}: the answer is not JSON: \"{}\"", what, excerpt(body))};
  }
  if (!doc.is_object() || !doc.contains("status")) {
    return Error{0, fmt::format("{}: unexpected JSON: no \"status\" field: \"{}\"", what, excerpt(body))};
  }
  if (doc["status"] != "success") {
    std::string type = doc.value("errorType", std::string("unknown"));
    std::string error = doc.value("error", std::string("no error message"));
    return Error{0, fmt::format("{}: the API answered status \"{}\" ({}): {}", what,
                                doc["status"].is_string() ? doc["status"].get<std::string>() : "?", type, error)};
  }
  if (!doc.contains("data")) return Error{0, fmt::format("{}: unexpected JSON: no \"data\" field", what)};
  return doc["data"];
}

}  // namespace

Result<std::vector<Series>> parse_query_response(std::string_view body, std::string_view what) {
  auto data = parse_envelope(body, what);
  if (!data) return data.error();
  const json& d = *data;
  if (!d.is_object() || !d.contains("resultType") || !d.contains("result") || !d["result"].is_array()) {
    return Error{0, fmt::format("{}: unexpected JSON: data has no resultType and result list", what)};
  }
  const std::string type = d["resultType"].is_string() ? d["resultType"].get<std::string>() : "";
  std::vector<Series> out;
  for (const auto& item : d["result"]) {
    if (!item.is_object() || !item.contains("metric")) {
      return Error{0, fmt::format("{}: unexpected JSON: a result has no \"metric\"", what)};
    }
    auto labels = parse_labels(item["metric"], what, false);
    if (!labels) return labels.error();
    Series s{std::move(*labels), {}};
    if (type == "vector") {
      auto sample = parse_sample(item.value("value", json()), what);
      if (!sample) return sample.error();
      s.samples.push_back(*sample);
    } else if (type == "matrix") {
      const json& values = item.value("values", json());
      if (!values.is_array()) return Error{0, fmt::format("{}: unexpected JSON: a matrix result has no values", what)};
      s.samples.reserve(values.size());
      for (const auto& pair : values) {
        auto sample = parse_sample(pair, what);
        if (!sample) return sample.error();
        s.samples.push_back(*sample);
      }
    } else {
      return Error{0, fmt::format("{}: unexpected result type \"{}\" (vector or matrix expected)", what, type)};
    }
    out.push_back(std::move(s));
  }
  return out;
}

Result<std::vector<Labels>> parse_series_response(std::string_view body, std::string_view what) {
  auto data = parse_envelope(body, what);
  if (!data) return data.error();
  if (!data->is_array()) return Error{0, fmt::format("{}: unexpected JSON: data is not a list", what)};
  std::vector<Labels> out;
  for (const auto& item : *data) {
    auto labels = parse_labels(item, what, true);
    if (!labels) return labels.error();
    out.push_back(std::move(*labels));
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

class HttpPromApi final : public PromApi {
 public:
  HttpPromApi(ParsedUrl url, std::string display, std::chrono::milliseconds timeout)
      : url_(std::move(url)), display_(std::move(display)), timeout_(timeout), client_(url_.scheme_host_port) {
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

  Result<std::vector<Series>> query(std::string_view expr, double t) override {
    httplib::Params p{{"query", std::string(expr)}, {"time", number(t)}};
    auto body = post("/api/v1/query", p, fmt::format("query {}", expr));
    if (!body) return body.error();
    return parse_query_response(*body, describe("/api/v1/query", expr));
  }

  Result<std::vector<Series>> query_range(std::string_view expr, double start, double end, double step) override {
    httplib::Params p{{"query", std::string(expr)}, {"start", number(start)}, {"end", number(end)},
                      {"step", number(step)}, {"nocache", "1"}};
    auto body = post("/api/v1/query_range", p, fmt::format("query_range {}", expr));
    if (!body) return body.error();
    return parse_query_response(*body, describe("/api/v1/query_range", expr));
  }

  Result<std::vector<Labels>> series(std::string_view match, double start, double end) override {
    httplib::Params p{{"match[]", std::string(match)}, {"start", number(start)}, {"end", number(end)}};
    auto body = post("/api/v1/series", p, fmt::format("series {}", match));
    if (!body) return body.error();
    return parse_series_response(*body, describe("/api/v1/series", match));
  }

  std::unique_ptr<PromApi> another() override {
    auto other = std::make_unique<HttpPromApi>(url_, display_, timeout_);
    other->requests_ = requests_;
    other->on_request_ = on_request_;
    return other;
  }

  std::string backend() override {
    auto res = client_.Get(url_.prefix + "/api/v1/status/buildinfo");
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
  static std::string number(double v) { return fmt::format("{:.3f}", v); }

  std::string describe(std::string_view path, std::string_view expr) const {
    return fmt::format("{}{} [{}]", display_, path, excerpt(expr, 120));
  }

  Result<std::string> post(const std::string& path, const httplib::Params& params, std::string what) {
    const auto started = std::chrono::steady_clock::now();
    auto res = client_.Post(url_.prefix + path, params);
    count_request();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (on_request_) on_request_(RequestInfo{std::move(what), seconds});
    const std::string where = display_ + path;
    if (!res) {
      return Error{0, fmt::format("cannot reach {}: {}", where, httplib::to_string(res.error()))};
    }
    if (res->status != 200) {
      // Prometheus and VictoriaMetrics put the reason in a JSON envelope; proxies send HTML.
      json doc = json::parse(res->body, nullptr, false);
      if (doc.is_object() && doc.contains("error") && doc["error"].is_string()) {
        return Error{0, fmt::format("{} answered HTTP {} ({}): {}", where, res->status,
                                    doc.value("errorType", std::string("error")), doc["error"].get<std::string>())};
      }
      return Error{0, fmt::format("{} answered HTTP {}: \"{}\"", where, res->status, excerpt(res->body))};
    }
    return std::move(res->body);
  }

  ParsedUrl url_;
  std::string display_;
  std::chrono::milliseconds timeout_;
  httplib::Client client_;
};

}  // namespace

Result<std::unique_ptr<PromApi>> PromApi::connect(const ApiOptions& options) {
  auto url = parse_url(options.url);
  if (!url) return url.error();
  // The URL as shown in messages and reports: without the password.
  std::string display = url->scheme_host_port + url->prefix;
  std::unique_ptr<PromApi> api = std::make_unique<HttpPromApi>(std::move(*url), std::move(display), options.timeout);
  return api;
}

}  // namespace gpumeter::report
