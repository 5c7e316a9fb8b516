#pragma once
// An in-memory PromApi that evaluates exactly the expressions the report sends
// (last_over_time, resets() > 0, raw range selectors, /api/v1/series) over given raw samples,
// with Prometheus 2.x's closed range [t - r, t]. For unit tests of the report's logic; the
// integration tests use a real Prometheus and VictoriaMetrics.

#include <algorithm>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "report/prom_api.h"

namespace gpumeter::report::testing {

struct RawSeries {
  std::string name;
  Labels labels;
  std::vector<Sample> samples;  // in time order
};

class FakePromApi final : public PromApi {
 public:
  std::vector<RawSeries> data;
  std::string backend_name = "Prometheus (fake)";
  std::size_t longest_query = 0;  // the longest expression or selector asked, in bytes
  bool remote_read = false;       // serve read_raw(), as Prometheus' remote read API does

  Result<void> read_raw(std::string_view metric, const std::vector<std::string>& uuids, double after, double upto,
                        const std::function<Result<void>(Series&&)>& each) override {
    if (!remote_read) return PromApi::read_raw(metric, uuids, after, upto, each);
    count_request();
    const std::set<std::string> wanted(uuids.begin(), uuids.end());
    std::map<std::string, Series> out;  // in label order, as Prometheus streams them
    for (const auto& s : data) {
      if (s.name != metric) continue;
      auto it = s.labels.find("uuid");
      if (!wanted.empty() && (it == s.labels.end() || !wanted.count(it->second))) continue;
      Series x{s.labels, {}};
      for (const auto& p : s.samples) {
        if (p.t > after && p.t <= upto) x.samples.push_back(p);
      }
      if (!x.samples.empty()) out.emplace(key(s.labels), std::move(x));
    }
    for (auto& [k, s] : out) {
      if (auto ok = each(std::move(s)); !ok) return ok;
    }
    return {};
  }

  Result<std::vector<Series>> query(std::string_view expr, double t) override {
    count_request();
    longest_query = std::max(longest_query, expr.size());
    return eval(std::string(expr), t);
  }

  Result<std::vector<Series>> query_range(std::string_view expr, double start, double end, double step) override {
    count_request();
    longest_query = std::max(longest_query, expr.size());
    std::map<std::string, Series> out;
    for (double t = start; t <= end + 1e-9; t += step) {
      auto r = eval(std::string(expr), t);
      if (!r) return r.error();
      for (auto& s : *r) {
        auto& o = out[key(s.labels)];
        o.labels = s.labels;
        o.samples.push_back(Sample{t, s.samples.at(0).v});
      }
    }
    std::vector<Series> v;
    for (auto& [k, s] : out) v.push_back(std::move(s));
    return v;
  }

  Result<std::vector<Series>> raw_samples(std::string_view selector, double after, double upto) override {
    count_request();
    longest_query = std::max(longest_query, selector.size());
    auto r = eval(std::string(selector) + "[" + promql_range(upto - after) + "]", upto);
    if (!r) return r.error();
    return samples_between(std::move(*r), after, upto);
  }

  Result<std::vector<Labels>> series(std::string_view match, double start, double end) override {
    count_request();
    longest_query = std::max(longest_query, match.size());
    auto sel = parse_selector(std::string(match));
    if (!sel) return Error{0, "fake: bad selector " + std::string(match)};
    std::vector<Labels> out;
    for (const auto& s : data) {
      if (!matches(*sel, s)) continue;
      for (const auto& x : s.samples) {
        if (x.t >= start && x.t <= end) {
          Labels l = s.labels;
          l["__name__"] = s.name;
          out.push_back(l);
          break;
        }
      }
    }
    return out;
  }

  Result<std::vector<std::string>> label_values(std::string_view name, const std::vector<std::string>& matches,
                                                double start, double end) override {
    count_request();
    std::set<std::string> values;
    for (const auto& match : matches) {
      auto found = series(match, start, end);
      if (!found) return found.error();
      --*requests_;  // one request in all
      for (const auto& l : *found) {
        if (auto it = l.find(name); it != l.end() && !it->second.empty()) values.insert(it->second);
      }
    }
    return std::vector<std::string>(values.begin(), values.end());
  }

  std::string backend() override { return backend_name; }

