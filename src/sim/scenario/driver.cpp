#include "sim/scenario/driver.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace gpumeter::sim {

std::optional<unsigned> driver_major(std::string_view version) {
  unsigned major = 0;
  std::size_t i = 0;
  for (; i < version.size() && i < 6 && std::isdigit(static_cast<unsigned char>(version[i])); ++i)
    major = major * 10 + static_cast<unsigned>(version[i] - '0');
  if (i == 0 || (i < version.size() && version[i] != '.')) return std::nullopt;
  return major;
}

namespace {

std::vector<std::string> tokens_of(std::string_view name) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : name) {
    if (c == ' ' || c == '-' || c == '_' || c == '/') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

bool starts_with(const std::string& s, std::string_view p) { return s.rfind(p, 0) == 0; }

bool all_digits(std::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

std::optional<std::string> architecture_of_token(const std::string& t, const std::string& previous) {
  if (t == "A100" || t == "A800" || t == "A30") return "ga100";
  if (t == "H100" || t == "H200" || t == "H800" || t == "GH200" || t == "H20") return "hopper";
  if (t == "B100" || t == "B200" || t == "GB200" || t == "B300" || t == "GB300") return "blackwell";
  if (t == "L4" || starts_with(t, "L40") || t == "L20" || t == "ADA") return "ada";
  if (t == "A10" || t == "A10G" || t == "A40" || t == "A16" || t == "A2") return "ampere";
  if (t.size() == 5 && t[0] == 'A' && all_digits(t.substr(1)) && t.substr(2) == "000") return "ampere";  // RTX A6000
  if (t == "V100") return "volta";
  if (t == "T4") return "turing";
  if (previous == "RTX" && t.size() == 4 && all_digits(t)) {
    if (starts_with(t, "20")) return "turing";
    if (starts_with(t, "30")) return "ampere";
    if (starts_with(t, "40")) return "ada";
    if (starts_with(t, "50")) return "blackwell";
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> architecture_from_name(std::string_view name) {
  const auto tokens = tokens_of(name);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (auto a = architecture_of_token(tokens[i], i > 0 ? tokens[i - 1] : std::string())) return a;
  }
  return std::nullopt;
}

bool power_usage_is_averaged(std::string_view architecture) {
  return architecture == "ampere" || architecture == "ada" || architecture == "hopper" || architecture == "blackwell";
}

}  // namespace gpumeter::sim
