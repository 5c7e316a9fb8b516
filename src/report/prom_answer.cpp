// The query API's answers: their JSON read into Series and Labels, and the PromQL literals the
// report's queries are written with. The HTTP client that fetches the answers is prom_api.cpp.
#include <nlohmann/json.hpp>

#include <cctype>
#include <charconv>
#include <cmath>
#include <functional>
#include <optional>
#include <string_view>
#include <unordered_map>

#include <fmt/format.h>

#include "report/canonical_answer.h"
#include "report/prom_api.h"

namespace gpumeter::report {

std::uint64_t series_id(const Labels& labels) {
  // Each name and value hashed in place and combined in order, as labels_key() would join them:
  // no string is built (a report takes it for every series of every answer).
  std::uint64_t h = labels.size();
  for (const auto& [k, v] : labels) {
    for (std::string_view part : {std::string_view(k), std::string_view(v)}) {
      h ^= std::hash<std::string_view>{}(part) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    }
  }
  return h;
}

std::string labels_key(const Labels& labels) {
  std::string key;
  for (const auto& [k, v] : labels) {
    key += k;
    key += '\x1f';
    key += v;
    key += '\x1e';
  }
  return key;
}

namespace {

std::string format_labels(const Labels& labels) {
  std::string out = "{";
  for (const auto& [k, v] : labels) out += fmt::format("{}{}=\"{}\"", out.size() > 1 ? "," : "", k, v);
  return out + "}";
}

std::optional<std::string> check_series(std::vector<Series>& series) {
  // A series is one label set: two answers for it would be counted twice. Found by hash first,
  // without copying label sets: an answer holds thousands of series.
  std::unordered_multimap<std::uint64_t, std::size_t> seen;
  seen.reserve(series.size());
  for (std::size_t i = 0; i < series.size(); ++i) {
    Series& s = series[i];
    const std::uint64_t id = series_id(s.labels);
    const auto [first, last] = seen.equal_range(id);
    for (auto it = first; it != last; ++it) {
      if (series[it->second].labels == s.labels) {
        return fmt::format("the answer holds the series {} twice", format_labels(s.labels));
      }
    }
    seen.emplace(id, i);
    // Samples in time order, one per instant. The same sample twice is harmless and dropped (in
    // place); two values at one instant, or time going back, mean the data cannot be trusted.
    std::size_t kept = 0;
    for (const Sample& x : s.samples) {
      if (kept > 0 && x.t <= s.samples[kept - 1].t) {
        const Sample& last_kept = s.samples[kept - 1];
        if (x.t == last_kept.t && (x.v == last_kept.v || (std::isnan(x.v) && std::isnan(last_kept.v)))) continue;
        if (x.t == last_kept.t) {
          return fmt::format("the series {} has two values at {:.3f} ({} and {})", format_labels(s.labels), x.t,
                             last_kept.v, x.v);
        }
        return fmt::format("the samples of {} go back in time ({:.3f} after {:.3f})", format_labels(s.labels), x.t,
                           last_kept.t);
      }
      s.samples[kept++] = x;
    }
    s.samples.resize(kept);
  }
  return std::nullopt;
}

using nlohmann::json;

// Reads a query, query_range, series or label values answer in one pass over the body with nlohmann's SAX
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
  enum class Mode { kQuery, kSeries, kValues };
  AnswerReader(Mode mode, std::string_view what) : mode_(mode), what_(what) {}

  // nlohmann::json SAX events.
  bool null() { return scalar(Scalar::kOther); }
  bool boolean(bool v) {
    boolean_ = v;
    return scalar(Scalar::kBoolean);
  }
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
      return Error{0,
                   fmt::format("{}: unexpected result type \"{}\" (vector or matrix expected)", what_, *result_type_)};
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

  Result<std::vector<std::string>> values_result(std::string_view body) {
    if (auto e = envelope_error(body)) return *e;
    if (!data_ok_) return fail("unexpected JSON: data is not a list");
    if (problem_) return fail(*problem_);
    return std::move(values_);
  }