 private:
  struct Selector {
    std::string name;
    std::vector<std::tuple<std::string, bool, std::string>> matchers;  // label, regex?, value
  };

  static std::string key(const Labels& l) {
    std::string k;
    for (const auto& [a, b] : l) k += a + "=" + b + ";";
    return k;
  }

  static std::optional<Selector> parse_selector(const std::string& text) {
    static const std::regex sel_re(R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?)");
    static const std::regex matcher_re(R"re(([a-zA-Z_]+)(=~|=)"((?:[^"\\]|\\.)*)")re");
    std::smatch m;
    if (!std::regex_match(text, m, sel_re)) return std::nullopt;
    Selector sel{m[1], {}};
    std::string body = m[3];
    for (std::sregex_iterator it(body.begin(), body.end(), matcher_re), end; it != end; ++it) {
      std::string value;
      const std::string raw = (*it)[3];
      for (std::size_t i = 0; i < raw.size(); ++i) {
        if (raw[i] == '\\' && i + 1 < raw.size()) ++i;
        value += raw[i];
      }
      sel.matchers.emplace_back((*it)[1], (*it)[2] == "=~", value);
    }
    return sel;
  }

  bool matches(const Selector& sel, const RawSeries& s) {
    if (sel.name != s.name) return false;
    for (const auto& [label, regex, value] : sel.matchers) {
      auto it = s.labels.find(label);
      const std::string v = it == s.labels.end() ? "" : it->second;
      if (regex ? !regex_matches(value, v) : v != value) return false;
    }
    return true;
  }

  // A batch's alternation of uuids is matched against every series: an alternation of plain
  // words as a set, anything else as a regex, each made once.
  bool regex_matches(const std::string& pattern, const std::string& value) {
    if (pattern.find_first_of("\\.*+?()[]{}^$") == std::string::npos) {
      auto it = words_.find(pattern);
      if (it == words_.end()) {
        std::set<std::string> words;
        for (std::size_t at = 0;;) {
          const std::size_t bar = pattern.find('|', at);
          words.insert(pattern.substr(at, bar - at));
          if (bar == std::string::npos) break;
          at = bar + 1;
        }
        it = words_.emplace(pattern, std::move(words)).first;
      }
      return it->second.count(value) > 0;
    }
    auto it = regexes_.find(pattern);
    if (it == regexes_.end()) it = regexes_.emplace(pattern, std::regex(pattern)).first;
    return std::regex_match(value, it->second);
  }

  std::map<std::string, std::regex> regexes_;
  std::map<std::string, std::set<std::string>> words_;

  Result<std::vector<Series>> eval(const std::string& expr, double t) {
    static const std::regex last_re(R"(last_over_time\((.*)\[(\d+)ms\]\))");
    static const std::regex resets_re(R"(resets\((.*)\[(\d+)ms\]\) > 0)");
    static const std::regex raw_re(R"((.*)\[(\d+)ms\])");
    std::smatch m;
    enum { kLast, kResets, kRaw } kind;
    if (std::regex_match(expr, m, last_re))
      kind = kLast;
    else if (std::regex_match(expr, m, resets_re))
      kind = kResets;
    else if (std::regex_match(expr, m, raw_re))
      kind = kRaw;
    else
      return Error{0, "fake: unsupported expression " + expr};
    auto sel = parse_selector(m[1]);
    if (!sel) return Error{0, "fake: bad selector in " + expr};
    const double range = std::stod(m[2]) / 1000.0;
    std::vector<Series> out;
    for (const auto& s : data) {
      if (!matches(*sel, s)) continue;
      std::vector<Sample> in;
      for (const auto& x : s.samples) {
        if (x.t >= t - range - 1e-9 && x.t <= t + 1e-9) in.push_back(x);
      }
      if (in.empty()) continue;
      if (kind == kLast) {
        out.push_back(Series{s.labels, {Sample{t, in.back().v}}});
      } else if (kind == kResets) {
        int n = 0;
        for (std::size_t i = 1; i < in.size(); ++i) n += in[i].v < in[i - 1].v;
        if (n > 0) out.push_back(Series{s.labels, {Sample{t, static_cast<double>(n)}}});
      } else {
        out.push_back(Series{s.labels, in});
      }
    }
    return out;
  }
};

}  // namespace gpumeter::report::testing
