#include "sim/scenario/yaml_reader.h"

#include <fmt/format.h>

#include <type_traits>

#include "sim/scenario/units.h"

namespace gpumeter::sim {

static_assert(std::is_same_v<Micros, decltype(gpumeter::read_duration(YAML::Node(), ""))>);

int read_ratio_percent(const YAML::Node& node, std::string_view path) {
  const std::string& s = read_scalar(node, path, "a utilization ratio");
  auto v = parse_ratio_percent(s);
  if (!v) {
    fail_at(
        node, path,
        fmt::format("expected a ratio from 0 to 1 in steps of 0.01 (or a whole percentage such as 95%), got '{}'", s));
  }
  return *v;
}

std::int64_t read_milliwatts(const YAML::Node& node, std::string_view path) {
  const std::string& s = read_scalar(node, path, "watts");
  auto v = scale_decimal(s, 1000);
  if (!v || *v > 100'000'000) {
    fail_at(node, path, fmt::format("expected watts from 0 to 100000 with at most 3 decimals, got '{}'", s));
  }
  return static_cast<std::int64_t>(*v);
}

}  // namespace gpumeter::sim