 private:
  // What a container or a value is, from where it sits.
  enum class Role {
    kSkip,
    kTop,
    kData,
    kResults,
    kResult,
    kMetric,
    kInstant,
    kValues,
    kPair,
    kSeriesList,
    kValueList,
    kWarnings
  };
  enum class Scalar { kString, kNumber, kBoolean, kOther };
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
    if (!status_)
      return Error{0, fmt::format("{}: unexpected JSON: no \"status\" field: \"{}\"", what_, excerpt(body))};
    if (*status_ != "success") {
      return Error{0, fmt::format("{}: the API answered status \"{}\" ({}): {}", what_, *status_,
                                  error_type_.value_or("unknown"), error_.value_or("no error message"))};
    }
    // Thanos and Mimir answer from the stores that answered in time, and say so only here; a
    // VictoriaMetrics cluster sets isPartial. Either answer is incomplete, and so would the bill be.
    if (!warnings_.empty()) {
      return Error{0, fmt::format("{}: the API answered with a warning, so the answer may be incomplete: \"{}\"{}",
                                  what_, excerpt(warnings_.front(), 300),
                                  warnings_.size() > 1 ? fmt::format(" (and {} more)", warnings_.size() - 1) : "")};
    }
    if (partial_) {
      return Error{0, fmt::format("{}: the API marked its answer as partial (\"isPartial\": true: some storage "
                                  "nodes did not answer)",
                                  what_)};
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
      case Role::kWarnings:
        warnings_.emplace_back("(not a string)");
        return Role::kSkip;
      case Role::kTop:
        // A status that is no string. (emplace: "= \"?\"" gets a false -Wrestrict from GCC 12.)
        if (f.key == "status") status_.emplace(1, '?');
        if (f.key == "warnings" && array) return Role::kWarnings;
        if (f.key == "data") {
          data_ = true;
          if (mode_ == Mode::kQuery ? object : array) {
            data_ok_ = true;
            if (mode_ == Mode::kQuery) return Role::kData;
            return mode_ == Mode::kSeries ? Role::kSeriesList : Role::kValueList;
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
      case Role::kValueList:
        note("unexpected JSON: a label value is not a string");
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
  Sample& pair_target(Role role) {
    return role == Role::kInstant ? shapes_.back().instant : series_.back().samples.back();
  }

  // A string, number, boolean or null. Where only a container belongs, role_here() notes the
  // same problem it notes for a container out of place.
  bool scalar(Scalar kind) {
    if (stack_.empty()) return true;  // a bare value: no envelope
    Frame& f = stack_.back();
    const bool string = kind == Scalar::kString;
    if (f.role == Role::kTop && f.key == "status") {
      status_ = string ? *text_ : std::string("?");
    } else if (f.role == Role::kTop && f.key == "isPartial") {
      partial_ = kind == Scalar::kBoolean && boolean_;
    } else if (f.role == Role::kWarnings) {
      warnings_.push_back(string ? *text_ : std::string("(not a string)"));
    } else if (f.role == Role::kTop && (f.key == "errorType" || f.key == "error")) {
      if (string) (f.key == "error" ? error_ : error_type_) = *text_;
    } else if (f.role == Role::kData && f.key == "resultType") {
      result_type_ = string ? *text_ : std::string();
    } else if (f.role == Role::kValueList && string) {
      values_.push_back(std::move(*text_));
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
  bool boolean_ = false;

  bool syntax_error_ = false;
  std::optional<std::string> status_, error_type_, error_, result_type_;
  bool data_ = false, data_ok_ = false, result_list_ = false;
  std::vector<std::string> warnings_;
  bool partial_ = false;
  std::optional<std::string> problem_;

  std::vector<Series> series_;
  std::vector<Shape> shapes_;
  std::vector<Labels> label_sets_;
  std::vector<std::string> values_;
};

}  // namespace

std::string excerpt(std::string_view body, std::size_t max) {
  std::string out;
  for (char c : body.substr(0, max)) out += (static_cast<unsigned char>(c) < 0x20) ? ' ' : c;
  if (body.size() > max) out += "...";
  return out;
}

Result<std::vector<Series>> parse_query_response(std::string_view body, std::string_view what) {
  if (auto series = read_canonical_answer(body)) {
    if (auto bad = check_series(*series)) return Error{0, fmt::format("{}: {}", what, *bad)};
    return std::move(*series);
  }
  return parse_query_response_sax(body, what);
}

Result<std::vector<Series>> parse_query_response_sax(std::string_view body, std::string_view what) {
  AnswerReader reader(AnswerReader::Mode::kQuery, what);
  json::sax_parse(body.begin(), body.end(), &reader);
  return reader.series_result(body);
}

Result<std::vector<Labels>> parse_series_response(std::string_view body, std::string_view what) {
  AnswerReader reader(AnswerReader::Mode::kSeries, what);
  json::sax_parse(body.begin(), body.end(), &reader);
  return reader.labels_result(body);
}

Result<std::vector<std::string>> parse_label_values_response(std::string_view body, std::string_view what) {
  AnswerReader reader(AnswerReader::Mode::kValues, what);
  json::sax_parse(body.begin(), body.end(), &reader);
  return reader.values_result(body);
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

}  // namespace gpumeter::report
