#include "sim/yaml_reader.h"

#include <set>

#include <fmt/format.h>

#include "sim/units.h"

namespace gpumeter::sim {

namespace {

const std::string& scalar(const YAML::Node& node, std::string_view path, std::string_view expected) {
  if (!node.IsScalar()) {
    const char* got = node.IsMap() ? "a mapping" : node.IsSequence() ? "a list" : "nothing";
    fail_at(node, path, fmt::format("expected {}, got {}", expected, got));
  }
  return node.Scalar();
}

}  // namespace

void fail_at(const YAML::Node& node, std::string_view path, std::string_view message) {
  YAML::Mark mark = node.IsDefined() ? node.Mark() : YAML::Mark::null_mark();
  throw ScenarioError(mark, path.empty() ? std::string(message) : fmt::format("{}: {}", path, message));
}

MapReader::MapReader(const YAML::Node& node, std::string path,
                     std::initializer_list<std::string_view> allowed)
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

std::string read_string(const YAML::Node& node, std::string_view path) {
  return scalar(node, path, "a string");
}

std::uint64_t read_unsigned(const YAML::Node& node, std::string_view path, std::uint64_t min,
                            std::uint64_t max) {
  const std::string& s = scalar(node, path, "an integer");
  auto v = parse_unsigned(s);
  if (!v) fail_at(node, path, fmt::format("expected a non-negative integer, got '{}'", s));
  if (*v < min || *v > max)
    fail_at(node, path, fmt::format("must be between {} and {}, got {}", min, max, *v));
  return *v;
}

bool read_bool(const YAML::Node& node, std::string_view path) {
  const std::string& s = scalar(node, path, "true or false");
  if (s == "true") return true;
  if (s == "false") return false;
  fail_at(node, path, fmt::format("expected true or false, got '{}'", s));
}

double read_double(const YAML::Node& node, std::string_view path, double min, double max) {
  const std::string& s = scalar(node, path, "a number");
  auto v = parse_double(s);
  if (!v) fail_at(node, path, fmt::format("expected a number, got '{}'", s));
  if (*v < min || *v > max)
    fail_at(node, path, fmt::format("must be between {} and {}, got {}", min, max, s));
  return *v;
}

Micros read_duration(const YAML::Node& node, std::string_view path) {
  const std::string& s = scalar(node, path, "a duration");
  auto v = parse_duration(s);
  if (!v) {
    fail_at(
        node, path,
        fmt::format("expected a non-negative duration in whole microseconds such as 90, 1.5, 500ms, 2h or "
                    "1h30m, got '{}'",
                    s));
  }
  return *v;
}

std::uint64_t read_bytes(const YAML::Node& node, std::string_view path) {
  const std::string& s = scalar(node, path, "a byte size");
  auto v = parse_byte_size(s);
  if (!v)
    fail_at(node, path, fmt::format("expected a byte size such as 81559MiB, 80GiB or 1048576, got '{}'", s));
  return *v;
}

int read_ratio_percent(const YAML::Node& node, std::string_view path) {
  const std::string& s = scalar(node, path, "a utilization ratio");
  auto v = parse_ratio_percent(s);
  if (!v) {
    fail_at(node, path,
            fmt::format(
                "expected a ratio from 0 to 1 in steps of 0.01 (or a whole percentage such as 95%), got '{}'",
                s));
  }
  return *v;
}

std::int64_t read_milliwatts(const YAML::Node& node, std::string_view path) {
  const std::string& s = scalar(node, path, "watts");
  auto v = scale_decimal(s, 1000);
  if (!v || *v > 100'000'000) {
    fail_at(node, path, fmt::format("expected watts from 0 to 100000 with at most 3 decimals, got '{}'", s));
  }
  return static_cast<std::int64_t>(*v);
}

}  // namespace gpumeter::sim
