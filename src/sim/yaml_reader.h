#pragma once
// Located reading of YAML nodes for the scenario parser. Every failure throws ScenarioError
// carrying the node's line and column and the dotted path of the field, so the one message a
// user sees reads "file:line:col: jobs[2].utilization.high: ...". The exception never leaves
// the parser: parse_scenario() turns it into an Error value.

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <yaml-cpp/yaml.h>

#include "sim/time.h"

namespace gpumeter::sim {

class ScenarioError : public std::runtime_error {
 public:
  ScenarioError(const YAML::Mark& mark, const std::string& message)
      : std::runtime_error(message), line(mark.line), column(mark.column) {}
  int line;    // 0-based, -1 when unknown
  int column;  // 0-based
};

[[noreturn]] void fail_at(const YAML::Node& node, std::string_view path, std::string_view message);

// A mapping whose keys must all be among `allowed`; duplicate keys are rejected too.
class MapReader {
 public:
  MapReader(const YAML::Node& node, std::string path, std::initializer_list<std::string_view> allowed);

  bool has(std::string_view key) const;
  YAML::Node get(std::string_view key) const;      // an undefined node when absent
  YAML::Node require(std::string_view key) const;  // fails naming the key when absent
  std::string path(std::string_view key) const;
  const YAML::Node& node() const { return node_; }
  [[noreturn]] void fail(std::string_view message) const { fail_at(node_, path_, message); }

 private:
  YAML::Node node_;
  std::string path_;
};

std::string read_string(const YAML::Node& node, std::string_view path);
std::uint64_t read_unsigned(const YAML::Node& node, std::string_view path, std::uint64_t min,
                            std::uint64_t max);
bool read_bool(const YAML::Node& node, std::string_view path);
double read_double(const YAML::Node& node, std::string_view path, double min, double max);
Micros read_duration(const YAML::Node& node, std::string_view path);
std::uint64_t read_bytes(const YAML::Node& node, std::string_view path);
int read_ratio_percent(const YAML::Node& node, std::string_view path);
std::int64_t read_milliwatts(const YAML::Node& node, std::string_view path);  // written in watts

}  // namespace gpumeter::sim
