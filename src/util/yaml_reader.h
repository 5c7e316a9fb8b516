#pragma once
// Located reading of YAML nodes, shared by the parsers of the agent's config file and the
// simulator's scenario files. Every failure throws YamlError carrying the node's line and
// column and the dotted path of the field, so the one message a user sees reads
// "file:line:col: ledger.checkpoint_interval: ...". The exception never leaves a parser:
// each parser catches it and returns an Error value (see to_error()).

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace gpumeter {

class YamlError : public std::runtime_error {
 public:
  YamlError(const YAML::Mark& mark, const std::string& message)
      : std::runtime_error(message), line(mark.line), column(mark.column) {}
  int line;    // 0-based, -1 when unknown
  int column;  // 0-based
};

[[noreturn]] void fail_at(const YAML::Node& node, std::string_view path, std::string_view message);

// "source:line:col: message" (1-based), or "source: message" when the line is unknown.
std::string located_message(std::string_view source, int line, int column, std::string_view message);
Error to_error(std::string_view source, const YamlError& e);
Error to_error(std::string_view source, const YAML::Exception& e);  // yaml-cpp's syntax errors

// Every document of `text`, as YAML::LoadAll gives them, but failing (YAML::ParserException,
// located) where yaml-cpp would loop for ever: it does not consume a stray ',' outside a flow
// collection, so YAML::LoadAll returns empty documents at the same place without end.
std::vector<YAML::Node> load_documents(std::string_view text);

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

// One entry of a mapping whose keys are data (model names, lookup tables), not field names.
struct MapEntry {
  std::string key;
  YAML::Node key_node;
  YAML::Node value;
  std::string path;  // "parent.key", or parent["key"] when the key is not a plain identifier
};

// The entries of a mapping with free-form keys, in file order. Keys must be scalars and
// unique. A null node (an empty section such as "idle_power_watts:") gives no entries.
std::vector<MapEntry> read_entries(const YAML::Node& node, std::string_view path);

// "path[i]"
std::string indexed(std::string_view path, std::size_t i);

// The scalar's text; fails naming `expected` ("a string", "a duration") for a mapping, a list
// or nothing.
const std::string& read_scalar(const YAML::Node& node, std::string_view path, std::string_view expected);

std::string read_string(const YAML::Node& node, std::string_view path);
// A list of strings; a null node (an empty key) is an empty list, a lone scalar is an error.
std::vector<std::string> read_string_list(const YAML::Node& node, std::string_view path);
std::uint64_t read_unsigned(const YAML::Node& node, std::string_view path, std::uint64_t min, std::uint64_t max);
bool read_bool(const YAML::Node& node, std::string_view path);
double read_double(const YAML::Node& node, std::string_view path, double min, double max);
std::int64_t read_duration(const YAML::Node& node, std::string_view path);  // whole microseconds
std::uint64_t read_bytes(const YAML::Node& node, std::string_view path);

// The exact text-to-quantity conversions behind the read_* functions. Decimals are scaled
// with integer arithmetic, so "0.2" seconds is exactly 200000 us and never 199999. They
// behave as the simulator's src/sim/units.h functions of the same names (a test checks the
// two agree); they live here too because gpumeter_util must not depend on the simulator.
namespace units {

inline constexpr std::int64_t kMicrosPerSecond = 1'000'000;

// A plain non-negative decimal ("12", "1.25") times `unit`, if the product is whole.
std::optional<std::uint64_t> scale_decimal(std::string_view text, std::uint64_t unit);
// An integer or a number with a unit: B, kB/KB, MB, GB, TB (powers of 1000), KiB, MiB, GiB, TiB.
std::optional<std::uint64_t> parse_byte_size(std::string_view text);
// Seconds as a plain number, or number+unit terms: us, ms, s, m, h, d ("1h30m"); microseconds.
std::optional<std::int64_t> parse_duration_us(std::string_view text);
// A finite floating-point number in the C locale.
std::optional<double> parse_double(std::string_view text);
// An unsigned integer, decimal or 0x-prefixed hexadecimal.
std::optional<std::uint64_t> parse_unsigned(std::string_view text);

}  // namespace units

}  // namespace gpumeter
