#include "util/yaml_reader.h"

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>

#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>
#include <utility>

namespace gpumeter {

void fail_at(const YAML::Node& node, std::string_view path, std::string_view message) {
  YAML::Mark mark = node.IsDefined() ? node.Mark() : YAML::Mark::null_mark();
  throw YamlError(mark, path.empty() ? std::string(message) : fmt::format("{}: {}", path, message));
}

std::string located_message(std::string_view source, int line, int column, std::string_view message) {
  if (line < 0) return fmt::format("{}: {}", source, message);
  return fmt::format("{}:{}:{}: {}", source, line + 1, column + 1, message);
}

Error to_error(std::string_view source, const YamlError& e) {
  return Error{0, located_message(source, e.line, e.column, e.what())};
}

Error to_error(std::string_view source, const YAML::Exception& e) {
  return Error{0, located_message(source, e.mark.line, e.mark.column, e.msg)};
}

MapReader::MapReader(const YAML::Node& node, std::string path, std::initializer_list<std::string_view> allowed)
    : node_(node), path_(std::move(path)) {
  if (!node.IsMap()) fail_at(node, path_, "expected a mapping");
  std::set<std::string> seen;
  for (const auto& kv : node) {
    const std::string& key = kv.first.Scalar();
    bool known = false;
    for (std::string_view a : allowed) known = known || a == key;
    if (!known) {
      std::string names;
      for (std::string_view a : allowed) names += fmt::format("{}{}", names.empty() ? "" : ", ", a);
      fail_at(kv.first, path_, fmt::format("unknown key '{}' (expected one of: {})", key, names));
    }
    if (!seen.insert(key).second) fail_at(kv.first, path_, fmt::format("duplicate key '{}'", key));
  }
}

// Lookups go through a const node: yaml-cpp's non-const operator[] may add the key.
bool MapReader::has(std::string_view key) const { return get(key).IsDefined(); }

YAML::Node MapReader::get(std::string_view key) const {
  const YAML::Node& n = node_;
  return n[std::string(key)];
}

YAML::Node MapReader::require(std::string_view key) const {
  YAML::Node v = get(key);
  if (!v.IsDefined()) fail_at(node_, path_, fmt::format("missing required key '{}'", key));
  return v;
}

std::string MapReader::path(std::string_view key) const {
  return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
}

namespace {

bool plain_identifier(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::vector<MapEntry> read_entries(const YAML::Node& node, std::string_view path) {
  std::vector<MapEntry> entries;
  if (node.IsNull()) return entries;
  if (!node.IsMap()) fail_at(node, path, "expected a mapping");
  std::set<std::string> seen;
  for (const auto& kv : node) {
    if (!kv.first.IsScalar()) fail_at(kv.first, path, "keys must be strings");
    const std::string& key = kv.first.Scalar();
    if (!seen.insert(key).second) fail_at(kv.first, path, fmt::format("duplicate key '{}'", key));
    std::string child;
    if (plain_identifier(key)) {
      child = path.empty() ? key : fmt::format("{}.{}", path, key);
    } else {
      child = fmt::format("{}[\"{}\"]", path, key);
    }
    entries.push_back(MapEntry{key, kv.first, kv.second, std::move(child)});
  }
  return entries;
}

namespace {

// Where the latest document started, and whether it started where the one before it did: the
// parser made no progress and never will.
class DocumentStarts : public YAML::EventHandler {
 public:
  bool stuck = false;
  YAML::Mark at = YAML::Mark::null_mark();

  void OnDocumentStart(const YAML::Mark& mark) override {
    stuck = seen_ && mark.pos == at.pos;
    seen_ = true;
    at = mark;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

 private:
  bool seen_ = false;
};

}  // namespace

std::vector<YAML::Node> load_documents(std::string_view text) {
  const std::string copy(text);
  std::istringstream in(copy);
  YAML::Parser parser(in);
  DocumentStarts starts;
  while (parser.HandleNextDocument(starts)) {
    if (starts.stuck) {
      const std::size_t pos = static_cast<std::size_t>(starts.at.pos);
      const char c = pos < copy.size() ? copy[pos] : ' ';
      throw YAML::ParserException(
          starts.at, c > ' ' && c < 0x7f ? fmt::format("unexpected '{}'", c) : std::string("unexpected character"));
    }
  }
  // The same parser on the same text: it ends now.
  return YAML::LoadAll(copy);
}

std::string indexed(std::string_view path, std::size_t i) { return fmt::format("{}[{}]", path, i); }

const std::string& read_scalar(const YAML::Node& node, std::string_view path, std::string_view expected) {
  if (!node.IsScalar()) {
    const char* got = node.IsMap() ? "a mapping" : node.IsSequence() ? "a list" : "nothing";
    fail_at(node, path, fmt::format("expected {}, got {}", expected, got));
  }
  return node.Scalar();
}

std::string read_string(const YAML::Node& node, std::string_view path) { return read_scalar(node, path, "a string"); }

std::vector<std::string> read_string_list(const YAML::Node& node, std::string_view path) {
  std::vector<std::string> out;
  if (node.IsNull()) return out;
  if (!node.IsSequence()) {
    const char* got = node.IsMap() ? "a mapping" : "a single value";
    fail_at(node, path, fmt::format("expected a list such as [a, b], got {}", got));
  }
  for (std::size_t i = 0; i < node.size(); ++i) out.push_back(read_string(node[i], indexed(path, i)));
  return out;
}

std::uint64_t read_unsigned(const YAML::Node& node, std::string_view path, std::uint64_t min, std::uint64_t max) {
  const std::string& s = read_scalar(node, path, "an integer");
  auto v = units::parse_unsigned(s);
  if (!v) fail_at(node, path, fmt::format("expected a non-negative integer, got '{}'", s));
  if (*v < min || *v > max) fail_at(node, path, fmt::format("must be between {} and {}, got {}", min, max, *v));
  return *v;
}

bool read_bool(const YAML::Node& node, std::string_view path) {
  const std::string& s = read_scalar(node, path, "true or false");
  if (s == "true") return true;
  if (s == "false") return false;
  fail_at(node, path, fmt::format("expected true or false, got '{}'", s));
}

double read_double(const YAML::Node& node, std::string_view path, double min, double max) {
  const std::string& s = read_scalar(node, path, "a number");
  auto v = units::parse_double(s);
  if (!v) fail_at(node, path, fmt::format("expected a number, got '{}'", s));
  if (*v < min || *v > max) fail_at(node, path, fmt::format("must be between {} and {}, got {}", min, max, s));
  return *v;
}

std::int64_t read_duration(const YAML::Node& node, std::string_view path) {
  const std::string& s = read_scalar(node, path, "a duration");
  auto v = units::parse_duration_us(s);
  if (!v) {
    fail_at(node, path,
            fmt::format("expected a non-negative duration in whole microseconds such as 90, 1.5, 500ms, 2h or "
                        "1h30m, got '{}'",
                        s));
  }
  return *v;
}

std::uint64_t read_bytes(const YAML::Node& node, std::string_view path) {
  const std::string& s = read_scalar(node, path, "a byte size");
  auto v = units::parse_byte_size(s);
  if (!v) fail_at(node, path, fmt::format("expected a byte size such as 81559MiB, 80GiB or 1048576, got '{}'", s));
  return *v;
}

namespace units {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Splits "12.5GiB" into the number "12.5" and the suffix "GiB".
std::pair<std::string_view, std::string_view> split_number(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size() && (is_digit(text[i]) || text[i] == '.')) ++i;
  return {text.substr(0, i), text.substr(i)};
}

__extension__ using Uint128 = unsigned __int128;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

constexpr std::int64_t kMaxDurationUs = std::numeric_limits<std::int64_t>::max() / 2;

}  // namespace

std::optional<std::uint64_t> scale_decimal(std::string_view text, std::uint64_t unit) {
  std::size_t dot = text.find('.');
  std::string_view whole = text.substr(0, dot);
  std::string_view frac = dot == std::string_view::npos ? std::string_view{} : text.substr(dot + 1);
  if (whole.empty() && frac.empty()) return std::nullopt;
  if (dot != std::string_view::npos && frac.empty()) return std::nullopt;
  std::uint64_t mantissa = 0;
  for (std::string_view part : {whole, frac}) {
    for (char c : part) {
      if (!is_digit(c)) return std::nullopt;
      if (__builtin_mul_overflow(mantissa, 10U, &mantissa)) return std::nullopt;
      if (__builtin_add_overflow(mantissa, static_cast<unsigned>(c - '0'), &mantissa)) return std::nullopt;
    }
  }
  // value = mantissa * unit / 10^frac_digits, required to be whole.
  std::uint64_t divisor = 1;
  for (std::size_t i = 0; i < frac.size(); ++i) {
    if (__builtin_mul_overflow(divisor, 10U, &divisor)) return std::nullopt;
  }
  Uint128 product = static_cast<Uint128>(mantissa) * unit;
  if (product % divisor != 0) return std::nullopt;
  Uint128 value = product / divisor;
  if (value > std::numeric_limits<std::uint64_t>::max()) return std::nullopt;
  return static_cast<std::uint64_t>(value);
}

std::optional<std::uint64_t> parse_byte_size(std::string_view text) {
  static constexpr std::array<std::pair<std::string_view, std::uint64_t>, 11> kUnits = {{
      {"", 1},
      {"B", 1},
      {"kB", 1000ULL},
      {"KB", 1000ULL},
      {"MB", 1000ULL * 1000},
      {"GB", 1000ULL * 1000 * 1000},
      {"TB", 1000ULL * 1000 * 1000 * 1000},
      {"KiB", 1ULL << 10},
      {"MiB", 1ULL << 20},
      {"GiB", 1ULL << 30},
      {"TiB", 1ULL << 40},
  }};
  auto [number, suffix] = split_number(trim(text));
  suffix = trim(suffix);
  for (const auto& [name, factor] : kUnits) {
    if (suffix == name) return scale_decimal(number, factor);
  }
  return std::nullopt;
}

std::optional<std::int64_t> parse_duration_us(std::string_view text) {
  text = trim(text);
  if (text.empty()) return std::nullopt;
  auto [first_number, first_suffix] = split_number(text);
  if (first_suffix.empty()) {
    auto v = scale_decimal(first_number, kMicrosPerSecond);
    if (!v || *v > static_cast<std::uint64_t>(kMaxDurationUs)) return std::nullopt;
    return static_cast<std::int64_t>(*v);
  }
  std::uint64_t total = 0;
  while (!text.empty()) {
    auto [number, rest] = split_number(text);
    std::size_t unit_len = 0;
    while (unit_len < rest.size() && !is_digit(rest[unit_len]) && rest[unit_len] != '.') ++unit_len;
    std::string_view unit = rest.substr(0, unit_len);
    static constexpr std::array<std::pair<std::string_view, std::uint64_t>, 6> kUnits = {{
        {"us", 1},
        {"ms", 1000},
        {"s", kMicrosPerSecond},
        {"m", 60 * kMicrosPerSecond},
        {"h", 3600 * kMicrosPerSecond},
        {"d", 86400 * kMicrosPerSecond},
    }};
    std::uint64_t factor = 0;
    for (const auto& [name, f] : kUnits) {
      if (unit == name) factor = f;
    }
    if (factor == 0) return std::nullopt;
    auto v = scale_decimal(number, factor);
    if (!v || __builtin_add_overflow(total, *v, &total)) return std::nullopt;
    text = rest.substr(unit_len);
  }
  if (total > static_cast<std::uint64_t>(kMaxDurationUs)) return std::nullopt;
  return static_cast<std::int64_t>(total);
}

std::optional<double> parse_double(std::string_view text) {
  text = trim(text);
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  double v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || ptr != text.data() + text.size() || text.empty() || !std::isfinite(v)) {
    return std::nullopt;
  }
  return v;
}

std::optional<std::uint64_t> parse_unsigned(std::string_view text) {
  text = trim(text);
  int base = 10;
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    base = 16;
    text.remove_prefix(2);
  }
  std::uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v, base);
  if (ec != std::errc{} || ptr != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

}  // namespace units

}  // namespace gpumeter
