#include "report/canonical_answer.h"

#include <charconv>
#include <cmath>
#include <system_error>

namespace gpumeter::report {
namespace {

// Reads the one shape a store writes a good answer in, and gives up (nullopt) at anything else,
// leaving the answer to the general reader: a string with an escape, a control character or a
// byte above ASCII, a member it does not know or in another order, a number JSON does not
// allow, a sample value that is no finite number. What it accepts, it reads as nlohmann-json's
// SAX reader does (the same from_chars on the same text), which the tests and the fuzz target
// check.
class CanonicalReader {
 public:
  explicit CanonicalReader(std::string_view body) : p_(body.data()), end_(body.data() + body.size()) {}

  std::optional<std::vector<Series>> read() {
    bool status = false, data = false;
    if (!eat('{')) return std::nullopt;
    do {
      auto key = string();
      if (!key || !eat(':')) return std::nullopt;
      if (*key == "status" && !status) {
        if (string() != std::optional<std::string_view>("success")) return std::nullopt;
        status = true;
      } else if (*key == "isPartial" && !literal("false")) {
        return std::nullopt;
      } else if (*key == "data" && !data) {
        if (!read_data()) return std::nullopt;
        data = true;
      } else if (*key != "isPartial") {
        return std::nullopt;
      }
    } while (eat(','));
    if (!eat('}') || !status || !data) return std::nullopt;
    skip_space();
    if (p_ != end_) return std::nullopt;
    return std::move(series_);
  }

 private:
  void skip_space() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  bool eat(char c) {
    skip_space();
    if (p_ == end_ || *p_ != c) return false;
    ++p_;
    return true;
  }
  bool literal(std::string_view word) {
    skip_space();
    if (std::string_view(p_, static_cast<std::size_t>(end_ - p_)).substr(0, word.size()) != word) return false;
    p_ += word.size();
    return true;
  }
  static bool digit(char c) { return c >= '0' && c <= '9'; }

  std::optional<std::string_view> string() {
    if (!eat('"')) return std::nullopt;
    const char* start = p_;
    for (; p_ < end_; ++p_) {
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') return std::string_view(start, static_cast<std::size_t>(p_++ - start));
      if (c == '\\' || c < 0x20 || c >= 0x80) return std::nullopt;
    }
    return std::nullopt;
  }

  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, as JSON has it.
  std::optional<double> number() {
    skip_space();
    const char* start = p_;
    bool integer = true;
    if (p_ < end_ && *p_ == '-') ++p_;
    if (p_ == end_ || !digit(*p_)) return std::nullopt;
    if (*p_++ != '0') {
      while (p_ < end_ && digit(*p_)) ++p_;
    }
    if (p_ < end_ && *p_ == '.') {
      integer = false;
      if (++p_ == end_ || !digit(*p_)) return std::nullopt;
      while (p_ < end_ && digit(*p_)) ++p_;
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      integer = false;
      if (++p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ == end_ || !digit(*p_)) return std::nullopt;
      while (p_ < end_ && digit(*p_)) ++p_;
    }
    double v = 0;
    auto [end, ec] = std::from_chars(start, p_, v);
    if (ec != std::errc() || end != p_) return std::nullopt;
    // nlohmann-json reads -0 as the integer 0.
    return integer && v == 0 ? 0.0 : v;
  }

  // [time, "value"]
  bool sample(Sample& out) {
    if (!eat('[')) return false;
    auto t = number();
    if (!t || !eat(',')) return false;
    auto text = string();
    if (!text || !eat(']')) return false;
    double v = 0;
    auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
    if (ec != std::errc() || end != text->data() + text->size() || !std::isfinite(v)) return false;
    out = Sample{*t, v};
    return true;
  }

  bool metric(Labels& labels) {
    if (!eat('{')) return false;
    if (eat('}')) return true;
    do {
      auto name = string();
      if (!name || !eat(':')) return false;
      auto value = string();
      if (!value) return false;
      if (*name != "__name__") labels.insert_or_assign(std::string(*name), std::string(*value));
    } while (eat(','));
    return eat('}');
  }

  // {"metric": {...}, "value": [t, "v"]} in a vector, {"metric": {...}, "values": [...]} in a matrix.
  bool result(Series& out) {
    if (!eat('{') || string() != std::optional<std::string_view>("metric") || !eat(':') || !metric(out.labels) ||
        !eat(',')) {
      return false;
    }
    if (string() != std::optional<std::string_view>(matrix_ ? "values" : "value") || !eat(':')) return false;
    if (!matrix_) {
      out.samples.emplace_back();
      return sample(out.samples.back()) && eat('}');
    }
    if (!eat('[')) return false;
    if (!eat(']')) {
      do {
        if (!sample(out.samples.emplace_back())) return false;
      } while (eat(','));
      if (!eat(']')) return false;
    }
    return eat('}');
  }

  // {"resultType": "vector" or "matrix", "result": [...]}, in that order.
  bool read_data() {
    if (!eat('{') || string() != std::optional<std::string_view>("resultType") || !eat(':')) return false;
    auto type = string();
    if (type != std::optional<std::string_view>("vector") && type != std::optional<std::string_view>("matrix")) {
      return false;
    }
    matrix_ = *type == "matrix";
    if (!eat(',') || string() != std::optional<std::string_view>("result") || !eat(':') || !eat('[')) return false;
    if (!eat(']')) {
      do {
        if (!result(series_.emplace_back())) return false;
      } while (eat(','));
      if (!eat(']')) return false;
    }
    return eat('}');
  }

  const char* p_;
  const char* end_;
  bool matrix_ = false;
  std::vector<Series> series_;
};

}  // namespace

std::optional<std::vector<Series>> read_canonical_answer(std::string_view body) { return CanonicalReader(body).read(); }

}  // namespace gpumeter::report
