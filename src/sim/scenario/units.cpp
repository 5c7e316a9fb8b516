#include "sim/scenario/units.h"

#include "util/yaml_reader.h"

namespace gpumeter::sim {

// The generic parsers live in util (the agent's config file reads the same formats); the
// scenario keeps its names for them.
std::optional<std::uint64_t> scale_decimal(std::string_view text, std::uint64_t unit) {
  return units::scale_decimal(text, unit);
}

std::optional<std::uint64_t> parse_byte_size(std::string_view text) { return units::parse_byte_size(text); }

std::optional<Micros> parse_duration(std::string_view text) {
  auto v = units::parse_duration_us(text);
  if (!v || *v > kForever / 2) return std::nullopt;
  return *v;
}

std::optional<int> parse_ratio_percent(std::string_view text) {
  auto trim = [](std::string_view t) {
    while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
    while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
    return t;
  };
  text = trim(text);
  std::optional<std::uint64_t> percent;
  if (!text.empty() && text.back() == '%') {
    percent = scale_decimal(trim(text.substr(0, text.size() - 1)), 1);
  } else {
    percent = scale_decimal(text, 100);
  }
  if (!percent || *percent > 100) return std::nullopt;
  return static_cast<int>(*percent);
}

std::optional<double> parse_double(std::string_view text) { return units::parse_double(text); }

std::optional<std::uint64_t> parse_unsigned(std::string_view text) { return units::parse_unsigned(text); }

}  // namespace gpumeter::sim
